"""The stochastic self-play experiment's report rows (gating and findings), Lean's guaranteed
sides and its training curves (pure)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from dedebate.lab.experiment import Claim, mean_interval, strict_max, strict_min, wilson_interval
from dedebate.protocols.stochastic import DebateParams, lean_defaults

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
            (line,) = ax.plot(x, arr.mean(axis=0), label=f"{lab} (mean)")
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
    claims.append(
        Claim.exact(
            "Honest Alice vs every self-play-trained Bob wins at least the completeness bound",
            "spec DED 5.3 (Lean completeness'), exact DP",
            f">= {comp:.4f}",
            h_min,
            bool(h_min >= comp),
            note=(
                f"worst seed; per seed {np.round(h, 4).tolist()}; bound at a 2/3 majority: "
                f"{m.sides[0]:.4f}; {setting}"
            ),
        )
    )
    v = np.asarray(m.alice_vs_honest)
    v_max = strict_max(v)
    claims.append(
        Claim.exact(
            "Every self-play-trained Alice vs honest Bob is accepted at most 1 - the soundness "
            "bound",
            "spec DED 5.3 (Lean soundness'), exact DP",
            f"<= {sound_acc:.4f}",
            v_max,
            bool(v_max <= sound_acc),
            note=(
                f"worst seed; per seed {np.round(v, 4).tolist()}; bound at a 2/3 majority: "
                f"{m.sides[1]:.4f}"
            ),
        )
    )
    return claims


def mc_claims(mc: dict[str, tuple[float, float, float]]) -> list[Claim]:
    """Per instance, the gating Monte-Carlo row (pure): ``mc[case] = (exact mean over seeds,
    Monte-Carlo wins pooled over seeds, debates)``; the exact binomial test of "the Monte-Carlo
    acceptance equals the exact mean" (a non-finite number or no debate fails the row)."""
    claims = []
    for case, (exact_mean, wins, n) in mc.items():
        claims.append(
            Claim.proportion(
                f"Monte-Carlo play of the trained pairs ({case}) agrees with the exact DP",
                "dedebate.protocols.stochastic_batch.run_trials vs exact DP",
                "==",
                exact_mean,
                wins,
                n,
                note=(
                    f"{wins}/{n} debates pooled over seeds (the exact binomial test at the seeds' "
                    "mean exact value is conservative for a pool of binomials)"
                ),
                bound=f"contains the exact mean {exact_mean:.4f}",
            )
        )
    return claims


def seed_values(res: dict, k: str) -> np.ndarray:
    """Metric ``k`` of an instance's measured pairs, per seed."""
    return np.array([e[k] for e in res["ev"]])


def wrong_side(evs: list[dict], case: str) -> int:
    """The seeds whose trained pair accepts on the wrong side of 1/2 for instance ``case``."""
    return int(sum((e["value"] > 0.5) != (case == "yes") for e in evs))


def outcome_claims(results: dict, sides: tuple[float, float]) -> list[Claim]:
    """Per instance, the self-play outcome finding: the worst seed's exact acceptance on Lean's
    guaranteed side ``sides`` (:func:`guaranteed_sides`; not a theorem for learned pairs)."""
    claims = []
    for case, want_hi in (("yes", True), ("no", False)):
        res = results[case]
        vals = seed_values(res, "value")
        m, lo, hi = mean_interval(vals, support=(0.0, 1.0))  # an acceptance probability
        worst = vals.min() if want_hi else vals.max()
        ok = worst >= sides[0] if want_hi else worst <= sides[1]
        claims.append(
            Claim(
                f"Self-play on the {case}-instance: the trained pair's acceptance is on the "
                "protocol's guaranteed side (worst seed)",
                "spec DED 5.3 bounds (not a theorem for learned pairs)",
                f">= {sides[0]:.4f}" if want_hi else f"<= {sides[1]:.4f}",
                worst,
                worst,
                worst,
                bool(ok),
                finding=True,
                note=(
                    f"worst seed; mean {m:.4f} [{lo:.4f}, {hi:.4f}] over seeds; per seed "
                    f"{np.round(vals, 4).tolist()}; P_M(1) = {res['p1']:.4f}"
                ),
            )
        )
    return claims


