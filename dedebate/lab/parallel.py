"""``dedebate reproduce --jobs N``: the experiments of one reproduce in N worker processes.

Each worker runs one experiment at a time with :func:`dedebate.lab.runner.run_experiment`, as the
sequential loop does, and sends the record's claims back through a pipe; the run directory is on
disk before the record is sent. Workers are pinned to disjoint sets of the usable CPU cores (JAX
sizes its thread pools from them) and mirror the parent's persistent compile cache. A worker that
dies (killed, out of memory) fails only the experiment it was running; a new worker takes the
experiments still waiting. A worker is a fresh Python process (``spawn``), except after
:func:`prestart`, which the command line calls first thing: then a fork server imports JAX, Flax,
Optax, Orbax, W&B, Matplotlib and the dedebate package once (:data:`PRELOAD`) beside the parent's
own start-up, and the workers are forked from it ready to run. No JAX backend has started in the
server, so each worker starts its own. A worker takes the parent's environment as it starts; what
the preloaded modules read while importing is from the command's start, which is why only the
command line uses it.
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any


@dataclasses.dataclass
class Task:
    """One experiment to run: its name, module, resolved config and run directory."""

    name: str
    module: str  # importable module name
    cfg: Any  # RunConfig (pickled to the worker)
    run_dir: Path


@dataclasses.dataclass
class Outcome:
    """What a worker reported for one task (``error`` set when the lab or the process failed)."""

    name: str
    wall_time_s: float = 0.0
    run_error: str | None = None  # the experiment raised (its record says so)
    claims: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    plots: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None  # the lab failed, or the worker process died


# What the fork server imports once for all its workers: the libraries and dedebate modules
# every experiment imports (dedebate/lab/preload.py, which never fails the server).
PRELOAD = ("dedebate.lab.preload",)
_FORK_SERVER = {"started": False}


def accelerator_plugins_installed() -> bool:
    """Whether JAX could find a backend other than its CPU one, judged without importing JAX:
    ``JAX_PLATFORMS`` names another platform, or a PJRT plugin (the ``jax_plugins`` namespace
    package or entry points, which is where JAX looks for CUDA, ROCm and others) or ``libtpu`` is
    installed.

    Returns True when an accelerator may be there (then only JAX can tell), False when JAX can only
    compute on the CPU.
    """
    import importlib.metadata
    import importlib.util

    platforms = os.environ.get("JAX_PLATFORMS", "").strip()
    if platforms:
        return any(p.strip() not in ("", "cpu") for p in platforms.split(","))
    if any(importlib.util.find_spec(m) is not None for m in ("jax_plugins", "libtpu")):
        return True
    return bool(importlib.metadata.entry_points(group="jax_plugins"))


def prestart() -> bool:
    """Start the fork server that later workers are forked from (see the module docstring), so
    that their imports overlap the parent's start-up. Call it before JAX starts a backend in this
    process, from a process whose environment stays as it is.

    Returns whether workers will be forked from it (False where the platform has no fork server:
    they are spawned).
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))
    forkserver.ensure_running()
    _FORK_SERVER["started"] = True
    return True


def _context():
    """The multiprocessing context: the fork server after :func:`prestart`, else ``spawn``."""
    return multiprocessing.get_context("forkserver" if _FORK_SERVER["started"] else "spawn")


def usable_cores() -> list[int]:
    """The CPU cores this process may run on (all of ``os.cpu_count()`` where affinity is not
    available).
    """
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def auto_jobs(backend: str | None = None, cores: int | None = None) -> int:
    """``--jobs auto``: one worker per usable core where JAX computes on the CPU, else 1.

    On a CPU a cold reproduce is mostly tracing, lowering, compiling and host work; only XLA's
    compiler and the runs use a second core, so two experiments side by side use cores that one
    leaves idle much of the time (docs/lab.md, "Parallel reproduce"). On an accelerator every
    process would claim the device's memory, so the experiments run one after another in this
    process.

    Args:
        backend: JAX's default backend; None asks JAX (which starts it in this process).
        cores: the number of usable cores; None = ``len(usable_cores())``.

    Returns the number of worker processes (1: none, the experiments run in this process).
    """
    if backend is None:
        import jax

        backend = jax.default_backend()
    if backend != "cpu":
        return 1
    return max(1, len(usable_cores()) if cores is None else cores)


