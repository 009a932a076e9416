"""dedebate.machines.fixtures: exact P_M three ways (closed form, DP, enumeration), the paper-model
step programs, Monte Carlo within a binomial margin, the proven K formulas, and validation."""

import math

import jax
import numpy as np
import pytest

from dedebate.machines import fixtures as fxs
from dedebate.machines.lipschitz import hybrid_bound, prefix_tree
from dedebate.machines.program import exact_output_prob, step_uniforms, transcript_from_uniforms


@pytest.fixture(scope="module")
def standard10():
    return fxs.standard_fixtures(10)


def test_standard_fixtures_cover_the_library(standard10):
    assert [f.name for f in standard10] == [
        "F1",
        "F2",
        "F3",
        "majority",
        "AND",
        "OR",
        "meta-analysis",
    ]
    assert [f.K for f in standard10[:3]] == [1.0, 2.0, 10.0]
    for f in standard10:
        assert f.why and 1.0 <= f.K <= f.T


def test_exact_p1_closed_form_dp_and_enumeration_agree(standard10):
    for f in standard10:
        enum = float(exact_output_prob(f.machine))
        dp = float(f.machine.output_prob_dp())
        assert dp == pytest.approx(enum, abs=1e-5), f.name
        if f.exact_p1 is not None:
            assert f.exact_p1 == pytest.approx(enum, abs=1e-5), f.name
    assert [f.exact_p1 is None for f in standard10] == [False] * 6 + [True]


def test_step_programs_have_the_same_prefix_tree():
    """The paper-model StepProgram of each fixture (ORACLE / DET steps, padded deps) assigns every
    prefix the same conditional probability as the efficient machine."""
    small = [
        fxs.f1_target(7, 0.3, spread=0.2),
        fxs.f2_target(7, 0.7, spread=0.2),
        fxs.majority([0.6, 0.3, 0.8, 0.5, 0.7]),
        fxs.and_fixture([0.9, 0.8, 0.95]),
        fxs.or_fixture([0.1, 0.2, 0.05]),
        fxs.meta_analysis([1, 0, 1, 1, 0], [0.9, 0.5, 0.6, 0.7, 0.8], 1),
    ]
    for f in small:
        for la, lb in zip(prefix_tree(f.machine), prefix_tree(f.step_program())):
            np.testing.assert_allclose(la, lb, atol=1e-6, err_msg=f.name)


def test_enumeration_at_T16_equals_closed_forms():
    for f in [fxs.f2_target(16, 0.7, spread=0.25), fxs.f3_cascade(16, 0.9, 0.2, 0.05)]:
        assert float(exact_output_prob(f.machine)) == pytest.approx(f.exact_p1, abs=1e-5)
    p0, q, r = 0.9, 0.2, 0.05
    assert fxs.f3_cascade(16, p0, q, r).exact_p1 == pytest.approx(q + (1 - r) ** 15 * (p0 - q))


def test_long_machines_dp_equals_closed_form():
    """T = 1024 (the stochastic protocol's scale): the DPs agree with the closed forms."""
    for f in [
        fxs.f2_target(1024, 0.7, spread=0.25),
        fxs.f3_cascade(1024, 0.9, 0.3, 0.001),
        fxs.and_fixture(np.full(40, 0.99)),
        fxs.or_fixture(np.full(40, 0.02)),
        fxs.majority(np.full(301, 0.52)),
    ]:
        assert float(f.machine.output_prob_dp()) == pytest.approx(f.exact_p1, abs=2e-5), f.name


def test_monte_carlo_matches_exact_within_binomial_margin(standard10):
    n = 4096
    u = jax.jit(jax.vmap(step_uniforms, in_axes=(0, None)), static_argnums=1)(
        jax.random.split(jax.random.key(11), n), 10
    )  # the uniforms sample_transcripts would use
    last = jax.jit(lambda m, u: jax.vmap(transcript_from_uniforms, in_axes=(None, 0))(m, u)[:, -1])
    for f in standard10:
        p = f.p1()
        mc = float(np.asarray(last(f.machine, u)).mean())
        assert abs(mc - p) <= 4.0 * math.sqrt(p * (1 - p) / n), (f.name, mc, p)


def test_targets_reach_the_protocol_regimes():
    for T in (8, 1024):
        for p in (0.7, 0.25):
            assert fxs.f2_target(T, p, spread=0.2).exact_p1 == pytest.approx(p, abs=1e-6)
            assert fxs.f3_target(T, p).exact_p1 == pytest.approx(p, abs=1e-6)
            assert fxs.f1_target(T, p).exact_p1 == pytest.approx(p, abs=1e-6)
    assert all(f.p1() <= 1 / 3 for f in fxs.standard_fixtures(8, high=False)[:3])


