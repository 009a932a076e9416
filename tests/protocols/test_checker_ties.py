"""The stochastic debate's checker at exact ties (spec DED 5.5): eager, jitted and vmapped programs
decide ``|p - k/n| < tau`` alike, and as real numbers on the float32 values do; the integer
arithmetic under it (:mod:`dedebate.core.dyadic`) against Fractions."""

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.core.dyadic import checker_bounds, computed_once, ratio_f32
from dedebate.protocols.stochastic import checker_accepts, checker_interval

# (n, tau, claims): 0.5 and 1.0 at n = 40, tau = 0.05 meet the decimal ties 0.5 - 18/40 = 0.05 and
# 1 - 38/40 = 0.05 (float32 0.05 is 7.45e-10 above: accepted); the default constants' n, tau with
# claims at and near the edges; tau = 1/16 at n = 32 meets exact ties (0.5 - 14/32 = 1/16:
# rejected, the test is strict).
CASES = [
    (40, 0.05, (0.5, 1.0, 0.0, 0.05, 0.95, 0.45)),
    (3000, 0.0175, (0.5, 1.0, 1 / 3, 0.125 + 0.0175, 0.9825, 0.0175)),
    (96_356, 0.0175, (0.5, 1.0, 2 / 3, 0.0175, 0.9825, 0.25)),
    (32, 0.0625, (0.5, 1.0, 0.3125)),
]
ROWS = [(np.float32(p), n, np.float32(tau)) for n, tau, claims in CASES for p in claims]


def _exact(p, k, n, tau):
    return abs(Fraction(float(p)) - Fraction(int(k), n)) < Fraction(float(tau))


def _exact_interval(p, n, tau):
    p, tau = Fraction(float(p)), Fraction(float(tau))
    return (
        min(max(math.floor(n * (p - tau)) + 1, 0), n + 1),
        max(min(math.ceil(n * (p + tau)) - 1, n), -1),
    )


def _counts(p, n, tau):
    """Every count for small n; else the counts within 3 of either end of the interval."""
    if n <= 40:
        return np.arange(n + 1)
    lo, hi = _exact_interval(p, n, tau)
    return np.unique(np.clip(np.r_[lo - 3 : lo + 4, hi - 3 : hi + 4], 0, n))


def _both(p, k, n, tau):
    return checker_interval(p, n, tau)[:2] + (checker_accepts(p, k, n, tau),)


def test_checker_decides_ties_alike_in_every_program():
    """Every count (n = 40) or the counts around both ends, for each claim: the interval and the
    checker vmapped over claims, counts and n, eager (op by op) and jitted, and jitted on scalars
    at the ties, against Fractions."""
    want = np.array([_exact_interval(*r) for r in ROWS])
    assert want[:2].tolist() == [[18, 22], [38, 40]]  # the decimal ties are accepted
    assert want[-3:-1].tolist() == [[15, 17], [31, 32]]  # the exact ties are not
    rows = [(p, k, n, tau) for p, n, tau in ROWS for k in _counts(p, n, tau)]
    cp, ck, cn, ct = (np.array(c) for c in zip(*rows))
    want_lo, want_hi = np.array([_exact_interval(p, n, tau) for p, _, n, tau in rows]).T
    want_acc = np.array([_exact(*r) for r in rows])
    args = (
        jnp.asarray(cp),
        jnp.asarray(ck, jnp.int32),
        jnp.asarray(cn, jnp.int32),
        jnp.asarray(ct),
    )
    for name, got in (
        ("eager vmap", jax.vmap(_both)(*args)),
        ("jit vmap", jax.jit(jax.vmap(_both))(*args)),
    ):
        for g, w, what in zip(got, (want_lo, want_hi, want_acc), ("k_lo", "k_hi", "accepts")):
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=f"{name}: {what}")
    jit_both = jax.jit(_both)
    for i in np.flatnonzero((cn <= 40) & ((cp == 0.5) | (cp == 1.0))):
        r = (jnp.float32(cp[i]), jnp.int32(ck[i]), jnp.int32(cn[i]), jnp.float32(ct[i]))
        got = tuple(int(v) for v in jit_both(*r))
        assert got == (want_lo[i], want_hi[i], want_acc[i]), (rows[i], got)


