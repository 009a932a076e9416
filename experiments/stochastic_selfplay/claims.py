"""The stochastic self-play experiment's gating rows, Lean's guaranteed sides and its training
curves (pure)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from dedebate.lab.experiment import Claim, strict_max, strict_min
from dedebate.protocols.stochastic import lean_defaults

if TYPE_CHECKING:
    from . import Config

K_F2 = 2.0  # the F2 fixtures' Lipschitz constant


def guaranteed_sides(T: int, K: float = K_F2) -> tuple[float, float]:
    """Lean's guarantee with its default constants of (K, T) at a 2/3 majority (spec DED 5.3):
    P[out = 1] is at least the first on a yes-instance with P_M(1) >= 2/3 and at most the second
    on a no-instance with P_M(0) >= 2/3 (1 - the soundness bound)."""
    comp, sound = lean_defaults(K, T).check(K, T)
    return comp, 1.0 - sound


def plot_training(cfg: Config, mons, labels: list[str], b: float):
    """Training curves: P[out = 1] against Lean's guaranteed sides, and the reach-weighted
    |p - pi| against b, the tracking rows' criterion."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for lab, mon in zip(labels, mons):
        x = (np.arange(mon.value.shape[1]) + 1) * cfg.log_every
        for ax, arr in ((axes[0], np.asarray(mon.value)), (axes[1], np.asarray(mon.tracking))):
            line, = ax.plot(x, arr.mean(axis=0), label=f"{lab} (mean)")
            ax.plot(x, arr.T, color=line.get_color(), alpha=0.25, lw=0.8)
    comp, sound = guaranteed_sides(cfg.T)
    axes[0].axhline(comp, color="g", ls="--", label=f"completeness {comp:.4f}")
    axes[0].axhline(sound, color="r", ls="--", label=f"soundness {sound:.4f}")
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


@dataclasses.dataclass
class Measured:
    """What the gating rows read (:func:`proven_claims`), measured by :func:`run` on the
    trained players.

    ``comp``: the completeness bound at the yes-instance; ``sound_acc``: 1 - the soundness
    bound at the no-instance; ``setting``: the instance, for the notes; ``honest_vs_bob``: per
    seed, honest Alice's exact acceptance against the trained Bob (yes-instance);
    ``alice_vs_honest``: per seed, the trained Alice's exact acceptance against honest Bob
    (no-instance); ``sides``: :func:`guaranteed_sides` of the fixture, for the notes."""

    comp: float
    sound_acc: float
    setting: str
    honest_vs_bob: np.ndarray
    alice_vs_honest: np.ndarray
    sides: tuple[float, float]


def proven_claims(m: Measured) -> list[Claim]:
    """The proven gating rows from the measured numbers ``m`` (pure): honest Alice vs every
    trained Bob >= the completeness bound, every trained Alice vs honest Bob <= 1 - the
    soundness bound (spec DED 5.3; worst seed, exact). A value that is not finite (or no seed)
    fails its row."""
    claims, comp, sound_acc, setting = [], m.comp, m.sound_acc, m.setting
    h = np.asarray(m.honest_vs_bob)
    h_min = strict_min(h)
    claims.append(Claim.exact(
        "Honest Alice vs every self-play-trained Bob wins at least the completeness bound",
        "spec DED 5.3 (Lean completeness'), exact DP", f">= {comp:.4f}", h_min,
        bool(h_min >= comp),
        note=(f"worst seed; per seed {np.round(h, 4).tolist()}; bound at a 2/3 majority: "
              f"{m.sides[0]:.4f}; {setting}")))
    v = np.asarray(m.alice_vs_honest)
    v_max = strict_max(v)
    claims.append(Claim.exact(
        "Every self-play-trained Alice vs honest Bob is accepted at most 1 - the soundness bound",
        "spec DED 5.3 (Lean soundness'), exact DP", f"<= {sound_acc:.4f}", v_max,
        bool(v_max <= sound_acc),
        note=(f"worst seed; per seed {np.round(v, 4).tolist()}; bound at a 2/3 majority: "
              f"{m.sides[1]:.4f}")))
    return claims


def mc_claims(mc: dict[str, tuple[float, float, float]]) -> list[Claim]:
    """Per instance, the gating Monte-Carlo row (pure): ``mc[case] = (exact mean over seeds,
    Monte-Carlo wins pooled over seeds, debates)``; the exact binomial test of "the Monte-Carlo
    acceptance equals the exact mean" (a non-finite number or no debate fails the row)."""
    claims = []
    for case, (exact_mean, wins, n) in mc.items():
        claims.append(Claim.proportion(
            f"Monte-Carlo play of the trained pairs ({case}) agrees with the exact DP",
            "dedebate.protocols.stochastic_batch.run_trials vs exact DP", "==", exact_mean, wins, n,
            note=(f"{wins}/{n} debates pooled over seeds (the exact binomial test at the seeds' "
                  "mean exact value is conservative for a pool of binomials)"),
            bound=f"contains the exact mean {exact_mean:.4f}"))
    return claims


def seed_values(res: dict, k: str) -> np.ndarray:
    """Metric ``k`` of an instance's measured pairs, per seed."""
    return np.array([e[k] for e in res["ev"]])


def wrong_side(evs: list[dict], case: str) -> int:
    """The seeds whose trained pair accepts on the wrong side of 1/2 for instance ``case``."""
    return int(sum((e["value"] > 0.5) != (case == "yes") for e in evs))
