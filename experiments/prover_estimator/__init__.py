"""Prover-estimator debate, Theorem 6.1 on synthetic claim trees (spec PED 3, 4, 7.3, 9; 9.9).

Sections: 1. fbs by LP, dual LP and closed form. 2. rho; completeness vs the estimator zoo.
3. Tight error shifting. 4. Obfuscation vs naive recursive debate. 5. Training signal vs depth.
"""

from __future__ import annotations

import jax
import numpy as np

from dedebate.lab.experiment import ExperimentResult
from dedebate.lab.params import config_dataclass, param
from dedebate.programs import FAST_COMPILE
from dedebate.protocols.prover_estimator import ped_params

from . import claims as cl
from . import zoo
from .zoo import DIRECTION_POLICIES

NAME = "prover_estimator"
TITLE = "Prover-estimator debate (Thm 6.1): completeness, tight error shifting, obfuscation"
TYPICAL_SECONDS = 23  # a cold default-size run on two CPU cores (reproduce's order of work)


@config_dataclass
class Config:
    fbs_qs: tuple[int, ...] = param(
        (3, 5, 7, 9), "widths q of the fbs table (spec 3.4)", ge=2, le=9, min_len=1, max_len=16
    )
    noisy_depth: int = param(3, "depth of the noisy-evidence trees (spec 9.4)", ge=1, le=3)
    noisy_trees: int = param(8, "random noisy-evidence trees (completeness zoo)", ge=1, le=4096)
    random_joints: int = param(8, "random-joint estimators in the completeness zoo", ge=1, le=4096)
    shift_errors: tuple[float, ...] = param(
        (0.2, 0.5, 1.0), "root errors e of error-shifting B", gt=0.0, le=1.0, min_len=1, max_len=64
    )
    control_rho: float = param(1.5, "negative control: rho below the true fbs = 2", ge=1.0, lt=2.0)
    obf_q: int = param(4, "width of the hidden-flaw trees (spec 9.3)", ge=2, le=6)
    obf_depth: int = param(3, "depth of the hidden-flaw trees", ge=1, le=4)
    obf_trees: int = param(32, "random hidden-flaw trees (hidden flaw positions)", ge=1, le=4096)
    obf_episodes: int = param(100_000, "sampled debates per liar policy", ge=1000, le=20_000_000)
    naive_episodes: int = param(100_000, "sampled naive recursive debates", ge=1000, le=20_000_000)
    signal_depths: tuple[int, ...] = param(
        (1, 2, 3, 4, 5), "depths d of the training-signal sweep", ge=1, le=6, min_len=1, max_len=16
    )
    rho_scale: float = param(1.0, "rho / the trees' fbs (rho clamped at 1)", ge=0.25, le=8.0)


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
    """Peak bytes (dedebate/lab/memory.py), per node and debate as XLA's buffers on a CPU."""

    def nodes(q, d):
        return (q ** (d + 1) - 1) // (q - 1)

    return {
        "completeness zoo": 14 * cfg.noisy_trees * cfg.random_joints * nodes(9, cfg.noisy_depth),
        "obfuscation trees": 1200 * cfg.obf_trees * nodes(cfg.obf_q, cfg.obf_depth),
        "sampled debates": 4 * (len(DIRECTION_POLICIES) * cfg.obf_episodes + cfg.naive_episodes),
    }


COMPILE_OPTIONS = FAST_COMPILE  # XLA options of the swept program (they can change rounding)
DYNAMIC = ("shift_errors", "control_rho", "rho_scale")  # the rest are shapes: static
KEY_NAMES = ("noisy", "shift", "unstable", "obf", "sampled", "signal", "rj", "unanimous")


def _keys(key):
    return {name: jax.random.fold_in(key, i) for i, name in enumerate(KEY_NAMES)}


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)``, sections 2-4 exact; the LPs are solved here (host)."""
    lookups, fbs32 = zoo.lookups(cfg.noisy_depth, cfg.obf_q, cfg.obf_depth)
    dynamic = {k: np.asarray(getattr(cfg, k), np.float32) for k in DYNAMIC}

    def fn(dyn, key):
        keys = _keys(key)
        sections = {
            "completeness": zoo.completeness_metrics(cfg, keys, lookups[0], fbs32[0], dyn),
            "error_shift": zoo.error_shift_metrics(keys["shift"], lookups[1], fbs32[1], dyn),
            "obfuscation": zoo.obfuscation_metrics(cfg, keys["obf"], fbs32[2], dyn["rho_scale"]),
        }
        return {f"{s}/{k}": v for s, d in sections.items() for k, v in d.items()}

    return dynamic, fn


def host(cfg: Config, seed: int, key, measured) -> dict:
    """The fbs LP rows, the trees' rho, the sampled debates and the training signal."""
    del seed
    keys = _keys(key)
    params_o = ped_params(measured["obfuscation/rho"])
    us, surv = zoo.sampled_debates(cfg, params_o, keys["obf"], keys["sampled"])
    noisy_keys = jax.random.split(keys["noisy"], cfg.noisy_trees)
    return {
        "fbs": zoo.fbs_rows(cfg.fbs_qs),
        "flips": zoo.flip_rows(cfg.fbs_qs if any(q <= 5 for q in cfg.fbs_qs) else (3,)),
        "rhos": zoo.tree_rhos(noisy_keys, keys["unanimous"], cfg.noisy_depth),
        "us": us,
        "surv": surv,
        "signal": zoo.training_signal_rows(params_o, keys["signal"], cfg.signal_depths, cfg.obf_q),
    }


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The claims of sections 1-5, their tables and the training-signal figure."""
    m, rho_o, qo, do = measured, measured["obfuscation/rho"], cfg.obf_q, cfg.obf_depth
    rows_s = cl.sampled_claims(host["us"], host["surv"], qo, do, cfg.obf_trees)
    sampled = [
        {"policy": name, "mean": c.value, "lo": c.lo, "hi": c.hi, "p_value": c.p_value, "n": u.size}
        for name, c, u in zip(DIRECTION_POLICIES, rows_s, host["us"])
    ]
    rho, d = m["completeness/rho"], cfg.noisy_depth
    claims = [
        *cl.fbs_claims(cfg.fbs_qs, host["fbs"], host["flips"]),
        *cl.rho_claims(*host["rhos"]),
        *cl.completeness_claims(m, rho, d, cfg.shift_errors, cfg.random_joints, cfg.noisy_trees),
        *cl.error_shift_claims(m, cfg.shift_errors, cfg.control_rho),
        *cl.obfuscation_claims(m, rho_o, qo, do, cfg.obf_trees),
        *rows_s,
        *cl.signal_claims(host["signal"], rho_o, qo),
    ]
    tables = {
        "fbs": host["fbs"],
        "flip_probability": host["flips"],
        "obfuscation_sampled": sampled,
        "signal": host["signal"],
    }
    figures = {"training_signal_vs_depth": _signal_plot(host["signal"], rho_o, qo)}
    return ExperimentResult(claims=claims, tables=tables, figures=figures)


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
