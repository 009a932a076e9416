"""The real command line in a subprocess: exit codes, one-line errors, JSON from bench."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def dedebate(env, *args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "dedebate.cli", *args], env=env, cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_bad_override_exit_2_one_line(cli_env, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("experiment: fake_pass\nparams: {n: 4}\n")
    p = dedebate(cli_env, "run", str(cfg), "params.n=-3")
    assert p.returncode == 2
    assert p.stderr.strip() == "dedebate: error: config error: params.n=-3: must be >= 1"
    p = dedebate(cli_env, "run", str(cfg), "oops")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "malformed override 'oops'" in p.stderr and "Traceback" not in p.stderr
    p = dedebate(cli_env, "nonsense")
    assert p.returncode == 2 and "invalid choice: 'nonsense'" in p.stderr


def test_reproduce_subprocess_exit_codes(cli_env, tmp_path):
    p = dedebate(cli_env, "reproduce", "--quick", "--tracking", "offline", "--output-dir",
                 str(tmp_path / "a"))
    assert p.returncode == 1, p.stderr
    (rep,) = (tmp_path / "a").glob("reproduce-*")
    assert "| FAIL |" in (rep / "report.md").read_text()
    assert "reproduce:" in p.stderr  # the outer progress bar over experiments
    # the reproduce job and each experiment are offline W&B runs inside the report directory
    assert list((rep / "wandb").glob("offline-run-*"))
    assert list((rep / "fake_pass" / "wandb").glob("offline-run-*"))


def test_bench(cli_env, tmp_path):
    p = dedebate(cli_env, "bench", "--list")  # name, tab, the first line of the docstring
    assert p.returncode == 0 and p.stdout.splitlines() == [
        "tiny\tA fake benchmark: returns numbers that depend on ``full`` so the test can tell "
        "them apart."]
    p = dedebate(cli_env, "bench", "nope")
    assert p.returncode == 2
    assert p.stderr.strip() == "dedebate: error: unknown benchmark 'nope'; available: tiny"
    out = tmp_path / "b.json"
    p = dedebate(cli_env, "bench", "tiny", "--full", "--out", str(out))
    assert p.returncode == 0, p.stderr
    expect = {"name": "tiny", "full": True, "n": 1000, "sum": 499500}
    assert json.loads(p.stdout) == expect == json.loads(out.read_text())


def test_console_script_installed(cli_env):
    exe = Path(sys.executable).parent / "dedebate"
    exe = str(exe) if exe.exists() else shutil.which("dedebate")
    assert exe, "the dedebate console script is not installed (pip install -e .)"
    p = subprocess.run([exe, "list"], env=cli_env, cwd=REPO, capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert [line.split("\t")[0] for line in p.stdout.splitlines()] == [
        "fake_fail", "fake_pass", "fake_raise"]
    env = {k: v for k, v in cli_env.items() if k != "DEDEBATE_EXPERIMENTS"}
    env["DEDEBATE_BENCH"] = "bench"
    p = subprocess.run([exe, "--version"], env=env, capture_output=True, text=True, timeout=60,
                       cwd=os.path.expanduser("~"), check=False)
    assert p.returncode == 0 and p.stdout.strip() == __import__("dedebate").__version__
