"""The lazy exact draws (``bob_draw="lazy"``, spec DED 5.1/5.5, :mod:`dedebate.protocols.stochastic_lazy`):
the Hoeffding certificate checked against exact binomial tails, the law of one step against the
exact sum over Alice's counts, the tail sampler against scipy, whole debates against the exact DP
(every step on the rare path), and the one-word path against the exact path and P_M at Lean's
counts."""  # noqa: E501

import math
from operator import attrgetter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dedebate.agents.stochastic_players import A_HONEST, honest_alice, honest_bob, zoo_alice
from dedebate.core.binomial import binom_lower_tail, binom_lower_tail_sample
from dedebate.exact import acceptance_exact, checker_prob
from dedebate.machines.fixtures import f2_target
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols import stochastic_batch as sb
from dedebate.protocols.stochastic import (
    DebateParams,
    StepView,
    Vera,
    debate_static,
    lean_defaults,
    make_vera,
    paper_constants,
    play,
    play_fast,
    trial_keys,
)
from dedebate.protocols.stochastic_batch import run_trials
from dedebate.protocols.stochastic_lazy import cheap_path, lazy_gate, lazy_level, rare_step
from tests.fakes import LIGHT_COMPILE

Z_MAX = 3.89  # two-sided normal quantile at significance 1e-4

# Small counts certified at G = 0 (every step on the exact rare path), with aborts that happen.
SMALL = DebateParams(
    name="small",
    K=2.0,
    T=12,
    n_alice=400,
    n_bob=400,
    n_vera=800,
    tau_bob=0.1,
    tau_vera=0.06,
    s=0.05,
    b=0.1,
)


def _exact_tail_probs(pi, lo, hi, na, nb, tau):
    """Float64: ``max_y P[X not in [lo, hi] | y]`` and ``max_{X in [lo, hi]} a_X`` (scipy)."""
    n1 = na - 1
    q = max(stats.binom.cdf(lo - y - 1, n1, pi) + stats.binom.sf(hi - y, n1, pi) for y in (0, 1))
    x = np.arange(lo, hi + 1)
    # Bob's abort probability for claim float32(x / N_A): 1 - P[|p - Z/N_B| < tau], computed on
    # the float32 claim the protocol uses (the checker itself rounds in float32; FLOAT_SLACK
    # covers that rounding, so the real-number probability is what the certificate bounds).
    p = (x.astype(np.float32) / np.float32(na)).astype(np.float64)
    a = 1.0 - checker_prob(p, nb, float(np.float32(tau)), pi)
    return q, float(a.max())


@pytest.mark.parametrize("which", ["lean-K2-T64", "lean-K1-T256", "paper-K1-T64", "small"])
def test_certificate_bounds_hold_exactly(which):
    """Where the gate holds at level G, the exact tails satisfy q <= 2^-(G+1) and a_X <=
    2^-(G+1) on the whole typical set (an independent float64 computation)."""
    if which == "small":
        c, max_g = SMALL, 0
    else:
        kind, K, T = which.split("-")
        K, T = int(K[1:]), int(T[1:])
        c = lean_defaults(K, T).constants(K, T) if kind == "lean" else paper_constants(K, T)
        max_g = 24
    rng = np.random.default_rng(0)
    pis = np.concatenate([[0.5, 2 / 3, 0.05, 0.95], rng.uniform(0.01, 0.99, 12)]).astype(np.float32)
    gated = 0
    for pi in pis:
        gate, lo, hi, g = lazy_gate(jnp.float32(pi), c.n_alice, c.n_bob, c.tau_bob, max_log2=max_g)
        if not bool(gate):
            continue
        gated += 1
        q, a = _exact_tail_probs(float(pi), int(lo), int(hi), c.n_alice, c.n_bob, c.tau_bob)
        bound = 2.0 ** -(int(g) + 1)
        assert q <= bound and a <= bound, (which, float(pi), int(g), q, a, bound)
    assert gated >= len(pis) // 2  # the certificate is not vacuous


