"""Faults: a run killed with SIGKILL mid-way, whose newest checkpoint is then corrupted, resumes
with ``dedebate run --resume RUN_DIR`` from the previous checkpoint (with a warning) and ends
with exactly the numbers of an uninterrupted run, and with its metrics.jsonl: the steps logged
before the kill and logged again after the resume appear once (dedebate/lab/runner.py).

Recovery converges for every kind of damage to the newest checkpoint (truncated arrays, garbage
metadata, a missing directory, a save cut short): the unreadable step is moved aside, the resume
ends bit-equal to an uninterrupted run, and resuming again changes nothing on disk. The fakes
train through the same driver (dedebate/lab/driver.py) and Orbax checkpointer as the training
experiments."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from dedebate import cli
from dedebate.lab.rundir import read_config
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
def test_sigkill_then_corrupt_latest_then_resume_equals_uninterrupted(
    tmp_path, fake_env, cli_env, capsys
):
    cfg = tmp_path / "walk.yaml"
    cfg.write_text(
        f"experiment: fake_walk\noutput_dir: {tmp_path / 'runs'}\ntracking: {{mode: disabled}}\n"
    )
    env = {**cli_env, "DEDEBATE_EXPERIMENTS": RESUMABLE, "FAKE_STEP_SLEEP": "0.5"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dedebate.cli", "run", "--no-progress", str(cfg)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
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
    logged_before = [
        json.loads(x)["step"]
        for x in (run_dir / "metrics.jsonl").read_text().splitlines()
        if x.endswith("}")
    ]
    assert 3 <= len(steps) <= 3 + 1 and steps[-1] < 16  # keep=3 (+1 being finalised)
    truncate_arrays(run_dir / "checkpoints" / str(steps[-1]))

    fake_env.setenv("DEDEBATE_EXPERIMENTS", RESUMABLE)
    capsys.readouterr()
    assert cli.main(["run", "--no-progress", "--resume", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert f"checkpoint step {steps[-1]}" in err and f"falling back to step {steps[-2]}" in err
    resumed = json.loads((run_dir / "results.json").read_text())
    assert resumed["metrics"]["resumed_from"] == steps[-2]  # checkpoint step = chunks done
    assert resumed["provenance"]["resumed"] is True
    # the first attempt's start is kept, this one's is resumed_utc (it kept only the last's)
    assert resumed["provenance"]["started_utc"] == record["started_utc"]
    assert resumed["provenance"]["resumed_utc"] >= record["started_utc"]
    # --resume is the command's: config.yaml still says resume: false, so running it again
    # starts a new run (with true it printed this finished run's claims)
    assert read_config(run_dir / "config.yaml")["resume"] is False

    assert cli.main(["run", "--no-progress", str(cfg), f"output_dir={tmp_path / 'fresh'}"]) == 0
    (fresh_dir,) = (tmp_path / "fresh").glob("fake_walk-*")
    fresh = json.loads((fresh_dir / "results.json").read_text())
    assert fresh["metrics"]["resumed_from"] == 0
    assert resumed["metrics"]["path"] == fresh["metrics"]["path"]  # every step, bit for bit
    assert resumed["metrics"]["total"] == fresh["metrics"]["total"]
    assert resumed["provenance"]["config_hash"] == fresh["provenance"]["config_hash"]

    # metrics.jsonl: the row of the chunk in checkpoint steps[-1] (and any later row logged
    # before the kill) was logged by both attempts; the file holds every step once, with the
    # uninterrupted run's values
    assert steps[-1] - 1 in logged_before
    assert (run_dir / "checkpoints" / f"corrupt-{steps[-1]}").is_dir()

    def rows(d):
        return [
            {k: v for k, v in json.loads(x).items() if k != "wall_s"}
            for x in (d / "metrics.jsonl").read_text().splitlines()
        ]

    assert [r["step"] for r in rows(run_dir)] == list(range(16))
    assert rows(run_dir) == rows(fresh_dir)


# -- every kind of damage to the newest checkpoint, in process ---------------------------------


def _half_written(step_dir):
    """What a kill during an (atomic) Orbax save leaves: the step's temporary directory."""
    step_dir.rename(step_dir.with_name(f"{step_dir.name}.orbax-checkpoint-tmp-1700000000"))


DAMAGE = {
    "truncated-file": truncate_arrays,
    "garbage-metadata": lambda d: (d / "meta" / "metadata").write_text("{not json"),
    "missing-directory": lambda d: shutil.rmtree(d / "state"),
    "half-written": _half_written,
}


def _on_disk(run_dir):
    """metrics.jsonl and every file under checkpoints/, with their bytes."""
    ck = run_dir / "checkpoints"
    files = {str(p.relative_to(ck)): p.read_bytes() for p in sorted(ck.rglob("*")) if p.is_file()}
    return (run_dir / "metrics.jsonl").read_bytes(), files


def _rows(run_dir):
    return [
        {k: v for k, v in json.loads(x).items() if k != "wall_s"}
        for x in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]


@pytest.fixture(scope="module")
def fake_ckpt():
    from dedebate.lab.registry import discover_experiments

    return discover_experiments([RESUMABLE]).experiments["fake_ckpt"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, fake_ckpt):
    return _run(fake_ckpt, tmp_path_factory.mktemp("fresh"))