def core_sets(jobs: int, cores: Sequence[int]) -> list[list[int]]:
    """Split ``cores`` among ``jobs`` workers: disjoint round-robin sets when there are enough
    cores, one core each (shared) when there are more workers than cores.
    """
    if jobs >= len(cores):
        return [[cores[i % len(cores)]] for i in range(jobs)]
    return [list(cores[i::jobs]) for i in range(jobs)]


def _jax_cache_settings() -> dict[str, Any]:
    """The parent's compile cache settings, and whether the lab turned the cache on."""
    # The parent's persistent compile cache settings (mirrored in each worker), and whether the lab
    # turned it on (``compile_cache.enable``, then called again in the worker).
    import jax

    from dedebate.lab import compile_cache

    return {
        "by_lab": compile_cache.provenance()["source"] in (compile_cache.ENV, "default"),
        "jax": {
            k: getattr(jax.config, k)
            for k in (
                "jax_compilation_cache_dir",
                "jax_enable_compilation_cache",
                "jax_persistent_cache_min_compile_time_secs",
            )
        },
    }


def _exit_when_the_leader_goes(leader_alive) -> None:
    """End this worker at once when the command that started it is gone."""
    # End this worker at once when the command that started it is gone (killed, or stopped before it
    # could stop its workers): its end of ``leader_alive`` then reads end-of-file, and nothing more
    # of a run whose report nobody will write reaches the disk.

    def watch():
        try:
            leader_alive.recv()
        except (EOFError, OSError):
            pass
        os._exit(1)

    threading.Thread(target=watch, name="dedebate-leader-watch", daemon=True).start()


def _worker(
    conn, cores: list[int], jax_settings: dict[str, Any], environ: dict[str, str], leader_alive=None
) -> None:
    """A worker process: run the tasks the parent sends until it sends None."""
    # A worker process: run the tasks the parent sends until it sends None, in the parent's
    # environment as it was when the worker started (a forked worker inherits the fork server's,
    # from the command's start; the parent may have set more since, e.g. W&B its service's address,
    # which the workers' runs then use, as spawned workers do).
    if os.environ != environ:
        os.environ.clear()
        os.environ.update(environ)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    if leader_alive is not None:
        _exit_when_the_leader_goes(leader_alive)
    if cores and hasattr(os, "sched_setaffinity"):
        try:  # before JAX starts: its CPU thread pools are sized from these cores
            os.sched_setaffinity(0, cores)
        except OSError:
            pass
    import jax

    if jax_settings["by_lab"]:  # the same environment, so the same directory and provenance
        from dedebate.lab.compile_cache import enable

        enable()
    for k, v in jax_settings["jax"].items():
        if getattr(jax.config, k) != v:
            jax.config.update(k, v)
    from dedebate.lab.runner import run_experiment

    while True:
        try:
            task = conn.recv()
        except EOFError:  # the parent is gone
            return
        if task is None:
            return
        out = Outcome(task.name)
        try:
            module = importlib.import_module(task.module)
            rec = run_experiment(
                module, task.cfg, run_dir=task.run_dir, show_progress=False, nested=True
            )
            out.wall_time_s = rec.wall_time_s
            out.run_error = rec.error
            out.claims = rec.results.get("claims", []) if rec.error is None else []
            out.plots = list(rec.results.get("plots", []))
        except Exception as err:  # noqa: BLE001 - the lab itself failed; still a row
            out.error = f"{type(err).__name__}: {err}"
        conn.send(out)


