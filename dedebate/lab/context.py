"""The lab's :class:`~dedebate.lab.experiment.RunContext`: the services a run's experiment uses.

:class:`LabContext` gives an experiment its typed key (:func:`experiment_key`), progress bars,
``log`` into ``metrics.jsonl`` and W&B, figures under ``plots/``, an Orbax checkpointer guarded
by the config hash, and stopwatches. ``metrics.jsonl`` holds each logged row once, also after a
resume: every row carries its step, a resumed run keeps the rows an earlier attempt wrote and
does not write a step twice, and ``truncate_metrics(step)`` drops what a resumed attempt
computes again; a resume under another config first moves the earlier attempt's files to
``stale-<UTC time>/`` (:func:`set_aside_stale`) and starts afresh (docs/lab.md, "Run directories").
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dedebate.lab.config import RunConfig, config_hash_of
from dedebate.lab.experiment import stopwatch
from dedebate.lab.rundir import (
    MAX_METRICS_BYTES,
    RunDirError,
    eprint,
    jsonable,
    open_append,
    os_reason,
    read_config,
    read_text,
    utc_stamp,
    write_figure,
    write_text,
)
from dedebate.lab.tracking import Tracker

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def experiment_key(seed: int, name: str):
    """The root key of a run: ``fold_in(key(seed), crc32(name) & 0x7FFFFFFF)``."""
    import jax

    return jax.random.fold_in(jax.random.key(seed), zlib.crc32(name.encode()) & 0x7FFFFFFF)


#: What an attempt under another config leaves in a run directory (:func:`set_aside_stale`).
STALE_OUTPUTS = (
    "config.yaml",
    "metrics.jsonl",
    "checkpoints",
    "results.json",
    "results.failed.json",
    "error.txt",
    "plots",
    "tables",
)


def set_aside_stale(run_dir: Path, config_hash: str) -> bool:
    """Before a resume: if ``run_dir``'s config.yaml has another config hash than
    ``config_hash`` (an earlier attempt under another config), move its
    :data:`STALE_OUTPUTS` into ``run_dir/stale-<UTC stamp>[-n]/`` (nothing is deleted), say so
    in one line and return True (the run starts fresh); else change nothing and return False
    (no config.yaml, or one that cannot be read: resumed as before).

    Raises:
        RunDirError: a file cannot be moved.
    """
    try:
        old = config_hash_of(read_config(run_dir / "config.yaml"))  # never through a link
    except Exception:  # noqa: BLE001 - absent, unreadable or not a config: nothing to compare
        return False
    if old == config_hash:
        return False
    base = dest = run_dir / f"stale-{utc_stamp()}"
    for n in itertools.count(1):  # never an existing name
        if not (dest.exists() or dest.is_symlink()):
            break
        dest = base.with_name(f"{base.name}-{n}")
    try:
        dest.mkdir()
        for name in STALE_OUTPUTS:
            if (run_dir / name).exists() or (run_dir / name).is_symlink():
                (run_dir / name).rename(dest / name)
    except OSError as err:
        raise RunDirError(
            f"{run_dir}: cannot move an earlier attempt's files to {dest.name}: {os_reason(err)}"
        ) from None
    eprint(
        f"dedebate: {run_dir}: its earlier attempt ran another config (hash {old[:12]}..., this "
        f"one {config_hash[:12]}...); its files are moved to {dest.name}/ and the run starts fresh"
    )
    return True


class LabContext:
    """The lab's implementation of ``RunContext`` (see ``dedebate/lab/experiment.py``)."""

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: Path,
        tracker: Tracker,
        *,
        show_progress: bool = True,
        nested: bool = False,
        resume: bool = False,
        key: Any = None,
    ):
        self.cfg = cfg
        self.seed = cfg.seed
        self.size = cfg.size
        self.key = experiment_key(cfg.seed, cfg.experiment) if key is None else key
        self.run_dir = Path(run_dir)
        self.plots_dir = self.run_dir / "plots"
        self.tables_dir = self.run_dir / "tables"
        self.checkpoint_dir = self.run_dir / "checkpoints"
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.config_hash = cfg.config_hash()
        self.resume = resume
        self.tracker = tracker
        self.saved_plots: list[str] = []
        self._show_progress = show_progress
        self._nested = nested
        self._t0 = time.monotonic()
        self._auto_step = 0
        self.timings: dict[str, float] = {}  # ctx.stopwatch: wall_<name>_s
        for d in (self.plots_dir, self.checkpoint_dir):
            d.mkdir(parents=True, exist_ok=True)
        # metrics.jsonl (see the module docstring): on resume, the steps the file already holds
        self._old_steps: set[int] = set()
        self._tracked_steps: set[int] = set()  # the steps the W&B run received before (resume)
        if not resume:
            self.metrics_path.unlink(missing_ok=True)
        else:
            self._load_metrics()

    def _read_rows(self) -> tuple[list[dict[str, Any]], int, bool]:
        """metrics.jsonl rows, the unreadable line count, whether it lacks a final newline."""
        # The rows of metrics.jsonl, the count of unreadable lines, whether the file ends without a
        # newline.
        try:  # never through a link, never a FIFO, at most MAX_METRICS_BYTES
            text = read_text(self.metrics_path, MAX_METRICS_BYTES, "rundir.MAX_METRICS_BYTES")
        except FileNotFoundError:
            return [], 0, False
        rows, bad = [], 0
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = None
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
            else:
                bad += bool(line.strip())
        return rows, bad, bool(text) and not text.endswith("\n")

    def _write_rows(self, rows: list[dict[str, Any]]) -> None:
        write_text(self.metrics_path, "".join(json.dumps(r) + "\n" for r in rows))
        self._old_steps = {r["step"] for r in rows}

    def _load_metrics(self) -> None:
        """Read the steps an earlier attempt logged (resume); drop a torn last line."""
        rows, bad, torn = self._read_rows()
        self._old_steps = {r["step"] for r in rows}
        self._tracked_steps = set(self._old_steps)  # kept through truncation: W&B holds them
        if bad:
            eprint(
                f"dedebate: warning: {self.metrics_path}: dropped {bad} unreadable line(s) "
                "(a write cut short by the interrupted attempt)"
            )
        if bad or torn:  # clean before the next append
            self._write_rows(rows)

    def truncate_metrics(self, step: int) -> None:
        """Drop metrics.jsonl rows from ``step`` on, in one atomic rewrite if any row goes."""
        # Drop the rows of metrics.jsonl from ``step`` on (what a resumed attempt logs again). One
        # atomic rewrite, only if a row goes.
        rows, _, _ = self._read_rows()
        kept = [r for r in rows if r["step"] < step]
        if len(kept) < len(rows):
            self._write_rows(kept)

    def flush_metrics(self) -> None:
        """Nothing is buffered (rows are written as they are logged); kept for callers."""

    @contextlib.contextmanager
    def progress(self, total: int, desc: str) -> Iterator[Any]:
        """A tqdm bar on stderr, as a context manager; call ``update`` between jitted chunks."""
        # A tqdm bar on stderr; call ``update`` between jitted chunks (host side). Returns a context
        # manager yielding the bar (closed when the block ends).
        from tqdm.auto import tqdm

        bar = tqdm(
            total=total,
            desc=desc,
            file=sys.stderr,
            disable=not self._show_progress,
            leave=not self._nested,
            dynamic_ncols=True,
            mininterval=0.5,
        )
        try:
            yield bar
        finally:
            bar.close()

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Append ``{"step", "wall_s", **metrics}`` to metrics.jsonl and W&B (once per step)."""
        # Append ``{"step", "wall_s", **metrics}`` to metrics.jsonl, then send it to W&B. On resume
        # the row is not written if an earlier attempt logged that step (docs/lab.md, "Run
        # directories").
        if step is None:
            step = self._auto_step
        self._auto_step = int(step) + 1
        row = {"step": int(step), "wall_s": round(time.monotonic() - self._t0, 4)}
        row.update(jsonable(metrics))
        if int(step) not in self._old_steps:
            with open_append(self.metrics_path) as fh:  # no link, no FIFO
                fh.write(json.dumps(row) + "\n")
        if not (self.tracker.continued and int(step) in self._tracked_steps):
            self.tracker.log(jsonable(metrics), step=int(step))

    def checkpointer(self, every: int = 1, keep: int = 3):
        """An Orbax checkpointer on ``checkpoint_dir``, guarded by this run's config hash."""
        # Use it as a context manager so saves finish before exit. Returns a
        # :class:`~dedebate.lab.checkpoint.Checkpointer`.
        from dedebate.lab.checkpoint import Checkpointer

        return Checkpointer(
            self.checkpoint_dir,
            self.config_hash,
            every=every,
            keep=keep,
            before_save=self.sync_metrics,
        )

    def sync_metrics(self) -> None:
        """Force metrics.jsonl's rows to disk (``fsync``): a checkpoint is about to cover them."""
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(
                self.metrics_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            )
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def stopwatch(self, name: str):
        """Time a block into ``timings["wall_<name>_s"]`` (results.json ``metrics``)."""
        # Returns :func:`dedebate.lab.experiment.stopwatch` with this run's timings.
        return stopwatch(name, self.timings)

    def save_figure(self, fig: Any, name: str) -> str:
        """Save ``fig`` as ``plots/NAME.png`` (returned), close it and log it to W&B."""
        # Save ``fig`` as ``plots/NAME.png``, close it and log it to W&B. Returns the file name
        # (``NAME.png``).
        stem = name.removesuffix(".png")
        if not _SAFE_NAME.match(stem):
            raise ValueError(f"figure name={name!r}: use letters, digits, '_', '-', '.' only")
        filename = f"{stem}.png"
        path = self.plots_dir / filename
        try:
            write_figure(path, fig, dpi=110, bbox_inches="tight")
        finally:
            with contextlib.suppress(Exception):
                import matplotlib.pyplot as plt

                plt.close(fig)
        if filename not in self.saved_plots:
            self.saved_plots.append(filename)
        self.tracker.log_image(stem, path)
        return filename
