"""Stochastic-oracle debate (Theorem 6.2, Figure 1) measured against its proven bounds.

Per K in ``Ks`` (fixtures F1, F2, F3 cascade) and T in ``Ts``: completeness (min over the Bob zoo of
honest Alice's win rate at P_M(1) = ``p_yes``) and soundness (max over the Alice zoo of the
acceptance at ``p_no``), each with a 95% Wilson interval, against Lean's bounds (spec DED 5.3) and,
with the paper's constants, against 3/5 and 2/5 (spec DED 5.4); Vera's measured queries <= N_V and
honest Alice's ~ c K^2 T ln(200T); beyond the paper, the smallest common factor on (N_A, N_B, N_V)
that still holds (exact DP, then Monte Carlo). The full description is the section
"5.8 The experiment against the bounds" (spec DED 5.8) of ``docs/doubly-efficient-debate.md``.

Every Monte-Carlo number of the report's cells comes from :func:`point` (a run is a sweep's
one-point case), a pure function of ``DYNAMIC = (scale, p_yes, p_no)`` and the key. The optimised
adversaries and the scale search run on the host (:func:`host`: float64 exact DP and an evolution
strategy) and stay outside it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.stochastic_zoo import (
    cell_metrics,
    compile_options,
    lane_bytes,
    measure_cell,
    zoo_cell,
    zoo_stats,
)
from dedebate.lab.devices import lanes_for_memory
from dedebate.lab.experiment import ExperimentResult, consistency_rows, wilson_interval
from dedebate.lab.params import config_dataclass, param
from dedebate.machines.fixtures import fixture_for_k
from dedebate.protocols.stochastic import debate_static, lean_defaults

from .budget import cells
from .budget import lean_n_vera as lean_n_vera  # read by the tests
from .claims import cell_rows, cost_checks, scale_factor_claim, vera_claims
from .figures import plot_acceptance, plot_queries
from .figures import sweep_figures as sweep_figures  # the lab's sweep hook
from .zoo_search import adversaries, exact_scale_search

NAME = "stochastic_debate"
TITLE = "Stochastic-oracle debate (Thm 6.2): completeness/soundness vs proven bounds, query costs"
TYPICAL_SECONDS = 108  # a cold default-size run on two CPU cores (reproduce's order of work)
COMPILE_OPTIONS = compile_options
"""XLA options of the swept program (run and sweep alike): those of the scale search's program,
:data:`dedebate.programs.FAST_COMPILE` on a CPU, XLA's defaults elsewhere."""


@config_dataclass
class Config:
    Ks: tuple[int, ...] = param(
        (1, 2, 4),
        "Lipschitz constants: F1 (K=1), F2 (K=2), F3 cascade with r = 1/4 (K=4)",
        choices=(1, 2, 4),
        min_len=1,
        max_len=8,
    )
    Ts: tuple[int, ...] = param(
        (8, 64, 256), "numbers of steps T", ge=4, le=4096, min_len=1, max_len=16
    )
    trials: int = param(
        2000,
        "Monte-Carlo debates per (K, T, constants, zoo member), run in batches of max_lanes",
        ge=100,
        le=2_000_000,
    )
    p_yes: float = param(
        2 / 3, "P_M(1) of the completeness instances (2/3: the boundary)", ge=2 / 3, le=1.0
    )
    p_no: float = param(
        0.33333, "P_M(1) of the soundness instances (just below 1/3)", ge=0.0, le=1 / 3
    )
    paper: bool = param(True, "also run the paper's own constants (spec DED 5.4) side by side")
    es_generations: int = param(
        6, "evolution-strategy generations of the optimised adversaries", ge=0, le=1000
    )
    es_population: int = param(8, "evolution-strategy population", ge=2, le=1024, multiple_of=2)
    scale_factors: tuple[float, ...] = param(
        (1.0, 0.5, 0.25, 0.125, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256),
        "common factors on (N_A, N_B, N_V) tried by the scale search; empty: skip the search",
        gt=0.0,
        le=1.0,
        max_len=64,
    )
    scale_T: int = param(8, "steps of the exact-DP scale-factor search", ge=4, le=12)
    max_lanes: int = param(
        16384,
        "debates per compiled batch (bounds memory; the numbers do "
        "not depend on it); 0: as many as fit in the device's memory "
        "(batch_lanes; 16384 on a CPU)",
        ge=0,
        le=262_144,
    )
    scale: float = param(
        1.0,
        "common factor on the Lean (N_A, N_B, N_V) of the measured cells "
        "(a dynamic sweep axis; the paper's constants are not scaled, the "
        "scale search uses scale_factors)",
        gt=0.0,
        le=1.0,
    )

    def __post_init__(self):
        if 0 < self.max_lanes < 256:
            raise ValueError(
                f"max_lanes={self.max_lanes}: must be 0 (from the device's memory) "
                "or in [256, 262144]"
            )


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
    """Peak bytes of a run (dedebate/lab/memory.py): one compiled batch of debates at the
    largest T, ``batch_lanes`` lanes (at most every member's trials) of ~16 bytes per step and
    ~2.4 KB per lane (XLA's buffers, measured on a CPU), and the trials' keys of both sides."""
    T = max(cfg.Ts)  # noqa: N806 - the paper's symbol
    return {
        "debate batch": (16 * T + 2400) * batch_lanes(cfg.max_lanes, T),
        "trial keys": 2 * 8 * cfg.trials,
    }


