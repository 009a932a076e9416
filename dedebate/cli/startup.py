"""What the ``dedebate`` process sets up before its command runs, and before JAX starts: SIGTERM as
Ctrl-C, fatal-signal stacks, the figure backend, the fast-compile flags, the asked-for JAX
platforms, reproduce's fork server and the persistent compilation cache. ``main([...])`` called
from Python, as the tests do, skips all of it and leaves the caller's process alone."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import signal
from pathlib import Path

from dedebate.cli.reproduce import jobs_text, jobs_value, reproduce_header

# Commands that compile JAX programs: the ones the persistent compilation cache speeds up.
COMPILING = frozenset({"run", "sweep", "reproduce", "bench"})


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command stands so that its clean-up runs as for Ctrl-C."""


def _raise_terminated(signum, frame):
    """The SIGTERM handler: raise :class:`Terminated` where the command stands."""
    raise Terminated


def exit_when_sigterm_is_stuck(grace_s: float = 10.0) -> None:
    """A multi-process job: where SIGTERM has not ended the process within ``grace_s`` (its main
    thread blocked in a collective whose peer has gone, where no Python handler runs), exit 143
    without clean-up; what is finished is on disk already. Call from the main thread."""
    import sys
    import threading
    import time

    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write)  # written by the C-level handler even while Python is blocked

    def watch() -> None:
        while signal.SIGTERM not in os.read(read, 64):
            pass
        time.sleep(grace_s)
        sys.stderr.write(
            f"dedebate: terminated; still waiting on another process after {grace_s:g} s: "
            "exiting without clean-up (finished groups are on disk: resume with --resume)\n"
        )
        sys.stderr.flush()
        os._exit(143)

    threading.Thread(target=watch, name="dedebate-sigterm-watch", daemon=True).start()


def _in_a_job(args: argparse.Namespace) -> bool:
    """Whether this process is one of a multi-process job's (bad variables: the command says)."""
    from dedebate.lab.distributed import DistributedError, process_env

    try:
        return process_env(getattr(args, "distributed", False)).multi
    except DistributedError:
        return False


def _workers_likely(args: argparse.Namespace) -> bool:
    """Whether ``reproduce`` will run worker processes, judged before JAX is imported: ``--jobs``
    (else ``$DEDEBATE_JOBS``) asks for more than one, or it is ``auto`` on a machine with more
    than one usable core where JAX has only its CPU backend (:mod:`dedebate.lab.parallel`). Only
    decides whether to start the fork server early; the number of workers is decided later."""
    from dedebate.lab.parallel import accelerator_plugins_installed, usable_cores

    jobs = jobs_value(jobs_text(args)[0])
    if jobs == "auto":
        return len(usable_cores()) > 1 and not accelerator_plugins_installed()
    return isinstance(jobs, int) and jobs > 1


def _fast_compile(args: argparse.Namespace) -> list[str]:
    """Add the fast-compile XLA flags where :func:`dedebate.lab.fast_compile.wanted` says so:
    ``reproduce --quick`` (or ``--resume`` of a quick one) on a CPU-only installation, or any
    compiling command with ``DEDEBATE_FAST_COMPILE=1``. Returns the flags added; ValueError for
    a bad ``DEDEBATE_FAST_COMPILE``."""
    from dedebate.lab import fast_compile
    from dedebate.lab.parallel import accelerator_plugins_installed

    size = args.size if args.command == "reproduce" else None
    if args.command == "reproduce" and args.resume and size is None:
        with contextlib.suppress(ValueError):  # cmd_reproduce reports a bad directory
            size = reproduce_header(Path(args.resume))[0]
    if not fast_compile.wanted(size, cpu_only=not accelerator_plugins_installed()):
        return []
    return fast_compile.apply()


def _unavailable_platforms() -> str | None:
    """Why JAX cannot start the platforms ``JAX_PLATFORMS`` asks for, before any run directory
    exists (JAX fails with a bare AssertionError at the first computation); None if it can or
    none is asked for."""
    asked = os.environ.get("JAX_PLATFORMS", "").strip()
    if asked in ("", "cpu"):
        return None
    try:
        import jax

        jax.devices()
    except Exception as err:  # noqa: BLE001 - whatever the plugin raises, one line
        why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        return (
            f"JAX_PLATFORMS={asked!r}: JAX cannot start it here ({why}); unset "
            "JAX_PLATFORMS, or install JAX's plugin for it (README: Running on a GPU)"
        )
    return None


def prepare_process(args: argparse.Namespace) -> str | None:
    """Set up the process for ``args.command`` (the module docstring); returns a usage error's
    message, or None."""
    # SIGTERM stops the command as Ctrl-C does: its clean-up runs (reproduce stops its
    # workers) and it exits 143, instead of dying where it stands.
    signal.signal(signal.SIGTERM, _raise_terminated)
    if args.command == "sweep" and _in_a_job(args):
        exit_when_sigterm_is_stuck()
    # A process killed by a fatal signal (SIGABRT from a native library, SIGSEGV) prints
    # the Python stack it died in as its last lines, instead of nothing.
    faulthandler.enable()
    # Figures are only ever saved to files here: the non-interactive backend, set by the lab
    # (experiments do not choose one, so in a notebook their plots stay inline). An
    # MPLBACKEND the user set wins.
    os.environ.setdefault("MPLBACKEND", "Agg")
    if args.command in COMPILING:
        # Before JAX starts (here and in reproduce's workers): the quick sizes compile for
        # speed of compilation (dedebate/lab/fast_compile.py).
        try:
            _fast_compile(args)
        except ValueError as err:
            return str(err)
    if args.command in COMPILING | {"doctor"}:
        problem = _unavailable_platforms()
        if problem:
            return problem
    if args.command == "reproduce" and _workers_likely(args):
        # Its worker processes import JAX and the lab in a fork server that starts now, beside
        # this process's own imports and W&B start-up (dedebate/lab/parallel.py).
        from dedebate.lab.parallel import prestart

        prestart()
    if args.command in COMPILING:
        # The process entry point (console script, python -m dedebate.cli) turns on JAX's
        # persistent compilation cache (dedebate/lab/compile_cache.py).
        from dedebate.lab.compile_cache import enable

        enable()
    return None
