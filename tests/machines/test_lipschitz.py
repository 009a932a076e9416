"""dedebate.machines.lipschitz: exact prefix-tree algebra and the empirical Lipschitz constant
against each fixture's proven K (never above it; within a factor 2 for F2 and F3)."""

import itertools

import jax
import numpy as np
import pytest

from dedebate.machines import fixtures as fxs
from dedebate.machines.lean import polya_urn
from dedebate.machines.lipschitz import (
    estimate_lipschitz,
    hybrid_bound,
    prefix_tree,
    tree_gradient,
    tree_output_prob,
)
from dedebate.machines.program import exact_output_prob

K_REL_TOL = 1e-6  # float32 rounding of the machines' probabilities (see experiments/machines.py)


@pytest.fixture(scope="module")
def trees():
    fixtures = fxs.standard_fixtures(10)
    return [(f, prefix_tree(f.machine)) for f in fixtures]


def test_tree_output_prob_equals_enumeration(trees):
    for f, levels in trees[:3]:
        assert tree_output_prob(levels) == pytest.approx(
            float(exact_output_prob(f.machine)), abs=1e-6
        )


def test_tree_gradient_is_exact_for_the_multilinear_P_M():
    """P_M is affine in each node probability, so a finite difference equals the gradient."""
    levels = prefix_tree(polya_urn(7, 1.0, 2.0))
    grad = tree_gradient(levels)
    base = tree_output_prob(levels)
    rng = np.random.default_rng(0)
    for n in (0, 3, 6):
        c = int(rng.integers(levels[n].size))
        bumped = [p.copy() for p in levels]
        h = -0.3 if bumped[n][c] > 0.5 else 0.3
        bumped[n][c] += h
        assert tree_output_prob(bumped) - base == pytest.approx(h * grad[n][c], abs=1e-12)


def test_hybrid_bound_holds_for_arbitrary_oracles():
    """|P_M(o') - P_M(o)| <= hybrid(o) * dist(o, o') for random o' of any size, on a machine whose
    every step reads the whole prefix."""
    levels = prefix_tree(polya_urn(8, 2.0, 1.0))
    h = hybrid_bound(levels)
    assert 1.0 < h < 8.0
    base = tree_output_prob(levels)
    rng = np.random.default_rng(1)
    worst = 0.0
    for scale in (0.01, 0.2, 1.0):
        for _ in range(20):
            other = [np.clip(p + scale * rng.uniform(-1, 1, p.size), 0, 1) for p in levels]
            d = max(np.max(np.abs(a - b)) for a, b in zip(other, levels))
            worst = max(worst, abs(tree_output_prob(other) - base) / d)
    assert worst <= h * (1 + 1e-9)
    assert worst > 0.1 * h


def test_empirical_K_never_exceeds_proven_K(trees):
    for i, (f, levels) in enumerate(trees):
        est = estimate_lipschitz(levels, jax.random.key(i), n_random=4, ascent_iters=5)
        assert est.best <= est.hybrid * (1 + 1e-9), f.name
        assert est.best <= f.K * (1 + K_REL_TOL), (f.name, est.best, f.K)
        assert est.p1 == pytest.approx(f.p1(), abs=1e-5)
        assert est.best > 0.3 * f.K or f.name not in ("F1", "F2", "F3")


def test_empirical_K_within_factor_two_for_F2_and_F3():
    for f in [
        fxs.f2_target(10, 0.7, spread=0.2),
        fxs.f2_target(10, 0.25),
        fxs.f3_target(10, 0.7),
        fxs.f3_cascade(10, 0.1, 0.3, 1 / 10),
    ]:
        est = estimate_lipschitz(f.machine, jax.random.key(0), eps=(1e-3, 1e-2), n_random=2)
        assert f.K / 2 <= est.best <= f.K * (1 + K_REL_TOL), (f.name, est.best, f.K)


