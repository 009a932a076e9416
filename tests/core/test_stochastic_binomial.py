"""dedebate.core.binomial: exact binomial counts (spec DED 5.5) checked against the exact pmf."""

import functools
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dedebate.core.binomial import (
    _UNDECIDED,
    FAST_MEAN,
    FAST_MID,
    INVALID,
    OPEN_RATES,
    _Btrs,
    _window_first,
    _window_first_lanes,
    block_bits,
    block_uniforms,
    sample_binomial,
    stream_binomial,
    stream_binomial_fast,
    uniform_stream,
)
from tests.fakes import LIGHT_COMPILE

S = 40_000


def _five(key, n, p):
    """Five consecutive draws from one short stream: the later draws run past its 13 bulk
    uniforms into the slow path's fresh keys."""
    s0 = uniform_stream(key, 13)

    def one(ptr, _):
        k, s = stream_binomial(s0.replace(ptr=ptr), n, p)
        return s.ptr, k

    return jax.lax.scan(one, s0.ptr, None, length=5)[1]


_draws = jax.jit(jax.vmap(_five, in_axes=(0, None, None)), compiler_options=LIGHT_COMPILE)


def _chi2_pvalue(x: np.ndarray, n: int, p: float) -> float:
    """Chi-square goodness of fit against Binomial(n, p), bins with expected count >= 20."""
    ks = np.arange(n + 1)
    pm = stats.binom.pmf(ks, n, p)
    cnt = np.bincount(x, minlength=n + 1)[: n + 1]
    obs, exp, o, e = [], [], 0, 0.0
    for k in ks:
        o += cnt[k]
        e += pm[k] * x.size
        if e >= 20:
            obs.append(o)
            exp.append(e)
            o, e = 0, 0.0
    obs[-1] += o
    exp[-1] += e
    obs, exp = np.array(obs), np.array(exp)
    assert obs.sum() == x.size  # nothing outside [0, n]
    return float(stats.chi2.sf(((obs - exp) ** 2 / exp).sum(), obs.size - 1))


@pytest.mark.parametrize(
    "n,p",
    [
        (12, 0.05),  # inversion (mean < 10)
        (30, 0.4),  # BTRS, general log-ratio (slow path)
        (3000, 0.25),  # BTRS, fast path (mean >= FAST_MEAN)
        (49518, 0.999),  # p > 1/2 by symmetry, small mean of the complement
        (200_000, 0.63),  # large N, fast path, flipped
    ],
)
def test_counts_follow_the_binomial_law(n, p):
    keys = jax.random.split(jax.random.key(7), S)
    pf = float(np.float32(p))
    x = np.asarray(_draws(keys, jnp.int32(n), jnp.float32(p)))
    for j in (0, 1, 4):
        assert _chi2_pvalue(x[:, j], n, pf) > 1e-4
    # consecutive draws from one stream are independent
    r = np.corrcoef(x[:, 0], x[:, 1])[0, 1]
    assert abs(r) < 5 / np.sqrt(S)


def test_trivial_cases_are_exact():
    keys = jax.random.split(jax.random.key(0), S)  # same shape as above: no recompilation
    assert np.all(np.asarray(_draws(keys, jnp.int32(100), jnp.float32(0.0))) == 0)
    assert np.all(np.asarray(_draws(keys, jnp.int32(100), jnp.float32(1.0))) == 100)
    assert np.all(np.asarray(_draws(keys, jnp.int32(0), jnp.float32(0.5))) == 0)


def _float32_mass(n: int, p: float) -> float:
    """The small-mean inversion's terms summed as its loop sums them (float32)."""
    nf, pp = np.float32(n), np.float32(p)
    r = pp / (np.float32(1) - pp)
    f = F = np.exp(nf * np.log1p(-pp))
    for k in range(1, n + 1):
        kf = np.float32(k)
        f = f * (nf - kf + np.float32(1)) / kf * r
        if f == 0:
            break
        F = F + f
    return float(F)


@pytest.mark.parametrize("n, p", [(1000, 0.0099), (50, 0.19)])
def test_inversion_draws_again_where_its_float32_mass_ends_below_the_uniform(n, p):
    """The small-mean inversion's float32 terms sum to 1 - ~1e-6: a first uniform above that sum
    walked the count into the far tail (73 of 1,000 at p = 0.0099, exact P[X >= 40] = 3e-13;
    50 of 50 at p = 0.19). These keys' first uniforms lie above the sum; their counts are typical.
    """
    seeds = (1462100, 3077156, 12005848, 14407675)  # found by search: uniforms > 1 - 2^-21

    def first_uniform(seed):  # the inversion's u0: fold_in(stream key, ptr 0), then candidate 0
        lane = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), 1), 0)
        return float(jax.random.uniform(jax.random.fold_in(lane, 0), (3,))[2])

    assert all(first_uniform(s) > _float32_mass(n, p) for s in seeds)
    keys = jax.vmap(jax.random.key)(jnp.array(seeds, jnp.uint32))
    counts = jax.jit(jax.vmap(lambda k: sample_binomial(k, n, p)))(keys).tolist()
    assert max(counts) <= 30 and stats.binom.sf(30, n, p) < 1e-7


