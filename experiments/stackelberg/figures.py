"""The Stackelberg experiment's figures: part 1's monitors by schedule, and a sweep's rates."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from . import Config


def sweep_figures(rows) -> dict:
    """``stackelberg_rates``: convergence against lr_a (or lr_b), a line per other swept value."""
    import matplotlib.pyplot as plt

    x_axis = next((a for a in ("lr_a", "lr_b") if rows and a in rows[0]), None)
    if x_axis is None:
        return {}
    other = [a for a in ("main_n_b", "lr_b", "tol") if a != x_axis and a in rows[0]]
    lines: dict = {}
    for r in rows:
        lines.setdefault(tuple(r[a] for a in other), {}).setdefault(float(r[x_axis]), []).append(r)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ylabels = ("A updates to convergence (mean; never = steps)", "converged fraction")
    for ax, key, ylabel in zip(axes, ("converged_at", "converged"), ylabels):
        for label, pts in sorted(lines.items()):
            xs = sorted(pts)
            name = ", ".join(f"{a} = {v:g}" for a, v in zip(other, label)) or "all"
            ax.plot(xs, [np.mean([r[key] for r in pts[x]]) for x in xs], "o-", label=name)
        ax.set(xlabel=f"{x_axis} (Adam step size)", ylabel=ylabel, xscale="log")
        ax.legend(fontsize=8)
    fig.suptitle("Stackelberg self-play: convergence against n_B and the learning rates")
    fig.tight_layout()
    return {"stackelberg_rates": fig}


def plot_schedules(cfg: Config, mon, names: list[str], thr: float):
    """Part 1's monitors by schedule: E[U_A], P[A correct] and B's max|Adv| (mean, 10-90%)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    x = np.arange(cfg.steps)
    for i, lab in enumerate(names):
        for ax, arr in zip(axes, (mon.u_a[i], mon.a_correct[i], mon.max_adv[i])):
            ax.plot(x, arr.mean(axis=0), label=lab)
            ax.fill_between(x, *np.quantile(arr, [0.1, 0.9], axis=0), alpha=0.2)
    axes[0].axhline(thr, color="k", ls="--", label="rho^-(d+1)")
    band = (thr * (1 - cfg.tol), thr * (1 + cfg.tol))  # the final-payoff row's band
    axes[0].axhspan(*band, color="k", alpha=0.08, label=f"rho^-(d+1) (1 +- {cfg.tol:g})")
    ylabels = ("mean E[U_A]", "P[A correct]", "B's realised max|Adv| (spec 6.3 tests)")
    for ax, ylabel, scale in zip(axes, ylabels, ("linear", "linear", "log")):
        ax.set(xlabel="A update", ylabel=ylabel, yscale=scale)
        ax.legend(fontsize=8)
    fig.suptitle(f"Stackelberg vs simultaneous play (mean, 10-90% band over {cfg.seeds} seeds)")
    fig.tight_layout()
    return fig
