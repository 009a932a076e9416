"""The lab evaluates, the experiment reports: what a run does with its experiment module.

For an experiment module (:class:`~dedebate.lab.experiment.ExperimentModule`, which must define
``report``), :func:`run_module` evaluates ``point`` at the run's key through
:func:`~dedebate.lab.sweep_eval.point_row` (a sweep's one-point case, so a run's numbers are its
sweep row's bit for bit; a ``fn`` returning ``(metrics, extras)`` adds the extras' arrays to
the row as ``extras``), or trains a chunked point's rows (:func:`train_rows`, a module with
``training``), runs the optional ``host`` step, calls the pure ``report``, logs each table row,
saves the figures and adds the point's row to the metrics as ``point``, timing each step
(``wall_point_s``, ``wall_setup_s``, ``wall_training_s``, ``wall_host_s``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Mapping
from numbers import Number
from typing import Any

from dedebate.lab.driver import run_chunks
from dedebate.lab.experiment import (
    Chunks,
    Claim,
    ExperimentModule,
    ExperimentResult,
    RunContext,
    Training,
)
from dedebate.lab.sweep_eval import point_row
from dedebate.lab.sweep_programs import train_point


def run_module(module: ExperimentModule, cfg: Any, ctx: RunContext) -> ExperimentResult:
    """The experiment's result for ``cfg`` (its ``Config``), its services from ``ctx``.

    Args:
        module: the experiment module.
        cfg: its Config.
        ctx: the run's context (key, seed, progress, log, figures, stopwatch).

    Returns:
        The result, its figures saved (listed in ``plots``).

    Raises:
        TypeError: a module without ``report``, or ``report`` returned something else than an
            ExperimentResult of Claim rows.
    """
    name = getattr(module, "NAME", type(module).__name__)
    report = getattr(module, "report", None)
    if not callable(report):
        raise TypeError(
            f"experiment module {name!r} defines no report: it must define "
            "report(cfg, measured, host)"
        )
    point, host_step = getattr(module, "point", None), getattr(module, "host", None)
    training, side = getattr(module, "training", None), getattr(module, "side", None)
    chunks = getattr(module, "chunks", None)
    measured: dict[str, Any] = {}
    host, first_step = None, 0
    steps = 1 + callable(point) + callable(chunks) + callable(host_step)
    with (
        ctx.progress(steps, name) as bar,
        concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"{name}-side"
        ) as pool,
    ):
        beside = pool.submit(side, cfg, ctx.seed, ctx.key) if callable(side) else None
        if callable(training):
            measured = train_rows(module, cfg, ctx)
            first_step = measured.pop("next_step")
        elif callable(point):
            with ctx.stopwatch("point"):
                measured = _measured(point_row(module, cfg, ctx.key, ctx.seed, extras=True))
        bar.update(callable(point))
        extra = {}
        if callable(chunks):
            extra = drive_chunks(module, cfg, ctx)
            first_step = extra["trained"].next_step
            bar.update(1)
        if beside is not None:
            with ctx.stopwatch("side_wait"):
                extra["side"] = beside.result()
        if extra:
            measured = {**measured, **extra}
        if callable(host_step):
            with ctx.stopwatch("host"):
                host = host_step(cfg, ctx.seed, ctx.key, measured)
            bar.update(1)
        result = _checked(f"{name}.report", report(cfg, measured, host))
        bar.update(1)
    has_row = callable(point) and not callable(training)
    if "point" in result.metrics and has_row:
        raise TypeError(
            f"{name}.report returned a metric named 'point': the lab's name for the point's row"
        )
    log_tables(ctx, result.tables, first_step)
    plots = [*result.plots, *(ctx.save_figure(fig, fname) for fname, fig in result.figures.items())]
    row = {k: v for k, v in measured.items() if k not in ("extras", *extra)}
    metrics = {"point": row, **result.metrics} if has_row else result.metrics
    return dataclasses.replace(result, metrics=metrics, plots=plots, figures={})


def train_rows(module: Any, cfg: Any, ctx: RunContext) -> dict[str, Any]:
    """A chunked point's rows trained for the run (``module.training``'s :class:`Training`):
    final ``state`` and ``monitors`` by row name, the ``setup``, ``wall_s`` by row name (and
    ``setup``) and ``next_step``, the next free log step."""
    with ctx.stopwatch("setup") as lap:
        plan = module.training(cfg, ctx.key)
    if not isinstance(plan, Training):
        raise TypeError(f"{module.NAME}.training returned {type(plan).__name__}, expected Training")
    names = list(plan.rows or {"main": None})
    with ctx.stopwatch("training"):
        done, _ = train_point(
            module,
            plan.cfg or cfg,
            ctx,
            plan.rows,
            starts=plan.starts,
            desc=f"{module.NAME} training",
            every=plan.every,
            log_rows=plan.log_rows,
        )
    per = len(done.wall_s) // len(names)
    walls = {k: sum(done.wall_s[i * per : (i + 1) * per]) for i, k in enumerate(names)}
    return {
        "state": done.state,
        "monitors": done.monitors,
        "setup": plan.setup,
        "wall_s": {**walls, "setup": lap.seconds},
        "next_step": done.next_step,
    }


def drive_chunks(module: Any, cfg: Any, ctx: RunContext) -> dict[str, Any]:
    """``module.chunks``' training (:class:`Chunks`) through the chunked driver: ``trained``
    (the driver's :class:`~dedebate.lab.driver.Chunked`) and ``chunks_setup``."""
    with ctx.stopwatch("chunks_setup"):
        plan = module.chunks(cfg, ctx.key)
    if not isinstance(plan, Chunks):
        raise TypeError(f"{module.NAME}.chunks returned {type(plan).__name__}, expected Chunks")
    with ctx.stopwatch("chunks"):
        done = run_chunks(
            ctx,
            f"{module.NAME} {plan.desc}",
            plan.init_state,
            plan.chunk,
            plan.n_chunks,
            monitors=plan.monitors,
            axis=plan.axis,
            every=plan.every,
            keep=plan.keep,
            log_rows=plan.log_rows,
        )
    return {"trained": done, "chunks_setup": plan.setup}


def _measured(out: Any) -> dict[str, Any]:
    """The point's row; a ``fn`` returning ``(metrics, extras)`` adds the arrays as ``extras``."""
    row, extras = out if isinstance(out, tuple) else (out, None)
    if extras is None:
        return row
    if "extras" in row:
        raise TypeError(
            "a point with extras returned a metric named 'extras': the lab's name for its arrays"
        )
    return {**row, "extras": extras}


def log_tables(
    ctx: RunContext, tables: Mapping[str, list[dict[str, Any]]], first_step: int = 0
) -> None:
    """Log each table row's numbers as one step (``TABLE/COLUMN``), from ``first_step`` on."""
    rows = ((t, row) for t, table in tables.items() for row in table)
    for step, (t, row) in enumerate(rows, start=first_step):
        ctx.log({f"{t}/{k}": v for k, v in row.items() if isinstance(v, Number)}, step=step)


def _checked(what: str, result: Any) -> ExperimentResult:
    """``result`` if it is an ExperimentResult of Claim rows, else a TypeError naming ``what``."""
    if not isinstance(result, ExperimentResult):
        raise TypeError(f"{what} returned {type(result).__name__}, expected ExperimentResult")
    if any(not isinstance(c, Claim) for c in result.claims):
        raise TypeError(f"{what} returned claims that are not Claim rows")
    return result
