"""``dedebate reproduce --jobs N`` on fake experiments: the same report as one after another, the
longest experiment started first, a killed worker loses only its own experiment, a bad N is a
usage error, ``auto`` is one worker per core on a CPU."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import jax
import pytest

from dedebate import cli
from dedebate.lab import memory, parallel
from dedebate.lab.parallel import auto_jobs, core_sets


def _reproduce(out_dir, capsys, *args):
    code = cli.main(
        ["reproduce", "--quick", "--tracking", "disabled", "--output-dir", str(out_dir), *args]
    )
    out, err = capsys.readouterr()
    (rep,) = out_dir.glob("reproduce-*")
    return code, out, err, rep


def _comparable(rep):
    """report.json and report.md without what differs between any two runs (times, dates,
    paths)."""
    data = json.loads((rep / "report.json").read_text())
    data.pop("wall_time_s")
    data["provenance"].pop("started_utc")
    for e in data["experiments"]:
        e.pop("wall_time_s")
    md = (rep / "report.md").read_text()
    md = re.sub(r"\d+\.\d s\.", "T s.", re.sub(r"\| (wall_time_s|started_utc) \|.*", "", md))
    return data, md


def test_parallel_report_equals_sequential(tmp_path, fake_env, capsys):
    one = _reproduce(tmp_path / "one", capsys, "--jobs", "1", "--no-progress")
    two = _reproduce(tmp_path / "two", capsys, "--jobs", "2")
    assert one[0] == two[0] == 1 and one[1] == two[1].replace(str(two[3]), str(one[3]))
    assert "FAIL: 3/4 claims pass; failing experiments: fake_fail, fake_raise" in two[1]
    assert _comparable(one[3]) == _comparable(two[3])
    names = [e["name"] for e in json.loads((two[3] / "report.json").read_text())["experiments"]]
    assert names == ["fake_fail", "fake_pass", "fake_raise"]
    # one progress line per start and per end, from the parent process; fake_raise, the one
    # with TYPICAL_SECONDS, starts first, the others in the report's order
    assert re.findall(r"reproduce: started (\w+)", two[2]) == [
        "fake_raise",
        "fake_fail",
        "fake_pass",
    ]
    assert "] fake_raise: FAIL 0/0 in " in two[2] and "] fake_pass: PASS 2/2 in " in two[2]
    # every run directory is complete, written by the workers
    for name in names:
        res = json.loads((two[3] / name / "results.json").read_text())
        assert res["status"] == ("error" if name == "fake_raise" else "ok")


def _only_the_killed_experiment_failed(out, rep) -> dict:
    """Check a reproduce of the ``dying`` fakes; return the surviving experiment's metrics (its
    process's parent pid, the environment variable ``DEDEBATE_TEST_MARK``)."""
    assert "FAIL: 1/1 claims pass; failing experiments: fake_dies" in out
    by_name = {e["name"]: e for e in json.loads((rep / "report.json").read_text())["experiments"]}
    dead = by_name["fake_dies"]
    assert dead["status"] == "error" and "killed by SIGKILL" in dead["error"]
    assert dead["run_dir"] == "fake_dies"  # what it wrote before it died is there
    assert json.loads((rep / "fake_dies" / "results.json").read_text())["status"] == "running"
    assert by_name["fake_survives"]["verdict"] == "PASS"
    assert (
        "| value is three | fake lemma 3 | == 3 | 3 (exact) | PASS |"
        in (rep / "report.md").read_text()
    )
    return json.loads((rep / "fake_survives" / "results.json").read_text())["metrics"]


def test_a_killed_worker_fails_only_its_experiment(tmp_path, fake_env, capsys):
    fake_env.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments.dying")
    code, out, _, rep = _reproduce(tmp_path, capsys, "--jobs", "2", "--no-progress")
    assert code == 1
    # called from Python (not the command line), workers are spawned by this process
    assert _only_the_killed_experiment_failed(out, rep)["parent_pid"] == os.getpid()


