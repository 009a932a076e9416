"""The oracle-machine core checked against its fixtures (spec DED 3 and 9).

For every fixture of :func:`dedebate.machines.fixtures.standard_fixtures` (F1, F2, F3 cascade,
majority, AND, OR, meta-analysis), with T steps:

1. exact P_M(1) three ways -- enumeration of the whole prefix tree (float64), the fixture's small
   dynamic program, and the closed form where there is one -- and a Monte-Carlo estimate from
   ``trials`` sampled transcripts; the exact value must lie in the Monte-Carlo exact interval
   (95%; the row's p-value enters the report-wide Bonferroni policy of the lab);
2. the empirical Lipschitz constant (largest ``|dP_M| / dist`` over the perturbation families of
   :func:`dedebate.machines.lipschitz.estimate_lipschitz`), which must not exceed the proven K,
   and must reach K/2 for F2 and F3 (they are tight).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.core.stats import wilson_jnp
from dedebate.lab.experiment import Claim, ExperimentResult
from dedebate.lab.params import config_dataclass, param
from dedebate.machines.fixtures import standard_fixtures
from dedebate.machines.lipschitz import (
    MAX_TREE_T,
    PERTURBATION_FAMILIES,
    estimate_lipschitz,
    estimate_lipschitz_jnp,
    prefix_tree,
    step_probs,
    tree_matrix_jnp,
    tree_output_prob,
    tree_transcripts,
)
from dedebate.machines.program import MC_CHUNK, count_ones

NAME = "machines"
TITLE = "Oracle machines: exact P_M vs Monte Carlo, empirical vs proven Lipschitz constants"
TYPICAL_SECONDS = 18  # a cold default-size run on two CPU cores (reproduce's order of work)

# The fixtures' probabilities are float32; their tiny non-linearity in float32 can lift a ratio
# above K by ~1e-7 relative, which is rounding, not a counterexample.
K_REL_TOL = 1e-6
DP_ABS_TOL = 1e-5
TIGHT = {"F2": 0.5, "F3": 0.5}  # fixtures whose empirical K must reach this fraction of K


@config_dataclass
class Config:
    T: int = param(
        16,
        "steps of every fixture (exact prefix trees, 2^T - 1 prefixes)",
        ge=4,
        le=min(18, MAX_TREE_T),
    )
    trials: int = param(
        20000,
        "Monte-Carlo transcripts per fixture (all held at once: trials x T uniforms, "
        "720 MB at the cap with T = 18)",
        ge=100,
        le=10_000_000,
    )
    high: bool = param(True, "F1-F3 with P_M(1) = 3/4 (true) or 1/4 (false)")
    eps: tuple[float, ...] = param(
        (1e-3, 1e-2, 5e-2),
        "oracle perturbation sizes for the Lipschitz estimate",
        gt=0.0,
        le=1.0,
        min_len=1,
        max_len=64,
    )
    n_random: int = param(8, "random sign patterns per eps", ge=0, le=1024)
    ascent_iters: int = param(
        10, "sign-ascent iterations of the adversarial family", ge=1, le=10_000
    )


SIZES = {
    "quick": {"T": 8, "trials": 2000, "eps": (1e-3, 5e-2), "n_random": 2, "ascent_iters": 3},
    "full": {"T": 18, "trials": 1_000_000, "n_random": 32, "ascent_iters": 20},
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run (dedebate/lab/memory.py): the Lipschitz estimate's arrays over the
    prefix tree's ``2^(T-1) x T`` nodes (~176 bytes a node: probabilities, reach, influences and
    the families' perturbed trees, and ~2 more per random sign pattern; XLA's buffers measured
    on a CPU) and one Monte-Carlo chunk of ``min(trials, MC_CHUNK)`` transcripts (~64 bytes a
    step)."""
    return {
        "prefix tree and Lipschitz families": (176 + 2 * cfg.n_random) * 2 ** (cfg.T - 1) * cfg.T,
        "Monte-Carlo chunk": 64 * min(cfg.trials, MC_CHUNK) * cfg.T,
    }


