"""Orbax checkpoints of a run's state, with fallback and a config-hash guard.

A thin wrapper around ``orbax.checkpoint.CheckpointManager`` (orbax-checkpoint 0.12):

* ``save(step, state)`` saves the state pytree (params, optimiser state, step, typed PRNG keys,
  partial results) when ``step`` is a multiple of ``every`` (or ``force=True``); saves are
  asynchronous, and the last ``keep`` checkpoints are preserved (a ``LatestN`` preservation
  policy, which supersedes ``max_to_keep``);
* every checkpoint stores the run's config hash beside the state; ``restore`` refuses a checkpoint
  written under a different hash (:class:`CheckpointMismatch`, one clear line);
* ``restore(template)`` restores the newest checkpoint against ``jax.eval_shape(template)`` and,
  when that checkpoint is corrupt or truncated, warns and falls back to the previous one; every
  unreadable step is then moved aside (to ``corrupt-STEP/`` beside the steps), so the steps saved
  next never collide with it and a later resume does not meet it again; when no step is readable,
  all are moved aside and the run starts over (recovery always converges);
* a save never collides: a step at or after the one being saved (left by an earlier run in the
  same directory) is moved aside to ``stale-STEP/`` first, and temporary directories of saves cut
  short by a kill are removed when the checkpointer opens;
* ``close()`` (or leaving the ``with`` block) waits for pending saves.

Experiments that train use it through :func:`dedebate.lab.driver.run_chunks`. Direct use (the
lab's context builds one with the run's config hash)::

    with ctx.checkpointer(every=10, keep=3) as ckpt:
        start, state = 0, init_state
        if ctx.resume and (found := ckpt.restore(init_state)) is not None:
            start, state = found
            start += 1
        for step in range(start, n_steps):
            state = chunk(state)
            ckpt.save(step, state)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

from dedebate.lab.rundir import eprint


class CheckpointMismatch(ValueError):
    """A checkpoint written under a different config (its config hash differs)."""


class Checkpointer:
    """Save every ``every`` steps, keep the newest ``keep``, restore with fallback."""

    def __init__(self, directory: str | os.PathLike, config_hash: str, *, every: int = 1,
                 keep: int = 3, async_save: bool = True):
        if every < 1:
            raise ValueError(f"every={every}: must be an integer >= 1")
        if keep < 1:
            raise ValueError(f"keep={keep}: must be an integer >= 1 (checkpoints kept)")
        import orbax.checkpoint as ocp
        from orbax.checkpoint import checkpoint_managers as cm

        self._ocp = ocp
        self.directory = Path(directory).resolve()
        self.config_hash = str(config_hash)
        self.every = every
        self.keep = keep
        options = ocp.CheckpointManagerOptions(
            save_decision_policy=cm.FixedIntervalPolicy(every),
            preservation_policy=cm.LatestN(keep),
            enable_async_checkpointing=async_save,
            create=True,
            cleanup_tmp_directories=True,  # saves cut short by a kill
        )
        self._mgr = ocp.CheckpointManager(self.directory, options=options,
                                          item_names=("state", "meta"))

    # -- saving ----------------------------------------------------------------------------

    def save(self, step: int, state: Any, *, force: bool = False) -> bool:
        """Save ``state`` at ``step`` if the interval says so (or ``force``); True if saved.

        Steps on disk at or after ``step`` are moved aside first (``stale-STEP/``, with a
        warning): they belong to an earlier run in this directory, and Orbax would otherwise
        skip this save (an older step than its newest) or refuse it (a step that exists)."""
        ocp = self._ocp
        if not (force or int(step) % self.every == 0):
            return False
        later = [s for s in self._mgr.all_steps() if s >= int(step)]
        if later:
            self._mgr.wait_until_finished()
            for s in sorted(later):
                self._move_aside(s, "stale", f"a save of step {step} follows")
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            meta=ocp.args.JsonSave({"config_hash": self.config_hash, "step": int(step)}),
        )
        return bool(self._mgr.save(int(step), args=args, force=force))

    def wait(self) -> None:
        """Block until every asynchronous save has been written."""
        self._mgr.wait_until_finished()

    def close(self) -> None:
        self._mgr.wait_until_finished()
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

        ``template`` is a state of the right structure, shapes and dtypes (values unused); the
        restore runs against ``jax.eval_shape`` of it, so leaves come back as JAX arrays with
        JAX's dtypes (a numpy int64 leaf returns as int32 unless x64 is enabled). A checkpoint
        that cannot be read is skipped with a warning and moved aside (``corrupt-STEP/``); if
        none can be read, all are moved aside and the result is None (start over). One written
        under another config hash raises :class:`CheckpointMismatch`.

        Known noise (Orbax 0.12.8, not ours): when reading a corrupt checkpoint fails, Orbax's
        ``asyncio.gather`` over the tensorstore reads raises at the first error and
        ``asyncio_utils.run_sync`` closes its fresh event loop while the other reads are still
        pending; when they finish, tensorstore's callback thread calls
        ``loop.call_soon_threadsafe`` on the closed loop, and Python prints "RuntimeError: Event
        loop is closed" as an unraisable exception. The failed restore has already raised here
        (and we fall back), so nothing is lost; no Checkpointer is left open.
        """
        import jax

        ocp = self._ocp
        abstract = jax.eval_shape(lambda: template)
        steps = self.steps()
        if not steps:
            return None
        failures = []
        for step in reversed(steps):
            try:
                meta = self._meta(step)
            except Exception as err:  # noqa: BLE001 - corrupt metadata: try an older one
                failures.append((step, err))
                self._warn_fallback(step, err, steps)
                continue
            if meta["config_hash"] != self.config_hash:
                raise CheckpointMismatch(
                    f"checkpoint {self.directory / str(step)} was written under config hash "
                    f"{str(meta['config_hash'])[:12]}..., this run's is {self.config_hash[:12]}...:"
                    " it belongs to a different config; start a new run directory instead")
            try:
                out = self._mgr.restore(
                    step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))
            except Exception as err:  # noqa: BLE001 - corrupt or truncated arrays
                failures.append((step, err))
                self._warn_fallback(step, err, steps)
                continue
            self._set_aside(failures)
            return step, out["state"]
        self._set_aside(failures)
        detail = "; ".join(f"step {s}: {type(e).__name__}" for s, e in failures)
        eprint(f"dedebate: warning: no readable checkpoint in {self.directory} ({detail}); "
               "starting from the beginning")
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
        eprint(f"dedebate: warning: checkpoint step {step} in {self.directory} is unreadable "
               f"({type(err).__name__}: {msg}); {then}")
