"""Bob's decision drawn directly (``bob_draw="decision"``, spec DED 5.1/5.5): the binomial tails it
uses, the certified interval of the checker, the law of the decision, and the protocol against
the exact acceptance and against ``vmap(play)``."""

import math
from operator import attrgetter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dedebate.agents.stochastic_players import (
    A_HONEST,
    honest_alice,
    honest_bob,
    soundness_zoo,
    stack,
    zoo_alice,
)
from dedebate.core.binomial import (
    GATE_LOG2,
    binom_lower_tail,
    decide_outside,
    decision_gate,
    log_pmf,
)
from dedebate.exact import acceptance_exact
from dedebate.machines.fixtures import f2_target
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import (
    checker_accepts,
    checker_interval,
    debate_static,
    lean_defaults,
    make_vera,
    play,
    play_fast,
    trial_keys,
)
from dedebate.protocols.stochastic_batch import run_trials
from tests.fakes import LIGHT_COMPILE

Z_MAX = 3.89  # two-sided normal quantile at significance 1e-4


# One compiled program each for every (n, p) below: n and p are traced, the five counts one shape
# (a count clipped to 0 twice is checked twice).
_log_pmf = jax.jit(jax.vmap(log_pmf, (0, None, None)))
_lower_tail = jax.jit(jax.vmap(binom_lower_tail, (0, None, None)))


@pytest.mark.parametrize("n,p", [(50, 0.2), (96_356, 0.6667), (216_870, 0.3), (10**7, 0.02)])
def test_log_pmf_and_lower_tail_match_scipy(n, p):
    p32 = float(np.float32(p))
    sd, mu = math.sqrt(n * p32 * (1 - p32)), n * p32
    ks = np.clip(np.round(mu - sd * np.array([1.0, 2, 3.8, 6, 9])), 0, n).astype(np.int64)
    kj = jnp.asarray(ks, jnp.int32)
    nj, pj = jnp.int32(n), jnp.float32(p32)
    lp = np.asarray(_log_pmf(kj, nj, pj))
    np.testing.assert_allclose(lp, stats.binom.logpmf(ks, n, p32), atol=1e-4)
    tail = np.asarray(_lower_tail(kj, nj, pj))
    np.testing.assert_allclose(tail, stats.binom.cdf(ks, n, p32), rtol=1e-3)
    assert float(binom_lower_tail(-1, n, p32)) == 0.0


