"""The statistics and figures of a finished sweep.

Per point, the mean over seeds of every metric with a Student-t interval (:func:`per_point`);
one PNG per (metric, axis) with a 95% band (:func:`plot_sweep`) and the experiment's own
figures of the whole sweep (:func:`experiment_figures`, its optional ``sweep_figures`` hook).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dedebate.lab.rundir import eprint, jsonable, write_figure
from dedebate.lab.sweep_plan import RESERVED, SweepPlan


def t_interval(values: Any, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval over seeds (non-finite values dropped).

    Returns ``(mean, lo, hi)``; ``lo`` and ``hi`` NaN for one value (no interval: a plot draws
    no band, not one of width 0), all NaN for none.
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    m = float(x.mean())
    if x.size < 2:
        return (m, math.nan, math.nan)
    from dedebate.lab.claims import mean_interval

    return mean_interval(x, level)


def metric_names(rows: list[dict[str, Any]], axes: Mapping[str, Any]) -> list[str]:
    """The metric columns of rows: those holding numbers that are not index columns or axes."""
    out: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k in RESERVED or k in axes or k in out:
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(k)
    return out


def per_point(rows: list[dict[str, Any]], plan_: SweepPlan) -> list[dict[str, Any]]:
    """For each point: its axis values and, per metric, mean and t-interval over seeds.

    Returns one dict per point: ``point``, ``values``, ``seeds`` and ``{metric: {mean, lo, hi,
    n}}`` (``n``: the seeds whose value is a finite number, those the interval is over).
    """
    metrics = metric_names(rows, plan_.axes)
    by_point: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_point.setdefault(int(r["point"]), []).append(r)
    out = []
    for p in plan_.points:
        rs = by_point.get(p.index, [])
        entry: dict[str, Any] = {"point": p.index, "values": jsonable(p.values), "seeds": len(rs)}
        for m in metrics:
            vals = [r[m] for r in rs if isinstance(r.get(m), (int, float)) and math.isfinite(r[m])]
            mean, lo, hi = t_interval(vals)  # over the finite values: n counts those
            entry[m] = {"mean": mean, "lo": lo, "hi": hi, "n": len(vals)}
        out.append(entry)
    return out


def _number(value: Any) -> float | None:
    """An axis value as a number: a number, or a list of one number (``Ts: [[8], [64]]``)."""
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    ):
        return float(value)
    return None


def _numeric_axis(values: list[Any]) -> bool:
    return all(_number(v) is not None for v in values)


def _axis_number(value: Any) -> float:
    """A value of a numeric axis (:func:`_numeric_axis`) as a number."""
    x = _number(value)
    assert x is not None, f"{value!r} is not a number"
    return x


def _decades(values: list[Any]) -> bool:
    """Whether a numeric axis is positive and spans a factor of 10 or more (a log axis)."""
    x = [_axis_number(v) for v in values]
    return min(x) > 0 and max(x) >= 10 * min(x)


MAX_LINES = 8
MAX_METRICS = 24


def plot_sweep(
    rows: list[dict[str, Any]], plan_: SweepPlan, plots_dir: Path, only: list[str] | None = None
) -> list[str]:
    """One PNG per (metric, axis): the metric's mean over seeds against the axis, one line per
    combination of the other axes (at most ``MAX_LINES``), with a 95% t-interval band. Metrics:
    ``only`` if given, else every metric (the first ``MAX_METRICS``).

    Args:
        rows: the sweep's rows.
        plan_: its plan.
        plots_dir: where the PNGs go (created).
        only: the metrics to plot (unknown names: a warning).

    Returns the file names written (``METRIC-vs-AXIS.png``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir.mkdir(parents=True, exist_ok=True)
    stats = per_point(rows, plan_)
    metrics = metric_names(rows, plan_.axes)
    if only:
        unknown = [m for m in only if m not in metrics]
        if unknown:
            eprint(
                f"dedebate: warning: sweep.metrics names {', '.join(unknown)}, which the "
                f"sweep did not produce (metrics: {', '.join(metrics)})"
            )
        metrics = [m for m in only if m in metrics]
    elif len(metrics) > MAX_METRICS:
        eprint(
            f"dedebate: warning: plotting the first {MAX_METRICS} of {len(metrics)} metrics; "
            "choose others with sweep.metrics"
        )
        metrics = metrics[:MAX_METRICS]
    saved = []
    axes = [a for a in plan_.axes if len(plan_.axes[a]) > 1] or list(plan_.axes)
    for axis in axes:
        others = [a for a in plan_.axes if a != axis]
        lines: dict[str, list[dict[str, Any]]] = {}
        for e in stats:
            label = ", ".join(f"{a}={e['values'][a]}" for a in others) or "all"
            lines.setdefault(label, []).append(e)
        numeric = _numeric_axis(plan_.axes[axis])
        for m in metrics:
            fig, ax = plt.subplots(figsize=(6, 4))
            ax.ticklabel_format(axis="y", useOffset=False)  # a near-constant metric reads as is
            for label, es in list(lines.items())[:MAX_LINES]:
                if numeric:
                    es = sorted(es, key=lambda e: _axis_number(e["values"][axis]))
                xs = [e["values"][axis] for e in es]
                xpos = [_axis_number(x) for x in xs] if numeric else list(range(len(xs)))
                mean = [e[m]["mean"] for e in es]
                lo = [e[m]["lo"] for e in es]
                hi = [e[m]["hi"] for e in es]
                (line,) = ax.plot(xpos, mean, marker="o", label=label)
                ax.fill_between(xpos, lo, hi, alpha=0.2, color=line.get_color())
                if not numeric:
                    ax.set_xticks(xpos, [str(x) for x in xs])
            if numeric and _decades(plan_.axes[axis]):
                ax.set_xscale("log")
            ax.set_xlabel(axis)
            ax.set_ylabel(m)
            note = f"{len(plan_.seeds)} seeds, 95% t-interval"
            if len(lines) > MAX_LINES:
                note += f"; first {MAX_LINES} of {len(lines)} lines"
            ax.set_title(f"{plan_.experiment}: {m} vs {axis} ({note})", fontsize=9)
            if len(lines) > 1:
                ax.legend(fontsize=7)
            fig.tight_layout()
            fname = _safe(f"{m}-vs-{axis}") + ".png"
            write_figure(plots_dir / fname, fig, dpi=100)
            plt.close(fig)
            saved.append(fname)
    return saved


def experiment_figures(module: Any, rows: list[dict[str, Any]], plots_dir: Path) -> list[str]:
    """The experiment's own figures of a sweep: ``module.sweep_figures(rows)`` (optional; rows
    as in ``sweep.csv``) -> ``{name: matplotlib Figure}``, saved as ``plots/NAME.png``. A hook
    that fails costs its figures and a warning, not the sweep.
    """
    hook = getattr(module, "sweep_figures", None)
    if not callable(hook):
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        figs = hook(rows)
    except Exception as err:  # noqa: BLE001 - the sweep's rows are on disk already
        eprint(
            f"dedebate: warning: {getattr(module, 'NAME', module.__name__)}.sweep_figures "
            f"failed ({type(err).__name__}: {err}); no experiment figures"
        )
        return []
    plots_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, fig in (figs or {}).items():
        fname = _safe(name) + ".png"
        write_figure(plots_dir / fname, fig, dpi=100)
        plt.close(fig)
        saved.append(fname)
    return saved


def _safe(text: str) -> str:
    return "".join(c if (c.isalnum() or c in "-_.") else "_" for c in text)
