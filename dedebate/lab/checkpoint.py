"""Orbax checkpoints of a run's state, with fallback and a config-hash guard.

A thin wrapper around ``orbax.checkpoint.CheckpointManager``: :meth:`Checkpointer.save` saves the
state pytree every ``every`` steps (asynchronously, keeping the newest ``keep``) together with the
run's config hash; :meth:`Checkpointer.restore` restores the newest readable checkpoint, refuses
one written under another hash (:class:`CheckpointMismatch`) and falls back past a corrupt or
truncated one, moving it aside (``corrupt-STEP/``), so recovery always converges. A save never
collides with steps an earlier run left (moved aside to ``stale-STEP/``). A full disk (or disk
quota) during a save raises :class:`~dedebate.lab.rundir.RunDirError`, one line (the CLI exits
2), and Orbax's logged tracebacks of it are silenced (:class:`QuietDiskFull`). Experiments that
train use it through :func:`dedebate.lab.driver.run_chunks`; direct use: docs/lab.md,
"Checkpoints".
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import numpy as np

from dedebate.lab import numerics
from dedebate.lab.report_render import printable
from dedebate.lab.rundir import RunDirError, eprint

_DISK_FULL = {errno.ENOSPC: os.strerror(errno.ENOSPC), errno.EDQUOT: os.strerror(errno.EDQUOT)}


def disk_full(err: BaseException | None) -> str | None:
    """What ``err``, or an error it was raised from, says is full, in words (``"No space left
    on device"``, ``"Disk quota exceeded"``); None when it is about something else. Orbax and
    TensorStore report a full disk as a ValueError whose message holds the OSError's text.
    """
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _DISK_FULL:
            return _DISK_FULL[err.errno]
        if text := _says_full(str(err)):
            return text
        err = err.__cause__ or err.__context__
    return None


def _says_full(text: str) -> str | None:
    """The OSError text of a full disk found in ``text``, or None."""
    return next((t for t in _DISK_FULL.values() if t in text), None)


class QuietDiskFull(logging.Filter):
    """Drops Orbax's logged tracebacks of a full disk (on the ``absl`` logger, from its save
    threads): the save raises that error too, and the lab reports it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether a log record is kept.

        Returns False when its exception or message is about a full disk (or disk quota).
        """
        err = record.exc_info[1] if record.exc_info else None
        return not (disk_full(err) or _says_full(record.getMessage()))


_QUIET = QuietDiskFull()


CLOSED_LOOP = "Event loop is closed"
ASYNCIO_LOOP = ("asyncio", "base_events.py")
NEVER_RETRIEVED = "Task exception was never retrieved"
READ_ERRORS = ("Error reading", "Error opening")
TENSORSTORE_ERROR = "[tensorstore_spec="


def _closed_loop_callback(unraisable: Any) -> bool:
    """Whether an unraisable is "Event loop is closed" from ``call_soon_threadsafe`` (restore)."""
    import traceback

    if unraisable.exc_type is not RuntimeError or str(unraisable.exc_value) != CLOSED_LOOP:
        return False
    frames = traceback.extract_tb(unraisable.exc_traceback)
    return any(
        f.name == "call_soon_threadsafe" and Path(f.filename).parts[-2:] == ASYNCIO_LOOP
        for f in frames
    )


class QuietFailedReads(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" of a tensorstore read that failed:
    the sibling reads of a restore that had already failed (:meth:`Checkpointer.restore`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether a log record is kept (False for those reads only; a failed write is kept)."""
        err = str(record.exc_info[1]) if record.exc_info else ""
        return not (
            record.getMessage().startswith(NEVER_RETRIEVED)
            and TENSORSTORE_ERROR in err
            and any(e in err for e in READ_ERRORS)
        )


_QUIET_READS = QuietFailedReads()


def quiet_failed_restore_noise() -> None:
    """Silence what a failed Orbax restore leaves behind, and nothing else: wrap
    ``sys.unraisablehook`` (once per hook) so it drops :func:`_closed_loop_callback` exceptions
    and passes every other one on, and filter the ``asyncio`` logger (:class:`QuietFailedReads`)."""
    import sys

    logging.getLogger("asyncio").addFilter(_QUIET_READS)  # once: the same filter object
    previous = sys.unraisablehook
    if getattr(previous, "drops_closed_loop_callbacks", False):
        return

    def hook(unraisable: Any) -> None:
        if not _closed_loop_callback(unraisable):
            previous(unraisable)

    hook.drops_closed_loop_callbacks = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def uncommitted(x: Any, take: Callable[[np.ndarray], np.ndarray] | None = None) -> Any:
    """A JAX or numpy array leaf as a JAX array not committed to a device (other leaves
    unchanged), through the host, with ``take`` applied there (e.g. a row: no compiled program).

    Orbax returns arrays committed to a device; ``jax.jit`` lowers a committed argument with its
    sharding, an uncommitted one without, so a program that already ran on the saved state in
    this process would be compiled again for the restored one. A typed PRNG key goes through its
    key data.

    Args:
        x: a pytree leaf.
        take: a function of the leaf's host copy (its key data for a key); None = all of it.

    Returns ``x`` if it is not an array, else ``take`` of its values in a fresh uncommitted array.
    """
    import jax
    import jax.numpy as jnp

    if not isinstance(x, jax.Array | np.ndarray):
        return x
    take = take or (lambda h: h)
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(
            jnp.asarray(take(np.asarray(jax.random.key_data(x)))), impl=jax.random.key_impl(x)
        )
    return jnp.asarray(take(np.asarray(x)))


