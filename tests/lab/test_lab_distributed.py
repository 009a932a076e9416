"""Multi-process sweeps on jax.distributed: 2 processes on 127.0.0.1 (gloo CPU collectives, 2
fake devices each) give exactly the single-process table; the launcher environment is parsed
with clear errors."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import pytest

from dedebate.lab.distributed import DistributedError, ProcessEnv, process_env
from tests.conftest import REPO
from tests.lab.test_lab_devices import baseline, sweep_env, write_config


def test_process_env_from_launcher_variables():
    assert process_env(environ={}) == ProcessEnv()
    env = {
        "JAX_COORDINATOR_ADDRESS": "127.0.0.1:1234",
        "JAX_NUM_PROCESSES": "3",
        "JAX_PROCESS_ID": "2",
    }
    assert process_env(environ=env) == ProcessEnv("env", 3, 2, "127.0.0.1:1234")
    assert (
        process_env(environ={**env, "JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "0"})
        == ProcessEnv()
    )
    slurm = {"SLURM_NTASKS": "4", "SLURM_PROCID": "1", "SLURM_JOB_ID": "7"}
    assert process_env(environ=slurm) == ProcessEnv()  # only with --distributed
    assert process_env(True, environ=slurm) == ProcessEnv("slurm", 4, 1, None)
    with pytest.raises(
        DistributedError, match=r"JAX_PROCESS_ID='3': must be an integer in \[0, 3\)"
    ):
        process_env(environ={**env, "JAX_PROCESS_ID": "3"})
    for count in ("0", "-1", "two", "1_0", "²"):  # int() reads 1_0 as 10
        with pytest.raises(DistributedError, match=f"JAX_NUM_PROCESSES='{count}': must be an "):
            process_env(environ={**env, "JAX_NUM_PROCESSES": count})
    for pid in ("-1", "", "+1", "1.0"):
        with pytest.raises(
            DistributedError, match=re.escape(f"JAX_PROCESS_ID='{pid}': must be an integer")
        ):
            process_env(environ={**env, "JAX_PROCESS_ID": pid})
    with pytest.raises(DistributedError, match="JAX_PROCESS_ID=None: must be an integer"):
        process_env(environ={"JAX_NUM_PROCESSES": "2"})
    with pytest.raises(DistributedError, match="JAX_COORDINATOR_ADDRESS is not set"):
        process_env(environ={"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"})
    with pytest.raises(DistributedError, match="--distributed needs"):
        process_env(True, environ={})


def _sweep_on_two_processes(tmp_path, *overrides):
    """``dedebate sweep CONFIG OVERRIDES --processes 2`` (2 fake devices each)."""
    argv = ["sweep", "--no-progress", str(write_config(tmp_path)), *overrides, "--processes", "2"]
    return subprocess.run(
        [sys.executable, "-m", "dedebate.cli", *argv],
        env=sweep_env(2),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_two_processes_equal_one(tmp_path):
    table, _ = baseline(str(tmp_path.parent / "device-baseline"))
    p = _sweep_on_two_processes(tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1 compilation(s), 4 device(s), 2 process(es)" in p.stdout
    (d,) = (tmp_path / "runs").glob("fake_sweep-sweep-*")
    res = json.loads((d / "results.json").read_text())
    assert res["processes"] == 2 and res["devices"] == 4
    assert (d / "sweep.csv").read_text() == table
    # each process wrote the rows its own devices computed: together, every row exactly once
    shards = sorted((d / "shards").glob("group-000-process-*.csv"))
    assert [s.name for s in shards] == ["group-000-process-0.csv", "group-000-process-1.csv"]
    parts = [list(csv.DictReader(s.read_text().splitlines())) for s in shards]
    assert all(parts)
    keys = sorted((r["point"], r["seed"]) for part in parts for r in part)
    rows = list(csv.DictReader(table.splitlines()))
    assert keys == sorted((r["point"], r["seed"]) for r in rows)
    # resume=true resumes that sweep on two processes too (it started a new one); one stopped
    # before its results.json (a finished one is not run again)
    (d / "results.json").unlink()
    again = _sweep_on_two_processes(tmp_path, "resume=true")
    assert again.returncode == 0, again.stderr
    assert [*(tmp_path / "runs").glob("fake_sweep-sweep-*")] == [d]
    assert "(1 resumed)" in again.stdout and (d / "sweep.csv").read_text() == table
