"""Multi-process runs on JAX's own runtime (``jax.distributed``), locally or under a launcher.

Three ways a sweep becomes multi-process, all ending in ``jax.distributed.initialize``:
``dedebate sweep CONFIG --processes N`` (:func:`launch_local` starts N copies on this machine with
``JAX_COORDINATOR_ADDRESS=127.0.0.1:PORT``, ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``); any
launcher that sets those three variables (:func:`process_env` reads them); ``srun dedebate sweep
CONFIG --distributed`` on SLURM (JAX's own SLURM detection finds the coordinator and this
process's id). On CPU the collectives are gloo, on GPU NCCL. Every process sees the global
``jax.devices()``; :mod:`dedebate.lab.devices` builds one ``Mesh`` over them, so a jitted sweep
runs SPMD with each process computing the rows on its own devices (docs/accelerators.md,
"Many devices and processes").
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from dedebate.lab.parallel import exit_reason
from dedebate.lab.rundir import eprint

ENV_ADDRESS = "JAX_COORDINATOR_ADDRESS"
ENV_COUNT = "JAX_NUM_PROCESSES"
ENV_ID = "JAX_PROCESS_ID"
ENV_BIND = "JAX_COORDINATOR_BIND_ADDRESS"
SLURM_COUNT = "SLURM_NTASKS"
SLURM_ID = "SLURM_PROCID"
INIT_TIMEOUT_S = 120


class DistributedError(RuntimeError):
    """A multi-process set-up that cannot work (bad environment, a sibling process failed)."""


@dataclasses.dataclass(frozen=True)
class ProcessEnv:
    """How this process takes part: ``source`` is ``single``, ``env`` or ``slurm``."""

    source: str = "single"
    num_processes: int = 1
    process_id: int = 0
    coordinator: str | None = None

    @property
    def multi(self) -> bool:
        """Whether this process is one of a multi-process job.

        Returns False for ``source == "single"``.
        """
        return self.source != "single"


def decimal_int(text: str) -> int | None:
    """``text`` (stripped) as a non-negative integer if it is ASCII digits only, else None."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    try:
        return int(text)
    except ValueError:  # more digits than int() reads
        return None


def slurm_tasks(environ: Mapping[str, str] | None = None) -> int | None:
    """``$SLURM_NTASKS``, the SLURM step's number of tasks: None when unset or empty.

    Raises:
        DistributedError: a value other than an integer >= 1, named with what is allowed.
    """
    env = os.environ if environ is None else environ
    text = env.get(SLURM_COUNT, "")
    if not text.strip():
        return None
    n = decimal_int(text)
    if n is None or n < 1:
        raise DistributedError(
            f"{SLURM_COUNT}={text!r}: must be an integer >= 1 (the SLURM step's number of "
            "tasks), or unset"
        )
    return n


def _slurm_step(env: Mapping[str, str]) -> ProcessEnv:
    """The SLURM step's ``ProcessEnv`` (both variables set); DistributedError for a bad one."""
    n = slurm_tasks(env)
    if n is None:
        raise DistributedError(
            f"{SLURM_COUNT}={env[SLURM_COUNT]!r}: must be an integer >= 1 (the SLURM step's "
            "number of tasks)"
        )
    pid = decimal_int(env[SLURM_ID])
    if pid is None or pid >= n:
        raise DistributedError(
            f"{SLURM_ID}={env[SLURM_ID]!r}: must be an integer in [0, {SLURM_COUNT}={n})"
        )
    return ProcessEnv("slurm", n, pid, None)


