"""The contract between the lab shell and an experiment module (``experiments/NAME.py``).

An experiment module is a thin recipe that knows both the pure debate code and this contract:
``NAME``, ``TITLE``, a ``Config`` dataclass of its parameters (declared with
:func:`dedebate.lab.params.param`), ``SIZES`` (presets of the ``quick`` and ``full`` sizes) and
``run(cfg, ctx) -> ExperimentResult``, pure JAX inside with all I/O through ``ctx`` (a
:class:`RunContext`). A sweepable experiment also defines ``DYNAMIC`` and ``point(cfg)``, and
optionally ``inputs``, ``COMPILE_OPTIONS`` and ``sweep_figures``. docs/lab.md ("The experiment
contract") states every name and its contract; the lab discovers the modules of the
``experiments`` package that define ``NAME`` and ``run``. The report rows and their statistics
live in :mod:`dedebate.lab.claims` (re-exported here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Iterator
from typing import Any, Protocol

import jax

from dedebate.lab.claims import (  # noqa: F401  (re-exported)
    FAMILY_ALPHA,
    Claim,
    claim_p_value,
    consistency_rows,
    family_decisions,
    gating,
    mean_interval,
    nonfinite_reason,
    strict_max,
    strict_min,
    wilson_interval,
    with_family_decisions,
)


def doc(text: str) -> dict[str, str]:
    """``metadata`` of a documented dataclass field without a range.

    Used as ``dataclasses.field(default=..., metadata=doc("what it is"))``; ``dedebate config
    NAME`` prints it. Experiment parameters use :func:`dedebate.lab.params.param`, which also
    states the range.

    Args:
        text: what the field is.

    Returns:
        ``{"doc": text}``.
    """
    return {"doc": text}


@dataclasses.dataclass
class ExperimentResult:
    """What ``run`` returns: report rows, summary metrics and optional tidy tables.

    ``metrics`` values must be JSON-able (numbers, strings, lists, dicts). ``tables`` maps a
    table name to a list of rows (dicts with the same keys); the lab writes each as CSV.
    ``plots`` lists the file names (under ``ctx.plots_dir``) the experiment saved.
    """

    claims: list[Claim] = dataclasses.field(default_factory=list)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    plots: list[str] = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether the experiment has shown what it claims.

        At least one gating claim, and every claim passes under the family-wise policy
        (:func:`family_decisions`); findings do not gate. An experiment with no gating claim (only
        findings, or nothing) does not pass: there is nothing it has shown.

        Returns:
            The verdict.
        """
        gate = [ok for c, ok in zip(self.claims, family_decisions(self.claims)) if gating(c)]
        return bool(gate) and all(gate)


class Progress(Protocol):
    """A progress bar (``RunContext.progress`` yields one; a tqdm bar in the lab)."""

    def update(self, n: int = 1) -> None:
        """Advance the bar.

        Args:
            n: how many units of work were done.
        """

    def set_postfix(self, **kwargs: Any) -> None:
        """Show values beside the bar.

        Args:
            **kwargs: name -> value to show (a loss, a step).
        """


class RunContext(Protocol):
    """What the lab hands an experiment. All impure services live behind it.

    * ``key`` -- a typed PRNG key (``jax.random.key``) derived from the run's seed and the
      experiment name; derive sub-keys with ``jax.random.fold_in(key, index)``.
    * ``seed`` -- the integer seed the key came from.
    * ``size`` -- ``"quick"``, ``"default"`` or ``"full"``.
    * ``checkpoint_dir`` -- a directory for Orbax checkpoints of this run (resume support).
    * ``resume`` -- whether the run was asked to resume from ``checkpoint_dir``.

    Experiments read no clock and write no file themselves. Chunked training goes through
    :func:`dedebate.lab.driver.run_chunks`, which uses only these services (checkpoints, restore
    and skip, monitors, progress, logging with explicit steps).
    """

    key: jax.Array
    seed: int
    size: str
    checkpoint_dir: Any
    resume: bool

    def progress(self, total: int, desc: str):
        """A context manager yielding a :class:`Progress` bar (host side).

        Call ``update`` between jitted chunks.

        Args:
            total: the units of work in all.
            desc: the bar's label.
        """

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Append a row to ``metrics.jsonl`` and to the W&B run.

        Give the step: steps are one clock over the whole run (docs/lab.md, "Run
        directories").

        Args:
            metrics: name -> JSON-able value.
            step: the row's step; None = one more than the previous row's.
        """

    def truncate_metrics(self, step: int) -> None:
        """On resume, drop the rows of ``metrics.jsonl`` from ``step`` on.

        Those are what the resumed attempt computes again;
        :func:`dedebate.lab.driver.run_chunks` calls it.

        Args:
            step: the first step to drop.
        """

    def save_figure(self, fig: Any, name: str) -> str:
        """Save a matplotlib figure as ``plots/NAME.png``, close it and log it to W&B.

        Args:
            fig: the figure.
            name: the file name, with or without ``.png`` (letters, digits, ``_-.``).

        Returns:
            The file name, for ``ExperimentResult.plots``.
        """

    def checkpointer(self, every: int = 1, keep: int = 3) -> Any:
        """An Orbax checkpointer on ``checkpoint_dir``, guarded by the run's config hash.

        A :class:`dedebate.lab.checkpoint.Checkpointer`; use it as a context manager so saves
        finish before the run ends.

        Args:
            every: save every this many steps.
            keep: how many checkpoints to keep.

        Returns:
            The checkpointer.
        """

    def stopwatch(self, name: str) -> contextlib.AbstractContextManager[Lap]:
        """A context manager timing its block (wall clock) into the metrics as ``wall_<name>_s``.

        A name timed twice adds up; the yielded :class:`Lap`'s ``seconds`` is set when the
        block ends, for a note.

        Args:
            name: letters, digits and ``_``.

        Returns:
            The context manager.
        """


@dataclasses.dataclass
class Lap:
    """What :func:`stopwatch` measured: ``seconds`` of wall clock (set when the block ends)."""

    name: str
    seconds: float = 0.0


_TIMER_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@contextlib.contextmanager
def stopwatch(name: str, timings: dict[str, float] | None = None) -> Iterator[Lap]:
    """Time the block with ``time.perf_counter``.

    When the block ends (also by an exception) the yielded :class:`Lap`'s ``seconds`` is set and
    added to ``timings["wall_<name>_s"]`` (if given). ``RunContext.stopwatch(name)`` is this
    with the run's timings.

    Args:
        name: letters, digits and ``_``.
        timings: where to add the seconds; None = only the lap.

    Returns:
        A context manager yielding the :class:`Lap`.

    Raises:
        ValueError: a name with other characters.
    """
    if not _TIMER_NAME.match(name):
        raise ValueError(f"stopwatch name={name!r}: use letters, digits and '_' only")
    lap = Lap(name)
    t0 = time.perf_counter()
    try:
        yield lap
    finally:
        lap.seconds = time.perf_counter() - t0
        if timings is not None:
            key = f"wall_{name}_s"
            timings[key] = timings.get(key, 0.0) + lap.seconds
