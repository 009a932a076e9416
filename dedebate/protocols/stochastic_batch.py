"""The fast host driver of the stochastic-oracle debate: many trials, exact (spec DED 5.5).

:func:`run_trials` plays every lane with :func:`dedebate.protocols.stochastic.play_fast` (the
binomial sampler without its rare exact fall-back loops), then replays exactly the few lanes that
needed one with :func:`dedebate.protocols.stochastic.play` and merges: the result equals
``vmap(play)`` lane for lane.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dedebate._xla_flags import OPT_LEVEL, capped_options
from dedebate.protocols.stochastic import DebateStatic, Outcome, play, play_fast
from dedebate.protocols.stochastic_interface import AlicePlayer, BobPlayer, Vera

# XLA options of the replay programs (the exact play of the few unresolved lanes): they run
# briefly, so they are compiled with fewer LLVM optimisations (less compile time, capped by the
# process's level); the values are the same.
REPLAY_COMPILE_OPTIONS = capped_options({OPT_LEVEL: 1})
LANES = "lanes"  # the mesh axis that splits the lanes over several devices


@functools.cache
def _batched(fast: bool, axes: tuple):
    fn = play_fast if fast else play
    return jax.jit(jax.vmap(fn, in_axes=(None,) + axes + (0,)), static_argnums=0,
                   compiler_options=None if fast else REPLAY_COMPILE_OPTIONS)


@functools.cache
def _fast_over(axes: tuple, devices: tuple):
    """:func:`play_fast` over lanes split among ``devices``, each device playing its own lanes
    inside a ``shard_map`` (the shared arguments go to every device whole). Partitioned by XLA
    instead (plain ``jit`` on sharded lanes), the sampler's vmapped loops would all-reduce their
    condition ("any lane still open") over the devices at every iteration. ``check_vma=False``:
    the sampler's custom batching rules do not track which values vary over the mesh; every
    output has the lanes first."""
    mesh = Mesh(np.asarray(devices, dtype=object), (LANES,))
    in_axes = axes + (0,)
    specs = tuple(PartitionSpec(LANES) if a == 0 else PartitionSpec() for a in in_axes)

    def lanes(spec, *args):
        batched = jax.vmap(functools.partial(play_fast, spec), in_axes=in_axes)
        return jax.shard_map(batched, mesh=mesh, in_specs=specs, out_specs=PartitionSpec(LANES),
                             check_vma=False)(*args)

    return jax.jit(lanes, static_argnums=0,
                   in_shardings=tuple(NamedSharding(mesh, p) for p in specs))


# One unbatched trial: the lazy mode's exact draws sit behind a lax.cond, which skips them only
# for an unbatched trial, so run_trials replays that mode's (rare) unresolved trials one by one.
_play_one = jax.jit(play, static_argnums=0, compiler_options=REPLAY_COMPILE_OPTIONS)


def _bucket(n: int) -> int:
    return max(8, 1 << (n - 1).bit_length())


def _take(tree, idx: np.ndarray):
    """Rows ``idx`` of every leaf, gathered on the host (no per-shape compilation); typed keys
    go through their raw key data."""

    def take(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            impl = jax.random.key_impl(x)
            return jax.random.wrap_key_data(np.asarray(jax.random.key_data(x))[idx], impl=impl)
        return np.asarray(x)[idx]

    return jax.tree.map(take, tree)


def run_trials(spec: DebateStatic, machine: Any, alice: AlicePlayer, bob: BobPlayer, vera: Vera,
               keys: jax.Array, axes: tuple = (None, None, None, None),
               max_lanes: int = 16384, devices: Sequence[Any] | None = None) -> Outcome:
    """Host driver: all trials of a batch, exact, fast.

    ``keys`` has one key per lane; ``axes[i]`` is 0 if ``(machine, alice, bob, vera)[i]`` is
    batched along its leading axis like the keys (e.g. a stacked zoo), None if shared. Runs
    :func:`play_fast` on every lane (in slices of at most ``max_lanes`` per device, padded to a
    power of two, so one compiled program serves many batch sizes; on several devices each
    device plays its share of a slice, with no communication), then replays the rare
    unresolved lanes with the exact :func:`play` on the first device (compiled only when first
    needed; one lane at a time in the lazy mode, whose exact draws an unbatched trial skips on
    one-word steps) and merges: the result equals ``vmap(play)``, on any number of devices.

    Args:
        spec: the static half of the debate.
        machine: the stochastic oracle machine.
        alice: Alice (batched on axis 0 where ``axes[1] == 0``).
        bob: Bob (likewise ``axes[2]``).
        vera: Vera (likewise ``axes[3]``).
        keys: typed PRNG keys ``[n]``, one per lane.
        axes: per argument ``(machine, alice, bob, vera)``, 0 (batched) or None (shared).
        max_lanes: the most lanes one device plays in one call.
        devices: the devices that share the lanes; None = every local device of JAX's default
            backend (one CPU device unless ``--xla_force_host_platform_device_count`` says more).

    Returns:
        The :class:`~dedebate.protocols.stochastic.Outcome` of every lane, numpy leaves ``[n]``.

    Raises:
        ValueError: ``axes`` not four entries of 0 or None, or ``devices`` empty.
    """
    axes = tuple(axes)
    if len(axes) != 4 or any(a not in (0, None) for a in axes):
        raise ValueError(f"axes={axes!r}: need four entries, each 0 (batched) or None (shared)")
    local = jax.local_devices()
    devices = tuple(local if devices is None else devices)
    if not devices:
        raise ValueError("devices=(): need at least one device to play the lanes on")
    fast = _batched(True, axes) if len(devices) == 1 else _fast_over(axes, devices)
    args = (machine, alice, bob, vera)
    n = int(keys.shape[0])
    per_device = min(_bucket(-(-n // len(devices))), max_lanes)  # few shapes: few compilations
    width = per_device * len(devices)
    # One device's calls (and the replays) go to devices[0]: by default already the default
    # device, where no context is entered (a default_device context is part of jit's cache key,
    # so a program compiled inside it is not reused outside, and vice versa).
    first = devices[0]
    with (contextlib.nullcontext() if first == local[0]
          else jax.default_device(first)):
        outs, flags = [], []
        for start in range(0, n, width):
            idx = np.arange(start, start + width) % n  # pad the last slice with repeats
            sl = [_take(a, idx) if ax == 0 else a for a, ax in zip(args, axes)]
            out, un = fast(spec, *sl, _take(keys, idx))
            stop = min(width, n - start)
            outs.append(jax.tree.map(lambda x, stop=stop: np.asarray(x)[:stop], out))
            flags.append(np.asarray(un)[:stop])
        out = jax.tree.map(lambda *xs: np.concatenate(xs), *outs)
        bad = np.nonzero(np.concatenate(flags))[0]
        if spec.bob_draw == "lazy":
            for i in bad:
                sl = [_take(a, i) if ax == 0 else a for a, ax in zip(args, axes)]
                exact = _play_one(spec, *sl, _take(keys, i))
                out = jax.tree.map(
                    lambda o, e, i=i: _set_rows(o, np.array([i]), np.asarray(e)[None]), out, exact)
            bad = bad[:0]
        for start in range(0, bad.size, per_device):
            chunk = bad[start:start + per_device]
            idx = np.resize(chunk, _bucket(chunk.size))
            sl = [_take(a, idx) if ax == 0 else a for a, ax in zip(args, axes)]
            exact = _batched(False, axes)(spec, *sl, _take(keys, idx))
            out = jax.tree.map(
                lambda o, e, rows=chunk: _set_rows(o, rows, np.asarray(e)[:rows.size]), out, exact)
    return jax.tree.map(jnp.asarray, out)


def _set_rows(o: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    o = o.copy()
    o[rows] = values
    return o
