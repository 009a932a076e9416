"""Stackelberg self-play (dedebate/training/stackelberg.py, experiments/stackelberg/).

Sizes are tiny: 1-level noisy-evidence trees (q = 5, Thr_3, a hidden-flaw AND alternative),
one true and one false root per seed, rho = 2, so honest play earns rho^-(d+1) = 1/4 exactly.
The experiment's proven rows (completeness of the honest A against the trained Bs, chaining) are
checked on the module's trained players; which rows of a tiny run gate (claims) and which are
findings is checked on the run that tests/experiments/test_stackelberg_resume.py shares.
"""

from __future__ import annotations

import itertools
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import experiments.stackelberg as E
from dedebate.agents.learned import init_estimator
from dedebate.core.pytrees import stack
from dedebate.programs import FAST_COMPILE
from dedebate.protocols.prover_estimator import (
    PEDStatic,
    expected_payoff,
    ped_params,
)
from dedebate.training.stackelberg import (
    StackelbergMonitors,
    StackelbergStatic,
    advantage_at,
    first_converged,
    init_carry,
    make_chunk,
    make_train,
    payoff_terms,
    players,
    stackelberg_params,
)
from dedebate.trees.stability import tree_rho
from experiments.stackelberg.runs import (
    EstimatorTarget,
    fit_estimator,
    make_trees,
    ogd_target,
    proof_grid,
    warm_start,
)

STEPS = 100
THRESHOLD = 0.25  # rho^-(d+1) with rho = 2, d = 1
CFG = E.Config(n_trees=2)


def _batch(seeds):
    trees = stack(
        [
            make_trees(jax.random.fold_in(jax.random.key(s), 0), CFG.n_trees, CFG.depth)
            for s in seeds
        ]
    )
    keys = jnp.stack([jax.random.fold_in(jax.random.key(s), 1) for s in seeds])
    return trees, keys


@pytest.fixture(scope="module")
def trained():
    """Two seeds trained together (Stackelberg, n_B = 20), with a trace counter."""
    traces = []
    train = make_train(StackelbergStatic(steps=STEPS))

    def counted(hp, trees, keys):
        traces.append(1)
        return jax.vmap(train, in_axes=(None, 0, 0))(hp, trees, keys)

    fn = jax.jit(counted, compiler_options=FAST_COMPILE)
    hp = stackelberg_params(lr_a=0.03, lr_b=0.01, n_b=20)
    trees, keys = _batch([0, 1])
    state, mon = jax.block_until_ready(fn(hp, trees, keys))
    return fn, hp, traces, jax.tree_util.tree_map(np.asarray, mon), state, trees


def test_training_reaches_honest_equilibrium_on_one_level_tree(trained):
    """STEPS = 100 A updates (n_B = 20) on 1-level trees, two seeds: A gives the correct root
    answer on each tree (P >= 0.95), picks the stable candidate, and its payoff is within 5% of
    the known value rho^-(d+1) = 1/4."""
    _, _, _, mon, state, trees = trained
    assert np.all(mon.a_correct[:, -1] >= 0.95)
    assert np.all(mon.p_stable[:, -1] >= 0.95)
    assert np.all(np.abs(mon.u_a[:, -1] - THRESHOLD) <= 0.05 * THRESHOLD)
    # the root answer itself, per seed and tree, from the trained prover's answer head
    p_one = jax.vmap(jax.vmap(lambda a, t: a.answer(t.public()), in_axes=(None, 0)))(
        state.prover, trees
    )
    truth = np.asarray(trees.truth[:, :, 0])
    assert np.all(np.where(truth == 1, np.asarray(p_one), 1 - np.asarray(p_one)) >= 0.95)
    # B near best response: calibrated on the stable candidate, certified bound close to 1,
    # and its realised max|Adv| against the spec 6.3 tests of the trained A small
    assert np.all(mon.calib[:, -1] <= 0.1)
    assert np.all(mon.certified[:, -1] >= 0.95)
    assert np.all(mon.max_adv[:, -1] <= 0.02)
    # and it was not there at the start (uniform players: E U_A = r^2/2 = 0.125)
    np.testing.assert_allclose(mon.u_a[:, 0], 0.125, atol=1e-5)
    ok = (
        (mon.a_correct >= 0.95)
        & (mon.p_stable >= 0.95)
        & (np.abs(mon.u_a - THRESHOLD) <= 0.1 * THRESHOLD)
    )
    assert np.all(first_converged(ok) < STEPS)


def test_compiles_once_for_all_seeds(trained):
    fn, hp, traces, *_ = trained
    trees, keys = _batch([2, 3])
    jax.block_until_ready(fn(hp, trees, keys))
    assert len(traces) == 1


