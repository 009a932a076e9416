"""Test families and the exact advantage (spec PED 5.1, 6.3): two independent computations agree."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.core.bits import bit_table
from dedebate.estimators.advantage import (
    advantage_weight,
    advantages,
    oi_problem,
    random_oi_problem,
)
from dedebate.estimators.families import (
    TANH_BLOCK,
    _FamilyBase,
    calibration_family,
    mlp_test_input,
    random_mlp_family,
    random_tanh_family,
    round_reward_family,
    stack_families,
    table_family,
    tanh_family,
)

N_X, N_Z, Q = 6, 4, 2


def _setup(seed=0):
    key = jax.random.key(seed)
    problem, feat = random_oi_problem(jax.random.fold_in(key, 0), N_X, N_Z, n_features=3)
    h = jax.nn.softmax(2.0 * jax.random.normal(jax.random.fold_in(key, 1), (N_X, N_Z)), -1)
    return key, problem, feat, h


# One test at one (x, z), jitted only so the Python loop below is quick (i is static).
_pointwise = jax.jit(lambda fam, i, x, z, h_x: fam.pointwise(i, x, z, h_x), static_argnums=1)


def _adv_loop(family, problem, h):
    """Adv_f(h) = sum_x mu(x) sum_z (g - h)(x, z) f(x, z, h(x)), one (f, x, z) at a time."""
    mu, g, h = (np.asarray(a, np.float64) for a in (problem.mu, problem.g, h))
    out = np.zeros(family.n_tests)
    for i in range(family.n_tests):
        for x in range(problem.n_x):
            for z in range(problem.n_z):
                val = float(_pointwise(family, i, x, z, jnp.asarray(h[x], jnp.float32)))
                assert -1.0 <= val <= 1.0
                out[i] += mu[x] * (g[x, z] - h[x, z]) * val
    return out


def _tanh_numpy(family, h):
    """The tanh tests from their definition, in float64 numpy (independent of the family code)."""
    feat = np.asarray(family.features, np.float64)
    w = np.asarray(family.weights, np.float64)
    h = np.asarray(h, np.float64)
    n_x, n_z = h.shape
    vals = np.zeros((w.shape[0], n_x, n_z))
    for x in range(n_x):
        for z in range(n_z):
            phi = np.concatenate([feat[x], np.eye(n_z)[z], h[x], [h[x, z]], [1.0]])
            vals[:, x, z] = np.tanh(w @ phi)
    return vals


def test_tanh_advantage_three_ways():
    key, problem, feat, h = _setup()
    fam = random_tanh_family(jax.random.fold_in(key, 2), feat, N_Z, 5, scale=3.0)
    vals = _tanh_numpy(fam, h)
    np.testing.assert_allclose(np.asarray(fam.values(h)), vals, atol=2e-6)
    weight = np.asarray(problem.mu, np.float64)[:, None] * (np.asarray(problem.g) - np.asarray(h))
    exact = np.einsum("fxz,xz->f", vals, weight)
    fast = np.asarray(advantages(fam, problem, h))  # the fused [Z, F, X] layout
    generic = np.asarray(_FamilyBase.advantages(fam, h, advantage_weight(problem, h)))
    np.testing.assert_allclose(fast, exact, atol=2e-6)
    np.testing.assert_allclose(generic, exact, atol=2e-6)
    np.testing.assert_allclose(_adv_loop(fam, problem, h), exact, atol=2e-6)
    assert np.max(np.abs(exact)) > 1e-3  # the comparison is not between zeros


@jax.jit
def _partial_last_block(key):
    """On |X| = TANH_BLOCK + 7 contexts (a partial last block): the blocked advantages, the
    generic ones (values times weight, summed) and the generic sum over the last 7 contexts."""
    n_x, n_z = TANH_BLOCK + 7, 4
    problem, feat = random_oi_problem(jax.random.fold_in(key, 0), n_x, n_z, n_features=3)
    h = jax.nn.softmax(2.0 * jax.random.normal(jax.random.fold_in(key, 1), (n_x, n_z)), -1)
    fam = random_tanh_family(jax.random.fold_in(key, 2), feat, n_z, 5, scale=3.0)
    weight = advantage_weight(problem, h)
    generic = jnp.sum(fam.values(h) * weight[None], axis=(1, 2), dtype=jnp.float32)
    tail = jnp.sum((fam.values(h) * weight[None])[:, TANH_BLOCK:], axis=(1, 2))
    return fam.advantages(h, weight), generic, tail


def test_tanh_advantages_partial_last_block():
    """|X| not a multiple of the block: the padded last block is summed once (the blocked sums
    equal the generic ones, and the last block's share is far above the tolerance)."""
    got, generic, tail = (np.asarray(a) for a in _partial_last_block(jax.random.key(5)))
    assert got.shape == (5,)
    np.testing.assert_allclose(got, generic, rtol=0, atol=2e-7)
    assert np.min(np.abs(tail)) > 1e-5


@jax.jit
def _mlp_and_tanh(key, feat):
    """A stacked family of one tanh test and two Flax MLP tests (built under jit: the vmapped
    Flax init op by op costs seconds of dispatch)."""
    a_out = jnp.sign(feat[:, :1])  # a column standing for the fixed prover's outputs
    mlp = random_mlp_family(
        jax.random.fold_in(key, 3), jnp.concatenate([feat, a_out], 1), N_Z, 2, hidden=(8,)
    )
    tanh = random_tanh_family(jax.random.fold_in(key, 4), feat, N_Z, 1)
    return stack_families(tanh, mlp)


def test_mlp_and_stacked_families_vectorised_vs_loop():
    key, problem, feat, h = _setup(1)
    fam = _mlp_and_tanh(key, feat)
    assert fam.n_tests == 3
    vec = np.asarray(advantages(fam, problem, h))
    np.testing.assert_allclose(vec, _adv_loop(fam, problem, h), atol=3e-6)
    allv = np.asarray(fam.values(h))
    value_of = jax.jit(lambda f, i, h: f.value_of(i, h))  # one program for every (traced) i
    for i in range(fam.n_tests):
        np.testing.assert_allclose(np.asarray(value_of(fam, jnp.int32(i), h)), allv[i], atol=1e-6)


def test_an_mlp_distinguisher_reads_its_context_the_outcome_and_both_estimates():
    """``[feat(x), onehot(z), h(x), h(x, z)]`` at every z (reading h(x, 0) for h(x, z) made every
    MLP test a different function and passed the loop-vs-vectorised checks, which share it)."""
    feat, h = jnp.asarray([0.5, -1.0]), jnp.asarray([0.1, 0.2, 0.3, 0.4])
    for z in range(4):
        want = [0.5, -1.0, *np.eye(4)[z], 0.1, 0.2, 0.3, 0.4, float(h[z])]
        np.testing.assert_array_equal(np.asarray(mlp_test_input(feat, z, h, 4)), np.float32(want))


def _toy_prover(seed=0):
    """A fixed prover on N_X contexts of a q=2 round: M_D tables, previous estimates, directions."""
    rng = np.random.default_rng(seed)
    md = rng.integers(0, 2, size=(N_X, N_Z)).astype(np.float32)
    phat = rng.uniform(size=N_X).astype(np.float32)
    direction = rng.choice([-1.0, 1.0], size=N_X).astype(np.float32)
    claimed = rng.integers(0, 2, size=(N_X, Q)).astype(np.float32)  # A's beliefs about sub-answers
    return md, phat, direction, claimed


def _select(feat_x, h_x):
    """A's selection: the marginal furthest from A's belief (stored in the context row)."""
    marg = h_x @ jnp.asarray(bit_table(Q), jnp.float32)
    return jax.nn.one_hot(jnp.argmax(jnp.abs(marg - feat_x[:Q])), Q)


def _direction(feat_x, j, m_j):
    """A's direction on the selected subclaim: +1 if it believes the estimate is too low."""
    return jnp.where(feat_x[j] > m_j, 1.0, -1.0)


def test_calibration_test_has_zero_mean_under_the_prediction_and_matches_loop():
    _, problem, _, h = _setup(2)
    _, _, _, claimed = _toy_prover()
    fam = calibration_family(_select, _direction, claimed, Q, scale=0.5)
    vals = np.asarray(fam.values(h))[0]  # [X, Z]
    # spec 6.3: E_{z ~ P}[f(xx, z, P)] = 0 for every P, since phat is P's own j-th marginal
    np.testing.assert_allclose(np.sum(np.asarray(h) * vals, axis=1), 0.0, atol=1e-6)
    # explicit computation from the definition
    bits = bit_table(Q)
    hn = np.asarray(h, np.float64)
    for x in range(N_X):
        marg = hn[x] @ bits
        j = int(np.argmax(np.abs(marg - claimed[x])))
        s = 1.0 if claimed[x, j] > marg[j] else -1.0
        for z in range(N_Z):
            assert vals[x, z] == pytest.approx(0.5 * s * (bits[z, j] - marg[j]), abs=1e-6)
    np.testing.assert_allclose(
        np.asarray(advantages(fam, problem, h)), _adv_loop(fam, problem, h), atol=2e-6
    )


def test_round_reward_test_is_the_round_reward():
    md, phat, direction, _ = _toy_prover()
    fam = round_reward_family(direction, md, phat, scale=0.25)
    h = jnp.full((N_X, N_Z), 0.25)
    vals = np.asarray(fam.values(h))[0]
    np.testing.assert_allclose(vals, 0.25 * direction[:, None] * (md - phat[:, None]), atol=1e-7)
    # prediction-independent
    np.testing.assert_array_equal(np.asarray(fam.values(h * 0 + jnp.eye(N_Z)[0])), vals[None])


def test_constructors_reject_bad_input():
    with pytest.raises(ValueError, match="table values"):
        table_family(np.full((1, 2, 2), 1.5))
    with pytest.raises(ValueError, match="md_table"):
        round_reward_family(np.ones(3), np.full((3, 4), 0.5), np.zeros(3))
    with pytest.raises(ValueError, match="scale=2"):
        round_reward_family(np.ones(3), np.ones((3, 4)), np.zeros(3), scale=2)
    with pytest.raises(ValueError, match="n_tests=0"):
        random_tanh_family(jax.random.key(0), np.zeros((3, 2)), 4, 0)
    with pytest.raises(ValueError, match="mu"):
        oi_problem([0.5, 0.6], np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="g:"):
        oi_problem([0.5, 0.5], np.full((2, 2), 0.7))
    with pytest.raises(ValueError, match="mu: holds a non-finite"):  # NaN passed every comparison
        oi_problem([np.nan, 1.0], np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="g: holds a non-finite"):
        oi_problem([0.5, 0.5], [[np.nan, 0.5], [0.5, 0.5]])


def test_constructors_refuse_non_finite_features_weights_and_scales():
    """NaN or inf in a family's features, weights or scale made every test value NaN."""
    key, feats = jax.random.key(0), np.zeros((3, 2))
    with pytest.raises(ValueError, match="features: every value must be finite"):
        random_tanh_family(key, np.array([[0.0, np.nan]] * 3), 4, 2)
    with pytest.raises(ValueError, match="shared: every value must be finite"):
        random_mlp_family(key, np.array([[np.inf, 0.0]] * 3), 4, 2)
    with pytest.raises(ValueError, match="weights: every value must be finite"):
        tanh_family(feats, np.full((1, 2 + 2 * 4 + 2), np.nan), 4)
    with pytest.raises(ValueError, match="scale=inf"):
        random_tanh_family(key, feats, 4, 2, scale=np.inf)
    with pytest.raises(ValueError, match="need one or more families"):
        stack_families(table_family(np.zeros((1, 3, 4))), np.zeros((1, 3, 4)))


def test_advantages_refuse_an_h_that_would_broadcast():
    """An h of one row (``[Z]`` or ``[1, Z]``) would be spread over every context: refused."""
    problem, feat = random_oi_problem(jax.random.key(0), 5, 4)
    family = random_tanh_family(jax.random.key(1), feat, 4, 3)
    h = jnp.full((5, 4), 0.25)
    assert advantages(family, problem, h).shape == (3,)
    for bad in (h[0], h[:1]):
        with pytest.raises(ValueError, match=r"h shape=\((1, )?4,?\): expected g's shape \(5, 4\)"):
            advantages(family, problem, bad)
