"""Naive recursive debate (spec PED 9.3): the obfuscating liar survives with probability 1 - q^-d."""  # noqa: E501

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.lab.experiment import wilson_interval
from dedebate.programs import FAST_COMPILE
from dedebate.protocols.naive_recursive import (
    InformedChallenger,
    UniformChallenger,
    naive_debater,
    play_naive,
    survival_probability,
)
from dedebate.trees import and_tree, hidden_flaw_tree

_jit = functools.partial(jax.jit, compiler_options=FAST_COMPILE)
LIAR = naive_debater("obfuscating_liar", cand=0)
HONEST = naive_debater("honest")


@pytest.fixture(scope="module")
def tree():
    return hidden_flaw_tree(jax.random.key(2), depth=3, q=4)


@_jit
def _exact(tree, rounds):
    u, i = UniformChallenger(), InformedChallenger()
    return {
        "liar_uniform": jax.vmap(lambda n: survival_probability(LIAR, u, tree, rounds=n))(rounds),
        "liar_informed": survival_probability(LIAR, i, tree)[0],
        "honest_uniform": survival_probability(HONEST, u, tree)[0],
        "honest_informed": survival_probability(HONEST, i, tree)[0],
    }


def test_exact_survival(tree):
    out = _exact(tree, jnp.asarray([1, 2, 3]))
    surv, total = (np.asarray(x) for x in out["liar_uniform"])
    np.testing.assert_allclose(surv, [1 - 4.0**-1, 1 - 4.0**-2, 63 / 64], atol=1e-6)
    np.testing.assert_allclose(total, 1.0, atol=1e-6)
    assert float(out["liar_informed"]) == 0.0  # a challenger who sees the flaw
    assert float(out["honest_uniform"]) == pytest.approx(1.0, abs=1e-6)
    assert float(out["honest_informed"]) == pytest.approx(1.0, abs=1e-6)


_batch = _jit(jax.vmap(lambda t, k: play_naive(LIAR, UniformChallenger(), t, k), in_axes=(None, 0)))
_one = _jit(lambda t, k: play_naive(LIAR, UniformChallenger(), t, k))


def test_sampled_survival_and_vmap_vs_loop(tree):
    keys = jax.random.split(jax.random.key(4), 20_000)
    out = _batch(tree, keys)
    s = np.asarray(out.alice_wins)
    p, lo, hi = wilson_interval(float(s.sum()), s.size)
    assert lo <= 63 / 64 <= hi, (p, lo, hi)
    caught = np.asarray(out.caught_round)
    assert set(np.unique(caught)) == {-1, 3}  # never inconsistent, caught only at the leaf
    for i in (0, 5, 19_999):
        one = _one(tree, keys[i])
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(out)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b)[i])


def test_bad_inputs(tree):
    with pytest.raises(ValueError, match="mode='liar'"):
        naive_debater("liar")
    with pytest.raises(ValueError, match="cand=-1"):
        naive_debater("honest", cand=-1)
    with pytest.raises(ValueError, match=f"cand={tree.n_cand}: the tree has candidates"):
        play_naive(
            naive_debater("honest", cand=tree.n_cand), UniformChallenger(), tree, jax.random.key(0)
        )
    big = jax.eval_shape(lambda k: and_tree(k, depth=6, q=12), jax.random.key(0))
    with pytest.raises(ValueError, match="enumerating"):
        survival_probability(LIAR, UniformChallenger(), big)
