"""``dedebate reproduce`` on fake experiments: rows, plots, failures recorded, exit codes."""

from __future__ import annotations

import json

from dedebate import cli
from dedebate.lab.experiment import Claim
from dedebate.lab.registry import discover_experiments
from dedebate.lab.report import measured
from tests.fake_experiments import fake_fail, fake_pass


def reproduce(tmp_path, capsys, *args):
    code = cli.main(["reproduce", "--quick", "--tracking", "disabled", "--no-progress",
                     "--output-dir", str(tmp_path), *args])
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
    assert ("| value at least one half | fake theorem 9 | >= 0.5 | 0.25 (exact) | FAIL | "
            "fails \\| by design |") in md
    assert "| value positive | fake theorem 10 | > 0 | 0.25 (exact) | PASS |" in md
    assert "| flips counted | fake lemma 2 | == 32 | 32 (exact) | PASS |" in md
    assert "| experiment did not complete | fake_raise | — | — | FAIL | RuntimeError: boom at " \
           "step 1 |" in md
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
        args = ["reproduce", "--tracking", "disabled", "--no-progress", "--output-dir",
                str(out_dir), "--only", "fake_pass"]
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
    reg = discover_experiments(["tests.fake_experiments", "no_such_package_xyz"],
                               modules=[fake_fail])
    assert reg.names() == ["fake_fail", "fake_pass", "fake_raise"]
    assert "ModuleNotFoundError" in reg.errors["no_such_package_xyz"]


def test_measured_formatting():
    exact = Claim.exact("c", "s", "<= 1", 0.5, True).to_dict()
    assert measured(exact) == "0.5 (exact)"
    sampled = Claim("c", "s", ">= 0", 0.123456, 0.1, 0.15, True).to_dict()
    assert measured(sampled) == "0.1235 [0.1, 0.15]"
