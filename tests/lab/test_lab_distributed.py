"""Multi-process sweeps on jax.distributed: 2 processes on 127.0.0.1 (gloo CPU collectives, 2
fake devices each) give exactly the single-process table; the launcher environment is parsed
with clear errors."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from dedebate.lab.distributed import (
    DistributedError,
    ProcessEnv,
    free_loopback_port,
    process_env,
)
from tests.conftest import REPO
from tests.lab.test_lab_devices import SWEEPABLE, baseline, sweep_env, write_config


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
    for address in ("nohostport", ":1234", "host:", "host:0", "host:65536", "host:x1"):
        with pytest.raises(
            DistributedError, match=re.escape(f"JAX_COORDINATOR_ADDRESS='{address}': must be host:")
        ):
            process_env(environ={**env, "JAX_COORDINATOR_ADDRESS": address})
    assert process_env(environ={**env, "JAX_COORDINATOR_ADDRESS": "[::1]:80"}).coordinator


def test_process_env_edges_one_process_a_lone_slurm_variable_and_the_last_slurm_id():
    """One launcher process needs no coordinator; ``--distributed`` with half a SLURM step is the
    clear error (not a KeyError); ``SLURM_PROCID`` must be below ``SLURM_NTASKS``."""
    assert process_env(environ={"JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "0"}) == ProcessEnv()
    with pytest.raises(DistributedError, match="--distributed needs"):
        process_env(True, environ={"SLURM_NTASKS": "2"})
    with pytest.raises(
        DistributedError, match=re.escape("SLURM_PROCID='2': must be an integer in [0, ")
    ):
        process_env(True, environ={"SLURM_NTASKS": "2", "SLURM_PROCID": "2"})


def test_a_slurm_process_0_hands_the_coordinator_to_jaxs_slurm_detection(monkeypatch):
    """A SLURM step has no coordinator address of ours to probe: process 0 goes straight to JAX
    (probing it would raise ``ValueError`` on ``int("None")``)."""
    import jax

    from dedebate.lab import distributed

    calls = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: calls.append(kw))
    monkeypatch.setattr(jax.config, "update", lambda *a: None)
    distributed.initialize(ProcessEnv("slurm", 2, 0, None))
    assert [c["cluster_detection_method"] for c in calls] == ["slurm"]


def test_two_processes_meet_at_a_barrier_one_does_not(monkeypatch):
    """With two processes, process 0 must not merge shards before process 1 has written its own."""
    from jax.experimental import multihost_utils

    from dedebate.lab import distributed

    met = []
    monkeypatch.setattr(multihost_utils, "sync_global_devices", met.append)
    for count in (1, 2, 3):
        monkeypatch.setattr(distributed, "process_count", lambda count=count: count)
        distributed.barrier(f"at {count}")
    assert met == ["at 2", "at 3"]


def test_children_import_from_where_the_parent_did_then_the_given_path():
    from dedebate.lab.distributed import child_pythonpath

    parts = child_pythonpath(os.pathsep.join([".", "/zz"])).split(os.pathsep)
    assert parts[-2:] == [".", "/zz"]  # the current folder comes after dedebate's own
    assert str(REPO) in parts[:-2]


def test_local_processes_bind_their_coordinator_to_loopback_only(monkeypatch):
    """JAX binds its coordinator to every interface unless told: each child gets the loopback
    address to bind as well as to reach."""
    from dedebate.lab import distributed

    envs = []

    class Finished:
        def __init__(self, argv, env, stdout):
            envs.append(env)

        def poll(self):
            return 0

    monkeypatch.setattr(distributed.subprocess, "Popen", Finished)
    assert distributed.launch_local(["list"], 2, environ={}) == 0
    assert [e["JAX_PROCESS_ID"] for e in envs] == ["0", "1"]
    for env in envs:
        assert env["JAX_COORDINATOR_BIND_ADDRESS"] == env["JAX_COORDINATOR_ADDRESS"]
        assert env["JAX_COORDINATOR_ADDRESS"].startswith("127.0.0.1:")


def test_a_process_that_finishes_first_leaves_its_peers_running(monkeypatch):
    """Exit 0 is not a failure: process 1, still running when process 0 has finished, is waited
    for, not terminated."""
    from dedebate.lab import distributed

    stopped = []

    class Slow:
        def __init__(self, argv, env, stdout):
            self.polls = 3 * int(env["JAX_PROCESS_ID"])  # process 1 runs for three polls

        def poll(self):
            self.polls -= 1
            return None if self.polls >= 0 else 0

        def terminate(self):
            stopped.append(self)

    monkeypatch.setattr(distributed.subprocess, "Popen", Slow)
    monkeypatch.setattr(distributed.time, "sleep", lambda s: None)
    assert distributed.launch_local(["list"], 2, environ={}) == 0
    assert stopped == []


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


@pytest.mark.slow
def test_processes_given_different_sweeps_stop_before_any_row(tmp_path):
    """Two processes of one job whose command lines differ (process 1 another seed) both exit 2
    naming the difference, with no row written: each would otherwise label its rows with the
    other's points and exit 0."""
    port = free_loopback_port()
    config = write_config(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "dedebate.cli", "sweep", "--no-progress", str(config), *extra],
            env={
                **sweep_env(1),
                "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
                "JAX_NUM_PROCESSES": "2",
                "JAX_PROCESS_ID": str(i),
            },
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, extra in enumerate(([], ["seed=1"]))
    ]
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 2, err
        assert "the 2 processes were given different sweeps" in err
    assert not list(tmp_path.glob("runs/*/groups/group-*.csv"))


