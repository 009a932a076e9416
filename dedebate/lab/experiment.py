"""The contract between the lab shell and an experiment module (``experiments/NAME/``).

An experiment module is a recipe: ``NAME``, ``TITLE``, a ``Config`` dataclass of its parameters
(declared with :func:`dedebate.lab.params.param`), ``SIZES`` (presets of the ``quick`` and
``full`` sizes), usually ``DYNAMIC`` and ``point(cfg)`` (and ``inputs``), an optional ``host``
step and a pure ``report(cfg, measured, host) -> ExperimentResult``: :class:`ExperimentModule`.
The lab evaluates ``point``, runs ``host`` and writes what ``report`` returns
(:mod:`dedebate.lab.evaluate`) through the services of a :class:`RunContext`; an experiment
never sees them. docs/lab.md ("The experiment contract") states every name. The report rows and
their statistics live in :mod:`dedebate.lab.claims` (re-exported here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import jax

from dedebate.lab.claims import (  # noqa: F401  (re-exported)
    FAMILY_ALPHA,
    Claim,
    claim_p_value,
    consistency_rows,
    exact_interval,
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
    """What ``report`` returns: report rows, summary metrics and optional tidy tables.

    ``metrics`` values must be JSON-able (numbers, strings, lists, dicts). ``tables`` maps a
    table name to a list of rows (dicts with the same keys); the lab writes each as CSV.
    ``figures`` maps a file name to a matplotlib ``Figure`` the lab saves as ``plots/NAME.png``;
    ``plots`` lists the file names under ``plots/`` (the lab fills it in from ``figures``).
    """

    claims: list[Claim] = dataclasses.field(default_factory=list)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    plots: list[str] = dataclasses.field(default_factory=list)
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for kind, names in (("tables", self.tables), ("figures", self.figures)):
            for name in names:
                if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", name):
                    raise ValueError(
                        f"{kind} name {name!r} names a file: use letters, digits, '_', '-' and "
                        "'.' (not first)"
                    )

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


@dataclasses.dataclass(frozen=True)
class ChunkedFn:
    """A point's ``fn`` that trains chunk by chunk: ``point(cfg) -> (dynamic, ChunkedFn)``, for
    an experiment whose run must stop between chunks (to log and to checkpoint).

    ``init(dynamic, key) -> state``; ``chunk(dynamic, state, spec) -> (state, monitors)`` for each
    static ``spec`` of ``chunks``, in order (equal specs share one compiled program);
    ``finish(dynamic, state, monitors) -> dict of scalar metrics``, ``monitors`` being the
    chunks' monitors concatenated along ``axis`` (the time axis of one row's monitors). All pure
    JAX, reading ``cfg`` only for its static fields. Work that must run on the host (an exact
    dynamic program that calls JAX itself: never inside a device program's callback) is
    ``measure(dynamic, finished) -> {metric: float}``, one row's numpy arrays at a time, after
    ``finish`` returned that row's arrays (then a ``dict`` of any arrays). A sweep group and
    :func:`point_row` run them as compiled programs over the run axis
    (:class:`ChunkedPrograms`); :func:`train_point` is a run's training of the same rows through
    the same programs, chunk by chunk through the lab's chunked driver (checkpoints, resume,
    logging)."""

    init: Callable[[Any, Any], Any]
    chunk: Callable[[Any, Any, Any], tuple[Any, Any]]
    chunks: tuple
    finish: Callable[[Any, Any, Any], dict[str, Any]]
    axis: int = 0
    measure: Callable[[Any, Any], dict[str, float]] | None = None


@dataclasses.dataclass
class Training:
    """How the lab trains a chunked point's rows for a run (``training(cfg, key)``).

    ``rows`` (``{name: dynamic}``, default the point's own as ``"main"``) train one after the
    other through the point's compiled programs; ``starts`` gives a row's initial state (one
    row's, no run axis) instead of the init program's at the run's key; ``every`` is the
    checkpoint cadence in chunks; ``log_rows(name, c, monitors) -> [(step, row)]`` the log rows
    of a chunk; ``setup`` what the report reads of the set-up (warm-start fits, say); ``cfg``
    the Config whose point's programs train the rows (default the run's).
    """

    rows: Mapping[str, Any] | None = None
    starts: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    every: int = 1
    log_rows: Any = None
    setup: Any = None
    cfg: Any = None


@dataclasses.dataclass
class Chunks:
    """A chunked training the lab drives that is not a point's rows (``chunks(cfg, key)``).

    The arguments of :func:`dedebate.lab.driver.run_chunks`: ``chunk(state, c) -> (state,
    {track: monitors})`` runs chunk ``c`` from ``init_state``; ``monitors`` is the template of
    every track's full-length buffers along ``axis``; ``log_rows(c, state, monitors)`` the log
    rows of a chunk; ``setup`` what the host step and the report read of the set-up.
    """

    init_state: Any
    chunk: Callable[[Any, int], tuple[Any, Mapping[str, Any] | None]]
    n_chunks: int
    monitors: Mapping[str, Any] | None = None
    axis: int = 0
    every: int = 1
    keep: int = 2
    log_rows: Any = None
    setup: Any = None
    desc: str = "training"


class ExperimentModule(Protocol):
    """An experiment module: the names the lab requires, and ``report``.

    Optional, read with ``getattr``: ``TYPICAL_SECONDS``, ``DYNAMIC``, ``point(cfg) -> (dynamic,
    fn)``, ``inputs(cfg, seed, key)``, ``host(cfg, seed, key, measured) -> Any`` (work that must
    run on the host: LPs, searches, float64 enumerations; ``measured`` is the point's row),
    ``COMPILE_OPTIONS``, ``sweep_figures``, ``memory_bytes``, for a chunked point
    ``training(cfg, key) -> Training``, ``chunks(cfg, key) -> Chunks`` (a chunked training that
    is not the point's rows) and ``side(cfg, seed, key)`` (host work independent of the point,
    run alongside it). ``report`` is pure: ``measured`` is the row of ``point`` at the run's key
    (``{}`` without ``point``; for a chunked point ``state`` and ``monitors`` by row name,
    ``setup`` and ``wall_s``), with ``trained`` and ``chunks_setup`` (``chunks``) and ``side``
    added; ``host`` is what ``host`` returned (None without it).
    """

    NAME: str
    TITLE: str
    Config: type[Any]
    SIZES: Mapping[str, Mapping[str, Any]]

    def report(self, cfg: Any, measured: Mapping[str, Any], host: Any) -> ExperimentResult:
        """Claims, tables, metrics and figures of the measured numbers (pure).

        Args:
            cfg: the experiment's ``Config``.
            measured: the row of ``point`` at the run's key (``{}`` without ``point``).
            host: what the module's ``host`` step returned (None without one).

        Returns:
            The :class:`ExperimentResult`.
        """
        ...


class Progress(Protocol):
    """A progress bar (``RunContext.progress`` yields one; a tqdm bar in the lab)."""

    def update(self, n: int = 1) -> None:
        """Advance the bar.

        Args:
            n: how many units of work were done.
        """


class RunContext(Protocol):
    """The impure services of a run, used by the lab's own steps (:mod:`dedebate.lab.evaluate`,
    :func:`dedebate.lab.driver.run_chunks`), never by an experiment; the lab's is
    :class:`dedebate.lab.context.LabContext`.

    * ``key`` -- a typed PRNG key (``jax.random.key``) derived from the run's seed and the
      experiment name (what ``point``, ``host``, ``side``, ``training`` and ``chunks`` get).
    * ``seed`` -- the integer seed the key came from.
    * ``resume`` -- whether the run was asked to resume from its checkpoints.
    """

    key: jax.Array
    seed: int
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
        """An Orbax checkpointer on the run's ``checkpoints/``, guarded by its config hash.

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
