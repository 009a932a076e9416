"""Prover-estimator debate on real data: audits of labelled digits (docs/ped-digits.md).

Claim trees over ``sklearn.datasets.load_digits`` in two families (exact counts: AND, fbs = q;
counts with slack: ``Thr_m``), from disjoint pools of images for training and evaluation. B is a
network reading the images, trained toward (delta, F)-indistinguishability (spec PED 5.7);
honest A and a lying A play the protocol (spec PED 2) against it with a noisy judge at the leaf.

Rows: the fbs of each family by LP against its closed form; completeness (spec PED 4, Thm 6.1(1))
for honest A at the measured rho for each family and judge noise eta (gating: it holds for every
B); B's advantage against F on held-out trees (a finding: the premise of soundness); the lying
A's mean payoff against the soundness bound (spec PED 6.4; gating only where the measured
advantage is below delta, a finding otherwise). Not yet here: the learned prover, a sweep, a
notebook.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from dedebate.agents.ped_digits import BagEstimator, context_features, payoffs, tabulate
from dedebate.estimators import train
from dedebate.estimators.digits_train import train_estimator, tree_advantages
from dedebate.lab.experiment import Claim, ExperimentResult
from dedebate.lab.params import config_dataclass, param
from dedebate.trees.digits import FAMILIES, digit_trees, pool, split_pools
from dedebate.trees.stability import fbs_threshold, tree_rho

NAME = "ped_digits"
TITLE = "Prover-estimator debate on real data: audits of labelled digits (Thm 6.1)"
TYPICAL_SECONDS = 45  # a cold default-size run on two shared CPU cores, measured (docs/lab.md)

EXACT_TOL = 1e-5  # float32 rounding of exact expectations
LP_TOL = 1e-6


@config_dataclass
class Config:
    q: int = param(3, "parts per claim", ge=2, le=4)
    depth: int = param(3, "depth D of the trees (q^D images a tree)", ge=1, le=4)
    m: int = param(2, "parts that must reach their counts in the slack family", ge=1, le=3)
    etas: tuple[float, ...] = param((0.0, 0.05, 0.1), "judge noise rates", ge=0.0, le=0.5,
                                    min_len=1, max_len=8)
    train_trees: int = param(256, "training trees per family", ge=2, le=65536)
    eval_trees: int = param(256, "held-out evaluation trees per family", ge=4, le=65536)
    hidden: int = param(32, "width of B's image encoder and head", ge=2, le=512)
    fit_steps: int = param(600, "AdamW steps of B's log-loss warm start", ge=0, le=100_000)
    fit_lr: float = param(0.03, "the warm start's learning rate", gt=0.0, le=10.0)
    weight_decay: float = param(0.1, "the warm start's decoupled weight decay", ge=0.0, le=10.0)
    rounds: int = param(50, "online-gradient rounds toward indistinguishability", ge=1,
                        le=100_000)
    lr: float = param(0.3, "online-gradient learning rate (lr / sqrt t)", gt=0.0, le=100.0)
    delta: float = param(0.1, "indistinguishability level delta", gt=0.0, le=2.0)

    def __post_init__(self):
        if self.m >= self.q:
            raise ValueError(f"m={self.m}: the slack family needs m < q={self.q}")


SIZES = {
    "quick": {"depth": 2, "train_trees": 128, "eval_trees": 128, "hidden": 16, "fit_steps": 300,
              "rounds": 5, "etas": (0.0, 0.1)},
    "full": {"depth": 4, "train_trees": 2048, "eval_trees": 1024, "hidden": 64,
             "fit_steps": 3000, "rounds": 200},  # not yet run
}


def load_data():
    """The digits (shipped with scikit-learn): images ``[1797, 64]`` and labels."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return np.asarray(d.data, np.float32), np.asarray(d.target, np.int64)


def expected_fbs(family: str, q: int, m: int) -> float:
    """The closed-form rho of a family (spec PED 3.4): the max fbs over its reachable points."""
    if family == "exact":
        return float(q)
    from dedebate.trees.digits import family_rule

    rule = family_rule(family, q, m)
    return max(fbs_threshold(q, m, w) for w in rule.true_counts + rule.false_counts)


# ==== claim rows: measured numbers in, rows out (pure; tests feed them lying numbers) =============
def fbs_claim(family, q, m, rho) -> Claim:
    """The measured rho (max LP fbs over the evaluation trees) against the closed form."""
    want = expected_fbs(family, q, m)
    return Claim.exact(f"rho of the {family} family (q={q}, m={m}) = max fbs by LP",
                       "spec PED 3.3, 3.4", f"== {want:.6g}", rho, abs(rho - want) <= LP_TOL)


