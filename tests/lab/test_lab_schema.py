"""The JSON Schemas in dedebate/lab/schemas describe what the lab writes, and reject what it
does not write."""

from __future__ import annotations

import json

import pytest

from dedebate import cli
from dedebate.lab.registry import discover_experiments
from dedebate.lab.schema import validation_errors
from dedebate.lab.sweep import run_sweep
from tests.lab.test_lab_sweep import SWEEPABLE, config


def _read(path):
    return json.loads(path.read_text())


def test_schemas_reject_broken_records():
    """Each schema can fail: a claim without its interval, a verdict that is not a boolean, a
    value that is a string (a real run's record is validated in
    tests/experiments/test_ogd_resume.py)."""
    claim = {
        "claim": "c",
        "source": "s",
        "bound": ">= 0.5",
        "value": 0.7,
        "lo": 0.6,
        "hi": 0.8,
        "passed": True,
    }
    results = {
        "experiment": "x",
        "title": "",
        "status": "ok",
        "passed": True,
        "claims": [dict(claim)],
        "metrics": {},
        "tables": {},
        "plots": [],
        "provenance": _PROVENANCE,
    }
    assert validation_errors(results, "results") == []
    del results["claims"][0]["lo"]
    results["passed"] = "yes"
    errors = validation_errors(results, "results")
    assert any("'lo' is a required property" in e for e in errors)
    assert any(e.startswith("passed:") for e in errors)
    report = {
        "schema_version": 1,
        "complete": True,
        "passed": True,
        "claims_total": 1,
        "claims_passed": 1,
        "findings_total": 0,
        "findings_met": 0,
        "wall_time_s": 1.0,
        "provenance": _PROVENANCE,
        "experiments": [{"name": "x", "status": "ok", "passed": True, "claims": [dict(claim)]}],
    }
    assert validation_errors(report, "report") == []
    report["experiments"][0]["claims"][0]["value"] = "0.7"
    assert validation_errors(report, "report")


_PROVENANCE = {
    "dedebate_version": "0",
    "git_commit": None,
    "python_version": "3.11",
    "platform": "p",
    "result_schema_version": 1,
    "jax_version": "0",
    "backend": "cpu",
    "device_count": 1,
}


def test_fake_run_error_record_and_sweep_match_the_schemas(tmp_path, fake_env, capsys):
    cli.main(
        [
            "reproduce",
            "--quick",
            "--tracking",
            "disabled",
            "--no-progress",
            "--output-dir",
            str(tmp_path / "rep"),
        ]
    )
    capsys.readouterr()
    (rep,) = (tmp_path / "rep").glob("reproduce-*")
    assert validation_errors(_read(rep / "report.json"), "report") == []  # reproduce --quick
    for name in ("fake_pass", "fake_fail", "fake_raise"):  # fake_raise: the error record
        assert validation_errors(_read(rep / name / "results.json"), "results") == [], name

    reg = discover_experiments([SWEEPABLE, "tests.fake_experiments"])
    cfg = config(reg, tmp_path, {"seeds": 2, "plots": False, "axes": {"p": [0.2, 0.9]}})
    rec = run_sweep(reg.experiments["fake_sweep"], cfg, show_progress=False)
    sweep = _read(rec.sweep_dir / "results.json")
    assert validation_errors(sweep, "sweep") == []
    sweep["kind"] = "run"
    assert validation_errors(sweep, "sweep")


def test_unknown_kind_is_named():
    with pytest.raises(ValueError, match="kind='x': must be one of"):
        validation_errors({}, "x")