def test_adversarial_family_beats_uniform_when_signs_matter():
    """Meta-analysis: negative reports push P_M down when their studies are sound, so the best
    perturbation needs per-step signs; uniform shifts partly cancel."""
    f = fxs.meta_analysis(
        [1, 0, 1, 0, 1, 1, 0, 0, 1], [0.7, 0.8, 0.6, 0.9, 0.5, 0.7, 0.6, 0.8, 0.6], 1
    )
    est = estimate_lipschitz(f.machine, jax.random.key(0), eps=(1e-3,), n_random=2)
    assert est.by_family["adversarial"] > 1.5 * est.by_family["uniform"]
    assert est.by_family["adversarial"] >= est.by_family["random"]
    assert est.best <= f.K * (1 + K_REL_TOL)


def test_estimate_rejects_bad_arguments():
    levels = prefix_tree(fxs.f2_target(4, 0.7).machine)
    with pytest.raises(ValueError, match="eps=0"):
        estimate_lipschitz(levels, jax.random.key(0), eps=(0.0,))
    with pytest.raises(ValueError, match="ascent_iters=0"):
        estimate_lipschitz(levels, jax.random.key(0), ascent_iters=0)
    with pytest.raises(ValueError, match="T=21"):
        prefix_tree(fxs.f2_target(21, 0.7).machine)


@pytest.mark.parametrize("level", [0, 3])
def test_a_nan_probability_makes_the_estimate_nan_not_zero(level):
    """A NaN ratio is no evidence of a bound: the estimate (and the experiment's row against K)
    must see it, not keep the largest finite ratio (0.0 when every ratio is NaN)."""
    levels = [np.array(p, np.float64) for p in prefix_tree(fxs.f2_target(4, 0.7).machine)]
    levels[level][0] = np.nan
    est = estimate_lipschitz(levels, jax.random.key(0), eps=(1e-3,), n_random=2)
    assert np.isnan(est.best) and np.isnan(est.by_family[est.family])


def test_the_level_matrix_holds_two_to_the_level_entries_per_level():
    """Level n of the padded level matrix holds the 2^n prefix codes, zeros after."""
    from dedebate.machines.lipschitz import _level_mask

    np.testing.assert_array_equal(_level_mask(4).sum(axis=1), [1, 2, 4, 8])
    assert _level_mask(4)[2].tolist() == [True] * 4 + [False] * 4


def test_the_jnp_estimate_equals_the_host_estimate_family_by_family():
    """:func:`estimate_lipschitz_jnp` is the host estimate in float32 with the same sign patterns
    from ``key`` (its docstring): every family's ratio agrees on a random tree, the adversarial
    ascent's re-signing and the random patterns included. float32 against float64: each ratio
    sums at most 2^T = 16 products of a few roundings each, far inside 1e-5."""
    from dedebate.machines.lipschitz import estimate_lipschitz_jnp

    rng = np.random.default_rng(0)
    T = 4
    levels = [rng.uniform(0, 1, 2**n).astype(np.float32).astype(np.float64) for n in range(T)]
    P = np.zeros((T, 2 ** (T - 1)), np.float32)
    for n, level in enumerate(levels):
        P[n, : 2**n] = level
    key = jax.random.key(1)
    host = estimate_lipschitz(levels, key, (0.3,), n_random=4, ascent_iters=10)
    dev = jax.jit(estimate_lipschitz_jnp, static_argnums=(3, 4))(P, key, 0.3, 4, 10)
    assert set(host.by_family) == {"uniform", "per-step", "adversarial", "random"}
    for family, value in host.by_family.items():
        assert float(dev[family]) == pytest.approx(value, rel=1e-5), family


def _padded(levels):
    """The padded level matrix (float32) of host levels, as :func:`tree_matrix_jnp` lays it out."""
    T = len(levels)
    P = np.zeros((T, 2 ** (T - 1)), np.float32)
    for n, level in enumerate(levels):
        P[n, : 2**n] = level
    return P


