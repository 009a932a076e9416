"""The self-play experiment's figures: training curves, and a sweep's rates."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dedebate.protocols.stochastic import lean_defaults

if TYPE_CHECKING:
    from . import Config


def guaranteed_sides(T: int, K: float = 2.0) -> tuple[float, float]:
    """Lean's bounds on P[out = 1] at a 2/3 majority: (>= on yes, <= on no) (spec DED 5.3)."""
    comp, sound = lean_defaults(K, T).check(K, T)
    return comp, 1.0 - sound


def plot_training(cfg: Config, mons, labels: list[str], b: float):
    """Training curves: P[out = 1] against Lean's guaranteed sides, |p - pi| against b."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, mon in zip(labels, mons):
        x = (np.arange(mon.value.shape[1]) + 1) * cfg.log_every
        for ax, arr in ((axes[0], np.asarray(mon.value)), (axes[1], np.asarray(mon.tracking))):
            (line,) = ax.plot(x, arr.mean(axis=0), label=f"{name} (mean)")
            ax.plot(x, arr.T, color=line.get_color(), alpha=0.25, lw=0.8)
    comp, sound = guaranteed_sides(cfg.T)
    axes[0].axhline(comp, color="g", ls="--", label=f"completeness {comp:.4f}")
    axes[0].axhline(sound, color="r", ls="--", label=f"acceptance bound {sound:.4f} (soundness)")
    axes[0].set_ylabel("P[out = 1] (training objective)")
    axes[1].axhline(b, color="k", ls="--", label=f"b = {b:g} (tracking criterion)")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("reach-weighted mean |p - pi|")
    for ax in axes:
        ax.set_xlabel("Alice update")
        ax.legend(fontsize=7)
    fig.suptitle(f"Stochastic debate self-play, F2 T={cfg.T} (thin lines: seeds)")
    fig.tight_layout()
    return fig


def sweep_figures(rows) -> dict:
    """configs/sweeps/selfplay_rates.yaml's figure: acceptance and gap against the rates."""
    import matplotlib.pyplot as plt

    if not rows or "lr_a" not in rows[0]:
        return {}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for b in sorted({float(r["lr_b"]) for r in rows}) if "lr_b" in rows[0] else [None]:
        sel = [r for r in rows if b is None or float(r["lr_b"]) == b]
        xs = sorted({float(r["lr_a"]) for r in sel})
        lab = "lr_b fixed" if b is None else f"lr_b = {b:g}"
        for ax, metric in zip(axes, ("value_mean", "gap_mean")):
            for case, ls in (("yes", "-"), ("no", "--")):
                at = [
                    [float(r[f"{case}/{metric}"]) for r in sel if float(r["lr_a"]) == x] for x in xs
                ]
                ax.plot(xs, [np.mean(y) for y in at], "o" + ls, label=f"{case}, {lab}")
    from . import Config

    comp, sound = guaranteed_sides(int(rows[0].get("T", Config().T)))
    axes[0].axhline(comp, color="g", ls=":", label=f"completeness {comp:.4f}")
    axes[0].axhline(sound, color="r", ls=":", label=f"acceptance bound {sound:.4f} (soundness)")
    axes[0].set_ylabel("trained pair's P[out = 1] (exact, mean over seeds)")
    axes[1].set_ylabel("exploitability gap (mean over seeds)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("Alice's step size lr_a")
        ax.legend(fontsize=7)
    fig.suptitle("Stochastic debate self-play: outcome against the learning rates")
    fig.tight_layout()
    return {"selfplay_rates": fig}
