"""The OI estimator experiment's figures: Algorithm 1's and the network's advantage traces, its
steps against the proven bound, and the sweep's steps against 1/delta^2."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dedebate.estimators.ogd import iteration_bound

if TYPE_CHECKING:
    from . import Config


def sweep_figures(rows):
    """The Algorithm 1 sweep (``configs/sweeps/ogd_steps.yaml``): measured steps (mean over
    problems and seeds) and the proven bound against 1/delta^2, one line per |Z|, one panel
    per step rule."""
    import matplotlib.pyplot as plt

    series: dict[tuple[str, int], dict[float, list[float]]] = {}
    for r in rows:
        for k, v in r.items():
            parts = k.split("/")
            if len(parts) == 4 and parts[3] == "steps_mean" and isinstance(v, (int, float)):
                delta = float(r[f"{parts[2]}/delta"])
                series.setdefault((parts[1], int(parts[0][1:])), {}).setdefault(delta, []).append(
                    float(v)
                )
    rules = sorted({rule for rule, _ in series})
    if not rules:
        return {}
    fig, axes = plt.subplots(1, len(rules), figsize=(6 * len(rules), 4.5), squeeze=False)
    for ax, rule in zip(axes[0], rules):
        for n_z in sorted(z for r_, z in series if r_ == rule):
            pts = sorted(series[(rule, n_z)].items(), reverse=True)
            x = np.asarray([1.0 / d**2 for d, _ in pts])
            (line,) = ax.plot(
                x,
                [max(float(np.mean(v)), 0.8) for _, v in pts],
                "o-",
                label=f"|Z| = {n_z}: measured T",
            )
            ax.plot(
                x,
                [iteration_bound(rule, n_z, d) for d, _ in pts],
                "--",
                color=line.get_color(),
                label=f"|Z| = {n_z}: proven bound",
            )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="1 / delta^2",
            ylabel="steps T (mean; T = 0 drawn at 0.8)",
            title=f"Algorithm 1, {rule} step: measured vs proven",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    return {"algorithm1_steps_vs_bound": fig}


def plot_traces(cfg: Config, traces, net_rows):
    """Algorithm 1's advantage trace per step rule and the networks' per learning rate (seed 0)."""
    import matplotlib.pyplot as plt

    q = cfg.net_q if cfg.net_q in cfg.q_values else cfg.q_values[-1]
    delta = min(cfg.deltas)
    fig, ax = plt.subplots(figsize=(7, 4))
    for rule in cfg.step_rules:
        tr = traces[(rule, q, delta)]
        tr = tr[~np.isnan(tr)]
        ax.plot(np.arange(len(tr)), tr, label=f"tabular, {rule} step")
    ax.axhline(delta, color="k", ls="--", label=f"delta = {delta:g}")
    ax.set(
        xlabel="step t",
        ylabel="max_f |Adv_f(h_t)|",
        yscale="log",
        title=f"Algorithm 1 advantage trace (|Z| = {2**q}, seed 0)",
    )
    ax.legend()
    fig.tight_layout()
    fig2, ax2 = plt.subplots(figsize=(7, 4))
    for r in net_rows[: len(cfg.net_lrs)]:
        ax2.plot(r["net_trace"], label=f"network, lr = {r['lr']:g}")
    ax2.axhline(cfg.net_delta, color="k", ls="--", label=f"delta = {cfg.net_delta:g}")
    ax2.set(
        xlabel="round",
        ylabel="max_f |Adv_f(h_theta)|",
        yscale="log",
        title=f"Flax estimator advantage trace (|Z| = {2**cfg.net_q}, seed 0)",
    )
    ax2.legend()
    fig2.tight_layout()
    return fig, fig2


def plot_steps(cfg: Config, rows):
    """Algorithm 1's steps T of every run against |Z|/delta^2 beside both proven bounds."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = np.asarray(sorted({r["z_over_delta2"] for r in rows}))
    for rule, marker in zip(cfg.step_rules, ("o", "s")):
        sel = [r for r in rows if r["step_rule"] == rule]
        ax.scatter(
            [r["z_over_delta2"] for r in sel],
            [max(r["steps"], 0.8) for r in sel],
            marker=marker,
            alpha=0.6,
            label=f"T, {rule} step",
        )
    ax.plot(xs, 36 * xs, "k-", label="36 |Z|/delta^2 (hazan bound)")
    ax.plot(xs, 4.5 * xs, "k--", label="4.5 |Z|/delta^2 (tight bound)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="|Z| / delta^2",
        ylabel="steps T (T = 0 drawn at 0.8)",
        title="Algorithm 1 steps vs the proven bound",
    )
    ax.legend()
    fig.tight_layout()
    return fig
