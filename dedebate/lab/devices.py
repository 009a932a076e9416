"""Sharding a flat run axis over every device: one ``Mesh``, one ``NamedSharding``, no pmap.

A sweep (``dedebate/lab/sweep.py``) flattens its runs (points x seeds) into one leading axis.
:func:`evaluate` pads that axis to a multiple of the device count (repeating the last row; the
padded results are dropped), places it with ``NamedSharding(Mesh(jax.devices(), ("runs",)),
PartitionSpec("runs"))`` and runs ``jit(vmap(row_fn))`` on it, on several devices inside a
``shard_map``, so every device computes its slice and nothing is communicated. With several
processes (``jax.distributed``) ``jax.devices()`` is global: each process computes the rows of its
own devices, gathered with ``multihost_utils.process_allgather``.

A row's numbers depend only on its inputs (its dynamic parameters and key) and the number of
devices, never on the batch it ran in. Integer results are identical on 1 or many devices and
processes (tested with 4 fake CPU devices, ``XLA_FLAGS=--xla_force_host_platform_device_count=4``);
float32 results can differ in the last bits between device counts, because XLA compiles the
program for several devices with its passes in another order (docs/accelerators.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

AXIS = "runs"


@dataclasses.dataclass
class EvalInfo:
    """What :func:`evaluate` did: traces, calls, padding, devices and this process's rows."""

    traces: int = 0
    calls: int = 0
    rows: int = 0
    padded_rows: int = 0
    batch: int = 0
    devices: int = 1
    processes: int = 1
    local_rows: list[int] = dataclasses.field(default_factory=list)


def run_mesh(devices: list[Any] | None = None):
    """A 1-D mesh named ``runs`` over ``devices``.

    Args:
        devices: the devices; None = every device of every process.

    Returns the ``jax.sharding.Mesh``.
    """
    import jax
    from jax.sharding import Mesh

    devs = list(jax.devices() if devices is None else devices)
    return Mesh(np.asarray(devs, dtype=object), (AXIS,))


def padded_batch(n: int, n_devices: int, batch: int = 0) -> int:
    """Rows per compiled call: ``batch`` (0: all ``n``) rounded up to a multiple of the devices.

    Returns ``max(n_devices, ceil(min(batch, n) / n_devices) * n_devices)``.
    """
    size = n if batch <= 0 else min(batch, n)
    return max(n_devices, math.ceil(size / n_devices) * n_devices)


def _pad_rows(x: np.ndarray, total: int) -> np.ndarray:
    if x.shape[0] == total:
        return x
    pad = np.repeat(x[-1:], total - x.shape[0], axis=0)
    return np.concatenate([x, pad], axis=0)


def _to_host(x: Any) -> np.ndarray:
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def to_host(tree: Any) -> Any:
    """A pytree's arrays as numpy (a dict keeps its order): one ``device_get`` (every copy started
    at once), or each gathered from every process where one is not fully addressable."""
    import jax

    if all(getattr(x, "is_fully_addressable", True) for x in jax.tree.leaves(tree)):
        out = jax.tree.map(np.asarray, jax.device_get(tree))
    else:
        out = jax.tree.map(_to_host, tree)
    return {k: out[k] for k in tree} if isinstance(tree, dict) else out


_PROGRAMS: OrderedDict[Any, tuple[Any, dict[str, EvalInfo]]] = OrderedDict()
MAX_PROGRAMS = 32


