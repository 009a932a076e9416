"""The conditions that make the BTRS sampler exact, checked deterministically in float64 against
scipy's pmf (a 1% bias passes every chi-square test of ``test_stochastic_binomial``): the hat
dominates the pmf ratio, the squeeze accepts only what the exact test accepts, the fast path's
upper bound bounds, the mode is the pmf's, and a draw consumes the uniforms it documents."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dedebate.core.binomial import _Btrs, stream_binomial, uniform_stream
from dedebate.core.binomial_btrs import _UB_MARGIN
from tests.fakes import LIGHT_COMPILE

# BTRS lanes (mean >= 10, p <= 1/2): the smallest means, p near 1/2 and large means
LANES = [(20, 0.5), (25, 0.4), (30, 0.4), (100, 0.1), (3000, 0.25), (200_000, 0.37), (10**6, 0.5)]
U = np.linspace(1e-6, 1 - 1e-6, 400_001, dtype=np.float32)  # candidates' first uniform


def _lane(n, p):
    """The lane's float32 constants (as float64) and the exact log pmf relative to its mode."""
    b = _Btrs(jnp.float32(n), jnp.float32(p))
    c = {k: float(getattr(b, k)) for k in ("a", "b", "alpha", "vr", "m")}
    p64 = float(np.float32(p))

    def log_ratio(k):
        return stats.binom.logpmf(k, n, p64) - stats.binom.logpmf(c["m"], n, p64)

    return b, c, log_ratio


def _candidates(n, p):
    """Every grid candidate in range at ``v = vr``: ``(squeezed, exact log ratio, log of the
    hat)`` in float64, ``squeezed`` the sampler's own squeeze flag."""
    b, c, log_ratio = _lane(n, p)
    k_off, inr, sq, _ = (np.asarray(x) for x in b.candidate(jnp.asarray(U), b.vr))
    u = U[inr].astype(np.float64)
    us = 0.5 - np.abs(u - 0.5)
    hat = np.log(c["alpha"] / (c["a"] / us**2 + c["b"]))
    return sq[inr], log_ratio(c["m"] + k_off[inr].astype(np.float64)), hat, c


@pytest.mark.parametrize("n,p", LANES)
def test_the_hat_dominates_the_pmf_ratio(n, p):
    """``f(k) / f(m) <= alpha / (a / us^2 + b)`` at every candidate: a candidate is accepted with
    probability ``min(1, .)``, so where the hat fell below the pmf the law would be cut there
    (dropping BTRS's ``+ 0.01 p`` from ``a`` does so by 0.7% at (20, 1/2))."""
    _, exact, hat, _ = _candidates(n, p)
    assert exact.size > 0.9 * U.size
    assert np.max(exact - hat) <= 0.0


@pytest.mark.parametrize("n,p", LANES)
def test_the_squeeze_accepts_only_what_the_exact_test_accepts(n, p):
    """Where ``us >= 0.07`` and ``v <= vr`` the candidate is accepted untested: the largest such
    v passes the exact test there (a squeeze from ``us >= 0.06`` over-accepts by up to 3%)."""
    squeezed, exact, hat, c = _candidates(n, p)
    assert 0.5 * exact.size < squeezed.sum() < exact.size
    assert np.max((np.log(c["vr"]) + hat - exact)[squeezed]) <= 0.0


@pytest.mark.parametrize("n,p", [(3000, 0.25), (200_000, 0.37), (10**6, 0.5)])
def test_the_fast_paths_upper_bound_bounds_the_log_ratio(n, p):
    """A fast lane rejects a candidate whose ``lhs`` exceeds ``upper_bound + _UB_MARGIN (1 +
    |ub|)``: so that bound is at least the exact log ratio at every count (a bound with
    ``(t + 1) / 2`` for ``(t - 1) / 2`` fell 0.0018 below it one count above the mode)."""
    b, c, log_ratio = _lane(n, p)
    b.fast_constants()
    sd = np.sqrt(n * p * (1 - p))
    near = np.arange(-300, 301)
    far = np.round(np.linspace(-c["m"], n - c["m"], 2001))
    k_off = np.unique(np.concatenate([near, far, np.round(np.linspace(-40, 40, 801) * sd)]))
    k_off = k_off[(k_off >= -c["m"]) & (k_off <= n - c["m"])].astype(np.float32)
    ub = np.asarray(b.upper_bound(jnp.asarray(k_off), *b.reciprocals(jnp.asarray(k_off))))
    ub = ub.astype(np.float64)
    exact = log_ratio(c["m"] + k_off.astype(np.float64))
    assert np.all(exact <= ub + _UB_MARGIN * (1.0 + np.abs(ub)))


@pytest.mark.parametrize(
    "n,p",
    [
        (n, p)
        for n in (20, 30, 31, 99, 1000, 3001, 200_000)
        for p in (0.1, 0.25, 0.39, 0.5)
        if n * p >= 10
    ],  # BTRS lanes
)
def test_the_mode_is_the_pmfs(n, p):
    """``m = floor((n + 1) p)`` is a most likely count of Binomial(n, p), up to the float32
    rounding of ``(n + 1) p`` (relative 2^-24, as if p moved by ``p 2^-24``; the log ratio of two
    counts then moves by ``2^-24 / q <= 2^-23``): at (99, 0.39) float32 gives 39 where the mode of
    the float32 p is 38, 6e-8 more likely. ``floor(n p)`` gave 11 at (30, 0.39), 0.012 less."""
    m = int(_Btrs(jnp.float32(n), jnp.float32(p)).m)
    pmf = stats.binom.logpmf(np.arange(n + 1), n, float(np.float32(p)))
    assert pmf[m] >= pmf.max() - 2.0**-23 - 1e-12 * abs(pmf.max())


def test_a_fast_lane_without_an_accepted_candidate_consumes_its_whole_window():
    """A fast lane (mean >= 600) whose 8 window candidates are all out of range consumes the
    window's 16 uniforms and one position for its slow-path keys: the next draw reads none of
    the pairs this one examined (stopping at 15 made consecutive draws share a pair)."""
    s = uniform_stream(jax.random.key(0), 16 + 40, 8)
    s = s.replace(u=s.u.at[:16].set(1e-7))
    draw = jax.jit(stream_binomial, compiler_options=LIGHT_COMPILE)
    _, after = draw(s, jnp.int32(100_000), jnp.float32(0.3))
    assert int(after.ptr) == 2 * 8 + 1