def test_level_is_the_default_24_at_lean_and_paper_counts_and_drops_for_small_counts():
    for K, T in [(1, 64), (2, 256), (4, 1024)]:
        for c in (lean_defaults(K, T).constants(K, T), paper_constants(K, T)):
            g, _, ok = lazy_level(c.n_alice, c.n_bob, c.tau_bob)
            assert int(g) == 24 and bool(ok), (c.name, K, T)
    g, _, ok = lazy_level(SMALL.n_alice, SMALL.n_bob, SMALL.tau_bob)
    assert 0 <= int(g) <= 2 and bool(ok)
    g, _, ok = lazy_level(SMALL.n_alice, SMALL.n_bob, SMALL.tau_bob, 0)
    assert int(g) == 0 and bool(ok)
    g, _, ok = lazy_level(100, 100, 0.01)
    assert int(g) == -1 and not bool(ok)  # nothing certified: every step drawn as usual


def test_tail_sampler_is_the_conditional_quantile():
    """binom_lower_tail_sample(k, n, p, U * tail) is X | X <= k by inversion: on a grid of U it
    returns scipy's conditional quantile, except where float32 rounding of the running sum
    straddles U (then it is off by one)."""
    n, p, k = 5000, 0.3, 1420  # mean 1500, k ~ 2.9 sd below
    tail = float(binom_lower_tail(k, n, p))
    assert tail == pytest.approx(stats.binom.cdf(k, n, p), rel=1e-4)
    us = (np.arange(2000) + 0.5) / 2000
    # jitted, as in the protocol's programs: one compilation instead of one per operation
    got = np.asarray(
        jax.jit(jax.vmap(lambda u: binom_lower_tail_sample(k, n, p, u * tail)))(
            jnp.asarray(us, jnp.float32)
        )
    )
    # P[j <= X <= k] >= U * tail: the largest such j
    upper = stats.binom.cdf(k, n, p) - stats.binom.cdf(np.arange(k + 1) - 1, n, p)
    want = np.array([np.nonzero(upper >= u * upper[0] * (1 - 1e-12))[0].max() for u in us])
    off = got != want
    assert off.mean() < 0.01 and np.all(np.abs(got - want) <= 1)
    assert np.all(got <= k)


def _one_step(c, pi, g_max, n, seed):
    """n independent lazy steps at probability ``pi`` (the composition play_lazy uses)."""
    a, b = honest_alice(c), honest_bob(c)
    level = lazy_level(a.n_samples, b.n_samples, b.tau, g_max)
    view = StepView(
        t=jnp.int32(0),
        pi=jnp.float32(pi),
        prev_bit=jnp.int32(0),
        ones=jnp.int32(0),
        state=None,
        T=2,
    )

    def step(key):
        word = jax.random.bits(jax.random.fold_in(key, 0), (), jnp.uint32)
        gate, lo, hi, g = lazy_gate(jnp.float32(pi), a.n_samples, b.n_samples, b.tau, level)
        cheap, y_c = cheap_path(word, jnp.float32(pi), g)
        cheap = gate & cheap
        # Bob's count sample_binomial(fold_in(key, 2), N_B, pi), drawn in Alice's loop
        y_r, cont_r, p_r = rare_step(
            jax.random.fold_in(key, 1),
            word,
            jnp.float32(pi),
            lo,
            hi,
            g,
            a,
            b,
            view,
            gate & ~cheap,
            z_key=jax.random.fold_in(key, 2),
        )
        return gate, jnp.where(cheap, y_c, y_r), cheap | cont_r, p_r

    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(seed), i))(jnp.arange(n))
    f = jax.jit(jax.vmap(step), compiler_options=LIGHT_COMPILE)
    return [np.asarray(x) for x in f(keys)]


