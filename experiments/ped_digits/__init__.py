"""Prover-estimator debate on real data: audits of labelled digits (docs/ped-digits.md).

Claim trees over ``sklearn.datasets.load_digits`` in two families (exact counts: AND, fbs = q;
counts with slack: ``Thr_m``), from disjoint pools of images for training and evaluation. B is a
network reading the images, trained toward (delta, F)-indistinguishability (spec PED 5.7);
honest A and a lying A play the protocol (spec PED 2) against it with a noisy judge at the leaf.

Rows: the fbs of each family by LP against its closed form; completeness (spec PED 4, Thm 6.1(1))
for honest A at the measured rho for each family and judge noise eta (gating: it holds for every
B); B's advantage against F on held-out trees (a finding: the premise of soundness); the lying
A's mean payoff against the soundness bound (spec PED 6.4; gating only where the measured
advantage is below delta, a finding otherwise); with only unstable decompositions (exact counts
judged at the slack family's rho) honest A falls below the margin on more trees than with slack
(a finding, spec PED 9.5); a learned prover trained against a best-responding B, in how many
seeds it ends honest (a finding, spec PED 8.5).

Sweepable: everything but the host LPs (:func:`host`) is :func:`point`'s ``fn`` (``etas``,
``delta`` and the learning rates are dynamic; q, m, depth and the sizes static); a run is the
one-point case, with the per-tree numbers of the intervals as the row's extras.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.ped_digits import (
    BagEstimator,
    context_features,
    exact_payoffs,
    feature_width,
    tabulate,
)
from dedebate.estimators import train
from dedebate.lab.experiment import Claim, ExperimentResult, mean_interval
from dedebate.lab.params import config_dataclass, param
from dedebate.trees.digits import FAMILIES, digit_trees, pool, split_pools
from dedebate.trees.stability import fbs_threshold, tree_rho

from . import selfplay
from .estimator import train_estimator, tree_advantages

NAME = "ped_digits"
TITLE = "Prover-estimator debate on real data: audits of labelled digits (Thm 6.1)"
TYPICAL_SECONDS = 120  # default size: 107 s of CPU, 207 s wall on two cores shared with others

EXACT_TOL = 1e-5  # float32 rounding of exact expectations
LP_TOL = 1e-6


@config_dataclass
class Config:
    q: int = param(3, "parts per claim", ge=2, le=4)
    depth: int = param(3, "depth D of the trees (q^D images a tree)", ge=1, le=4)
    m: int = param(2, "parts that must reach their counts in the slack family", ge=1, le=3)
    etas: tuple[float, ...] = param(
        (0.0, 0.05, 0.1), "judge noise rates", ge=0.0, le=0.5, min_len=1, max_len=8
    )
    train_trees: int = param(256, "training trees per family", ge=2, le=65536)
    eval_trees: int = param(256, "held-out evaluation trees per family", ge=4, le=65536)
    hidden: int = param(32, "width of B's image encoder and head", ge=2, le=512)
    fit_steps: int = param(600, "AdamW steps of B's log-loss warm start", ge=0, le=100_000)
    fit_lr: float = param(0.03, "the warm start's learning rate", gt=0.0, le=10.0)
    weight_decay: float = param(0.1, "the warm start's decoupled weight decay", ge=0.0, le=10.0)
    rounds: int = param(50, "online-gradient rounds toward indistinguishability", ge=1, le=100_000)
    lr: float = param(0.3, "online-gradient learning rate (lr / sqrt t)", gt=0.0, le=100.0)
    delta: float = param(0.1, "indistinguishability level delta", gt=0.0, le=2.0)
    lp_seeds: int = param(8, "learned-prover training runs per family", ge=1, le=1024)
    lp_trees: int = param(32, "A's training trees per run (from B's training pool)", ge=2, le=4096)
    lp_steps: int = param(30, "A updates per learned-prover run", ge=1, le=100_000)
    lp_n_b: int = param(5, "B updates per A update (Stackelberg)", ge=1, le=1000)
    lp_lr_a: float = param(0.1, "A's Adam step size", gt=0.0, le=10.0)
    lp_lr_b: float = param(0.01, "B's Adam step size", gt=0.0, le=10.0)
    lp_init_scale: float = param(
        1.0, "scale of A's random initial policy weights", ge=0.0, le=100.0
    )
    honest_agree: float = param(
        0.9,
        "A ends honest if its answer agrees with its own reading "
        "on at least this share of held-out trees",
        gt=0.5,
        le=1.0,
    )

    def __post_init__(self):
        if self.m >= self.q:
            raise ValueError(f"m={self.m}: the slack family needs m < q={self.q}")


SIZES = {
    "quick": {
        "depth": 2,
        "train_trees": 128,
        "eval_trees": 128,
        "hidden": 16,
        "fit_steps": 300,
        "rounds": 5,
        "etas": (0.0, 0.1),
        "lp_seeds": 4,
        "lp_trees": 16,
        "lp_steps": 20,
    },
    "full": {
        "depth": 4,
        "train_trees": 2048,
        "eval_trees": 1024,
        "hidden": 64,
        "fit_steps": 3000,
        "rounds": 200,
        "lp_seeds": 32,
        "lp_trees": 64,
        "lp_steps": 100,
    },  # not yet run at this size (no accelerator lent)
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run (float32; dedebate/lab/memory.py): for each family, every tree's
    context rows (``feature_width`` features and ``q^D x hidden`` encoder activations a row), per
    feature and activation ~2.6 and ~1.9 floats for a training tree (with gradients), ~1.75 and
    ~0.3 for an evaluation tree, ~2.8 and ~2 for a learned prover's tree (fitted to XLA's buffers
    on a CPU; the program holds both families')."""
    rows = len(FAMILIES) * (cfg.q**cfg.depth - 1) // (cfg.q - 1)
    width, acts = feature_width(cfg.q, cfg.depth), cfg.q**cfg.depth * cfg.hidden

    def trees(n, feature, activation):
        return int(4 * n * rows * (feature * width + activation * acts))

    return {
        "trees' features and activations": trees(cfg.train_trees, 2.6, 1.9)
        + trees(cfg.eval_trees, 1.75, 0.3),
        "learned provers": trees(cfg.lp_seeds * cfg.lp_trees, 2.8, 2),
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
    return Claim.exact(
        f"rho of the {family} family (q={q}, m={m}) = max fbs by LP",
        "spec PED 3.3, 3.4",
        f"== {want:.6g}",
        rho,
        abs(rho - want) <= LP_TOL,
    )


def completeness_claim(family, rho, depth, eta, u_min, n, normalised=None) -> Claim:
    """Honest A earns at least ``rho^-(d+1) - eta`` against any B on every tree (exact: the min
    over the trees); ``normalised`` (``rho^(d+1) U_A`` per tree) adds its mean and t interval to
    the note."""
    bound = rho ** -(depth + 1) - eta
    note = f"min over {n} held-out trees, rho={rho:g}"
    if normalised is not None:
        mean, lo, hi = mean_interval(normalised)
        note += f"; rho^(d+1) U_A mean {mean:.4g} [{lo:.4g}, {hi:.4g}]"
    return Claim.exact(
        f"completeness: honest A vs trained B, {family} family, judge noise "
        f"eta={eta:g}: U_A >= rho^-(d+1) - eta",
        "spec PED 4, Thm 6.1(1)",
        f">= {bound:.6g}",
        u_min,
        u_min >= bound - EXACT_TOL,
        note,
    )


def advantage_claim(family, samples, delta, n_tests) -> Claim:
    """B's largest advantage against F on held-out trees (per-tree samples of that test)."""
    row = Claim.mean(
        f"B's advantage against F on held-out trees ({family} family) <= delta",
        "spec PED 5.1, 5.7",
        "<=",
        delta,
        samples,
        f"the largest of {n_tests} tests, signed; per-tree samples",
    )
    return dataclasses.replace(row, finding=True)


def soundness_claim(family, u, a_correct, rho, depth, eta, delta, premise) -> Claim:
    """The lying A's mean payoff against ``rho^-(d+1) Pr[A correct] + (2d+2) delta + eta``."""
    bound = rho ** -(depth + 1) * float(np.mean(a_correct)) + (2 * depth + 2) * delta + eta
    row = Claim.mean(
        f"soundness: lying A vs trained B, {family} family, eta={eta:g}: E[U_A] <= "
        "rho^-(d+1) Pr[A correct] + (2d+2) delta + eta",
        "spec PED 6.4, Thm 6.1(2)",
        "<=",
        bound,
        u,
        "gating only if B's held-out advantage < delta"
        if premise
        else "finding: B's held-out advantage >= delta (premise fails)",
    )
    return row if premise else dataclasses.replace(row, finding=True)


def unstable_claim(eta, below_exact, below_slack, rho, depth) -> Claim:
    """Honest A on exact counts (fbs q) judged at the slack family's rho falls below the margin
    ``rho^-(d+1) - eta`` on more held-out trees than on counts with slack (``below_*``: 0/1 per
    tree); a finding (spec PED 9.5: the protocol errs toward rejecting an honest prover)."""
    slack = Claim.proportion("", "", "<=", 0.0, float(np.sum(below_slack)), len(below_slack))
    row = Claim.proportion(
        f"only unstable decompositions (exact counts, rho={rho:g} < fbs) at eta={eta:g}: honest "
        "A falls below rho^-(d+1) - eta on more trees than with slack",
        "spec PED 9.5, 8.7",
        ">=",
        slack.hi,
        float(np.sum(below_exact)),
        len(below_exact),
        f"slack family: {int(np.sum(below_slack))}/{len(below_slack)} = {slack.value:.3g} "
        f"[{slack.lo:.3g}, {slack.hi:.3g}]; trained B, d={depth}",
        bound=f"> slack's rate (its interval ends at {slack.hi:.3g})",
    )
    return dataclasses.replace(row, passed=bool(row.lo > slack.hi), finding=True)


def learned_claim(family, agree, threshold) -> Claim:
    """In how many seeds the learned A ends honest: its answer agrees with its own reading on at
    least ``threshold`` of the held-out trees (``agree``: that share per seed); a finding."""
    honest = np.asarray(agree) >= threshold
    row = Claim.proportion(
        f"learned A vs best-responding B ({family} family) ends honest in most seeds",
        "spec PED 7.4, 8.5; Guan and Hou 2026",
        ">=",
        0.5,
        float(honest.sum()),
        honest.size,
        f"honest: answer = its reading on >= {threshold:g} of held-out trees; per seed "
        f"{np.round(np.asarray(agree), 2).tolist()}",
    )
    return dataclasses.replace(row, passed=bool(row.value >= 0.5), finding=True)


# ==== the swept function ==========================================================================
DYNAMIC = ("etas", "delta", "lr", "lp_lr_a", "lp_lr_b")
"""Config fields that enter :func:`point` only as numbers (points of one sweep group need equally
many ``etas``). q, m, depth, the widths, the tree counts and the step counts set shapes, tables
or trip counts: static."""


def load_pools(seed: int):
    """The images and the seed's disjoint training and evaluation pools (host)."""
    images, labels = load_data()
    pools = split_pools(labels, (0.5, 0.5), seed)
    return images, pool(pools[0], labels), pool(pools[1], labels)


def inputs(cfg: Config, seed: int, key):
    """A row's host data: all images and the seed's two pools (:func:`load_pools`)."""
    images, p_train, p_eval = load_pools(seed)
    return {"images": images, "train": p_train, "eval": p_eval}


def family_keys(key, i: int):
    """The keys of family i: training trees, evaluation trees, B's network, the learned A."""
    k = jax.random.fold_in(key, i)
    return (*jax.random.split(k, 3), jax.random.fold_in(k, 3))


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)``; ``fn(dynamic, key, host)`` is pure JAX.

    For each family (keys :func:`family_keys`): B trained on training trees, its per-test
    per-tree advantages on held-out trees, honest and lying A's payoffs at every eta at the
    family's rho (the closed form; :func:`report` checks it against the LPs), honest A at the slack
    family's rho, and ``lp_seeds`` learned provers. Returns scalar metrics and, as extras, the
    per-tree and per-seed numbers :func:`report` builds intervals from."""
    dynamic = {k: np.asarray(getattr(cfg, k), np.float32) for k in DYNAMIC}
    static = train.NetTrainStatic(rounds=cfg.rounds, hidden=(cfg.hidden,))
    net = BagEstimator(cfg.q, cfg.depth, cfg.hidden)
    rho_stable = expected_fbs("slack", cfg.q, cfg.m)

    def one_family(dyn, key, host, i, family):
        k_tr, k_ev, k_net, k_lp = family_keys(key, i)
        p_train, p_eval = host["train"], host["eval"]
        rho = expected_fbs(family, cfg.q, cfg.m)
        args = (family, cfg.q, cfg.m, cfg.depth)
        tr = digit_trees(k_tr, p_train, *args, cfg.train_trees)
        ev = digit_trees(k_ev, p_eval, *args, cfg.eval_trees)
        f_ev = context_features(ev, host["images"], family, cfg.q, cfg.m)
        params, log = train_estimator(
            static,
            dyn["delta"],
            dyn["lr"],
            k_net,
            tr,
            host["images"],
            context_features(tr, host["images"], family, cfg.q, cfg.m),
            cfg.fit_steps,
            cfg.fit_lr,
            cfg.weight_decay,
        )
        h_ev = net.apply(params, f_ev)
        adv = tree_advantages(h_ev, ev)
        est = tabulate(h_ev, cfg.eval_trees, ev.tree)
        u_h = jnp.stack([exact_payoffs("honest", est, ev.tree, rho, e)[0] for e in dyn["etas"]])
        liar = [exact_payoffs("liar", est, ev.tree, rho, e) for e in dyn["etas"]]
        u_stable = jnp.stack(
            [exact_payoffs("honest", est, ev.tree, rho_stable, e)[0] for e in dyn["etas"]]
        )
        lp = jax.vmap(
            lambda k: learned_prover(
                cfg, net, params, dyn, k, p_train, host["images"], f_ev, ev, family, rho
            )
        )(jax.random.split(k_lp, cfg.lp_seeds))
        false_root = 1.0 - ev.tree.truth[:, 0].astype(jnp.float32)
        extras = {
            "adv": adv,
            "u_honest": u_h,
            "u_liar": jnp.stack([u for u, _ in liar]),
            "liar_correct": jnp.stack([c for _, c in liar]),
            "u_stable_rho": u_stable,
            "lp": lp,
        }
        m = {
            "advantage": jnp.max(jnp.abs(adv.mean(axis=1))),
            "train_max_adv": log.max_adv[-1],
            "lp_agree_mean": lp["agree"].mean(),
            "lp_honest": jnp.sum(lp["agree"] >= cfg.honest_agree).astype(jnp.float32),
        }
        for e in range(len(cfg.etas)):
            m[f"honest_min/{e}"] = u_h[e].min()
            m[f"liar_mean/{e}"] = jnp.sum(extras["u_liar"][e] * false_root) / false_root.sum()
        return m, extras

    def fn(dyn, key, host):
        metrics, extras = {}, {}
        for i, family in enumerate(FAMILIES):
            m, x = one_family(dyn, key, host, i, family)
            metrics |= {f"{family}/{k}": v for k, v in m.items()}
            extras[family] = x
        return metrics, extras

    return dynamic, fn


def learned_prover(cfg: Config, net, b_params, dyn, key, p_train, images, f_ev, ev, family, rho):
    """One learned-prover run: A's policy from ``lp_init_scale * N(0, 1)``, reading with B's
    trained network, trained on ``lp_trees`` fresh trees of the training pool against B (started
    from the trained B) at eta = 0; then on the held-out trees: the share of trees where its
    answer agrees with its reading, ``P[A correct]`` and ``E[U_A]``."""
    k_pol, k_tr = jax.random.split(key)
    tr = digit_trees(k_tr, p_train, family, cfg.q, cfg.m, cfg.depth, cfg.lp_trees)
    f_tr = context_features(tr, images, family, cfg.q, cfg.m)
    policy = selfplay.init_policy(k_pol, cfg.lp_init_scale)
    policy, b, mon = selfplay.train(
        net,
        cfg.lp_steps,
        cfg.lp_n_b,
        dyn["lp_lr_a"],
        dyn["lp_lr_b"],
        selfplay.beliefs(net, b_params, f_tr, tr),
        policy,
        b_params,
        f_tr,
        tr,
        rho,
        0.0,
    )
    belief = selfplay.beliefs(net, b_params, f_ev, ev)
    u, correct = selfplay.play_values(net, belief, policy, b, f_ev, ev, rho, 0.0)
    p_a = jax.vmap(lambda bl: selfplay.DigitProver(bl, policy).answer(None))(belief)
    reads = (belief[:, 0] > 0.5).astype(jnp.float32)
    agree = jnp.mean(reads * p_a + (1.0 - reads) * (1.0 - p_a))
    return {"agree": agree, "correct": correct.mean(), "u": u.mean(), "train_u": mon["u"][-1]}


# ==== the experiment ==============================================================================
def host(cfg: Config, seed: int, key, measured) -> dict:
    """The host's part: per family, the evaluation trees' rho by LP (max fbs over every tree) and
    their false roots; how many images the seed's two pools share."""
    del measured
    _, p_train, p_eval = load_pools(seed)
    families = {}
    for i, family in enumerate(FAMILIES):
        _, k_ev, _, _ = family_keys(key, i)
        ev = digit_trees(k_ev, p_eval, family, cfg.q, cfg.m, cfg.depth, cfg.eval_trees)
        cache: dict = {}
        rho = max(
            tree_rho(jax.tree_util.tree_map(lambda a, j=j: a[j], ev.tree), cache=cache)
            for j in range(cfg.eval_trees)
        )
        families[family] = {"rho": rho, "false_roots": np.asarray(ev.tree.truth[:, 0]) == 0}
    shared = np.intersect1d(np.asarray(p_train.index), np.asarray(p_eval.index))
    return {"families": families, "shared_images": int(shared.size)}