def process_env(distributed: bool = False, environ: Mapping[str, str] | None = None) -> ProcessEnv:
    """This process's place in a multi-process job, from the environment.

    ``JAX_NUM_PROCESSES`` > 1 with ``JAX_PROCESS_ID`` and ``JAX_COORDINATOR_ADDRESS`` set means a
    launcher started us (``env``). Otherwise, with ``distributed=True`` (``--distributed``), a
    SLURM step (``SLURM_NTASKS``, ``SLURM_PROCID``) is handed to JAX's SLURM detection
    (``slurm``); ``--distributed`` without either is an error. Otherwise: one process. A set
    ``SLURM_NTASKS`` is checked in every case (:func:`slurm_tasks`).

    Args:
        distributed: the command line asked for ``--distributed``.
        environ: the environment; None = ``os.environ``.

    Returns the :class:`ProcessEnv`.

    Raises:
        DistributedError: inconsistent variables, or ``--distributed`` without a launcher.
    """
    env = os.environ if environ is None else environ
    slurm_tasks(env)  # a malformed value is refused with or without --distributed
    count = env.get(ENV_COUNT, "").strip()
    if count:
        n = decimal_int(count)
        if n is None or n < 1:
            raise DistributedError(
                f"{ENV_COUNT}={count!r}: must be an integer >= 1 (the number of processes)"
            )
        pid = decimal_int(env.get(ENV_ID, ""))
        if pid is None or pid >= n:
            raise DistributedError(
                f"{ENV_ID}={env.get(ENV_ID)!r}: must be an integer in [0, {n}) "
                f"(this process's index; {ENV_COUNT}={n})"
            )
        address = env.get(ENV_ADDRESS, "").strip()
        if n > 1 and not address:
            raise DistributedError(
                f"{ENV_COUNT}={n} but {ENV_ADDRESS} is not set (host:port of process 0)"
            )
        host, _, port = address.rpartition(":")
        if n > 1 and (not host or not 1 <= (decimal_int(port) or 0) <= 65535):
            raise DistributedError(
                f"{ENV_ADDRESS}={address!r}: must be host:port of process 0 (a port in [1, 65535])"
            )
        if n > 1:
            return ProcessEnv("env", n, pid, address)
    if distributed:
        if SLURM_COUNT in env and SLURM_ID in env:
            return _slurm_step(env)
        raise DistributedError(
            f"--distributed needs a launcher's environment: {ENV_ADDRESS}, "
            f"{ENV_COUNT} and {ENV_ID}, or a SLURM step (srun)"
        )
    return ProcessEnv()


def initialize(penv: ProcessEnv) -> None:
    """``jax.distributed.initialize`` for ``penv`` (a no-op for one process).

    Must run before anything touches a JAX backend; gloo collectives on CPU.
    """
    if not penv.multi:
        return
    if penv.source == "env" and penv.process_id == 0:
        _check_port_free(str(penv.coordinator))
    import jax

    with contextlib.suppress(Exception):  # older/newer jax without the option: its default
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    with contextlib.suppress(Exception):  # its notifier would take SIGTERM, a scheduler's stop,
        jax.config.update("jax_enable_preemption_service", False)  # from dedebate's handler
    if penv.source == "slurm":
        jax.distributed.initialize(
            cluster_detection_method="slurm", initialization_timeout=INIT_TIMEOUT_S
        )
    else:
        jax.distributed.initialize(
            coordinator_address=penv.coordinator,
            num_processes=penv.num_processes,
            process_id=penv.process_id,
            initialization_timeout=INIT_TIMEOUT_S,
        )


def _check_port_free(address: str) -> None:
    """Refuse a coordinator port another program listens on (JAX's server would crash on it)."""
    port = int(address.rpartition(":")[2])
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError as err:
            raise DistributedError(
                f"{ENV_ADDRESS}={address!r}: port {port} is in use on this machine "
                f"({err.strerror}); give process 0 a free port"
            ) from None


def shutdown(penv: ProcessEnv) -> None:
    """``jax.distributed.shutdown`` for a multi-process ``penv`` (errors suppressed)."""
    if penv.multi:
        import jax

        with contextlib.suppress(Exception):
            jax.distributed.shutdown()


# ----------------------------------------------------------------------------- collectives


def process_index() -> int:
    """This process's index in the JAX job.

    Returns ``jax.process_index()`` (0 for one process).
    """
    import jax

    return jax.process_index()


def process_count() -> int:
    """The number of processes in the JAX job.

    Returns ``jax.process_count()``.
    """
    import jax

    return jax.process_count()


def barrier(name: str) -> None:
    """Every process waits here until all have arrived (no-op for one process).

    Args:
        name: the barrier's name (the same on every process).
    """
    if process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def broadcast_text(text: str, size: int = 4096) -> str:
    """Process 0's ``text`` on every process (UTF-8, at most ``size`` bytes)."""
    if process_count() == 1:
        return text
    import numpy as np
    from jax.experimental import multihost_utils

    data = text.encode()
    if len(data) > size:
        raise DistributedError(f"cannot broadcast {len(data)} bytes (limit {size})")
    buf = np.zeros(size + 4, np.uint8)
    buf[:4] = np.frombuffer(np.uint32(len(data)).tobytes(), np.uint8)
    buf[4 : 4 + len(data)] = np.frombuffer(data, np.uint8)
    out = np.asarray(multihost_utils.broadcast_one_to_all(buf))
    n = int(np.frombuffer(out[:4].tobytes(), np.uint32)[0])
    return out[4 : 4 + n].tobytes().decode()


