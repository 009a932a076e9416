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


def test_report_renders_a_non_finite_row_as_a_failure_whatever_the_file_says(
    tmp_path, fake_env, capsys
):
    rep = _reproduce(tmp_path, capsys, 1)
    report = json.loads((rep / "report.json").read_text())
    (fp,) = [e for e in report["experiments"] if e["name"] == "fake_pass"]
    fp["claims"][0].update(value=float("nan"), passed=True)  # someone else's record
    (rep / "report.json").write_text(json.dumps(report))
    assert cli.main(["report", str(rep)]) == 0
    md = capsys.readouterr().out
    assert "| nan [" in md and "**FAIL**: 2/4 claims pass." in md, md


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
    impossible, three = {"k": 12, "n": 10}, {"k": 3, "n": 10}  # more successes than trials
    assert change_p_value(three, impossible) is None and change_p_value(impossible, three) is None
    # counts at the edges (none, all) are counts too: 0/2000 against 12/2000, n/n against itself
    zero, twelve = (Claim.proportion("rate", "s", "<=", 0.4, k, 2000).to_dict() for k in (0, 12))
    edge = stats.fisher_exact([[0, 2000], [12, 1988]]).pvalue
    assert change_p_value(zero, twelve) == pytest.approx(edge, rel=1e-12) and edge < 1e-3
    full = Claim.proportion("rate", "s", ">=", 0.4, 2000, 2000).to_dict()
    assert change_p_value(full, dict(full)) == 1.0 == change_p_value(zero, dict(zero))
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


def _result(path, claims, **provenance):
    """A fabricated results.json at ``path``: experiment ``e``, these claim rows."""
    path.mkdir(parents=True)
    data = {"experiment": "e", "claims": [c.to_dict() for c in claims], "provenance": provenance}
    (path / "results.json").write_text(json.dumps(data))
    return path


