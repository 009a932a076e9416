"""Benchmark: a cold ``dedebate reproduce --quick``, the time to a first report, run three times.

Each run is the command as a user starts it (``python -m dedebate.cli reproduce --quick``: W&B
offline, ``--jobs auto``), in a subprocess with an empty compile cache (``DEDEBATE_COMPILE_CACHE``
in a fresh temporary directory) and a temporary output directory, both removed afterwards.
Reported per run: wall seconds, exit code, the claims the report counts, the load average before
it and, on Linux, the CPU seconds every process of the machine spent meanwhile (``busy_cpu_s``,
from ``/proc/stat``: the run's own only on an otherwise idle machine; the workers are forked by a
fork server the command does not wait for, so its children's rusage would miss them).
Then the median, min and max of the walls and whether the median meets the goal of
:data:`GOAL_S` seconds on two CPU cores. There is no numpy reference: this is the time a user
waits. ``run(full=True)`` runs five times. The machine's speed drifts from day to day; compare two
versions by alternating their runs (docs/lab.md, "Fast compilation").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dedebate.lab.parallel import usable_cores

GOAL_S = 60.0  # a cold quick reproduce on two CPU cores
RUNS = {False: 3, True: 5}


def _busy_cpu_s() -> float | None:
    """CPU seconds all processes of the machine have used since boot (Linux), else None."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _stats(values: list[float]) -> dict:
    if not values:  # no run to time: no figure (JSON has no NaN)
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def one_run(only: list[str] | None = None, timeout_s: float = 1800.0) -> dict:
    """One cold ``reproduce --quick`` in a subprocess (see the module docstring).

    Args:
        only: experiments to run (``--only``); None = every one.
        timeout_s: the run and all it started are killed after this many seconds
            (``exit_code`` None).

    Returns:
        ``{"wall_s", "exit_code", "busy_cpu_s", "load_before", "claims_passed", "claims_total",
        "passed"}`` (the last three None without a report, or when the run was killed).
    """
    tmp = Path(tempfile.mkdtemp(prefix="dedebate-cold-start-"))
    try:
        env = {**os.environ, "DEDEBATE_COMPILE_CACHE": str(tmp / "cache")}
        cmd = [
            sys.executable,
            "-m",
            "dedebate.cli",
            "reproduce",
            "--quick",
            "--no-progress",
            "--output-dir",
            str(tmp / "out"),
        ] + (["--only", *only] if only else [])
        load = os.getloadavg()[0]
        busy0, t0 = _busy_cpu_s(), time.perf_counter()
        # its own process group, so that a run past the timeout goes with its fork server and
        # workers
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        wall, busy1 = time.perf_counter() - t0, _busy_cpu_s()
        rec = {
            "wall_s": wall,
            "exit_code": code,
            "busy_cpu_s": None if busy0 is None or busy1 is None else busy1 - busy0,
            "load_before": load,
            "claims_passed": None,
            "claims_total": None,
            "passed": None,
        }
        # a killed run's report (written as it goes) is partial: no counts from it
        reports = sorted((tmp / "out").glob("reproduce-*/report.json"))
        if reports and code is not None:
            report = json.loads(reports[-1].read_text())
            rec.update(
                claims_passed=report.get("claims_passed"),
                claims_total=report.get("claims_total"),
                passed=report.get("passed"),
            )
        return rec
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(full: bool = False, runs: int | None = None, only: list[str] | None = None) -> dict:
    """Cold quick reproduces, one after another.

    Args:
        full: five runs instead of three.
        runs: the number of runs (overrides ``full``).
        only: experiments to run (``--only``); None = every one.

    Returns:
        A JSON-able dict: ``runs`` (each :func:`one_run`), ``wall_s`` (over the runs that wrote
        their report) and ``busy_cpu_s`` (median, min, max; None without a run), ``goal_s``,
        ``median_meets_goal`` (every run timed), ``timed_runs``, ``all_passed`` and ``cores``.

    Raises:
        ValueError: ``runs`` below 1.
    """
    n = RUNS[bool(full)] if runs is None else runs
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"runs={runs!r}: need an integer >= 1")
    records = [one_run(only) for _ in range(n)]
    # a run that wrote its report (exit 0, or 1 for a failing claim) is timed; a crash or a
    # timeout is not a cold start
    walls = [r["wall_s"] for r in records if r["exit_code"] in (0, 1) and r["claims_total"]]
    busy = [r["busy_cpu_s"] for r in records if r["busy_cpu_s"] is not None]
    wall = _stats(walls)
    return {
        "command": "dedebate reproduce --quick" + (f" --only {' '.join(only)}" if only else ""),
        "runs": records,
        "wall_s": wall,
        "busy_cpu_s": _stats(busy),
        "goal_s": GOAL_S,
        "median_meets_goal": len(walls) == n and wall["median"] <= GOAL_S,
        "timed_runs": len(walls),
        "all_passed": all(r["exit_code"] == 0 and r["passed"] is True for r in records),
        "cores": len(usable_cores()),
    }