def same_everywhere(text: str) -> bool:
    """Whether every process passed the same ``text`` (its SHA-256, gathered from all)."""
    if process_count() == 1:
        return True
    import hashlib

    import numpy as np
    from jax.experimental import multihost_utils

    digest = np.frombuffer(hashlib.sha256(text.encode()).digest(), np.uint8)
    every = np.asarray(multihost_utils.process_allgather(digest))
    return bool((every == every[0]).all())


def broadcast_flags(flags: Sequence[bool]) -> list[bool]:
    """Process 0's booleans on every process.

    Args:
        flags: the booleans (only process 0's are used; the same length everywhere).
    """
    if process_count() == 1 or not flags:
        return list(flags)
    import numpy as np
    from jax.experimental import multihost_utils

    out = multihost_utils.broadcast_one_to_all(np.asarray(flags, np.int32))
    return [bool(x) for x in np.asarray(out)]


# ----------------------------------------------------------------------------- local launcher


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_pythonpath(current: str = "") -> str:
    """``PYTHONPATH`` for child processes.

    The folders from which this process imported ``dedebate``, the experiment packages and the
    benchmarks, then ``current``. With ``python -P`` (no current folder on ``sys.path``) a child
    imports exactly these, never a package of the same name in the folder it was started from.

    Returns the path list, ``os.pathsep``-joined.
    """
    import site

    from dedebate.lab.registry import bench_package, experiment_packages

    implicit = {
        str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]
    }
    roots: list[str] = []
    for name in ("dedebate", *experiment_packages(), bench_package()):
        mod = sys.modules.get(name.split(".")[0])
        if mod is None:
            continue
        where = list(getattr(mod, "__path__", None) or [])
        if where:  # a package: the folder that holds it
            root = Path(where[0]).resolve().parent
        elif file := getattr(mod, "__file__", None):
            root = Path(file).resolve().parent
        else:
            continue
        if str(root) not in implicit and str(root) not in roots:
            roots.append(str(root))
    rest = [p for p in current.split(os.pathsep) if p and p not in roots]
    return os.pathsep.join([*roots, *rest])


def launch_local(
    argv: Sequence[str],
    n: int,
    *,
    environ: Mapping[str, str] | None = None,
    quiet_others: bool = True,
) -> int:
    """Run ``python -P -m dedebate.cli ARGV`` as ``n`` processes of one JAX job on 127.0.0.1.

    The children import dedebate and the experiments from where this process did
    (:func:`child_pythonpath`), never from the current folder. Process 0 keeps this terminal's
    stdout; the others' stdout is dropped when ``quiet_others`` (their stderr is kept). If one
    process fails, the others are terminated.

    Args:
        argv: the command-line arguments of each child.
        n: the number of processes, >= 1.
        environ: the children's base environment; None = ``os.environ``.
        quiet_others: drop the stdout of processes 1..n-1.

    Raises:
        DistributedError: ``n < 1``.
    """
    if n < 1:
        raise DistributedError(f"--processes {n}: must be >= 1")
    port = free_loopback_port()
    base = dict(os.environ if environ is None else environ)
    base["PYTHONPATH"] = child_pythonpath(base.get("PYTHONPATH", ""))
    procs: list[subprocess.Popen] = []
    for i in range(n):
        env = {
            **base,
            ENV_ADDRESS: f"127.0.0.1:{port}",
            ENV_BIND: f"127.0.0.1:{port}",
            ENV_COUNT: str(n),
            ENV_ID: str(i),
        }
        out = subprocess.DEVNULL if (quiet_others and i > 0) else None
        procs.append(
            subprocess.Popen(
                [sys.executable, "-P", "-m", "dedebate.cli", *argv], env=env, stdout=out
            )
        )
    codes: list[int | None] = [None] * n
    try:
        while any(c is None for c in codes):
            for i, p in enumerate(procs):
                if codes[i] is None:
                    codes[i] = p.poll()
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                first, code = failed[0]
                for i, p in enumerate(procs):
                    if codes[i] is None:
                        why = exit_reason(code)
                        eprint(f"dedebate: process {i} stopped: process {first} ended ({why})")
                        p.terminate()
                for i, p in enumerate(procs):
                    try:
                        codes[i] = p.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        codes[i] = p.wait()
                return 128 - code if code < 0 else code  # a signal N: 128 + N, as a shell
            time.sleep(0.1)
    except KeyboardInterrupt:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        raise
    return 0