def _task(tmp_path, name, module, cfg=None):
    """A :class:`~dedebate.lab.parallel.Task` of ``module`` at quick size (or with ``cfg``)."""
    import importlib

    from dedebate.lab.config import default_config

    if cfg is None:
        mod = importlib.import_module(module)
        cfg = default_config(mod, "quick", 0, tracking={"mode": "disabled"})
    return parallel.Task(name, module, cfg, tmp_path / name)


def test_every_task_gets_an_outcome_whatever_fails(tmp_path):
    """One worker, four tasks: a module that does not import (the lab's own failure, named), an
    experiment whose process is killed, one after it (run by a new worker), and last a config
    that cannot be pickled (refused, not lost)."""
    dying = "tests.fake_experiments.dying"
    tasks = [
        _task(tmp_path, "ghost", "tests.fake_experiments.no_such_module", cfg=object()),
        _task(tmp_path, "fake_dies", f"{dying}.fake_dies"),
        _task(tmp_path, "fake_survives", f"{dying}.fake_survives"),
        _task(tmp_path, "pickle", "tests.fake_experiments.fake_pass", cfg=lambda: 0),  # last
    ]
    out = {o.name: o for o in parallel.run_tasks(tasks, 1)}
    assert sorted(out) == sorted(t.name for t in tasks)
    assert out["ghost"].error.startswith("ModuleNotFoundError: "), out["ghost"]
    assert out["pickle"].error.startswith("it cannot be sent to a worker process: ")
    assert "killed by SIGKILL" in out["fake_dies"].error
    survived = out["fake_survives"]
    assert survived.error is None and survived.run_error is None and survived.claims
    assert survived.wall_time_s > 0


class _FirstWorkerDiesBeforeItsTask:
    """A multiprocessing context whose first worker is killed just before its first task is
    sent: the send fails as it does on a worker that died between two tasks."""

    def __init__(self, ctx):
        self.ctx, self.first = ctx, None

    def Pipe(self, duplex=True):
        parent, child = self.ctx.Pipe(duplex)
        if duplex and self.first is None:
            self.first = parent = _KilledOnSend(parent)
        return parent, child

    def Process(self, **kw):
        proc = self.ctx.Process(**kw)
        if self.first is not None and self.first.proc is None:
            self.first.proc = proc
        return proc


class _KilledOnSend:
    def __init__(self, conn):
        self.conn, self.proc = conn, None

    def send(self, obj):
        self.proc.kill()
        self.proc.join()
        raise BrokenPipeError("the worker is gone")

    def __getattr__(self, name):
        return getattr(self.conn, name)


def test_a_worker_dead_before_its_task_is_replaced_and_the_task_runs(tmp_path, monkeypatch):
    ctx = _FirstWorkerDiesBeforeItsTask(parallel._context())
    monkeypatch.setattr(parallel, "_context", lambda: ctx)
    tasks = [_task(tmp_path, n, "tests.fake_experiments.dying.fake_survives") for n in "ab"]
    out = list(parallel.run_tasks(tasks, 1))
    assert ctx.first.proc.exitcode == -signal.SIGKILL  # the first worker did die
    assert sorted(o.name for o in out) == ["a", "b"]
    assert all(o.error is None and o.run_error is None for o in out), out


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")
def test_two_workers_run_on_disjoint_cores_with_the_parents_cache_settings(tmp_path):
    """Each worker is pinned to its own share of the cores before JAX sizes its thread pools, and
    takes the compile cache settings the parent has in JAX's configuration."""
    tasks = [_task(tmp_path, n, "tests.fake_experiments.dying.fake_survives") for n in "ab"]
    setting = "jax_persistent_cache_min_compile_time_secs"
    was = getattr(jax.config, setting)
    jax.config.update(setting, 0.125)
    try:
        assert all(o.error is None for o in parallel.run_tasks(tasks, 2))
    finally:
        jax.config.update(setting, was)
    metrics = [json.loads((tmp_path / n / "results.json").read_text())["metrics"] for n in "ab"]
    cores = [set(m["cores"]) for m in metrics]
    assert not cores[0] & cores[1] and cores[0] | cores[1] == set(parallel.usable_cores())
    assert [m["cache_min_secs"] for m in metrics] == [0.125, 0.125]