def _random_f32(rng, size):
    """Float32s of every kind: any bit pattern, any exponent, the n = 40 grid."""
    raw = rng.integers(0, 2**32, size, dtype=np.uint64).astype(np.uint32).view(np.float32)
    spread = (rng.uniform(-1, 1, size) * 2.0 ** rng.integers(-150, 30, size)).astype(np.float32)
    grid = (rng.integers(-50, 51, size) / 40).astype(np.float32)
    out = np.where(rng.random(size) < 0.3, raw, np.where(rng.random(size) < 0.5, spread, grid))
    return np.where(np.isfinite(out), out, np.float32(0.25)).astype(np.float32)


def test_integer_bounds_and_ratio_match_fractions():
    rng = np.random.default_rng(0)
    m = 400
    p, tau = _random_f32(rng, m), np.abs(_random_f32(rng, m))
    p[: m // 5] = tau[: m // 5] * rng.choice([-1, 1], m // 5)  # p = +-tau
    tau[m // 5 : m // 3] = np.float32(0.05)  # ties of the n = 40 grid
    tau[m // 3 : m // 3 + 8] = np.float32([0, -0.0, np.inf, np.nan, -1, 1e-45, 2**24, 3e38])
    n = rng.choice([1, 3, 40, 3000, 96_356, 2**30 - 1], m).astype(np.int32)
    lo, hi = (np.asarray(v) for v in jax.jit(checker_bounds)(p, n, tau))
    for pi, ti, ni, a, b in zip(p, tau, n, lo, hi):
        ni = int(ni)
        if not (
            np.isfinite(pi) and np.isfinite(ti) and ti > 0
        ):  # no count, or (tau = inf) every count
            want = (-1, ni + 1) if np.isfinite(pi) and ti == np.inf else (ni + 1, 0)
        else:
            pf, tf = Fraction(float(pi)), Fraction(float(ti))
            want = (
                min(max(math.floor(ni * (pf - tf)), -1), ni + 1),
                max(min(math.ceil(ni * (pf + tf)), ni + 1), 0),
            )
        assert (a, b) == want, (pi, ti, ni, a, b, want)
    n = rng.choice([1, 3, 40, 3000, 96_356, 2**24 + 3, 2**31 - 1], m)
    k = (rng.integers(0, 2**31 - 1, m) % (n + 1)).astype(np.int32)
    got = np.asarray(jax.jit(ratio_f32)(k, n.astype(np.int32)))
    for ki, ni, g in zip(k, n, got):
        exact = Fraction(int(ki), int(ni))
        below = np.float32(float(exact))
        if Fraction(float(below)) > exact:
            below = np.nextafter(below, np.float32(-1))
        above = np.nextafter(below, np.float32(2)) if Fraction(float(below)) != exact else below
        d_lo, d_hi = exact - Fraction(float(below)), Fraction(float(above)) - exact
        even = below if int(below.view(np.uint32)) % 2 == 0 else above
        want = below if d_lo < d_hi else above if d_hi < d_lo else even
        assert g == want, (ki, ni, g, want)


def test_checker_code_is_compiled_once_however_many_fusions_read_it():
    """XLA copies cheap integer code into every fusion that reads it; :func:`computed_once` keeps
    one copy: a checker read by three outputs of different shapes compiles to no more integer
    shifts than one read once (without it, about three times as many), and values pass
    unchanged."""

    def program(consumers):
        def f(p, k, a, b):
            acc = checker_accepts(p, k, jnp.int32(40), jnp.float32(0.05))
            outs = (jnp.where(acc, a, 0), jnp.where(acc, b, 1.0), jnp.sum(acc))
            return outs[:consumers]

        args = (
            jnp.zeros(8, jnp.float32),
            jnp.zeros(8, jnp.int32),
            jnp.zeros(8, jnp.int32),
            jnp.zeros(8, jnp.float32),
        )
        return jax.jit(f).lower(*args).compile().as_text().count("shift-right-logical(")

    one, three = program(1), program(3)
    assert 0 < three <= one + 2, (one, three)
    f = np.array([0, 2**-32, 0.05, 1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(computed_once)(jnp.asarray(f))), f)