def test_a_process_stuck_past_sigterm_exits_143_after_its_grace():
    """A job's process whose main thread never returns to Python after SIGTERM (here a handler
    that does nothing, then a sleep; in a job, a collective whose peer has gone) exits 143 once
    the grace has passed, saying so; without the watch it would run on."""
    code = (
        "import signal, sys, time\n"
        "from dedebate.cli.startup import exit_when_sigterm_is_stuck\n"
        "signal.signal(signal.SIGTERM, lambda *a: None)\n"
        "exit_when_sigterm_is_stuck(grace_s=0.3)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 143, err
    assert b"still waiting on another process after 0.3 s: exiting without clean-up" in err


def test_a_busy_coordinator_port_is_refused_before_jax_starts():
    """Process 0 given a port another program listens on: one line naming it (JAX's server
    crashed the process with a segfault)."""
    import socket

    from dedebate.lab.distributed import initialize

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(DistributedError, match=f"127.0.0.1:{port}'.*port {port} is in use"):
            initialize(ProcessEnv("env", 2, 0, f"127.0.0.1:{port}"))


def test_processes_refuse_a_locked_sweep_before_they_start(tmp_path, capsys, monkeypatch):
    """``--processes 2 --resume DIR`` while another process holds DIR: exit 2 at once (it took
    32 s and a traceback from the second process)."""
    from dedebate import cli
    from dedebate.lab.folder_guard import lock_run_dir

    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", SWEEPABLE)
    d = tmp_path / "s"
    d.mkdir()
    write_config(tmp_path)
    (d / "config.yaml").write_text((tmp_path / "sweep.yaml").read_text())
    lock = lock_run_dir(d)
    try:
        assert cli.main(["sweep", "--resume", str(d), "--processes", "2", "--no-progress"]) == 2
    finally:
        lock.release()
    assert "run in use by another process" in capsys.readouterr().err


@pytest.mark.parametrize("code", [137, 1, 0])
def test_a_job_that_ends_early_names_the_sweep_to_resume_with_its_processes(
    tmp_path, capsys, monkeypatch, code
):
    """A process of the job killed (its peers then stopped by the launcher) or crashed: the
    launcher names the folder and ``--processes N`` (a process that dies cannot print, and its
    peers' own line would resume on one process); not after a job that finished."""
    from dedebate import cli
    from dedebate.lab import distributed as dist

    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", SWEEPABLE)
    started = []
    monkeypatch.setattr(dist, "launch_local", lambda argv, n: started.append(argv) or code)
    argv = ["sweep", str(write_config(tmp_path)), "--processes", "2", "--no-progress"]
    assert cli.main(argv) == code
    (d,) = (tmp_path / "runs").glob("fake_sweep-sweep-*")
    assert started == [
        ["sweep", str(tmp_path / "sweep.yaml"), "--sweep-dir", str(d), "--no-progress"]
    ]
    line = f"dedebate: resume the sweep with: dedebate sweep --resume {d} --processes 2"
    assert (line in capsys.readouterr().err) == (code != 0)
    if code:  # a finished sweep's record: nothing to resume, whatever its exit code
        (d / "config.yaml").write_text((tmp_path / "sweep.yaml").read_text())
        (d / "results.json").write_text(json.dumps({"status": "ok"}))
        assert cli.main(["sweep", "--resume", str(d), "--processes", "2"]) == code
        assert "resume the sweep with" not in capsys.readouterr().err