@pytest.mark.parametrize("g_max", [3])  # the one-word path and the rare path (1/8 of steps)
def test_one_step_has_the_exact_joint_law(g_max):
    """The law of (coin, Bob continues) and the mean claim on an abort, against the exact sums
    over Alice's count: P[y = 1, cont] = sum_k P(k) (k/N_A) (1 - a_k), P[abort] = sum_k P(k) a_k,
    E[p | abort] = sum_k P(k) a_k (k/N_A) / P[abort]."""
    c, pi, n = SMALL, 0.37, 250_000
    gate, y, cont, p = _one_step(c, pi, g_max, n, seed=11)
    assert gate.all()
    k = np.arange(c.n_alice + 1)
    pk = stats.binom.pmf(k, c.n_alice, pi)
    claim = (k.astype(np.float32) / np.float32(c.n_alice)).astype(np.float64)
    a_k = 1.0 - checker_prob(claim, c.n_bob, float(np.float32(c.tau_bob)), pi)
    want = {
        "y1_cont": np.sum(pk * k / c.n_alice * (1 - a_k)),
        "y0_cont": np.sum(pk * (1 - k / c.n_alice) * (1 - a_k)),
        "abort": np.sum(pk * a_k),
    }
    got = {
        "y1_cont": np.mean((y == 1) & cont),
        "y0_cont": np.mean((y == 0) & cont),
        "abort": np.mean(~cont),
    }
    for name, w in want.items():
        z = (got[name] - w) / math.sqrt(w * (1 - w) / n)
        assert abs(z) < Z_MAX, (name, got[name], w)
    assert want["abort"] > 5e-4  # the abort branch is exercised (~900 aborts here)
    mean_p = np.sum(pk * a_k * claim) / want["abort"]
    sd_p = math.sqrt(np.sum(pk * a_k * (claim - mean_p) ** 2) / want["abort"])
    got_p = p[~cont]
    assert abs(got_p.mean() - mean_p) < Z_MAX * sd_p / math.sqrt(got_p.size)


@pytest.fixture(scope="module")
def small_debates():
    """F2 no-instance, T = 12, SMALL counts at G = 0 (every step on the exact rare path),
    20,000 debates for three Veras (never accepts / honest / always accepts)."""
    T, n = SMALL.T, 20_000
    m = f2_target(T, 1 / 3, spread=0.2).machine
    a, b = honest_alice(SMALL), honest_bob(SMALL)
    spec = debate_static(T, bob_draw="lazy", lazy_gate_log2=0)
    f = jax.jit(
        jax.vmap(lambda v, k: play(spec, m, a, b, v, k), in_axes=(None, 0)),
        compiler_options=LIGHT_COMPILE,
    )
    keys = trial_keys(jax.random.key(3), n)
    lv = prefix_tree(m)
    out = {}
    for tv in (0.0, SMALL.tau_vera, 2.0):
        v = Vera(n_samples=jnp.int32(SMALL.n_vera), tau=jnp.float32(tv))
        out[tv] = (f(v, keys), acceptance_exact(m, a, b, v, lv))
    return n, out


@pytest.mark.slow
def test_debates_on_the_rare_path_match_the_exact_dp(small_debates):
    """Acceptance against the exact DP for the three Veras, and the abort rate against the
    exact P[abort] = acc(always accepts) - acc(never accepts)."""
    n, out = small_debates
    for tv, (o, exact) in out.items():
        mc = float(np.mean(np.asarray(o.alice_wins)))
        assert abs(mc - exact) < Z_MAX * math.sqrt(exact * (1 - exact) / n), (tv, mc, exact)
    p_abort = out[2.0][1] - out[0.0][1]
    mc_abort = float(np.mean(np.asarray(out[SMALL.tau_vera][0].aborted)))
    assert p_abort > 1e-3
    assert abs(mc_abort - p_abort) < Z_MAX * math.sqrt(p_abort * (1 - p_abort) / n)
    rounds = np.asarray(out[SMALL.tau_vera][0].costs.rounds)
    aborted = np.asarray(out[SMALL.tau_vera][0].aborted)
    assert np.all(rounds[~aborted] == SMALL.T) and np.all(rounds[aborted] <= SMALL.T)


