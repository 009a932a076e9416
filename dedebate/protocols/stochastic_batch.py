"""The fast host driver of the stochastic-oracle debate: many trials, exact (spec DED 5.5).

:func:`run_trials` plays every lane with :func:`dedebate.protocols.stochastic.play_fast` (the
binomial sampler without its rare exact fall-back loops), then replays exactly the few lanes that
needed one with :func:`dedebate.protocols.stochastic.play` and merges: the result equals
``vmap(play)`` lane for lane.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.protocols.stochastic import DebateStatic, Outcome, play, play_fast
from dedebate.protocols.stochastic_interface import AlicePlayer, BobPlayer, Vera

# XLA options of the replay programs (the exact play of the few unresolved lanes): they run
# briefly, so they are compiled with fewer LLVM optimisations (less compile time); the values are
# the same.
REPLAY_COMPILE_OPTIONS = {"xla_backend_optimization_level": 1}


@functools.cache
def _batched(fast: bool, axes: tuple):
    fn = play_fast if fast else play
    return jax.jit(jax.vmap(fn, in_axes=(None,) + axes + (0,)), static_argnums=0,
                   compiler_options=None if fast else REPLAY_COMPILE_OPTIONS)


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
               max_lanes: int = 16384) -> Outcome:
    """Host driver: all trials of a batch, exact, fast.

    ``keys`` has one key per lane; ``axes[i]`` is 0 if ``(machine, alice, bob, vera)[i]`` is
    batched along its leading axis like the keys (e.g. a stacked zoo), None if shared. Runs
    :func:`play_fast` on every lane (in slices of at most ``max_lanes``, padded to a power of
    two, so one compiled program serves many batch sizes), then replays the rare unresolved
    lanes with the exact :func:`play` (compiled only when first needed; one lane at a time in
    the lazy mode, whose exact draws an unbatched trial skips on one-word steps) and merges: the
    result equals ``vmap(play)``.

    Args:
        spec: the static half of the debate.
        machine: the stochastic oracle machine.
        alice: Alice (batched on axis 0 where ``axes[1] == 0``).
        bob: Bob (likewise ``axes[2]``).
        vera: Vera (likewise ``axes[3]``).
        keys: typed PRNG keys ``[n]``, one per lane.
        axes: per argument ``(machine, alice, bob, vera)``, 0 (batched) or None (shared).
        max_lanes: the largest slice played by one call.

    Returns:
        The :class:`~dedebate.protocols.stochastic.Outcome` of every lane, numpy leaves ``[n]``.

    Raises:
        ValueError: ``axes`` not four entries of 0 or None.
    """
    axes = tuple(axes)
    if len(axes) != 4 or any(a not in (0, None) for a in axes):
        raise ValueError(f"axes={axes!r}: need four entries, each 0 (batched) or None (shared)")
    args = (machine, alice, bob, vera)
    n = int(keys.shape[0])
    width = min(_bucket(n), max_lanes)  # few distinct shapes: few compilations
    outs, flags = [], []
    for start in range(0, n, width):
        idx = np.arange(start, start + width) % n  # pad the last slice with repeats
        sl = [_take(a, idx) if ax == 0 else a for a, ax in zip(args, axes)]
        out, un = _batched(True, axes)(spec, *sl, _take(keys, idx))
        stop = min(width, n - start)
        outs.append(jax.tree.map(lambda x, stop=stop: np.asarray(x)[:stop], out))
        flags.append(np.asarray(un)[:stop])
    out = jax.tree.map(lambda *xs: np.concatenate(xs), *outs)
    bad = np.nonzero(np.concatenate(flags))[0]
    if spec.bob_draw == "lazy":
        for i in bad:
            sl = [_take(a, i) if ax == 0 else a for a, ax in zip(args, axes)]
            exact = _play_one(spec, *sl, _take(keys, i))
            out = jax.tree.map(lambda o, e, i=i: _set_rows(o, np.array([i]), np.asarray(e)[None]),
                               out, exact)
        bad = bad[:0]
    for start in range(0, bad.size, width):
        chunk = bad[start:start + width]
        idx = np.resize(chunk, _bucket(chunk.size))
        sl = [_take(a, idx) if ax == 0 else a for a, ax in zip(args, axes)]
        exact = _batched(False, axes)(spec, *sl, _take(keys, idx))
        out = jax.tree.map(lambda o, e, rows=chunk: _set_rows(o, rows, np.asarray(e)[:rows.size]),
                           out, exact)
    return jax.tree.map(jnp.asarray, out)


def _set_rows(o: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    o = o.copy()
    o[rows] = values
    return o
