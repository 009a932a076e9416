"""Faults: a run killed with SIGKILL mid-way, whose newest checkpoint is then corrupted, resumes
with ``dedebate run --resume RUN_DIR`` from the previous checkpoint (with a warning) and ends
with exactly the numbers of an uninterrupted run, and with its metrics.jsonl: the steps logged
before the kill and logged again after the resume appear once (dedebate/lab/runner.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dedebate import cli
from tests.conftest import REPO

RESUMABLE = "tests.fake_experiments.resumable"


def finished_steps(run_dir):
    d = run_dir / "checkpoints"
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def truncate_arrays(step_dir):
    files = [f for f in (step_dir / "state").rglob("*") if f.is_file() and f.parent.name == "d"]
    assert files
    for f in files:
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])


@pytest.mark.slow
def test_sigkill_then_corrupt_latest_then_resume_equals_uninterrupted(tmp_path, fake_env,
                                                                      cli_env, capsys):
    cfg = tmp_path / "walk.yaml"
    cfg.write_text(f"experiment: fake_walk\noutput_dir: {tmp_path / 'runs'}\n"
                   "tracking: {mode: disabled}\n")
    env = {**cli_env, "DEDEBATE_EXPERIMENTS": RESUMABLE, "FAKE_STEP_SLEEP": "0.5"}
    proc = subprocess.Popen([sys.executable, "-m", "dedebate.cli", "run", "--no-progress",
                             str(cfg)], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    run_dir = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            dirs = list((tmp_path / "runs").glob("fake_walk-*"))
            if dirs and len(finished_steps(dirs[0])) >= 3:
                run_dir = dirs[0]
                break
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert run_dir is not None, proc.stderr.read().decode()[-2000:]
    assert proc.returncode == -signal.SIGKILL
    # it really died mid-run: its record still says "running", by the process that was killed
    record = json.loads((run_dir / "results.json").read_text())
    assert record["status"] == "running" and record["pid"] == proc.pid
    steps = finished_steps(run_dir)
    logged_before = [json.loads(x)["step"] for x in
                     (run_dir / "metrics.jsonl").read_text().splitlines() if x.endswith("}")]
    assert 3 <= len(steps) <= 3 + 1 and steps[-1] < 15  # keep=3 (+1 being finalised)
    truncate_arrays(run_dir / "checkpoints" / str(steps[-1]))

    fake_env.setenv("DEDEBATE_EXPERIMENTS", RESUMABLE)
    capsys.readouterr()
    assert cli.main(["run", "--no-progress", "--resume", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert f"checkpoint step {steps[-1]}" in err and f"falling back to step {steps[-2]}" in err
    resumed = json.loads((run_dir / "results.json").read_text())
    assert resumed["metrics"]["resumed_from"] == steps[-2] + 1
    assert resumed["provenance"]["resumed"] is True

    assert cli.main(["run", "--no-progress", str(cfg), f"output_dir={tmp_path / 'fresh'}"]) == 0
    (fresh_dir,) = (tmp_path / "fresh").glob("fake_walk-*")
    fresh = json.loads((fresh_dir / "results.json").read_text())
    assert fresh["metrics"]["resumed_from"] == 0
    assert resumed["metrics"]["path"] == fresh["metrics"]["path"]  # every step, bit for bit
    assert resumed["metrics"]["total"] == fresh["metrics"]["total"]
    assert resumed["provenance"]["config_hash"] == fresh["provenance"]["config_hash"]

    # metrics.jsonl: steps[-1] (and any later step logged before the kill) was logged by both
    # attempts; the file holds every step once, with the uninterrupted run's values
    assert steps[-1] in logged_before

    def rows(d):
        return [{k: v for k, v in json.loads(x).items() if k != "wall_s"}
                for x in (d / "metrics.jsonl").read_text().splitlines()]

    assert [r["step"] for r in rows(run_dir)] == list(range(16))
    assert rows(run_dir) == rows(fresh_dir)
