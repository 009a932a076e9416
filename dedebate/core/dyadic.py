"""Exact real-number arithmetic on float32 values, in integer operations only (spec DED 5.5).

A finite float32 is a dyadic rational ``m 2^e``. XLA may compile one float expression differently
in different programs (a division becomes a product by the reciprocal; a product and a subtraction
fuse into one FMA), so a float test that meets a real-number tie can be decided differently by
two programs. Integer operations are never rewritten: the functions here read the float32 bit
patterns and work on 64-bit numbers held as two uint32 words, so every program agrees.

* :func:`checker_bounds`: the counts k with ``|p - k/n| < tau``, exactly, as open bounds;
* :func:`ratio_f32`: ``k / n`` correctly rounded to float32, assembled by bitcast;
* :func:`computed_once`: keeps XLA from copying that code into every fusion that reads it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

_U = jnp.uint32


def _u(x):
    """``x`` as uint32 (a negative int32 wraps, to a shift of 32 or more)."""
    return jnp.asarray(x).astype(_U)


def _split(bits):
    """(uint32 mantissa < 2^24, int32 exponent >= -149 of its last bit) of float32 bits."""
    ef = bits >> 23
    m = (bits & _U(0x7FFFFF)) | jnp.where(ef == 0, _U(0), _U(0x800000))
    return m, jnp.maximum(ef, _U(1)).astype(jnp.int32) - 150


def _mul(n, m):
    """``n * m`` as (hi, lo) words, for uint32 n < 2^31 and m < 2^24."""
    n0, n1, m0, m1 = n & 0xFFFF, n >> 16, m & 0xFFFF, m >> 16
    mid = n0 * m1 + n1 * m0  # < 2^31
    p00 = n0 * m0
    lo = p00 + (mid << 16)
    return n1 * m1 + (mid >> 16) + (lo < p00).astype(_U), lo


def _shr(h, lo, s):
    """``(h, lo) >> s`` as (hi, lo) words and whether a one was shifted out, ``0 <= s <= 64``."""
    # XLA's shifts by 32 or more give 0; 32 - s wraps to such a shift.
    q = (lo >> s) | (h << (32 - s)) | (h >> (s - 32))
    out = jnp.where(s >= 32, lo != 0, (lo << (32 - s)) != 0) | ((h << (64 - s)) != 0)
    return h >> s, q, out


def _floor_part(vh, vl, e, cap):
    """``min(floor(V / 2^e), cap)`` and whether ``V / 2^e`` is an integer (64-bit V, ``e >= 0``)."""
    qh, q, frac = _shr(vh, vl, _u(jnp.minimum(e, 64)))
    return jnp.where(qh != 0, cap, jnp.minimum(q, cap)), ~frac


def checker_bounds(p: jax.Array, n: jax.Array, tau: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The counts k with ``|p - k/n| < tau`` in real numbers, as open int32 bounds ``lo < k < hi``.

    ``|p - k/n| < tau`` iff ``floor(n (p - tau)) < k < ceil(n (p + tau))``, p and tau the exact
    dyadic rationals their float32 values are. Both bounds come from ``n (a +- b)`` for ``a =
    max(|p|, tau) = m_a 2^g_a >= b = min(|p|, tau) = m_b 2^g_b`` (``m < 2^24``), counted in units of
    ``2^g_a``: ``A = n m_a`` exactly and ``B = floor(n m_b 2^(g_b - g_a))`` with a sticky bit for
    the ones shifted out, both below 2^55, so ``A +- B`` fits 64 bits (two uint32 words) and one
    shift by ``-g_a`` gives the floor and whether it is exact. ``a >= 2^24`` (``g_a > 0``)
    saturates, except ``a - b``, which is then 0, 1 or at least 2. A claim that is not finite, or
    ``tau <= 0`` or NaN, accepts no count; ``tau = +inf`` accepts every count for a finite claim.
    ``0 <= n < 2^30`` (0 is treated as 1); ``lo, hi`` lie in ``[-1, n + 1]``.
    """
    p = jnp.asarray(p, jnp.float32)
    tau = jnp.asarray(tau, jnp.float32)
    p, tau = jnp.broadcast_arrays(p, tau)
    nn = jnp.broadcast_to(jnp.maximum(jnp.asarray(n, jnp.int32), 1), p.shape).astype(_U)
    n1 = nn + _U(1)
    bp = lax.bitcast_convert_type(p, _U)
    bt = lax.bitcast_convert_type(tau, _U)
    ap, at = bp & _U(0x7FFFFFFF), bt & _U(0x7FFFFFFF)
    neg = bp >= _U(0x80000000)
    ma, ga = _split(jnp.maximum(ap, at))  # a = max(|p|, tau) = ma 2^ga >= b = mb 2^gb
    mb, gb = _split(jnp.minimum(ap, at))
    # n (a +- b) = (A +- B +- theta) 2^ga: A = n ma, B = floor(n mb 2^(gb - ga)), theta in [0, 1)
    # the bits of n mb shifted out (> 0 iff ``cut``); A, B < 2^55
    ah, al = _mul(nn, ma)
    bh, bl = _mul(nn, mb)
    b_hi, b_lo, cut = _shr(bh, bl, _u(jnp.minimum(ga - gb, 64)))
    # plus: floor((A + B + theta) / 2^e) = floor((A + B) / 2^e)
    sl = al + b_lo
    sh = ah + b_hi + (sl < al).astype(_U)
    # minus: floor((A - B - theta) / 2^e): one less if (A - B) / 2^e is an integer and theta > 0
    dl = al - b_lo
    dh = ah - b_hi - (al < b_lo).astype(_U)
    e = -ga
    f_add, i_add = _floor_part(sh, sl, e, n1)
    f_sub, i_sub = _floor_part(dh, dl, e, n1 + _U(1))
    f_sub = f_sub - (i_sub & cut).astype(_U)
    i_add, i_sub = i_add & ~cut, i_sub & ~cut
    # a >= 2^24 (e < 0): n (a + b) > n + 1; a - b = w 2^gb, w = ma 2^(ga - gb) - mb: 0, 1, or >= 2
    w = jnp.where(ga - gb <= 1, (ma << _u(ga - gb)) - mb, _U(2))
    huge = e < 0
    f_sub = jnp.where(
        huge, jnp.where(w == 0, _U(0), jnp.where((w == 1) & (gb == 0), nn, n1)), f_sub
    )
    i_sub = jnp.where(huge, w <= 1, i_sub)
    f_add = jnp.where(huge, n1, f_add)
    i_add = i_add & ~huge
    f_sub, f_add, n1 = f_sub.astype(jnp.int32), f_add.astype(jnp.int32), n1.astype(jnp.int32)
    # lower: k > floor(n (p - tau)), always when p < tau; upper: k < ceil(n (p + tau)), i.e.
    # ceil(n (tau - |p|)) for p < 0 (none when |p| >= tau)
    p_low = neg | (ap < at)
    lo = jnp.where(p_low, -1, jnp.minimum(f_sub, n1))
    up = jnp.where(neg, f_sub + 1 - i_sub.astype(jnp.int32), f_add + 1 - i_add.astype(jnp.int32))
    hi = jnp.where(neg & (ap >= at), 0, jnp.minimum(up, n1))
    finite = ap < _U(0x7F800000)
    ok = finite & (bt > _U(0)) & (bt < _U(0x7F800000))
    everything = finite & (bt == _U(0x7F800000))
    lo = jnp.where(everything, -1, jnp.where(ok, lo, n1))
    hi = jnp.where(everything, n1, jnp.where(ok, hi, 0))
    return lo, hi