@pytest.mark.parametrize("n,tau", [(40, 0.05), (3000, 0.0175), (96_356, 0.0175)])
def test_checker_interval_is_the_accepted_set(n, tau):
    """``[k_lo, k_hi]`` is exactly the set of counts the checker accepts, for claims
    inside, at and beyond [0, 1] (every count checked for small n; around both ends for large
    n, the checker being monotone on each side)."""
    claims = np.float32([-0.3, -tau, 0.0, 0.01, 0.3333, 0.5, 0.987, 1.0, 1.0 + tau / 2, 2.0])
    k_lo, k_hi, cert = jax.vmap(checker_interval, (0, None, None))(
        jnp.asarray(claims), jnp.int32(n), jnp.float32(tau)
    )
    assert np.all(np.asarray(cert))
    lo, hi = np.asarray(k_lo)[:, None], np.asarray(k_hi)[:, None]
    if n <= 5000:  # every count
        kk = np.broadcast_to(np.arange(n + 1), (claims.size, n + 1))
    else:  # the ends and their neighbours
        kk = np.clip(
            np.concatenate([lo - 2, lo - 1, lo, hi, hi + 1, hi + 2, (lo + hi) // 2], 1), 0, n
        )
    # one call for all claims (the checker broadcasts)
    acc = np.asarray(
        checker_accepts(
            jnp.asarray(claims)[:, None], jnp.asarray(kk, jnp.int32), jnp.int32(n), jnp.float32(tau)
        )
    )
    np.testing.assert_array_equal(acc, (kk >= lo) & (kk <= hi))


def test_gate_is_a_valid_hoeffding_certificate():
    n, pi = 96_356, np.float32(2 / 3)
    # edges 0.012 from pi: 2 n d^2 = 27.7 >= (GATE_LOG2 + 1) ln 2 = 17.3; P_out below the gate
    lo, hi = int(n * (pi - 0.012)) + 1, int(n * (pi + 0.012)) - 1
    assert bool(decision_gate(n, pi, jnp.int32(lo), jnp.int32(hi)))
    p_out = stats.binom.cdf(lo - 1, n, pi) + stats.binom.sf(hi, n, pi)
    assert p_out <= 2.0**-GATE_LOG2
    # edges 0.002 from pi (about 1.3 sd): not certified
    lo2, hi2 = int(n * (pi - 0.002)), int(n * (pi + 0.002))
    assert not bool(decision_gate(n, pi, jnp.int32(lo2), jnp.int32(hi2)))


def test_gate_certifies_only_intervals_whose_exact_outside_probability_is_below_it():
    """Every interval [k_lo, k_hi] of every n <= 48 (and n = 200) at 33 values of pi: wherever
    the gate says "certified", scipy's exact P[X < k_lo] + P[X > k_hi] is at most 2^-GATE_LOG2
    (no tolerance: Hoeffding's bound is rigorous). And each side gets half: a side Hoeffding
    bounds by 2^-24 but not by 2^-25 is refused (2 n d^2 = 17.05 at n = 10^4, d = 0.0292)."""
    rows = []
    for n in [*range(1, 49), 200]:
        lo, hi = np.triu_indices(n + 1)
        rows.append(np.stack([np.full(lo.size, n), lo, hi], axis=1))
    grid = np.concatenate(rows)
    pis = np.linspace(0.01, 0.99, 33).astype(np.float32)
    n, lo, hi = (np.repeat(grid[:, i], pis.size).astype(np.int32) for i in range(3))
    pi = np.tile(pis, grid.shape[0])
    gated = np.asarray(decision_gate(jnp.asarray(n), jnp.asarray(pi), jnp.asarray(lo), hi))
    pi64 = pi.astype(np.float64)
    p_out = stats.binom.cdf(lo - 1, n, pi64) + stats.binom.sf(hi, n, pi64)
    assert gated.sum() > 1000 and gated[n == 200].any()  # the check has cases to judge
    bad = np.flatnonzero(gated & (p_out > 2.0**-GATE_LOG2))
    assert bad.size == 0, [(n[i], pi[i], lo[i], hi[i], p_out[i]) for i in bad[:5]]
    assert not bool(decision_gate(200, np.float32(0.995), jnp.int32(0), jnp.int32(199)))
    assert not bool(decision_gate(10_000, np.float32(0.5), jnp.int32(4709), jnp.int32(10_000)))
    assert bool(decision_gate(10_000, np.float32(0.5), jnp.int32(4690), jnp.int32(10_000)))


def test_decision_follows_the_binomial_tail_probability():
    """With a weak gate (2^-2) the exact path runs often: the decided event has the law
    Bernoulli(P[X < k_lo] + P[X > k_hi]) of scipy's binomial (z-test at significance 1e-4), and
    the cheap path never says "outside"."""
    n, pi, lo, hi, gate = 200, np.float32(0.4), 66, 94, 2
    assert bool(decision_gate(n, pi, jnp.int32(lo), jnp.int32(hi), gate))
    S = 400_000
    kb, ku = jax.random.split(jax.random.key(11))
    bits = jax.random.bits(kb, (S,), jnp.uint32)
    u2 = jax.random.uniform(ku, (S,))
    out, rare = jax.jit(
        jax.vmap(lambda b, u: decide_outside(b, u, n, pi, jnp.int32(lo), jnp.int32(hi), True, gate))
    )(bits, u2)
    out, rare = np.asarray(out), np.asarray(rare)
    want = stats.binom.cdf(lo - 1, n, float(pi)) + stats.binom.sf(hi, n, float(pi))
    z = (out.mean() - want) / math.sqrt(want * (1 - want) / S)
    assert abs(z) < Z_MAX, (out.mean(), want)
    assert not out[~rare].any()
    assert abs(rare.mean() - 0.25) < Z_MAX * math.sqrt(0.25 * 0.75 / S)


T, K, N_MC = 12, 2, 1500


@pytest.fixture(scope="module")
def small():
    c = lean_defaults(K, T).constants(K, T)
    no = f2_target(T, 0.33333, spread=0.2).machine
    return {"c": c, "no": no, "vera": make_vera(c), "lv": prefix_tree(no)}


@pytest.mark.slow
def test_decision_mode_matches_exact_acceptance(small):
    """The Alice zoo (small lies decided by the gate, large ones by drawing Bob's count, so
    both branches and the host driver's replays run) against honest Bob in decision mode: the
    Monte Carlo acceptance of every member agrees with the exact DP."""
    s = small
    c = s["c"]
    names, members = soundness_zoo(c)
    names, members = names + ["honest"], members + [zoo_alice(c, A_HONEST)]
    bob = honest_bob(c)
    exact = np.array([acceptance_exact(s["no"], a, bob, s["vera"], s["lv"]) for a in members])
    spec = debate_static(T, bob_draw="decision")
    m = len(members)
    batch = jax.tree.map(lambda x: np.repeat(np.asarray(x), N_MC, axis=0), stack(members))
    keys = trial_keys(jax.random.key(21), m * N_MC)
    out = run_trials(spec, s["no"], batch, bob, s["vera"], keys, axes=(None, 0, None, None))
    mc = np.asarray(out.alice_wins).reshape(m, N_MC).mean(axis=1)
    for nm, mm, e in zip(names, mc, exact):
        z = (mm - e) / math.sqrt(max(e * (1 - e), 1e-4) / N_MC)
        assert abs(z) < Z_MAX, (nm, mm, e)


@pytest.mark.slow
def test_decision_mode_honest_debates_at_scale():
    """F2, K = 2, T = 64, Lean's counts (N_B = 85k): honest acceptance is P_M(1) (z-test), no
    abort, every lane is resolved by the cheap path but for a 2^-24 share of steps, and play
    equals play_fast on the resolved lanes."""
    T64, n = 64, 2048
    c = lean_defaults(K, T64).constants(K, T64)
    fx = f2_target(T64, 2 / 3)
    spec = debate_static(T64, bob_draw="decision")
    a, b, v = honest_alice(c), honest_bob(c), make_vera(c)
    keys = trial_keys(jax.random.key(5), n)
    out, un = jax.jit(
        jax.vmap(lambda k: play_fast(spec, fx.machine, a, b, v, k)), compiler_options=LIGHT_COMPILE
    )(keys)
    un = np.asarray(un)
    assert un.sum() <= 2  # expected 2048 * 64 * (2^-24 + BTRS windows) ~ 0.01
    acc = float(np.mean(np.asarray(out.alice_wins)))
    assert abs(acc - fx.p1()) < Z_MAX * math.sqrt(fx.p1() * (1 - fx.p1()) / n)
    assert not np.asarray(out.aborted).any()
    ref = jax.jit(
        jax.vmap(lambda k: play(spec, fx.machine, a, b, v, k)), compiler_options=LIGHT_COMPILE
    )(keys[:128])
    ok = ~un[:128]
    for f in ("alice_wins", "aborted", "last_bit", "costs.rounds"):
        np.testing.assert_array_equal(
            np.asarray(attrgetter(f)(ref))[ok], np.asarray(attrgetter(f)(out))[:128][ok]
        )


def test_decision_mode_rejects_bad_input(small):
    with pytest.raises(ValueError, match="bob_draw"):
        debate_static(T, bob_draw="guess")
    with pytest.raises(ValueError, match="estimator='binomial'"):
        debate_static(T, bob_draw="decision", estimator="calls")