def family_report(cfg: Config, family: str, m, ex, rho, false_roots):
    """A family's claims, its metrics and its learned-prover table rows, from the point's row
    ``m``, the family's extras ``ex`` and the host's rho and false roots."""
    claims = [fbs_claim(family, cfg.q, cfg.m, rho)]
    adv = np.asarray(ex["adv"], np.float64)
    j = int(np.argmax(np.abs(adv.mean(axis=1))))
    sign = float(np.sign(adv[j].mean())) or 1.0
    adv_row = advantage_claim(family, sign * adv[j], cfg.delta, adv.shape[0])
    claims.append(adv_row)
    premise = adv_row.hi < cfg.delta
    fam = {
        "rho": rho,
        "advantage": adv_row.value,
        "advantage_interval": [adv_row.lo, adv_row.hi],
        "train_max_adv": m[f"{family}/train_max_adv"],
        "honest_min": {},
        "liar_mean": {},
    }
    for e, eta in enumerate(cfg.etas):
        u_h = np.asarray(ex["u_honest"][e], np.float64)
        claims.append(
            completeness_claim(
                family,
                rho,
                cfg.depth,
                eta,
                float(u_h.min()),
                cfg.eval_trees,
                u_h * rho ** (cfg.depth + 1),
            )
        )
        u_l = np.asarray(ex["u_liar"][e], np.float64)[false_roots]
        ac = np.asarray(ex["liar_correct"][e])[false_roots]
        claims.append(soundness_claim(family, u_l, ac, rho, cfg.depth, eta, cfg.delta, premise))
        fam["honest_min"][str(eta)] = float(u_h.min())
        fam["liar_mean"][str(eta)] = float(u_l.mean())
    lp = {k: np.asarray(v, np.float64) for k, v in ex["lp"].items()}
    claims.append(learned_claim(family, lp["agree"], cfg.honest_agree))
    table = [
        {"family": family, "seed": s, **{k: float(v[s]) for k, v in lp.items()}}
        for s in range(cfg.lp_seeds)
    ]
    fam["learned_prover"] = {
        "honest": int(m[f"{family}/lp_honest"]),
        "seeds": cfg.lp_seeds,
        "agree_mean": float(lp["agree"].mean()),
        "correct_mean": float(lp["correct"].mean()),
        "u_mean": float(lp["u"].mean()),
    }
    return claims, fam, table


def report(cfg: Config, measured, host) -> ExperimentResult:
    """Each family's rows (:func:`family_report`), then the unstable-decomposition rows."""
    x = measured["extras"]
    claims, tables = [], {"learned_prover": []}
    metrics: dict = {"shared_images": host["shared_images"]}
    for family in FAMILIES:
        h = host["families"][family]
        rows, metrics[family], table = family_report(
            cfg, family, measured, x[family], h["rho"], h["false_roots"]
        )
        claims += rows
        tables["learned_prover"] += table
    rho_s = expected_fbs("slack", cfg.q, cfg.m)
    metrics["unstable"] = {}
    for e, eta in enumerate(cfg.etas):
        margin = rho_s ** -(cfg.depth + 1) - eta - EXACT_TOL
        below = {f: np.asarray(x[f]["u_stable_rho"][e]) < margin for f in FAMILIES}
        claims.append(unstable_claim(eta, below["exact"], below["slack"], rho_s, cfg.depth))
        metrics["unstable"][str(eta)] = {f: int(b.sum()) for f, b in below.items()}
    return ExperimentResult(claims=claims, metrics=metrics, tables=tables)