def completeness_claim(family, rho, depth, eta, u_min, n) -> Claim:
    """Honest A earns at least ``rho^-(d+1) - eta`` against any B on every tree."""
    bound = rho ** -(depth + 1) - eta
    return Claim.exact(f"completeness: honest A vs trained B, {family} family, judge noise "
                       f"eta={eta:g}: U_A >= rho^-(d+1) - eta", "spec PED 4, Thm 6.1(1)",
                       f">= {bound:.6g}", u_min, u_min >= bound - EXACT_TOL,
                       f"min over {n} held-out trees, rho={rho:g}")


def advantage_claim(family, samples, delta, n_tests) -> Claim:
    """B's largest advantage against F on held-out trees (per-tree samples of that test)."""
    row = Claim.mean(f"B's advantage against F on held-out trees ({family} family) <= delta",
                     "spec PED 5.1, 5.7", "<=", delta, samples,
                     f"the largest of {n_tests} tests, signed; per-tree samples")
    return dataclasses.replace(row, finding=True)


def soundness_claim(family, u, a_correct, rho, depth, eta, delta, premise) -> Claim:
    """The lying A's mean payoff against ``rho^-(d+1) Pr[A correct] + (2d+2) delta + eta``."""
    bound = rho ** -(depth + 1) * float(np.mean(a_correct)) + (2 * depth + 2) * delta + eta
    row = Claim.mean(f"soundness: lying A vs trained B, {family} family, eta={eta:g}: E[U_A] <= "
                     "rho^-(d+1) Pr[A correct] + (2d+2) delta + eta", "spec PED 6.4, Thm 6.1(2)",
                     "<=", bound, u, "gating only if B's held-out advantage < delta"
                     if premise else "finding: B's held-out advantage >= delta (premise fails)")
    return row if premise else dataclasses.replace(row, finding=True)


# ==== the experiment ==============================================================================
def run(cfg: Config, ctx) -> ExperimentResult:
    images, labels = load_data()
    pools = split_pools(labels, (0.5, 0.5), ctx.seed)
    p_train, p_eval = pool(pools[0], labels), pool(pools[1], labels)
    static = train.NetTrainStatic(rounds=cfg.rounds, hidden=(cfg.hidden,))
    claims, metrics = [], {"shared_images": int(np.intersect1d(pools[0], pools[1]).size)}
    with ctx.progress(len(FAMILIES), "families") as bar:
        for i, family in enumerate(FAMILIES):
            key = jax.random.fold_in(ctx.key, i)
            k_tr, k_ev, k_net = jax.random.split(key, 3)
            tr = digit_trees(k_tr, p_train, family, cfg.q, cfg.m, cfg.depth, cfg.train_trees)
            ev = digit_trees(k_ev, p_eval, family, cfg.q, cfg.m, cfg.depth, cfg.eval_trees)
            f_tr = context_features(tr, images, family, cfg.q, cfg.m)
            f_ev = context_features(ev, images, family, cfg.q, cfg.m)
            params, log = train_estimator(static, cfg.delta, cfg.lr, k_net, tr, images, f_tr,
                                          cfg.fit_steps, cfg.fit_lr, cfg.weight_decay)
            h_ev = BagEstimator(cfg.q, cfg.depth, cfg.hidden).apply(params, f_ev)
            cache: dict = {}
            rho = max(tree_rho(jax.tree_util.tree_map(lambda a, j=j: a[j], ev.tree), cache=cache)
                      for j in range(cfg.eval_trees))
            claims.append(fbs_claim(family, cfg.q, cfg.m, rho))
            adv = tree_advantages(h_ev, ev)
            j = int(np.argmax(np.abs(adv.mean(axis=1))))
            sign = float(np.sign(adv[j].mean())) or 1.0
            adv_row = advantage_claim(family, sign * adv[j], cfg.delta, adv.shape[0])
            claims.append(adv_row)
            premise = adv_row.hi < cfg.delta
            est = tabulate(h_ev, cfg.eval_trees, ev.tree)
            false_roots = np.asarray(ev.tree.truth[:, 0]) == 0
            fam_metrics = {"rho": rho, "advantage": adv_row.value, "train_max_adv":
                           float(np.asarray(log.max_adv)[-1]), "honest_min": {}, "liar_mean": {}}
            for eta in cfg.etas:
                u_h, _ = payoffs("honest", est, ev, rho, eta)
                u_min = float(np.min(u_h))
                claims.append(completeness_claim(family, rho, cfg.depth, eta, u_min,
                                                 cfg.eval_trees))
                u_l, ac = payoffs("liar", est, ev, rho, eta)
                u_l, ac = np.asarray(u_l)[false_roots], np.asarray(ac)[false_roots]
                claims.append(soundness_claim(family, u_l, ac, rho, cfg.depth, eta, cfg.delta,
                                              premise))
                fam_metrics["honest_min"][str(eta)] = u_min
                fam_metrics["liar_mean"][str(eta)] = float(u_l.mean())
            metrics[family] = fam_metrics
            ctx.log({"family": i, "rho": rho, "advantage": adv_row.value})
            bar.update()
    return ExperimentResult(claims=claims, metrics=metrics, tables={}, plots=[])
