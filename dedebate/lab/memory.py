"""A memory budget, checked before a run or a sweep starts its work.

An experiment may declare ``memory_bytes(cfg)`` next to its ``Config``: the peak bytes one run of
``cfg`` holds, from its sizes, as an int or as named terms (``{what: bytes}``, summed; the
largest is named when a run is refused). :func:`check_run` and :func:`check_sweep` compare that
estimate with the config's ``memory_limit`` (``auto``: the memory this machine has available)
and refuse what does not fit in one line, before a run directory is written. A sweep's estimate
is its largest static group's: the rows one memory holds at once (:func:`rows_at_once`: the
rows of one compiled call, ``sweep.batch`` else the whole group, padded to the devices) times one
run's estimate, an upper bound, as a run does more than its point. Impure
(reads ``/proc/meminfo`` and the devices' memory): lab only. More: docs/lab.md, "Memory budget".
"""

from __future__ import annotations

import copy
import itertools
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dedebate.lab.config_schema import parse_limit

OPTION = "memory_limit"


class MemoryBudgetError(ValueError):
    """A run or sweep whose estimated memory is over the limit (one line; exit 2)."""


def format_bytes(n: float) -> str:
    """Bytes in binary units, three significant digits.

    Returns text such as ``1.5 GiB`` (below 1 KiB: ``512 B``).
    """
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            text = f"{n / size:.3g}"
            return f"{n / size:.0f} {unit}" if "e" in text else f"{text} {unit}"  # not 1e+03
    return f"{int(n)} B"


def host_available_bytes() -> int | None:
    """The host memory available to a new process.

    Returns ``MemAvailable`` of /proc/meminfo, else the free physical pages (``os.sysconf``), in
    bytes; None where neither is known.
    """
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def available_bytes() -> int | None:
    """The memory a run may use.

    Returns one accelerator's memory (``bytes_limit``) where the default device reports one, else
    the host's available memory, in bytes; None where neither is known.
    """
    from dedebate.lab.devices import device_memory_bytes

    return device_memory_bytes() or host_available_bytes()


def rows_at_once(rows: int, batch: int) -> int:
    """The rows one memory holds when ``rows`` are evaluated ``batch`` per call (0: all) over the
    devices, padded to a multiple of them (``devices.padded_batch``): all of this process's on a
    CPU (its devices share the host's memory), one device's share on an accelerator."""
    import jax

    from dedebate.lab.devices import padded_batch

    padded, n = padded_batch(rows, jax.device_count(), batch), jax.device_count()
    if jax.default_backend() != "cpu":
        return padded // n
    return padded * jax.local_device_count() // n


def run_terms(module: Any, params: Any) -> dict[str, int] | None:
    """An experiment's memory estimate of one run.

    Returns ``{term: bytes}`` (an int estimate is the one term ``run``), or None where the module
    declares no ``memory_bytes``.
    """
    fn = getattr(module, "memory_bytes", None)
    if not callable(fn):
        return None
    est = fn(params)
    return {k: int(v) for k, v in est.items()} if isinstance(est, Mapping) else {"run": int(est)}


def _check(
    what: str, terms: Mapping[str, int], limit_value: Any, times: int = 1, batch: bool = False
) -> None:
    """Raise :class:`MemoryBudgetError` where ``times`` x the sum of ``terms`` is over the limit;
    ``batch``: the ``times`` rows are one call's, which ``sweep.batch`` can make fewer."""
    limit = parse_limit(limit_value)
    source = f"allowed by {OPTION}={limit_value}"
    if limit is None:
        limit, source = available_bytes(), "available on this machine"
        if limit is None:
            return
    need = times * sum(terms.values())
    if need <= limit:
        return
    name, largest = max(terms.items(), key=lambda kv: kv[1])
    biggest = f"; largest term: {name}, {format_bytes(times * largest)}" if len(terms) > 1 else ""
    fit = limit // max(1, sum(terms.values()))
    fewer = f"set sweep.batch={fit} (rows at once), " if batch and 1 <= fit < times else ""
    raise MemoryBudgetError(
        f"{what} needs about {format_bytes(need)} of memory (estimated from its sizes"
        f"{biggest}), more than the {format_bytes(limit)} {source}; shrink its sizes, {fewer}or "
        f"set {OPTION}=BYTES (e.g. {OPTION}={math.ceil(need / 2**30)}GiB) to run it anyway"
    )