DYNAMIC = ("scale", "p_yes", "p_no")
"""Fields that enter :func:`point` only as numbers: the factor on the int32 counts N_A, N_B, N_V
and the instances' P_M(1). Everything else (Ks, Ts, trials, paper, es_*) is static."""


def batch_lanes(max_lanes: int, T: int) -> int:
    """Debates per compiled batch at ``T`` steps: ``max_lanes``, or where it is 0 as many as fit
    in the device's memory (16384 on a CPU, at most 262144); the numbers do not depend on it."""
    if max_lanes > 0:
        return max_lanes
    return lanes_for_memory(lane_bytes(T), default=16384, lo=256, hi=262_144)


def _adversaries(cfg: Config, ki: int, K: int):
    """The optimised Alice and Bob of K (seed ``ki``; exact DP at the smallest T, at most 12)."""
    return _search(
        K,
        min(min(cfg.Ts), 12),
        ki,
        float(cfg.scale),
        float(cfg.p_yes),
        float(cfg.p_no),
        cfg.es_generations,
        cfg.es_population,
    )


@functools.lru_cache(maxsize=16)
def _search(*args):
    """:func:`.zoo_search.adversaries`, a deterministic host search kept per
    argument tuple, so that :func:`host` reuses what :func:`point` found instead of searching
    again (only the time depends on it)."""
    return adversaries(*args)


def point(cfg: Config):
    """One point: ``(dynamic, fn)``, ``fn(dynamic, key) -> metrics`` pure JAX.

    Per (K, T) and constants set (cell ``K{K}_T{T}``: Lean's x ``scale``; ``K{K}_T{T}_paper``:
    the paper's, with ``paper``), ``trials`` debates per zoo member with the key
    ``fold_in(fold_in(key, K's index), 1000 * T's index + set index)``; metrics: those of
    :func:`dedebate.agents.stochastic_zoo.cell_metrics`, the counts ``n_alice``, ``n_bob``,
    ``n_vera``, ``trials`` and ``completeness_bound``, ``soundness_bound`` (proven for scale 1
    only). The sets of one (K, T) share one compiled body (``lax.map``). The adversaries are
    found on the host per point (the point's scale; not the seed). ``scale_factors``,
    ``scale_T``: unused."""
    dynamic, groups = {}, []
    for ki, K in enumerate(cfg.Ks):
        opt_a, opt_b = _adversaries(cfg, ki, K)
        for ti, T in enumerate(cfg.Ts):
            _, m_no, m_yes, _, sets = cells(cfg, K, T)
            for name, _, consts, bounds in sets:
                d, a_names, b_names = zoo_cell(
                    consts, m_no, m_yes, opt_a.params["theta"], opt_b.params["theta"]
                )
                d["counts"] = np.array([consts.n_alice, consts.n_bob, consts.n_vera], np.int32)
                d["bounds"] = np.array(bounds, np.float32)
                dynamic[name] = d
            groups.append(
                (
                    ki,
                    ti,
                    [s[0] for s in sets],
                    debate_static(T),
                    len(a_names),
                    b_names.index("honest"),
                    batch_lanes(cfg.max_lanes, T),
                )
            )
    trials = cfg.trials

    def fn(dyn, key):
        out = {}
        for ki, ti, names, spec, ma, hh, lanes in groups:
            key_k = jax.random.fold_in(key, ki)
            keys = [jax.random.fold_in(key_k, 1000 * ti + ci) for ci in range(len(names))]
            if len(names) == 1:
                sts = [zoo_stats(spec, dyn[names[0]], keys[0], trials, ma, hh, lanes)]
            else:  # one body for the constants sets of this (K, T)
                both = jax.tree.map(lambda *x: jnp.stack(x), *[dyn[n] for n in names])
                one = functools.partial(
                    zoo_stats, spec, trials=trials, ma=ma, hh=hh, max_lanes=lanes
                )
                st = jax.lax.map(lambda a, one=one: one(a[0], a[1]), (both, jnp.stack(keys)))
                sts = [jax.tree.map(lambda x, i=i: x[i], st) for i in range(len(names))]
            for name, st in zip(names, sts):
                d = dyn[name]
                out.update(cell_metrics(st, trials, ma, hh, name))
                for i, n in enumerate(("n_alice", "n_bob", "n_vera")):
                    out[f"{name}/{n}"] = d["counts"][i]
                out[f"{name}/trials"] = jnp.int32(trials)  # the frontier's integer counts
                out[f"{name}/completeness_bound"] = d["bounds"][0]
                out[f"{name}/soundness_bound"] = d["bounds"][1]
        return out

    return dynamic, fn


