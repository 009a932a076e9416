"""The Stackelberg experiment's rows and figures, read from its trained runs (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import numpy as np

from dedebate.lab.experiment import Claim, mean_interval, wilson_interval
from dedebate.trees.stability import tree_rho

from .runs import ProvenMeasured, Trained, point_metrics, summarise

if TYPE_CHECKING:
    from . import Config

EXACT_TOL = 1e-6  # the exact rows' tolerance: float32 rounding of sums of payoffs ~1/4
LP_TOL = 1e-6  # rounding of the fbs linear programs when checking that the trees are rho-stable
FINALS = ("u_a", "a_correct", "p_stable", "max_adv", "calib", "certified")


def _r(x, n: int) -> list[float]:
    return [round(float(v), n) for v in np.ravel(np.asarray(x, np.float64))]


def _per_seed(**columns) -> list[dict]:  # one table row per seed
    n = len(next(iter(columns.values())))
    return [
        {"seed": s, **{k: np.asarray(v)[s].tolist() for k, v in columns.items()}} for s in range(n)
    ]


def labels(cfg: Config) -> list[str]:
    """Part 1's schedules, as tables and figures name them."""
    return [f"n_B = {n}" for n in cfg.n_b_values] + ["simultaneous"]


def stable_rows(cfg: Config, t: Trained):
    """Parts 1 and 3 (findings): ``(claims, tables, metrics)`` of part 1's trained runs."""
    mon, thr, seeds, steps, d = t.mon, cfg.rho ** -(cfg.depth + 1), cfg.seeds, cfg.steps, cfg.depth
    tree = jax.tree.map(lambda x: x[0, 0], t.trees)
    rho_tree = tree_rho(tree, cand=tree.honest_cand)
    conv = summarise(cfg, mon)["converged_at"]  # [schedule, seed]
    done, names = conv < steps, labels(cfg)
    im, ib = cfg.n_b_values.index(cfg.main_n_b), cfg.n_b_values.index(max(cfg.n_b_values))
    k, kb, ks = (int(done[i].sum()) for i in (im, ib, -1))
    conv_iv, best_iv = wilson_interval(k, seeds), wilson_interval(kb, seeds)
    u_fin = mon.u_a[im, :, -1]
    _, ulo, uhi = fin_iv = mean_interval(u_fin)
    fracs = {lab: float(done[i].mean()) for i, lab in enumerate(names)}
    med = {lab: float(np.median(conv[i])) for i, lab in enumerate(names)}
    warm_note = ""
    if cfg.b_warm_start:
        warm_note = (
            f"; B warm-started from Algorithm 1 (delta = {cfg.warm_delta:g}, A init scale "
            f"{cfg.a_init_scale:g}), initial max|Adv| {_r(t.warm['adv_warm'], 4)}"
        )
    claims = [
        Claim(
            f"Stable candidate available (n_B = {cfg.main_n_b}): A converges to correct answers, "
            f"the stable decomposition and payoff within {cfg.tol:g} of rho^-(d+1)",
            "spec PED 7.4, 8.5; no proven rate",
            "fraction of seeds > 1/2",
            *conv_iv,
            passed=conv_iv[1] > 0.5,
            finding=True,
            note=(
                f"{k}/{seeds} seeds; A updates needed {[int(c) for c in conv[im] if c < steps]} "
                f"of {steps}; d = {d}, q = 5, rho = {cfg.rho:g} (tree fbs max {rho_tree:.3f}), "
                f"{cfg.n_trees} trees/seed; final certified rho^(d+1)(U_A - eta) = "
                f"{_r(mon.certified[im, :, -1], 3)}; B's final realised max|Adv| against A's "
                f"spec 6.3 tests {_r(mon.max_adv[im, :, -1], 4)} (calibration proxy "
                f"{_r(mon.calib[im, :, -1], 3)})" + warm_note
            ),
        ),
        Claim(
            f"Stable candidate (n_B = {cfg.main_n_b}): final mean E[U_A] near rho^-(d+1) = {thr:g}",
            "spec PED 7.4 (practical reading)",
            f"in [{thr * (1 - cfg.tol):.4f}, {thr * (1 + cfg.tol):.4f}]",
            *fin_iv,
            passed=bool(ulo >= thr * (1 - cfg.tol) and uhi <= thr * (1 + cfg.tol)),
            finding=True,
            note=f"per seed {_r(u_fin, 4)}; 95% Student t interval over seeds",
        ),
        Claim(
            f"Several B updates per A update (n_B = {max(cfg.n_b_values)}) converge at least as "
            "often as simultaneous gradient play",
            "spec PED 8.5 (recommendation; no proven rate)",
            f">= simultaneous ({ks}/{seeds})",
            *best_iv,
            passed=kb >= ks,
            finding=True,
            note="converged fraction / median A updates to converge (steps = never): "
            + "; ".join(f"{lab}: {fracs[lab]:.2f} / {med[lab]:g}" for lab in names)
            + f"; wall {t.wall:.1f} s incl. compile",
        ),
    ]
    tables = {
        "stable": [
            {"schedule": lab, **row}
            for i, lab in enumerate(names)
            for row in _per_seed(
                converged_at=conv[i],
                converged=done[i],
                **{f"final_{f}": getattr(mon, f)[i, :, -1] for f in FINALS},
            )
        ],
        "schedules": [
            {
                "part": "stable",
                "schedule": lab,
                "converged": int(done[i].sum()),
                "final_u_a_mean": float(mon.u_a[i, :, -1].mean()),
            }
            for i, lab in enumerate(names)
        ],
    }
    metrics = {
        "point": point_metrics(cfg, mon),  # the run's sweep row (point()'s)
        "stable": {
            "fraction_converged": fracs,
            "median_updates_to_converge": med,
            "wall_s": t.wall,
            "threshold": thr,
            "tree_rho": rho_tree,
            "final_max_adv_mean": float(mon.max_adv[im, :, -1].mean()),
        },
    }
    return claims, tables, metrics


