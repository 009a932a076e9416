"""Verdicts fail closed (dedebate/lab/claims.py, dedebate/lab/report_render.py): a broken
measurement -- a NaN count, an infinite mean, a NaN inside a max, zero trials, an experiment with
only findings -- can never pass, and the report prints numbers as they are."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from dedebate.lab.experiment import (
    FAMILY_ALPHA,
    Claim,
    ExperimentResult,
    claim_p_value,
    exact_interval,
    family_decisions,
    mean_interval,
    strict_max,
    strict_min,
    wilson_interval,
    with_family_decisions,
)
from dedebate.lab.report import ExperimentEntry, apply_report_family, measured, render_markdown
from dedebate.lab.report_render import job_passed

BAD = [math.nan, math.inf, -math.inf]
RELATIONS = st.sampled_from([">=", "<=", "=="])
bad_numbers = st.sampled_from(BAD)


@settings(max_examples=60, deadline=None)
@given(bad=bad_numbers, x=st.floats(-10, 10), relation=RELATIONS)
def test_p_value_of_a_non_finite_estimate_target_or_se_is_zero(bad, x, relation):
    assert claim_p_value(bad, 1.0, x, relation) == 0.0
    assert claim_p_value(x, 1.0, bad, relation) == 0.0
    assert claim_p_value(x, bad, x, relation) == 0.0
    assert claim_p_value(x, -1.0, x, relation) == 0.0


@settings(max_examples=60, deadline=None)
@given(x=st.floats(-10, 10), relation=RELATIONS)
def test_p_value_at_equality_with_the_bound(x, relation):
    # equality holds for every relation: exact (se = 0) and sampled (z = 0) both give p = 1
    assert claim_p_value(x, 0.0, x, relation) == 1.0
    assert claim_p_value(x, 0.5, x, relation) == 1.0


@settings(max_examples=80, deadline=None)
@given(
    bad=bad_numbers,
    n=st.integers(1, 1000),
    target=st.floats(0.0, 1.0),
    relation=RELATIONS,
    which=st.sampled_from(["successes", "trials", "target"]),
)
def test_proportion_with_a_non_finite_input_fails_with_the_reason(bad, n, target, relation, which):
    args = {"successes": n // 2, "trials": n, "target": target} | {which: bad}
    row = Claim.proportion("c", "s", relation, args["target"], args["successes"], args["trials"])
    assert not row.passed and not row.checks and row.p_value == 0.0
    assert row.note.startswith(f"FAIL-CLOSED: {which}=")
    assert family_decisions([row]) == [False]
    assert not ExperimentResult(claims=[row]).passed


@pytest.mark.parametrize("trials", [0, -3])
def test_proportion_with_no_trials_fails(trials):
    row = Claim.proportion("c", "s", ">=", 0.0, 0, trials)
    assert not row.passed and f"trials={trials}" in row.note


@pytest.mark.parametrize("k", [-1, 11])
def test_proportion_count_outside_zero_to_n_fails(k):
    row = Claim.proportion("c", "s", "<=", 1.0, k, 10)
    assert not row.passed and f"successes={k}" in row.note


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 3000), data=st.data())
def test_wilson_interval_matches_scipy(n, data):
    k = data.draw(st.sampled_from([0, n, data.draw(st.integers(0, n))]))
    p, lo, hi = wilson_interval(k, n)
    ci = binomtest(k, n).proportion_ci(method="wilson")
    assert p == k / n
    assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)
    assert 0.0 <= lo <= p <= hi <= 1.0


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 500), relation=RELATIONS)
def test_proportion_at_k_zero_and_k_n_against_the_edges(n, relation):
    # an exact boundary target (0 or 1) has a zero standard error: the row passes iff the
    # estimate itself meets the relation
    for k, target in ((0, 0.0), (n, 1.0)):
        row = Claim.proportion("c", "s", relation, target, k, n)
        assert row.passed and row.p_value == 1.0
    assert Claim.proportion("c", "s", ">=", 1.0, n - 1, n).passed is False or n == 0
    assert not Claim.proportion("c", "s", "<=", 0.0, 1, n).passed


@settings(max_examples=60, deadline=None)
@given(bad=bad_numbers, n=st.integers(2, 50), pos=st.integers(0, 49), relation=RELATIONS)
def test_mean_with_a_non_finite_sample_fails(bad, n, pos, relation):
    x = [0.0] * n
    x[pos % n] = bad
    row = Claim.mean("c", "s", relation, 0.0, x)
    assert not row.passed and row.note.startswith("FAIL-CLOSED") and "not finite" in row.note
    assert family_decisions([row]) == [False]


@pytest.mark.parametrize("values", [[], [1.0]])
def test_mean_with_fewer_than_two_samples_fails(values):
    row = Claim.mean("c", "s", "==", 1.0, values)
    assert not row.passed and "needs >= 2" in row.note


@settings(max_examples=60, deadline=None)
@given(bad=bad_numbers, relation=st.sampled_from(["<=", ">=", "=="]))
def test_exact_row_with_a_non_finite_value_fails_whatever_the_experiment_decided(bad, relation):
    row = Claim.exact("c", "s", f"{relation} 1", bad, passed=True)
    assert not row.passed and row.note.startswith("FAIL-CLOSED: value=")
    # a row dict that reached the report with passed=True still fails
    assert family_decisions([{**row.to_dict(), "passed": True}]) == [False]
    assert not ExperimentResult(claims=[row]).passed


@settings(max_examples=100, deadline=None)
@given(xs=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=8), pos=st.integers(0, 8))
def test_strict_max_and_min_see_a_nan_anywhere(xs, pos):
    assert strict_max(xs) == max(xs) and strict_min(xs) == min(xs)
    ys = list(xs)
    ys.insert(pos % (len(xs) + 1), math.nan)
    assert math.isnan(strict_max(ys)) and math.isnan(strict_min(ys))


def test_vacuous_cases_fail():
    # NaN count: the old min(1.0, nan) gave p = 1 and PASS for every relation
    for rel in (">=", "<=", "=="):
        assert not Claim.proportion("c", "s", rel, 0.5, math.nan, 100).passed
    # infinite mean
    assert not Claim.mean("c", "s", "<=", 0.0, [math.inf, 1.0, 2.0]).passed
    assert not Claim.mean("c", "s", ">=", 0.0, [1.0, -math.inf]).passed
    # NaN inside a max that the builtin drops (not in first position)
    vals = [0.1, math.nan, 0.2]
    assert max(vals) == 0.2  # why strict_max exists
    worst = strict_max(vals)
    assert not Claim.exact("c", "s", "<= 1", worst, worst <= 1).passed
    # empty zoo
    assert not Claim.exact("c", "s", "<= 1", strict_max([]), True).passed
    # all-findings experiment: no PASS, and no 'PASS: 0/0' in the report
    finding = Claim("f", "s", "crit", 0.5, 0.4, 0.6, True, finding=True)
    assert not ExperimentResult(claims=[finding]).passed
    assert not ExperimentResult(claims=[]).passed
    entry = ExperimentEntry("only_findings", claims=[finding.to_dict()])
    apply_report_family([entry])
    assert not entry.passed and entry.verdict == "FAIL"
    md = render_markdown({}, [entry], 1.0)
    assert "**FAIL**: 0/0 claims pass" in md and "experiment has no gating claim" in md
    # ... unless declared measurement-only: then it shows no verdict (neither PASS nor FAIL)
    meas = ExperimentEntry("m", claims=[finding.to_dict()], measurement_only=True)
    ok = ExperimentEntry("ok", claims=[Claim.exact("e", "s", "== 1", 1.0, True).to_dict()])
    apply_report_family([meas, ok])
    assert meas.verdict == "MEASURED" and not meas.passed
    md = render_markdown({}, [meas, ok], 1.0)
    assert "**PASS**: 1/1 claims pass" in md and "| [m](#m) | 0/0 | MEASURED |" in md
    assert render_markdown({}, [meas], 1.0).startswith("# dedebate reproduce report\n\n**FAIL**")
    # a measurement-only experiment with a failing gating claim fails (it is not "measured")
    bad = Claim.exact("e", "s", "== 1", 0.0, False).to_dict()
    failing = ExperimentEntry("m2", claims=[finding.to_dict(), bad], measurement_only=True)
    apply_report_family([failing, ok])
    assert failing.verdict == "FAIL" and not job_passed([failing, ok])


def test_family_decisions_keep_a_nan_p_value_out_of_the_pass():
    row = {"claim": "c", "value": 0.5, "lo": 0.4, "hi": 0.6, "passed": True, "p_value": math.nan}
    assert family_decisions([row]) == [False]
    assert with_family_decisions([row])[0]["passed"] is False


def test_report_prints_integers_as_integers_and_tolerance_passes_as_such():
    assert (
        measured(Claim.exact("q", "s", "<= 105967", 105967.0, True).to_dict()) == "105967 (exact)"
    )
    row = Claim.exact("c", "s", "== 1", 1.000000000000111, True).to_dict()
    assert measured(row) == "1.000000000000111 (exact; meets == 1 only within tolerance)"
    assert measured(Claim.exact("c", "s", "== 0.25", 0.25, True).to_dict()) == "0.25 (exact)"
    # a failing row is not described as meeting its bound
    assert measured(Claim.exact("c", "s", "<= 0", 0.5, False).to_dict()) == "0.5 (exact)"


def _real_size(n, target, relation, level):
    """The chance, at the true proportion ``target`` (the claim holds at its boundary), that a
    proportion row's p-value is below ``level``: the binomial pmf summed over the rejections."""
    from scipy.stats import binom

    return sum(
        binom.pmf(k, n, target)
        for k in range(n + 1)
        if Claim.proportion("c", "s", relation, target, k, n).p_value < level
    )


