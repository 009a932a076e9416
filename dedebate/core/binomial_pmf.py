"""The Binomial pmf in Loader's float32-stable form (as R's ``dbinom``), and its lower tail.

Stirling's error :func:`stirlerr`, the deviance ``h`` and their polynomial forms near the mean
(the pieces of the BTRS log-ratio, :mod:`dedebate.core.binomial_btrs`), :func:`log_pmf` and the
tail sum :func:`binom_lower_tail` (and its inversion :func:`binom_lower_tail_sample`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

# stirlerr(k) = log k! - [(k + 1/2) log k - k + log sqrt(2 pi)], k = 0..15 (float64 values; k = 0
# is unused).
_STIRLERR = np.array(
    [
        0.0,
        0.08106146679532733,
        0.041340695955409235,
        0.02767792568499816,
        0.020790672103765395,
        0.016644691189821703,
        0.013876128823070655,
        0.011896709945891981,
        0.010411265261975,
        0.009255462182710783,
        0.008330563433360805,
        0.00757367548795207,
        0.006942840107208692,
        0.00640899418800478,
        0.005951370112766252,
        0.005554733551965452,
    ],
    np.float32,
)


def _stirlerr_series(x: jax.Array) -> jax.Array:
    """stirlerr(x) for x >= 15 (asymptotic series, error < 1e-11)."""
    return _stirlerr_series_inv(1.0 / x)


def _stirlerr_series_inv(r: jax.Array) -> jax.Array:
    """:func:`_stirlerr_series` of ``x = 1 / r``."""
    r2 = r * r
    return r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 / 1260.0))


def stirlerr(x: jax.Array) -> jax.Array:
    """Stirling's error ``log x! - [(x + 1/2) log x - x + log sqrt(2 pi)]`` for integers x >= 1.

    Float32, the shape of ``x``: a table below 15, the asymptotic series above.
    """
    table = jnp.asarray(_STIRLERR)[jnp.clip(x, 0, 15).astype(jnp.int32)]
    return jnp.where(x < 15.0, table, _stirlerr_series(jnp.maximum(x, 15.0)))


def _h_poly(d: jax.Array) -> jax.Array:
    """``h(d) = (1 + d) log(1 + d) - d`` for |d| < 0.25, by its Taylor series."""
    # h(d) = sum_{j>=2} (-d)^j / (j (j-1)), to d^13: relative error < 1e-8.
    r: float | jax.Array = 1 / (13 * 12)
    for j in range(12, 1, -1):
        r = 1 / (j * (j - 1)) - d * r
    return d * d * r


def _h(d: jax.Array) -> jax.Array:
    """``h(d) = (1 + d) log(1 + d) - d`` for d >= -1 (so ``bd0(x, M) = M h((x - M) / M)``)."""
    dd = jnp.maximum(d, -1.0)
    direct = (1.0 + dd) * jnp.log1p(jnp.maximum(dd, -1.0 + 1e-7)) - dd
    return jnp.where(jnp.abs(d) < 0.1, _h_poly(d), direct)


def _log1p_poly(x: jax.Array) -> jax.Array:
    """``log(1 + x)`` for |x| < 0.25 (Taylor to x^14, error < 1e-9)."""
    r: float | jax.Array = 1 / 14
    for j in range(13, 0, -1):
        r = 1 / j - x * r
    return x * r


def log_pmf(k: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
    """``log P[X = k]`` for X ~ Binomial(n, p), ``0 <= k <= n``, ``0 < p < 1``, in Loader's form.

    ``stirlerr`` and the deviance, as R's ``dbinom``: float32 keeps ~1e-5 absolute accuracy where
    the textbook ``lgamma`` form loses everything for large n.
    """
    kf = jnp.asarray(k, jnp.float32)
    nf = jnp.asarray(n, jnp.float32)
    p = jnp.asarray(p, jnp.float32)
    q = 1.0 - p
    kk = jnp.clip(kf, 1.0, jnp.maximum(nf - 1.0, 1.0))
    M, Q = nf * p, nf * q
    inner = (
        stirlerr(nf)
        - stirlerr(kk)
        - stirlerr(nf - kk)
        - M * _h((kk - M) / M)
        - Q * _h((nf - kk - Q) / Q)
        + 0.5 * jnp.log(nf / (2.0 * math.pi * kk * (nf - kk)))
    )
    return jnp.where(kf <= 0, nf * jnp.log1p(-p), jnp.where(kf >= nf, nf * jnp.log(p), inner))


def _lower_tail_walk(k, n, p, target, active):
    """``(j, P[j <= X <= k])``: the pmf summed from ``k`` down until it reaches ``target``."""
    # By the ratio f(j-1)/f(j) = j q / ((n-j+1) p), until the sum reaches target or a term falls
    # below 2^-30 of the sum; j is the last count added. No work where active is false or k < 0
    # (then (k, 0)).
    k = jnp.asarray(k, jnp.int32)
    n = jnp.asarray(n, jnp.int32)
    p = jnp.asarray(p, jnp.float32)
    go = jnp.asarray(active) & (k >= 0)
    f0 = jnp.where(go, jnp.exp(log_pmf(jnp.maximum(k, 0), n, p)), 0.0)
    r = (1.0 - p) / p

    def cond(c):
        j, term, acc = c
        return go & (j > 0) & (acc < target) & (term > acc * 2.0**-30)

    def body(c):
        j, term, acc = c
        term = term * j.astype(jnp.float32) / (n - j + 1).astype(jnp.float32) * r
        return j - 1, term, acc + term

    j, _, acc = jax.lax.while_loop(cond, body, (k, f0, f0))
    return j, acc


def binom_lower_tail(
    k: jax.Array, n: jax.Array, p: jax.Array, active: jax.Array | bool = True
) -> jax.Array:
    """``P[X <= k]`` for X ~ Binomial(n, p), ``0 < p < 1``, with ``k`` below the mean.

    Sums the pmf from ``k`` downwards until a term falls below 2^-30 of the sum (the terms decrease
    geometrically below the mean, so the rest is smaller still). Float32, relative accuracy ~1e-4.
    Above the mean the sum is slow, not wrong. 0 for ``k < 0`` and where ``active`` is false (no
    work there).
    """
    return _lower_tail_walk(k, n, p, jnp.inf, active)[1]


def binom_lower_tail_sample(
    k: jax.Array, n: jax.Array, p: jax.Array, target: jax.Array, active: jax.Array | bool = True
) -> jax.Array:
    """Inversion inside the lower tail: the largest ``j <= k`` with ``P[j <= X <= k] >= target``.

    The same walk, in the same order, as :func:`binom_lower_tail`, so with ``target = U *
    binom_lower_tail(k, n, p)`` (U uniform on [0, 1)) the result is distributed as ``X | X <= k``.
    Returns ``k`` where ``active`` is false.
    """
    return _lower_tail_walk(k, n, p, target, active)[0]