@pytest.mark.slow
def test_one_word_path_at_lean_counts():
    """F2, K = 2, T = 64, Lean's counts: the level is 24; honest acceptance is P_M(1) (z-test);
    no abort; at G = 4 (forced replays) run_trials (one-word path, then unbatched replays)
    equals the exact play of each trial alone."""
    T, n = 64, 4096
    c = lean_defaults(2, T).constants(2, T)
    fx = f2_target(T, 2 / 3)
    a, b, v = honest_alice(c), honest_bob(c), make_vera(c)
    spec = debate_static(T, bob_draw="lazy")
    keys = trial_keys(jax.random.key(5), n)
    out, un = jax.jit(jax.vmap(lambda k: play_fast(spec, fx.machine, a, b, v, k)))(keys)
    un = np.asarray(un)
    assert un.sum() <= 2  # expected 4096 * 64 * 2^-24 ~ 0.016
    acc = float(np.mean(np.asarray(out.alice_wins)))
    assert abs(acc - fx.p1()) < Z_MAX * math.sqrt(fx.p1() * (1 - fx.p1()) / n)
    # G = 4: about 64 / 16 steps per debate take the exact path, so most lanes replay.
    # run_trials keeps play_fast's result on resolved lanes and replays the others, so its
    # equality with vmap(play) covers both.
    spec4 = debate_static(T, bob_draw="lazy", lazy_gate_log2=4)
    k64 = keys[:64]
    driver = run_trials(spec4, fx.machine, a, b, v, k64)
    fast = sb._program("fast", (None,) * 4, tuple(jax.local_devices()))  # run_trials' first
    _, un4 = fast(spec4, sb.replay_chunk(64), fx.machine, a, b, v, k64)
    assert 0 < int(np.asarray(un4).sum()) < 64
    # the reference: each trial played alone by the exact play
    play_one = jax.jit(play, static_argnums=0, compiler_options=LIGHT_COMPILE)
    direct = [play_one(spec4, fx.machine, a, b, v, k64[i]) for i in range(64)]
    for f in (
        "alice_wins",
        "aborted",
        "abort_step",
        "last_bit",
        "costs.rounds",
        "costs.alice_queries",
    ):
        np.testing.assert_array_equal(
            np.asarray(attrgetter(f)(driver)),
            np.array([np.asarray(attrgetter(f)(o)) for o in direct]),
        )


def test_lazy_mode_rejects_bad_input():
    c = SMALL
    m = f2_target(c.T, 1 / 3).machine
    spec = debate_static(c.T, bob_draw="lazy")
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="honest Alice"):
        play(spec, m, zoo_alice(c, A_HONEST), honest_bob(c), make_vera(c), key)
    with pytest.raises(ValueError, match="trusted coin"):
        debate_static(c.T, bob_draw="lazy", two_party_coin=True)
    with pytest.raises(ValueError, match="estimator='binomial'"):
        debate_static(c.T, bob_draw="lazy", estimator="calls")
    with pytest.raises(ValueError, match="lazy_gate_log2"):
        debate_static(c.T, bob_draw="lazy", lazy_gate_log2=25)


@pytest.mark.parametrize("g", [1, 3, 8, 24])
def test_cheap_coin_is_one_on_a_pi_share_of_the_cheap_words(g):
    """A certified step's cheap words are ``[cut, 2^32)``, ``cut = 2^(32-G)``; its coin is 1 on
    the first ``floor(pi (2^32 - cut))`` of them (Python integers here), to the float32 rounding
    of that product (2^-24 of it, docstring): P(y = 1 | cheap) = pi, not pi / (1 - 2^-G)."""
    cut = 2 ** (32 - g)
    span = 2**32 - cut
    for pi in np.float32([0.1, 1 / 3, 0.5, 0.9]):
        ref = math.floor(float(pi) * span)
        tol = math.ceil(span * 2.0**-24) + 1
        start = ref - tol - 2
        words = jnp.asarray(cut + start + np.arange(2 * tol + 5), jnp.uint32)
        cheap, y = cheap_path(words, pi, jnp.int32(g))
        y = np.asarray(y)
        assert bool(np.all(cheap)) and np.all(np.diff(y) <= 0), (g, pi)  # ones, then zeros
        assert abs(start + int(y.sum()) - ref) <= tol, (g, pi, start + int(y.sum()), ref)
    below, _ = cheap_path(jnp.asarray([cut - 1, 0], jnp.uint32), np.float32(0.5), jnp.int32(g))
    assert not np.any(below)  # the rare words
    assert not bool(cheap_path(jnp.uint32(2**32 - 1), np.float32(0.5), jnp.int32(0))[0])
