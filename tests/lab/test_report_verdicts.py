"""What ``dedebate ls``, report.md, report.json and the re-rendered pages say of a run: the
verdict, the counts, gating rows against findings, unfinished and errored runs, numbers as
written, and each finished result on disk before the next experiment starts."""

from __future__ import annotations

import json
import math

import pytest

from dedebate.lab import records, report
from dedebate.lab.provenance import RESULT_SCHEMA_VERSION
from dedebate.lab.report_render import ExperimentEntry, fmt, measured, render_markdown


def _row(name="c", passed=True, finding=False, **kw):
    return {
        "claim": name,
        "source": "s",
        "bound": ">= 0",
        "value": 1.0,
        "lo": 1.0,
        "hi": 1.0,
        "passed": passed,
        "finding": finding,
        **kw,
    }


def _run(d, **fields):
    d.mkdir(parents=True, exist_ok=True)
    data = {
        "experiment": "x",
        "status": "ok",
        "passed": True,
        "claims": [],
        "provenance": {"result_schema_version": RESULT_SCHEMA_VERSION},
    } | fields
    (d / "results.json").write_text(json.dumps(data))
    return d


# ---- records.py -------------------------------------------------------------------------------


def test_records_refuses_schema_version_zero(tmp_path):
    _run(tmp_path / "r", provenance={"result_schema_version": 0})
    with pytest.raises(records.RecordError):
        records.load(tmp_path / "r")


def test_ls_incomplete_reproduce_has_no_verdict(tmp_path):
    d = tmp_path / "rep"
    d.mkdir()
    (d / "report.json").write_text(
        json.dumps(
            {
                "schema_version": RESULT_SCHEMA_VERSION,
                "complete": False,
                "passed": True,
                "claims_passed": 1,
                "claims_total": 1,
                "experiments": [{"name": "a", "passed": True}],
            }
        )
    )
    s = records.summary(d)
    assert (s["status"], s["verdict"]) == ("incomplete", None)


def test_ls_run_counts_only_gating_rows(tmp_path):
    d = _run(
        tmp_path / "r",
        passed=False,
        claims=[_row("g", passed=False), _row("f", passed=True, finding=True)],
    )
    s = records.summary(d)
    assert (s["verdict"], s["claims_passed"], s["claims_total"]) == ("FAIL", 0, 1)


def test_ls_shows_a_failed_runs_error(tmp_path):
    d = _run(tmp_path / "r", status="error", passed=False, error="boom")
    s = records.summary(d)
    assert (s["status"], s["verdict"], s["error"]) == ("error", None, "boom")


# ---- report_render.py -------------------------------------------------------------------------


def test_errored_entry_never_passes():
    e = ExperimentEntry(name="x", status="error", error="died", claims=[_row()])
    assert (e.passed, e.verdict) == (False, "FAIL")


def test_errored_measurement_only_entry_fails():
    e = ExperimentEntry(
        name="x", status="error", measurement_only=True, claims=[_row(finding=True)]
    )
    assert e.verdict == "FAIL"


def test_fmt_large_and_negative_infinite_floats():
    assert fmt(1e20) == "1e+20"
    assert fmt(-math.inf) == "-inf"


def test_measured_keeps_an_interval_that_touches_the_value():
    c = {"value": 0.0, "lo": 0.0, "hi": 0.25, "bound": "<= 0.1", "passed": True}
    assert measured(c) == "0 [0, 0.25]"


def test_in_progress_report_has_no_verdict():
    md = render_markdown({}, [ExperimentEntry(name="x", claims=[_row()])], 0.0, final=False)
    assert md.splitlines()[2] == "**IN PROGRESS**: 1/1 claims pass."


def test_finding_is_not_a_row_of_the_claims_table():
    e = ExperimentEntry(name="x", claims=[_row("gate"), _row("findme", finding=True)])
    md = render_markdown({}, [e], 0.0)
    assert md.count("| findme |") == 1


def _policy(md):
    (line,) = [x for x in md.splitlines() if x.startswith(("Multiple comparisons", "Every row"))]
    return line


_TAIL = (
    " so a report whose claims all hold fails with probability at most 0.05. Intervals shown "
    "are each row's own 95% interval; {miss} row(s) miss their bound at 95% alone (marked "
    "'95%: miss'). A row fails only on evidence against its claim: 0 passing row(s) have an "
    "interval that reaches past their one-sided bound (marked 'not resolved'), which a "
    "larger size would narrow. Exact rows compare exactly."
)


