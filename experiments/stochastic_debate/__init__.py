"""Stochastic-oracle debate (Theorem 6.2, Figure 1) against its proven bounds (spec DED 5.8).

Every Monte-Carlo number of the cells comes from :func:`point`, pure in ``DYNAMIC`` and the key;
the optimised adversaries and the scale search run on the host (:func:`host`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents import stochastic_zoo as zoo
from dedebate.lab.devices import lanes_for_memory
from dedebate.lab.experiment import ExperimentResult, consistency_rows
from dedebate.lab.params import config_dataclass, param
from dedebate.protocols.stochastic import debate_static

from .budget import COUNTS, adversaries, cells, scale_search
from .budget import lean_n_vera as lean_n_vera  # read by the tests
from .budget import sweep_figures as sweep_figures  # the lab's sweep hook
from .claims import cell_rows, cost_checks, plot_acceptance, scale_factor_claim, vera_claims
from .claims import plot_queries as plot_queries  # read by the tests

NAME = "stochastic_debate"
TITLE = "Stochastic-oracle debate (Thm 6.2): completeness/soundness vs proven bounds, query costs"
TYPICAL_SECONDS = 108  # a cold default-size run on two CPU cores (reproduce's order of work)
COMPILE_OPTIONS = zoo.compile_options  # FAST_COMPILE on a CPU


@config_dataclass
class Config:
    Ks: tuple[int, ...] = param(
        (1, 2, 4), "Lipschitz constants (F1, F2, F3)", choices=(1, 2, 4), min_len=1, max_len=8
    )
    Ts: tuple[int, ...] = param((8, 64, 256), "steps T", ge=4, le=4096, min_len=1, max_len=16)
    trials: int = param(2000, "debates per (K, T, constants, zoo member)", ge=100, le=2_000_000)
    p_yes: float = param(2 / 3, "P_M(1) of the completeness instances", ge=2 / 3, le=1.0)
    p_no: float = param(0.33333, "P_M(1) of the soundness instances", ge=0.0, le=1 / 3)
    paper: bool = param(True, "also run the paper's own constants (spec DED 5.4) side by side")
    es_generations: int = param(6, "evolution-strategy generations", ge=0, le=1000)
    es_population: int = param(8, "evolution-strategy population", ge=2, le=1024, multiple_of=2)
    scale_factors: tuple[float, ...] = param(
        tuple(2.0**-i for i in range(9)), "scale search factors", gt=0.0, le=1.0, max_len=64
    )
    scale_T: int = param(8, "steps of the exact-DP scale-factor search", ge=4, le=12)
    max_lanes: int = param(16384, "debates per batch (0: by device memory)", ge=0, le=262_144)
    scale: float = param(1.0, "factor on Lean's (N_A, N_B, N_V) (dynamic)", gt=0.0, le=1.0)

    def __post_init__(self):
        if 0 < self.max_lanes < 256:
            raise ValueError(f"max_lanes={self.max_lanes}: must be 0 or in [256, 262144]")


SIZES = {
    "quick": {
        "Ks": (2,),
        "Ts": (8,),
        "trials": 400,
        "paper": True,
        "es_generations": 2,
        "es_population": 4,
        "scale_factors": (1.0, 0.25),
        "max_lanes": 4096,
    },
    "full": {
        "Ts": (8, 16, 64, 256, 1024),
        "trials": 20000,
        "es_generations": 20,
        "es_population": 16,
        "max_lanes": 0,
        "scale_factors": tuple(2.0**-i for i in range(13)),
    },
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes: a batch at the largest T (~16 B a step, ~2.4 KB a debate) and the keys."""
    T = max(cfg.Ts)  # noqa: N806 - the paper's symbol
    lanes = batch_lanes(cfg.max_lanes, T)
    return {"debate batch": (16 * T + 2400) * lanes, "trial keys": 2 * 8 * cfg.trials}


DYNAMIC = ("scale", "p_yes", "p_no")  # the factor on N_A, N_B, N_V and the instances' P_M(1)


def batch_lanes(max_lanes: int, T: int) -> int:
    """Debates per compiled batch: ``max_lanes``, or if 0 as many as fit in the device's memory."""
    return max_lanes or lanes_for_memory(zoo.lane_bytes(T), default=16384, lo=256, hi=262_144)


def _adversaries(cfg: Config, ki: int, K: int):
    """K's optimised Alice and Bob (exact DP at the smallest T, at most 12)."""
    t, gens, pop = min(min(cfg.Ts), 12), cfg.es_generations, cfg.es_population
    return adversaries(K, t, ki, float(cfg.scale), float(cfg.p_yes), float(cfg.p_no), gens, pop)


