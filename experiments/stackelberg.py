"""Stackelberg self-play for prover-estimator debate (spec PED 7.4, 8.5; issue 8, prover side).

A learned prover A (Flax, public view only) leads; a learned estimator B follows with ``n_B``
Adam steps per A step on the exact expected payoff (spec 2.2; exact gradients by path
enumeration). Every run of a part is one jitted program, vmapped over seeds and schedules.

1. **Stable decomposition available**: noisy-evidence trees (q = 5, M_D = Thr_3, true claims 4-5
   true children, false 0-1: fbs <= 2, rho = 2) where every claim also has an unstable hidden-flaw
   AND candidate (fbs = 5 > rho^2, so an error-shifting B pushes A below rho^-(d+1) there). Does A
   converge to correct answers and the stable candidate with payoff near rho^-(d+1)?
2. **Only the unstable decomposition**: hidden-flaw AND trees with the same rho: A's payoff should
   stay below rho^-(d+1) (the protocol errs toward rejection, spec 8.7).
3. **Schedules**: n_B in {1, 5, 20} vs simultaneous gradient play on the trees of part 1.

A run "converges" at the first A update from which, to the end of training, P[A correct] >= 0.95,
P[stable candidate at the root] >= 0.95 and |E U_A - rho^-(d+1)| <= tol * rho^-(d+1).
The doubly-efficient half of issue 8 (learned Alice/Bob) is not implemented here.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.lab.experiment import Claim, ExperimentResult, mean_interval, wilson_interval
from dedebate.protocols.prover_estimator import COMPILE_OPTIONS
from dedebate.training.stackelberg import (
    StackelbergStatic,
    first_converged,
    hparams,
    make_train,
)
from dedebate.trees.library import and_tree, noisy_evidence_tree
from dedebate.trees.stability import tree_rho

NAME = "stackelberg"
TITLE = "Stackelberg self-play: learned prover and estimator toward the A-leading equilibrium"


def _doc(text):
    return {"doc": text}


@dataclasses.dataclass(frozen=True)
class Config:
    depth: int = dataclasses.field(default=1, metadata=_doc("tree depth d, 1..2"))
    n_trees: int = dataclasses.field(
        default=4, metadata=_doc("trees (inputs x) per seed, even (half true roots), >= 2"))
    seeds: int = dataclasses.field(default=4, metadata=_doc("training runs per schedule, >= 1"))
    steps: int = dataclasses.field(default=150, metadata=_doc("A updates per run, >= 2"))
    n_b_values: tuple[int, ...] = dataclasses.field(
        default=(1, 5, 20), metadata=_doc("B updates per A update (Stackelberg), each >= 1"))
    main_n_b: int = dataclasses.field(
        default=20, metadata=_doc("n_B of parts 1-2; must be one of n_b_values"))
    lr_a: float = dataclasses.field(default=0.03, metadata=_doc("A's Adam step size, > 0"))
    lr_b: float = dataclasses.field(default=0.01, metadata=_doc("B's Adam step size, > 0"))
    rho: float = dataclasses.field(
        default=2.0, metadata=_doc("stability parameter rho >= 1 (fbs of the stable candidate)"))
    eta: float = dataclasses.field(
        default=0.0, metadata=_doc("soundness slack in the certified bound, >= 0"))
    tol: float = dataclasses.field(
        default=0.1, metadata=_doc("relative payoff tolerance around rho^-(d+1), in (0, 1)"))
    hidden_a: tuple[int, ...] = dataclasses.field(
        default=(16,), metadata=_doc("prover MLP hidden widths, each >= 1"))
    hidden_b: tuple[int, ...] = dataclasses.field(
        default=(32,), metadata=_doc("estimator MLP hidden widths, each >= 1"))
    unstable_part: bool = dataclasses.field(
        default=True, metadata=_doc("run part 2 (only unstable decompositions)"))

    def __post_init__(self):
        if not 1 <= self.depth <= 2:
            raise ValueError(f"depth={self.depth}: must be 1 or 2")
        if self.n_trees < 2 or self.n_trees % 2:
            raise ValueError(f"n_trees={self.n_trees}: must be an even number >= 2")
        if self.seeds < 1:
            raise ValueError(f"seeds={self.seeds}: must be >= 1")
        if self.steps < 2:
            raise ValueError(f"steps={self.steps}: must be >= 2")
        if not self.n_b_values or any(n < 1 for n in self.n_b_values):
            raise ValueError(f"n_b_values={list(self.n_b_values)}: need integers >= 1")
        if self.main_n_b not in self.n_b_values:
            raise ValueError(f"main_n_b={self.main_n_b}: must be one of {list(self.n_b_values)}")
        for name in ("lr_a", "lr_b"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)}: must be > 0")
        if not self.rho >= 1:
            raise ValueError(f"rho={self.rho}: must be >= 1")
        if not self.eta >= 0:
            raise ValueError(f"eta={self.eta}: must be >= 0")
        if not 0 < self.tol < 1:
            raise ValueError(f"tol={self.tol}: must lie in (0, 1)")
        for name in ("hidden_a", "hidden_b"):
            h = getattr(self, name)
            if not h or any(w < 1 for w in h):
                raise ValueError(f"{name}={list(h)}: need widths >= 1")


SIZES = {
    "quick": {"seeds": 2, "steps": 70, "n_b_values": (20,), "main_n_b": 20, "n_trees": 2,
              "unstable_part": False},
    "full": {"seeds": 32, "steps": 400, "depth": 2, "n_trees": 8},
}


def _stable_trees(cfg: Config, key):
    """``n_trees`` noisy-evidence trees with the unstable alternative, half with true roots."""
    k1, k0 = jax.random.split(key)
    h = cfg.n_trees // 2
    t1 = noisy_evidence_tree(jax.random.split(k1, h), cfg.depth, 5, 3, (4, 5), (0, 1), 1, True)
    t0 = noisy_evidence_tree(jax.random.split(k0, h), cfg.depth, 5, 3, (4, 5), (0, 1), 0, True)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), t1, t0)


def _unstable_trees(cfg: Config, key):
    k1, k0 = jax.random.split(key)
    h = cfg.n_trees // 2
    t1 = and_tree(jax.random.split(k1, h), cfg.depth, 5, 1, hidden=True)
    t0 = and_tree(jax.random.split(k0, h), cfg.depth, 5, 0, hidden=True)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), t1, t0)


def _stack(xs):
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *xs)


def _run_grid(cfg: Config, key, make_trees, schedules):
    """Train every (schedule, seed) in one jitted, vmapped program.

    ``schedules``: list of (n_b, simultaneous). Seed s uses trees and init from
    ``fold_in(key, s)``, the same for every schedule (paired comparison).
    """
    static = StackelbergStatic(steps=cfg.steps, hidden_a=tuple(cfg.hidden_a),
                               hidden_b=tuple(cfg.hidden_b))
    train = make_train(static)
    ns = len(schedules)
    hp = hparams([cfg.lr_a] * ns, [cfg.lr_b] * ns, [s[0] for s in schedules],
                 [s[1] for s in schedules], [cfg.rho] * ns, [cfg.eta] * ns)
    seed_keys = [jax.random.fold_in(key, s) for s in range(cfg.seeds)]
    trees = _stack([make_trees(cfg, jax.random.fold_in(k, 0)) for k in seed_keys])
    init_keys = jnp.stack([jax.random.fold_in(k, 1) for k in seed_keys])
    over_seeds = jax.vmap(train, in_axes=(None, 0, 0))
    grid = jax.jit(jax.vmap(over_seeds, in_axes=(0, None, None)), compiler_options=COMPILE_OPTIONS)
    t0 = time.perf_counter()
    _, mon = jax.block_until_ready(grid(hp, trees, init_keys))
    wall = time.perf_counter() - t0
    one = jax.tree_util.tree_map(lambda x: x[0, 0], trees)
    return jax.tree_util.tree_map(np.asarray, mon), wall, one


def _converged(cfg: Config, mon, thr):
    ok = ((mon.a_correct >= 0.95) & (mon.p_stable >= 0.95)
          & (np.abs(mon.u_a - thr) <= cfg.tol * thr))
    return first_converged(ok)  # [..., ] steps = not converged


def _plot(cfg, mon, labels, thr):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(cfg.steps)
    for i, lab in enumerate(labels):
        for ax, arr in ((axes[0], mon.u_a[i]), (axes[1], mon.a_correct[i])):
            m = arr.mean(axis=0)
            lo, hi = np.quantile(arr, 0.1, axis=0), np.quantile(arr, 0.9, axis=0)
            ax.plot(x, m, label=lab)
            ax.fill_between(x, lo, hi, alpha=0.2)
    axes[0].axhline(thr, color="k", ls="--", label="rho^-(d+1)")
    axes[0].set_ylabel("mean E[U_A]")
    axes[1].set_ylabel("P[A correct]")
    for ax in axes:
        ax.set_xlabel("A update")
        ax.legend(fontsize=8)
    fig.suptitle(f"Stackelberg vs simultaneous play (mean, 10-90% band over {cfg.seeds} seeds)")
    fig.tight_layout()
    return fig


def run(cfg: Config, ctx) -> ExperimentResult:
    d = cfg.depth
    thr = cfg.rho ** -(d + 1)
    schedules = [(n, False) for n in cfg.n_b_values] + [(1, True)]
    labels = [f"n_B = {n}" for n in cfg.n_b_values] + ["simultaneous"]
    claims, tables, metrics = [], {}, {}
    with ctx.progress(2 if cfg.unstable_part else 1, "Stackelberg training") as bar:
        mon, wall, tree = _run_grid(cfg, jax.random.fold_in(ctx.key, 1), _stable_trees, schedules)
        bar.update(1)
        rho_tree = tree_rho(tree, cand=tree.honest_cand)
        conv = _converged(cfg, mon, thr)  # [schedule, seed]
        rows = []
        for i, lab in enumerate(labels):
            for s in range(cfg.seeds):
                rows.append({"schedule": lab, "seed": s, "converged_at": int(conv[i, s]),
                             "converged": bool(conv[i, s] < cfg.steps),
                             "final_u_a": float(mon.u_a[i, s, -1]),
                             "final_a_correct": float(mon.a_correct[i, s, -1]),
                             "final_p_stable": float(mon.p_stable[i, s, -1]),
                             "final_calib": float(mon.calib[i, s, -1]),
                             "final_certified": float(mon.certified[i, s, -1])})
            ctx.log({"part": "stable", "schedule": lab,
                     "converged": int((conv[i] < cfg.steps).sum()),
                     "final_u_a_mean": float(mon.u_a[i, :, -1].mean())})
        tables["stable"] = rows
        im = cfg.n_b_values.index(cfg.main_n_b)
        k = int((conv[im] < cfg.steps).sum())
        frac, lo, hi = wilson_interval(k, cfg.seeds)
        steps_needed = [int(c) for c in conv[im] if c < cfg.steps]
        claims.append(Claim(
            f"Stable candidate available (n_B = {cfg.main_n_b}): A converges to correct answers, "
            f"the stable decomposition and payoff within {cfg.tol:g} of rho^-(d+1)",
            "spec PED 7.4, 8.5 (issue 8 exp. 1); no proven rate", "fraction of seeds > 1/2",
            frac, lo, hi, passed=lo > 0.5,
            note=(f"{k}/{cfg.seeds} seeds; A updates needed {steps_needed} of {cfg.steps}; d = {d},"
                  f" q = 5, rho = {cfg.rho:g} (tree fbs max {rho_tree:.3f}), "
                  f"{cfg.n_trees} trees/seed; final certified rho^(d+1)(U_A - eta) = "
                  f"{np.round(mon.certified[im, :, -1], 3).tolist()}; B calibration error "
                  f"{np.round(mon.calib[im, :, -1], 3).tolist()}")))
        u_fin = mon.u_a[im, :, -1]
        m, ulo, uhi = mean_interval(u_fin)
        claims.append(Claim(
            f"Stable candidate (n_B = {cfg.main_n_b}): final mean E[U_A] near rho^-(d+1) = "
            f"{thr:g}", "spec PED 7.4 (practical reading)",
            f"in [{thr * (1 - cfg.tol):.4f}, {thr * (1 + cfg.tol):.4f}]", m, ulo, uhi,
            passed=bool(ulo >= thr * (1 - cfg.tol) and uhi <= thr * (1 + cfg.tol)),
            note=f"per seed {np.round(u_fin, 4).tolist()}; 95% normal interval over seeds"))
        # part 3: schedules
        fracs = {lab: float((conv[i] < cfg.steps).mean()) for i, lab in enumerate(labels)}
        med = {lab: (float(np.median(conv[i])) if cfg.seeds else float("nan"))
               for i, lab in enumerate(labels)}
        best_nb = max(cfg.n_b_values)
        ib = cfg.n_b_values.index(best_nb)
        kb, ks = int((conv[ib] < cfg.steps).sum()), int((conv[-1] < cfg.steps).sum())
        fb, blo, bhi = wilson_interval(kb, cfg.seeds)
        claims.append(Claim(
            f"Several B updates per A update (n_B = {best_nb}) converge at least as often as "
            "simultaneous gradient play", "spec PED 8.5 (recommendation; no proven rate)",
            f">= simultaneous ({ks}/{cfg.seeds})", fb, blo, bhi, passed=kb >= ks,
            note=("converged fraction / median A updates to converge (steps = never) per "
                  "schedule: " + "; ".join(f"{lab}: {fracs[lab]:.2f} / {med[lab]:g}"
                                           for lab in labels) + f"; wall {wall:.1f} s incl. "
                  "compile for all schedules and seeds")))
        metrics["stable"] = {"fraction_converged": fracs, "median_updates_to_converge": med,
                             "wall_s": wall, "threshold": thr, "tree_rho": rho_tree}
        plots = [ctx.save_figure(_plot(cfg, mon, labels, thr), "schedules")]
        if cfg.unstable_part:
            mon2, wall2, _ = _run_grid(cfg, jax.random.fold_in(ctx.key, 2), _unstable_trees,
                                       [(cfg.main_n_b, False)])
            bar.update(1)
            tail = max(1, cfg.steps // 10)
            u_tail = mon2.u_a[0, :, -tail:].mean(axis=-1)
            m2, lo2, hi2 = mean_interval(u_tail)
            claims.append(Claim(
                f"Only the unstable hidden-flaw AND decomposition (fbs 5 at true claims, rho = "
                f"{cfg.rho:g}): A's trained payoff stays below rho^-(d+1) = {thr:g}",
                "spec PED 8.7, 9.5 (issue 8 exp. 2)", f"< {thr:g}", m2, lo2, hi2,
                passed=bool(hi2 < thr),
                note=(f"mean E[U_A] over the last {tail} A updates, per seed "
                      f"{np.round(u_tail, 4).tolist()}; max over training per seed "
                      f"{np.round(mon2.u_a[0].max(axis=-1), 4).tolist()}; P[A correct] final "
                      f"{np.round(mon2.a_correct[0, :, -1], 3).tolist()}; n_B = {cfg.main_n_b};"
                      f" wall {wall2:.1f} s")))
            tables["unstable"] = [{"seed": s, "tail_u_a": float(u_tail[s]),
                                   "final_a_correct": float(mon2.a_correct[0, s, -1])}
                                  for s in range(cfg.seeds)]
            metrics["unstable"] = {"tail_u_a_mean": m2, "wall_s": wall2}
    return ExperimentResult(claims=claims, metrics=metrics, tables=tables, plots=plots)