DYNAMIC = ("eps", "high")
"""Config fields that enter :func:`point` only as numbers: the perturbation sizes (an array of
``len(eps)``; points of one sweep group need equally many) and the fixtures' target P_M(1)
(through their float32 probabilities; the machines' structure does not depend on it). ``T``,
``trials``, ``n_random`` and ``ascent_iters`` are shapes or loop counts: static."""


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)``; ``fn(dynamic, key)`` is pure JAX.

    For fixture ``i`` of :func:`standard_fixtures` (key ``k_i = fold_in(key, i)``), metrics named
    ``NAME/...``: ``ones`` among ``trials`` transcripts drawn from ``fold_in(k_i, 0)``, ``p1_mc``
    with its 95% Wilson interval ``p1_mc_lo``/``p1_mc_hi``, ``p1_dp`` (the fixture's dynamic
    program), ``p1_tree`` (enumeration of the prefix tree), and the empirical Lipschitz constant
    of :func:`estimate_lipschitz_jnp` over ``eps`` (random signs from ``fold_in(k_i, 1)``):
    ``K_empirical``, ``K_empirical_eps``, one ``K_<family>`` per family, ``K_hybrid`` (the exact
    hybrid bound), ``K_proven`` and ``K_ratio = K_empirical / K_proven``. All float32.

    Not in ``fn``: :func:`host`'s float64 enumeration and Lipschitz estimate
    (:func:`estimate_lipschitz`), which the exact claim rows use; JAX runs without x64 here, and
    the float32 numbers of ``fn`` agree with them to ~1e-6 relative, not bit for bit."""
    fixtures = standard_fixtures(cfg.T, high=cfg.high)
    classes: dict = {}  # fixtures of one machine class and shape are mapped by one trace
    for i, fx in enumerate(fixtures):
        leaves, treedef = jax.tree.flatten(fx.machine)
        classes.setdefault((treedef, tuple(np.shape(x) for x in leaves)), []).append(i)
    groups = list(classes.values())
    dynamic = {
        "eps": np.asarray(cfg.eps, np.float32),
        "classes": [
            {
                "machine": jax.tree.map(lambda *v: np.stack(v), *(fixtures[i].machine for i in g)),
                "K": np.asarray([fixtures[i].K for i in g], np.float32),
            }
            for g in groups
        ],
    }
    names = [fx.name for fx in fixtures]
    tree_ys = tree_transcripts(cfg.T)
    trials, n_random, iters = cfg.trials, cfg.n_random, cfg.ascent_iters

    def one(machine, k, eps):
        ones = count_ones(machine, jax.random.fold_in(k, 0), trials)
        probs = jax.vmap(step_probs, in_axes=(None, 0))(machine, jnp.asarray(tree_ys))
        est = estimate_lipschitz_jnp(
            tree_matrix_jnp(probs),
            jax.random.fold_in(k, 1),
            eps,
            n_random=n_random,
            ascent_iters=iters,
        )
        p, lo, hi = wilson_jnp(ones, trials)
        return {
            "ones": ones,
            "p1_mc": p,
            "p1_mc_lo": lo,
            "p1_mc_hi": hi,
            "p1_dp": machine.output_prob_dp(),
            "p1_tree": est["p1"],
            "K_empirical": est["best"],
            "K_empirical_eps": est["best_eps"],
            **{f"K_{f}": est[f] for f in PERTURBATION_FAMILIES},
            "K_hybrid": est["hybrid"],
        }

    def fn(dyn, key):
        out = {}
        for g, d in zip(groups, dyn["classes"]):
            keys = jnp.stack([jax.random.fold_in(key, i) for i in g])
            m = jax.lax.map(lambda a: one(*a, dyn["eps"]), (d["machine"], keys))
            m["K_proven"] = d["K"]
            m["K_ratio"] = m["K_empirical"] / d["K"]
            for j, i in enumerate(g):
                out.update({f"{names[i]}/{k}": v[j] for k, v in m.items()})
        return {k: out[k] for k in sorted(out, key=lambda k: names.index(k.split("/")[0]))}

    return dynamic, fn


def host(cfg: Config, seed: int, key, measured) -> list:
    """Float64 on the host, per fixture ``i``: ``(fixture, P_M(1) by enumerating the prefix
    tree, the Lipschitz estimate of :func:`estimate_lipschitz`)``, the signs from
    ``fold_in(fold_in(key, i), 1)`` as in :func:`point`."""
    del seed, measured
    out = []
    for i, fx in enumerate(standard_fixtures(cfg.T, high=cfg.high)):
        levels = prefix_tree(fx.machine)
        est = estimate_lipschitz(
            levels,
            jax.random.fold_in(jax.random.fold_in(key, i), 1),
            eps=cfg.eps,
            n_random=cfg.n_random,
            ascent_iters=cfg.ascent_iters,
        )
        out.append((fx, tree_output_prob(levels), est))
    return out


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The claims of every fixture, its row of the ``fixtures`` table and the figure."""
    claims, rows = [], []
    for fx, p_enum, est in host:
        ones, p_dp = int(measured[f"{fx.name}/ones"]), float(measured[f"{fx.name}/p1_dp"])
        fx_claims = fixture_claims(fx, cfg.trials, p_enum, p_dp, ones, est)
        claims.extend(fx_claims)
        mc = fx_claims[0]
        rows.append(
            {
                "fixture": fx.name,
                "T": fx.T,
                "K_proven": fx.K,
                "K_hybrid": est.hybrid,
                "K_empirical": est.best,
                "best_family": est.family,
                "best_eps": est.eps,
                **{f"K_{k}": v for k, v in est.by_family.items()},
                "p1_enumeration": p_enum,
                "p1_dp": p_dp,
                "p1_closed": fx.exact_p1,
                "p1_mc": mc.value,
                "p1_mc_lo": mc.lo,
                "p1_mc_hi": mc.hi,
                "p_value": mc.p_value,
                "trials": cfg.trials,
            }
        )
    metrics = {r["fixture"]: {k: v for k, v in r.items() if k != "fixture"} for r in rows}
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        tables={"fixtures": rows},
        figures={"lipschitz_empirical_vs_proven": _plot(rows)},
    )