def test_memory_does_not_grow_with_n():
    """N = 2e9 samples (int32 range) costs O(1): the count is within 6 sd of the mean."""
    keys = jax.random.split(jax.random.key(1), S)
    n = 2_000_000_000
    x = np.asarray(_draws(keys, jnp.int32(n), jnp.float32(0.3)), np.float64).ravel()
    mean, sd = n * float(np.float32(0.3)), np.sqrt(n * 0.21)
    assert np.all(np.abs(x - mean) < 6 * sd + 300)  # + float32 rounding of the mean
    assert abs(x.mean() - mean) < 5 * sd / np.sqrt(x.size) + 300


@jax.jit
def _log_ratio(n, p, offs):
    b = _Btrs(n, p)
    return b.m, b.log_ratio(offs)


@pytest.mark.parametrize("n,p", [(50, 0.3), (1000, 0.02), (200_000, 0.37), (10**7, 0.5)])
def test_log_ratio_matches_float64(n, p):
    m = float(_log_ratio(jnp.float32(n), jnp.float32(p), jnp.zeros(41, jnp.float32))[0])
    sd = np.sqrt(n * p * (1 - p))
    offs = np.round(np.linspace(-8 * sd, 8 * sd, 41)).astype(np.float32)
    offs = np.clip(offs, -m, n - m)
    got = np.asarray(_log_ratio(jnp.float32(n), jnp.float32(p), jnp.asarray(offs))[1])
    p64 = float(np.float32(p))
    want = stats.binom.logpmf(m + offs.astype(np.float64), n, p64) - stats.binom.logpmf(m, n, p64)
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_fast_draw_equals_exact_draw_when_resolved():
    """The window-only draw agrees with the exact draw on every lane it resolves, and resolves
    every lane of a large-mean batch."""
    keys = jax.random.split(jax.random.key(3), 4096)
    p = jnp.linspace(0.02, 0.98, 4096)
    n = jnp.int32(100_000)

    def both(k, pp):
        s = uniform_stream(k, 40)
        a, sa = stream_binomial(s, n, pp)
        b, sb, un = stream_binomial_fast(s, n, pp)
        return a, b, un, sa.ptr, sb.ptr

    a, b, un, pa, pb = jax.jit(jax.vmap(both), compiler_options=LIGHT_COMPILE)(keys, p)
    un = np.asarray(un)
    pn = np.asarray(p, np.float64) * 100_000
    fast = (pn >= FAST_MEAN) & (100_000 - pn >= FAST_MEAN)
    assert fast.sum() > 3000 and not un[fast].any()
    ok = ~un
    np.testing.assert_array_equal(np.asarray(a)[ok], np.asarray(b)[ok])
    np.testing.assert_array_equal(np.asarray(pa)[ok], np.asarray(pb)[ok])


def test_a_batch_of_zero_lanes_draws_nothing():
    """vmap over no lanes: the fast draw's batch rule has no first lane to read."""

    def draw(k):
        count, _, unresolved = stream_binomial_fast(
            uniform_stream(k, 40), jnp.int32(100_000), jnp.float32(0.3)
        )
        return count, unresolved

    for lanes in (0, 2):
        count, unresolved = jax.jit(jax.vmap(draw), compiler_options=LIGHT_COMPILE)(
            jax.random.split(jax.random.key(4), lanes)
        )
        assert count.shape == unresolved.shape == (lanes,)
    assert not unresolved.any() and (np.abs(np.asarray(count) - 30_000) < 1_000).all()


def test_vmap_equals_per_lane_loop():
    keys = jax.random.split(jax.random.key(5), S)
    single = jax.jit(_five, compiler_options=LIGHT_COMPILE)
    for n, p in ((5000, 0.3), (200_000, 0.63), (12, 0.05)):  # fast, fast flipped, inversion
        batched = np.asarray(_draws(keys, jnp.int32(n), jnp.float32(p)))
        for i in range(4):
            np.testing.assert_array_equal(
                batched[i], np.asarray(single(keys[i], jnp.int32(n), jnp.float32(p)))
            )


