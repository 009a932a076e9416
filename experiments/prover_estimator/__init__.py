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

from dedebate.lab.experiment import ExperimentResult
from dedebate.lab.params import config_dataclass, param
from dedebate.programs import FAST_COMPILE
from dedebate.protocols.prover_estimator import ped_params
from dedebate.trees import hidden_flaw_tree

from .claims import (
    completeness_claims,
    error_shift_claims,
    fbs_claims,
    obfuscation_claims,
    rho_claims,
    sampled_claims,
    signal_claims,
)
from .families import DIRECTION_POLICIES, TIGHT_DEPTH, Families
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

SAMPLED_CHUNK = 1 << 18  # sampled debates per policy per compiled call (bounds memory)


@config_dataclass
class Config:
    fbs_qs: tuple[int, ...] = param(
        (3, 5, 7, 9),
        "widths q of the fbs table (closed forms vs LP)",
        ge=2,
        le=9,
        min_len=1,
        max_len=16,
    )
    noisy_depth: int = param(
        3, "depth of the q=9 Thr_5 noisy-evidence trees (spec 9.4)", ge=1, le=3
    )
    noisy_trees: int = param(
        8, "random noisy-evidence trees for the completeness zoo", ge=1, le=4096
    )
    random_joints: int = param(8, "random-joint estimators in the completeness zoo", ge=1, le=4096)
    shift_errors: tuple[float, ...] = param(
        (0.2, 0.5, 1.0),
        "root errors e of the error-shifting estimator (spec 4)",
        gt=0.0,
        le=1.0,
        min_len=1,
        max_len=64,
    )
    control_rho: float = param(1.5, "negative control: rho below the true fbs = 2", ge=1.0, lt=2.0)
    obf_q: int = param(4, "width of the hidden-flaw trees (spec 9.3)", ge=2, le=6)
    obf_depth: int = param(3, "depth of the hidden-flaw trees", ge=1, le=4)
    obf_trees: int = param(32, "random hidden-flaw trees (hidden flaw positions)", ge=1, le=4096)
    obf_episodes: int = param(
        100_000,
        "sampled debates per direction policy (spread over the trees; every outcome "
        "is kept: 4 bytes per debate)",
        ge=1000,
        le=20_000_000,
    )
    naive_episodes: int = param(100_000, "sampled naive recursive debates", ge=1000, le=20_000_000)
    signal_depths: tuple[int, ...] = param(
        (1, 2, 3, 4, 5),
        "depths d of the training-signal sweep on hidden-flaw trees",
        ge=1,
        le=6,
        min_len=1,
        max_len=16,
    )
    rho_scale: float = param(
        1.0,
        "the protocol's rho as a multiple of the trees' fbs (1: the smallest admissible "
        "rho; below 1 the stability assumption fails; rho is clamped at 1)",
        ge=0.25,
        le=8.0,
    )


