"""``bench/accelerator.sh`` on a CPU at small sizes: one JSON with every step's figures, a step past
its timeout recorded as timed out, a spent budget recorded as skipped, no install attempted."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from bench import _accelerator as accel
from tests.conftest import REPO


def test_accelerator_script_on_cpu(cli_env, tmp_path):
    out = tmp_path / "acc.json"
    env = {
        **cli_env,
        "DEDEBATE_BENCH": "tests.fake_experiments.accelbench",
        "DEDEBATE_ACCEL_QUICK": "1",
        "DEDEBATE_ACCEL_INSTALL": "0",
        "DEDEBATE_ACCEL_ONLY": "fake_pass",
        "DEDEBATE_ACCEL_OUT": str(out),
        "DEDEBATE_ACCEL_TIMEOUTS": "bench/sleepy=1.5",
    }
    p = subprocess.run(
        ["bash", "bench/accelerator.sh", "--benches", "fast", "sleepy"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    steps = {s["name"]: s for s in data["steps"]}
    assert list(steps) == [
        "install",
        "doctor",
        "throughput",
        "bench/fast",
        "bench/sleepy",
        "reproduce/fake_pass",
    ]
    assert data["schema"] == accel.SCHEMA and data["complete"] and data["size"] == "quick"
    assert 0 < data["spent_s"] <= data["budget_s"] == accel.BUDGET_S
    # no install on a CPU test run; the devices and versions from dedebate doctor
    assert steps["install"]["status"] == "skipped" and "turned off" in steps["install"]["reason"]
    assert data["device"]["backend"] == "cpu" and data["device"]["devices"]
    assert data["versions"]["jax"] and data["versions"]["dedebate"]
    # the stochastic debate's throughput (quick: T = 16, 256 trials, lazy mode)
    thr = steps["throughput"]
    assert thr["status"] == "ok" and (thr["result"]["T"], thr["result"]["trials"]) == (16, 256)
    rate = data["figures"]["trial_steps_per_s"]["lazy"]
    assert math.isfinite(rate) and rate > 0
    assert abs(thr["result"]["modes"]["lazy"]["acceptance"] - 2 / 3) < 0.15  # P_M(1) = 2/3
    # a benchmark's top-level numbers: finite ratios and rates (nested entries stay in "result")
    fast = data["figures"]["bench"]["fast"]
    assert set(fast) == {"full", "n", "equal", "numpy_per_s", "ratio", "ratio_range"}
    assert math.isfinite(fast["ratio"]) and fast["ratio"] > 0 and fast["n"] == 20_000
    assert fast["ratio"] == steps["bench/fast"]["result"]["ratio"] and not fast["full"]
    # the step past its timeout: recorded, killed, the run went on
    slow = steps["bench/sleepy"]
    assert slow["status"] == "timed_out" and slow["timeout_s"] == 1.5
    assert 1.5 <= slow["wall_s"] < 60 and "result" not in slow
    assert "sleepy" not in data["figures"]["bench"]
    # the reproduce verdict, its claims and wall time
    rep = data["figures"]["reproduce"]["fake_pass"]
    assert rep["verdict"] == "PASS" and rep["claims_passed"] == rep["claims_total"] > 0
    assert math.isfinite(rep["wall_s"]) and rep["wall_s"] >= 0
    assert rep["peak_device_bytes"] is None  # XLA:CPU reports no memory statistics
    assert "accelerator: device 0: cpu" in p.stderr


def test_steps_recorded_at_once_and_budget_spent(tmp_path):
    out = tmp_path / "r.json"
    run = accel.Run(
        out, budget_s=60.0, size="quick", timeouts=accel._timeouts(["x=0.3", "y=60"]), env={}
    )
    assert json.loads(out.read_text())["steps"] == []  # on disk before the first step
    ok = run.step("y", [sys.executable, "-c", "print('[1, 2]')"], parse=json.loads)
    assert ok["status"] == "ok" and ok["result"] == [1, 2]
    assert json.loads(out.read_text())["steps"][0]["result"] == [1, 2]
    bad = run.step("y", [sys.executable, "-c", "import sys; sys.exit(3)"])
    assert (bad["status"], bad["returncode"]) == ("failed", 3)
    # a NaN in a step's output fails that step (it raised from the JSON writer, and the run and
    # every later step were lost)
    nan = run.step("y", [sys.executable, "-c", "print('[1, NaN]')"], parse=json.loads)
    assert nan["status"] == "failed" and "non-finite numbers at [1]" in nan["reason"]
    assert accel._finite_numbers({"a": 1.0, "r_range": [1.0, math.inf], "b": math.nan}) == {
        "a": 1.0
    }
    late = run.step("x", [sys.executable, "-c", "import time; time.sleep(30)"])
    assert late["status"] == "timed_out" and late["timeout_s"] == 0.3 and late["wall_s"] < 20
    run.budget_s = 0.0  # spent: the next step is not started
    skip = run.step("y", [sys.executable, "-c", "raise SystemExit(9)"])
    assert skip["status"] == "skipped" and "budget spent" in skip["reason"]
    saved = json.loads(out.read_text())
    assert [s["status"] for s in saved["steps"]] == [
        "ok",
        "failed",
        "failed",
        "timed_out",
        "skipped",
    ]
    assert not saved["complete"]
    with pytest.raises(SystemExit, match="STEP=SECONDS"):
        accel._timeouts(["bench=-1"])


def test_preinstalled_installs_dedebate_alone_beside_the_jax_there():
    """``--install preinstalled``: the offline path of a machine whose JAX came with it."""
    steps = []

    class Recorder:
        def step(self, name, cmd, parse=None):
            steps.append((name, cmd))

    args = accel._parse_args(["--install", "preinstalled"])
    accel._install(Recorder(), args, "PY")
    assert steps == [
        ("install", ["PY", "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", "."])
    ]
