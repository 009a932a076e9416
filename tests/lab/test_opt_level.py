"""The tests compile with ``tests/conftest.TEST_COMPILE_OPTIONS`` (LLVM level 1, XLA:CPU's older
fusion emitters), and ``reproduce --quick`` on a CPU with ``dedebate.lab.fast_compile.FLAGS``
(level 0, the older emitters), not XLA's defaults: the values they check must not depend on that.
Three program families, each compiled all three ways from one lowering: the stochastic debate in
count mode (the exact binomial sampler, the checker, a lying zoo Alice) gives bit-identical
outputs; the estimator network trained by OGD with a trained distinguisher (Flax, optax) agrees to
float32 rounding (every leaf within 1e-4 of the size of what it sums: the emitters sum in
another order); self-play training (a differentiable DP under Adam, 40 steps) within a few ulps. No
property the tests check can see such differences. The numbers of ``dedebate reproduce`` at the
default and full sizes are compiled with XLA's defaults."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dedebate.agents import selfplay_players as pl
from dedebate.agents.stochastic_players import A_PER_STEP, B_HONEST, zoo_alice, zoo_bob
from dedebate.estimators.advantage import random_oi_problem
from dedebate.estimators.families import random_tanh_family
from dedebate.estimators.train import NetTrainStatic, make_train, net_train_params
from dedebate.exact import selfplay as xs
from dedebate.lab.fast_compile import FLAGS as QUICK_COMPILE_OPTIONS
from dedebate.machines.fixtures import f2_target
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import (
    debate_static,
    lean_defaults,
    make_vera,
    play,
    trial_keys,
)
from dedebate.training import stochastic_selfplay as sp
from tests.conftest import TEST_COMPILE_OPTIONS, XLA_DEFAULTS


def _all_ways(fn, *args):
    """``fn(*args)`` compiled from one lowering with the tests' options, the quick runs' and XLA's
    defaults (named explicitly: ``XLA_FLAGS`` holds the tests' options in this process): the two
    light ones, then the default."""
    lowered = jax.jit(fn).lower(*args)
    assert set(TEST_COMPILE_OPTIONS) == set(QUICK_COMPILE_OPTIONS) == set(XLA_DEFAULTS)
    light = [lowered.compile(o)(*args) for o in (TEST_COMPILE_OPTIONS, QUICK_COMPILE_OPTIONS)]
    return light, lowered.compile(XLA_DEFAULTS)(*args)


def _assert_within_rounding(x, y, rel=1e-4):
    """Same structure and integer/key leaves; each float leaf of ``x`` within ``rel`` times the
    scale of the terms that ``y``'s leaf sums (:func:`_rounding_scales`)."""
    xs, ys = _leaves(x), _leaves(y)
    assert jax.tree.structure(x) == jax.tree.structure(y) and len(xs) == len(ys)
    for a, b, scale in zip(xs, ys, _rounding_scales(y)):
        assert a.shape == b.shape and a.dtype == b.dtype
        if a.dtype.kind == "f":
            assert np.isfinite(a).all() and np.isfinite(b).all()
            np.testing.assert_array_less(np.abs(a - b), rel * scale + 1e-30)
        else:
            np.testing.assert_array_equal(a, b)


def _rounding_scales(tree) -> list[float]:
    """Per leaf, the magnitude its float rounding is relative to: the leaf's largest entry, except
    an Adam first moment, an average of gradients that cancel near a trained optimum, whose sums'
    rounding is relative to the gradients' size, the square root of the second moment's largest
    entry (a 4e-5 moment of 7e-3 gradients differs by 2e-4 of itself between builds)."""
    moments = lambda t: isinstance(t, optax.ScaleByAdamState)  # noqa: E731

    def scales(t):
        if moments(t):
            return t._replace(
                mu=jax.tree.map(lambda nu: np.sqrt(np.abs(nu).max()), t.nu),
                nu=jax.tree.map(lambda nu: np.abs(nu).max(), t.nu),
            )
        return np.abs(_leaves(t)[0]).max()

    return jax.tree.leaves(jax.tree.map(scales, tree, is_leaf=moments))


def _leaves(tree):
    return [
        np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(tree)
    ]


def test_comparisons_can_fail():
    x = {"a": jnp.arange(3, dtype=jnp.float32) / 7, "k": jax.random.key(0)}
    chex.assert_trees_all_equal(x, dict(x), strict=True)
    with pytest.raises(AssertionError):
        chex.assert_trees_all_equal(x, {**x, "a": jnp.nextafter(x["a"], 1.0)}, strict=True)
    _assert_within_rounding(x, {**x, "a": x["a"] * (1 + 1e-6)})
    for bad in (
        {**x, "a": x["a"] * 1.001},
        {**x, "a": x["a"].at[0].set(jnp.nan)},
        {**x, "k": jax.random.key(1)},
    ):
        with pytest.raises(AssertionError):
            _assert_within_rounding(x, bad)
    adam = optax.adam(1e-3).init(jnp.zeros(2))[0]
    adam = adam._replace(mu=jnp.array([4e-5, -1e-6]), nu=jnp.array([5e-5, 1e-5]))
    off = lambda d: adam._replace(mu=adam.mu + d * jnp.sqrt(adam.nu.max()))  # noqa: E731
    _assert_within_rounding(off(1e-6), adam)  # 2e-4 of the 4e-5 moment: rounding of its sums
    with pytest.raises(AssertionError):
        _assert_within_rounding(off(1e-3), adam)


def test_stochastic_debate_count_mode_is_bit_identical():
    T, K = 8, 2
    consts = lean_defaults(K, T).constants(K, T)
    machine = f2_target(T, 0.33333, spread=0.2).machine
    alice, bob = zoo_alice(consts, A_PER_STEP), zoo_bob(consts, B_HONEST)

    def debates(keys):
        return jax.vmap(
            lambda k: play(debate_static(T), machine, alice, bob, make_vera(consts), k)
        )(keys)

    lights, default = _all_ways(debates, trial_keys(jax.random.key(7), 64))
    for light in lights:
        chex.assert_trees_all_equal(light, default, strict=True)
    assert 0 < float(jnp.mean(default.alice_wins)) < 1  # a debate either side can win


def test_estimator_network_training_agrees_to_rounding():
    key = jax.random.key(0)
    problem, feat = random_oi_problem(jax.random.fold_in(key, 0), 50, 4)
    family = random_tanh_family(jax.random.fold_in(key, 1), feat, 4, 40)
    static = NetTrainStatic(rounds=30, hidden=(16,), best_response="family+mlp", dist_steps=3)
    lights, default = _all_ways(
        make_train(static), net_train_params(0.05, 3.0), jax.random.key(2), family, problem, feat
    )
    for light in lights:
        _assert_within_rounding(light, default)
    _, log, final_max_adv = default
    assert float(final_max_adv) < float(log.max_adv[0])  # it trained


def test_selfplay_training_within_a_few_ulps():
    fx = f2_target(4, 0.25, spread=0.2)
    constants = lean_defaults(fx.K, fx.T).constants(fx.K, fx.T)
    alice = pl.AliceParams(
        w1=jnp.zeros((pl.N_FEATURES, 4)),
        b1=jnp.zeros(4),
        w2=jnp.zeros(4),
        b2=jnp.float32(1.0 / constants.b),
    )  # claims pi + 1
    bob = pl.init_bob(jax.random.key(5), fx.T)
    lights, default = _all_ways(
        sp.make_train_bob(40),
        xs.level_inputs(prefix_tree(fx.machine)),
        sp.selfplay_params(constants),
        alice,
        bob,
    )
    for light in lights:
        for x, y in zip(_leaves(light), _leaves(default)):
            np.testing.assert_array_max_ulp(x, y, maxulp=4)
    with pytest.raises(AssertionError):  # it trained
        chex.assert_trees_all_equal(default, bob)
