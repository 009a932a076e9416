"""dedebate.machines.oracles: validation at construction and the value each oracle answers."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.machines.oracles import (
    PrefixMeanOracle,
    affine_mean_oracle,
    hashed_oracle,
    neural_oracle,
    position_oracle,
    table_oracle,
)


@pytest.mark.parametrize("bad,match", [(math.nan, "nan"), (-0.1, "-0.1"), (1.5, "1.5")])
def test_table_and_position_oracles_reject_bad_probabilities(bad, match):
    with pytest.raises(ValueError, match=rf"table\[2\]={match}.*\[0, 1\]"):
        table_oracle([0.1, 0.2, bad, 0.4])
    with pytest.raises(ValueError, match=rf"probs\[1\]={match}"):
        position_oracle([0.5, bad])


def test_table_oracle_needs_power_of_two_entries():
    with pytest.raises(ValueError, match="3 entries.*2\\^l"):
        table_oracle([0.1, 0.2, 0.3])


def test_hashed_oracle_rejects_bad_range():
    with pytest.raises(ValueError, match="lo=nan"):
        hashed_oracle(0, lo=math.nan)
    with pytest.raises(ValueError, match="hi=1.2"):
        hashed_oracle(0, hi=1.2)
    with pytest.raises(ValueError, match="lo=0.8 > hi=0.2"):
        hashed_oracle(0, lo=0.8, hi=0.2)


def test_affine_mean_oracle_checks_both_extremes():
    with pytest.raises(ValueError, match=r"base \+ weight\[1\]=1.2"):
        affine_mean_oracle([0.1, 0.6], [0.0, 0.6])
    with pytest.raises(ValueError, match=r"base\[0\]=-0.5"):
        affine_mean_oracle([-0.5], [1.0])
    with pytest.raises(ValueError, match="shape"):
        affine_mean_oracle([0.1, 0.2], [0.0])


def test_neural_oracle_rejects_empty_queries():
    with pytest.raises(ValueError, match="query_len=0"):
        neural_oracle(jax.random.key(0), 0)


def test_table_oracle_reads_little_endian_code():
    o = table_oracle(np.arange(8) / 8.0)
    q = jnp.array([1, 0, 1, 1], jnp.int8)  # first l=3 bits: code 1 + 4 = 5
    assert float(o.prob(q, jnp.ones(4, bool), 0)) == 5 / 8


def test_prefix_mean_and_affine_mean_read_only_unmasked_bits():
    q = jnp.array([1, 1, 0, 1], jnp.int8)
    mask = jnp.array([True, True, True, False])
    assert float(PrefixMeanOracle().prob(q, mask, 0)) == pytest.approx(2 / 3)
    assert float(PrefixMeanOracle().prob(q, jnp.zeros(4, bool), 0)) == 0.0
    o = affine_mean_oracle([0.1, 0.2], [0.0, 0.5])
    assert float(o.prob(q, mask, 0)) == pytest.approx(0.1)
    assert float(o.prob(q, mask, 1)) == pytest.approx(0.2 + 0.5 * 2 / 3)


def test_hashed_oracle_is_a_fixed_function_in_range():
    o = hashed_oracle(7, lo=0.2, hi=0.4)
    qs = jnp.asarray(np.random.default_rng(0).integers(0, 2, (256, 12)), jnp.int8)
    mask = jnp.ones(12, bool)
    p1 = jax.vmap(lambda q: o.prob(q, mask, 0))(qs)
    p2 = jax.vmap(lambda q: o.prob(q, mask, 3))(qs)
    np.testing.assert_array_equal(np.asarray(p1), np.asarray(p2))
    assert float(p1.min()) >= 0.2 and float(p1.max()) <= 0.4
    assert np.unique(np.asarray(p1)).size > 200  # distinct queries, (almost) distinct answers
    d = hashed_oracle(7, deterministic=True)
    bits = np.asarray(jax.vmap(lambda q: d.prob(q, mask, 0))(qs))
    assert set(np.unique(bits)) == {0.0, 1.0}
    assert 0.35 < bits.mean() < 0.65


def test_neural_oracle_is_a_probability_and_vmaps_over_params():
    make = jax.jit(lambda k: neural_oracle(k, 6))  # one program, not the Flax init op by op
    oracles = [make(k) for k in jax.random.split(jax.random.key(1), 2)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *oracles)
    q = jnp.array([1, 0, 1, 1, 0, 0], jnp.int8)
    mask = jnp.ones(6, bool)
    prob = jax.jit(lambda o: o.prob(q, mask, 0))
    batched = jax.vmap(prob)(stacked)
    looped = jnp.stack([prob(o) for o in oracles])
    np.testing.assert_allclose(np.asarray(batched), np.asarray(looped), rtol=1e-6)
    assert bool(jnp.all((batched > 0) & (batched < 1)))
    assert float(jnp.abs(batched[0] - batched[1])) > 1e-4  # different params, different judge


def test_table_oracle_rejects_query_shorter_than_its_length():
    import jax.numpy as jnp
    import pytest

    from dedebate.machines import table_oracle

    oracle = table_oracle([0.0, 1.0, 1.0, 0.0])  # l = 2
    with pytest.raises(ValueError, match="length 2"):
        oracle.prob(jnp.array([1], jnp.int8), jnp.array([True]), 0)
    assert float(oracle.prob(jnp.array([1, 0], jnp.int8), jnp.array([True, True]), 0)) == 1.0


def test_hashed_oracle_range_just_inverted_is_refused():
    with pytest.raises(ValueError, match=r"^lo=0.6 > hi=0.5: the probability range must satisfy"):
        hashed_oracle(0, lo=0.6, hi=0.5)
    hashed_oracle(0, lo=0.5, hi=0.5)  # one value: allowed