def test_policy_level_uses_the_family_size_not_the_row_count():
    ok = _row("a", bound=">= 0.5", value=0.7, lo=0.6, hi=0.8, p_value=0.5)
    closed = _row(
        "b", passed=False, bound=">= 0.5", value=math.nan, lo=math.nan, hi=math.nan, p_value=0.5
    )
    md = render_markdown({}, [ExperimentEntry(name="x", claims=[ok, closed])], 0.0)
    assert _policy(md) == (
        "Multiple comparisons: the 1 Monte-Carlo rows (1 more failed closed, outside the family) "
        "are decided family-wise (Bonferroni): a row passes iff its p-value >= 0.05/1 = 0.05,"
        + _TAIL.format(miss=1)
    )


def test_policy_line_leaves_findings_out():
    ok = _row("a", bound=">= 0.5", value=0.7, lo=0.6, hi=0.8, p_value=0.5)
    finding = _row(
        "f", finding=True, passed=False, bound=">= 0.5", value=0.7, lo=0.6, hi=0.8, p_value=0.5
    )
    md = render_markdown({}, [ExperimentEntry(name="x", claims=[ok, finding])], 0.0)
    assert _policy(md) == (
        "Multiple comparisons: the 1 Monte-Carlo rows are decided family-wise (Bonferroni): a row "
        "passes iff its p-value >= 0.05/1 = 0.05," + _TAIL.format(miss=0)
    )


# ---- report.py --------------------------------------------------------------------------------


def _reproduce(registry, tmp_path, **kw):
    """``reproduce --quick`` of ``registry`` into ``tmp_path``, one job, quiet, W&B off."""
    options = dict(size="quick", tracking_mode="disabled", show_progress=False, jobs=1) | kw
    return report.reproduce(registry, output_dir=str(tmp_path), **options)


def _report_json(tmp_path, entries, final):
    report._write_report(tmp_path, {}, entries, 1.0, final=final)
    return json.loads((tmp_path / "report.json").read_text())


def test_report_json_verdict_ignores_measurement_only(tmp_path):
    entries = [
        ExperimentEntry(name="a", claims=[_row()]),
        ExperimentEntry(name="m", measurement_only=True, claims=[_row(finding=True)]),
    ]
    data = _report_json(tmp_path, entries, final=True)
    assert (data["passed"], data["complete"]) == (True, True)
    assert [e["verdict"] for e in data["experiments"]] == ["PASS", "MEASURED"]


def test_report_json_in_progress_is_not_complete(tmp_path):
    data = _report_json(tmp_path, [ExperimentEntry(name="a", claims=[_row()])], final=False)
    assert data["complete"] is False


def test_report_json_counts_findings_met(tmp_path):
    e = ExperimentEntry(
        name="a",
        claims=[_row("g"), _row("f1", finding=True), _row("f2", passed=False, finding=True)],
    )
    data = _report_json(tmp_path, [e], final=True)
    assert (data["claims_passed"], data["claims_total"]) == (1, 1)
    assert (data["findings_total"], data["findings_met"]) == (2, 1)


def test_report_json_wall_time_to_the_millisecond(tmp_path):
    report._write_report(
        tmp_path, {}, [ExperimentEntry(name="a", claims=[_row()])], 1.23456, final=True
    )
    assert json.loads((tmp_path / "report.json").read_text())["wall_time_s"] == 1.235


def test_in_progress_report_leaves_results_json_alone(tmp_path):
    (tmp_path / "a").mkdir()
    before = json.dumps({"status": "ok", "passed": True, "claims": [_row()]})
    (tmp_path / "a" / "results.json").write_text(before)
    e = ExperimentEntry(name="a", run_dir="a", claims=[_row()])
    report._write_report(tmp_path, {}, [e], 1.0, final=False)
    assert (tmp_path / "a" / "results.json").read_text() == before
    report._write_report(tmp_path, {}, [e], 1.0, final=True)  # the final write decides it
    assert json.loads((tmp_path / "a" / "results.json").read_text())["decided_by"] == (
        "../report.json"
    )


