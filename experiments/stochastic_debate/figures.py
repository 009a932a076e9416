"""The stochastic debate's figures: acceptance, queries against T, the sweep's budget frontier."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .budget import ALICE_C, frontier

if TYPE_CHECKING:
    from . import Config


def plot_acceptance(rows: list[dict], cfg: Config):
    """The worst zoo member's acceptance against T beside the proven bounds (Lean constants)."""
    from matplotlib.figure import Figure  # no pyplot: nothing global to close

    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    for K in cfg.Ks:
        for side, marker, zoo in (
            ("completeness", "o", "min over Bob zoo"),
            ("soundness", "s", "max over Alice zoo"),
        ):
            rs = [r for r in rows if r["K"] == K and r["side"] == side and r["constants"] == "lean"]
            if not rs:
                continue
            T = [r["T"] for r in rs]
            v = np.array([r["value"] for r in rs])
            err = np.array([[r["value"] - r["lo"] for r in rs], [r["hi"] - r["value"] for r in rs]])
            ax.errorbar(
                T,
                v,
                yerr=err,
                marker=marker,
                capsize=3,
                label=f"K={K} {side} ({zoo})",
            )
            # each row's own proven bound (it depends on K, T and the fixture's exact P_M(1))
            ax.plot(
                T,
                [r["bound"] for r in rs],
                ls="--",
                lw=1,
                color="g" if side == "completeness" else "r",
                label=f"proven {side} bound (Lean)" if K == cfg.Ks[0] else None,
            )
    ax.axhline(0.6, color="g", ls=":", lw=1, label="3/5")
    ax.axhline(0.4, color="r", ls=":", lw=1, label="2/5")
    ax.set_xscale("log")
    ax.set_xlabel("T (steps)")
    ax.set_ylabel("P[output 1]")
    ax.set_title("Stochastic debate, Lean constants: worst zoo member vs proven bounds (95% CI)")
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    return fig


def plot_queries(qrows: list[dict], fit: dict):
    """Oracle queries per debate against T: the provers', Vera's and their bounds."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for K in sorted({r["K"] for r in qrows}):
        rs = sorted([r for r in qrows if r["K"] == K], key=lambda r: r["T"])
        T = np.array([r["T"] for r in rs], np.float64)
        ax.plot(T, [r["alice"] for r in rs], "o-", label=f"K={K} Alice (prover)")
        ax.plot(T, [r["bob"] for r in rs], "^-", label=f"K={K} Bob (prover)")
        (vera,) = ax.plot(
            T, [r["vera_max"] for r in rs], "s--", label=f"K={K} Vera (max over trials)"
        )
        # the bounds the rows compare with: N_V (vera_claims), c K^2 T ln(200T) (cost_checks)
        ax.plot(
            T,
            [r["n_vera"] for r in rs],
            "-",
            color=vera.get_color(),
            lw=1,
            alpha=0.6,
            label=f"K={K} N_V (Vera's bound)",
        )
        ax.plot(
            T,
            ALICE_C * K * K * T * np.log(200 * T),
            "k:",
            lw=1,
            label=f"K={K} {ALICE_C} K^2 T ln(200T) (Alice)",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("T (steps)")
    ax.set_ylabel("oracle queries per debate")
    ax.set_title(f"Queries: prover ~ {fit['c']:.0f} K^2 T ln(200T) (fit), verifier <= N_V")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def sweep_figures(rows) -> dict:
    """``{"budget_frontier": figure}`` when the sweep went over ``scale`` (else ``{}``): per count
    (N_A, N_B, N_V), Lean's proven count (solid) and the empirical frontier's
    (:func:`.budget.frontier`; dashed, labelled with its factor and
    a ``?`` where the next factor is undecided) against T, one colour per K; where factor 1 is
    not safe, a cross (unsafe) or a ``?`` (undecided) at Lean's count."""
    fr = [e for e in frontier(rows) if not e["others"]]
    if not rows or "scale" not in rows[0] or not fr:
        return {}
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    colors = {1: "tab:blue", 2: "tab:orange", 4: "tab:green"}
    for i, (ax, label) in enumerate(zip(axes, ("N_A (Alice)", "N_B (Bob)", "N_V (Vera)"))):
        for K in sorted({e["K"] for e in fr}):
            es = sorted((e for e in fr if e["K"] == K), key=lambda e: e["T"])
            col = colors.get(K)
            T = [e["T"] for e in es]
            ax.plot(T, [e["lean"][i] for e in es], "o-", color=col, label=f"K={K} Lean (proven)")
            ok = [e for e in es if e["factor"] is not None]
            ax.plot(
                [e["T"] for e in ok],
                [e["counts"][i] for e in ok],
                "s--",
                color=col,
                label=f"K={K} frontier (empirical)",
            )
            for e in ok:
                ax.annotate(
                    f"x{e['factor']:g}" + "?" * (e["stop"] == "undecided"),
                    (e["T"], e["counts"][i]),
                    fontsize=6,
                    textcoords="offset points",
                    xytext=(3, -9),
                )
            for stop, mark in (("unsafe", "x"), ("undecided", "$?$")):
                bad = [e for e in es if e["factor"] is None and e["stop"] == stop]
                ax.plot(
                    [e["T"] for e in bad],
                    [e["lean"][i] for e in bad],
                    marker=mark,
                    linestyle="none",
                    color="k",
                    ms=9,
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("T (steps)")
        ax.set_title(label, fontsize=9)
    axes[0].set_ylabel("oracle samples per estimate")
    axes[0].legend(fontsize=6)
    fig.suptitle(
        "Smallest common factor on (N_A, N_B, N_V) keeping completeness > 3/5 and "
        "soundness < 2/5 vs every zoo member (one-sided Clopper-Pearson, family-wise "
        "95%) against Lean's counts",
        fontsize=9,
    )
    fig.tight_layout()
    return {"budget_frontier": fig}