def test_workers_turn_the_cache_on_as_the_lab_did_and_mirror_jax(monkeypatch):
    """A cache the lab turned on (asked for, or the default) is turned on again in each worker;
    one set up through JAX is only mirrored."""
    from dedebate.lab import compile_cache

    where = jax.config.jax_compilation_cache_dir  # the suite's (tests/conftest.py)
    for source, by_lab in (("default", True), ("DEDEBATE_COMPILE_CACHE", True), ("x", False)):
        state = {"enabled": True, "dir": where, "source": source}
        monkeypatch.setattr(compile_cache, "_state", state)
        got = parallel._jax_cache_settings()
        assert got["by_lab"] is by_lab, source
        assert got["jax"]["jax_compilation_cache_dir"] == where
    monkeypatch.setattr(
        compile_cache, "_state", {**state, "dir": "/elsewhere", "source": "default"}
    )
    assert parallel._jax_cache_settings()["by_lab"] is False  # JAX's folder is not the lab's


def test_the_cores_are_this_processs_and_auto_takes_them_all(monkeypatch):
    assert parallel.usable_cores() == sorted(os.sched_getaffinity(0))
    monkeypatch.setattr(parallel, "usable_cores", lambda: [0, 1, 2, 3])
    assert auto_jobs("cpu") == 4


def test_forked_workers_take_the_parents_environment(tmp_path, fake_env, capsys, monkeypatch):
    """After :func:`prestart` the workers are forked from the server, and a variable the parent
    set after the server started reaches them."""
    monkeypatch.setitem(parallel._FORK_SERVER, "started", False)  # spawn again after the test
    assert parallel.prestart()
    fake_env.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments.dying")
    fake_env.setenv("DEDEBATE_TEST_MARK", "set after the server started")
    code, out, _, rep = _reproduce(tmp_path, capsys, "--jobs", "2", "--no-progress")
    metrics = _only_the_killed_experiment_failed(out, rep)
    assert code == 1 and metrics["parent_pid"] != os.getpid()
    assert metrics["mark"] == "set after the server started"


def test_the_command_line_forks_its_workers_from_a_fork_server(tmp_path, cli_env):
    """``python -m dedebate.cli reproduce --jobs 2``: the workers come from the fork server the
    command started first (their parent is not the command's process), and the report is as
    with spawned workers, a killed worker included."""
    env = {**cli_env, "DEDEBATE_EXPERIMENTS": "tests.fake_experiments.dying"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dedebate.cli",
            "reproduce",
            "--quick",
            "--jobs",
            "2",
            "--no-progress",
            "--tracking",
            "disabled",
            "--output-dir",
            str(tmp_path),
        ],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    (rep,) = tmp_path.glob("reproduce-*")
    parent = _only_the_killed_experiment_failed(out, rep)["parent_pid"]
    assert parent != proc.pid and parent > 1  # the fork server's pid


PRELOAD_CHECK = """
import json, sys
from jax._src import xla_bridge
import dedebate.lab.preload as preload
after_preload = sorted(xla_bridge._backends)
from dedebate.lab.registry import discover_experiments
registry = discover_experiments()
print(json.dumps({"failed": preload.FAILED, "modules": preload.package_modules(),
                  "loaded": sorted(m for m in sys.modules if m.startswith("dedebate")),
                  "backends": [after_preload, sorted(xla_bridge._backends)],
                  "experiments": registry.names(), "errors": registry.errors}))
"""