def test_each_finished_experiment_is_on_disk_before_the_next_starts(tmp_path, fake_env):
    from dedebate.lab.registry import discover_experiments

    reg = discover_experiments(
        [], modules=["tests.fake_experiments.fake_fail", "tests.fake_experiments.fake_pass"]
    )
    seen, real = [], report.run_experiment

    def spy(module, cfg, *, run_dir, **kw):
        data = json.loads((run_dir.parent / "report.json").read_text())
        seen.append([(e["name"], e["verdict"]) for e in data["experiments"]])
        return real(module, cfg, run_dir=run_dir, **kw)

    fake_env.setattr(report, "run_experiment", spy)
    out = _reproduce(reg, tmp_path)
    assert seen == [[], [("fake_fail", "FAIL")]]
    assert [e.verdict for e in out.entries] == ["FAIL", "PASS"]


def test_reproduce_wandb_job_reports_its_failure(tmp_path, fake_env, fake_wandb):
    from dedebate.lab.registry import discover_experiments

    reg = discover_experiments(
        [], modules=["tests.fake_experiments.fake_fail", "tests.fake_experiments.fake_pass"]
    )
    out = _reproduce(reg, tmp_path, tracking_mode="offline")
    assert out.passed is False
    (job,) = [r for r in fake_wandb.runs if r.kwargs.get("job_type") == "reproduce"]
    assert job.exit_code == 1
    assert (job.summary["passed"], job.summary["experiments_failed"]) == (False, 1)
    assert (job.summary["claims_passed"], job.summary["claims_total"]) == (3, 4)


def test_a_lab_failure_is_an_errored_row(tmp_path, fake_env):
    from dedebate.lab.registry import discover_experiments

    reg = discover_experiments([], modules=["tests.fake_experiments.fake_pass"])

    def broken(module, cfg, **kw):
        raise RuntimeError("lab broke")

    fake_env.setattr(report, "run_experiment", broken)
    out = _reproduce(reg, tmp_path)
    (e,) = out.entries
    assert (e.status, e.error, e.verdict) == ("error", "RuntimeError: lab broke", "FAIL")
    md = (out.report_dir / "report.md").read_text()
    assert "**FAIL**: 0/0 claims pass; 1 experiment(s) failed to run." in md
    assert (
        "| experiment did not complete | fake_pass | — | — | FAIL | RuntimeError: lab broke |" in md
    )
    data = json.loads((out.report_dir / "report.json").read_text())
    assert data["experiments"][0]["status"] == "error"


# ---- rerender.py ------------------------------------------------------------------------------


def _rep(**kw):
    return {
        "schema_version": 1,
        "complete": True,
        "wall_time_s": 1.0,
        "provenance": {},
        "experiments": [{"name": "a", "status": "ok", "claims": [_row()]}],
    } | kw


def test_rerender_takes_true_for_no_number():
    from dedebate.lab.rerender import report_problem

    assert report_problem(_rep()) is None
    assert report_problem(_rep(wall_time_s=True)) == (
        "wall_time_s is true/false, not a number within float range or null"
    )
    row = _row(value=True)
    problem = report_problem(_rep(experiments=[{"name": "a", "status": "ok", "claims": [row]}]))
    assert (
        problem
        == "experiments[0].claims[0].value is true/false, not a number within float range or null"
    )


def test_rerender_earlier_attempts_refuses_bad_values(tmp_path):
    from dedebate.lab.rerender import earlier_attempts

    (tmp_path / "report.json").write_text(
        json.dumps(_rep(wall_time_s=-5.0, provenance={"started_utc": "yesterday"}))
    )
    assert earlier_attempts(tmp_path) == (None, 0.0)


def test_rerender_fails_a_non_finite_row():
    from dedebate.lab.rerender import markdown

    bad = _row("nanrow", value=math.nan, lo=math.nan, hi=math.nan)
    md = markdown(_rep(experiments=[{"name": "a", "status": "ok", "claims": [bad]}]))
    assert md.splitlines()[2] == "**FAIL**: 0/1 claims pass."


def test_rerender_incomplete_report_is_in_progress():
    from dedebate.lab.rerender import markdown

    assert markdown(_rep(complete=False)).splitlines()[2] == "**IN PROGRESS**: 1/1 claims pass."


def test_html_fail_cell_is_marked_fail(tmp_path):
    from dedebate.lab.rerender import markdown, to_html

    row = _row(passed=False)
    page = to_html(
        markdown(_rep(experiments=[{"name": "a", "status": "ok", "claims": [row]}])), tmp_path
    )
    assert '<td class="fail">FAIL</td>' in page and 'class="pass"' not in page