def test_fast_batch_rule_equals_per_lane_classification():
    """The fast draw's batch rule (every lane's first candidate, then the open lanes gathered
    into buffers for the rest of the window) gives every lane the state of the per-lane loop over
    its whole window: for lanes that are not fast, for lanes whose every candidate is rejected,
    for lanes whose window starts at or past the block's end, for windows of 1 to 8 candidates, and with buffers that hold every lane. With buffers too
    small for the open lanes, the lanes left out are unresolved, never given another count."""  # noqa: E501
    B, W, L = 512, 8, 40
    keys = jax.random.split(jax.random.key(11), B)
    u = jax.vmap(lambda k: uniform_stream(k, L, W).u)(keys)
    u = u.at[:5].set(1e-7)  # every candidate out of range: rejected
    nf = jnp.where(jnp.arange(B) % 7 == 0, 300.0, 200_000.0).astype(jnp.float32)  # some slow
    pp = jnp.linspace(0.05, 0.5, B).astype(jnp.float32)
    big = jnp.ones(B, bool)
    ptr0 = jax.random.randint(jax.random.key(12), (B,), 0, 2 * L // 3).astype(jnp.int32)
    ptr0 = ptr0.at[20:23].set(jnp.array([L - 1, L, L + 1]))  # at and past the block's end
    rows = jnp.arange(8, 20)[:, None]  # (fast) lanes whose first FAST_MID candidates are rejected
    u = u.at[rows, ptr0[rows] + 2 * jnp.arange(FAST_MID)].set(1e-7)
    batch = jax.jit(
        _window_first_lanes.__wrapped__,
        static_argnames=("L", "W", "rates"),
        compiler_options=LIGHT_COMPILE,
    )

    def per_lane(w):  # lax.map calls the unbatched rule, lane by lane
        return jax.jit(
            lambda *a: jax.lax.map(lambda x: _window_first(*x, L, w), a),
            compiler_options=LIGHT_COMPILE,
        )(u[:, : L + 2 * w], nf, pp, big, ptr0)

    want = per_lane(W)
    for rates in (OPEN_RATES, (1.0, 1.0)):
        got = batch(u, nf, pp, big, ptr0, L=L, W=W, rates=rates)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    for w in (1, 2, 3):
        got = batch(u[:, : L + 2 * w], nf, pp, big, ptr0, L=L, W=w, rates=OPEN_RATES)
        for g, ww in zip(got, per_lane(w)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(ww))
    state = np.asarray(want[0])
    accepted = state > _UNDECIDED
    assert (state[:5] == _UNDECIDED).all() and (state[20:23] == _UNDECIDED).all()
    assert accepted.mean() > 0.8
    # lanes accepted after their first candidate (the buffers served them), some after FAST_MID
    assert (accepted & (state % 16 > 0)).mean() > 0.05
    assert (accepted & (state % 16 >= FAST_MID)).sum() >= 8
    # buffers of 32 slots for about 60 open lanes: the lanes left out are unresolved
    small = np.asarray(batch(u, nf, pp, big, ptr0, L=L, W=W, rates=(0.0, 0.0))[0])
    differ = small != state
    assert differ.sum() > 10 and (small[differ] == _UNDECIDED).all()


def test_block_uniforms_are_uniform_and_use_both_words():
    """``block_uniforms``: 200,001 values (odd length) pass a Kolmogorov-Smirnov test against
    U[0, 1) and have no lag-1 correlation or correlation between the two words of a block
    (|r| < 5 / sqrt(n)); another key gives other values; another key implementation falls
    back to ``jax.random.uniform`` exactly."""
    n = 200_001
    u = np.asarray(block_uniforms(jax.random.key(5), n), np.float64)
    assert u.shape == (n,) and u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > 1e-4
    lim = 5.0 / np.sqrt(n)
    half = (n + 1) // 2
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < lim
    assert abs(np.corrcoef(u[: half - 1], u[half:])[0, 1]) < lim  # the words of each block
    assert not np.array_equal(u[:100], np.asarray(block_uniforms(jax.random.key(6), 100)))
    rbg = jax.random.key(5, impl="rbg")
    np.testing.assert_array_equal(
        np.asarray(block_uniforms(rbg, 64)), np.asarray(jax.random.uniform(rbg, (64,)))
    )


def test_block_bits_are_balanced_and_give_block_uniforms():
    """``block_bits``: each of the 32 bit positions of 200,001 words is set about half the time
    (|mean - 1/2| < 5 / (2 sqrt(n)); the lazy mode reads all 32 bits, the uniforms only the top
    23), adjacent words are uncorrelated, ``block_uniforms`` is their top 23 bits, and another
    key implementation falls back to ``jax.random.bits`` exactly."""
    n = 200_001
    words = np.asarray(block_bits(jax.random.key(7), n))
    assert words.dtype == np.uint32 and words.shape == (n,)
    bits = (words[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    assert np.abs(bits.mean(axis=0) - 0.5).max() < 5 * 0.5 / np.sqrt(n)
    w = words.astype(np.float64)
    assert abs(np.corrcoef(w[:-1], w[1:])[0, 1]) < 5.0 / np.sqrt(n)
    key = jax.random.key(8)
    top = (np.asarray(block_bits(key, 64)) >> 9).astype(np.float32) * np.float32(2.0**-23)
    np.testing.assert_array_equal(np.asarray(block_uniforms(key, 64)), top)
    rbg = jax.random.key(5, impl="rbg")
    np.testing.assert_array_equal(
        np.asarray(block_bits(rbg, 64)), np.asarray(jax.random.bits(rbg, (64,), jnp.uint32))
    )


@functools.partial(jax.jit, static_argnames=("window", "rejected"), compiler_options=LIGHT_COMPILE)
def _windowed(keys, n, p, window: int, rejected: bool):
    """One draw per key with a ``window``; ``rejected``: window uniforms of 1e-7, which put every
    window candidate out of range (so the exact loop draws the count from fresh keys)."""

    def one(key):
        s = uniform_stream(key, 2 * window, window)
        return stream_binomial(s.replace(u=jnp.full_like(s.u, 1e-7)) if rejected else s, n, p)[0]

    return jax.vmap(one)(keys)


@pytest.mark.parametrize("window,rejected", [(1, False), (2, False), (8, True)])
def test_a_window_without_an_accepted_candidate_draws_exactly(window, rejected):
    """A lane whose window accepts no candidate (often with a window of 1 or 2; at the default
    window when every candidate is out of range) tests every later candidate: 200,000 draws of
    Binomial(100,000, 0.3) fit the pmf, and their variance is n p q = 21,000 within 5 standard
    deviations of the sample variance (about 330). Taking the first candidate after the window
    untested gave variances of 90,000 to 113,000 (window 1), ~29,000 (window 2) and ~880,000
    (all rejected)."""
    n, p, draws = 100_000, float(np.float32(0.3)), 200_000
    x = np.asarray(
        _windowed(
            jax.random.split(jax.random.key(9), draws),
            jnp.int32(n),
            jnp.float32(p),
            window=window,
            rejected=rejected,
        )
    )
    var = n * p * (1 - p)
    mu4 = var * (1 + 3 * (n - 2) * p * (1 - p))  # the fourth central moment
    assert abs(x.var(ddof=1) - var) < 5 * np.sqrt((mu4 - var**2) / draws)
    assert _chi2_pvalue(x, n, p) > 1e-4


# Draws with invalid arguments (p NaN, p outside [0, 1], n < 0) and a valid last lane, batched
# (the lanes' batch rules) and unbatched, exact and fast; run in a subprocess, as a hang is the
# failure to catch.
_INVALID_DRAWS = """
import json, math
import jax, jax.numpy as jnp
from dedebate.core.binomial import sample_binomial, stream_binomial_fast, uniform_stream
n = jnp.array([100_000, 30, 5, 100_000, 100_000, 100_000, -3, 100_000], jnp.int32)
p = jnp.array([math.nan, math.nan, math.nan, -0.1, 1.5, math.inf, 0.3, 0.3], jnp.float32)
def fast(k, n, p):
    count, s, unresolved = stream_binomial_fast(uniform_stream(k, 16), n, p)
    return count, s.ptr, unresolved
@jax.jit
def draws(keys):
    return (jax.vmap(sample_binomial)(keys, n, p), *jax.vmap(fast)(keys, n, p),
            sample_binomial(keys[0], n[0], p[0]))
out = draws(jax.random.split(jax.random.key(0), 8))
print(json.dumps(dict(zip(["exact", "fast", "ptr", "unresolved", "one"], jax.tree.map(
    lambda x: x.tolist(), out)))))
"""


def test_invalid_arguments_draw_the_invalid_count_without_a_loop():
    """p NaN (fast, BTRS and inversion sizes of n), p < 0, p > 1, p infinite and n < 0 draw
    INVALID at once on the exact and the fast path (resolved, nothing consumed); a valid lane
    beside them draws as usual. Before, a NaN p looped for ever (the timeout) and the others
    were clipped to a count of 0 or n."""
    proc = subprocess.run(
        [sys.executable, "-c", _INVALID_DRAWS],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    out = json.loads(proc.stdout)
    assert out["exact"][:7] == out["fast"][:7] == [INVALID] * 7 and out["one"] == INVALID
    assert out["ptr"][:7] == [0] * 7 and not any(out["unresolved"])
    assert out["exact"][7] == out["fast"][7] and abs(out["exact"][7] - 30_000) < 700