def check_run(module: Any, cfg: Any) -> None:
    """Refuse a run whose estimate is over ``cfg.memory_limit`` (:class:`MemoryBudgetError`).

    Args:
        module: the experiment module (its ``memory_bytes``, if any).
        cfg: the resolved run config.
    """
    terms, rows = _run_estimate(module, cfg)
    if terms is not None:
        what = cfg.experiment if rows == 1 else f"{cfg.experiment} ({rows} padded rows at once)"
        _check(what, terms, cfg.memory_limit, times=rows)


def run_bytes(module: Any, cfg: Any) -> int:
    """The bytes :func:`check_run` estimates for a run (0 where the module declares none)."""
    terms, rows = _run_estimate(module, cfg)
    return 0 if terms is None else rows * sum(terms.values())


def _run_estimate(module: Any, cfg: Any) -> tuple[dict[str, int] | None, int]:
    """A run's terms and the rows it holds at once (a vmapped run: its point on every device)."""
    from dedebate.lab.sweep_plan import is_sweepable

    terms = run_terms(module, cfg.params)
    return terms, (rows_at_once(1, 0) if terms is not None and is_sweepable(module) else 1)


def workers_that_fit(needs: list[int], jobs: int, limit_value: Any) -> tuple[int, str | None]:
    """How many of ``jobs`` experiments may run side by side: the most whose largest estimates
    (any of them may run together) fit ``limit_value`` together, at least 1.

    Returns ``(workers, why)``: ``why`` one line when fewer than ``jobs``, else None.
    """
    limit = parse_limit(limit_value)
    source = f"allowed by {OPTION}={limit_value}" if limit is not None else "available"
    limit = available_bytes() if limit is None else limit
    largest = sorted(needs, reverse=True)
    workers = jobs
    while limit is not None and workers > 1 and sum(largest[:workers]) > limit:
        workers -= 1
    if workers == jobs:
        return jobs, None
    return workers, (
        f"{jobs} experiments side by side may need about {format_bytes(sum(largest[:jobs]))} of "
        f"memory together (their estimates), more than the {format_bytes(limit or 0)} "
        f"{source}; running {workers} at a time"
    )


def _unchecked(params: Any, values: Mapping[str, Any]) -> Any:
    """A copy of ``params`` with ``values`` set (lists as tuples), without building a Config."""
    new = copy.copy(params)
    for k, v in values.items():
        object.__setattr__(new, k, tuple(v) if isinstance(v, list) else v)
    return new


def check_sweep(module: Any, cfg: Any, done: list[dict[str, Any]] | None = None) -> None:
    """Refuse a sweep whose largest static group still to compute is over ``cfg.memory_limit``.

    Every static group is visited once (its sizes set on a copy of the params, unchecked: each
    axis value was checked alone, and :func:`memory_bytes` reads sizes only); a group of a vmapped
    experiment evaluates ``sweep.batch`` rows at once (0: all its points x seeds), a group of a
    full-run experiment one run at a time. Points whose Config is invalid are left to the plan.

    Args:
        module: the experiment module.
        cfg: the resolved run config with a ``sweep`` block.
        done: the static values of the groups a resume reads from disk (not checked).
    """
    from dedebate.lab.sweep_plan import is_sweepable

    if not callable(getattr(module, "memory_bytes", None)):
        return
    sweep = cfg.sweep
    vmapped = is_sweepable(module)
    dynamic = set(getattr(module, "DYNAMIC", ()) or ()) if vmapped else set()
    static = [a for a in sweep.axes if a not in dynamic]
    per_group = math.prod(len(v) for a, v in sweep.axes.items() if a in dynamic)
    seeds = sweep.seeds if isinstance(sweep.seeds, int) else len(sweep.seeds)
    rows = rows_at_once(per_group * seeds, sweep.batch) if vmapped else 1
    first = {a: v[0] for a, v in sweep.axes.items() if a in dynamic and v}
    worst: tuple[int, dict[str, int], dict[str, Any]] | None = None
    for combo in itertools.product(*(sweep.axes[a] for a in static)):
        values = dict(zip(static, combo))
        if values in (done or []):
            continue
        try:
            terms = run_terms(module, _unchecked(cfg.params, {**first, **values}))
        except (ValueError, TypeError, ArithmeticError):
            continue  # an invalid combination: the plan refuses it when its group is built
        if terms is not None and (worst is None or sum(terms.values()) > worst[0]):
            worst = (sum(terms.values()), terms, values)
    if worst is not None:
        where = ", ".join(f"{k}={v!r}" for k, v in worst[2].items()) or "its one group"
        _check(
            f"{cfg.experiment} sweep ({rows} row(s) at once, at {where})",
            worst[1],
            cfg.memory_limit,
            times=rows,
            batch=vmapped,
        )
