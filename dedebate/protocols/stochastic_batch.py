"""The stochastic-oracle debate over many trials, exact and on the device (spec DED 5.5).

:func:`run_trials` plays every lane with :func:`dedebate.protocols.stochastic.play_fast` (the
binomial sampler without its rare exact fall-back loops), then, inside the same compiled program,
replays exactly the few lanes that needed one with :func:`dedebate.protocols.stochastic.play`
(:func:`replay_unresolved`): the result equals ``vmap(play)`` lane for lane, and nothing goes
through the host but the arguments, once.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dedebate.programs import FAST_COMPILE, jit, program_cache
from dedebate.protocols.stochastic import DebateStatic, Outcome, play, play_fast
from dedebate.protocols.stochastic_interface import AlicePlayer, BobPlayer, Vera

LANES = "lanes"  # the mesh axis that splits the lanes over several devices
RUN_WORK = 1 << 26
"""Debate steps (lanes x T) of a :func:`run_trials` call from which each slice plays and replays
as one program (no host read between them); below, the replays compile only when a slice has an
unresolved lane, and a run does not pay that program's compile where it has none."""


def replay_chunk(lanes: int) -> int:
    """Lanes one exact replay pass plays: ``max(64, lanes // 64)``, at most ``lanes``.

    A sixty-fourth of the batch keeps one pass a small share of the batch's work, and the usual
    unresolved share (well under 1% of the lanes) fits one pass.
    """
    return max(1, min(lanes, max(64, lanes // 64)))


def replay_unresolved(
    exact: Callable, out, unresolved: jax.Array, chunk: int, one_by_one: bool = False
):
    """``out`` with every lane where ``unresolved`` replaced by ``exact(lane index)``, in-program.

    The unresolved lanes' indices are compacted (``jnp.nonzero``) and replayed ``chunk`` at a time
    (vmapped, or one by one unbatched where ``one_by_one``, e.g. the lazy mode, whose exact draws an
    unbatched trial skips behind a ``lax.cond``) in a ``while_loop`` of ``ceil(unresolved / chunk)``
    passes: none when every lane resolved, and every unresolved lane replayed however many there
    are, so the result is always exact. Pure, jit- and vmappable.
    """
    n = unresolved.shape[0]
    chunk = 1 if one_by_one else max(1, min(chunk, n))
    order = jnp.nonzero(unresolved, size=-(-n // chunk) * chunk, fill_value=n)[0]
    todo = jnp.sum(unresolved, dtype=jnp.int32)
    play_chunk = functools.partial(jax.lax.map, exact) if one_by_one else jax.vmap(exact)

    def replay(c):
        start, out = c
        idx = jax.lax.dynamic_slice_in_dim(order, start, chunk)
        got = play_chunk(jnp.minimum(idx, n - 1).astype(jnp.int32))
        # the buffer's padding (index n) is dropped
        return start + chunk, jax.tree.map(lambda o, g: o.at[idx].set(g, mode="drop"), out, got)

    return jax.lax.while_loop(lambda c: c[0] < todo, replay, (jnp.int32(0), out))[1]


def _fast(spec: DebateStatic, axes: tuple, chunk: int, machine, alice, bob, vera, keys):
    """:func:`play_fast` on every lane: ``(outcomes, unresolved)``."""
    return jax.vmap(functools.partial(play_fast, spec), in_axes=axes + (0,))(
        machine, alice, bob, vera, keys
    )


def _replay(
    spec: DebateStatic, axes: tuple, chunk: int, out, unresolved, machine, alice, bob, vera, keys
):
    """``out`` with its unresolved lanes replayed by the exact :func:`play`."""
    args = (machine, alice, bob, vera)

    def exact(i):
        lane = [jax.tree.map(lambda x: x[i], y) if ax == 0 else y for y, ax in zip(args, axes)]
        machine_i, alice_i, bob_i, vera_i = lane
        return play(spec, machine_i, alice_i, bob_i, vera_i, keys[i])

    return replay_unresolved(exact, out, unresolved, chunk, spec.bob_draw == "lazy")


def _exact(spec: DebateStatic, axes: tuple, chunk: int, *args):
    """Every lane's exact outcome in one program: :func:`_fast`, then :func:`_replay`."""
    return _replay(spec, axes, chunk, *_fast(spec, axes, chunk, *args), *args)


STAGES: dict[str, Callable[..., Any]] = {"fast": _fast, "replay": _replay, "exact": _exact}


@program_cache
def _program(stage: str, axes: tuple, devices: tuple):
    """One slice's :data:`STAGES` ``stage`` as one program, sharded by lanes over the devices."""
    # On several devices each device plays (and replays) its own lanes inside a shard_map (the
    # shared arguments go to every device whole). Partitioned by XLA instead (plain jit on sharded
    # lanes), the sampler's vmapped loops would all-reduce their condition ("any lane still open")
    # over the devices at every iteration. check_vma=False: the sampler's custom batching rules do
    # not track which values vary over the mesh; every output has the lanes first. On one device
    # the replays, which play few lanes and run briefly, compile with FAST_COMPILE (same values).
    fn = STAGES[stage]
    if len(devices) == 1:
        return jit(
            lambda spec, chunk, *a: fn(spec, axes, chunk, *a),
            static_argnums=(0, 1),
            options=FAST_COMPILE if stage == "replay" else None,
        )
    specs = (PartitionSpec(LANES),) * 2 * (stage == "replay") + _specs(axes)
    mesh = Mesh(np.asarray(devices, dtype=object), (LANES,))

    def lanes(spec: DebateStatic, chunk, *args):
        return jax.shard_map(
            functools.partial(fn, spec, axes, chunk),
            mesh=mesh,
            in_specs=specs,
            out_specs=PartitionSpec(LANES),
            check_vma=False,
        )(*args)

    return jit(
        lanes, static_argnums=(0, 1), in_shardings=tuple(NamedSharding(mesh, p) for p in specs)
    )


def _specs(axes: tuple) -> tuple:
    return tuple(PartitionSpec(LANES) if a == 0 else PartitionSpec() for a in axes + (0,))


def _bucket(n: int) -> int:
    return max(8, 1 << (n - 1).bit_length())


@jit(static_argnums=(0, 1))
def _starts(count: int, width: int) -> jax.Array:
    return jnp.arange(count, dtype=jnp.int32) * width


@jit(static_argnums=(2, 3))
def _slice(tree, start, n: int, width: int):
    """Lanes ``start .. start + width - 1`` of every leaf (lanes ``n`` and up repeat the first)."""
    idx = (start + jnp.arange(width)) % n
    return jax.tree.map(lambda x: x[idx], tree)


@jit
def _add_unresolved(total, unresolved):
    return total + jnp.sum(unresolved, dtype=jnp.int32)


@jit(static_argnums=1)
def _buffer(part, lanes: int):
    return jax.tree.map(lambda p: jnp.zeros((lanes,) + p.shape[1:], p.dtype), part)


@jit(donate_argnums=0)
def _put(buffer, part, start):
    return jax.tree.map(
        lambda b, p: jax.lax.dynamic_update_slice_in_dim(b, p, start, 0), buffer, part
    )


@jit(static_argnums=1)
def _trim(tree, n: int):
    return jax.tree.map(lambda x: x[:n], tree)


def run_trials(
    spec: DebateStatic,
    machine: Any,
    alice: AlicePlayer,
    bob: BobPlayer,
    vera: Vera,
    keys: jax.Array,
    axes: tuple = (None, None, None, None),
    max_lanes: int = 16384,
    devices: Sequence[Any] | None = None,
) -> Outcome:
    """The :class:`~dedebate.protocols.stochastic.Outcome` of every lane ``[n]``, exact, on device.

    ``keys`` has one key per lane; ``axes[i]`` is 0 if ``(machine, alice, bob, vera)[i]`` is batched
    along its leading axis like the keys (e.g. a stacked zoo), None if shared. The lanes play in
    slices of at most ``max_lanes`` per device of ``devices`` (None: every local device), padded to
    a power of two: :func:`play_fast` on every lane, then the exact :func:`play` on the rare
    unresolved lanes, in-program (:func:`replay_unresolved`). The result equals ``vmap(play)`` on
    any number of devices; the scheme is in docs/accelerators.md ("Hot paths that may be slow on a
    GPU").
    """
    axes = tuple(axes)
    if len(axes) != 4 or any(a not in (0, None) for a in axes):
        raise ValueError(f"axes={axes!r}: need four entries, each 0 (batched) or None (shared)")
    local = jax.local_devices()
    devices = tuple(local if devices is None else devices)
    if not devices:
        raise ValueError("devices=(): need at least one device to play the lanes on")
    n = int(keys.shape[0])
    if n < 1:
        raise ValueError("keys has no lane: need at least one trial key")
    per_device = min(_bucket(-(-n // len(devices))), max_lanes)  # few shapes: few compilations
    width = per_device * len(devices)
    chunk = replay_chunk(per_device)
    in_one = n * spec.T >= RUN_WORK
    # One device's calls go to devices[0]: by default already the default device, where no
    # context is entered (a default_device context is part of jit's cache key, so a program
    # compiled inside it is not reused outside, and vice versa).
    first = devices[0]
    with contextlib.nullcontext() if first == local[0] else jax.default_device(first):
        args = jax.device_put((machine, alice, bob, vera, keys), first)  # the one host copy
        batched = tuple(a for a, ax in zip(args, axes + (0,)) if ax == 0)
        starts = jnp.unstack(_starts(-(-n // width), width))
        sliced = []
        for start in starts:
            it = iter(_slice(batched, start, n, width))
            sliced.append([next(it) if ax == 0 else a for a, ax in zip(args, axes + (0,))])
        if len(devices) > 1:  # each device's share of every slice (no host copy)
            mesh = Mesh(np.asarray(devices, dtype=object), (LANES,))
            put = [NamedSharding(mesh, p) for p in _specs(axes)]
            sliced = [jax.device_put(a, put) for a in sliced]
        if in_one:
            parts = [_program("exact", axes, devices)(spec, chunk, *a) for a in sliced]
        else:
            fast = [_program("fast", axes, devices)(spec, chunk, *a) for a in sliced]
            total = functools.reduce(
                _add_unresolved, [un for _, un in fast], _starts(1, 0)
            )  # [0], on the device
            replay = _program("replay", axes, devices)
            parts = (
                [replay(spec, chunk, out, un, *a) for (out, un), a in zip(fast, sliced)]
                if jax.device_get(total).any()
                else [out for out, _ in fast]
            )  # 1 read
        if len(parts) == 1:
            return _trim(parts[0], n)
        out = _buffer(parts[0], len(parts) * width)
        for part, start in zip(parts, starts):
            out = _put(out, part, start)
        return _trim(out, n)
