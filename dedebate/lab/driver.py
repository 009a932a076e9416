"""One chunked training driver: run, checkpoint, restore, skip, log.

Every experiment that trains runs its training as ``n_chunks`` host-level chunks through
:func:`run_chunks`, which owns everything around the chunk itself: the state passed from chunk
to chunk, the monitors of each chunk placed in full-length buffers per track, an Orbax checkpoint
after every ``every``-th chunk (a resumed run skips the restored chunks and is bit-equal to an
uninterrupted one), host logging with explicit steps that never go back (on resume the rows of
chunks run again are truncated first), the progress bar and each chunk's wall seconds. Within a
chunk the order is: run it, log its rows, save (if due), update the bar. More: docs/lab.md,
"Chunked training".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from dedebate.lab.rundir import eprint

__all__ = ["Chunked", "checkpoint_template", "run_chunks"]


@dataclasses.dataclass
class Chunked:
    """What :func:`run_chunks` returns.

    ``state``: the state after the last chunk; ``monitors``: ``{track: pytree}`` of numpy arrays,
    each track's chunks placed along the time axis (the template's entries beyond what the chunks
    wrote are left as they were); ``restored``: chunks restored from a checkpoint; ``ran``: chunks
    run by this attempt; ``wall_s``: seconds per chunk (0.0 for restored chunks), including any
    compilation inside ``chunk_fn``; ``next_step``: one more than the last logged step (the
    first step for rows logged after training).
    """

    state: Any
    monitors: dict[str, Any]
    restored: int
    ran: int
    wall_s: list[float]
    next_step: int


def _place(buf: Any, new: Any, pos: int, axis: int) -> Any:
    """``buf`` with ``new`` written at ``pos`` along ``axis``, in fresh arrays."""
    # ``buf`` with ``new`` written at ``pos`` along ``axis`` (fresh arrays: a pending asynchronous
    # save may still hold the old ones).
    import jax

    def one(b, n):
        b, n = np.asarray(b), np.asarray(n)
        stop = pos + n.shape[axis]
        if stop > b.shape[axis]:
            raise ValueError(
                f"monitors: a chunk writes [{pos}, {stop}) along axis {axis}, but "
                f"the template has length {b.shape[axis]} there"
            )
        out = np.array(b, copy=True)
        out[(slice(None),) * axis + (slice(pos, stop),)] = n
        return out

    return jax.tree_util.tree_map(one, buf, new)


def _like(template: Any, x: Any) -> Any:
    """A restored leaf as the template's kind: numpy for numpy, else as restored."""
    # A restored leaf as the template's kind: numpy for numpy, else as restored (an uncommitted JAX
    # array, :func:`dedebate.lab.checkpoint.uncommitted`).
    if isinstance(template, (np.ndarray, np.generic)):
        return np.array(x)
    return x


def _pack(
    done: int, next_step: int, pos: dict[str, int], state: Any, mons: dict[str, Any]
) -> dict[str, Any]:
    """The checkpointed tree (no empty ``pos``/``monitors`` entries without monitors)."""
    out = {"done": np.int32(done), "next_step": np.int32(next_step), "state": state}
    if mons:
        out |= {"pos": {k: np.int32(v) for k, v in pos.items()}, "monitors": mons}
    return out


def checkpoint_template(
    init_state: Any, monitors: Mapping[str, Any] | None = None, first_step: int = 0
) -> dict[str, Any]:
    """The tree :func:`run_chunks` checkpoints, for ``init_state`` and ``monitors`` (a
    template to read one of its checkpoints with :meth:`Checkpointer.restore`).

    Args:
        init_state: the training state before the first chunk.
        monitors: the template ``{track: pytree}`` of full-length monitor buffers.
        first_step: the first log step.

    Returns ``{"done", "next_step", "state"[, "pos", "monitors"]}`` at zero chunks done.
    """
    mons = dict(monitors or {})
    return _pack(0, first_step, {k: 0 for k in mons}, init_state, mons)