def test_compare_pairs_repeated_claims_in_order_and_a_findings_flip_changes_nothing(
    tmp_path, capsys
):
    """Two rows of one claim text pair by their order (the second's change is named "(#2)"); a
    finding met in A and not in B changes no verdict; the counts name the one-sided rows."""
    from dedebate.lab.experiment import Claim

    def rows(second, seen, extra):
        return [
            Claim.exact("twice", "s", "== 1", 1.0, True),
            Claim.exact("twice", "s", "== 1", second, second == 1.0),
            Claim.exact("seen", "s", "== 1", seen, seen == 1.0, finding=True),
            Claim.exact(extra, "s", "== 1", 1.0, True),
        ]

    a = _result(tmp_path / "a", rows(1.0, 1.0, "only in A"))
    b = _result(tmp_path / "b", rows(0.0, 0.0, "only in B"))
    assert cli.main(["compare", "--json", str(a), str(b)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["changed"] == ["e: twice (#2)"]
    assert (out["both"], out["only_a"], out["only_b"]) == (3, 1, 1)
    first, second, seen = out["rows"][:3]
    assert [(r["claim"], r["occurrence"]) for r in (first, second)] == [("twice", 0), ("twice", 1)]
    assert not first["changed"] and second["b"]["verdict"] == "FAIL"
    assert (seen["a"]["verdict"], seen["b"]["verdict"]) == ("met", "not met")
    assert not seen["changed"]


def test_compare_never_tests_rows_whose_bounds_differ(tmp_path, capsys):
    """Rows of the same claim text but different bounds are different claims: the change column
    names both bounds, no p-value is computed, the summary counts them, and a config hash that
    differs opens the table with one warning line (escaped, like every shared text)."""
    from dedebate.lab.experiment import Claim

    def claims(limit):
        return [
            Claim.proportion("rate", "s", "<=", 0.4, 62, 200),
            Claim.proportion("near", "s", "<=", limit, 62, 200),
        ]

    a = _result(tmp_path / "a", claims(0.4), config_hash="a" * 64)
    b = _result(tmp_path / "b", claims(0.5), config_hash="b\x1b[2J" + "b" * 60)
    assert cli.main(["compare", str(a), str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-4].endswith("| PASS -> PASS | p=1 |")  # the rate row: the same bound, tested
    assert lines[-3] == (
        "| e | near | 0.31 [0.2467, 0.3791] | 0.31 [0.2467, 0.3791] | PASS -> PASS"
        " | bound differs: <= 0.4 vs <= 0.5 |"
    )
    assert lines[-1] == (
        "2 claim(s) in both (1 with a different bound, not compared), 0 only in A, 0 only in B; "
        "0 verdict(s) changed."
    )
    (warning,) = [line for line in lines if line.startswith("warning:")]
    assert lines[2] == warning and "\x1b" not in warning
    assert "e (config_hash aaaaaaaaaaaa vs b\\x1b[2Jbbbbbbb" in warning

    assert cli.main(["compare", "--json", str(a), str(b)]) == 0
    out = json.loads(capsys.readouterr().out)
    rate, near = out["rows"]
    assert (near["a"]["bound"], near["b"]["bound"]) == ("<= 0.4", "<= 0.5")
    assert near["bound_differs"] and near["p_value"] is None
    assert near["evidence"] == "bound differs: <= 0.4 vs <= 0.5"
    assert not rate["bound_differs"] and rate["p_value"] == 1.0
    assert out["bound_differs"] == 1
    assert out["config_differs"] == [
        {
            "experiment": "e",
            "field": "config_hash",
            "a": "a" * 64,
            "b": "b\x1b[2J" + "b" * 60,
            "what": "",  # no config.yaml beside either
        }
    ]

    # the same config on both sides: no warning
    assert cli.main(["compare", str(a), str(a)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_compare_warns_when_two_reports_ran_other_configs(tmp_path, capsys):
    """A report's config: each experiment's run folder's config hash (a plain folder of the
    report, never one outside it), else the report's size and seed."""
    from dedebate.lab.experiment import Claim

    def report(name, seed, run_dir, config_hash):
        rep = tmp_path / name
        _result(rep / "e", [Claim.exact("one", "s", "== 1", 1.0, True)], config_hash=config_hash)
        data = {
            "provenance": {"size": "quick", "seed": seed},
            "experiments": [
                {
                    "name": "e",
                    "run_dir": run_dir,
                    "claims": [Claim.exact("one", "s", "== 1", 1.0, True).to_dict()],
                }
            ],
        }
        (rep / "report.json").write_text(json.dumps(data))
        return rep

    a, b = report("a", 0, "e", "1" * 64), report("b", 0, "e", "2" * 64)
    assert cli.main(["compare", str(a), str(b)]) == 0
    assert (
        "warning: A and B ran different configs: e (config_hash 111111111111 vs 222222222222)"
        in (capsys.readouterr().out)
    )
    # a run folder outside the report is not read: the seeds are the same, so no warning
    outside = report("c", 0, "../b/e", "1" * 64)
    assert cli.main(["compare", str(a / "e"), str(outside)]) == 0  # a run against a report
    out = capsys.readouterr().out
    assert (
        "warning" not in out and "| e | one | 1 (exact) | 1 (exact) | PASS -> PASS | equal |" in out
    )
    # no hash to read on one side: the report's seed decides
    assert cli.main(["compare", str(report("d", 1, "nope", "")), str(outside)]) == 0
    assert "different configs: e (seed 1 vs 0)" in capsys.readouterr().out
    # the run folders' config.yaml: the warning names the params that differ
    for rep, t in ((a, 8), (b, 10)):
        (rep / "e" / "config.yaml").write_text(f"experiment: e\nparams: {{T: {t}, n: 3}}\n")
    assert cli.main(["compare", str(a), str(b)]) == 0
    assert "different configs: e (params.T 8 vs 10); rows" in capsys.readouterr().out


def test_exact_values_that_print_alike_are_equal_to_n_digits():
    """Two exact values shown the same but differing in the last bits are not a bare 'differ'."""
    from dedebate.lab.compare import change_evidence

    def exact(v):
        return {"value": v, "lo": v, "hi": v, "bound": "<= 2", "passed": True}

    assert change_evidence(exact(1.0), exact(1.0000000000001)) == "equal to 13 digits"
    assert change_evidence(exact(1.9999847418654664), exact(1.99999)) == "equal to 5 digits"
    assert change_evidence(exact(1.0), exact(1.5)) == "differ"  # shown as 1 and 1.5


def test_compare_flags_what_changes_the_gate_and_only_that(tmp_path, fake_env, capsys):
    """A row that passes as a finding in A and as a claim in B changed nothing; a claim that
    says it passed with a NaN value fails (as reproduce decides); an experiment that raised in B
    (no claims) is a changed row of its own, so the report's verdict change shows."""
    a, b = _reproduce(tmp_path, capsys, 1), _reproduce(tmp_path, capsys, 2)
    report = json.loads((b / "report.json").read_text())
    by_name = {e["name"]: e for e in report["experiments"]}
    heads = next(c for c in by_name["fake_pass"]["claims"] if c["claim"] == "heads rate near p")
    heads["finding"] = True  # met as a finding in B, PASS as a claim in A
    (b / "report.json").write_text(json.dumps(report))
    assert cli.main(["compare", str(a), str(b)]) == 0
    assert "PASS -> met |" in capsys.readouterr().out

    half = next(
        c for c in by_name["fake_fail"]["claims"] if c["claim"] == "value at least one half"
    )
    half.update(passed=True, value=float("nan"))
    (b / "report.json").write_text(json.dumps(report))
    assert cli.main(["compare", str(a), str(b)]) == 0  # FAIL -> FAIL: NaN fails closed
    assert "| nan [" in (out := capsys.readouterr().out) and "FAIL -> FAIL |" in out

    by_name["fake_pass"].update(status="error", error="ValueError: boom", claims=[])
    (b / "report.json").write_text(json.dumps(report))
    assert cli.main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert (
        "| fake_pass | the experiment ran to its end | 1 (exact) | 0 (exact) | PASS -> FAIL "
        "**CHANGED** |"
    ) in out
    assert "1 verdict(s) changed: fake_pass: the experiment ran to its end" in out
    del by_name["fake_pass"]["error"]
    by_name["fake_pass"]["status"] = "running"  # stopped before its end: fails as an error does
    (b / "report.json").write_text(json.dumps(report))
    assert cli.main(["compare", str(a), str(b)]) == 1
    assert (
        "1 verdict(s) changed: fake_pass: the experiment ran to its end" in capsys.readouterr().out
    )


def test_compare_warns_when_a_and_b_share_no_experiment(tmp_path, capsys):
    """Two runs of different experiments pair nothing: one warning line (it was silent)."""
    from dedebate.lab.experiment import Claim

    for name in ("machines", "prover_estimator"):
        path = tmp_path / name / "results.json"
        path.parent.mkdir()
        rows = [Claim.exact(f"{name} holds", "s", "== 1", 1.0, True).to_dict()]
        path.write_text(json.dumps({"experiment": name, "claims": rows}))
    assert cli.main(["compare", str(tmp_path / "machines"), str(tmp_path / "machines")]) == 0
    assert "share no experiment" not in capsys.readouterr().out
    assert (
        cli.main(["compare", str(tmp_path / "machines"), str(tmp_path / "prover_estimator")]) == 0
    )
    out = capsys.readouterr().out
    assert "warning: A and B share no experiment (A: machines; B: prover_estimator)\n" in out
