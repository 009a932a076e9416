"""The report's figure: each liar's round tests (held-out and training trees) against delta, and
every player's payoff against the judge's noise (docs/ped-digits.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure  # no pyplot: nothing global to close

if TYPE_CHECKING:
    from . import Config


def premise_figure(cfg: Config, metrics: dict, families, liars: dict) -> Figure:
    """Left: per family and liar, its round tests' largest ``|Adv|``; right: payoffs by eta."""
    fig = Figure(figsize=(13, 4.5))
    left, right = fig.subplots(1, 2)
    x, w = np.arange(len(families)), 0.8 / (2 * len(liars))
    for j, (liar, what) in enumerate(liars.items()):  # points, not bars: a value, not an area
        held = np.array([metrics[f][f"{liar}_round_tests"] for f in families])
        lo, hi = np.array([metrics[f][f"{liar}_round_tests_interval"] for f in families]).T
        err = np.clip([held - lo, hi - held], 0.0, None)
        at, color = x - 0.4 + (2 * j + 0.5) * w, f"C{j}"
        label = f"{what}, held-out (95%, all tests)"
        left.errorbar(at, held, err, fmt="o", color=color, capsize=3, label=label)
        train = [metrics[f][f"{liar}_round_tests_train"] for f in families]
        left.plot(at + w, train, "s", color=color, mfc="none", label=f"{what}, B's training trees")
    left.axhline(cfg.delta, color="k", ls="--", lw=1, label=f"delta = {cfg.delta:g}")
    left.set_xticks(x, [f"{f} counts" for f in families])
    left.set(ylabel="largest |Adv| of the round tests (false roots)", xlim=(-0.6, len(x) - 0.4))
    left.set_title("Soundness premise: B against each liar's tests", fontsize=10)
    left.set_ylim(0.0, 1.6 * max(cfg.delta, left.get_ylim()[1]))  # room for the legend
    left.legend(fontsize=7, ncol=2, loc="upper left")
    etas = [float(e) for e in cfg.etas]
    for f, color in zip(families, ("tab:blue", "tab:orange", "tab:green")):
        m, margin = metrics[f], metrics[f]["rho"] ** -(cfg.depth + 1)
        honest = [m["honest_min"][str(e)] for e in etas]
        right.plot(etas, honest, "o-", color=color, label=f"{f}: honest A, min U_A")
        for liar, marker in zip(liars, ("s", "^", "v", "D")):
            y = np.array([m[f"{liar}_mean"][str(e)] for e in etas])
            lo, hi = np.array([m[f"{liar}_mean_interval"][str(e)] for e in etas]).T
            err = np.clip([y - lo, hi - y], 0.0, None)  # the soundness row's interval
            label = f"{f}: {liars[liar]}, mean U_A (95%)"
            right.errorbar(etas, y, err, fmt=marker + ":", color=color, capsize=3, label=label)
        bound = [margin - e for e in etas]  # wide and faint: honest A's minimum may sit on it
        label = f"{f}: rho^-(d+1) - eta"
        right.plot(etas, bound, color=color, lw=6, alpha=0.25, zorder=1, label=label)
    right.set(xlabel="judge noise eta", ylabel="U_A (held-out trees)")
    right.set_title("Payoffs against the judge's noise", fontsize=10)
    right.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
