"""``dedebate reproduce`` on fake experiments: rows, plots, failures recorded, exit codes."""

from __future__ import annotations

import json
import types

from dedebate import cli
from dedebate.lab.experiment import Claim, ExperimentResult
from dedebate.lab.registry import discover_experiments
from dedebate.lab.report import measured
from tests.fake_experiments import fake_fail, fake_pass


def reproduce(tmp_path, capsys, *args):
    code = cli.main(
        [
            "reproduce",
            "--quick",
            "--tracking",
            "disabled",
            "--no-progress",
            "--output-dir",
            str(tmp_path),
            *args,
        ]
    )
    out, err = capsys.readouterr()
    dirs = sorted(tmp_path.glob("reproduce-*"))
    assert len(dirs) == 1, dirs
    return code, out, err, dirs[0]


def test_reproduce_records_pass_fail_and_raise(tmp_path, fake_env, capsys):
    code, out, _, rep = reproduce(tmp_path, capsys)
    assert code == 1
    assert "FAIL: 3/4 claims pass" in out and "fake_fail, fake_raise" in out
    md = (rep / "report.md").read_text()
    assert md.startswith("# dedebate reproduce report")
    assert "**FAIL**: 3/4 claims pass; 1 experiment(s) failed to run." in md
    for key in ("git_commit", "jax_version", "backend", "device_count", "| size | quick |"):
        assert key in md
    assert (
        "| value at least one half | fake theorem 9 | >= 0.5 | 0.25 (exact) | FAIL | "
        "fails \\| by design |"
    ) in md
    assert "| value positive | fake theorem 10 | > 0 | 0.25 (exact) | PASS |" in md
    assert "| flips counted | fake lemma 2 | == 32 | 32 (exact) | PASS |" in md
    assert (
        "| experiment did not complete | fake_raise | — | — | FAIL | RuntimeError: boom at "
        "step 1 |" in md
    )
    # the sampled claim shows its 95% interval
    res = json.loads((rep / "fake_pass" / "results.json").read_text())
    row = res["claims"][0]
    assert f"| heads rate near p | fake lemma 1 | contains 0.5 | {measured(row)} | PASS |" in md
    assert row["lo"] < row["value"] < row["hi"] and "[" in measured(row)
    # plots embedded with paths relative to the report, and the files exist
    assert "![counts](fake_pass/plots/counts.png)" in md
    assert (rep / "fake_pass" / "plots" / "counts.png").is_file()
    # every experiment has a full run directory, including the one that raised
    for name in ("fake_pass", "fake_fail", "fake_raise"):
        assert (rep / name / "config.yaml").is_file() and (rep / name / "results.json").is_file()
    assert "boom" in (rep / "fake_raise" / "error.txt").read_text()

    report = json.loads((rep / "report.json").read_text())
    assert report["passed"] is False and report["complete"] is True
    assert (report["claims_total"], report["claims_passed"]) == (4, 3)
    by_name = {e["name"]: e for e in report["experiments"]}
    assert set(by_name) == {"fake_pass", "fake_fail", "fake_raise"}
    assert by_name["fake_pass"]["passed"] and not by_name["fake_fail"]["passed"]
    assert by_name["fake_raise"]["status"] == "error"
    assert by_name["fake_raise"]["error"] == "RuntimeError: boom at step 1"
    assert report["provenance"]["size"] == "quick"


def test_reproduce_all_passing_exits_0(tmp_path, fake_env, capsys):
    code, out, _, rep = reproduce(tmp_path, capsys, "--only", "fake_pass", "--seed", "7")
    assert code == 0, out
    assert "PASS: 2/2 claims pass" in out
    report = json.loads((rep / "report.json").read_text())
    assert report["passed"] is True and [e["name"] for e in report["experiments"]] == ["fake_pass"]
    assert json.loads((rep / "fake_pass" / "results.json").read_text())["provenance"]["seed"] == 7
    assert "**PASS**: 2/2 claims pass." in (rep / "report.md").read_text()