def test_a_deterministic_tree_moves_only_downward_at_ratio_one():
    """Every node of o at 1: P_M(o) = 1, every influence but the last step's is 0 (hybrid = 1),
    the clamp stops every increase, and lowering every node by eps gives P_M(o') = 1 - eps at
    dist eps: ratio exactly 1 for the uniform, per-step and adversarial families (the last also
    with a single ascent step), host and jnp (float64: rel 1e-9 covers the rounding of 1 - eps
    relative to eps = 1e-3; float32: rel 1e-4 likewise)."""
    from dedebate.machines.lipschitz import estimate_lipschitz_jnp

    T, eps = 4, (1e-3, 0.3)
    levels = [np.ones(2**n) for n in range(T)]
    assert hybrid_bound(levels) == 1.0 and tree_output_prob(levels) == 1.0
    host = estimate_lipschitz(levels, jax.random.key(1), eps, n_random=4, ascent_iters=10)
    dev = jax.jit(estimate_lipschitz_jnp, static_argnums=(3, 4))(
        _padded(levels), jax.random.key(1), np.asarray(eps, np.float32), 4, 10
    )
    assert host.p1 == 1.0 and float(dev["p1"]) == 1.0 and float(dev["hybrid"]) == 1.0
    for family in ("uniform", "per-step", "adversarial"):
        assert host.by_family[family] == pytest.approx(1.0, rel=1e-9), family
        assert float(dev[family]) == pytest.approx(1.0, rel=1e-4), family
    # one ascent step: only the starting patterns, the downward one among them
    one = estimate_lipschitz(levels, jax.random.key(1), eps, n_random=0, ascent_iters=1)
    assert one.by_family["adversarial"] == pytest.approx(1.0, rel=1e-9)


def test_the_reported_eps_is_where_the_best_ratio_was_found():
    """``eps`` (host) and ``best_eps`` (jnp) name the perturbation size of the largest ratio: each
    eps run alone (the same key, so the same sign patterns) gives that eps's ratios, exactly as in
    the joint run (float64, no tolerance), and the largest belongs to the reported eps. Here the
    largest is at the last eps tried, so neither the first nor the reversed index can pass."""
    from dedebate.machines.lipschitz import estimate_lipschitz_jnp

    rng = np.random.default_rng(0)
    T = 4
    levels = [rng.uniform(0, 1, 2**n).astype(np.float32).astype(np.float64) for n in range(T)]
    key, eps = jax.random.key(1), (0.3, 0.1, 0.01)
    est = estimate_lipschitz(levels, key, eps, n_random=4, ascent_iters=10)
    alone = [estimate_lipschitz(levels, key, (e,), n_random=4, ascent_iters=10) for e in eps]
    assert est.best == max(a.best for a in alone)
    at = [a.by_family[est.family] for a in alone]
    assert est.eps == eps[int(np.argmax(at))] == eps[-1]
    assert max(at[:-1]) < at[-1] * (1 - 1e-3)  # a clear maximum: float32 picks the same eps
    dev = jax.jit(estimate_lipschitz_jnp, static_argnums=(3, 4))(
        _padded(levels), key, np.asarray(eps, np.float32), 4, 10
    )
    assert float(dev["best_eps"]) == np.float32(est.eps)


def _enumerated_p1(levels):
    """P_M(1) by summing the probability of every transcript y in {0, 1}^T ending in 1."""
    T, total = len(levels), 0.0
    for code in range(2 ** (T - 1)):
        y = [(code >> n) & 1 for n in range(T - 1)] + [1]
        prob = 1.0
        for n in range(T):
            p = levels[n][sum(b << k for k, b in enumerate(y[:n]))]
            prob *= p if y[n] else 1.0 - p
        total += prob
    return total