def test_the_fork_server_preloads_everything_and_starts_no_jax_backend():
    """The fork server's imports (dedebate/lab/preload.py: the libraries, every dedebate module
    but the command line), then every experiment of the registry, in a fresh interpreter: all
    import, and none starts a JAX backend (forked workers could not use it; nor could a user
    configure JAX after importing dedebate)."""
    proc = subprocess.run(
        [sys.executable, "-c", PRELOAD_CHECK],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["failed"] == [] and got["backends"] == [[], []]
    assert len(got["modules"]) > 90 and set(got["modules"]) <= set(got["loaded"])
    assert not any(m.startswith("dedebate.cli") for m in got["modules"])
    assert len(got["experiments"]) >= 7 and got["errors"] == {}


def test_accelerator_plugins_decide_whether_the_fork_server_starts_early(monkeypatch):
    import importlib.metadata
    import importlib.util

    from dedebate.cli.parser import build_parser
    from dedebate.cli.startup import _workers_likely

    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    if not parallel.accelerator_plugins_installed():  # then JAX has only its CPU backend
        assert jax.default_backend() == "cpu"
    for platforms, expected in (("cpu", False), ("cuda", True), ("cpu,tpu", True)):
        monkeypatch.setenv("JAX_PLATFORMS", platforms)
        assert parallel.accelerator_plugins_installed() is expected
    monkeypatch.delenv("JAX_PLATFORMS")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert parallel.accelerator_plugins_installed() is False
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: object() if name == "jax_plugins" else None
    )
    assert parallel.accelerator_plugins_installed() is True
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: ["cuda"])
    assert parallel.accelerator_plugins_installed() is True

    monkeypatch.setattr(parallel, "accelerator_plugins_installed", lambda: False)
    monkeypatch.setattr(parallel, "usable_cores", lambda: [0, 1])
    monkeypatch.delenv("DEDEBATE_JOBS", raising=False)
    args = lambda *a: build_parser().parse_args(["reproduce", *a])  # noqa: E731
    assert _workers_likely(args()) and _workers_likely(args("--jobs", "auto"))
    assert _workers_likely(args("--jobs", "3")) and not _workers_likely(args("--jobs", "1"))
    assert not _workers_likely(args("--jobs", "two"))  # reported later as a usage error
    monkeypatch.setenv("DEDEBATE_JOBS", "1")
    assert not _workers_likely(args()) and _workers_likely(args("--jobs", "2"))
    monkeypatch.delenv("DEDEBATE_JOBS")
    monkeypatch.setattr(parallel, "usable_cores", lambda: [0])
    assert not _workers_likely(args())
    monkeypatch.setattr(parallel, "usable_cores", lambda: [0, 1])
    monkeypatch.setattr(parallel, "accelerator_plugins_installed", lambda: True)
    assert not _workers_likely(args()) and _workers_likely(args("--jobs", "2"))