SIZES = {
    "quick": {
        "fbs_qs": (3, 5),
        "noisy_depth": 2,
        "noisy_trees": 2,
        "random_joints": 2,
        "obf_trees": 8,
        "obf_episodes": 20_000,
        "naive_episodes": 20_000,
        "signal_depths": (1, 2, 3),
    },
    "full": {
        "fbs_qs": (2, 3, 4, 5, 6, 7, 8, 9),
        "noisy_trees": 64,
        "random_joints": 64,
        "obf_trees": 256,
        "obf_episodes": 2_000_000,
        "naive_episodes": 2_000_000,
        "signal_depths": (1, 2, 3, 4, 5, 6),
    },
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run (dedebate/lab/memory.py): the completeness zoo's random-joint
    estimators on every noisy tree (~14 bytes per node of each pair) and the hidden-flaw trees'
    exact obfuscation payoffs (~1.2 KB per node), XLA's buffers measured on a CPU; and the
    sampled debates' outcomes (4 bytes each, every direction policy and the naive debate)."""

    def nodes(q, d):
        return (q ** (d + 1) - 1) // (q - 1)

    return {
        "completeness zoo": 14 * cfg.noisy_trees * cfg.random_joints * nodes(9, cfg.noisy_depth),
        "obfuscation trees": 1200 * cfg.obf_trees * nodes(cfg.obf_q, cfg.obf_depth),
        "sampled debates": 4 * (len(DIRECTION_POLICIES) * cfg.obf_episodes + cfg.naive_episodes),
    }


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
    dynamic = {
        "shift_errors": np.asarray(cfg.shift_errors, np.float32),
        "control_rho": np.asarray(cfg.control_rho, np.float32),
        "rho_scale": np.asarray(cfg.rho_scale, np.float32),
    }
    dps = np.asarray(list(DIRECTION_POLICIES.values()), np.float32)

    def fn(dyn, key):
        keys = {name: jax.random.fold_in(key, i) for i, name in enumerate(KEY_NAMES)}
        scale, errors = dyn["rho_scale"], dyn["shift_errors"]
        trees = jax.vmap(fam.noisy)(jax.random.split(keys["noisy"], cfg.noisy_trees))
        c = completeness_metrics(
            trees,
            lookups[0],
            fbs32[0],
            scale,
            errors,
            jax.random.split(keys["rj"], cfg.random_joints),
            cfg.noisy_depth,
        )
        e = error_shift_metrics(
            fam.tight(keys["shift"]), lookups[1], fbs32[1], scale, errors, dyn["control_rho"]
        )
        otrees = jax.vmap(fam.hidden_flaw)(jax.random.split(keys["obf"], cfg.obf_trees))
        o = obfuscation_metrics(otrees, fbs32[2], scale, dps, cfg.obf_q, cfg.obf_depth)
        return {
            **{f"completeness/{k}": v for k, v in c.items()},
            **{f"error_shift/{k}": v for k, v in e.items()},
            **{f"obfuscation/{k}": v for k, v in o.items()},
        }

    return dynamic, fn


# ==== the experiment ==============================================================================
def host(cfg: Config, seed: int, key, measured) -> dict:
    """The host's part at the point's rho: the fbs LP rows (section 1), the trees' rho by LP
    (section 2), the sampled debates (section 4: ``us`` [policy, tree, episode] and the naive
    liar's ``surv``) and the training-signal rows (section 5)."""
    del seed
    keys = {name: jax.random.fold_in(key, i) for i, name in enumerate(KEY_NAMES)}
    fam = Families(cfg.noisy_depth, cfg.obf_q, cfg.obf_depth)
    params_o = ped_params(measured["obfuscation/rho"])
    otrees = hidden_flaw_tree(
        jax.random.split(keys["obf"], cfg.obf_trees), depth=cfg.obf_depth, q=cfg.obf_q
    )
    dps = jnp.asarray(list(DIRECTION_POLICIES.values()), jnp.float32)
    us, surv = sampled_obfuscation_chunks(
        params_o, otrees, dps, cfg.obf_episodes, cfg.naive_episodes, keys["sampled"], SAMPLED_CHUNK
    )
    return {
        "fbs": fbs_rows(cfg.fbs_qs),
        "flips": flip_rows(cfg.fbs_qs if any(q <= 5 for q in cfg.fbs_qs) else (3,)),
        "rhos": fam.tree_rhos(jax.random.split(keys["noisy"], cfg.noisy_trees), keys["unanimous"]),
        "us": us,
        "surv": surv,
        "signal": training_signal_rows(params_o, keys["signal"], cfg.signal_depths, cfg.obf_q),
    }


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The claims of sections 1-5, their tables and metrics, and the training-signal figure."""
    m, d, n_es = measured, cfg.noisy_depth, len(cfg.shift_errors) + 1
    rho, rho_o, qo, do = m["completeness/rho"], m["obfuscation/rho"], cfg.obf_q, cfg.obf_depth
    u5 = np.asarray([m[f"error_shift/u/{i}"] for i in range(n_es)], np.float32)
    rows_s = sampled_claims(host["us"], host["surv"], qo, do, cfg.obf_trees)
    sampled = [
        {
            "policy": name,
            "mean": row.value,
            "lo": row.lo,
            "hi": row.hi,
            "p_value": row.p_value,
            "n": int(host["us"][i].size),
        }
        for i, (name, row) in enumerate(zip(DIRECTION_POLICIES, rows_s))
    ]
    claims = [
        *fbs_claims(cfg.fbs_qs, host["fbs"], host["flips"]),
        *rho_claims(*host["rhos"]),
        *completeness_claims(m, rho, d, cfg.shift_errors, cfg.random_joints, cfg.noisy_trees),
        *error_shift_claims(
            m["error_shift/honest"],
            u5,
            m["error_shift/fbs"],
            cfg.shift_errors,
            m["error_shift/control_u"],
            cfg.control_rho,
        ),
        *obfuscation_claims(m, rho_o, qo, do, cfg.obf_trees),
        *rows_s,
        *signal_claims(host["signal"], rho_o, qo),
    ]
    mins = {
        k: m[f"completeness/{k}_min"]
        for k in ("honest", "root_liar", "constant_half", "random_joint")
    }
    mins |= {
        "error_shifting": min(m[f"completeness/error_shifting_min/{i}"] for i in range(n_es)),
        "unstable": m["completeness/unstable_min"],
    }
    metrics = {
        "fbs_points": len(host["fbs"]),
        "noisy": {
            "rho": rho,
            "depth": d,
            "honest_margin": (1.0 / rho) ** (d + 1),
            "min_u_by_estimator": mins,
        },
        "error_shifting": {
            "u": [float(x) for x in u5[:-1]],
            "errors": list(cfg.shift_errors),
            "control_u": m["error_shift/control_u"],
            "control_base": (1.0 / cfg.control_rho) ** (TIGHT_DEPTH + 1),
            "unstable_u": m["completeness/unstable_max_e1"],
        },
        "obfuscation": {
            "rho": rho_o,
            "honest_margin": rho_o ** -(do + 1),
            "liar_exact_max_abs": max(
                m[f"obfuscation/liar_max_abs/{i}"] for i in range(len(DIRECTION_POLICIES))
            ),
            "sampled": sampled,
        },
        "naive": {
            "liar_survival_exact": m["obfuscation/naive_liar_mean"],
            "liar_survival_sampled": rows_s[-1].value,
            "honest_survival": m["obfuscation/naive_honest_min"],
        },
        "signal": host["signal"],
    }
    tables = {
        "fbs": host["fbs"],
        "flip_probability": host["flips"],
        "obfuscation_sampled": sampled,
        "signal": host["signal"],
    }
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        tables=tables,
        figures={"training_signal_vs_depth": _signal_plot(host["signal"], rho_o, qo)},
    )


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