def scale_search(cfg: Config, K: int, ki: int, key_k, theta_b) -> dict:
    """The host's scale search of K: the exact DP at ``scale_T`` (the optimised Alice
    re-optimised per factor, so these cells are no point's), then Monte Carlo at the largest T
    (:func:`~dedebate.agents.stochastic_zoo.zoo_stats`, key ``fold_in(key_k, 99)``) up the
    factors from the exact one until the point estimates keep completeness >= 3/5 and soundness
    <= 2/5. Returns the ``rows`` of the ``scale`` table, the exact factor ``f_exact`` (None: 1
    already fails) and the factor that held by Monte Carlo (``factor``, None if none did) with
    its Wilson ``intervals`` (completeness min, soundness max)."""
    rows, thetas, f_exact = exact_scale_search(
        K,
        100 + ki,
        theta_b,
        scale_T=cfg.scale_T,
        p_yes=cfg.p_yes,
        p_no=cfg.p_no,
        factors=cfg.scale_factors,
        generations=max(1, cfg.es_generations // 2),
        population=cfg.es_population,
    )
    out = {"rows": list(rows), "f_exact": f_exact, "factor": None}
    if f_exact is None:
        return out
    Tmax = max(cfg.Ts)  # noqa: N806 - the paper's symbol
    _, m_no, K_decl = fixture_for_k(K, Tmax, cfg.p_no)
    _, m_yes, _ = fixture_for_k(K, Tmax, cfg.p_yes)
    lean_full = lean_defaults(K_decl, Tmax).constants(K_decl, Tmax)
    key = jax.random.fold_in(key_k, 99)
    for f in sorted(x for x in cfg.scale_factors if x >= f_exact):
        consts = lean_full.scaled(f)
        d, a_names, b_names = zoo_cell(consts, m_no, m_yes, thetas.get(f, thetas[f_exact]), theta_b)
        ma = len(a_names)
        st = measure_cell(
            debate_static(Tmax),
            d,
            key,
            cfg.trials,
            ma,
            b_names.index("honest"),
            batch_lanes(cfg.max_lanes, Tmax),
        )
        c = wilson_interval(int(st["wins"][ma:].min()), cfg.trials)
        s = wilson_interval(int(st["wins"][:ma].max()), cfg.trials)
        ok = c[0] >= 3 / 5 and s[0] <= 2 / 5
        out["rows"].append(
            {
                "K": K,
                "factor": f,
                "method": f"Monte Carlo, T={Tmax}",
                "completeness_min": c[0],
                "soundness_max": s[0],
                "holds": ok,
                "n_alice": consts.n_alice,
                "n_bob": consts.n_bob,
                "n_vera": consts.n_vera,
            }
        )
        if ok:
            return out | {"factor": f, "intervals": (c, s)}
    return out


def host(cfg: Config, seed: int, key, measured) -> dict:
    """The host's part: per K, the optimised adversaries' exact values (the ``adversaries``
    table) and, with ``scale_factors``, the :func:`scale_search` (key ``fold_in(key, K's
    index)``)."""
    del seed, measured
    adv, searches = [], {}
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
        if cfg.scale_factors:  # beyond the paper: exact DP on the host, then Monte Carlo
            searches[K] = scale_search(
                cfg, K, ki, jax.random.fold_in(key, ki), opt_b.params["theta"]
            )
    return {"adversaries": adv, "scale": searches}


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The cells' rows per K (then K's scale-factor finding), Vera's cost rows, the cost
    consistency checks, the tables and the two figures."""
    claims, rows, qrows, scale_rows = [], [], [], []
    for K in cfg.Ks:
        for T in cfg.Ts:
            c, r, q = cell_rows(cfg, K, T, measured)
            claims, rows, qrows = claims + c, rows + r, qrows + q
        if K in host["scale"]:
            claims.append(scale_factor_claim(cfg, K, host["scale"][K]))
            scale_rows += host["scale"][K]["rows"]
    claims.extend(vera_claims(cfg.Ks, cfg.Ts, qrows))
    checks, fit = cost_checks(cfg.Ks, cfg.Ts, qrows)
    claims.extend(consistency_rows(checks))
    figures = {"acceptance_vs_T": plot_acceptance(rows, cfg)}
    if qrows:
        figures["queries_vs_T"] = plot_queries([r for r in qrows if r["constants"] == "lean"], fit)
    metrics = {
        "fit": fit,
        "n_claims": len(claims),
        "consistency_checks": {
            k: {"holds": bool(ok), "detail": d} for k, (ok, d) in checks.items()
        },
        "worst": {f"K{r['K']}_T{r['T']}_{r['constants']}_{r['side']}": r["value"] for r in rows},
    }
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        figures=figures,
        tables={
            "acceptance": rows,
            "queries": qrows,
            "scale": scale_rows,
            "adversaries": host["adversaries"],
        },
    )