@pytest.mark.parametrize(
    "n,target,relation",
    [(50, 0.02, "<="), (50, 0.02, "=="), (1000, 0.1, "<="), (400, 0.64, ">="), (2000, 0.4, "==")],
)
@pytest.mark.parametrize("m", [1, 4, 49])
def test_proportion_rows_hold_their_level_exactly(n, target, relation, m):
    """A true claim fails a family of m rows (p < 0.05/m) with probability at most the nominal
    level: 0.05/m for ``==``, half of it for a one-sided claim (the p-value doubles one tail).
    The score test this replaced went over at every one of these rows (e.g. 6.3x at n = 50,
    target 0.02, m = 49: 0.0032 against 0.00051)."""
    level = FAMILY_ALPHA / m
    nominal = level if relation == "==" else level / 2
    assert _real_size(n, target, relation, level) <= nominal


def test_mean_rows_use_student_t_at_four_seeds():
    from scipy import stats

    x = np.array([0.61, 0.7, 0.52, 0.66])
    row = Claim.mean("c", "s", ">=", 0.5, x)
    se = x.std(ddof=1) / 2
    lo, hi = stats.t.interval(0.95, 3, loc=x.mean(), scale=se)
    assert (row.lo, row.hi) == pytest.approx((lo, hi), rel=1e-12)
    assert (row.n, row.sd) == (4, pytest.approx(x.std(ddof=1), rel=1e-12))
    for relation, alt in ((">=", "less"), ("<=", "greater"), ("==", "two-sided")):
        want = stats.ttest_1samp(x, 0.65, alternative=alt).pvalue
        want = want if alt == "two-sided" else min(1.0, 2 * want)
        assert Claim.mean("c", "s", relation, 0.65, x).p_value == pytest.approx(want, rel=1e-10)
    # (1.96 in place of t(3) = 3.182 made this interval 38% narrower)