def _plot(rows):
    from matplotlib.figure import Figure  # no pyplot: nothing global to close

    names = [r["fixture"] for r in rows]
    x = np.arange(len(rows))
    fig = Figure(figsize=(8, 4))
    ax = fig.subplots()
    w = 0.27
    ax.bar(x - w, [r["K_proven"] for r in rows], w, label="proven K")
    ax.bar(x, [r["K_hybrid"] for r in rows], w, label="hybrid bound (exact)")
    ax.bar(x + w, [r["K_empirical"] for r in rows], w, label="empirical K (largest ratio)")
    ax.set_yscale("log")
    ax.set_xticks(x, names)
    ax.set_ylabel("Lipschitz constant")
    ax.set_title(f"Empirical vs proven Lipschitz constants (T = {rows[0]['T']})")
    ax.legend()
    fig.tight_layout()
    return fig


# ---- claim rows: measured numbers in, rows out (pure; tests feed them lying numbers) -------------
def fixture_claims(fx, trials: int, p_enum: float, p_dp: float, ones: float, est) -> list[Claim]:
    """The rows of one fixture: the exact P_M(1) (enumeration ``p_enum``, cross-checked against
    the DP ``p_dp`` and the closed form ``fx.exact_p1``) in the exact interval of ``ones``
    ones among ``trials`` transcripts; the empirical Lipschitz constant ``est.best`` at most the
    proven ``fx.K``; and, for the fixtures of ``TIGHT``, at least that fraction of K.

    ``fx`` needs ``name``, ``T``, ``K`` and ``exact_p1`` (None: no closed form); ``est`` needs
    ``best``, ``family``, ``eps`` and ``hybrid`` (a :func:`estimate_lipschitz` result)."""
    p_closed = fx.exact_p1
    agree = abs(p_enum - p_dp) <= DP_ABS_TOL and (
        p_closed is None or abs(p_enum - p_closed) <= DP_ABS_TOL
    )
    closed = "none" if p_closed is None else f"{p_closed:.6f}"
    claims = [
        Claim.proportion(
            f"{fx.name}: exact P_M(1) lies in the Monte-Carlo interval",
            "spec DED 9 (exact P_M by enumeration / DP)",
            "==",
            p_enum,
            ones,
            trials,
            note=(
                f"T={fx.T}; enumeration {p_enum:.6f}, DP {p_dp:.6f}, closed form {closed}; "
                f"{trials} transcripts; Clopper-Pearson interval, exact binomial test"
            ),
            checks=agree,
            bound=f"contains {p_enum:.6f}",
        )
    ]
    claims.append(
        Claim.exact(
            f"{fx.name}: empirical Lipschitz constant <= proven K",
            "spec DED 3.3 (Lean Oracle.lipschitz), fixture proof",
            f"<= {fx.K:.4g}",
            est.best,
            passed=est.best <= fx.K * (1 + K_REL_TOL),
            note=(
                f"largest |dP_M|/dist via {est.family} at eps={est.eps:g}; exact hybrid "
                f"bound {est.hybrid:.4g}; tolerance {K_REL_TOL:g} relative (float32)"
            ),
        )
    )
    if fx.name in TIGHT:
        frac = TIGHT[fx.name]
        claims.append(
            Claim.exact(
                f"{fx.name}: empirical Lipschitz constant within a factor 2 of proven K",
                "spec DED 3.3, 9 (tightness of F2 / F3)",
                f">= {frac * fx.K:.4g}",
                est.best,
                passed=est.best >= frac * fx.K,
                note=f"ratio empirical/proven = {est.best / fx.K:.3f}",
            )
        )
    return claims