def test_threshold_K_matches_independent_formulas():
    pi = np.array([0.9, 0.8, 0.95, 0.7, 0.85])
    and_K = 1 + sum(np.prod(pi[i + 1 :]) for i in range(5))
    or_K = 1 + sum(np.prod(1 - pi[i + 1 :]) for i in range(5))
    assert fxs.and_fixture(pi).K == pytest.approx(and_K, rel=1e-6)
    assert fxs.or_fixture(pi).K == pytest.approx(or_K, rel=1e-6)
    # Majority with equal p: vote i (m = n-1-i later votes ~ Binomial(m, p)) is pivotal at a
    # prefix with s ones iff the later votes number exactly h-1-s, and s ranges over 0..i.
    n, p = 9, 0.6
    h = (n + 1) // 2

    def pmf(m, k):
        return math.comb(m, k) * p**k * (1 - p) ** (m - k)

    maj_K = 1 + sum(
        max(pmf(n - 1 - i, k) for k in range(max(0, h - 1 - i), min(n - 1 - i, h - 1) + 1))
        for i in range(n)
    )
    assert fxs.majority(np.full(n, p)).K == pytest.approx(maj_K, rel=1e-6)


def test_proven_K_equals_the_exact_hybrid_bound(standard10):
    """The closed-form K of F1, F2 and of the threshold fixtures is the exact hybrid sum computed
    generically from the prefix tree; for F3 the hybrid sum is (1-(1-r)^T)/r <= K = T."""
    for f in standard10:
        h = hybrid_bound(prefix_tree(f.machine))
        if f.name == "F3":
            assert h == pytest.approx(f.machine.tight_lipschitz(), rel=1e-5)
            assert T_over_2_le(h, f.T)
        else:
            assert h == pytest.approx(f.K, rel=1e-6), f.name


def T_over_2_le(h, T):
    return T / 2 <= h <= T


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: fxs.f2([0.2, 1.2, 0.3]), r"pi\[1\]=1.2"),
        (lambda: fxs.f2([0.2, math.nan]), r"pi\[1\]=nan"),
        (lambda: fxs.f1([0.5, 0.5], -0.2), "a=-0.2"),
        (lambda: fxs.f2([]), "T-1 >= 1"),
        (lambda: fxs.f2_target(1, 0.7), "T=1"),
        (lambda: fxs.f2_target(10, 0.9, spread=0.2), r"p \+- spread\[7\]=1.05"),
        (lambda: fxs.f3_cascade(8, 0.5, 0.5, -0.1), "noise=-0.1"),
        (lambda: fxs.f3_cascade(8, 1.5, 0.5, 0.1), "p0=1.5"),
        (lambda: fxs.majority([0.5, 0.5]), "n=2: majority needs an odd"),
        (lambda: fxs.and_fixture([0.5, math.nan]), r"pi\[1\]=nan"),
        (lambda: fxs.meta_analysis([1, 2], [0.5, 0.5], 1), "reports"),
        (lambda: fxs.meta_analysis([1, 0], [0.5], 1), "quality has shape"),
        (lambda: fxs.meta_analysis([1, 0], [0.5, 0.5], 7), "theta=7"),
    ],
)
def test_fixture_constructors_reject_bad_input(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_large_threshold_step_program_is_refused():
    with pytest.raises(ValueError, match="n=7.*14 bits"):
        fxs.meta_analysis([1] * 7, [0.5] * 7, 2).step_program()


def test_meta_analysis_K_is_tight_where_a_negative_study_comes_first():
    """The proven K equals the exact hybrid bound (WHY_THRESHOLD) also where the earlier studies
    hold a negative report (a prefix range that counted study i's own sign gave 3.71)."""
    f = fxs.meta_analysis([0, 1, 1], [0.9] * 3, 1)
    assert f.K == pytest.approx(hybrid_bound(prefix_tree(f.machine)), rel=1e-12)


def test_threshold_and_spread_are_refused_just_outside_their_ranges():
    """theta in [-n, n + 1] (n studies), spread >= 0: the first values outside are refused."""
    for theta in (-3, 4):
        with pytest.raises(ValueError, match=rf"^theta={theta}: the threshold must be an integer"):
            fxs.meta_analysis([1, 0], [0.5, 0.5], theta)
    for theta in (-2, 3):
        fxs.meta_analysis([1, 0], [0.5, 0.5], theta)
    with pytest.raises(ValueError, match=r"^spread=-0.1: the spread must be >= 0"):
        fxs.spread_probs(5, 0.5, -0.1)
    np.testing.assert_array_equal(fxs.spread_probs(5, 0.5, 0.0), np.full(5, 0.5, np.float32))