@pytest.mark.parametrize(
    ("value", "env"),
    [("0", None), ("-2", None), ("two", None), ("1.5", None), (None, "0"), (None, "two")],
)
def test_bad_jobs_is_a_usage_error(tmp_path, fake_env, capsys, value, env):
    if env is not None:  # the default of --jobs from the environment
        fake_env.setenv("DEDEBATE_JOBS", env)
    args = ["--jobs", value] if value is not None else []
    assert cli.main(["reproduce", "--quick", "--output-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert (
        f"--jobs {value}: must be an integer >= 1 or auto"
        if env is None
        else f"DEDEBATE_JOBS='{env}': must be an integer >= 1 or auto"
    ) in err
    assert not list(tmp_path.iterdir())  # nothing was started


def test_core_sets_are_disjoint_until_workers_outnumber_cores():
    assert core_sets(2, [0, 1]) == [[0], [1]]
    assert core_sets(2, [0, 1, 2, 3, 4]) == [[0, 2, 4], [1, 3]]
    assert core_sets(3, [5, 7]) == [[5], [7], [5]]


def test_auto_is_one_worker_per_core_on_a_cpu_and_none_on_an_accelerator():
    assert auto_jobs("cpu", 2) == 2 and auto_jobs("cpu", 16) == 16
    assert auto_jobs("cpu", 1) == 1 and auto_jobs("cpu", 0) == 1
    assert auto_jobs("gpu", 16) == 1 and auto_jobs("tpu", 8) == 1
    assert auto_jobs(cores=3) == (3 if jax.default_backend() == "cpu" else 1)


@pytest.mark.parametrize(("value", "env"), [(None, None), ("auto", None), (None, "auto")])
def test_jobs_default_to_auto(tmp_path, fake_env, capsys, monkeypatch, value, env):
    monkeypatch.delenv("DEDEBATE_JOBS")
    if env is not None:
        monkeypatch.setenv("DEDEBATE_JOBS", env)
    asked = []
    monkeypatch.setattr(parallel, "auto_jobs", lambda: asked.append(1) or 1)
    args = ["--jobs", value] if value is not None else []
    code, out, _, _ = _reproduce(tmp_path, capsys, "--no-progress", *args)
    assert asked == [1] and code == 1 and "FAIL: 3/4 claims pass" in out


def test_an_explicit_jobs_does_not_ask_auto(tmp_path, fake_env, capsys, monkeypatch):
    monkeypatch.setattr(parallel, "auto_jobs", lambda: pytest.fail("auto_jobs was called"))
    assert _reproduce(tmp_path, capsys, "--no-progress", "--jobs", "1")[0] == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (108, 108.0),
        (2.5, 2.5),
        (0, 0.0),
        ("long", 0.0),
        (float("nan"), 0.0),
        (float("inf"), 0.0),
        (-3, 0.0),
        (True, 0.0),
    ],
)
def test_typical_seconds_is_a_hint_that_a_bad_value_cannot_break(value, expected):
    from types import SimpleNamespace

    from dedebate.lab.report import _typical_seconds

    assert _typical_seconds(SimpleNamespace(TYPICAL_SECONDS=value)) == expected
    assert _typical_seconds(SimpleNamespace()) == 0.0


def test_experiments_that_would_not_fit_together_run_fewer_at_a_time(
    tmp_path, fake_env, capsys, monkeypatch
):
    """Each fake estimated at 600 B: under ``--memory-limit 1000`` each fits alone but no two
    together, so ``--jobs 3`` runs them one after another, says so, and reports as before."""
    from tests.fake_experiments import fake_fail, fake_pass, fake_raise

    for module in (fake_fail, fake_pass, fake_raise):
        monkeypatch.setattr(module, "memory_bytes", lambda params: 600, raising=False)
    code, out, err, _ = _reproduce(
        tmp_path, capsys, "--jobs", "3", "--no-progress", "--memory-limit", "1000"
    )
    assert code == 1 and "FAIL: 3/4 claims pass" in out
    assert (
        "dedebate: warning: 3 experiments side by side may need about 1.76 KiB of memory "
        "together (their estimates), more than the 1000 B allowed by memory_limit=1000; "
        "running 1 at a time"
    ) in err
    assert "processes" not in err


def test_workers_that_fit_take_the_largest_estimates_together(monkeypatch):
    """Any experiments may run side by side, so the largest ``n`` estimates must fit; with
    ``auto`` the limit is the available memory, and an unknown one limits nothing."""
    assert memory.workers_that_fit([5, 1, 4, 1], 4, 11) == (4, None)
    assert memory.workers_that_fit([5, 1, 4, 1], 4, 10)[0] == 3
    assert memory.workers_that_fit([5, 1, 4, 1], 3, 9)[0] == 2
    assert memory.workers_that_fit([5, 1, 4, 1], 4, 8)[0] == 1
    assert memory.workers_that_fit([5, 6], 2, 4)[0] == 1  # each alone is the run's own check
    monkeypatch.setattr(memory, "available_bytes", lambda: 9)
    assert memory.workers_that_fit([5, 4, 4], 3, "auto") == (
        2,
        "3 experiments side by side may need about 13 B of memory together (their "
        "estimates), more than the 9 B available; running 2 at a time",
    )
    monkeypatch.setattr(memory, "available_bytes", lambda: None)
    assert memory.workers_that_fit([5, 4, 4], 3, "auto") == (3, None)
