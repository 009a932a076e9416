"""`dedebate compare A B`: claim-by-claim table; exit 1 exactly when a verdict changed."""

from __future__ import annotations

import json

import pytest

from dedebate import cli
from dedebate.lab.compare import overlap
from dedebate.lab.report_render import fmt


def _reproduce(tmp_path, capsys, seed):
    out = tmp_path / f"seed{seed}"
    cli.main(
        [
            "reproduce",
            "--quick",
            "--tracking",
            "disabled",
            "--no-progress",
            "--seed",
            str(seed),
            "--output-dir",
            str(out),
            "--only",
            "fake_pass",
            "fake_fail",
        ]
    )
    capsys.readouterr()
    (rep,) = out.glob("reproduce-*")
    return rep


def test_compare_two_reports_then_a_flipped_verdict(tmp_path, fake_env, capsys):
    a, b = _reproduce(tmp_path, capsys, 1), _reproduce(tmp_path, capsys, 2)
    assert cli.main(["compare", str(a), str(b)]) == 0
    table = capsys.readouterr().out
    assert "| fake_pass | heads rate near p |" in table
    assert (
        "| fake_fail | value at least one half | 0.25 (exact) | 0.25 (exact) | FAIL -> FAIL"
        " | equal |" in table
    )
    assert "0 verdict(s) changed." in table

    report = json.loads((b / "report.json").read_text())
    row = next(
        c
        for e in report["experiments"]
        if e["name"] == "fake_fail"
        for c in e["claims"]
        if c["claim"] == "value at least one half"
    )
    row.update(passed=True, value=0.75, lo=0.75, hi=0.75)
    (b / "report.json").write_text(json.dumps(report))
    assert cli.main(["compare", str(a), str(b / "report.json")]) == 1
    table = capsys.readouterr().out
    assert "FAIL -> PASS **CHANGED** | differ |" in table
    assert "1 verdict(s) changed: fake_fail: value at least one half" in table

    # a run directory against a reproduce directory: rows of other experiments are one-sided
    assert cli.main(["compare", str(a / "fake_pass"), str(a)]) == 0
    assert "only in B (FAIL)" in capsys.readouterr().out


def test_compare_bad_paths_exit_2(tmp_path, capsys):
    assert cli.main(["compare", str(tmp_path), str(tmp_path / "nope")]) == 2
    assert "no report.json or results.json" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("[1, 2]")
    assert cli.main(["compare", str(tmp_path / "x.json"), str(tmp_path / "x.json")]) == 2
    assert "neither a report.json nor a results.json" in capsys.readouterr().err


def test_overlap_rules():
    assert overlap({"lo": 0.1, "hi": 0.3}, {"lo": 0.3, "hi": 0.5})
    assert not overlap({"lo": 0.1, "hi": 0.29}, {"lo": 0.3, "hi": 0.5})
    assert not overlap({"lo": float("nan"), "hi": 0.5}, {"lo": 0.0, "hi": 1.0})
    assert overlap({"lo": 2, "hi": 2}, {"lo": 2, "hi": 2})


def test_report_md_shows_the_wall_time_report_json_keeps(tmp_path, capsys):
    """A wall time just above a rounding boundary (0.2504 s: 0.3 to one decimal, but 0.25 once
    kept to the millisecond) renders the same from report.json as in report.md."""
    from dedebate.lab.report import _write_report

    _write_report(tmp_path, {"size": "quick", "seed": 0}, [], 0.2504, final=True)
    assert json.loads((tmp_path / "report.json").read_text())["wall_time_s"] == 0.25
    assert cli.main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (tmp_path / "report.md").read_text()