def point(cfg: Config):
    """``(dynamic, fn)``: ``trials`` debates per zoo member of each cell, keyed ``fold_in(fold_in(
    key, K's index), 1000 * T's index + set index)``; a (K, T)'s sets share one ``lax.map``."""
    dynamic, groups = {}, []
    for ki, K in enumerate(cfg.Ks):
        thetas = [opt.params["theta"] for opt in _adversaries(cfg, ki, K)]
        for ti, T in enumerate(cfg.Ts):
            _, m_no, m_yes, _, sets = cells(cfg, K, T)
            for name, _, consts, bounds in sets:
                d, a_names, b_names = zoo.zoo_cell(consts, m_no, m_yes, *thetas)
                d["counts"] = np.array([getattr(consts, n) for n in COUNTS], np.int32)
                d["bounds"] = np.array(bounds, np.float32)
                dynamic[name] = d
            hh, lanes = b_names.index("honest"), batch_lanes(cfg.max_lanes, T)
            names = [s[0] for s in sets]
            groups.append((ki, ti, names, debate_static(T), len(a_names), hh, lanes))
    trials = cfg.trials

    def fn(dyn, key):
        out = {}
        for ki, ti, names, spec, ma, hh, lanes in groups:
            key_k = jax.random.fold_in(key, ki)
            keys = [jax.random.fold_in(key_k, 1000 * ti + ci) for ci in range(len(names))]
            if len(names) == 1:
                sts = [zoo.zoo_stats(spec, dyn[names[0]], keys[0], trials, ma, hh, lanes)]
            else:  # one body for the constants sets of this (K, T)
                both = jax.tree.map(lambda *x: jnp.stack(x), *[dyn[n] for n in names])
                one = functools.partial(
                    zoo.zoo_stats, spec, trials=trials, ma=ma, hh=hh, max_lanes=lanes
                )
                st = jax.lax.map(lambda a, one=one: one(a[0], a[1]), (both, jnp.stack(keys)))
                sts = [jax.tree.map(lambda x, i=i: x[i], st) for i in range(len(names))]
            for name, st in zip(names, sts):
                d = dyn[name]
                out.update(zoo.cell_metrics(st, trials, ma, hh, name))
                out |= {f"{name}/{n}": d["counts"][i] for i, n in enumerate(COUNTS)}
                out[f"{name}/trials"] = jnp.int32(trials)  # the frontier's integer counts
                out[f"{name}/completeness_bound"] = d["bounds"][0]
                out[f"{name}/soundness_bound"] = d["bounds"][1]
        return out

    return dynamic, fn


def host(cfg: Config, seed: int, key, measured) -> dict:
    """Per K, the optimised adversaries' exact values and the scale search."""
    del seed, measured
    adv, searches, lanes = [], {}, batch_lanes(cfg.max_lanes, max(cfg.Ts))
    for ki, K in enumerate(cfg.Ks):
        opt_a, opt_b = _adversaries(cfg, ki, K)
        adv.append(
            {
                "K": K,
                "es_alice_best_exact_acceptance": opt_a.value,
                "es_bob_best_exact_alice_win": opt_b.value,
                "es_T": min(min(cfg.Ts), 12),
            }
        )
        if cfg.scale_factors:
            theta_b, key_k = opt_b.params["theta"], jax.random.fold_in(key, ki)
            searches[K] = scale_search(cfg, K, ki, key_k, theta_b, lanes)
    return {"adversaries": adv, "scale": searches}


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The cells' rows per K (then K's scale-factor finding), Vera's cost rows, the cost checks."""
    claims, rows, qrows = [], [], []
    for K in cfg.Ks:
        for T in cfg.Ts:
            c, r, q = cell_rows(cfg, K, T, measured)
            claims, rows, qrows = claims + c, rows + r, qrows + q
        if K in host["scale"]:
            claims.append(scale_factor_claim(cfg, K, host["scale"][K]))
    checks, fit = cost_checks(cfg.Ks, cfg.Ts, qrows)
    claims += vera_claims(cfg.Ks, cfg.Ts, qrows) + consistency_rows(checks)
    figures = {
        "acceptance_vs_T": plot_acceptance(rows, cfg),
        "queries_vs_T": plot_queries([r for r in qrows if r["constants"] == "lean"], fit),
    }
    checks_m = {k: {"holds": bool(ok), "detail": d} for k, (ok, d) in checks.items()}
    worst = {f"K{r['K']}_T{r['T']}_{r['constants']}_{r['side']}": r["value"] for r in rows}
    metrics = {"fit": fit, "n_claims": len(claims), "consistency_checks": checks_m, "worst": worst}
    tables = {"acceptance": rows, "queries": qrows}
    tables["scale"] = [r for search in host["scale"].values() for r in search["rows"]]
    tables["adversaries"] = host["adversaries"]
    return ExperimentResult(claims, metrics, tables, figures=figures)