def test_mean_interval_is_clipped_to_the_quantity_range():
    x = [0.0, 0.0, 0.02, 0.3]  # a rate over four seeds: the t interval reaches below 0
    m, lo, hi = mean_interval(x)
    assert lo < 0 < hi < 1
    row = Claim.mean("c", "s", "<=", 0.5, x, support=(0.0, 1.0))
    assert (row.value, row.lo, row.hi) == (m, 0.0, hi)
    assert mean_interval(x, support=(0.0, 1.0)) == (m, 0.0, hi)
    assert mean_interval([0.9, 1.0, 1.0], support=(0.0, 1.0))[2] == 1.0


@pytest.mark.parametrize("successes", [2.5, 99.75])
def test_proportion_with_a_fractional_count_fails(successes):
    row = Claim.proportion("c", "s", "<=", 0.5, successes, 100)
    assert not row.passed and row.note.startswith(f"FAIL-CLOSED: successes={successes!r}")


@pytest.mark.parametrize("pos", [0, 2])
def test_a_non_finite_sample_makes_the_mean_interval_nan(pos):
    """Clipped to a support, the ends of a NaN mean read as the support's (0 and 1) before."""
    x = [0.2, 0.3, 0.4]
    x[pos] = math.nan
    assert all(math.isnan(v) for v in mean_interval(x, support=(0.0, 1.0)))
    assert all(math.isnan(v) for v in mean_interval([math.inf, 0.1]))