@pytest.fixture(scope="module")
def half_chunk():
    """One unbatched chunk of STEPS/2 A updates (compiled once for the module)."""
    return jax.jit(
        make_chunk(StackelbergStatic(steps=STEPS), STEPS // 2), compiler_options=FAST_COMPILE
    )


@pytest.fixture(scope="module")
def per_seed(trained, half_chunk):
    """Each seed trained alone, unbatched, in two chunks of STEPS/2 (same key and trees as in
    ``trained``): ``[(tree, carry0, half, end, mon_a, mon_b)]`` per seed."""
    hp = trained[1]
    out = []
    for s in range(2):
        trees, keys = _batch([s])
        tree = jax.tree_util.tree_map(lambda x: x[0], trees)
        carry0 = init_carry(StackelbergStatic(steps=STEPS), tree, keys[0])
        half, mon_a = half_chunk(hp, tree, carry0)
        end, mon_b = half_chunk(hp, tree, half)
        out.append((tree, carry0, half, end, mon_a, mon_b))
    return out


def test_vmap_over_seeds_equals_per_seed_runs(trained, per_seed):
    """Each seed of the vmapped whole-run program equals that seed trained alone, unbatched, in
    two chunks (same key, same trees): vmap over seeds and chunking change nothing."""
    batched, n_b = trained[3], int(trained[1].n_b)
    for s, (_, _, _, end, mon_a, mon_b) in enumerate(per_seed):
        assert int(end.step) == STEPS
        # Adam's own counts: B's n_B steps before each of A's (n_B + 1 passed everything)
        assert (int(end.opt_a.count), int(end.opt_b.count)) == (STEPS, n_b * STEPS)
        for name in ("u_a", "a_correct", "p_stable", "calib", "max_adv", "adv"):
            got = np.concatenate([getattr(mon_a, name), getattr(mon_b, name)])
            np.testing.assert_allclose(
                getattr(batched, name)[s], got, rtol=1e-4, atol=1e-5, err_msg=name
            )


def test_the_monitors_read_the_b_that_as_update_saw(trained, per_seed):
    """In a Stackelberg step the monitors read B after its n_B steps, the B A's update saw: at a
    chunk's last step that is the chunk's final B, so the calibration monitor (B's alone) there
    is the final B's (a monitor reading B before its steps passed every test)."""
    from dedebate.training.stackelberg import _monitors

    static, hp = StackelbergStatic(steps=STEPS), trained[1]
    z = jnp.zeros((2, 2), jnp.float32)

    @jax.jit
    def calib(tree, carry):
        prover, est = players(static, tree, carry)
        return _monitors(static, hp, prover, est, tree, 0.0, 0.0, z).calib

    for tree, _, half, end, mon_a, mon_b in per_seed:
        for carry, mon in ((half, mon_a), (end, mon_b)):
            assert float(mon.calib[-1]) == pytest.approx(float(calib(tree, carry)), abs=1e-6)


@pytest.fixture(scope="module")
def exact_terms():
    """Seed 0's two trees and ``jit(advantage_at)`` on them: ``carry -> (E[U_A], P[A correct],
    adv)`` (compiled once, for the objective's and the advantage monitor's tests)."""
    static = StackelbergStatic(steps=1)
    trees, _ = _batch([0])
    trees = jax.tree_util.tree_map(lambda x: x[0], trees)  # the seed's 2 trees (true, false root)
    return (
        static,
        trees,
        jax.jit(lambda c: advantage_at(static, 2.0, trees, c), compiler_options=FAST_COMPILE),
    )


def test_payoff_equals_protocol_expected_payoff(exact_terms):
    """The training objective (mean over the trees) equals the protocol's own path enumeration
    (spec 2.2) on each tree, for players whose every head is non-trivial."""
    static, trees, terms = exact_terms
    carry = init_carry(static, trees, jax.random.key(5))
    # perturb every parameter (the zero-initialised output layers too)
    rng = np.random.default_rng(7)
    carry = carry.replace(
        **{
            f: getattr(carry, f) + 0.5 * rng.normal(size=getattr(carry, f).shape).astype(np.float32)
            for f in ("a_flat", "b_flat")
        }
    )
    u, acc, _ = terms(carry)
    a, b = players(static, trees, carry)
    ref = jax.jit(
        jax.vmap(lambda t: expected_payoff(PEDStatic(), ped_params(2.0), a, b, t)),
        compiler_options=FAST_COMPILE,
    )(trees)
    np.testing.assert_allclose(float(u), float(np.mean(ref.u_a)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(acc), float(np.mean(ref.a_correct)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ref.total_prob), 1.0, atol=1e-5)
    assert np.all(np.abs(np.asarray(ref.u_a) - 0.125) > 1e-3)  # not the uniform start, per tree


def test_calibration_monitor_reads_each_node_in_its_own_round():
    """``calib`` asks B for each internal node's joint at the round ``k = d - level`` in which the
    protocol decomposes it (B's head reads k): at depth 2 a per-node reference loop agrees."""
    from dedebate.core.bits import bit_table
    from dedebate.training.stackelberg import _monitors, node_rounds

    static = StackelbergStatic(steps=1)
    trees = make_trees(jax.random.key(3), 2, depth=2)
    one = jax.tree_util.tree_map(lambda x: x[0], trees)
    assert node_rounds(one).tolist() == [2] + [1] * (one.n_internal - 1)
    carry = init_carry(static, trees, jax.random.key(4))
    noise = jax.random.normal(jax.random.key(3), carry.b_flat.shape)  # a level-1 node is the worst
    prover, est = players(static, trees, carry.replace(b_flat=carry.b_flat + 2.0 * noise))
    hp, z = stackelberg_params(rho=2.0), jnp.zeros((3, 2), jnp.float32)
    bits, h = jnp.asarray(bit_table(one.q), jnp.float32), one.honest_cand
    ks = jnp.asarray([2] + [1] * (one.n_internal - 1))  # the root in round 2, its children in 1

    def reference(t):  # per node, written out
        def err(v, k):
            logits = est.joint(t.public(), v, h, t.truth[v].astype(jnp.float32), k)
            return jnp.max(jnp.abs(jax.nn.softmax(logits) @ bits - t.child_truths(v, h)))

        errs = jax.vmap(err)(jnp.arange(one.n_internal), ks)
        return jnp.maximum(jnp.abs(est.initial(t.public()) - t.truth[0]), errs.max())

    got, want = jax.jit(
        lambda: (
            _monitors(static, hp, prover, est, trees, 0.0, 0.0, z).calib,
            jax.vmap(reference)(trees).max(),
        )
    )()
    assert float(got) == pytest.approx(float(want), abs=1e-6)


def test_first_converged():
    flags = np.array([[0, 1, 1, 1], [1, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 0]], bool)
    np.testing.assert_array_equal(first_converged(flags), [1, 3, 0, 4])


@pytest.mark.parametrize(
    "kwargs", [{"lr_a": 0.0}, {"lr_b": -1.0}, {"n_b": 0}, {"n_b": 1.5}, {"rho": 0.5}, {"eta": -0.1}]
)
def test_hparams_reject_bad_values(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        stackelberg_params(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"depth": 3},
        {"n_trees": 3},
        {"seeds": 0},
        {"steps": 1},
        {"n_b_values": (0,)},
        {"main_n_b": 7},
        {"lr_a": 0.0},
        {"rho": 0.9},
        {"tol": 1.0},
        {"hidden_a": (0,)},
        {"chunks": 7},
        {"a_init_scale": -1.0},
        {"warm_seeds": -1},
        {"warm_a_init_scale": 0.0},
        {"warm_delta": 0.0},
        {"warm_fit_steps": 0},
    ],
)
def test_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        E.Config(**kwargs)


def test_static_rejects_bad_sizes():
    with pytest.raises(ValueError, match="steps"):
        StackelbergStatic(steps=0)
    with pytest.raises(ValueError, match="hidden_b"):
        StackelbergStatic(hidden_b=())
    for bad_q in (0, 13):
        with pytest.raises(ValueError, match="q="):
            init_estimator(jax.random.key(0), bad_q)
    assert init_estimator(jax.random.key(0), 1).params  # q = 1 builds


def test_fresh_learned_players_are_fair_coins_and_uniform_joints():
    """As their docstrings say (the output layers start at zero): a fresh prover answers and
    bets with probability 1/2 each way, a fresh estimator states 1/2 and joint logits of 0."""
    from dedebate.agents.learned import init_prover
    from dedebate.trees import hidden_flaw_tree

    tree = jax.tree_util.tree_map(
        lambda a: a[0], hidden_flaw_tree(jax.random.split(jax.random.key(5), 1), depth=2, q=3)
    )
    a, b = init_prover(jax.random.key(1)), init_estimator(jax.random.key(2), 3)
    assert float(a.answer(tree)) == 0.5
    np.testing.assert_array_equal(np.asarray(a.direction(tree, 0, 0.3, 0)), [0.5, 0.0, 0.5])
    assert float(b.initial(tree)) == 0.5
    assert not np.any(np.asarray(b.joint(tree, 0, 0, 0.3, 0)))


def test_learned_players_read_their_documented_features():
    """A node's features ``[known, value, phat, k / depth]`` and the candidate's features; B's
    global head reads ``[phat, node known, node value, cand feature 0, cand feature 2, k / depth]``
    (captured from the network)."""
    from dedebate.agents.learned import _cand_feat, _node_feat
    from dedebate.trees import hidden_flaw_tree

    tree = jax.tree_util.tree_map(
        lambda a: a[0], hidden_flaw_tree(jax.random.split(jax.random.key(5), 1), depth=2, q=3)
    )
    pub = tree.public()
    for v in range(tree.n_internal):
        t = int(pub.truth[v])
        want = [float(t >= 0), float(max(t, 0)), 0.25, 1 / tree.depth]
        np.testing.assert_array_equal(np.asarray(_node_feat(pub, v, 0.25, 1)), np.float32(want))
    b = init_estimator(jax.random.key(2), 3)
    seen = []

    def head(name, x, out=1):
        if name == "global":  # the child head runs under vmap
            seen.append((name, np.asarray(x)))
        return jnp.zeros((out,))

    object.__setattr__(b, "_head", head)
    b.joint(pub, 0, 0, 0.25, 1)
    (glob,) = [x for name, x in seen if name == "global"]
    cf = np.asarray(_cand_feat(pub, 0, 0))
    t0 = int(pub.truth[0])
    want = [0.25, float(t0 >= 0), float(max(t0, 0)), cf[0], cf[2], 1 / tree.depth]
    np.testing.assert_array_equal(glob, np.float32(want))


def test_resume_from_orbax_checkpoint_equals_uninterrupted(tmp_path, trained, half_chunk, per_seed):
    """The carry after STEPS/2 A updates, saved and restored through the lab's Orbax wrapper,
    continues exactly as the run that was never interrupted (seed 0's second chunk)."""
    from dedebate.lab.checkpoint import Checkpointer

    hp = trained[1]
    tree, carry0, half, ref, _, mon_ref = per_seed[0]
    with Checkpointer(tmp_path / "ckpt", "h") as ckpt:
        ckpt.save(STEPS // 2, half, force=True)
    with Checkpointer(tmp_path / "ckpt", "h") as ckpt:
        step, restored = ckpt.restore(carry0)
    assert step == STEPS // 2 and int(restored.step) == STEPS // 2
    end, mon = half_chunk(hp, tree, restored)
    for got, want in zip(
        jax.tree_util.tree_leaves((end, mon)), jax.tree_util.tree_leaves((ref, mon_ref))
    ):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.slow
def test_advantage_monitor_and_warm_start_from_algorithm1(exact_terms):
    """B's realised advantages (payoff_terms) against a random initial A, checked three ways:

    * with Algorithm 1's tabular estimator (built stage by stage by construct_estimator), the
      per-stage max|Adv| equals the exit advantage Algorithm 1 itself reports (< delta);
    * for the learned players they satisfy E[U_A] = r^(d+1) P[correct] - sum Adv_0 + sum Adv_1;
    * the warm start (B fitted to that estimator) reproduces its advantages within 2e-3, so its
      max|Adv| drops below the cold B's; against the fair-coin A every advantage is exactly 0
      (Algorithm 1 takes no step) and the warm start leaves B bit-equal.
    """
    static, trees, adv_fn = exact_terms
    delta = 0.02
    carry = init_carry(static, trees, jax.random.key(1), a_out_scale=2.0)
    u, acc, adv = (np.asarray(x, np.float64) for x in adv_fn(carry))
    np.testing.assert_allclose(u, 0.25 * acc - adv[:, 0].sum() + adv[:, 1].sum(), atol=1e-6)
    cold = np.abs(adv).max()
    assert cold > delta  # the uniform B is distinguishable from the truth by this A's tests

    target, rep = ogd_target(static, trees, carry, 2.0, delta)
    prover, _ = players(static, trees, carry)
    per_tree = jax.jit(
        jax.vmap(
            lambda est, t: payoff_terms(
                static, 2.0, prover, est, jax.tree_util.tree_map(lambda x: x[None], t)
            )[2]
        ),
        compiler_options=FAST_COMPILE,
    )
    tab = np.asarray(per_tree(rep.estimator, trees)).mean(axis=0)  # mu uniform over the trees
    ogd_exit = [s.max_adv for s in rep.stages if s.stage != "final"]
    np.testing.assert_allclose(np.abs(tab).max(axis=1), ogd_exit, rtol=1e-3, atol=1e-6)
    assert max(ogd_exit) < delta

    fit = jax.jit(lambda c, g: fit_estimator(static, trees, c, g), compiler_options=FAST_COMPILE)
    fitted, kl = fit(carry, target)
    _, _, adv_w = adv_fn(fitted)
    assert float(kl) < 0.01
    np.testing.assert_allclose(np.asarray(adv_w), tab, atol=2e-3)
    assert np.abs(np.asarray(adv_w)).max() < cold
    np.testing.assert_array_equal(np.asarray(fitted.a_flat), np.asarray(carry.a_flat))

    # fair-coin A: every test has advantage exactly 0 against the uniform B, so Algorithm 1
    # returns h_1 = uniform (spec 5.3 line 7) and fitting B to it changes nothing
    fair = init_carry(static, trees, jax.random.key(1))
    np.testing.assert_array_equal(np.asarray(adv_fn(fair)[2]), 0.0)
    n = trees.truth.shape[0]
    uniform = target.replace(
        p_d=jnp.full((n,), 0.5),
        joint=jnp.full_like(target.joint, 1 / 32),
        phat=jnp.full_like(target.phat, 0.5),
    )
    fitted0, _ = fit(fair, uniform)
    np.testing.assert_array_equal(np.asarray(fitted0.b_flat), np.asarray(fair.b_flat))

    # the target's phat: p_d at the root (depth 1: the one internal node), a joint per context
    np.testing.assert_array_equal(np.asarray(target.phat[:, 0]), np.asarray(target.p_d))
    np.testing.assert_allclose(np.asarray(target.joint).sum(axis=-1), 1.0, rtol=1e-6)

    # the experiment's warm start, one seed: its B is fitted to the same target, its info the
    # advantages of the cold and the fitted B and Algorithm 1's stages
    stacked = jax.tree_util.tree_map(lambda x: x[None], (trees, carry))
    warm, info = warm_start(static, *stacked, 2.0, delta, 300)
    warm = jax.tree_util.tree_map(lambda x: x[0], warm)
    assert info["adv_cold"][0] == np.float32(cold)
    assert info["adv_warm"][0] == np.abs(np.asarray(adv_fn(warm)[2])).max()
    assert info["adv_warm"][0] < cold and info["fit_kl"][0] < 0.01
    np.testing.assert_array_equal(np.asarray(warm.a_flat), np.asarray(carry.a_flat))
    stages = [s for s in rep.stages if s.stage != "final"]
    assert list(info["ogd_steps"][0]) == [s.steps for s in stages]
    assert info["ogd_max_adv"][0] == np.float32(max(s.max_adv for s in stages))


def test_fitting_loss_is_the_mean_bernoulli_kl_plus_the_mean_joint_kl(exact_terms):
    """``fit_estimator``'s loss (0 steps) for a B whose heads all output 0 (p_d = 1/2, uniform
    joints) against a random target: mean over trees of KL(Bern(p_d) || Bern(1/2)) plus mean over
    (tree, node, candidate) of KL(joint || uniform) = sum h ln h + ln 2^q, by hand in float64.
    Float32 rounding: each KL sums 2^q + 2 terms of size <= ln 2^q + 1, so 2^-24 (2^q + 8)
    (q ln 2 + 1) per mean bounds it, twice for the two."""
    static, trees, _ = exact_terms
    rng, q = np.random.default_rng(11), trees.q
    n_trees, n_int, n_cand = trees.truth.shape[0], trees.n_internal, trees.n_cand
    p_d = rng.uniform(0.05, 0.95, n_trees)
    joint = rng.dirichlet(np.ones(2**q), (n_trees, n_int, n_cand))
    phat = rng.uniform(0.05, 0.95, (n_trees, n_int))
    target = EstimatorTarget(*(jnp.asarray(x, jnp.float32) for x in (p_d, joint, phat)))
    p_d, joint = (np.asarray(x, np.float64) for x in (target.p_d, target.joint))
    zero = init_carry(static, trees, jax.random.key(2))
    zero = zero.replace(b_flat=jnp.zeros_like(zero.b_flat))
    fitted, loss = jax.jit(lambda c, g: fit_estimator(static, trees, c, g, steps=0))(zero, target)
    bern = p_d * np.log(2 * p_d) + (1 - p_d) * np.log(2 * (1 - p_d))
    kl_joint = (joint * np.log(joint)).sum(axis=-1) + q * np.log(2)
    tol = 2 * 2.0**-24 * (2**q + 8) * (q * np.log(2) + 1)
    assert float(loss) == pytest.approx(bern.mean() + kl_joint.mean(), abs=tol)
    np.testing.assert_array_equal(np.asarray(fitted.b_flat), 0.0)


def test_honest_prover_complete_against_trained_estimators(trained):
    """The experiment's proof terms on the module's trained players (n_B = 20, 100 A updates,
    two seeds, rho-stable trees): the honest A earns at least rho^-(d+1) + |p_d - T(x)| r^d (1 - r)
    against each trained B on each tree (spec PED 4, the completeness sum with the root error;
    Thm 6.1(1) is the case p_d = T(x)), and each trained pair satisfies the chaining identity of
    spec 6.4 within float32 rounding."""
    _, _, _, _, state, trees = trained
    cache = {}
    for s in range(2):  # the premise: the stable candidate is rho-stable at every node
        for i in range(2):
            t = jax.tree_util.tree_map(lambda x, s=s, i=i: x[s, i], trees)
            assert tree_rho(t, cache=cache) <= 2.0 + E.LP_TOL
    static = StackelbergStatic(steps=STEPS)
    u_h, u, chain, u_tree = (
        np.asarray(x, np.float64)
        for x in proof_grid(static, 2.0)(state.prover, state.estimator, trees)
    )
    assert u_h.shape == u_tree.shape == (2, 2) and u.shape == (2,) and chain.shape == (2,)
    np.testing.assert_allclose(u_tree.mean(axis=1), u, atol=E.exact_tol(CFG.depth, 2))
    p_d = jax.vmap(jax.vmap(lambda b, t: b.initial(t.public()), in_axes=(None, 0)))(
        state.estimator, trees
    )
    root_err = np.abs(np.asarray(p_d, np.float64) - np.asarray(trees.truth[:, :, 0]))
    r = 0.5
    assert np.all(u_h >= THRESHOLD + root_err * r * (1 - r) - E.exact_tol(CFG.depth))
    np.testing.assert_allclose(chain, u, atol=E.exact_tol(CFG.depth))


def _mon(u_a, a_correct=None):
    u = np.asarray(u_a, np.float32)
    one = np.ones_like(u) if a_correct is None else np.asarray(a_correct, np.float32)
    return StackelbergMonitors(u, one, one, u, u, u, np.zeros(u.shape + (2, 2), np.float32))


def test_schedule_row_tests_the_counts_not_their_point_estimates():
    """Several B updates against simultaneous play, 6 seeds each: 6/6 against 0/6 converged is
    "more often" (one-sided Fisher exact p = 0.0011); 1/6 against 1/6, which passed as "at least
    as often", and 0/6 against 0/6 test nothing, and fail."""
    cfg = E.Config(seeds=6, steps=10, chunks=1, n_b_values=(20,), main_n_b=20)
    trees = make_trees(jax.random.key(0), cfg.n_trees, cfg.depth)
    thr = cfg.rho ** -(cfg.depth + 1)
    for several, simultaneous, expect in ((6, 0, True), (1, 1, False), (0, 0, False)):
        u = np.zeros((2, 6, 10), np.float32)  # schedules (n_B = 20, simultaneous) x seeds x steps
        u[0, :several], u[1, :simultaneous] = thr, thr  # these seeds converge
        t = E.Trained(_mon(u), None, jax.tree.map(lambda x: x[None], trees), None, None, 1.0)
        claims, _, _ = E.stable_rows(cfg, t)
        row = next(c for c in claims if c.claim.startswith("Several B updates"))
        assert row.finding and row.passed is expect and row.value == several / 6
        if expect:
            assert "p = 0.00108" in row.note


def _stable_claims(u_last, n_b_values=(20,)):
    """The stable part's rows where every schedule's seeds end at ``u_last[schedule]`` (the
    schedules: ``n_b_values``, then simultaneous play; the main one is n_B = 20)."""
    cfg = E.Config(seeds=6, steps=10, chunks=1, n_b_values=n_b_values, main_n_b=20)
    trees = make_trees(jax.random.key(0), cfg.n_trees, cfg.depth)
    u = np.zeros((len(u_last), 6, 10), np.float32)
    u[:, :, :] = np.asarray(u_last, np.float32)[:, :, None]
    t = E.Trained(_mon(u), None, jax.tree.map(lambda x: x[None], trees), None, None, 1.0)
    return E.stable_rows(cfg, t)[0]


def _named(rows, text):
    (row,) = [c for c in rows if text in c.claim]
    return row


def test_stable_rows_read_the_main_schedule_and_decide_on_their_exact_bounds():
    """rho^-(d+1) = 0.25 here. 4 of 6 seeds converged is not "most" (its exact lower end is
    below 1/2); seeds at 1.15 x 0.25 are outside the band [0.9, 1.1] x 0.25; the final payoff
    is the main schedule's (n_B = 20), not the first one's; the schedule row compares the
    largest n_B with simultaneous play."""
    thr, zero = [0.25 + 1e-4 * i for i in range(6)], [0.0] * 6
    rows = _stable_claims([[0.25] * 4 + [0.0] * 2, zero])
    converged = _named(rows, "A converges to correct answers")
    assert converged.value == 4 / 6 and converged.lo < 0.5 and not converged.passed
    high = _stable_claims([[0.25 * 1.15 + 1e-4 * i for i in range(6)], zero])
    final = _named(high, "final mean")
    assert final.lo > 0.25 * 1.1 and not final.passed
    three = _stable_claims([thr, [0.125 + 1e-4 * i for i in range(6)], thr], n_b_values=(1, 20))
    final = _named(three, "final mean")
    assert "n_B = 20" in final.claim and final.hi < 0.2 and not final.passed
    three = _stable_claims([zero, [0.25] * 6, zero], n_b_values=(1, 20))
    several = _named(three, "Several B updates")
    assert "n_B = 20" in several.claim and several.value == 1.0 and several.passed


def test_unstable_and_warm_rows_are_findings_with_their_criteria():
    """Exp. 2 and the warm-start row on given monitors (no training): both are findings, and
    their pre-stated criteria decide ``passed`` (tail mean's 95% upper end < rho^-(d+1); warm
    max|Adv| < cold on every seed)."""
    cfg = E.Config(seeds=3, steps=10, chunks=1, warm_seeds=3)
    below = np.full((1, 3, 10), 0.5, np.float32)
    below[0, :, -1] = [0.10, 0.12, 0.08]  # the last tenth (one A update) is what counts
    [c], _, _ = E.unstable_rows(cfg, _mon(below), 1.0)
    assert c.finding and c.passed and c.value == pytest.approx(0.10)
    above = below.copy()
    above[0, :, -1] = [0.30, 0.20, 0.26]
    [c], _, _ = E.unstable_rows(cfg, _mon(above), 1.0)
    assert c.finding and not c.passed and c.value == pytest.approx(0.76 / 3)
    tail = np.full((1, 3, 20), 0.5, np.float32)  # 20 steps: the tail is the last two updates
    tail[0, :, -2:] = [[0.40, 0.10], [0.42, 0.10], [0.38, 0.10]]  # means 0.25, 0.26, 0.24
    [c], _, _ = E.unstable_rows(E.Config(seeds=3, steps=20, chunks=1), _mon(tail), 1.0)
    assert c.value == pytest.approx(0.25) and not c.passed

    info = {
        "adv_cold": np.array([0.2, 0.3, 0.4]),
        "adv_warm": np.array([0.01, 0.02, 0.5]),
        "fit_kl": np.zeros(3),
        "ogd_max_adv": np.zeros(3),
        "ogd_steps": np.zeros((3, 2), np.int32),
    }
    mon = _mon(np.full((2, 3, 10), 0.25))
    [c], _, _ = E.warm_rows(cfg, mon, info, 1.0, 0.0)
    assert c.finding and not c.passed and c.value == pytest.approx(0.5)  # seed 2: warm > cold
    info["adv_warm"] = np.array([0.01, 0.02, 0.03])
    [c], _, _ = E.warm_rows(cfg, mon, info, 1.0, 0.0)
    assert c.finding and c.passed and c.value == pytest.approx(0.03)


def test_exploiting_search_never_beats_the_honest_prover_and_beats_a_careless_one():
    """The search for a B that exploits A (dedebate/training/exploit.py) on seed 0's trees: the
    honest A keeps at least rho^-(d+1) on every tree against whatever B it finds (Theorem 6.1(1):
    the search cannot beat a theorem), while an untrained A with random output layers is held
    well below what it earns against the honest B (a fair-coin A would earn 1/8 against any B)."""
    from dedebate.agents.ped_strategies import HonestEstimator, honest_prover
    from dedebate.training.exploit import exploit_payoff

    static = StackelbergStatic(steps=STEPS)
    trees, keys = _batch([0])
    trees = jax.tree.map(lambda x: x[0], trees)
    search = jax.jit(
        lambda p, k: exploit_payoff(static, 2.0, p, trees, k, restarts=2, steps=200),
        compiler_options=FAST_COMPILE,
    )
    honest = np.asarray(search(honest_prover(), jax.random.key(3)))
    assert honest.shape == (CFG.n_trees,) and np.all(honest >= THRESHOLD - E.exact_tol(1))
    a0, _ = players(static, trees, init_carry(static, trees, keys[0], a_out_scale=2.0))
    careless = float(np.mean(search(a0, jax.random.key(3))))
    vs_honest_b = float(payoff_terms(static, 2.0, a0, HonestEstimator(), trees)[0])
    assert careless < vs_honest_b - 0.05, (careless, vs_honest_b)
    with pytest.raises(ValueError, match=r"restarts=0, steps=5: need restarts >= 1"):
        exploit_payoff(static, 2.0, a0, trees, keys[0], restarts=0, steps=5)


def test_the_tabular_search_counts_every_b_it_visits():
    """From the same start, a longer search never reports more: it visits the shorter one's Bs
    (against honest A at lr = 1, scoring only the last B, as the search once did, reported
    0.614 after 2 steps and 0.756 after 4 on the second tree)."""
    from dedebate.agents.ped_strategies import honest_prover
    from dedebate.training.exploit import exploit_payoff

    static, (trees, _) = StackelbergStatic(steps=STEPS), _batch([0])
    trees = jax.tree.map(lambda x: x[0], trees)

    def search(steps):
        return exploit_payoff(static, 2.0, honest_prover(), trees, jax.random.key(1), 1, steps, 1.0)

    fn = jax.jit(search, static_argnums=0, compiler_options=FAST_COMPILE)
    found = [np.asarray(fn(steps), np.float64) for steps in (2, 4)]
    for short, long in zip(found, found[1:]):
        assert np.all(long <= short + E.exact_tol(1)), (short, long)


def test_class_search_never_beats_the_honest_prover_and_starts_from_the_trained_b():
    """The search over Bs of the trained class (one MLP for all trees): the honest A keeps at
    least rho^-(d+1) against whatever it finds (Theorem 6.1(1)); with no steps it returns the
    least payoff of its starts, the trained B's and a fresh B's, each computed here on its own;
    and from the trained B it finds a B that holds a careless A below what the trained B does."""
    from dedebate.agents.ped_strategies import honest_prover
    from dedebate.training.exploit import class_exploit_payoff

    static, (trees, keys) = StackelbergStatic(steps=STEPS), _batch([0])
    trees = jax.tree.map(lambda x: x[0], trees)

    def search(prover, b_flat, steps):
        return class_exploit_payoff(static, 2.0, prover, trees, b_flat, keys[0], 1, steps)

    fn = jax.jit(search, static_argnums=2, compiler_options=FAST_COMPILE)
    carry = init_carry(static, trees, keys[0], a_out_scale=2.0)
    a0, b0 = players(static, trees, carry)
    assert float(fn(honest_prover(), carry.b_flat, 150)) >= THRESHOLD - E.exact_tol(1)
    fresh = init_carry(static, trees, jax.random.split(keys[0], 1)[0])
    each = [
        payoff_terms(static, 2.0, a0, players(static, trees, c)[1], trees)[0]
        for c in (carry, fresh)
    ]
    assert float(fn(a0, carry.b_flat, 0)) == pytest.approx(float(min(each)), abs=1e-6)

    # with no step, at most the start B's own payoff, also where that B beats the fresh start
    def b_payoff(b_flat):
        c = carry.replace(b_flat=b_flat)
        return float(payoff_terms(static, 2.0, a0, players(static, trees, c)[1], trees)[0])

    noise = jax.random.normal(jax.random.key(8), (4, carry.b_flat.size))
    starts = [carry.b_flat + 0.5 * z for z in noise]
    own = [b_payoff(b) for b in starts]
    assert min(own) < float(each[1]) - 0.01, (own, each)
    for b, u in zip(starts, own):
        assert float(fn(a0, b, 0)) <= u + 1e-6
    careless = float(fn(a0, carry.b_flat, 150))
    assert careless < float(each[0]) - 0.05, (careless, each)
    with pytest.raises(ValueError, match=r"restarts=0, steps=5: need restarts >= 1"):
        class_exploit_payoff(static, 2.0, a0, trees, carry.b_flat, keys[0], 0, 5)


def _adam_payoffs(value_and_grad, start, lr, steps, *args):
    """The payoffs of the ``steps + 1`` points Adam (optax, ``lr``) visits from ``start``
    (``value_and_grad(params, *args)``)."""
    import optax

    opt = optax.adam(lr)
    p, state, seen = start, opt.init(start), []
    for _ in range(steps):
        value, grad = value_and_grad(p, *args)
        updates, state = opt.update(grad, state, p)
        p, seen = optax.apply_updates(p, updates), seen + [float(value)]
    return seen + [float(value_and_grad(p, *args)[0])]


def test_the_tabular_search_is_the_least_payoff_over_every_start_and_step():
    """exploit_payoff per tree is the least payoff over every (restart, Adam step) B: each start
    drawn as documented (``split(key, trees * restarts)``, logits ~ 3 N(0, 1)), its Adam path
    replayed here step by step. float32 payoffs of a few hundred terms, the replay unfused: 1e-4.
    Against honest A the least B is the last one (lr 1, first tree), an earlier one (lr 0.1,
    second tree: 0.945 at step 4, 0.960 at 5), and from either restart."""
    from dedebate.agents.ped_strategies import TabularEstimator, honest_prover
    from dedebate.training.exploit import exploit_payoff

    static, (trees, _) = StackelbergStatic(steps=STEPS), _batch([0])
    trees = jax.tree.map(lambda x: x[0], trees)
    a0 = honest_prover()
    restarts, steps, key = 2, 6, jax.random.key(1)
    lrs = (0.1, 1.0)
    found = jax.jit(
        jax.vmap(lambda lr: exploit_payoff(static, 2.0, a0, trees, key, restarts, steps, lr)),
        compiler_options=FAST_COMPILE,
    )(jnp.asarray(lrs))

    def payoff(params, tree):
        b = TabularEstimator(jax.nn.sigmoid(params[0]), params[1], sees_truth=True)
        return payoff_terms(static, 2.0, a0, b, jax.tree.map(lambda x: x[None], tree))[0]

    vg = jax.jit(jax.value_and_grad(payoff), compiler_options=FAST_COMPILE)
    shape = (trees.n_internal, trees.n_cand, 2**trees.q)
    n = trees.truth.shape[0]
    ks = jax.random.split(key, n * restarts).reshape(n, restarts)
    want = np.full((len(lrs), n), np.inf)
    for (k, lr), i, j in itertools.product(enumerate(lrs), range(n), range(restarts)):
        tree = jax.tree.map(operator.itemgetter(i), trees)
        k0, k1 = jax.random.split(ks[i, j])
        start = (3.0 * jax.random.normal(k0, ()), 3.0 * jax.random.normal(k1, shape))
        want[k, i] = min(want[k, i], *_adam_payoffs(vg, start, lr, steps, tree))
    np.testing.assert_allclose(np.asarray(found), want, rtol=0, atol=1e-4)


def test_the_class_search_is_the_least_payoff_over_every_start_and_step():
    """class_exploit_payoff is the least mean payoff over the trained B's Adam path and each fresh
    start's (training's init from ``split(key, restarts)``), replayed here step by step (1e-4, as
    the tabular search's). Against the careless A the least B is the last (lr 0.1), or the first
    step's from the trained start (lr 1: 0.0205, then 0.0312; 0.0218 from the fresh start)."""
    from dedebate.training.exploit import class_exploit_payoff

    static, (trees, keys) = StackelbergStatic(steps=STEPS), _batch([0])
    trees = jax.tree.map(lambda x: x[0], trees)
    carry = init_carry(static, trees, keys[0], a_out_scale=2.0)
    a0, _ = players(static, trees, carry)
    restarts, steps, key = 1, 3, keys[0]
    lrs = (0.1, 1.0)
    found = jax.jit(
        jax.vmap(
            lambda lr: class_exploit_payoff(
                static, 2.0, a0, trees, carry.b_flat, key, restarts, steps, lr
            )
        ),
        compiler_options=FAST_COMPILE,
    )(jnp.asarray(lrs))

    def payoff(flat):
        b = players(static, trees, carry.replace(b_flat=flat))[1]
        return payoff_terms(static, 2.0, a0, b, trees)[0]

    vg = jax.jit(jax.value_and_grad(payoff), compiler_options=FAST_COMPILE)
    fresh = [init_carry(static, trees, k).b_flat for k in jax.random.split(key, restarts)]
    for lr, got in zip(lrs, np.asarray(found)):
        paths = [_adam_payoffs(vg, b, lr, steps) for b in [carry.b_flat, *fresh]]
        assert float(got) == pytest.approx(min(min(p) for p in paths), abs=1e-4), (lr, paths)