def _program(
    row_fn, sharding, info: EvalInfo, cache_key: Any, options: dict[str, Any] | None = None
):
    """``jit(vmap(row_fn))`` with the run axis sharded, reused per ``cache_key``."""
    # ``jit(vmap(row_fn))`` with the run axis sharded (and XLA ``options``); with a ``cache_key``,
    # the same jitted program is reused by later calls with an equal key (so a repeated sweep in
    # one process, e.g. in a notebook, does not compile again). The trace counter goes to the
    # current ``info``.
    import jax

    from dedebate.programs import jit

    key = (
        None if cache_key is None else (cache_key, sharding, tuple(sorted((options or {}).items())))
    )
    if key is not None and key in _PROGRAMS:
        program, holder = _PROGRAMS[key]
        _PROGRAMS.move_to_end(key)
        holder["info"] = info
        return program
    holder = {"info": info}

    def counted(*row):
        holder["info"].traces += 1  # Python side effect: runs at trace time only
        return row_fn(*row)

    body = jax.vmap(counted)
    if sharding.mesh.size > 1:
        # Each device runs the rows it holds. Partitioned by XLA instead (plain jit), a vmapped
        # data-dependent loop, e.g. the binomial sampler's, all-reduces its condition ("any row
        # still open") over the devices at every iteration. check_vma=False: custom batching
        # rules do not track which values vary over the mesh; every output has the rows first.
        body = jax.shard_map(
            body,
            mesh=sharding.mesh,
            in_specs=sharding.spec,
            out_specs=sharding.spec,
            check_vma=False,
        )
    program = jit(body, in_shardings=sharding, out_shardings=sharding, options=options)
    if key is not None:
        _PROGRAMS[key] = (program, holder)
        while len(_PROGRAMS) > MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)
    return program


def clear_program_cache() -> None:
    """Forget the cached sweep programs (the next sweep compiles afresh)."""
    _PROGRAMS.clear()


def evaluate(
    row_fn: Callable[..., dict[str, Any]],
    inputs: Any,
    n: int,
    *,
    devices: list[Any] | None = None,
    batch: int = 0,
    info: EvalInfo | None = None,
    cache_key: Any = None,
    options: dict[str, Any] | None = None,
    extras: bool = False,
) -> Any:
    """``vmap(row_fn)`` over the leading axis of every leaf of ``inputs`` (``n`` rows), sharded.

    ``row_fn(*inputs_row)`` must return a dict of scalars, or ``(that dict, extras)`` with
    ``extras`` any pytree of arrays (a run's host inputs for checks and figures; a sweep drops
    them). Every process gets every row. Compiles at most once per call: all chunks have the
    same padded size; with ``cache_key``, not at all when an earlier call compiled the same
    program for the same shapes.

    Args:
        row_fn: the pure per-row function.
        inputs: a tuple of pytrees whose leaves have a leading ``[n]`` axis.
        n: the number of rows.
        devices: the devices to shard over; None = all.
        batch: the most rows per compiled call; 0 = all.
        info: an :class:`EvalInfo` to fill in; None = a fresh one.
        cache_key: hashable; equal keys promise the same ``row_fn``.
        options: XLA options of the compiled program (an experiment's
            ``COMPILE_OPTIONS``, so that its sweep compiles as its run does: the options can
            change the rounding).
        extras: also return the extras.

    Returns a dict of ``[n]`` numpy arrays; with ``extras=True``, ``(that dict, the extras as numpy
    with a leading [n] axis)``.

    Raises:
        TypeError: ``row_fn`` returns something other than a dict of scalars.
    """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    info = info if info is not None else EvalInfo()
    mesh = run_mesh(devices)
    sharding = NamedSharding(mesh, PartitionSpec(AXIS))
    n_dev = mesh.size
    size = padded_batch(n, n_dev, batch)
    chunks = math.ceil(n / size)
    total = size * chunks
    host = jax.tree.map(lambda a: _pad_rows(np.asarray(a), total), inputs)
    program = _program(row_fn, sharding, info, cache_key, options)
    pieces: list[dict[str, np.ndarray]] = []
    extra_pieces: list[Any] = []
    local: list[int] = []
    for c in range(chunks):
        lo = c * size

        def place(a, lo=lo):
            part = a[lo : lo + size]
            return jax.make_array_from_callback(part.shape, sharding, lambda idx: part[idx])

        args = jax.tree.map(place, host)
        out = program(*args)
        if isinstance(out, tuple) and len(out) == 2:
            out, more = out
            if extras:
                extra_pieces.append(to_host(more))
        if not isinstance(out, dict):
            raise TypeError(
                f"a sweep's fn must return a dict of scalar metrics, got {type(out).__name__}"
            )
        bad = {k: tuple(v.shape[1:]) for k, v in out.items() if v.ndim != 1}
        if bad:
            k, shape = next(iter(bad.items()))
            raise TypeError(f"a sweep's fn must return scalar metrics; {k!r} has shape {shape}")
        first = next(iter(out.values()), None)
        if first is not None:
            for shard in first.addressable_shards:
                s = shard.index[0]
                local.extend(range(lo + (s.start or 0), lo + (size if s.stop is None else s.stop)))
        pieces.append(to_host(out))
        info.calls += 1
    result = {k: np.concatenate([p[k] for p in pieces])[:n] for k in (pieces[0] if pieces else {})}
    info.rows += n
    info.padded_rows += total - n
    info.batch = size
    info.devices = n_dev
    info.processes = jax.process_count()
    info.local_rows = sorted({r for r in local if r < n})
    if extras:
        more = (
            jax.tree.map(lambda *p: np.concatenate(p)[:n], *extra_pieces) if extra_pieces else None
        )
        return result, more
    return result


