"""A resumed run's W&B run: each row once (none sent again that the run already holds), a summary
that agrees with results.json, and non-finite values as numbers."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from dedebate.lab.registry import discover_experiments
from dedebate.lab.tracking import Tracker
from tests.lab.test_lab_resume import RESUMABLE
from tests.lab.test_lab_resume import _run as run_resume_test


@pytest.fixture
def fake_ckpt():
    return discover_experiments([RESUMABLE]).experiments["fake_ckpt"]


def _run(module, out, run_dir=None, resume=False):
    return run_resume_test(module, out, run_dir, resume, tracking="offline")


def _steps(run):
    return [row["step"] for row in run.logged]


def test_a_resumed_run_sends_each_row_to_wandb_once(
    tmp_path,
    fake_ckpt,
    fake_wandb,
    monkeypatch,
):
    monkeypatch.setenv("FAKE_CRASH_AT", "3")
    crashed = _run(fake_ckpt, tmp_path)
    assert crashed.error == "RuntimeError: crash after step 3"
    first = fake_wandb.runs[-1]
    assert _steps(first) == [0, 1, 2, 3] and first.summary["passed"] is False
    # the failed attempt's record and traceback reach W&B too (no artifact was logged)
    (art,) = first.artifacts
    assert art.files == ["results.json", "error.txt", "config.yaml"] and first.exit_code == 1
    ckpts = crashed.run_dir / "checkpoints"
    newest = max(int(p.name) for p in ckpts.iterdir() if p.name.isdigit())
    shutil.rmtree(ckpts / str(newest))  # chunk 3 is computed again
    monkeypatch.delenv("FAKE_CRASH_AT")
    again = _run(fake_ckpt, tmp_path, crashed.run_dir, resume=True)
    second = fake_wandb.runs[-1]
    assert again.error is None and second.kwargs["id"] == first.id  # the same W&B run, continued
    assert second.kwargs["config"]["resume"] is False  # as config.yaml says (it said true)
    rows = [json.loads(x) for x in (crashed.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(6))
    assert _steps(second) == [4, 5]  # was [3, 4, 5]: step 3 twice in the W&B run
    assert second.summary["passed"] is True and second.summary["error"] == ""  # was the crash's
    # a finished run whose resume fails keeps its record, and its W&B run stays passed
    record = json.loads((crashed.run_dir / "results.json").read_text())
    lost = {**record, "plots": ["plots/gone.png"]}  # a file it lists is lost: it runs again
    (crashed.run_dir / "results.json").write_text(json.dumps(lost))
    monkeypatch.setattr(fake_ckpt, "chunks", lambda cfg, key: 1 / 0)
    failed = _run(fake_ckpt, tmp_path, crashed.run_dir, resume=True)
    third = fake_wandb.runs[-1]
    assert failed.error.startswith("ZeroDivisionError") and _steps(third) == []
    assert "passed" not in third.summary and third.summary["error"] == failed.error


def test_non_finite_values_reach_wandb_as_numbers(tmp_path, fake_wandb):
    tracker = Tracker.start(
        mode="offline", run_dir=tmp_path, project="p", job_type="j", name="n", config={}
    )
    tracker.log({"loss": float("nan"), "grad": {"norm": float("inf")}, "ok": 1.5}, step=0)
    (row,) = fake_wandb.runs[-1].logged
    assert math.isnan(row["loss"]) and row["grad/norm"] == math.inf and row["ok"] == 1.5
