"""Self-play for the stochastic-oracle debate (spec DED 5.1, 5.3).

The DP of :mod:`dedebate.exact.selfplay` against the repository's exact acceptance
(:mod:`dedebate.exact.acceptance`) and against Monte-Carlo play; tiny training runs that
reach known answers; the experiment at quick size with the fake context.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import experiments.stochastic_selfplay as E
from dedebate.agents import selfplay_players as pl
from dedebate.agents.stochastic_players import (
    A_PER_STEP,
    A_SHIFT,
    honest_alice,
    honest_bob,
    zoo_alice,
)
from dedebate.exact import acceptance_exact, checker_prob
from dedebate.exact import selfplay as xs
from dedebate.exact.best_response import bob_best_response
from dedebate.lab.evaluate import run_module
from dedebate.machines.fixtures import f1_target, f2_target
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import (
    StepView,
    debate_static,
    lean_defaults,
    make_vera,
    trial_keys,
)
from dedebate.protocols.stochastic_batch import run_trials
from dedebate.training import stochastic_selfplay as sp
from tests.fakes import FakeContext


def _setup(fixture):
    K, T = fixture.K, fixture.T
    params = lean_defaults(K, T)
    return params, params.constants(K, T), prefix_tree(fixture.machine)


def _zoo_levels(levels, lies, w, w_dev, w_prev, constants):
    """Per-level claims, aborts (via this module's Bob) and exact Vera for a ZooAlice A_PER_STEP
    and a ZooBob B_LEARNED with deviation scale b."""
    T = len(levels)
    codes = pl.level_codes(T)
    bob = pl.BobParams(
        w=jnp.asarray(w, jnp.float32), w_dev=jnp.float32(w_dev), w_prev=jnp.float32(w_prev)
    )
    ps, aborts, veras = [], [], []
    for t in range(T):
        pi = np.asarray(levels[t], np.float64)
        p = pi + lies[t]
        a = pl.bob_abort(
            bob,
            t,
            jnp.abs(jnp.asarray(p - pi, jnp.float32)),
            jnp.asarray(codes[t]["prev"]),
            jnp.float32(constants.b),
        )
        ps.append(p)
        aborts.append(np.asarray(a, np.float64))
        veras.append(checker_prob(p, constants.n_vera, constants.tau_vera, pi))
    return ps, aborts, veras, bob


@pytest.mark.parametrize(
    "make", [lambda: f2_target(5, 0.3, spread=0.2), lambda: f1_target(4, 0.7, pi=0.5, spread=0.3)]
)
def test_dp_equals_exact_acceptance_for_fixed_policies(make):
    """dp_value (numpy float64 and jnp float32) == acceptance_exact for a per-step-lie Alice and a
    learned-family Bob (independent implementations of spec DED 5.1)."""
    fx = make()
    _, constants, levels = _setup(fx)
    T = fx.T
    rng = np.random.default_rng(3)
    lies = rng.uniform(-2, 2, T) * constants.tau_vera  # inside and outside Vera's window
    w, w_dev, w_prev = rng.normal(-1.0, 1.0, T), 1.3, -0.7
    ps, aborts, veras, bob = _zoo_levels(levels, lies, w, w_dev, w_prev, constants)
    ref = acceptance_exact(
        fx.machine,
        zoo_alice(constants, A_PER_STEP, lies=lies),
        pl.bob_as_zoo(bob, constants.b),
        make_vera(constants),
        levels,
    )
    assert 0.02 < ref < 0.98
    assert float(xs.dp_value(ps, aborts, veras)) == pytest.approx(ref, abs=1e-6)
    got32 = xs.dp_value(
        [jnp.asarray(x, jnp.float32) for x in ps],
        [jnp.asarray(x, jnp.float32) for x in aborts],
        [jnp.asarray(x, jnp.float32) for x in veras],
    )
    assert float(got32) == pytest.approx(ref, abs=2e-5)
    # reach probabilities sum to the expected number of steps played
    reach = xs.reach_levels(ps, aborts)
    assert float(reach[0][0]) == 1.0
    assert all(float(r.sum()) <= 1.0 + 1e-12 for r in reach)
    # and weigh what the backward DP does: P[abort] is the value's change from Vera rejecting
    # to Vera accepting everywhere, and with Vera rejecting the value is the last level's mass
    # that plays and draws 1 (float64: 1e-12 is 4,000 ulp of sums of at most 2^T terms)
    zeros, ones = ([np.full_like(v, x) for v in veras] for x in (0.0, 1.0))
    p_abort = sum(float((r * a).sum()) for r, a in zip(reach, aborts))
    assert p_abort == pytest.approx(xs.dp_value(ps, aborts, ones) - xs.dp_value(ps, aborts, zeros))
    assert 0.01 < p_abort < 0.99  # neither side empty
    ends = float((reach[-1] * (1.0 - aborts[-1]) * np.clip(ps[-1], 0.0, 1.0)).sum())
    assert ends == pytest.approx(float(xs.dp_value(ps, aborts, zeros)), abs=1e-12)


def test_measure_pair_matches_exact_acceptance_for_a_constant_shift_alice():
    """An Alice MLP with zero weights and output bias delta/b claims pi + delta: measure_pair()'s
    exact values equal acceptance_exact's against the trained-family Bob and honest Bob."""
    fx = f2_target(5, 0.3, spread=0.2)
    _, constants, levels = _setup(fx)
    delta = 0.6 * constants.tau_vera
    alice = pl.AliceParams(
        w1=jnp.zeros((pl.N_FEATURES, 4)),
        b1=jnp.zeros(4),
        w2=jnp.zeros(4),
        b2=jnp.float32(delta / constants.b),
    )
    bob = pl.BobParams(
        w=jnp.linspace(-3.0, 0.5, fx.T), w_dev=jnp.float32(2.0), w_prev=jnp.float32(0.4)
    )
    ev = xs.measure_pair(levels, alice, bob, constants)
    za = zoo_alice(constants, A_SHIFT, delta)
    vera = make_vera(constants)
    ref = acceptance_exact(fx.machine, za, pl.bob_as_zoo(bob, constants.b), vera, levels)
    ref_h = acceptance_exact(fx.machine, za, honest_bob(constants), vera, levels)
    assert ev["value"] == pytest.approx(ref, abs=1e-6)
    assert ev["value_vs_honest_bob"] == pytest.approx(ref_h, abs=1e-6)
    assert ev["tracking"] == pytest.approx(delta, rel=1e-5)
    # best responses bracket the pair's value; Bob's is best_response's (its own DP over claims;
    # the MLP's claims and the zoo Alice's round apart in float32, as for the value above)
    assert ev["bob_best_response"] <= ev["value"] + 1e-12 <= ev["alice_best_response"] + 1e-12
    assert ev["bob_best_response"] == pytest.approx(
        bob_best_response(fx.machine, za, vera, levels), abs=1e-6
    )
    # Bob's probes: every must-abort deviation is >= b (logit >= -54 + 60 = 6 there), every
    # must-not one < s (logit < -54 + 60 s / b), so the reach-weighted rates are bounded by them
    step = pl.BobParams(w=jnp.full(fx.T, -54.0), w_dev=jnp.float32(60.0), w_prev=jnp.float32(0.0))
    probes = xs.measure_pair(levels, alice, step, constants)
    assert probes["hit"] >= 1.0 / (1.0 + math.exp(-6.0)) - 1e-12
    low = -54.0 + 60.0 * float(constants.s) / float(constants.b)
    assert 0.0 < probes["false_alarm"] <= 1.0 / (1.0 + math.exp(-low)) + 1e-15


def _sup_one_step(pi, n, tau, a):
    """Alice's best response on a one-step tree against a constant abort ``a``, exactly: Vera is
    constant between the points ``x/n +- tau`` and the coin linear in p, so the supremum is a
    limit at a cell's end or a value at a breakpoint."""
    xs_ = np.arange(n + 1) / n
    points = np.unique(np.concatenate([xs_ - tau, xs_ + tau, [0.0, 1.0]]))
    eps = 1e-12
    claims = np.concatenate([points, points - eps, points + eps])
    vera = checker_prob(claims, n, tau, pi)
    return float(np.max((1.0 - a) * np.clip(claims, 0.0, 1.0) + a * vera))


@pytest.mark.parametrize("pi, n, tau, a", [(0.4, 5, 0.15, 0.3), (0.8, 7, 0.05, 0.9)])
def test_alices_best_response_bounds_bracket_the_exact_supremum(pi, n, tau, a):
    """One step, a constant abort, a coarse Vera (n <= 7): the branch-and-bound bounds bracket the
    supremum computed exactly over Vera's breakpoints, and differ by at most tol."""
    sup = _sup_one_step(pi, n, tau, a)
    lo, hi = xs.alice_best_response_bounds(
        [np.array([pi])], [lambda d, node: np.full(np.shape(d), a)], n, tau, tol=1e-6
    )
    assert lo <= sup + 1e-9 and sup <= hi + 1e-12 and hi - lo <= 1e-6


@pytest.mark.parametrize("w_dev", [-2.0, -0.01, 3.0, 40.0])
def test_alices_best_response_bounds_hold_against_any_claim_of_alice(w_dev):
    """value <= lower <= upper, upper - lower <= T tol, and no claim policy, however far from pi
    (a Bob with w_dev < 0 aborts less there), beats the upper bound: Alice's best response by the
    same DP over a dense claim grid on [-5, 6] (an independent lower bound) stays below it."""
    fx = f2_target(3, 0.75, spread=0.2)
    _, constants, levels = _setup(fx)
    alice = pl.init_alice(jax.random.key(0), 8, 2.0)
    bob = pl.BobParams(
        w=jnp.linspace(-2.0, 0.0, fx.T), w_dev=jnp.float32(w_dev), w_prev=jnp.float32(0.4)
    )
    ev = xs.measure_pair(levels, alice, bob, constants)
    lo, hi = ev["alice_best_response"], ev["alice_best_response_ub"]
    assert ev["value"] - 1e-6 * fx.T <= lo <= hi <= lo + 1e-6 * fx.T  # float32 aborts in value
    assert ev["gap_ub"] - ev["gap"] == pytest.approx(hi - lo, abs=1e-15)
    n, tau, scale = int(constants.n_vera), float(np.float32(constants.tau_vera)), constants.b
    codes = pl.level_codes(fx.T)
    grid = np.concatenate([np.linspace(-5.0, 6.0, 20001), np.linspace(-0.05, 1.05, 20001)])
    V = None
    for t in range(fx.T - 1, -1, -1):
        pi = np.asarray(levels[t], np.float64)[:, None]
        p = grid[None, :]
        z = float(bob.w[t]) + float(bob.w_dev) * np.abs(p - pi) / scale
        a = 1.0 / (1.0 + np.exp(-(z + float(bob.w_prev) * codes[t]["prev"][:, None])))
        coin = np.clip(p, 0.0, 1.0)
        v0, v1 = (0.0, 1.0) if V is None else (V[: V.size // 2, None], V[V.size // 2 :, None])
        V = ((1.0 - a) * (coin * v1 + (1.0 - coin) * v0) + a * checker_prob(p, n, tau, pi)).max(1)
    assert V is not None and float(V[0]) <= hi + 1e-12


def test_convergence_counts_a_seed_by_the_upper_bound_on_its_gap():
    """A seed whose gap's lower bound is within gap_tol but whose upper bound is not is not
    counted as converged (the finding and the sweep rows' converged_frac alike)."""
    fx = f2_target(4, 0.75, spread=0.2)
    _, constants, _ = _setup(fx)
    keys = ("value", "tracking", "hit", "false_alarm", "false_alarm_c", "max_dev_visited")
    ev = [
        dict.fromkeys(keys, 0.5) | {"gap": 0.04, "gap_ub": ub, "bob_best_response": 0.5}
        for ub in (0.04, 0.06, 0.06, 0.06)
    ]
    results = {case: {"ev": ev, "p1": 0.5} for case in E.CASES}
    found = E.findings(results, constants, 0.05, (0.6, 0.4))["convergence"]
    assert [c.value for c in found] == [0.25, 0.25]
    measured = {
        case: ([e | {"value_vs_honest_bob": 0.5} for e in ev], [0.5] * 4) for case in E.CASES
    }
    assert E.point_metrics(measured, 0.05)["yes/converged_frac"] == 0.25


def test_level_codes_hold_each_prefixs_last_bit_and_its_ones():
    """Prefix ``c`` of length t has step j's bit at ``(c >> j) & 1``: ``prev`` is bit t - 1
    (0 at t = 0) and ``ones`` the count of ones, bit by bit (the DP's features were once those
    of ``c >> 1``, and only a Monte-Carlo test at 3 standard errors could have seen it)."""
    levels = pl.level_codes(5)
    assert len(levels) == 5
    for t, level in enumerate(levels):
        assert level["prev"].shape == level["ones"].shape == (2**t,)
        for c in range(2**t):
            bits = [(c >> j) & 1 for j in range(t)]
            assert level["ones"][c] == sum(bits)
            assert level["prev"][c] == (bits[-1] if t else 0)


def test_initial_players_take_their_sweepable_scales():
    """``bob_init`` shifts every abort logit; ``alice_init`` scales Alice's output layer, and 0
    makes her honest (both are swept rates, so a dropped scale would be silently ignored)."""
    key = jax.random.key(7)
    shift = pl.init_bob(key, 6, -1.0).w - pl.init_bob(key, 6, -2.0).w
    np.testing.assert_allclose(np.asarray(shift), 1.0, rtol=0, atol=2**-21)  # |w| < 4: ulp 2^-22
    one, two = pl.init_alice(key, 8, 1.0), pl.init_alice(key, 8, 2.0)
    np.testing.assert_array_equal(np.asarray(two.w2), 2 * np.asarray(one.w2))  # exact: times 2
    np.testing.assert_array_equal(np.asarray(two.b2), 2 * np.asarray(one.b2))
    np.testing.assert_array_equal(np.asarray(two.w1), np.asarray(one.w1))
    honest = pl.init_alice(key, 8, 0.0)
    feats = pl.node_features(jnp.arange(4), jnp.full(4, 0.3), jnp.ones(4), jnp.arange(4), 4)
    pi = jnp.full(4, 0.3)
    np.testing.assert_array_equal(
        np.asarray(pl.alice_claim(honest, feats, pi, 0.1)), np.asarray(pi)
    )


def test_learned_alice_player_claims_what_the_dp_uses():
    """The play() player and the DP compute the same claim at every prefix (same features)."""
    fx = f2_target(4, 0.75, spread=0.2)
    _, constants, levels = _setup(fx)
    alice = pl.init_alice(jax.random.key(0), 8, 2.0)
    bob = pl.init_bob(jax.random.key(1), fx.T)
    inputs = xs.level_inputs(levels)
    p, _ = xs.policy_nodes(alice, bob, inputs, jnp.float32(constants.b), jnp.float32(constants.b))
    player = pl.learned_alice(alice, constants.b)

    def claim(t, pi, prev, ones):
        view = StepView(t=t, pi=pi, prev_bit=prev, ones=ones, state=None, T=fx.T)
        return player.claim(view, 0, 0.0)

    got = jax.vmap(claim)(inputs["t"], inputs["pi"], inputs["prev"], inputs["ones"])
    assert p.shape == (2**fx.T - 1,)
    np.testing.assert_allclose(np.asarray(got), np.asarray(p), rtol=0, atol=1e-7)


def test_surrogate_value_close_to_exact():
    """The training surrogate (normal-approximation Vera) stays within 0.01 of the exact value."""
    fx = f2_target(5, 0.3, spread=0.2)
    _, constants, levels = _setup(fx)
    alice = pl.init_alice(jax.random.key(2), 8, 0.3)
    bob = pl.init_bob(jax.random.key(3), fx.T, -1.0)
    hp = sp.selfplay_params(constants)
    sur = float(sp.surrogate_value(alice, bob, xs.level_inputs(levels), hp))
    assert sur == pytest.approx(xs.measure_pair(levels, alice, bob, constants)["value"], abs=0.01)


@pytest.mark.slow
def test_monte_carlo_play_of_learned_players_matches_the_dp():
    """run_trials with the learned Alice and the Bob as a ZooBob: within 3 SE of the exact DP."""
    fx = f2_target(4, 0.75, spread=0.2)
    _, constants, levels = _setup(fx)
    alice = pl.init_alice(jax.random.key(4), 8, 0.5)  # lies ~ b/2, straddling Vera's window
    bob = pl.BobParams(w=jnp.full((fx.T,), -1.5), w_dev=jnp.float32(1.0), w_prev=jnp.float32(0.5))
    exact = xs.measure_pair(levels, alice, bob, constants)["value"]
    n = 6000
    out = run_trials(
        debate_static(fx.T),
        fx.machine,
        pl.learned_alice(alice, constants.b),
        pl.bob_as_zoo(bob, constants.b),
        make_vera(constants),
        trial_keys(jax.random.key(9), n),
    )
    mc = float(np.mean(np.asarray(out.alice_wins)))
    se = math.sqrt(exact * (1 - exact) / n)
    assert 0.05 < exact < 0.95
    assert abs(mc - exact) <= 3 * se


def test_trained_bob_catches_a_lying_alice():
    """Bob alone (300 Adam steps) against Alice claiming pi + 1 (the coin always gives 1) on a
    no-instance: acceptance falls below the soundness bound (spec DED 5.3), exactly; the
    untrained Bob (aborting ~12% per step, deviation-blind) is above it."""
    fx = f2_target(4, 0.25, spread=0.2)
    params, constants, levels = _setup(fx)
    alice = pl.AliceParams(
        w1=jnp.zeros((pl.N_FEATURES, 4)),
        b1=jnp.zeros(4),
        w2=jnp.zeros(4),
        b2=jnp.float32(1.0 / constants.b),
    )  # claim pi + 1
    bob0 = pl.init_bob(jax.random.key(5), fx.T)
    hp = sp.selfplay_params(constants)
    bob = jax.jit(sp.make_train_bob(300))(xs.level_inputs(levels), hp, alice, bob0)
    bound = 1.0 - params.soundness(fx.K, fx.T, 1.0 - fx.p1())
    before = xs.measure_pair(levels, alice, bob0, constants)["value"]
    after = xs.measure_pair(levels, alice, bob, constants)
    assert before > bound
    assert after["value"] < bound


QUICK = E.Config(**E.SIZES["quick"])


def _quick_setup():
    """The quick size's yes-instance, static and hparams (the experiment's training programs)."""
    cfg = QUICK
    fx = f2_target(cfg.T, cfg.p_yes, spread=cfg.spread)
    params, constants, levels = _setup(fx)
    static = sp.SelfPlayStatic(T=cfg.T, hidden=cfg.hidden, steps=cfg.steps, log_every=cfg.log_every)
    hp = sp.selfplay_params(
        constants,
        lr_a=cfg.lr_a,
        lr_b=cfg.lr_b,
        n_b=cfg.n_b,
        alice_init=cfg.alice_init,
        bob_init=cfg.bob_init,
        vera_grad_mix=cfg.vera_grad_mix,
    )
    keys = jnp.stack([jax.random.fold_in(jax.random.key(11), s) for s in range(cfg.seeds)])
    return fx, params, constants, levels, static, hp, keys


@pytest.fixture(scope="module")
def quick_trained():
    """Self-play at quick size on the yes-instance as one program (train_grid), 4 seeds."""
    fx, params, constants, levels, static, hp, keys = _quick_setup()
    alice, bob, mon = sp.train_grid(static)(xs.level_inputs(levels), hp, keys)
    return alice, bob, mon


def test_self_play_yes_instance_reaches_completeness_and_honest_claims(quick_trained):
    """Self-play (quick size: T = 4, 4 seeds, 300 Alice updates, n_B = 5) on a yes-instance:
    every trained pair's exact acceptance >= Lean's guarantee at a 2/3 majority and Alice's reach-weighted |p - pi| < b;
    honest Alice vs every trained Bob >= the completeness bound (proven, spec DED 5.3)."""  # noqa: E501
    cfg = QUICK
    fx, params, constants, levels, static, hp, keys = _quick_setup()
    alice, bob, mon = quick_trained
    assert mon.value.shape == (cfg.seeds, cfg.steps // cfg.log_every)
    comp = params.completeness(fx.K, fx.T, fx.p1())
    for s in range(cfg.seeds):
        ev = xs.measure_pair(levels, xs.take(alice, s), xs.take(bob, s), constants)
        assert ev["value"] >= E.guaranteed_sides(fx.T, fx.K)[0]
        assert ev["tracking"] < constants.b
        h = acceptance_exact(
            fx.machine,
            honest_alice(constants),
            pl.bob_as_zoo(xs.take(bob, s), constants.b),
            make_vera(constants),
            levels,
        )
        assert h >= comp


def test_every_trained_player_measured_against_honest_play_on_either_instance(quick_trained):
    """What the gating rows take over every row's players: honest Alice against each trained Bob
    (acceptance_exact, as above) and each trained Alice against honest Bob (the value
    measure_pair reports) on this instance; and on the no-instance, where these players were not
    trained, Lean's soundness bound holds for these Alices too (spec DED 5.3: every strategy)."""
    fx, params, constants, levels, *_ = _quick_setup()
    alice, bob, _ = quick_trained
    honest = xs.honest_alice_against(fx, levels, constants, bob)
    vs_honest = xs.against_honest_bob(levels, constants, alice, bob)
    for s in range(QUICK.seeds):
        a, b = xs.take(alice, s), xs.take(bob, s)
        zoo_bob = pl.bob_as_zoo(b, constants.b)
        vera = make_vera(constants)
        assert honest[s] == acceptance_exact(
            fx.machine, honest_alice(constants), zoo_bob, vera, levels
        )
        assert vs_honest[s] == xs.measure_pair(levels, a, b, constants)["value_vs_honest_bob"]
    no = f2_target(QUICK.T, QUICK.p_no, spread=QUICK.spread)
    lv_no = prefix_tree(no.machine)
    sound_acc = 1.0 - params.soundness(no.K, no.T, 1.0 - no.p1())
    assert max(xs.against_honest_bob(lv_no, constants, alice, bob)) <= sound_acc


@pytest.mark.slow
def test_chunked_training_is_bit_equal_to_one_program(quick_trained):
    """init_grid + chunk_grid over uneven chunks (4 + 4 + 4 + 3 monitor periods) make exactly
    the updates of train_grid (bit-equal players and monitors): what makes resume reproduce the
    uninterrupted run and keeps the chunked experiment's numbers those of one program. At the
    quick size, so the one-program run is the module's and the init and 3-period chunk
    programs are the experiment's (test_experiment_quick)."""
    fx, params, constants, levels, static, hp, keys = _quick_setup()
    inputs = xs.level_inputs(levels)
    alice, bob, mon = quick_trained
    lengths = sp.chunk_lengths(sp.n_periods(static), 4)
    assert (
        lengths == (4, 4, 4, 3) and sp.chunk_lengths(sp.n_periods(static), QUICK.chunks) == (3,) * 5
    )
    carry, mons = sp.init_grid(static)(hp, keys), []
    for length in lengths:
        carry, m = sp.chunk_grid(static, length)(inputs, hp, carry)
        mons.append(m)
    for x, y in zip(jax.tree.leaves((alice, bob)), jax.tree.leaves((carry.alice, carry.bob))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    for name in ("value", "tracking"):
        np.testing.assert_array_equal(
            np.asarray(getattr(mon, name)),
            np.concatenate([np.asarray(getattr(m, name)) for m in mons], axis=1),
        )
    assert int(carry.step) == 300  # one update counter shared by the seeds
    # Adam's own counts: Bob n_B steps before each of Alice's (n_B - 1 passed everything)
    np.testing.assert_array_equal(np.asarray(carry.opt_a.inner_state[0].count), QUICK.steps)
    np.testing.assert_array_equal(
        np.asarray(carry.opt_b.inner_state[0].count), QUICK.n_b * QUICK.steps
    )
    # a run makes whole monitor periods: 50 updates at 10 per period are 5; 45 are refused (a
    # run used to round them up to 50 silently), in the experiment's Config too
    assert sp.n_periods(sp.SelfPlayStatic(T=3, hidden=8, steps=50, log_every=10)) == 5
    for bad in (
        lambda: sp.SelfPlayStatic(T=3, steps=45, log_every=10),
        lambda: E.Config(steps=1010),
    ):
        with pytest.raises(ValueError, match=r"steps=(45|1010): must be a multiple of log_every"):
            bad()
    with pytest.raises(ValueError, match="chunks=6"):
        sp.chunk_lengths(5, 6)


def test_each_player_moves_the_surrogate_value_its_own_way():
    """One monitor period with Alice's step size 0 (Bob alone moves): the surrogate value falls
    on every seed and Alice is unchanged; with Bob's 0 it rises. Measured at quick size, seed 11:
    Bob alone -0.35 to -0.58, Alice alone +0.06 to +0.41. (Bob's gradient with its sign flipped,
    Bob helping Alice, passed the experiment and every other test.)"""
    fx, params, constants, levels, static, hp, keys = _quick_setup()
    inputs = xs.level_inputs(levels)
    carry = sp.init_grid(static)(hp, keys)
    value = jax.jit(jax.vmap(sp.surrogate_value, in_axes=(0, 0, None, None)))
    before = np.asarray(value(carry.alice, carry.bob, inputs, hp))
    chunk = sp.chunk_grid(static, 1)
    bob_moves, alice_moves = hp.replace(lr_a=jnp.float32(0)), hp.replace(lr_b=jnp.float32(0))
    c, _ = chunk(inputs, bob_moves, carry)
    assert np.all(np.asarray(value(c.alice, c.bob, inputs, hp)) < before - 0.1)
    for x, y in zip(jax.tree.leaves(carry.alice), jax.tree.leaves(c.alice)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    c, _ = chunk(inputs, alice_moves, carry)
    assert np.all(np.asarray(value(c.alice, c.bob, inputs, hp)) > before + 0.02)


def test_config_validation():
    with pytest.raises(ValueError, match="p_no=0.5"):
        E.Config(p_no=0.5)
    with pytest.raises(ValueError, match="T=20"):
        E.Config(T=20)
    with pytest.raises(ValueError, match="n_b=0"):
        E.Config(n_b=0)
    with pytest.raises(ValueError, match="n_b_sweep"):
        E.Config(n_b_sweep=(5,))
    with pytest.raises(ValueError, match="T=17"):
        sp.SelfPlayStatic(T=17)
    fx = f2_target(4, 0.25)
    with pytest.raises(ValueError, match="lr_a"):
        sp.selfplay_params(lean_defaults(fx.K, 4).constants(fx.K, 4), lr_a=0.0)
    with pytest.raises(ValueError, match="n_b=0"):
        sp.selfplay_params(lean_defaults(fx.K, 4).constants(fx.K, 4), n_b=0)


def test_experiment_quick(tmp_path):
    """The experiment at quick size: rows, plot, logs; the proven rows pass (spec DED 5.3)."""
    ctx = FakeContext(tmp_path, name=E.NAME)
    cfg = E.Config(**E.SIZES["quick"])
    res = run_module(E, cfg, ctx)
    names = [c.claim for c in res.claims]
    assert len(res.claims) == 10 + (2 if cfg.mc_trials else 0) + (1 if cfg.n_b_sweep else 0)
    assert res.claims[0].passed and res.claims[1].passed  # proven bounds vs learned adversaries
    assert "Honest Alice" in names[0] and "honest Bob" in names[1]
    assert ctx.figures == ["stochastic_selfplay.png"]
    assert (tmp_path / "plots" / "stochastic_selfplay.png").exists()
    steps = [s for s, m in ctx.logged if m.get("instance") == "yes"]
    assert steps == list(range(cfg.log_every, cfg.steps + 1, cfg.log_every))
    assert len(res.tables["seeds"]) == 2 * cfg.seeds
    assert all(b.n == b.total for b in ctx.bars)
    for c in res.claims:
        assert c.lo <= c.value + 1e-12 and c.value <= c.hi + 1e-12 or math.isnan(c.value)
    assert dataclasses.is_dataclass(cfg)