# ---- batch sizes from the device's memory ------------------------------------------------------
MEMORY_FRACTION = 0.25  # share of a device's memory one compiled batch may plan for


def device_memory_bytes(device: Any = None) -> int | None:
    """The memory of ``device`` in bytes, as its backend reports it (``memory_stats()``).

    Args:
        device: a JAX device; None = the first of ``jax.devices()``.

    Returns ``bytes_limit``, or None where the backend reports none (a CPU).
    """
    if device is None:
        import jax

        device = jax.devices()[0]
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - backends without memory statistics raise or return None
        return None
    limit = stats.get("bytes_limit")
    return int(limit) if isinstance(limit, (int, float)) and limit > 0 else None


def peak_device_bytes(devices: list[Any] | None = None) -> int | None:
    """The most memory any of ``devices`` has held at once so far (``peak_bytes_in_use``).

    Returns the largest peak in bytes, or None where no device reports one (a CPU).
    """
    if devices is None:
        import jax

        devices = jax.local_devices()
    peaks = []
    for d in devices:
        try:
            peak = (d.memory_stats() or {}).get("peak_bytes_in_use")
        except Exception:  # noqa: BLE001 - backends without memory statistics
            continue
        if isinstance(peak, (int, float)) and peak >= 0:
            peaks.append(int(peak))
    return max(peaks) if peaks else None


def lanes_for_memory(
    bytes_per_lane: float,
    *,
    default: int,
    lo: int,
    hi: int,
    multiple: int = 256,
    fraction: float = MEMORY_FRACTION,
    memory_bytes: int | None = None,
    device: Any = None,
) -> int:
    """The lanes (debates, trials, rows) of one full-size compiled batch, from the device's memory.

    ``fraction * memory_bytes / bytes_per_lane``, rounded down to a multiple of ``multiple``
    and clipped to ``[lo, hi]``; ``default`` (clipped) where the device reports no memory (a
    CPU). Callers use it only where their numbers do not depend on the batch (lanes are indexed
    globally and keyed independently of the batch they run in), so it changes memory use and
    speed, never a result.

    Args:
        bytes_per_lane: the memory one lane needs, > 0.
        default: the lanes where no memory is reported.
        lo: the fewest lanes.
        hi: the most lanes.
        multiple: the lanes are a multiple of this.
        fraction: the share of the memory one batch may plan for, in (0, 1].
        memory_bytes: the memory; None = :func:`device_memory_bytes` of ``device``.
        device: the device to ask.

    Raises:
        ValueError: a bad ``bytes_per_lane``, ``fraction``, ``lo``, ``hi`` or ``multiple``.
    """
    if not bytes_per_lane > 0:
        raise ValueError(f"bytes_per_lane={bytes_per_lane!r}: must be > 0")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction={fraction!r}: must be in (0, 1]")
    if not (1 <= lo <= hi and multiple >= 1):
        raise ValueError(
            f"lo={lo}, hi={hi}, multiple={multiple}: need 1 <= lo <= hi, multiple >= 1"
        )
    mem = memory_bytes if memory_bytes is not None else device_memory_bytes(device)
    if mem is None:
        return int(min(max(default, lo), hi))
    lanes = int(fraction * mem // bytes_per_lane) // multiple * multiple
    return int(min(max(lanes, lo), hi))