def ratio_f32(k: jax.Array, n: jax.Array) -> jax.Array:
    """``k / n`` correctly rounded to float32 (to nearest, ties to even), exactly; ``0 <= k <= n``.

    A float quotient ``c`` is within 5 ulp of ``x = k / n`` however it is compiled; ``y``, 16
    float32 steps below it, is below x. With ``y = M 2^E``: ``Q = floor(x 2^(1 - E)) = 2M + j``,
    ``j = floor(R / n)`` for the exact 64-bit ``R = k 2^(1 - E) - 2 n M`` (``0 <= j < 64``), j
    estimated in float and fixed by the exact remainder; Q (with a sticky bit for the remainder) is
    rounded. The result is assembled from its bits (no program can fuse it into a later operation)
    and :func:`computed_once`. ``1 <= n < 2^31`` (0 is treated as 1, as the checker does).
    """
    k, n = jnp.broadcast_arrays(
        jnp.asarray(k, jnp.int32), jnp.maximum(jnp.asarray(n, jnp.int32), 1)
    )
    ku = jnp.clip(k, 1, n).astype(_U)
    nu = n.astype(_U)
    nf = n.astype(jnp.float32)
    c = ku.astype(jnp.float32) / nf  # in (2^-32, 1]
    by = lax.bitcast_convert_type(c, _U) - _U(16)
    m, e = _split(by)  # y = m 2^e <= x, -55 <= e <= -24
    s = _u(1 - e)  # 25 .. 56
    kh, kl = (ku >> (_U(32) - s)) | (ku << (s - _U(32))), ku << s  # k 2^s < 2^57
    mh, ml = _mul(nu, m << 1)
    rl = kl - ml
    rh = kh - mh - (kl < ml).astype(_U)  # R = k 2^s - 2 n m, 0 <= R < 64 n
    rf = rh.astype(jnp.float32) * jnp.float32(2.0**32) + rl.astype(jnp.float32)
    j = jnp.clip(jnp.floor(rf / nf), 0, 63).astype(_U)  # within 1 of floor(R / n)
    jh, jl = _mul(nu, j)
    r = rl - jl  # R - j n, in [-n, 2n): its low word and whether it is negative
    neg = (rh - jh - (rl < jl).astype(_U)) != 0
    over = ~neg & (r >= nu)
    j = j - neg.astype(_U) + over.astype(_U)
    r = jnp.where(neg, r + nu, jnp.where(over, r - nu, r))
    q = (m << 1) + j  # floor(x 2^s), in [2^24, 2^26)
    sh = _U(1) + (q >> 25)  # bits below the rounded mantissa: 1, or 2 above 2^25
    mant = q >> sh
    half = _U(1) << (sh - _U(1))
    rest = q & ((half << 1) - _U(1))
    up = (rest > half) | ((rest == half) & ((r != 0) | ((mant & _U(1)) == 1)))
    bits = ((_u(e) + sh + _U(148)) << 23) + mant + up.astype(_U)
    bits = jnp.where(k <= 0, _U(0), jnp.where(k >= n, _U(0x3F800000), bits))
    return computed_once(lax.bitcast_convert_type(bits, jnp.float32))


def computed_once(x: jax.Array) -> jax.Array:
    """``x`` (float32 in ``[0, 1]``, or bool) unchanged, computed once per program, not per fusion.

    XLA copies cheap (e.g. integer) producers into every fusion that consumes them, so the integer
    code of this module would be compiled once per field of a debate's carry that depends on it. A
    float division is "expensive" to XLA and never copied: ``x / max(x, 1)`` is ``x`` exactly for
    ``0 <= x <= 1`` however it is compiled (a division by 1, or a product by ``1 / 1``), and the
    code under it is then compiled once. (A subnormal x may be flushed to 0, as XLA does on CPU; the
    values here are 0 or at least 2^-32.)
    """
    if x.dtype == jnp.bool_:
        return computed_once(x.astype(jnp.float32)) > 0.5
    return x / jnp.maximum(x, jnp.float32(1.0))