def run_chunks(
    ctx: Any,
    desc: str,
    init_state: Any,
    chunk_fn: Callable[[Any, int], tuple[Any, Mapping[str, Any] | None]],
    n_chunks: int,
    *,
    monitors: Mapping[str, Any] | None = None,
    axis: int = 0,
    every: int = 1,
    keep: int = 2,
    log_rows: Callable[[int, Any, dict[str, Any]], Iterable[tuple[int, dict]]] | None = None,
    first_step: int = 0,
) -> Chunked:
    """Run ``chunk_fn`` for chunks ``0 .. n_chunks - 1`` with checkpoints, resume and logging.

    Args:
        ctx: a :class:`~dedebate.lab.experiment.RunContext` (checkpointer, progress, log,
            resume).
        desc: the progress bar's name.
        init_state: the state before chunk 0; also the template a checkpoint is restored
            against (structure, shapes, dtypes).
        chunk_fn: ``chunk_fn(state, c) -> (state, monitors)``; chunk ``c``'s monitors
            ``{track: pytree}`` (or None) go to the named tracks at their positions along
            ``axis``.
        n_chunks: the number of chunks (>= 1).
        monitors: a template ``{track: pytree}`` of full-length buffers (numpy zeros or NaNs of
            the final shapes; also what a checkpoint restores into).
        axis: the time axis of every monitor leaf.
        every: checkpoint after every ``every``-th chunk (and after the last).
        keep: checkpoints kept.
        log_rows: ``log_rows(c, state, chunk_monitors)`` gives chunk ``c``'s rows as
            ``(step, row)`` with steps >= ``first_step`` that never decrease.
        first_step: the first log step.

    Returns the :class:`Chunked` result (state, monitors, chunks restored and run, wall seconds,
    next log step). Raises ValueError for a bad ``n_chunks``/``every``, a chunk writing past its
    template or an unknown track, and log steps that go back.
    """
    import jax

    if not (isinstance(n_chunks, int) and n_chunks >= 1):
        raise ValueError(f"n_chunks={n_chunks!r}: must be an integer >= 1")
    if not (isinstance(every, int) and every >= 1):
        raise ValueError(f"every={every!r}: must be an integer >= 1")
    monitors = {k: jax.tree_util.tree_map(np.asarray, v) for k, v in (monitors or {}).items()}
    full = checkpoint_template(init_state, monitors, first_step)
    wall = [0.0] * n_chunks
    restored = 0
    with ctx.checkpointer(every=1, keep=keep) as ckpt, ctx.progress(n_chunks, desc) as bar:
        if ctx.resume:
            found = ckpt.restore(full)
            if found is not None:
                full = jax.tree_util.tree_map(_like, full, found[1])
                restored = int(full["done"])
                if restored > n_chunks:
                    raise ValueError(
                        f"checkpoint holds {restored} chunks done, but the run has {n_chunks}"
                    )
            if restored < n_chunks:  # rows logged after the restored chunks are logged again
                ctx.truncate_metrics(int(full["next_step"]))
            if restored:
                bar.update(restored)
                eprint(f"dedebate: {desc}: resumed from a checkpoint, {restored}/{n_chunks} chunks")
        state, mons = full["state"], full.get("monitors", {})
        pos = {k: int(v) for k, v in full.get("pos", {}).items()}
        next_step = int(full["next_step"])
        for c in range(restored, n_chunks):
            t0 = time.perf_counter()
            state, new = jax.block_until_ready(chunk_fn(state, c))
            wall[c] = time.perf_counter() - t0
            new = {k: jax.tree_util.tree_map(np.asarray, v) for k, v in (new or {}).items()}
            mons = dict(mons)
            for track, m in new.items():
                if track not in mons:
                    raise ValueError(
                        f"chunk {c} returned monitors of track {track!r}; the "
                        f"template has {sorted(mons)}"
                    )
                mons[track] = _place(mons[track], m, pos[track], axis)
                pos[track] += jax.tree_util.tree_leaves(m)[0].shape[axis]
            floor = next_step  # a chunk's rows come after the earlier chunks' rows
            for step, row in log_rows(c, state, new) if log_rows is not None else ():
                if step < floor:
                    raise ValueError(
                        f"chunk {c} logs step {step} after step {floor}: steps "
                        "must not go back (nor repeat an earlier chunk's)"
                    )
                ctx.log(row, step=step)
                floor, next_step = step, step + 1
            if (c + 1) % every == 0 or c + 1 == n_chunks:
                ckpt.save(c + 1, _pack(c + 1, next_step, pos, state, mons))
            bar.update(1)
    return Chunked(
        state=state,
        monitors=mons,
        restored=restored,
        ran=n_chunks - restored,
        wall_s=wall,
        next_step=next_step,
    )
