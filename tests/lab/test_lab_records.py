"""Records to browse and keep: ``dedebate ls`` over a runs folder, the loader's claim and metric
rows, and a report.json of dedebate 0.1.0 read in the current layout."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dedebate import cli
from dedebate.lab import records
from dedebate.lab.folder_guard import lock_run_dir
from dedebate.lab.registry import discover_experiments
from dedebate.lab.schema import validation_errors
from dedebate.lab.sweep import run_sweep
from tests.lab.test_lab_sweep import SWEEPABLE, config

OLD = Path(__file__).parents[1] / "data" / "reproduce-0.1.0"
"""``dedebate reproduce --quick --only machines`` run by commit a292a6a (dedebate 0.1.0, before
findings, p-values and stored counts), trimmed to its first four claims and two metric rows."""


def _read(path):
    return json.loads(Path(path).read_text())


def _jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _ls(capsys, *args):
    code = cli.main(["ls", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def reproduced(tmp_path, fake_env, capsys):
    """A runs folder holding one reproduce of fake_pass and fake_fail."""
    runs = tmp_path / "runs"
    code = cli.main(
        [
            "reproduce",
            "--quick",
            "--only",
            "fake_pass",
            "fake_fail",
            "--jobs",
            "1",
            "--tracking",
            "disabled",
            "--no-progress",
            "--output-dir",
            str(runs),
        ]
    )
    capsys.readouterr()
    assert code == 1  # fake_fail fails one claim by design
    (rep,) = runs.glob("reproduce-*")
    return runs, rep


def test_ls_json_lists_a_reproduce_folder(reproduced, capsys):
    runs, rep = reproduced
    code, out, err = _ls(capsys, runs, "--json")
    assert code == 0 and err == ""
    (entry,) = json.loads(out)  # its runs belong to it: one record
    report = _read(rep / "report.json")
    assert tuple(entry) == records.LS_KEYS
    assert entry == {
        "kind": "reproduce",
        "name": "fake_fail,fake_pass",
        "status": "complete",
        "verdict": "FAIL",
        "claims_passed": 3,
        "claims_total": 4,  # fake_pass 2/2, fake_fail 1/2
        "started_utc": report["provenance"]["started_utc"],
        "size": "quick",
        "bytes": sum(f.stat().st_size for f in rep.rglob("*") if f.is_file()),
        "path": str(rep),
        "error": None,
    }
    assert (report["claims_passed"], report["claims_total"]) == (3, 4)

    code, out, _ = _ls(capsys, runs)
    header, line = out.splitlines()
    assert code == 0 and header.split() == [
        "KIND",
        "STATUS",
        "CLAIMS",
        "STARTED",
        "SIZE",
        "DISK",
        "NAME",
        "PATH",
    ]
    assert line.split()[:5] == ["reproduce", "FAIL", "3/4", entry["started_utc"], "quick"]
    assert line.endswith(f"fake_fail,fake_pass  {rep}")
    many = records.render([{**entry, "name": "a,b,c"}]).splitlines()[1]
    assert many.endswith(f"3 experiments  {rep}")  # the table names two, --json all

    for name, verdict, passed in (("fake_pass", "PASS", 2), ("fake_fail", "FAIL", 1)):
        code, out, _ = _ls(capsys, rep / name, "--json")  # a run directory itself
        (run,) = json.loads(out)
        assert (
            run["kind"],
            run["name"],
            run["verdict"],
            run["claims_passed"],
            run["claims_total"],
        ) == ("run", name, verdict, passed, 2)


def test_loader_rows_are_the_records_own(reproduced):
    _, rep = reproduced
    report = _read(rep / "report.json")
    rec = records.load(rep)
    assert rec.kind == "reproduce" and rec.path == rep
    assert rec.data == report  # a current record is not changed by the upgrade
    rows = records.claims(rep)
    want = [(e["name"], c) for e in report["experiments"] for c in e["claims"]]
    assert len(rows) == len(want) == 4
    for row, (name, c) in zip(rows, want, strict=True):
        assert tuple(row) == records.CLAIM_COLUMNS
        assert row == {"experiment": name, **{k: c.get(k) for k in records.CLAIM_COLUMNS[1:]}}
    assert [r["passed"] for r in rows] == [False, True, True, True]
    assert rows[2]["lo"] <= rows[2]["value"] <= rows[2]["hi"]  # fake_pass's Wilson row

    run = records.load(rep / "fake_pass" / "results.json")
    assert run.kind == "run" and run.data == _read(rep / "fake_pass" / "results.json")
    assert records.claims(run) == rows[2:]  # the same rows, decided by the report

    assert records.metrics(rep) == (
        [{"experiment": "fake_fail", **r} for r in _jsonl(rep / "fake_fail" / "metrics.jsonl")]
        + [{"experiment": "fake_pass", **r} for r in _jsonl(rep / "fake_pass" / "metrics.jsonl")]
    )
    heads = [r["chunks/heads"] for r in records.metrics(run)]
    assert len(heads) == 2 and sum(heads) == run.data["metrics"]["heads"]


def test_metrics_follow_no_link_out_of_the_record_and_skip_a_torn_line(reproduced, tmp_path):
    """A reproduce whose run folder is a link to a folder elsewhere: that folder's rows are not
    read (shared outputs are untrusted); nor is a sweep table outside its folder. A line cut short
    mid-file is skipped and the rows after it are kept."""
    _, rep = reproduced
    outside = tmp_path / "elsewhere"
    (rep / "fake_pass").rename(outside)
    (rep / "fake_pass").symlink_to(outside, target_is_directory=True)
    assert {r["experiment"] for r in records.metrics(rep)} == {"fake_fail"}

    run = tmp_path / "run"
    _run_record(run)
    (run / "metrics.jsonl").write_text('{"step": 0, "a": 1}\n{"step": 1, "a\n{"step": 2, "a": 3}\n')
    assert records.metrics(run) == [
        {"experiment": "x", "step": 0, "a": 1},
        {"experiment": "x", "step": 2, "a": 3},
    ]

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (tmp_path / "rows.csv").write_text("point,seed\n0,1\n")
    (sweep / "linked.csv").symlink_to(tmp_path / "rows.csv")
    record = {"kind": "sweep", "experiment": "x", "status": "ok", "schema_version": 1}
    for table in ("../rows.csv", "linked.csv"):
        (sweep / "results.json").write_text(json.dumps({**record, "table": table}))
        assert records.load(sweep).kind == "sweep"
        assert records.metrics(sweep) == []
    (sweep / "rows.csv").write_text("point,seed\n0,1\n")  # the same table inside: read
    (sweep / "results.json").write_text(json.dumps({**record, "table": "rows.csv"}))
    assert records.metrics(sweep) == [{"experiment": "x", "point": 0, "seed": 1}]


def test_a_0_1_0_report_loads_in_the_current_layout(capsys):
    raw = _read(OLD / "report.json")
    assert "findings_total" not in raw and raw["provenance"]["dedebate_version"] == "0.1.0"
    assert any("findings_total" in e for e in validation_errors(raw, "report"))
    rec = records.load(OLD)
    assert validation_errors(rec.data, "report") == []
    assert (rec.data["findings_total"], rec.data["findings_met"]) == (0, 0)
    assert [e["verdict"] for e in rec.data["experiments"]] == ["PASS"]

    rows = records.claims(OLD)
    old_rows = raw["experiments"][0]["claims"]
    assert [(r["claim"], r["value"], r["lo"], r["hi"], r["passed"]) for r in rows] == [
        (c["claim"], c["value"], c["lo"], c["hi"], c["passed"]) for c in old_rows
    ]
    assert rows[0]["experiment"] == "machines" and rows[0]["value"] == 0.74  # 1480 of 2000
    assert all(r["finding"] is False and r["p_value"] is None and r["k"] is None for r in rows)

    assert [(m["experiment"], m["step"], m["K_proven"]) for m in records.metrics(OLD)] == [
        ("machines", 0, 1.0),
        ("machines", 1, 2.0),
    ]

    code, out, _ = _ls(capsys, OLD.parent, "--json")
    (entry,) = [e for e in json.loads(out) if e["path"] == str(OLD)]
    assert code == 0 and (
        entry["verdict"],
        entry["claims_passed"],
        entry["claims_total"],
        entry["started_utc"],
    ) == ("PASS", 4, 4, "2026-12-04T19:40:24Z")


def test_upgrade_refuses_what_it_cannot_read():
    report = _read(OLD / "report.json")
    with pytest.raises(records.RecordError, match="schema version 2: written by a newer dedebate"):
        records.upgrade({**report, "schema_version": 2}, "reproduce")
    with pytest.raises(records.RecordError, match="schema version '1': not a dedebate"):
        records.upgrade({**report, "schema_version": "1"}, "reproduce")
    with pytest.raises(records.RecordError, match="kind='x': must be one of"):
        records.upgrade(report, "x")


def _run_record(directory, name="x"):
    directory.mkdir(parents=True)
    (directory / "results.json").write_text(
        json.dumps(
            {
                "experiment": name,
                "status": "ok",
                "passed": True,
                "claims": [],
                "provenance": {"result_schema_version": 1},
            }
        )
    )


def test_ls_follows_no_link_and_looks_a_bounded_depth(tmp_path, capsys):
    root, outside = tmp_path / "runs", tmp_path / "outside"
    _run_record(outside / "run", "outside")
    _run_record(root / "a")
    deep = root.joinpath(*"bcde")  # MAX_DEPTH folders down: found
    _run_record(deep)
    _run_record(root.joinpath(*"fghij"))  # one further: not
    _run_record(root / "a" / "inner")  # inside a record: part of it
    sweep = root / "sw"  # a sweep of full runs killed before its results.json: its points are its
    (sweep / "groups").mkdir(parents=True)
    (sweep / "config.yaml").write_text("experiment: x\n")
    _run_record(sweep / "points" / "p0000-s0")
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "bad").mkdir()
    (root / "bad" / "report.json").write_text("{not json")
    (root / "live").mkdir()  # what the runner writes while a run goes on
    (root / "live" / "results.json").write_text(
        json.dumps(
            {
                "experiment": "x",
                "title": "",
                "status": "running",
                "passed": False,
                "claims": [],
                "started_utc": "2026-01-02T03:04:05Z",
                "pid": 1,
                "note": "",
            }
        )
    )
    assert records.MAX_DEPTH == 4
    with lock_run_dir(sweep):  # the sweep's process still runs
        code, out, err = _ls(capsys, root, "--json")
    got = {e["path"]: e for e in json.loads(out)}
    assert code == 0 and sorted(got) == sorted(
        map(str, [root / "a", root / "bad", deep, root / "live", sweep])
    )
    assert got[str(root / "bad")]["status"] == "unreadable"
    assert "not readable JSON" in got[str(root / "bad")]["error"]
    live = got[str(root / "live")]
    assert (live["status"], live["verdict"], live["started_utc"]) == (
        "running",
        None,
        "2026-01-02T03:04:05Z",
    )
    # an unfinished sweep is listed (it was not: nothing showed there was work to resume)
    assert (got[str(sweep)]["kind"], got[str(sweep)]["status"]) == ("sweep", "running")
    # "running" records whose lock no process holds (killed, say) read "stopped"
    (root / "live" / ".lock").write_text("")
    code, out, err = _ls(capsys, root, "--json")
    got = {e["path"]: e for e in json.loads(out)}
    assert got[str(root / "live")]["status"] == got[str(sweep)]["status"] == "stopped"
    (root / "live" / ".lock").unlink()  # a shared folder's FIFO or link: not asked, no wait
    os.mkfifo(root / "live" / ".lock")
    (sweep / ".lock").unlink()
    (sweep / ".lock").symlink_to(root / "a" / "results.json")
    code, out, err = _ls(capsys, root, "--json")
    got = {e["path"]: e for e in json.loads(out)}
    assert got[str(root / "live")]["status"] == got[str(sweep)]["status"] == "running"
    assert os.path.islink(root / "link")

    code, out, err = _ls(capsys, tmp_path / "nowhere")
    assert (code, out) == (
        2,
        "",
    ) and err == f"dedebate: error: {tmp_path / 'nowhere'}: no such directory\n"
    code, _, err = _ls(capsys, root / "a" / "results.json")
    assert code == 2 and err.endswith("results.json: not a directory\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _ls(capsys, empty) == (0, "", f"no run, sweep or reproduce directories under {empty}\n")


def test_a_sweep_is_one_record_and_its_table_the_metrics(tmp_path, capsys):
    reg = discover_experiments([SWEEPABLE, "tests.fake_experiments"])
    cfg = config(reg, tmp_path, {"seeds": 2, "plots": False, "axes": {"p": [0.2, 0.9]}})
    sweep_dir = run_sweep(reg.experiments["fake_sweep"], cfg, show_progress=False).sweep_dir
    code, out, _ = _ls(capsys, tmp_path / "runs", "--json")
    (entry,) = json.loads(out)
    assert code == 0 and (
        entry["kind"],
        entry["name"],
        entry["status"],
        entry["verdict"],
        entry["claims_total"],
    ) == ("sweep", "fake_sweep", "ok", None, None)
    rows = records.metrics(sweep_dir)
    assert records.claims(sweep_dir) == []
    assert [(r["point"], r["seed"], r["p"]) for r in rows] == [
        (0, 3, 0.2),
        (0, 4, 0.2),
        (1, 3, 0.9),
        (1, 4, 0.9),
    ]
    per_point = _read(sweep_dir / "results.json")["per_point"]
    for pt in per_point:  # the table's rows average to the sweep's own per-point means
        rates = [r["rate"] for r in rows if r["point"] == pt["point"]]
        assert sum(rates) / len(rates) == pytest.approx(pt["rate"]["mean"], rel=1e-12)


def test_ls_before_any_run_lists_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no runs/ yet: nothing to list, not an error
    assert cli.main(["ls"]) == 0
    assert "no run, sweep or reproduce directories under runs" in capsys.readouterr().err
    assert cli.main(["ls", "runs"]) == 2  # a folder named on the command line must exist


def test_an_older_report_counts_its_findings_and_verdicts_from_its_rows():
    """A report written before findings were counted: ``findings_total`` and ``findings_met``
    from its rows (claims left out), each experiment's verdict from its ``passed``; a report
    that has the counts keeps them, and a claim row gets the defaults of fields it lacks."""
    rows = [
        {"claim": "a", "passed": True},
        {"claim": "b", "passed": False},
        {"claim": "f1", "passed": True, "finding": True},
        {"claim": "f2", "passed": False, "finding": True},
        {"claim": "f3", "passed": True, "finding": True},
    ]
    old = {
        "schema_version": 1,
        "experiments": [
            {"name": "x", "passed": False, "claims": rows[:3]},
            {"name": "y", "passed": True, "claims": rows[3:]},
        ],
    }
    new = records.upgrade(old, "reproduce")
    assert (new["findings_total"], new["findings_met"]) == (3, 2)
    assert [e["verdict"] for e in new["experiments"]] == ["FAIL", "PASS"]
    assert [e["measurement_only"] for e in new["experiments"]] == [False, False]
    assert new["experiments"][0]["claims"][0]["finding"] is False
    assert new["experiments"][0]["claims"][0]["p_value"] is None
    assert "findings_total" not in old and "verdict" not in old["experiments"][0]  # not modified
    kept = records.upgrade({**old, "findings_total": 7, "findings_met": 5}, "reproduce")
    assert (kept["findings_total"], kept["findings_met"]) == (7, 5)