def unstable_rows(cfg: Config, mon, wall: float):
    """Part 2 (a finding): ``(claims, tables, metrics)``: A's payoff stays below rho^-(d+1)."""
    thr, tail = cfg.rho ** -(cfg.depth + 1), max(1, cfg.steps // 10)
    u_tail = mon.u_a[0, :, -tail:].mean(axis=-1)
    m, _, hi = tail_iv = mean_interval(u_tail)
    claim = Claim(
        f"Only the unstable hidden-flaw AND decomposition (fbs 5 at true claims, rho = "
        f"{cfg.rho:g}): A's trained payoff stays below rho^-(d+1) = {thr:g}",
        "spec PED 8.7, 9.5",
        f"< {thr:g}",
        *tail_iv,
        passed=bool(hi < thr),
        finding=True,
        note=(
            f"mean E[U_A] over the last {tail} A updates, per seed {_r(u_tail, 4)}; max over "
            f"training {_r(mon.u_a[0].max(axis=-1), 4)}; P[A correct] final "
            f"{_r(mon.a_correct[0, :, -1], 3)}; n_B = {cfg.main_n_b}; wall {wall:.1f} s"
        ),
    )
    table = _per_seed(
        tail_u_a=u_tail,
        final_a_correct=mon.a_correct[0, :, -1],
        final_max_adv=mon.max_adv[0, :, -1],
    )
    return [claim], {"unstable": table}, {"unstable": {"tail_u_a_mean": m, "wall_s": wall}}


def warm_rows(cfg: Config, mon, info: dict, wall: float, setup_wall: float):
    """Part 4 (a finding): ``(claims, tables, metrics)``: cold vs Algorithm-1 warm-started B."""
    n, conv = cfg.warm_seeds, summarise(cfg, mon)["converged_at"]  # [cold, warm] x seeds
    cold, warm = info["adv_cold"], info["adv_warm"]
    k_c, k_w = (int((conv[i] < cfg.steps).sum()) for i in range(2))
    claim = Claim.exact(
        f"Warm start (n_B = {cfg.main_n_b}): B fitted to Algorithm 1's estimator for a random "
        f"initial A starts with a smaller realised max|Adv| against A's spec 6.3 tests than the "
        f"cold (uniform) B",
        "spec PED 5.3, 6.3 (warm start); no proven rate",
        "< cold, every seed",
        float(warm.max()),
        passed=bool(np.all(warm < cold)),
        note=(
            f"{n} seeds; initial max|Adv| cold {_r(cold, 4)} vs warm {_r(warm, 4)} (Algorithm 1 "
            f"exit {_r(info['ogd_max_adv'], 5)} < delta = {cfg.warm_delta:g}; fit KL "
            f"{_r(info['fit_kl'], 5)}); converged (A init scale {cfg.warm_a_init_scale:g}): "
            f"cold {k_c}/{n} at {conv[0].tolist()}, warm {k_w}/{n} at {conv[1].tolist()} "
            f"(never = {cfg.steps}); final E[U_A] cold {_r(mon.u_a[0, :, -1], 4)}, warm "
            f"{_r(mon.u_a[1, :, -1], 4)}; set-up wall {setup_wall:.1f} s"
        ),
        finding=True,
    )
    table = _per_seed(
        adv_cold=cold,
        adv_warm=warm,
        **{k: info[k] for k in ("fit_kl", "ogd_max_adv", "ogd_steps")},
        converged_at_cold=conv[0],
        converged_at_warm=conv[1],
        final_u_a_cold=mon.u_a[0, :, -1],
        final_u_a_warm=mon.u_a[1, :, -1],
    )
    metrics = {
        "converged_cold": k_c,
        "converged_warm": k_w,
        "wall_s": wall,
        "setup_wall_s": setup_wall,
        "adv_cold_mean": float(cold.mean()),
        "adv_warm_mean": float(warm.mean()),
    }
    return [claim], {"warm": table}, {"warm": metrics}


def proven_claims(cfg: Config, m: ProvenMeasured) -> list[Claim]:
    """The gating rows from the exact numbers ``m``: completeness (its premise, fbs <= rho, must
    hold) and chaining, each within ``EXACT_TOL``; a number that is not finite fails its row."""
    thr = cfg.rho ** -(cfg.depth + 1)
    premise = m.rho_max <= cfg.rho + LP_TOL
    return [
        Claim.exact(
            f"Completeness against the trained estimators: the honest A (spec 2.3) earns >= "
            f"rho^-(d+1) = {thr:g} against every trained B on the rho-stable trees of part 1 "
            f"(every seed, every schedule)",
            "spec PED 4, Thm 6.1(1)",
            f">= {thr:.6g}",
            m.honest_min,
            passed=bool(premise and m.honest_min >= thr - EXACT_TOL),
            note=(
                f"min over {m.n_stable} trained Bs x {cfg.n_trees} trees of exact E[U_A] "
                f"(tolerance {EXACT_TOL:g}); min per run "
                + ", ".join(f"{k} {v:.6f}" for k, v in m.per_run.items())
                + f"; largest excess {m.excess_max:.4f}; max fbs of the stable candidate "
                f"{m.rho_max:.6f} <= rho = {cfg.rho:g} ({'holds' if premise else 'FAILS'}); the "
                f"trained A against the same Bs: E[U_A] min {m.trained_u_min:.4f}, max "
                f"{m.trained_u_max:.4f}"
            ),
        ),
        Claim.exact(
            "Chaining at the end of training: each trained pair's E[U_A] (protocol rewards) equals "
            "r^(d+1) P[A correct] - sum Adv(round-reward tests) + sum Adv(calibration tests) of "
            "the trained B against the trained A's spec 6.3 tests",
            "spec PED 6.3, 6.4",
            f"max |difference| <= {EXACT_TOL:g}",
            m.chain_max,
            passed=bool(m.chain_max <= EXACT_TOL),
            note=f"max over {m.n_pairs} trained pairs (every part, run and seed), exact",
        ),
    ]


def sweep_figures(rows):
    """``stackelberg_rates``: A updates to convergence and converged fraction against A's (or
    B's) learning rate, one line per value of the other swept fields."""
    import matplotlib.pyplot as plt

    x_axis = next((a for a in ("lr_a", "lr_b") if rows and a in rows[0]), None)
    if x_axis is None:
        return {}
    other = [a for a in ("main_n_b", "lr_b", "tol") if a != x_axis and a in rows[0]]
    lines: dict = {}
    for r in rows:
        lines.setdefault(tuple(r[a] for a in other), {}).setdefault(float(r[x_axis]), []).append(r)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for label, pts in sorted(lines.items()):
        xs = sorted(pts)
        name = ", ".join(f"{a} = {v:g}" for a, v in zip(other, label)) or "all"
        for ax, key in zip(axes, ("converged_at", "converged")):
            ax.plot(xs, [np.mean([r[key] for r in pts[x]]) for x in xs], "o-", label=name)
    axes[0].set_ylabel("A updates to convergence (mean; never = steps)")
    axes[1].set_ylabel("converged fraction")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel(f"{x_axis} (Adam step size)")
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
    for ax, ylabel in zip(axes, ylabels):
        ax.set_ylabel(ylabel)
        ax.set_xlabel("A update")
        ax.legend(fontsize=8)
    axes[2].set_yscale("log")
    fig.suptitle(f"Stackelberg vs simultaneous play (mean, 10-90% band over {cfg.seeds} seeds)")
    fig.tight_layout()
    return fig
