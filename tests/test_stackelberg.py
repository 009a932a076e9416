"""Stackelberg self-play (dedebate/training/stackelberg.py, experiments/stackelberg.py; issue 8).

Sizes are tiny: 1-level noisy-evidence trees (q = 5, Thr_3, a hidden-flaw AND alternative),
one true and one false root per seed, rho = 2, so honest play earns rho^-(d+1) = 1/4 exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import experiments.stackelberg as E
from dedebate.agents.learned import init_estimator, init_prover
from dedebate.protocols.prover_estimator import (
    COMPILE_OPTIONS,
    PEDSettings,
    expected_payoff,
    ped_params,
)
from dedebate.training.stackelberg import (
    StackelbergStatic,
    first_converged,
    hparams,
    init_carry,
    make_chunk,
    make_train,
    payoff,
)

STEPS = 100
THRESHOLD = 0.25  # rho^-(d+1) with rho = 2, d = 1
CFG = E.Config(n_trees=2)


def _batch(seeds):
    trees = E._stack([E._stable_trees(CFG, jax.random.fold_in(jax.random.key(s), 0))
                      for s in seeds])
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

    fn = jax.jit(counted, compiler_options=COMPILE_OPTIONS)
    hp = hparams(lr_a=0.03, lr_b=0.01, n_b=20)
    trees, keys = _batch([0, 1])
    _, mon = jax.block_until_ready(fn(hp, trees, keys))
    return fn, hp, traces, jax.tree_util.tree_map(np.asarray, mon)


def test_training_reaches_honest_equilibrium_on_one_level_tree(trained):
    """A answers correctly, picks the stable candidate, payoff within 5% of rho^-(d+1)."""
    _, _, _, mon = trained
    assert np.all(mon.a_correct[:, -1] >= 0.95)
    assert np.all(mon.p_stable[:, -1] >= 0.95)
    assert np.all(np.abs(mon.u_a[:, -1] - THRESHOLD) <= 0.05 * THRESHOLD)
    # B near best response: calibrated on the stable candidate, certified bound close to 1
    assert np.all(mon.calib[:, -1] <= 0.1)
    assert np.all(mon.certified[:, -1] >= 0.95)
    # and it was not there at the start (uniform players: E U_A = r^2/2 = 0.125)
    np.testing.assert_allclose(mon.u_a[:, 0], 0.125, atol=1e-5)
    ok = (mon.a_correct >= 0.95) & (mon.p_stable >= 0.95) & (
        np.abs(mon.u_a - THRESHOLD) <= 0.1 * THRESHOLD)
    assert np.all(first_converged(ok) < STEPS)


def test_compiles_once_for_all_seeds(trained):
    fn, hp, traces, _ = trained
    trees, keys = _batch([2, 3])
    jax.block_until_ready(fn(hp, trees, keys))
    assert len(traces) == 1


@pytest.fixture(scope="module")
def half_chunk():
    """One unbatched chunk of STEPS/2 A updates (compiled once for the module)."""
    return jax.jit(make_chunk(StackelbergStatic(steps=STEPS), STEPS // 2),
                   compiler_options=COMPILE_OPTIONS)


def _per_seed(half_chunk, hp, s):
    trees, keys = _batch([s])
    tree = jax.tree_util.tree_map(lambda x: x[0], trees)
    carry0 = init_carry(StackelbergStatic(steps=STEPS), tree, keys[0])
    return tree, carry0


def test_vmap_over_seeds_equals_per_seed_runs(trained, half_chunk):
    """Each seed of the vmapped whole-run program equals that seed trained alone, unbatched, in
    two chunks (same key, same trees): vmap over seeds and chunking change nothing."""
    _, hp, _, batched = trained
    for s in range(2):
        tree, carry = _per_seed(half_chunk, hp, s)
        carry, mon_a = half_chunk(hp, tree, carry)
        carry, mon_b = half_chunk(hp, tree, carry)
        assert int(carry.step) == STEPS
        for name in ("u_a", "a_correct", "p_stable", "calib"):
            got = np.concatenate([getattr(mon_a, name), getattr(mon_b, name)])
            np.testing.assert_allclose(getattr(batched, name)[s], got, rtol=1e-4, atol=1e-5,
                                       err_msg=name)


def test_payoff_equals_protocol_expected_payoff():
    """The training objective equals the protocol's own path enumeration (spec 2.2)."""
    trees, _ = _batch([0])
    trees = jax.tree_util.tree_map(lambda x: x[0], trees)  # the seed's 2 trees
    tree = jax.tree_util.tree_map(lambda x: x[:1], trees)  # a batch holding the true-root tree
    a = init_prover(jax.random.key(5))
    b = init_estimator(jax.random.key(6), 5)
    # perturb the zero-initialised output layers so every head is non-trivial
    rng = np.random.default_rng(7)
    a = a.replace(params=jax.tree_util.tree_map(
        lambda p: p + 0.5 * rng.normal(size=p.shape).astype(np.float32), a.params))
    b = b.replace(params=jax.tree_util.tree_map(
        lambda p: p + 0.5 * rng.normal(size=p.shape).astype(np.float32), b.params))
    static = StackelbergStatic(steps=1)
    u, acc = jax.jit(lambda a, b: payoff(static, 2.0, a, b, tree),
                     compiler_options=COMPILE_OPTIONS)(a, b)
    one = jax.tree_util.tree_map(lambda x: x[0], tree)
    ref = jax.jit(lambda a, b: expected_payoff(PEDSettings(), ped_params(2.0), a, b, one),
                  compiler_options=COMPILE_OPTIONS)(a, b)
    np.testing.assert_allclose(float(u), float(ref.u_a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(acc), float(ref.a_correct), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(ref.total_prob), 1.0, atol=1e-5)
    assert abs(float(u) - 0.125) > 1e-3  # the perturbed players are not the uniform start


def test_first_converged():
    flags = np.array([[0, 1, 1, 1], [1, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 0]], bool)
    np.testing.assert_array_equal(first_converged(flags), [1, 3, 0, 4])


@pytest.mark.parametrize("kwargs", [
    {"lr_a": 0.0}, {"lr_b": -1.0}, {"n_b": 0}, {"n_b": 1.5}, {"rho": 0.5}, {"eta": -0.1}])
def test_hparams_reject_bad_values(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        hparams(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {"depth": 3}, {"n_trees": 3}, {"seeds": 0}, {"steps": 1}, {"n_b_values": (0,)},
    {"main_n_b": 7}, {"lr_a": 0.0}, {"rho": 0.9}, {"tol": 1.0}, {"hidden_a": (0,)}])
def test_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        E.Config(**kwargs)


def test_static_rejects_bad_sizes():
    with pytest.raises(ValueError, match="steps"):
        StackelbergStatic(steps=0)
    with pytest.raises(ValueError, match="hidden_b"):
        StackelbergStatic(hidden_b=())
    with pytest.raises(ValueError, match="q="):
        init_estimator(jax.random.key(0), 13)


def test_resume_from_orbax_checkpoint_equals_uninterrupted(tmp_path, trained, half_chunk):
    """The carry after STEPS/2 A updates, saved and restored through the lab's Orbax wrapper,
    continues exactly as the run that was never interrupted."""
    from dedebate.lab.checkpoint import Checkpointer

    _, hp, _, _ = trained
    tree, carry0 = _per_seed(half_chunk, hp, 0)
    half, _ = half_chunk(hp, tree, carry0)
    with Checkpointer(tmp_path / "ckpt", "h") as ckpt:
        ckpt.save(STEPS // 2, half, force=True)
    with Checkpointer(tmp_path / "ckpt", "h") as ckpt:
        step, restored = ckpt.restore(carry0)
    assert step == STEPS // 2 and int(restored.step) == STEPS // 2
    end, mon = half_chunk(hp, tree, restored)
    ref, mon_ref = half_chunk(hp, tree, half)
    for got, want in zip(jax.tree_util.tree_leaves((end, mon)),
                         jax.tree_util.tree_leaves((ref, mon_ref))):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