def test_report_renders_again_from_report_json_and_as_html(tmp_path, fake_env, capsys):
    rep = _reproduce(tmp_path, capsys, 1)
    assert cli.main(["report", str(rep)]) == 0
    assert capsys.readouterr().out == (rep / "report.md").read_text()  # same renderer, same file
    page = tmp_path / "report.html"
    assert cli.main(["report", str(rep), "--html", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<table>" in text
    assert "data:image/png;base64," in text  # fake_pass's plot, inline
    assert "<td>value at least one half</td>" in text
    # verdicts coloured (fake_pass passes, fake_fail fails), other cells not
    assert '<td class="pass">PASS</td>' in text and '<td class="fail">FAIL</td>' in text
    assert ".pass{background:" in text and ".fail{background:" in text
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "no report.json there" in capsys.readouterr().err


def test_compare_reports_an_exact_p_value_for_a_change(tmp_path, capsys):
    """Proportion rows store k and n: compare's p-value is Fisher's exact test on the 2x2 table;
    mean rows store n and sd: Welch's t-test."""
    from scipy import stats

    from dedebate.lab.compare import change_p_value
    from dedebate.lab.experiment import Claim

    def run(name, k, xs):
        rows = [
            Claim.proportion("rate", "s", "<=", 0.4, k, 200),
            Claim.mean("mean", "s", "<=", 1.0, xs),
        ]
        path = tmp_path / name / "results.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"experiment": "e", "claims": [c.to_dict() for c in rows]}))
        return path, [c.to_dict() for c in rows]

    a, (pa, ma) = run("a", 62, [0.1, -0.2, 0.05, 0.3])
    b, (pb, mb) = run("b", 81, [0.4, 0.2, 0.6, 0.35, 0.5])
    fisher = stats.fisher_exact([[62, 138], [81, 119]]).pvalue
    assert change_p_value(pa, pb) == pytest.approx(fisher, rel=1e-12) and 0.03 < fisher < 0.07
    welch = stats.ttest_ind(
        [0.1, -0.2, 0.05, 0.3], [0.4, 0.2, 0.6, 0.35, 0.5], equal_var=False
    ).pvalue
    assert change_p_value(ma, mb) == pytest.approx(welch, rel=1e-9)
    assert change_p_value({"value": 1.0, "lo": 1.0, "hi": 1.0}, pb) is None  # an exact row
    assert cli.main(["compare", str(a), str(b)]) == 0
    table = capsys.readouterr().out
    assert f"| PASS -> PASS | p={fmt(fisher)} |" in table and f"p={fmt(welch)} |" in table


def test_change_evidence_without_counts():
    from dedebate.lab.compare import change_evidence

    exact = {"value": 2.0, "lo": 2.0, "hi": 2.0}
    assert change_evidence(exact, dict(exact)) == "equal"
    assert change_evidence(exact, {**exact, "value": 3.0, "lo": 3.0, "hi": 3.0}) == "differ"
    # a row written before rows stored their counts, or a finding with an interval
    old = {"value": 0.5, "lo": 0.4, "hi": 0.6, "p_value": 0.3}
    assert change_evidence(old, {**old, "lo": 0.45}) == "intervals overlap"
    assert change_evidence(old, {**old, "value": 0.8, "lo": 0.7, "hi": 0.9}) == "intervals disjoint"
    assert (
        change_evidence({**old, "p_value": None}, {**old, "p_value": None}) == "intervals overlap"
    )


def test_compare_json_gives_each_claims_verdicts_values_and_p_value(tmp_path, capsys):
    """``compare --json``: per claim both sides' verdict, value and interval, Fisher's p-value
    and the changed flag, with compare's exit codes (1: a gating verdict changed; 0: none; 2:
    bad input); a non-finite value is null, a one-sided row has null on the other side."""
    from scipy import stats

    from dedebate.lab.experiment import Claim

    def result(name, k, extra=()):
        rows = [
            Claim.proportion("rate", "s", "<=", 0.4, k, 200),
            Claim.exact("nan row", "s", "== 1", float("nan"), False),
            *extra,
        ]
        path = tmp_path / name / "results.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"experiment": "e", "claims": [c.to_dict() for c in rows]}))
        return path, rows[0]

    a, ra = result("a", 62)
    b, rb = result("b", 110, [Claim.exact("new row", "s", "== 0", 0.0, True)])
    assert ra.passed and not rb.passed
    assert cli.main(["compare", "--json", str(a), str(b)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["a"], out["b"]) == (str(a.parent), str(b.parent))
    assert (out["both"], out["only_a"], out["only_b"]) == (2, 0, 1)
    assert out["changed"] == ["e: rate"]
    rate, nan_row, new = out["rows"]
    assert (rate["experiment"], rate["claim"], rate["occurrence"]) == ("e", "rate", 0)
    for side, row in (("a", ra), ("b", rb)):
        assert rate[side]["verdict"] == ("PASS" if row.passed else "FAIL")
        assert (rate[side]["value"], rate[side]["lo"], rate[side]["hi"]) == (
            row.value,
            row.lo,
            row.hi,
        )
        assert rate[side]["gating"] and rate[side]["passed"] == row.passed
    assert rate["b"]["value"] == 110 / 200
    assert rate["p_value"] == pytest.approx(
        stats.fisher_exact([[62, 138], [110, 90]]).pvalue, rel=1e-12
    )
    assert rate["changed"] and rate["evidence"] == f"p={fmt(rate['p_value'])}"
    assert nan_row["a"]["value"] is None and nan_row["a"]["verdict"] == "FAIL"
    assert not nan_row["changed"] and nan_row["p_value"] is None
    assert new["a"] is None and new["b"]["verdict"] == "PASS" and not new["changed"]
    assert new["p_value"] is None and new["evidence"] is None

    # no verdict changed: exit 0, the same rows; the markdown table is unchanged by --json
    assert cli.main(["compare", "--json", str(a), str(a)]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["changed"] == [] and same["rows"][0]["p_value"] == 1.0
    assert cli.main(["compare", str(a), str(b)]) == 1
    assert "| e | rate |" in capsys.readouterr().out
    assert cli.main(["compare", "--json", str(a), str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().out == ""
