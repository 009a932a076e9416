"""The report's multiple-comparison policy (dedebate/lab/claims.py): Monte-Carlo rows carry a
p-value consistent with their 95% interval, and a report decides them family-wise (Bonferroni)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from dedebate.lab.claims import awaits_family, family_size
from dedebate.lab.experiment import (
    FAMILY_ALPHA,
    Claim,
    ExperimentResult,
    claim_p_value,
    family_decisions,
    mean_interval,
    with_family_decisions,
)
from dedebate.lab.report import (
    ExperimentEntry,
    apply_report_family,
    progress_line,
    render_markdown,
)


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(5, 5000),
    frac=st.floats(0, 1),
    target=st.floats(0.01, 0.99),
    relation=st.sampled_from([">=", "<=", "=="]),
)
def test_proportion_row_passes_at_95_iff_exact_interval_reaches_target(n, frac, target, relation):
    k = round(frac * n)
    row = Claim.proportion("c", "s", relation, target, k, n)
    ci = binomtest(k, n).proportion_ci(method="exact")
    assert row.value == k / n and (row.k, row.n) == (k, n)
    assert (row.lo, row.hi) == pytest.approx((ci.low, ci.high), abs=1e-11)
    reaches = {">=": ci.high >= target, "<=": ci.low <= target, "==": ci.low <= target <= ci.high}[
        relation
    ]
    # the Clopper-Pearson interval inverts the exact test, so the two decisions agree except
    # within rounding of the boundary
    if abs(row.p_value - FAMILY_ALPHA) > 1e-9:
        assert row.passed == reaches, (k, n, target, relation, row.p_value, ci)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(2, 400),
    target=st.floats(-1, 1),
    relation=st.sampled_from([">=", "<=", "=="]),
)
def test_mean_row_passes_at_95_iff_student_t_interval_reaches_target(seed, n, target, relation):
    x = np.random.default_rng(seed).normal(0.1, 1.0, n)
    row = Claim.mean("c", "s", relation, target, x)
    m, lo, hi = mean_interval(x)
    assert (row.value, row.lo, row.hi) == pytest.approx((m, lo, hi), rel=1e-12)
    assert (row.n, row.sd) == (n, pytest.approx(x.std(ddof=1), rel=1e-12))
    reaches = {">=": hi >= target, "<=": lo <= target, "==": lo <= target <= hi}[relation]
    if abs(row.p_value - FAMILY_ALPHA) > 1e-9:
        assert row.passed == reaches


def test_claim_p_value_values():
    # z = -1.959964 on a >= claim is the 95% boundary
    assert claim_p_value(0.5 - 1.959963984540054, 1.0, 0.5, ">=") == pytest.approx(0.05)
    assert claim_p_value(2.0, 1.0, 0.0, "<=") == pytest.approx(2 * 0.5 * math.erfc(2 / 2**0.5))
    assert claim_p_value(1.0, 1.0, 0.0, ">=") == 1.0  # evidence for the claim
    assert claim_p_value(0.3, 0.0, 0.3, "==") == 1.0 and claim_p_value(0.2, 0.0, 0.3, "==") == 0
    with pytest.raises(ValueError, match="relation='<'"):
        claim_p_value(0, 1, 0, "<")
    row = Claim.proportion("c", "s", ">=", 0.5, 0, 0)  # fails closed, says why
    assert not row.passed and "trials=0" in row.note


def test_members_adjust_the_p_value_within_a_row():
    one = Claim.proportion("c", "s", "<=", 0.4, 435, 1000)
    five = Claim.proportion("c", "s", "<=", 0.4, 435, 1000, members=5)
    assert five.p_value == pytest.approx(min(1.0, 5 * one.p_value))
    assert one.p_value < FAMILY_ALPHA and not one.passed and five.passed
    # the interval shown is the one the adjusted test inverts: it reaches the bound exactly when
    # the row passes (the worst member's own 95% interval, [0.404, 0.466], would not)
    from dedebate.lab.claim_stats import exact_interval

    assert (five.lo, five.hi) == exact_interval(435, 1000, 1 - FAMILY_ALPHA / 5)[1:]
    assert one.lo > 0.4 >= five.lo
    for k in range(380, 460, 5):
        row = Claim.proportion("c", "s", "<=", 0.4, k, 1000, members=5)
        assert row.passed == (row.lo <= 0.4)


def test_family_decisions_bonferroni_and_checks():
    exact_ok = Claim.exact("e", "s", "== 1", 1.0, True)
    exact_bad = Claim.exact("e", "s", "== 1", 0.0, False)
    mc = Claim("m", "s", "== 0", 0.1, 0.01, 0.19, False, p_value=0.01)
    bad_checks = Claim("m", "s", "== 0", 0.0, -0.1, 0.1, False, p_value=0.9, checks=False)
    # alone: 0.01 < 0.05 fails; with 10 Monte-Carlo rows the level is 0.005 and it passes
    assert family_decisions([mc]) == [False]
    assert family_decisions([mc] + [Claim("m", "s", "", 0, 0, 0, True, p_value=0.5)] * 9)[0]
    assert family_decisions([exact_ok, exact_bad, mc, bad_checks]) == [True, False, False, False]
    assert family_decisions([exact_ok, mc, mc, mc, mc, bad_checks]) == [True] + [True] * 4 + [False]
    rows = with_family_decisions([exact_ok, mc])
    assert rows[1]["passed"] is False and rows[1]["passed_95"] is False  # m = 1
    assert rows[1]["family_size"] == 1 and rows[1]["family_level"] == FAMILY_ALPHA
    two = with_family_decisions([Claim.proportion(x, "s", ">=", 0.5, 50, 100) for x in "ab"])
    assert [(r["family_size"], r["family_level"]) for r in two] == [(2, FAMILY_ALPHA / 2)] * 2
    assert "family_size" not in rows[0]
    # re-deciding decided rows uses the rows' own 95% decisions, not the earlier family ones
    again = with_family_decisions(with_family_decisions([mc] * 10) + [exact_bad])
    assert [r["passed"] for r in again] == [True] * 10 + [False]
    decided_exact = {"value": 1.0, "lo": 1.0, "hi": 1.0, "passed": False, "passed_95": True}
    assert family_decisions([decided_exact]) == [True]  # its own decision, not the family's
    assert not ExperimentResult(claims=[mc]).passed
    assert ExperimentResult(claims=[mc] * 10).passed


def test_rows_failed_closed_leave_the_family():
    """A row failed closed (no interval) fails whatever m is; counted in m, twenty of them let a
    row at p = 0.01 pass (0.01 >= 0.05 / 21)."""
    mc = Claim("m", "s", "== 0", 0.1, 0.01, 0.19, False, p_value=0.01)
    broken = Claim.proportion("b", "s", ">=", 0.5, 0, 0)  # no trials: failed closed, p_value 0
    assert broken.p_value == 0.0 and math.isnan(broken.lo)
    assert family_decisions([mc, *[broken] * 20]) == [False] * 21
    rows = with_family_decisions([broken, broken])
    assert [r["family_size"] for r in rows] == [0, 0] and not any(r["passed"] for r in rows)
    md = render_markdown({}, [ExperimentEntry("a", claims=rows)], 1.0)
    assert "the 0 Monte-Carlo rows (2 more failed closed, outside the family)" in md
    # a NaN p-value, in a row that says it passed, fails and leaves the family too: counted,
    # it would let a row at p = 0.04 pass (0.04 >= 0.05 / 2)
    nan_p = {"value": 0.5, "lo": 0.4, "hi": 0.6, "p_value": math.nan, "passed": True}
    near = {**nan_p, "p_value": 0.04}
    assert family_size([nan_p, near]) == 1
    assert family_decisions([nan_p, near]) == [False, False]


def test_family_wise_false_failure_rate_is_at_most_alpha():
    """Reports of m true claims (each estimate at its bound's boundary): the chance that the
    report fails is <= 5% family-wise (Bonferroni), while deciding rows at 95% alone fails
    most such reports."""
    rng = np.random.default_rng(2026)
    m, n, reports, target = 30, 2000, 1500, 0.4
    k = rng.binomial(n, target, size=(reports, m))
    any_fail_fw = any_fail_95 = 0
    rows = {x: Claim.proportion("c", "s", "==", target, x, n) for x in np.unique(k).tolist()}
    for row in k:
        claims = [rows[x] for x in row.tolist()]
        any_fail_fw += not all(family_decisions(claims))
        any_fail_95 += not all(c.passed for c in claims)
    rate_fw, rate_95 = any_fail_fw / reports, any_fail_95 / reports
    se = math.sqrt(FAMILY_ALPHA * (1 - FAMILY_ALPHA) / reports)
    assert rate_fw <= FAMILY_ALPHA + 3 * se, rate_fw
    assert rate_95 >= 1 - 0.95**m - 3 * math.sqrt(0.785 * 0.215 / reports), rate_95


def test_report_decides_rows_over_the_whole_report():
    miss = {**Claim("sampled miss", "s", "== 0", 0.1, 0.01, 0.19, False, p_value=0.01).to_dict()}
    ok = {**Claim("sampled ok", "s", "== 0", 0.0, -0.1, 0.1, True, p_value=0.9).to_dict()}
    entries = [ExperimentEntry("a", claims=[miss]), ExperimentEntry("b", claims=[ok] * 4)]
    apply_report_family(entries)  # m = 5: level 0.01, p = 0.01 passes
    assert entries[0].claims[0]["passed"] and entries[0].claims[0]["passed_95"] is False
    md = render_markdown({}, entries, 1.0)
    assert "**PASS**: 5/5 claims pass." in md
    assert "5 Monte-Carlo rows are decided family-wise" in md and "0.05/5 = 0.01" in md
    assert "PASS (p=0.01; 95%: miss)" in md and "PASS (p=0.9) |" in md
    assert md.count("95%: miss)") == 1 and "; 1 row(s) miss their bound at 95% alone" in md
    entries = [ExperimentEntry("a", claims=[miss]), ExperimentEntry("b", claims=[ok])]
    apply_report_family(entries)  # m = 2: level 0.025, p = 0.01 fails
    assert not entries[0].claims[0]["passed"] and not entries[0].passed


def test_progress_line_waits_for_the_family_before_failing_a_sampled_row():
    """A reproduce progress line decides rows over the experiments finished so far. A sampled
    row below that family's level (p = 0.01 < 0.05/2) makes its experiment UNDECIDED while
    others run (the whole family, m = 5 here, passes it); the last line, an exact miss, a
    non-finite row or a zero p-value fail as before."""
    miss = Claim("sampled miss", "s", "== 0", 0.1, 0.01, 0.19, False, p_value=0.01).to_dict()
    ok = Claim("sampled ok", "s", "== 0", 0.0, -0.1, 0.1, True, p_value=0.9).to_dict()
    exact_bad = Claim.exact("exact miss", "s", "== 1", 0.0, False).to_dict()

    def line(claims, finished, total):
        entries = [
            ExperimentEntry("a", claims=claims, wall_time_s=1.0),
            ExperimentEntry("b", claims=[ok]),
        ]
        apply_report_family(entries)  # the family so far: a's rows and b's one
        return progress_line(entries[0], finished, total)

    assert line([miss], 2, 3) == (
        "reproduce: [2/3] a: UNDECIDED 0/1 in 1.0 s (pending: 1 Monte-Carlo row(s) below "
        "0.05/2, the level of the 2 rows finished so far: 'sampled miss' p=0.01; the report "
        "decides them over every experiment's rows when all 3 have finished)"
    )
    assert ": FAIL 0/1 in 1.0 s" in line([miss], 3, 3)  # every experiment finished: final
    assert ": FAIL 0/2" in line([miss, exact_bad], 2, 3)  # an exact miss fails at once
    zero = {**miss, "p_value": 0.0}
    nan = {**miss, "value": math.nan}
    assert ": FAIL" in line([zero], 2, 3) and ": FAIL" in line([nan], 2, 3)
    assert ": PASS 1/1" in line([ok], 2, 3)
    entries = [ExperimentEntry("a", claims=[miss]), ExperimentEntry("b", claims=[ok] * 4)]
    apply_report_family(entries)
    assert entries[0].passed  # the whole family passes the row the early line left open
    assert awaits_family(miss) and not awaits_family({**ok, "p_value": 0.01})  # ok passed


def test_findings_are_reported_but_do_not_gate():
    claim = Claim.exact("proven", "thm", ">= 0.5", 0.7, True)
    finding = Claim(
        "self-play finds honesty", "issue", "8/8 seeds", 0.375, 0.1, 0.7, False, finding=True
    )
    mc_finding = Claim(
        "mc finding", "issue", "== 0", 0.1, 0.05, 0.15, False, p_value=1e-9, finding=True
    )
    mc = Claim("mc claim", "s", "== 0", 0.0, -0.1, 0.1, True, p_value=0.03)
    assert ExperimentResult(claims=[claim, finding, mc_finding]).passed
    assert not ExperimentResult(claims=[claim, Claim.exact("x", "y", "z", 0, False)]).passed
    exact_finding = Claim.exact("x", "y", "z", 0, False, finding=True)
    assert exact_finding.finding and exact_finding.lo == exact_finding.hi == 0.0
    assert ExperimentResult(claims=[claim, exact_finding]).passed
    nan_finding = Claim.exact("x", "y", "z", math.nan, True, "n", finding=True)  # fails closed
    assert nan_finding.finding and not nan_finding.passed and nan_finding.note.startswith("FAIL")
    # a finding is outside the Monte-Carlo family: mc alone is a family of one (level 0.05)
    rows = with_family_decisions([mc, mc_finding])
    assert rows[0]["family_size"] == 1 and not rows[0]["passed"]
    assert "family_size" not in rows[1] and rows[1]["passed"] is False
    entry = ExperimentEntry("a", claims=[claim.to_dict(), finding.to_dict()])
    apply_report_family([entry])
    assert entry.passed and entry.counts() == (1, 1) and len(entry.findings()) == 1
    md = render_markdown({}, [entry], 1.0)
    assert "**PASS**: 1/1 claims pass. 1 measured finding(s)" in md
    assert "0 meet their stated criterion, 1 do not" in md
    assert "| self-play finds honesty | issue | 8/8 seeds |" in md and "criterion NOT met" in md
    assert md.index("Measured findings") > md.index("| proven | thm |")


def test_a_p_value_at_the_level_passes_alone_and_in_its_family(monkeypatch):
    """At p = 0.05 exactly a row passes on its own (p >= 0.05) and as the family of itself (m =
    1, level 0.05/1): the two rules agree at their shared edge, for proportions and means."""
    from dedebate.lab import claims

    monkeypatch.setattr(claims, "binomial_p_value", lambda *a, **k: FAMILY_ALPHA)
    monkeypatch.setattr(claims, "claim_p_value", lambda *a, **k: FAMILY_ALPHA)
    rows = [
        Claim.proportion("rate", "s", "<=", 0.5, 40, 100),
        Claim.mean("mean", "s", "<=", 1.0, [0.5, 0.7, 0.9]),
    ]
    assert [(c.p_value, c.passed) for c in rows] == [(FAMILY_ALPHA, True)] * 2
    assert [family_decisions([c]) for c in rows] == [[True]] * 2