def test_one_random_pattern_gives_its_enumerated_ratio():
    """With n_random = 1 the random family is the first Rademacher pattern of ``key`` (level by
    level, in node order), clamped: its ratio |P_M(o') - P_M(o)| / dist(o, o') with P_M by
    enumerating all 2^T transcripts, the largest over eps (host: float64, rel 1e-9; jnp: float32,
    rel 1e-5 as the family-by-family test)."""
    from dedebate.machines.lipschitz import estimate_lipschitz_jnp

    rng = np.random.default_rng(3)
    T, key, eps = 4, jax.random.key(2), (0.05, 0.3)
    levels = [rng.uniform(0, 1, 2**n).astype(np.float32).astype(np.float64) for n in range(T)]
    signs = np.asarray(jax.random.rademacher(key, (1, 2**T - 1)), np.float64)[0]
    split = np.split(signs, np.cumsum([2**n for n in range(T - 1)]))
    base, want = _enumerated_p1(levels), 0.0
    for e in eps:
        pert = [np.clip(p + e * s, 0.0, 1.0) for p, s in zip(levels, split)]
        dist = max(np.max(np.abs(a - b)) for a, b in zip(pert, levels))
        want = max(want, abs(_enumerated_p1(pert) - base) / dist)
    assert want > 0.1
    host = estimate_lipschitz(levels, key, eps, n_random=1, ascent_iters=1)
    assert host.by_family["random"] == pytest.approx(want, rel=1e-9)
    dev = jax.jit(estimate_lipschitz_jnp, static_argnums=(3, 4))(
        _padded(levels), key, np.asarray(eps, np.float32), 1, 1
    )
    assert float(dev["random"]) == pytest.approx(want, rel=1e-5)


def test_the_jnp_ascent_keeps_its_best_pattern():
    """The sign ascent need not improve at every step: the adversarial family is the largest ratio
    over every pattern visited, host (float64) and jnp (float32) alike (on this tree the jnp
    ascent's last pattern gives 1.18, its best 1.40; rel 1e-5 as the family-by-family test)."""
    from dedebate.machines.lipschitz import estimate_lipschitz_jnp

    rng = np.random.default_rng(10)
    T, key = 4, jax.random.key(1)
    levels = [rng.uniform(0, 1, 2**n).astype(np.float32) for n in range(T)]
    host = estimate_lipschitz([p.astype(np.float64) for p in levels], key, (0.3,), 4, 10)
    dev = jax.jit(estimate_lipschitz_jnp, static_argnums=(3, 4))(_padded(levels), key, 0.3, 4, 10)
    assert host.by_family["adversarial"] > 1.3
    for family, value in host.by_family.items():
        assert float(dev[family]) == pytest.approx(value, rel=1e-5), family


def test_the_per_step_family_takes_each_level_sign_from_its_summed_gradient():
    """Per-step perturbations shift level n by the sign of sum_c dP_M/dp_n(c), here found by
    enumeration (P_M is affine in each node: the derivative is P_M(node at 1) - P_M(node at 0));
    on this tree the signs (-, +, +, +) differ from the summed influences' and from the levels
    reversed (either direction). The family's ratio is the enumerated one (rel 1e-9 host, 1e-5
    jnp)."""
    from dedebate.machines.lipschitz import estimate_lipschitz_jnp

    rng = np.random.default_rng(10)
    T, key, eps = 4, jax.random.key(0), (0.05, 0.3)
    levels = [rng.uniform(0, 1, 2**n).astype(np.float32).astype(np.float64) for n in range(T)]

    def at(n, c, value):
        return [
            np.where(np.arange(p.size) == c, value, p) if m == n else p
            for m, p in enumerate(levels)
        ]

    signs = [
        np.sign(
            sum(_enumerated_p1(at(n, c, 1.0)) - _enumerated_p1(at(n, c, 0.0)) for c in range(2**n))
        )
        for n in range(T)
    ]
    assert signs == [-1, 1, 1, 1]
    base, want = _enumerated_p1(levels), 0.0
    for e, d in itertools.product(eps, (1.0, -1.0)):
        pert = [np.clip(p + d * e * s, 0.0, 1.0) for p, s in zip(levels, signs)]
        dist = max(np.max(np.abs(a - b)) for a, b in zip(pert, levels))
        want = max(want, abs(_enumerated_p1(pert) - base) / dist)
    host = estimate_lipschitz(levels, key, eps, n_random=1, ascent_iters=1)
    assert host.by_family["per-step"] == pytest.approx(want, rel=1e-9)
    dev = jax.jit(estimate_lipschitz_jnp, static_argnums=(3, 4))(
        _padded(levels), key, np.asarray(eps, np.float32), 1, 1
    )
    assert float(dev["per-step"]) == pytest.approx(want, rel=1e-5)