def test_reproduce_runs_each_size(tmp_path, fake_env, capsys):
    for flag, n in (("--full", 4096), (None, 64)):
        out_dir = tmp_path / (flag or "default")
        args = [
            "reproduce",
            "--tracking",
            "disabled",
            "--no-progress",
            "--output-dir",
            str(out_dir),
            "--only",
            "fake_pass",
        ]
        assert cli.main(args + ([flag] if flag else [])) == 0
        (rep,) = out_dir.glob("reproduce-*")
        cfg = (rep / "fake_pass" / "config.yaml").read_text()
        assert f"n: {n}\n" in cfg
    capsys.readouterr()


def test_reproduce_with_nothing_registered_fails_loudly(tmp_path, fake_env, capsys):
    fake_env.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments.fakebench")
    code = cli.main(["reproduce", "--quick", "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert "no experiments found" in err
    assert not list(tmp_path.glob("reproduce-*"))


def test_import_error_is_a_failing_row(tmp_path, fake_env, capsys):
    fake_env.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments.broken")
    code, _, err, rep = reproduce(tmp_path, capsys)
    assert code == 1
    assert "could not import tests.fake_experiments.broken.bad" in err
    md = (rep / "report.md").read_text()
    assert "import failed: ImportError: no module named 'imaginary_dependency'" in md
    assert "## broken_good" in md  # the healthy module beside it still ran


def test_discovery(fake_registry):
    assert fake_registry.names() == ["fake_fail", "fake_pass", "fake_raise"]
    assert fake_registry.errors == {}
    reg = discover_experiments([], modules=[fake_pass, "tests.fake_experiments.fake_fail"])
    assert reg.names() == ["fake_fail", "fake_pass"]
    reg = discover_experiments(
        ["tests.fake_experiments", "no_such_package_xyz"], modules=[fake_fail]
    )
    assert reg.names() == ["fake_fail", "fake_pass", "fake_raise"]
    assert "ModuleNotFoundError" in reg.errors["no_such_package_xyz"]
    # a module with NAME but no report (the old contract's run) is an error, never dropped
    old = types.ModuleType("old_contract")
    old.NAME, old.run = "old", lambda cfg, ctx: None
    reg = discover_experiments([], modules=[old, fake_pass])
    assert reg.names() == ["fake_pass"]
    assert reg.errors == {"old_contract": "experiment 'old' defines no report(cfg, measured, host)"}


def test_measured_formatting():
    exact = Claim.exact("c", "s", "<= 1", 0.5, True).to_dict()
    assert measured(exact) == "0.5 (exact)"
    sampled = Claim("c", "s", ">= 0", 0.123456, 0.1, 0.15, True).to_dict()
    assert measured(sampled) == "0.1235 [0.1, 0.15]"
    # four digits that would meet the bound otherwise: the whole number
    fails = Claim.exact("c", "s", "<= 16", 16.00001, False).to_dict()
    assert measured(fails) == "16.00001 (exact)"
    meets = Claim.exact("c", "s", "== 0.984375", 0.984375, True).to_dict()
    assert measured(meets) == "0.984375 (exact)"
    near = Claim.exact("c", "s", "== 0.046875", 0.04687497764825821, True).to_dict()
    assert measured(near) == "0.04687497764825821 (exact; meets == 0.046875 only within tolerance)"


def test_a_p_value_shows_the_digits_that_place_it_against_its_level():
    """Three digits, or as many as put the shown p on its own side of the family level (0.05/55
    = 0.000909091, six digits in the policy line)."""
    from dedebate.lab.report_render import _result_cell

    level = 0.05 / 55

    def cell(p):
        row = Claim("c", "s", "== 0", 0.0, -0.1, 0.1, p >= level, p_value=p).to_dict()
        return _result_cell({**row, "family_level": level, "passed_95": p >= 0.05})

    assert cell(0.000909) == "FAIL (p=0.000909; 95%: miss)"  # below the level
    assert cell(0.0009091) == "PASS (p=0.0009091; 95%: miss)"  # 0.000909 would read as below
    assert cell(level) == "PASS (p=0.0009091; 95%: miss)"
    assert cell(0.4) == "PASS (p=0.4)"


def test_a_passing_row_whose_interval_reaches_past_its_one_sided_bound_is_not_resolved():
    """A Monte-Carlo row fails only on evidence against its claim; where its interval reaches
    past a one-sided bound the report says the sample cannot show the claim either."""
    from dedebate.lab.report_render import ExperimentEntry, _policy_line, _result_cell, unresolved

    def row(bound, lo, hi, passed=True, p=0.9):
        return Claim("c", "s", bound, (lo + hi) / 2, lo, hi, passed, p_value=p).to_dict()

    assert unresolved(row("<= 0.3956", 0.27, 0.41)) and unresolved(row(">= 0.6402", 0.63, 0.70))
    assert not unresolved(row("<= 0.3956", 0.27, 0.3956))  # reaches the bound, not past it
    assert not unresolved(row(">= 0.6402", 0.6402, 0.70))
    assert not unresolved(row("== 0.5", 0.4, 0.6))  # an equality never shows more
    assert not unresolved(row("<= 0.3956", 0.27, 0.41, passed=False, p=0.001))  # it failed
    assert not unresolved(row("<= 2 delta", 0.27, 0.41))  # a bound in words: no number to hold
    assert not unresolved(Claim.exact("c", "s", "<= 0.3956", 0.3, True).to_dict())
    assert _result_cell(row("<= 0.4", 0.3, 0.45)) == "PASS (p=0.9; not resolved)"
    rows = [row("<= 0.4", 0.3, 0.45), row("<= 0.4", 0.3, 0.35), row(">= 0.6", 0.5, 0.7)]
    assert "2 passing row(s) have an interval" in _policy_line([ExperimentEntry("a", claims=rows)])


def test_one_verdict_per_row_in_the_progress_line_report_and_results_json(tmp_path):
    """A sampled row (p = 0.00284) fails its own run's family of 4 (level 0.0125) but passes the
    report's family of 49 (level 0.00102). The progress line calls it pending and names it; the
    final report decides it once, and that decision is written into the run's results.json."""
    from dedebate.lab.claims import with_family_decisions
    from dedebate.lab.report import (
        ExperimentEntry,
        _write_report,
        apply_report_family,
        progress_line,
    )

    def row(name, p):
        return Claim(name, "s", "== 0", 0.0, -0.1, 0.1, p >= 0.05, p_value=p)

    runs = {
        "a": [row("close call", 0.00284)] + [row(f"a{i}", 0.9) for i in range(3)],
        "b": [row(f"b{i}", 0.9) for i in range(45)],
    }
    entries = []
    for name, claims in runs.items():
        results = {
            "experiment": name,
            "title": "",
            "status": "ok",
            "passed": ExperimentResult(claims=claims).passed,
            "claims": with_family_decisions(claims),
            "metrics": {},
            "tables": {},
            "plots": [],
            "provenance": {"config_hash": "x"},
        }
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(results))
        entries.append(
            ExperimentEntry(name, run_dir=name, wall_time_s=1.0, claims=results["claims"])
        )
    alone = json.loads((tmp_path / "a" / "results.json").read_text())
    assert alone["passed"] is False and alone["claims"][0]["family"] == "run"

    apply_report_family(entries[:1])  # a has finished, b still runs
    assert progress_line(entries[0], 1, 2) == (
        "reproduce: [1/2] a: UNDECIDED 3/4 in 1.0 s (pending: 1 Monte-Carlo row(s) below "
        "0.05/4, the level of the 4 rows finished so far: 'close call' p=0.00284; the report "
        "decides them over every experiment's rows when all 2 have finished)"
    )

    _write_report(tmp_path, {"size": "quick", "seed": 0}, entries, 1.0, final=True)
    report = json.loads((tmp_path / "report.json").read_text())
    for name, rep in zip(runs, report["experiments"]):
        res = json.loads((tmp_path / name / "results.json").read_text())
        assert res["claims"] == rep["claims"] and res["passed"] is rep["passed"] is True
        assert res["decided_by"] == "../report.json"
        assert {(c["family"], c["family_size"]) for c in res["claims"]} == {("report", 49)}
        assert res["metrics"] == {} and res["provenance"] == {"config_hash": "x"}
    close = report["experiments"][0]["claims"][0]
    assert close["passed"] and not close["passed_95"]
    assert progress_line(entries[0], 2, 2).startswith("reproduce: [2/2] a: PASS 4/4 in 1.0 s")


def test_parallel_progress_names_the_pending_row_then_its_final_verdict(
    tmp_path, monkeypatch, capsys
):
    """Experiment a finishes first with a row below its family-so-far level (p = 0.01 < 0.05/1):
    its line is UNDECIDED and names the row; once b has finished (m = 5, level 0.01) a last line
    gives a's verdict over the report's family."""
    import types

    import dedebate.lab.parallel as parallel
    from dedebate.lab.report import ExperimentEntry, _run_parallel, apply_report_family

    miss = Claim("sampled miss", "s", "== 0", 0.1, 0.01, 0.19, False, p_value=0.01).to_dict()
    ok = Claim("sampled ok", "s", "== 0", 0.0, -0.1, 0.1, True, p_value=0.9).to_dict()
    outs = [parallel.Outcome("a", 1.0, claims=[miss]), parallel.Outcome("b", 2.0, claims=[ok] * 4)]
    monkeypatch.setattr(parallel, "run_tasks", lambda tasks, jobs, on_start: iter(outs))
    entries = {n: ExperimentEntry(n) for n in "ab"}
    pending = [(entries[n], types.SimpleNamespace(__name__=n), None) for n in "ab"]

    def finish(entry):  # as reproduce does: decide the rows of the experiments finished so far
        apply_report_family([e for e in entries.values() if e.claims])

    _run_parallel(pending, tmp_path, 2, finish, True)
    lines = capsys.readouterr().err.splitlines()
    assert lines[1].startswith("reproduce: [1/2] a: UNDECIDED 0/1 in 1.0 s (pending: 1 ")
    assert "'sampled miss' p=0.01" in lines[1]
    assert lines[2].startswith("reproduce: [2/2] b: PASS 4/4 in 2.0 s")
    assert lines[3:] == [
        "reproduce: a: PASS 1/1 (decided over the report's family of 5 "
        "Monte-Carlo rows; results.json records it)"
    ]


def _mc_rows(*ps):
    return [
        Claim(f"sampled {i}", "s", "== 0", 0.0, -0.1, 0.1, p >= 0.05, p_value=p)
        for i, p in enumerate(ps)
    ]


def test_resume_with_only_keeps_every_experiment_and_its_family(
    tmp_path, fake_env, capsys, monkeypatch
):
    """``reproduce --resume DIR --only fake_pass`` runs fake_pass only, and its report still
    holds fake_fail (finished: its stored record) and fake_raise (failed: a failing row, not run
    again), so the family of Monte-Carlo rows is the whole report's: fake_pass's p = 0.02 row
    passes over the 4 rows (level 0.0125) as it would over a full resume, where alone (2 rows,
    level 0.025) it would fail."""
    import shutil

    def boom(cfg, measured, host):
        raise RuntimeError("boom in report")

    monkeypatch.setattr(fake_pass, "report", boom)
    monkeypatch.setattr(
        fake_fail, "report", lambda cfg, m, h: ExperimentResult(claims=_mc_rows(0.9, 0.9))
    )
    only = ["--only", "fake_pass", "fake_fail", "fake_raise"]
    code, _, _, rep = reproduce(tmp_path / "out", capsys, *only)
    assert code == 1
    first = json.loads((rep / "report.json").read_text())
    assert [e["status"] for e in first["experiments"]] == ["ok", "error", "error"]
    raised = {p: (rep / "fake_raise" / p).read_bytes() for p in ("results.json", "error.txt")}

    monkeypatch.setattr(  # fake_pass is fixed; resume it alone
        fake_pass, "report", lambda cfg, m, h: ExperimentResult(claims=_mc_rows(0.02, 0.9))
    )
    shutil.copytree(rep, tmp_path / "full")  # the same folder, for a resume without --only
    args = ["reproduce", "--resume", str(rep), "--no-progress", "--tracking", "disabled"]
    assert cli.main([*args, "--only", "fake_pass"]) == 1  # fake_raise still fails
    out, err = capsys.readouterr()
    assert "FAIL: 4/4 claims pass; failing experiments: fake_raise" in out, out
    assert f"run already finished: {rep / 'fake_fail'}" not in err  # kept, not resumed
    report = json.loads((rep / "report.json").read_text())
    # the first attempt's start stays, this one's is beside it; the wall time is both attempts'
    prov, was = report["provenance"], first["provenance"]
    assert prov["started_utc"] == was["started_utc"] and prov["resumed_utc"] >= was["started_utc"]
    assert report["wall_time_s"] > first["wall_time_s"]
    rows = {e["name"]: e for e in report["experiments"]}
    assert list(rows) == ["fake_fail", "fake_pass", "fake_raise"]  # the registry's order
    assert rows["fake_pass"]["verdict"] == rows["fake_fail"]["verdict"] == "PASS"
    mc = [c for e in report["experiments"] for c in e["claims"]]
    assert {(c["family"], c["family_size"]) for c in mc} == {("report", 4)}
    close = rows["fake_pass"]["claims"][0]
    assert close["p_value"] == 0.02 and close["passed"] and not close["passed_95"]
    assert rows["fake_raise"]["status"] == "error" and rows["fake_raise"]["run_dir"] == "fake_raise"
    assert (
        "(last record: RuntimeError: boom at step 1); not run, as --only"
        in rows["fake_raise"]["error"]
    )
    assert {p: (rep / "fake_raise" / p).read_bytes() for p in raised} == raised  # not run
    md = (rep / "report.md").read_text()
    assert "fake_fail" in md and "fake_raise" in md
    fail_res = json.loads((rep / "fake_fail" / "results.json").read_text())
    assert fail_res["claims"] == rows["fake_fail"]["claims"]  # the report's decision, written back

    # a resume without --only (fake_raise runs again and fails again) reports the same rows
    assert cli.main([*args[:2], str(tmp_path / "full"), *args[3:]]) == 1
    capsys.readouterr()
    full = json.loads((tmp_path / "full" / "report.json").read_text())
    assert [e["name"] for e in full["experiments"]] == list(rows)
    for name in ("fake_fail", "fake_pass"):
        got, want = (
            {k: v for k, v in e.items() if k != "wall_time_s"}
            for e in (rows[name], next(e for e in full["experiments"] if e["name"] == name))
        )
        assert got == want, name
    assert (full["claims_total"], full["claims_passed"]) == (
        report["claims_total"],
        report["claims_passed"],
    )


def test_the_reproduce_runs_wandb_summary_holds_the_reports_verdicts(
    tmp_path, fake_env, capsys, monkeypatch
):
    """fake_pass's p = 0.02 row fails within its own 2 rows (level 0.025) but passes over the
    report's 4 (0.0125): the reproduce run's W&B summary gives the report's verdict, and its
    history logs no verdict taken before the report decided (it logged fake_pass as failed)."""
    from dedebate.lab import report as report_module

    calls: list = []

    class Job:
        def __getattr__(self, name):
            return lambda *a, **k: calls.append((name, a))

    monkeypatch.setattr(report_module.Tracker, "start", classmethod(lambda cls, **kw: Job()))
    monkeypatch.setattr(fake_pass, "report", lambda c, m, h: ExperimentResult(_mc_rows(0.02, 0.9)))
    monkeypatch.setattr(fake_fail, "report", lambda c, m, h: ExperimentResult(_mc_rows(0.9, 0.9)))
    code, _, _, _ = reproduce(tmp_path / "out", capsys, "--only", "fake_pass", "fake_fail")
    assert code == 0
    (summary,) = [a[0] for n, a in calls if n == "set_summary" and "experiments_failed" in a[0]]
    assert summary["experiment_passed/fake_pass"] == summary["experiment_passed/fake_fail"] == 1
    assert all("experiment_passed" not in a[0] for name, a in calls if name == "log")


def test_a_reproduce_killed_while_wandb_starts_can_be_resumed(
    tmp_path, fake_env, capsys, monkeypatch
):
    """report.json is on disk before W&B starts (an online start can take a minute): a reproduce
    killed then left a folder that ``--resume`` refused as "not a reproduce directory"."""
    from dedebate.lab import report as report_module

    real_start = report_module.Tracker.start

    def killed(cls, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(report_module.Tracker, "start", classmethod(killed))
    code, _, _, _ = reproduce(tmp_path / "out", capsys, "--only", "fake_pass")
    assert code == 130  # as Ctrl-C ends it
    (rep,) = (tmp_path / "out").glob("reproduce-*")
    assert json.loads((rep / "report.json").read_text())["experiments"] == []
    monkeypatch.setattr(report_module.Tracker, "start", real_start)
    args = ["reproduce", "--resume", str(rep), "--no-progress", "--tracking", "disabled"]
    assert cli.main([*args, "--only", "fake_pass"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_a_memory_limit_on_resume_keeps_what_finished(tmp_path, fake_env, capsys, monkeypatch):
    """A resume under a memory limit that a finished experiment's estimate exceeds reuses its
    record (it runs nothing): the report keeps it as it was, with or without ``--only``, and
    ``run --resume`` of a finished run is still a no-op. It was an error row: every finished
    experiment turned FAIL and the report was rewritten."""
    fake_env.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments.fake_pass")
    code, _, _, rep = reproduce(tmp_path / "out", capsys)
    assert code == 0
    report = (rep / "report.json").read_bytes()
    monkeypatch.setattr(fake_pass, "memory_bytes", lambda cfg: {"x": 2**40}, raising=False)
    args = ["reproduce", "--resume", str(rep), "--no-progress", "--tracking", "disabled"]
    for only in ([], ["--only", "fake_pass"]):
        assert cli.main([*args, *only, "--memory-limit", "100KiB"]) == 0, capsys.readouterr()
        rows = json.loads((rep / "report.json").read_text())["experiments"]
        assert [(r["name"], r["status"]) for r in rows] == [("fake_pass", "ok")]
    assert json.loads(report)["experiments"][0]["claims"] == rows[0]["claims"]
    run = ["run", "--resume", str(rep / "fake_pass"), "memory_limit=100KiB", "--no-progress"]
    assert cli.main(run) == 0
    assert "run already finished" in capsys.readouterr().err


def test_a_second_resume_of_a_reproduce_folder_stops_at_once(tmp_path, fake_env, capsys):
    """While one ``reproduce --resume DIR`` runs, another of DIR exits 2 and writes nothing. Two
    at once each ran what the other was not running, and the last report written failed the
    other's rows with "run in use" (the durability audit)."""
    from dedebate.lab.folder_guard import lock_run_dir

    fake_env.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments.fake_pass")
    code, _, _, rep = reproduce(tmp_path / "out", capsys)
    assert code == 0
    report = (rep / "report.json").read_bytes()
    args = ["reproduce", "--resume", str(rep), "--no-progress", "--tracking", "disabled"]
    with lock_run_dir(rep):  # the first resume, still running
        assert cli.main(args) == 2
        assert "run in use by PID" in capsys.readouterr().err
    assert (rep / "report.json").read_bytes() == report
    assert cli.main(args) == 0  # once it has finished
