"""The JSON Schemas in dedebate/lab/schemas describe what the lab writes, and reject what it
does not write."""

from __future__ import annotations

import json

import pytest

from dedebate import cli
from dedebate.lab.registry import discover_experiments
from dedebate.lab.schema import validation_errors
from dedebate.lab.sweep import run_sweep
from tests.test_lab_sweep import SWEEPABLE, config


def _read(path):
    return json.loads(path.read_text())


def test_real_reproduce_quick_outputs_match_the_schemas(tmp_path, capsys):
    code = cli.main(["reproduce", "--quick", "--only", "machines", "--tracking", "disabled",
                     "--no-progress", "--output-dir", str(tmp_path)])
    capsys.readouterr()
    assert code == 0
    (rep,) = tmp_path.glob("reproduce-*")
    report = _read(rep / "report.json")
    assert validation_errors(report, "report") == []
    results = _read(rep / "machines" / "results.json")
    assert validation_errors(results, "results") == []
    assert results["claims"] and results["provenance"]["packages"]["jax"]

    # the schemas can fail: a claim without its interval, a verdict that is not a boolean
    del results["claims"][0]["lo"]
    results["passed"] = "yes"
    errors = validation_errors(results, "results")
    assert any("'lo' is a required property" in e for e in errors)
    assert any(e.startswith("passed:") for e in errors)
    report["experiments"][0]["claims"][0]["value"] = "0.7"
    assert validation_errors(report, "report")


def test_fake_run_error_record_and_sweep_match_the_schemas(tmp_path, fake_env, capsys):
    cli.main(["reproduce", "--quick", "--tracking", "disabled", "--no-progress",
              "--output-dir", str(tmp_path / "rep")])
    capsys.readouterr()
    (rep,) = (tmp_path / "rep").glob("reproduce-*")
    assert validation_errors(_read(rep / "report.json"), "report") == []
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