def _run(module, out, run_dir=None, resume=False, tracking="disabled"):
    from dedebate.lab.config import resolve
    from dedebate.lab.runner import run_experiment

    cfg = resolve(
        {
            "experiment": module.NAME,
            "output_dir": str(out),
            "resume": resume,
            "tracking": {"mode": tracking},
        },
        {module.NAME: module},
    )
    return run_experiment(module, cfg, run_dir=run_dir, show_progress=False)


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_newest_checkpoint_recovers_and_converges(
    tmp_path, monkeypatch, capsys, fake_ckpt, uninterrupted, damage
):
    monkeypatch.setenv("FAKE_CRASH_AT", "3")
    crashed = _run(fake_ckpt, tmp_path)
    monkeypatch.delenv("FAKE_CRASH_AT")
    assert crashed.error == "RuntimeError: crash after step 3"
    assert finished_steps(crashed.run_dir) == [3, 4]  # chunks done; keep=2
    DAMAGE[damage](crashed.run_dir / "checkpoints" / "4")
    capsys.readouterr()

    again = _run(fake_ckpt, tmp_path, crashed.run_dir, resume=True)
    assert again.error is None and again.result.metrics["resumed_from"] == 3
    assert again.result.metrics["total"] == uninterrupted.result.metrics["total"]
    assert again.results["claims"] == uninterrupted.results["claims"]
    assert _rows(crashed.run_dir) == _rows(uninterrupted.run_dir)
    names = sorted(p.name for p in (crashed.run_dir / "checkpoints").iterdir())
    assert names == ["5", "6"] + (["corrupt-4"] if damage != "half-written" else [])
    err = capsys.readouterr().err
    assert "dedebate: fake_ckpt walk: resumed from a checkpoint, 3/6 chunks" in err  # it says so
    if damage != "half-written":  # a save cut short is not a step: nothing to warn about
        assert "moved aside" in err

    before = _on_disk(crashed.run_dir)  # a second resume finds the run finished: a no-op
    third = _run(fake_ckpt, tmp_path, crashed.run_dir, resume=True)
    assert third.reused and third.error is None and third.results == again.results
    assert third.result.metrics["total"] == again.result.metrics["total"]
    assert _on_disk(crashed.run_dir) == before


def test_a_failed_resume_keeps_the_finished_results(tmp_path, fake_ckpt, monkeypatch):
    done = _run(fake_ckpt, tmp_path)
    # a finished run that lost a file it lists is run again (a complete one is not run at all)
    record = json.loads((done.run_dir / "results.json").read_text())
    (done.run_dir / "results.json").write_text(json.dumps({**record, "plots": ["plots/x.png"]}))
    good = (done.run_dir / "results.json").read_bytes()

    def broken(cfg, key):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(fake_ckpt, "chunks", broken)
    failed = _run(fake_ckpt, tmp_path, done.run_dir, resume=True)
    assert failed.error == "RuntimeError: disk on fire"
    assert (done.run_dir / "results.json").read_bytes() == good
    record = json.loads((done.run_dir / "results.failed.json").read_text())
    assert record["status"] == "error" and record["error"] == failed.error
    assert "disk on fire" in (done.run_dir / "error.txt").read_text()
    # the next attempt that finishes removes the failed one's records: they no longer apply
    monkeypatch.undo()
    fixed = _run(fake_ckpt, tmp_path, done.run_dir, resume=True)
    assert fixed.error is None and json.loads(good)["status"] == "ok"
    assert not (done.run_dir / "error.txt").exists()
    assert not (done.run_dir / "results.failed.json").exists()


def test_ctrl_c_names_the_folder_to_resume(tmp_path, fake_ckpt, monkeypatch, capsys):
    def interrupted(cfg, key):
        raise KeyboardInterrupt

    monkeypatch.setattr(fake_ckpt, "chunks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(fake_ckpt, tmp_path)
    (run_dir,) = tmp_path.glob("fake_ckpt-*")
    assert f"resume the run with: dedebate run --resume {run_dir}" in capsys.readouterr().err


def test_each_checkpoint_follows_its_metrics_rows_on_disk(tmp_path, fake_ckpt, monkeypatch):
    """Before every save, metrics.jsonl is fsynced: a checkpoint never covers rows that a power
    cut can take back (a resume cuts rows only from the checkpoint on, so lost earlier rows
    stayed lost; the durability audit)."""
    from dedebate.lab import context
    from dedebate.lab.checkpoint import Checkpointer

    events = []
    real_fsync, real_save = context.os.fsync, Checkpointer.save

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def save(self, step, state, **kw):
        events.append(("save", step, len((self.directory.parent / "metrics.jsonl").read_text())))
        return real_save(self, step, state, **kw)

    monkeypatch.setattr(context.os, "fsync", fsync)
    monkeypatch.setattr(Checkpointer, "save", save)
    done = _run(fake_ckpt, tmp_path)
    metrics = str(done.run_dir / "metrics.jsonl")
    saves = [i for i, e in enumerate(events) if e[0] == "save"]
    assert len(saves) == 6 and all(n > 0 for _, _, n in (events[i] for i in saves))
    assert all(events[i + 1] == ("fsync", metrics) for i in saves)  # inside save, before Orbax's