def exit_reason(code: int | None) -> str:
    """How a process with exit code ``code`` ended, in words (a negative code: its signal)."""
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def run_tasks(
    tasks: Sequence[Task], jobs: int, on_start: Callable[[Task], None] | None = None
) -> Iterator[Outcome]:
    """Run ``tasks`` in ``jobs`` worker processes, in order of submission, yielding each
    outcome as its experiment finishes.

    Args:
        tasks: the experiments, in the order they are started.
        jobs: the number of worker processes (at least 1).
        on_start: called with each task when it is handed to a worker (progress lines).

    Returns an iterator of :class:`Outcome`, one per task, in order of completion. A task whose
    worker died has ``error`` set (the process's exit code or signal).
    """
    jobs = max(1, min(jobs, len(tasks)))
    ctx = _context()
    cores = usable_cores()
    sets = core_sets(jobs, cores) if len(cores) > 1 else [[] for _ in range(jobs)]
    settings = _jax_cache_settings()
    waiting = list(tasks)
    workers: dict[int, tuple[Any, Any, Task | None]] = {}  # slot -> (process, conn, task)

    # the workers' ends of this pipe read end-of-file when this process is gone, however it went
    leader_alive, alive_here = ctx.Pipe(duplex=False)

    def start(slot: int) -> None:
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_worker,
            args=(child, sets[slot], settings, dict(os.environ), leader_alive),
            name=f"dedebate-reproduce-{slot}",
        )
        proc.start()
        child.close()
        workers[slot] = (proc, parent, None)

    refused: list[Outcome] = []  # tasks that could not be handed to any worker

    def send(slot: int, task: Task | None) -> bool:
        proc, conn, _ = workers[slot]
        for _attempt in range(2):
            try:
                conn.send(task)
                return True
            except (OSError, ValueError):  # the worker died between two tasks: a new one
                proc.join()
                conn.close()
                if task is None:
                    return False
                start(slot)
                proc, conn, _ = workers[slot]
        return False

    def feed(slot: int) -> None:
        """The next task to the worker in ``slot``, or None (stop) when none is waiting."""
        while waiting:
            task = waiting.pop(0)
            try:
                sent = send(slot, task)
                why = "its worker process could not be started"
            except Exception as err:  # noqa: BLE001 - e.g. a config that cannot be pickled
                sent, why = False, f"it cannot be sent to a worker process: {err}"
            if sent:
                proc, conn, _ = workers[slot]
                workers[slot] = (proc, conn, task)
                if on_start:
                    on_start(task)
                return
            refused.append(Outcome(task.name, error=why))
        send(slot, None)
        proc, conn, _ = workers[slot]
        workers[slot] = (proc, conn, None)

    try:
        for slot in range(jobs):
            start(slot)
            feed(slot)
        while refused or any(t is not None for _, _, t in workers.values()):
            while refused:
                yield refused.pop(0)
            busy = {slot: w for slot, w in workers.items() if w[2] is not None}
            if not busy:
                continue
            ready = wait(
                [c for _, c, _ in busy.values()] + [p.sentinel for p, _, _ in busy.values()]
            )
            for slot, (proc, conn, task) in busy.items():
                out = None
                if conn in ready:
                    try:
                        out = conn.recv()
                    except (EOFError, OSError):
                        out = None
                if out is None and proc.sentinel not in ready and conn not in ready:
                    continue
                if out is None:  # the process died while running the task
                    assert task is not None  # busy holds the slots with a task
                    proc.join()
                    conn.close()
                    out = Outcome(
                        task.name,
                        error=f"the worker process died ({exit_reason(proc.exitcode)}) while "
                        "running it",
                    )
                    if waiting:
                        start(slot)
                        feed(slot)
                    else:
                        del workers[slot]
                    yield out
                    continue
                feed(slot)
                yield out
    finally:  # normal end: idle workers were told to stop; on an interrupt busy ones die
        for proc, _conn, task in workers.values():
            if task is not None and proc.is_alive():
                proc.terminate()
        for proc, conn, _ in workers.values():
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
            conn.close()
        leader_alive.close()
        alive_here.close()
