"""Prover-estimator debate, Theorem 6.1 on synthetic claim trees (spec PED 3, 4, 7.3, 9).

What each section checks and why: spec PED 9.9.

1. fbs table: closed forms against the packing LP and its dual; rho of the library trees.
2. Honest vs honest: ``U_A = rho^-(d+1)`` exactly.
3. Completeness against the estimator zoo and error-shifting B (tight where fbs = rho), the
   negative control (rho below fbs) and an unstable decomposition.
4. Obfuscation: the liar earns 0 against the calibrated estimator (exact and sampled); naive
   recursive debate lets it survive with probability ``1 - q^-d``.
5. Training signal against depth: ``rho^-(d+1)`` against ``q^-d`` (plot).

Sweepable: the exact numbers of sections 2-4 are :func:`point`'s ``fn``; ``shift_errors``,
``control_rho`` and ``rho_scale`` are dynamic; a run is the one-point case. Host only
(:func:`host`): the fbs LPs, the sampled debates and the training-signal sweep.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.lab.experiment import Claim, ExperimentResult, consistency_rows, strict_max
from dedebate.lab.params import config_dataclass, param
from dedebate.programs import FAST_COMPILE
from dedebate.protocols.prover_estimator import ped_params
from dedebate.trees import hidden_flaw_tree

from .families import (
    DIRECTION_POLICIES,
    SYMMETRIC_POLICIES,
    TIGHT_DEPTH,
    Families,
)
from .fbs_table import fbs_rows, flip_rows
from .zoo import (
    completeness_metrics,
    error_shift_metrics,
    obfuscation_metrics,
    sampled_obfuscation_chunks,
    training_signal_rows,
)

NAME = "prover_estimator"
TITLE = "Prover-estimator debate (Thm 6.1): completeness, tight error shifting, obfuscation"
TYPICAL_SECONDS = 23  # a cold default-size run on two CPU cores (reproduce's order of work)

EXACT_TOL = 1e-6  # float32 rounding of exact expectations
SAMPLED_CHUNK = 1 << 18  # sampled debates per policy per compiled call (bounds memory)
LP_TOL = 1e-6  # HiGHS optimality tolerance


@config_dataclass
class Config:
    fbs_qs: tuple[int, ...] = param((3, 5, 7, 9), "widths q of the fbs table (closed forms vs LP)",
                                    ge=2, le=9, min_len=1, max_len=16)
    noisy_depth: int = param(3, "depth of the q=9 Thr_5 noisy-evidence trees (spec 9.4)",
                             ge=1, le=3)
    noisy_trees: int = param(8, "random noisy-evidence trees for the completeness zoo",
                             ge=1, le=4096)
    random_joints: int = param(8, "random-joint estimators in the completeness zoo",
                               ge=1, le=4096)
    shift_errors: tuple[float, ...] = param(
        (0.2, 0.5, 1.0), "root errors e of the error-shifting estimator (spec 4)",
        gt=0.0, le=1.0, min_len=1, max_len=64)
    control_rho: float = param(1.5, "negative control: rho below the true fbs = 2",
                               ge=1.0, lt=2.0)
    obf_q: int = param(4, "width of the hidden-flaw trees (spec 9.3)", ge=2, le=6)
    obf_depth: int = param(3, "depth of the hidden-flaw trees", ge=1, le=4)
    obf_trees: int = param(32, "random hidden-flaw trees (hidden flaw positions)", ge=1, le=4096)
    obf_episodes: int = param(
        100_000, "sampled debates per direction policy (spread over the trees; every outcome "
        "is kept: 4 bytes per debate)", ge=1000, le=20_000_000)
    naive_episodes: int = param(100_000, "sampled naive recursive debates",
                                ge=1000, le=20_000_000)
    signal_depths: tuple[int, ...] = param(
        (1, 2, 3, 4, 5), "depths d of the training-signal sweep on hidden-flaw trees",
        ge=1, le=6, min_len=1, max_len=16)
    rho_scale: float = param(
        1.0, "the protocol's rho as a multiple of the trees' fbs (1: the smallest admissible "
        "rho; below 1 the stability assumption fails; rho is clamped at 1)", ge=0.25, le=8.0)


SIZES = {
    "quick": {"fbs_qs": (3, 5), "noisy_depth": 2, "noisy_trees": 2, "random_joints": 2,
              "obf_trees": 8, "obf_episodes": 20_000, "naive_episodes": 20_000,
              "signal_depths": (1, 2, 3)},
    "full": {"fbs_qs": (2, 3, 4, 5, 6, 7, 8, 9), "noisy_trees": 64, "random_joints": 64,
             "obf_trees": 256, "obf_episodes": 2_000_000, "naive_episodes": 2_000_000,
             "signal_depths": (1, 2, 3, 4, 5, 6)},
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run (dedebate/lab/memory.py): the completeness zoo's random-joint
    estimators on every noisy tree (~14 bytes per node of each pair) and the hidden-flaw trees'
    exact obfuscation payoffs (~1.2 KB per node), XLA's buffers measured on a CPU; and the
    sampled debates' outcomes (4 bytes each, every direction policy and the naive debate)."""
    def nodes(q, d):
        return (q ** (d + 1) - 1) // (q - 1)

    return {"completeness zoo": 14 * cfg.noisy_trees * cfg.random_joints
            * nodes(9, cfg.noisy_depth),
            "obfuscation trees": 1200 * cfg.obf_trees * nodes(cfg.obf_q, cfg.obf_depth),
            "sampled debates": 4 * (len(DIRECTION_POLICIES) * cfg.obf_episodes
                                    + cfg.naive_episodes)}