class CheckpointMismatch(ValueError):
    """A checkpoint written under a different config (its config hash differs)."""


class Checkpointer:
    """Save every ``every`` steps, keep the newest ``keep``, restore with fallback."""

    def __init__(
        self,
        directory: str | os.PathLike,
        config_hash: str,
        *,
        every: int = 1,
        keep: int = 3,
        async_save: bool = True,
        before_save: Callable[[], None] | None = None,
    ):
        """``before_save`` runs before each save (the run's: metrics.jsonl to disk first, so a
        checkpoint never covers rows a power cut can take back)."""
        self.before_save = before_save
        if every < 1:
            raise ValueError(f"every={every}: must be an integer >= 1")
        if keep < 1:
            raise ValueError(f"keep={keep}: must be an integer >= 1 (checkpoints kept)")
        import orbax.checkpoint as ocp
        from orbax.checkpoint import checkpoint_managers as cm

        self._ocp = ocp
        self.directory = Path(directory).resolve()
        self.config_hash = str(config_hash)
        self.numerics = numerics.fingerprint(devices=True)
        self.every = every
        self.keep = keep
        options = ocp.CheckpointManagerOptions(
            save_decision_policy=cm.FixedIntervalPolicy(every),
            preservation_policy=cm.LatestN(keep),
            enable_async_checkpointing=async_save,
            create=True,
            cleanup_tmp_directories=True,  # saves cut short by a kill
        )
        self._mgr = ocp.CheckpointManager(
            self.directory, options=options, item_names=("state", "meta")
        )
        logging.getLogger("absl").addFilter(_QUIET)  # once: the same filter object

    @contextlib.contextmanager
    def _disk_full_is_run_dir_error(self) -> Iterator[None]:
        """Turn a full disk during a save into one RunDirError line naming the directory."""
        # Turn a full disk during a save (this step's, or an earlier one's finishing in the
        # background) into one RunDirError line naming the checkpoint directory.
        try:
            yield
        except Exception as err:
            why = disk_full(err)
            if why is None:
                raise
            raise RunDirError(
                f"{self.directory}: cannot save a checkpoint: {why} (free some "
                "space, or set output_dir to another disk)"
            ) from None

    # -- saving ----------------------------------------------------------------------------

    def save(self, step: int, state: Any, *, force: bool = False) -> bool:
        """Save ``state`` at ``step`` if the interval says so (or ``force``).

        Steps on disk at or after ``step`` are moved aside first (``stale-STEP/``, with a
        warning): they belong to an earlier run in this directory, and Orbax would otherwise
        skip this save (an older step than its newest) or refuse it (a step that exists).

        Args:
            step: the step the state belongs to.
            state: the pytree to save (arrays, typed PRNG keys, numbers).
            force: save even when ``step`` is not a multiple of ``every``.

        Returns whether a save was started (it completes asynchronously).

        Raises:
            RunDirError: the disk (or disk quota) is full.
        """
        ocp = self._ocp
        if not (force or int(step) % self.every == 0):
            return False
        with self._disk_full_is_run_dir_error():
            if self.before_save is not None:
                self.before_save()
            later = [s for s in self._mgr.all_steps() if s >= int(step)]
            if later:
                self._mgr.wait_until_finished()
                for s in sorted(later):
                    self._move_aside(s, "stale", f"a save of step {step} follows")
            args = ocp.args.Composite(
                state=ocp.args.StandardSave(state),
                meta=ocp.args.JsonSave(
                    {"config_hash": self.config_hash, "step": int(step), "numerics": self.numerics}
                ),
            )
            return bool(self._mgr.save(int(step), args=args, force=force))

    def wait(self) -> None:
        """Block until every asynchronous save has been written (RunDirError: a full disk)."""
        with self._disk_full_is_run_dir_error():
            self._mgr.wait_until_finished()

    def close(self) -> None:
        """Wait for pending saves and close the manager (also on leaving the ``with`` block);
        RunDirError for a full disk."""
        with self._disk_full_is_run_dir_error():
            try:
                self._mgr.wait_until_finished()
            finally:
                self._mgr.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- restoring -------------------------------------------------------------------------

    def steps(self) -> list[int]:
        """Steps with a finished checkpoint on disk, oldest first."""
        self._mgr.reload()
        return sorted(int(s) for s in self._mgr.all_steps())

    def latest_step(self) -> int | None:
        """The newest step with a finished checkpoint on disk."""
        steps = self.steps()
        return steps[-1] if steps else None

    def _meta(self, step: int) -> dict[str, Any]:
        ocp = self._ocp
        out = self._mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        meta = out["meta"]
        if not isinstance(meta, dict) or "config_hash" not in meta:
            raise ValueError("checkpoint metadata has no config_hash")
        return meta

    def restore(self, template: Any) -> tuple[int, Any] | None:
        """``(step, state)`` from the newest readable checkpoint, or None if there is none.

        The restore runs against ``jax.eval_shape(template)``, so leaves come back as JAX arrays
        with JAX's dtypes (a numpy int64 leaf returns as int32 unless x64 is enabled), not
        committed to a device (:func:`uncommitted`: a jitted program takes them as it took the
        state it saved, without compiling again). A checkpoint that cannot be read is skipped
        with a warning and moved aside (``corrupt-STEP/``); if none can be read, all are moved
        aside and the result is None (start over).

        Orbax's noise (0.12.8), silenced: when reading a corrupt checkpoint fails, Orbax's
        ``asyncio.gather`` over the tensorstore reads raises at the first error and
        ``asyncio_utils.run_sync`` closes its fresh event loop while the other reads are still
        pending; when they finish, tensorstore's callback thread calls
        ``loop.call_soon_threadsafe`` on the closed loop, and Python would print tracebacks of
        "RuntimeError: Event loop is closed" (unraisable) and asyncio's "Task exception was never
        retrieved" around the fallback's warning. The failed restore has already raised here
        (and we fall back), so nothing is lost: :func:`quiet_failed_restore_noise` drops exactly
        those.

        Args:
            template: a state of the right structure, shapes and dtypes (values unused).

        Returns ``(step, state)``, or None.

        Raises:
            CheckpointMismatch: the newest readable checkpoint was written under another config
                hash.
            numerics.ResumeMismatch: ... or under other numerics (versions, backend, devices,
                ``XLA_FLAGS``: :mod:`dedebate.lab.numerics`).
        """
        import jax

        ocp = self._ocp
        abstract = jax.eval_shape(lambda: template)
        steps = self.steps()
        if not steps:
            return None
        quiet_failed_restore_noise()  # before a read can fail: its stray callbacks come at once
        failures: list[tuple[int, BaseException]] = []
        for step in reversed(steps):
            try:
                meta = self._meta(step)
            except Exception as err:  # noqa: BLE001 - corrupt metadata: try an older one
                failures.append((step, err))
                self._warn_fallback(step, err, steps)
                continue
            if meta["config_hash"] != self.config_hash:
                theirs = printable(str(meta["config_hash"])[:12])  # the folder's: any text
                raise CheckpointMismatch(
                    f"checkpoint {self.directory / str(step)} was written under config hash "
                    f"{theirs}..., this run's is {self.config_hash[:12]}...: it belongs to a "
                    "different config; start a new run directory instead"
                )
            numerics.check(
                f"checkpoint {self.directory / str(step)}", meta.get("numerics"), self.numerics
            )
            try:
                out = self._mgr.restore(
                    step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
                )
            except Exception as err:  # noqa: BLE001 - corrupt or truncated arrays
                failures.append((step, err))
                self._warn_fallback(step, err, steps)
                continue
            self._set_aside(failures)
            return step, jax.tree_util.tree_map(uncommitted, out["state"])
        self._set_aside(failures)
        detail = "; ".join(f"step {s}: {type(e).__name__}" for s, e in failures)
        eprint(
            f"dedebate: warning: no readable checkpoint in {self.directory} ({detail}); "
            "starting from the beginning"
        )
        return None

    def _set_aside(self, failures: list[tuple[int, BaseException]]) -> None:
        for step, _ in failures:
            self._move_aside(step, "corrupt", "it is unreadable")

    def _move_aside(self, step: int, why: str, reason: str) -> None:
        """Rename step ``step`` to ``WHY-STEP`` (``WHY-STEP.N`` if taken) beside the steps."""
        src = self.directory / str(step)
        dst = self.directory / f"{why}-{step}"
        n = 0
        while dst.exists():
            n += 1
            dst = self.directory / f"{why}-{step}.{n}"
        if src.exists():
            src.rename(dst)
            eprint(f"dedebate: warning: checkpoint step {step} moved aside to {dst} ({reason})")
        self._mgr.reload()

    def _warn_fallback(self, step: int, err: BaseException, steps: list[int]) -> None:
        older = [s for s in steps if s < step]
        then = f"falling back to step {older[-1]}" if older else "no older checkpoint left"
        msg = " ".join(str(err).split())[:200]
        eprint(
            f"dedebate: warning: checkpoint step {step} in {self.directory} is unreadable "
            f"({type(err).__name__}: {msg}); {then}"
        )