def tracking_claims(results: dict, constants: DebateParams) -> list[Claim]:
    """Per instance, the tracking finding: the reach-weighted mean |p - pi| below b."""
    claims = []
    for case, who in (("yes", "winning"), ("no", "lying")):
        res = results[case]
        trk = seed_values(res, "tracking")
        m, lo, hi = mean_interval(trk, support=(0.0, 1.0))  # a mean |p - pi|
        claims.append(
            Claim(
                f"The {who} Alice's claims track the truth ({case}-instance): reach-weighted mean "
                "|p - pi| below b",
                "descriptive; criterion fixed in advance",
                f"95% upper < b = {constants.b:g}",
                m,
                lo,
                hi,
                passed=bool(hi < constants.b),
                finding=True,
                note=(
                    f"per seed {np.round(trk, 5).tolist()}; tau_V = {constants.tau_vera:g}, "
                    f"s = {constants.s:g}; largest |p - pi| at a visited prefix per seed "
                    f"{np.round(seed_values(res, 'max_dev_visited'), 4).tolist()}"
                ),
            )
        )
    return claims


def targeting_claims(results: dict) -> list[Claim]:
    """Per instance, the abort-targeting finding: hit rate minus false-alarm rate >= 0.5."""
    claims = []
    for case in ("yes", "no"):
        res = results[case]
        hit, fa = seed_values(res, "hit"), seed_values(res, "false_alarm")
        m, lo, hi = mean_interval(hit - fa, support=(-1.0, 1.0))  # a difference of two rates
        fa_c = seed_values(res, "false_alarm_c").mean()
        claims.append(
            Claim(
                f"The trained Bob's aborts target real deviations ({case}-instance): "
                "P[abort | |p - pi| in [b, 4b]] - P[abort | |p - pi| < s]",
                "descriptive; criterion fixed in advance",
                "95% lower >= 0.5",
                m,
                lo,
                hi,
                passed=bool(lo >= 0.5),
                finding=True,
                note=(
                    f"hit rate mean {hit.mean():.4f} (per seed {np.round(hit, 3).tolist()}), "
                    f"false alarm mean {fa.mean():.4f} (per seed {np.round(fa, 4).tolist()}); "
                    f"false alarm at |p - pi| <= c: {fa_c:.4f}; "
                    "reach-weighted over visited prefixes"
                ),
            )
        )
    return claims


def schedule_claim(
    n_b: int, n_b_sweep: tuple[int, ...], results: dict
) -> tuple[Claim, dict[str, dict[str, int]]]:
    """The n_B schedule finding (more Bob updates leave no more no-instance seeds on the wrong
    side) and its wrong-side seed counts per n_B and instance."""
    sched = {n_b: {c: wrong_side(results[c]["ev"], c) for c in results}}
    for n in n_b_sweep:
        sched[n] = {c: wrong_side(results[c]["sweep"][n], c) for c in results}
    lo_nb, hi_nb = min(sched), max(sched)
    k_hi, k_lo = sched[hi_nb]["no"], sched[lo_nb]["no"]
    S = len(results["no"]["ev"])
    f, lo, hi = wilson_interval(k_hi, S)
    claim = Claim(
        f"More Bob updates per Alice update (n_B = {hi_nb} vs {lo_nb}) do not leave more "
        "no-instance seeds on the wrong side (acceptance > 1/2)",
        "spec PED 8.5 recommendation, transferred (criterion: the recommendation itself)",
        f"<= n_B = {lo_nb} fraction ({k_lo}/{S})",
        f,
        lo,
        hi,
        passed=k_hi <= k_lo,
        finding=True,
        note=(
            "wrong-side seeds (yes / no) per n_B: "
            + "; ".join(f"n_B = {n}: {sched[n]['yes']} / {sched[n]['no']}" for n in sorted(sched))
            + f" of {S}; same seeds and initialisations for every n_B"
        ),
    )
    return claim, {str(n): sched[n] for n in sorted(sched)}


def convergence_claims(results: dict, gap_tol: float) -> list[Claim]:
    """Per instance, the convergence finding: a majority of seeds within ``gap_tol`` of
    equilibrium (Wilson lower bound > 1/2)."""
    claims = []
    for case in ("yes", "no"):
        res = results[case]
        gap = seed_values(res, "gap")
        S = len(gap)
        k = int((gap <= gap_tol).sum())
        f, lo, hi = wilson_interval(k, S)
        best = np.round(seed_values(res, "bob_best_response"), 4).tolist()
        claims.append(
            Claim(
                f"Self-play converges ({case}-instance): exploitability gap <= {gap_tol:g}",
                "descriptive; criterion fixed in advance",
                "fraction of seeds, Wilson lower > 1/2",
                f,
                lo,
                hi,
                passed=bool(lo > 0.5),
                finding=True,
                note=(
                    f"{k}/{S} seeds; gap per seed {np.round(gap, 4).tolist()} (Alice's grid best "
                    "response, a lower bound, minus Bob's exact best response); Bob's best "
                    f"response value per seed {best}"
                ),
            )
        )
    return claims
