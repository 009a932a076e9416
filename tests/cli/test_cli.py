"""The real command line in a subprocess: exit codes, one-line errors, JSON from bench.

Each test starts one ``python -m dedebate.cli`` process per command whose process-level behaviour
it checks (exit status, the whole of stderr); its other error lines come from ``cli.main``
in-process (the same parser and messages, without another JAX import).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dedebate import cli
from tests.conftest import REPO


def dedebate(env, *args, cwd=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "dedebate.cli", *args],
        env=env,
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _in_process(env, monkeypatch, capsys, *args):
    """``cli.main(args)`` under ``env``'s experiment and bench packages: (code, stdout, stderr)."""
    for name in ("DEDEBATE_EXPERIMENTS", "DEDEBATE_BENCH"):
        monkeypatch.setenv(name, env[name])
    capsys.readouterr()
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_bad_override_exit_2_one_line(cli_env, tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("experiment: fake_pass\nparams: {n: 4}\n")
    p = dedebate(cli_env, "run", str(cfg), "params.n=-3")
    assert p.returncode == 2
    assert p.stderr.strip() == "dedebate: error: config error: params.n=-3: must be >= 1"
    code, _, err = _in_process(cli_env, monkeypatch, capsys, "run", str(cfg), "oops")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "malformed override 'oops'" in err and "Traceback" not in err
    code, _, err = _in_process(cli_env, monkeypatch, capsys, "nonsense")
    assert code == 2 and "invalid choice: 'nonsense'" in err


def test_reproduce_subprocess_exit_codes(cli_env, tmp_path):
    p = dedebate(
        cli_env,
        "reproduce",
        "--quick",
        "--tracking",
        "offline",
        "--output-dir",
        str(tmp_path / "a"),
    )
    assert p.returncode == 1, p.stderr
    (rep,) = (tmp_path / "a").glob("reproduce-*")
    assert "| FAIL |" in (rep / "report.md").read_text()
    assert "reproduce:" in p.stderr  # the outer progress bar over experiments
    # the reproduce job and each experiment are offline W&B runs inside the report directory
    assert list((rep / "wandb").glob("offline-run-*"))
    assert list((rep / "fake_pass" / "wandb").glob("offline-run-*"))


def test_bench(cli_env, tmp_path, monkeypatch, capsys):
    # name, tab, the first line of the docstring
    code, out, _ = _in_process(cli_env, monkeypatch, capsys, "bench", "--list")
    assert code == 0 and out.splitlines() == [
        "tiny\tA fake benchmark: returns numbers that depend on ``full`` so the test can tell "
        "them apart."
    ]
    code, _, err = _in_process(cli_env, monkeypatch, capsys, "bench", "nope")
    assert code == 2
    assert err.strip() == "dedebate: error: unknown benchmark 'nope'; available: tiny"
    out = tmp_path / "b.json"
    p = dedebate(cli_env, "bench", "tiny", "--full", "--out", str(out))
    assert p.returncode == 0, p.stderr
    expect = {"name": "tiny", "full": True, "n": 1000, "sum": 499500}
    got = json.loads(p.stdout)
    assert got == json.loads(out.read_text())
    env = got.pop("environment")  # where, when and under what load it ran
    assert got == expect and env["dedebate_version"] and env["started"].endswith("Z")
    assert len(env["load_avg_before"]) == len(env["load_avg_after"]) == 3


def test_a_benchmarks_non_finite_number_is_null_and_exit_1(cli_env, monkeypatch, capsys):
    """A NaN or infinity in a benchmark's result is not a figure: printed as null (valid JSON),
    its paths listed, exit 1 (it printed NaN, which is not JSON, and exited 0)."""
    import tests.fake_experiments.fakebench.tiny as tiny

    monkeypatch.setattr(tiny, "run", lambda full: {"ratio": float("nan"), "r": [1.0, -math.inf]})
    code, out, err = _in_process(cli_env, monkeypatch, capsys, "bench", "tiny")
    got = json.loads(out, parse_constant=pytest.fail)  # strict JSON: no NaN, no Infinity
    assert code == 1 and (got["ratio"], got["r"]) == (None, [1.0, None])
    assert got["non_finite"] == [".ratio", ".r[1]"]
    assert err.strip() == "dedebate: tiny: non-finite numbers at .ratio, .r[1]"


def test_a_benchmark_whose_checks_failed_exits_1(cli_env, monkeypatch, capsys):
    """A benchmark that computed something wrong (its ``failed_checks``) exits 1 with one line:
    the stochastic bench printed its ratio and "goal met" for wrong acceptances, exit 0."""
    import tests.fake_experiments.fakebench.tiny as tiny

    monkeypatch.setattr(tiny, "run", lambda full: {"ratio": 7.9, "failed_checks": ["agrees"]})
    code, out, err = _in_process(cli_env, monkeypatch, capsys, "bench", "tiny")
    assert code == 1 and json.loads(out)["ratio"] == 7.9
    assert err.strip() == "dedebate: tiny: checks failed: agrees"
    monkeypatch.setattr(tiny, "run", lambda full: {"ratio": 7.9, "failed_checks": []})
    assert _in_process(cli_env, monkeypatch, capsys, "bench", "tiny")[0] == 0


def test_console_script_installed(cli_env):
    exe = Path(sys.executable).parent / "dedebate"
    exe = str(exe) if exe.exists() else shutil.which("dedebate")
    assert exe, "the dedebate console script is not installed (pip install -e .)"
    p = subprocess.run(
        [exe, "list"],
        env=cli_env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert [line.split("\t")[0] for line in p.stdout.splitlines()] == [
        "fake_fail",
        "fake_pass",
        "fake_raise",
    ]
    env = {k: v for k, v in cli_env.items() if k != "DEDEBATE_EXPERIMENTS"}
    env["DEDEBATE_BENCH"] = "bench"
    p = subprocess.run(
        [exe, "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.expanduser("~"),
        check=False,
    )
    assert p.returncode == 0 and p.stdout.strip() == __import__("dedebate").__version__


def test_the_run_summary_prints_a_finding_row_with_a_p_value():
    """A finding (or any row outside the family) has a p-value but no family level: the run's
    summary prints it alone (it raised KeyError after the run had finished)."""
    from dedebate.cli.run import _p_text

    assert _p_text({"p_value": 0.25, "finding": True}) == "; p=0.25"
    assert (
        _p_text({"p_value": 0.25, "family_level": 0.01, "family_size": 5})
        == "; p=0.25 vs level 0.01 (family of 5)"
    )
    assert _p_text({"p_value": None}) == ""


def test_the_run_summary_counts_claims_not_findings(tmp_path, capsys):
    """Two claims (one fails) and two findings (one criterion met): each row's verdict, and the
    count of passing claims over claims alone, the findings left out of both."""
    from types import SimpleNamespace

    from dedebate.cli.run import _print_run_summary
    from dedebate.lab.claims import Claim

    claims = [
        Claim.exact("proven", "thm 1", ">= 0.5", 0.7, True),
        Claim.exact("broken", "thm 2", ">= 0.5", 0.2, False),
        Claim.exact("met", "issue", "== 1", 1.0, True, finding=True),
        Claim.exact("unmet", "issue", "== 1", 0.0, False, finding=True),
    ]
    rec = SimpleNamespace(
        run_dir=tmp_path,
        result=SimpleNamespace(claims=claims),
        results={"claims": [c.to_dict() for c in claims]},
        passed=False,
    )
    _print_run_summary(rec)
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split("  ")[1] for ln in lines[1:5]] == [
        "PASS",
        "FAIL",
        "FINDING, criterion met",
        "FINDING, criterion not met",
    ]
    assert lines[5] == "FAIL: 1/2 claims pass"


def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly(cli_env):
    """`dedebate list | head -0`: the write fails with EPIPE; the command ends with 141 (a
    shell's code for SIGPIPE) and no traceback, also not when Python flushes stdout at exit."""
    import subprocess
    import sys

    p = subprocess.Popen(
        [sys.executable, "-m", "dedebate.cli", "list"],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    p.stdout.close()  # before the command writes: its first write fails
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and err == "", err