def test_a_row_whose_interval_does_not_hold_its_value_fails_closed():
    """A row built by hand with its ends swapped passed (the claims audit)."""
    row = Claim("c", "s", ">= 0.9", 0.5, 0.9, 0.1, True)
    assert not row.passed and row.note.startswith("FAIL-CLOSED: the interval [0.9, 0.1]")
    assert Claim("c", "s", "== 1/2", 0.5, 0.5, 0.5, True).passed


def test_a_sample_outside_the_support_fails_closed():
    """Clipped, a mean of 2 over a support (0, 1) read [2, 1]: an empty interval that passed."""
    assert all(math.isnan(v) for v in mean_interval([2.0, 2.0], support=(0.0, 1.0)))
    row = Claim.mean("c", "s", ">=", 0.99, [2.0, 2.0], support=(0.0, 1.0))
    assert not row.passed and "outside the support (0.0, 1.0) (first: 2.0)" in row.note
    assert Claim.mean("c", "s", ">=", 0.5, [0.0, 1.0, 1.0], support=(0.0, 1.0)).lo <= 2 / 3


def test_exact_interval_refuses_impossible_counts_and_gives_nan_for_non_finite_ones():
    for k, n in ((5, 3), (-1, 3), (0, 0), (1.5, 3)):
        with pytest.raises(ValueError, match="successes="):
            exact_interval(k, n)
    for k, n in ((11, 10), (-1, 10)):  # a math domain error before
        with pytest.raises(ValueError, match=f"successes={k}, trials={n}"):
            wilson_interval(k, n)
    assert all(math.isnan(v) for v in exact_interval(math.nan, 3))
    assert exact_interval(3, 3)[2] == 1.0 and exact_interval(0, 3)[1] == 0.0


def test_a_value_outside_its_own_ordered_interval_fails_closed():
    row = Claim("c", "s", "<= 1", 2.0, 0.0, 1.0, True)
    assert not row.passed
    assert row.note.startswith("FAIL-CLOSED: the interval [0.0, 1.0] does not hold value=2.0")


def test_proportion_rows_refuse_zero_members_and_fail_closed_on_a_target_above_one():
    with pytest.raises(ValueError, match="members=0"):
        Claim.proportion("c", "s", ">=", 0.5, 5, 10, members=0)
    row = Claim.proportion("c", "s", ">=", 1.5, 5, 10)
    assert not row.passed and "target=1.5" in row.note


def test_a_row_whose_checks_fail_fails_even_far_past_its_bound():
    assert Claim.mean("c", "s", ">=", 0.0, [1.0, 2.0, 3.0]).passed
    assert not Claim.mean("c", "s", ">=", 0.0, [1.0, 2.0, 3.0], checks=False).passed
    assert Claim.proportion("c", "s", ">=", 0.5, 95, 100).passed
    assert not Claim.proportion("c", "s", ">=", 0.5, 95, 100, checks=False).passed


def test_wilson_interval_of_zero_trials_is_all_of_zero_to_one():
    p, lo, hi = wilson_interval(0, 0)
    assert math.isnan(p) and (lo, hi) == (0.0, 1.0)