def test_decisions_are_written_only_into_an_ok_entrys_own_record(tmp_path):
    """An errored entry, or a record with other rows than the entry's, keeps its results.json."""
    for name, status, rows in (("err", "error", 1), ("other", "ok", 2)):
        (tmp_path / name).mkdir()
        before = json.dumps({"status": "ok", "passed": True, "claims": [_row()] * rows})
        (tmp_path / name / "results.json").write_text(before)
        e = ExperimentEntry(name=name, status=status, run_dir=name, claims=[_row(passed=False)])
        report.write_back_decisions(tmp_path, [e])
        assert (tmp_path / name / "results.json").read_text() == before, name


def test_an_experiment_with_no_claims_is_an_errored_row():
    e = ExperimentEntry(name="a")
    report._fill(e, 1.0, None, [], [])
    assert (e.status, e.error, e.verdict) == ("error", "the experiment returned no claims", "FAIL")


def test_only_leaves_out_other_modules_import_errors_and_a_resume_keeps_its_start(
    tmp_path, fake_env
):
    from dedebate.lab.registry import discover_experiments

    mods = ["tests.fake_experiments.fake_pass", "tests.fake_experiments.no_such_module"]
    reg = discover_experiments([], modules=mods)
    assert reg.errors  # the missing module is an import error, which --only leaves out
    out = _reproduce(reg, tmp_path, only=["fake_pass"])
    assert [(e.name, e.verdict) for e in out.entries] == [("fake_pass", "PASS")]
    path = out.report_dir / "report.json"
    data = json.loads(path.read_text())
    data["provenance"]["started_utc"] = "2026-01-02T03:04:05Z"
    path.write_text(json.dumps(data))
    again = _reproduce(reg, tmp_path, resume_dir=out.report_dir)
    provenance = json.loads(path.read_text())["provenance"]
    assert (
        again.report_dir == out.report_dir and provenance["started_utc"] == "2026-01-02T03:04:05Z"
    )


def test_a_resume_with_only_keeps_the_import_errors_its_folder_holds_and_no_other(
    tmp_path, fake_env
):
    from dedebate.lab.registry import discover_experiments

    missing = "tests.fake_experiments.no_such_module"
    reg = discover_experiments([], modules=["tests.fake_experiments.fake_pass", missing])
    first = _reproduce(reg, tmp_path, only=["fake_pass"]).report_dir
    rows = []
    for only in (["fake_pass"], None, ["fake_pass"]):  # the folder holds the error after None
        again = _reproduce(reg, tmp_path, resume_dir=first, only=only)
        rows.append([(e.name, e.verdict) for e in again.entries])
    assert rows[0] == [("fake_pass", "PASS")]
    assert rows[1] == rows[2] == [(missing, "FAIL"), ("fake_pass", "PASS")]
    assert again.entries[0].error.startswith("import failed: ")


def test_the_lab_refuses_a_resumed_folder_with_a_link_out_before_writing(tmp_path, fake_env):
    from dedebate.lab.registry import discover_experiments
    from dedebate.lab.rundir import RunDirError

    reg = discover_experiments([], modules=["tests.fake_experiments.fake_pass"])
    rep, outside = tmp_path / "rep", tmp_path / "outside.txt"
    rep.mkdir()
    outside.write_text("theirs")
    (rep / "notes.txt").symlink_to(outside)  # the command line checks first; the lab does too
    with pytest.raises(RunDirError, match="notes.txt"):
        _reproduce(reg, tmp_path, resume_dir=rep, only=["fake_pass"])
    assert [p.name for p in rep.iterdir()] == ["notes.txt"] and outside.read_text() == "theirs"


def test_rerender_takes_no_negative_count_and_no_integer_beyond_float_range():
    from dedebate.lab.rerender import report_problem

    for field, x, what in (("k", -1, "not a count"), ("value", 10**400, "not a number")):
        row = _row(**{field: x})
        problem = report_problem(_rep(experiments=[{"name": "a", "status": "ok", "claims": [row]}]))
        assert problem.startswith(f"experiments[0].claims[0].{field} is ") and what in problem


def test_rerender_takes_no_plot_or_table_that_is_not_a_path():
    from dedebate.lab.rerender import report_problem, results_problem

    entry = {"name": "a", "status": "ok", "claims": [_row()], "plots": ["p.png", 3]}
    assert report_problem(_rep(experiments=[entry])).startswith("experiments[0].plots holds ")
    claims = [_row()]
    assert results_problem({"claims": claims, "plots": ["p.png"], "tables": {"t": "t.csv"}}) is None
    for bad in ({"plots": [None]}, {"tables": {"t": 5}}):
        assert results_problem({"claims": claims, **bad}).startswith("a table or plot is ")