COMPILE_OPTIONS = FAST_COMPILE
"""XLA options of the swept program, run and sweep alike (they can change float rounding)."""


# ==== the swept function (sections 2-4, exact) ====================================================
DYNAMIC = ("shift_errors", "control_rho", "rho_scale")
"""Config fields that enter :func:`point` only as numbers: the root errors of the error-shifting
estimator (an array of ``len(shift_errors)``; points of one sweep group need equally many), the
negative control's rho and the protocol's rho relative to the trees' fbs. Tree widths, depths and
counts, the estimator counts and the episode counts are shapes: static."""

KEY_NAMES = ("noisy", "shift", "unstable", "obf", "sampled", "signal", "rj", "unanimous")
"""Section keys: ``fold_in(key, i)`` for the i-th name (:func:`host` and :func:`point`)."""


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)``; ``fn(dynamic, key)`` is pure JAX (sections 2-4, exact).

    Trees come from ``fold_in(key, i)`` (:data:`KEY_NAMES`) exactly as in :func:`host`; the fbs
    LPs are solved here on the host (:meth:`Families.lookups`) and ``fn`` indexes them. The
    protocol's rho is ``rho_scale`` times the trees' fbs (clamped at 1). Metrics (float32):
    ``completeness/`` of :func:`completeness_metrics`, ``error_shift/`` of
    :func:`error_shift_metrics` (index ``i = len(shift_errors)`` is e = 1) and ``obfuscation/``
    of :func:`obfuscation_metrics` (``liar_max_abs/i`` for policy i of
    :data:`DIRECTION_POLICIES`)."""
    fam = Families(cfg.noisy_depth, cfg.obf_q, cfg.obf_depth)
    lookups, fbs32 = fam.lookups()  # host: the LPs of every child code of the three families
    dynamic = {"shift_errors": np.asarray(cfg.shift_errors, np.float32),
               "control_rho": np.asarray(cfg.control_rho, np.float32),
               "rho_scale": np.asarray(cfg.rho_scale, np.float32)}
    dps = np.asarray(list(DIRECTION_POLICIES.values()), np.float32)

    def fn(dyn, key):
        keys = {name: jax.random.fold_in(key, i) for i, name in enumerate(KEY_NAMES)}
        scale, errors = dyn["rho_scale"], dyn["shift_errors"]
        trees = jax.vmap(fam.noisy)(jax.random.split(keys["noisy"], cfg.noisy_trees))
        c = completeness_metrics(trees, lookups[0], fbs32[0], scale, errors,
                                 jax.random.split(keys["rj"], cfg.random_joints), cfg.noisy_depth)
        e = error_shift_metrics(fam.tight(keys["shift"]), lookups[1], fbs32[1], scale, errors,
                                dyn["control_rho"])
        otrees = jax.vmap(fam.hidden_flaw)(jax.random.split(keys["obf"], cfg.obf_trees))
        o = obfuscation_metrics(otrees, fbs32[2], scale, dps, cfg.obf_q, cfg.obf_depth)
        return {**{f"completeness/{k}": v for k, v in c.items()},
                **{f"error_shift/{k}": v for k, v in e.items()},
                **{f"obfuscation/{k}": v for k, v in o.items()}}

    return dynamic, fn


# ==== claim rows: measured numbers in, rows out (pure; tests feed them lying numbers) =============
def _exact(claim, source, bound, value, passed, note="") -> Claim:
    return Claim.exact(claim, source, bound, float(value), bool(passed), note)


def fbs_claims(qs, rows, flips) -> list[Claim]:
    """Section 1: the fbs closed forms, primal = dual, and ``F(eps) = eps fbs`` from the LP rows of
    :func:`.fbs_table.fbs_rows` and
    :func:`.fbs_table.flip_rows`."""
    claims = []
    for family in ("threshold", "AND", "OR", "majority", "parity", "dictator"):
        fam = [r for r in rows if r["family"] == family]
        if not fam:
            continue
        err = strict_max(abs(r["lp"] - r["closed"]) for r in fam)
        claims.append(_exact(f"fbs of {family} = closed form (LP, q in {list(qs)}, all w)",
                             "spec PED 3.4", f"max |LP - closed| <= {LP_TOL:g}", err,
                             err <= LP_TOL, f"{len(fam)} points"))
    dual_err = strict_max(abs(r["lp"] - r["dual"]) for r in rows)
    claims.append(_exact("fbs packing LP = certificate (dual) LP", "spec PED 3.2",
                         f"max |primal - dual| <= {LP_TOL:g}", dual_err, dual_err <= LP_TOL,
                         f"{len(rows)} points"))
    ferr = strict_max(abs(r["F"] - r["eps_fbs"]) for r in flips)
    claims.append(_exact("worst-case flip probability F(eps) = eps * fbs for eps <= 1/q (LP)",
                         "spec PED 3.3", f"max |F - eps fbs| <= {LP_TOL:g}", ferr, ferr <= LP_TOL,
                         f"thresholds, q <= 5, eps in {{0.01, 1/q}}, {len(flips)} points"))
    return claims


def rho_claims(rho_noisy, rho_unanimous, rho_and) -> list[Claim]:
    """Section 2: rho (max fbs over internal nodes, by LP) of the library trees."""
    return [_exact(f"rho of the {name} = max fbs over internal nodes (LP)",
                   "spec PED 3.3, 3.4, 9.4, 9.5", f"== {expected:.6g}", value,
                   abs(value - expected) <= LP_TOL)
            for name, expected, value in (
                ("noisy-evidence trees Thr_5 of 9 (8-9 / 0-1 true children)", 2.0, rho_noisy),
                ("unanimous Thr_5 of 9 tree", 9.0 / 5.0, rho_unanimous),
                ("AND decomposition (q = 9) offered as the unstable alternative", 9.0, rho_and))]


def completeness_claims(m, rho, d, shift_errors, random_joints, n_trees) -> list[Claim]:
    """Section 2: honest vs honest, the completeness zoo, error-shifting B and the unstable
    decomposition, from the ``completeness/...`` numbers ``m`` of :func:`point`'s ``fn`` (mins
    and maxes over ``n_trees`` trees)."""
    r = 1.0 / rho
    base = r ** (d + 1)
    dev = float(m["completeness/honest_dev"])
    claims = [_exact(f"honest vs honest: U_A = rho^-(d+1) (noisy evidence, d={d}, rho={rho:g})",
                     "spec PED 2.3, 9.1", f"== {base:.6g}", float(m["completeness/honest_min"]),
                     dev <= EXACT_TOL,
                     f"{n_trees} trees, max |U_A - rho^-(d+1)| = {dev:.2g}")]
    zoo = {"root liar": ("root_liar_min", n_trees),
           "constant 1/2": ("constant_half_min", n_trees),
           f"random joints (x{random_joints})": ("random_joint_min", n_trees * random_joints)}
    for name, (key, n) in zoo.items():
        v = float(m[f"completeness/{key}"])
        claims.append(_exact(f"completeness: honest A vs {name} B earns >= rho^-(d+1)",
                             "spec PED 4, Thm 6.1(1)", f">= {base:.6g}", v, v >= base - EXACT_TOL,
                             f"min over {n} debates"))
    for i, e in enumerate(shift_errors):
        bound = base + e * r**d * (1 - r)
        v = float(m[f"completeness/error_shifting_min/{i}"])
        claims.append(_exact(f"completeness: honest A vs error-shifting B (e={e:g}) earns "
                             f">= r^(d+1) + e r^d (1-r)", "spec PED 4", f">= {bound:.6g}", v,
                             v >= bound - EXACT_TOL, f"min over {n_trees} trees"))
    # spec 9.5: honest answers on an unstable (AND) decomposition are pushed below the margin
    u_unst = float(m["completeness/unstable_max_e1"])
    claims.append(_exact(
        "a prover arguing on an unstable decomposition (AND, fbs = 9) falls below "
        "rho^-(d+1) against error-shifting B (e=1): the protocol errs toward rejecting",
        "spec PED 9.5, 8.7", f"< {base:.6g}", u_unst, u_unst < base - EXACT_TOL,
        f"max over {n_trees} trees; expected 9^-{d} = {9.0 ** -d:.6g}"))
    return claims


def error_shift_claims(u5_hh, u5, rho5, shift_errors, u_ctrl, control_rho) -> list[Claim]:
    """Section 3: error-shifting B meets its bound exactly when fbs = rho = 2 on the path (q=5
    Thr_3, d=4), and the negative control (rho below fbs) loses completeness. ``u5[i]`` is U_A at
    root error ``shift_errors[i]``; ``u_ctrl`` U_A at e = 1 with ``rho = control_rho``."""
    claims = [_exact("honest vs honest: U_A = rho^-(d+1) (q=5 Thr_3, d=4, rho=2)",
                     "spec PED 9.1", "== 0.03125", u5_hh, abs(u5_hh - 0.03125) <= EXACT_TOL,
                     "B = error-shifting estimator at e = 0, i.e. honest")]
    spec_values = {0.2: 0.0375, 0.5: 0.046875, 1.0: 0.0625}
    for i, e in enumerate(shift_errors):
        target = 0.5**5 + e * 0.5**4 * 0.5
        note = f"spec's number {spec_values[e]}" if e in spec_values else ""
        claims.append(_exact(f"error-shifting B (e={e:g}) meets the bound exactly when fbs = rho "
                             f"= 2 on the path (q=5 Thr_3, d=4)", "spec PED 4, 9.2",
                             f"== {target:.6g}", u5[i],
                             abs(u5[i] - target) <= EXACT_TOL and abs(rho5 - 2) <= LP_TOL, note))
    base_ctrl = (1.0 / control_rho) ** (4 + 1)
    claims.append(_exact(f"negative control: with rho={control_rho:g} < fbs=2 completeness fails "
                         "(error-shifting B, e=1)", "spec PED 4, 2.5", f"< {base_ctrl:.6g}",
                         u_ctrl, bool(u_ctrl < base_ctrl - EXACT_TOL),
                         f"expected 2^-4 = 0.0625; r^(d+1) = {base_ctrl:.4f}"))
    return claims


def obfuscation_claims(m, rho_o, qo, do, n_trees) -> list[Claim]:
    """Section 4, exact: the A zoo vs the calibrated estimator and the naive-debate liar, from the
    ``obfuscation/...`` numbers ``m`` of :func:`point`'s ``fn`` (over ``n_trees`` trees;
    ``liar_max_abs/i`` for policy i of DIRECTION_POLICIES). The symmetric policies' E[U_A] = 0
    is a consistency check (a row only if it fails)."""
    base_o = rho_o ** -(do + 1)
    claims = []
    for i, name in enumerate(DIRECTION_POLICIES):
        v = float(m[f"obfuscation/liar_max_abs/{i}"])
        if name in SYMMETRIC_POLICIES:
            # E[U_A] = 0 for every B that gives the direction no weight (p_d = 0), by
            # symmetry: a consistency check of the payoff code, not a test of B
            claims.extend(consistency_rows({
                f"obfuscating liar ({name}): E[U_A] = 0 by symmetry": (
                    v <= EXACT_TOL, f"max |E U_A| = {v:.3g} over {n_trees} trees")}))
            continue
        claims.append(_exact(f"obfuscating liar ({name}) vs calibrated B: E[U_A] = 0 exactly (all "
                             f"paths, q={qo}, d={do})", "spec PED 9.3, Thm 6.1(2)", "== 0", v,
                             v <= EXACT_TOL, f"max |E U_A| over {n_trees} trees"))
    v = float(m["obfuscation/stable_liar_max"])
    claims.append(_exact("liar on the stable decomposition vs calibrated B: E[U_A] <= r^(d+1) "
                         "Pr[A correct] = 0", "Thm 6.1(2)", "<= 0", v, v <= EXACT_TOL))
    v = float(m["obfuscation/wrong_direction_max"])
    claims.append(_exact("wrong-direction A vs calibrated B: U_A <= r^(d+1) Pr[A correct]",
                         "Thm 6.1(2)", f"<= {base_o:.6g}", v, v <= base_o + EXACT_TOL))
    dev = float(m["obfuscation/honest_dev"])
    claims.append(_exact(f"honest A on the stable decomposition vs calibrated B earns rho^-(d+1) "
                         f"(rho={rho_o:g})", "spec PED 9.3", f"== {base_o:.6g}",
                         float(m["obfuscation/honest_min"]), dev <= EXACT_TOL))
    target = 1.0 - qo ** -do
    dev = float(m["obfuscation/naive_liar_dev"])
    claims.append(_exact(f"naive recursive debate: the obfuscating liar survives a uniform "
                         f"challenger with probability 1 - q^-d (q={qo}, d={do}, exact)",
                         "spec PED 9.3", f"== {target:.6g}", float(m["obfuscation/naive_liar_mean"]),
                         dev <= EXACT_TOL,
                         f"honest survival {float(m['obfuscation/naive_honest_min']):.6g}"))
    return claims


def sampled_claims(us, surv, qo, do, n_trees) -> list[Claim]:
    """Section 4, sampled: the obfuscating liar's mean U_A per direction policy (``us``:
    [policy, tree, episode]) contains 0, and the naive liar's survival (``surv``: 0/1 outcomes)
    has an exact interval containing ``1 - q^-d``. One row per policy, then the naive row."""
    claims = []
    for i, name in enumerate(DIRECTION_POLICIES):
        claims.append(Claim.mean(
            f"obfuscating liar ({name}) vs calibrated B earns 0 (sampled debates)",
            "spec PED 9.3", "==", 0.0, us[i].ravel(),
            f"{us[i].size} sampled debates over {n_trees} trees",
            bound="== 0 (interval contains 0)"))
    target = 1.0 - qo ** -do
    claims.append(Claim.proportion(
        f"naive recursive debate: liar survival 1 - q^-d (q={qo}, d={do}, sampled)",
        "spec PED 9.3", "==", target, float(surv.sum()), surv.size,
        f"{surv.size} sampled debates", bound=f"== {target:.6g} (exact interval contains it)"))
    return claims


def signal_claims(sig, rho_o, qo) -> list[Claim]:
    """Section 5: the exact training signals of both protocols against ``rho^-(d+1)`` and
    ``q^-d`` (rows of the ``signal`` table)."""
    dev_p = strict_max(abs(s["ped_delta"] - s["rho_power"]) for s in sig)
    dev_n = strict_max(abs(s["naive_delta"] - s["q_power"]) for s in sig)
    ds = [s["depth"] for s in sig]
    return [_exact(f"training signal of prover-estimator debate = rho^-(d+1) (d in {ds})",
                   "spec PED 7.3", "max |Delta - rho^-(d+1)| <= 1e-6", dev_p,
                   dev_p <= EXACT_TOL, f"hidden-flaw trees q={qo}, rho={rho_o:g}"),
            _exact(f"training signal of naive recursive debate = q^-d (d in {ds})",
                   "spec PED 7.3, 9.3", "max |Delta - q^-d| <= 1e-6", dev_n, dev_n <= EXACT_TOL,
                   f"q={qo}")]


# ==== the experiment ==============================================================================
def host(cfg: Config, seed: int, key, measured) -> dict:
    """The host's part at the point's rho: the fbs LP rows (section 1), the trees' rho by LP
    (section 2), the sampled debates (section 4: ``us`` [policy, tree, episode] and the naive
    liar's ``surv``) and the training-signal rows (section 5)."""
    del seed
    keys = {name: jax.random.fold_in(key, i) for i, name in enumerate(KEY_NAMES)}
    fam = Families(cfg.noisy_depth, cfg.obf_q, cfg.obf_depth)
    params_o = ped_params(measured["obfuscation/rho"])
    otrees = hidden_flaw_tree(jax.random.split(keys["obf"], cfg.obf_trees), depth=cfg.obf_depth,
                              q=cfg.obf_q)
    dps = jnp.asarray(list(DIRECTION_POLICIES.values()), jnp.float32)
    us, surv = sampled_obfuscation_chunks(params_o, otrees, dps, cfg.obf_episodes,
                                          cfg.naive_episodes, keys["sampled"], SAMPLED_CHUNK)
    return {"fbs": fbs_rows(cfg.fbs_qs),
            "flips": flip_rows(cfg.fbs_qs if any(q <= 5 for q in cfg.fbs_qs) else (3,)),
            "rhos": fam.tree_rhos(jax.random.split(keys["noisy"], cfg.noisy_trees),
                                  keys["unanimous"]),
            "us": us, "surv": surv,
            "signal": training_signal_rows(params_o, keys["signal"], cfg.signal_depths, cfg.obf_q)}


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The claims of sections 1-5, their tables and metrics, and the training-signal figure."""
    m, d, n_es = measured, cfg.noisy_depth, len(cfg.shift_errors) + 1
    rho, rho_o, qo, do = m["completeness/rho"], m["obfuscation/rho"], cfg.obf_q, cfg.obf_depth
    u5 = np.asarray([m[f"error_shift/u/{i}"] for i in range(n_es)], np.float32)
    rows_s = sampled_claims(host["us"], host["surv"], qo, do, cfg.obf_trees)
    sampled = [{"policy": name, "mean": row.value, "lo": row.lo, "hi": row.hi,
                "p_value": row.p_value, "n": int(host["us"][i].size)}
               for i, (name, row) in enumerate(zip(DIRECTION_POLICIES, rows_s))]
    claims = [*fbs_claims(cfg.fbs_qs, host["fbs"], host["flips"]), *rho_claims(*host["rhos"]),
              *completeness_claims(m, rho, d, cfg.shift_errors, cfg.random_joints,
                                   cfg.noisy_trees),
              *error_shift_claims(m["error_shift/honest"], u5, m["error_shift/fbs"],
                                  cfg.shift_errors, m["error_shift/control_u"], cfg.control_rho),
              *obfuscation_claims(m, rho_o, qo, do, cfg.obf_trees), *rows_s,
              *signal_claims(host["signal"], rho_o, qo)]
    mins = {k: m[f"completeness/{k}_min"]
            for k in ("honest", "root_liar", "constant_half", "random_joint")}
    mins |= {"error_shifting": min(m[f"completeness/error_shifting_min/{i}"]
                                   for i in range(n_es)),
             "unstable": m["completeness/unstable_min"]}
    metrics = {
        "fbs_points": len(host["fbs"]),
        "noisy": {"rho": rho, "depth": d, "honest_margin": (1.0 / rho) ** (d + 1),
                  "min_u_by_estimator": mins},
        "error_shifting": {
            "u": [float(x) for x in u5[:-1]], "errors": list(cfg.shift_errors),
            "control_u": m["error_shift/control_u"],
            "control_base": (1.0 / cfg.control_rho) ** (TIGHT_DEPTH + 1),
            "unstable_u": m["completeness/unstable_max_e1"]},
        "obfuscation": {
            "rho": rho_o, "honest_margin": rho_o ** -(do + 1),
            "liar_exact_max_abs": max(m[f"obfuscation/liar_max_abs/{i}"]
                                      for i in range(len(DIRECTION_POLICIES))),
            "sampled": sampled},
        "naive": {"liar_survival_exact": m["obfuscation/naive_liar_mean"],
                  "liar_survival_sampled": rows_s[-1].value,
                  "honest_survival": m["obfuscation/naive_honest_min"]},
        "signal": host["signal"]}
    tables = {"fbs": host["fbs"], "flip_probability": host["flips"],
              "obfuscation_sampled": sampled, "signal": host["signal"]}
    return ExperimentResult(claims=claims, metrics=metrics, tables=tables, figures={
        "training_signal_vs_depth": _signal_plot(host["signal"], rho_o, qo)})


def _signal_plot(sig, rho, q):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 4.0))
    ax = fig.subplots()
    ds = np.array([s["depth"] for s in sig])
    ax.semilogy(ds, [s["ped_delta"] for s in sig], "o-", label="prover-estimator debate")
    ax.semilogy(ds, [s["naive_delta"] for s in sig], "s-", label="naive recursive debate")
    ax.semilogy(ds, rho ** -(ds + 1.0), "k:", lw=1, label=rf"$\rho^{{-(d+1)}}$, $\rho$={rho:g}")
    ax.semilogy(ds, float(q) ** -ds, "k--", lw=1, label=rf"$q^{{-d}}$, q={q}")
    ax.set_xlabel("depth d")
    ax.set_ylabel(r"training signal $\Delta$ = U(honest) - U(liar)")
    ax.set_title("Obfuscated arguments: signal vs depth (exact)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
