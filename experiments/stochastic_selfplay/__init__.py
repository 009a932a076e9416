"""Learned Alice and Bob for the stochastic-oracle debate, trained by self-play (spec DED 5).

On small F2 fixtures (a yes- and a no-instance, K = 2, T steps), a learned Alice (MLP claims) and
a learned Bob (abort logits, the zoo's learned family) play "Alice maximises P[out = 1]" with
alternating Adam updates, n_B Bob steps per Alice step, on the exact DP value. Every reported
number is exact (float64 DP, exact binomial Vera) with intervals over seeds; Monte-Carlo play of
the trained pairs is a check. Gating rows: the proven completeness/soundness bounds against every
trained Bob/Alice and the Monte-Carlo check; findings (not gating): the self-play outcome,
tracking, abort targeting, the n_B schedule and convergence. Players, game, training, rows and
their criteria: docs/doubly-efficient-debate.md, section 5.7 (spec DED 5.7). Library:
:mod:`dedebate.agents.selfplay_players`, :mod:`dedebate.exact.selfplay`,
:mod:`dedebate.training.stochastic_selfplay`; this package's ``runs`` and ``claims``. Every
training run (both instances at once) is a row of the swept function's compiled programs
(``point``, a chunked point), trained in ``chunks`` chunks through the lab's chunked driver (log
after each chunk, an Orbax checkpoint every ``checkpoint_every``): a sweep row is the run's.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np

from dedebate.agents.selfplay_players import N_FEATURES
from dedebate.agents.stochastic_zoo import lane_bytes
from dedebate.exact.selfplay import level_inputs
from dedebate.lab.experiment import ChunkedFn, ExperimentResult, Training
from dedebate.lab.params import config_dataclass, param
from dedebate.machines.lipschitz import prefix_tree
from dedebate.programs import FAST_COMPILE
from dedebate.training.stochastic_selfplay import (
    carry_axes,
    chunk_lengths,
    init_carry,
    make_chunk,
    n_periods,
)

from .claims import (
    Measured,
    convergence_claims,
    guaranteed_sides,
    mc_claims,
    outcome_claims,
    plot_training,
    proven_claims,
    schedule_claim,
    seed_values,
    targeting_claims,
    tracking_claims,
    wrong_side,
)
from .runs import (
    CASES,
    MEASURED,
    chunk_rows,
    f64_words,
    measure_host,
    point_metrics,
    seed_keys,
    setup,
)
from .runs import host as host  # the lab's host hook, re-exported

NAME = "stochastic_selfplay"
TITLE = "Stochastic debate self-play: learned Alice and Bob vs the Lean bounds"
TYPICAL_SECONDS = 17  # a cold default-size run on two CPU cores (reproduce's order of work)

COMPILE_OPTIONS = FAST_COMPILE  # the swept programs' XLA options (small scans, compile-bound)


@config_dataclass
class Config:
    T: int = param(6, "steps of the F2 fixture (K = 2)", ge=3, le=10)
    p_yes: float = param(0.75, "P_M(1) of the yes-instance", ge=2 / 3, le=0.95)
    p_no: float = param(0.25, "P_M(1) of the no-instance", ge=0.05, le=1 / 3)
    spread: float = param(0.2, "F2 position probabilities p +- spread (all in [0, 1])", ge=0.0)
    seeds: int = param(8, "self-play runs per instance", ge=2, le=256)
    steps: int = param(1000, "Alice updates per run", ge=10, le=100_000)
    n_b: int = param(5, "Bob updates per Alice update", ge=1, le=1000)
    n_b_sweep: tuple[int, ...] = param(
        (1, 20),
        "further n_B values trained for the schedule row (distinct, != n_b; empty: skip the row)",
        ge=1,
        le=1000,
        max_len=8,
    )
    hidden: int = param(16, "Alice's MLP width", ge=1, le=4096)
    lr_a: float = param(0.01, "Alice's Adam step size", gt=0.0)
    lr_b: float = param(0.05, "Bob's Adam step size", gt=0.0)
    alice_init: float = param(1.0, "typical initial lie |p - pi| in units of b", gt=0.0)
    bob_init: float = param(-2.0, "Bob's initial abort logit")
    vera_grad_mix: float = param(
        1.0, "weight of the heavy-tailed gradient term of Vera's training surrogate", ge=0.0
    )
    ablate_tail: bool = param(True, "also train with vera_grad_mix = 0 (reported in metrics)")
    gap_tol: float = param(0.05, "exploitability gap counted as converged", gt=0.0, lt=1.0)
    mc_trials: int = param(
        2000, "Monte-Carlo debates per seed and instance (0: skip)", ge=0, le=1_000_000
    )
    log_every: int = param(20, "Alice updates between logged monitors", ge=1, le=100_000)
    chunks: int = param(
        5,
        "jitted chunks per training run (log + checkpoint chance after each), "
        "at most ceil(steps / log_every)",
        ge=1,
        le=100_000,
    )
    checkpoint_every: int = param(
        5,
        "save the training state every this many chunks (counted over all training runs; the "
        "last chunk is always saved; an Orbax save costs ~0.2-1 s)",
        ge=1,
        le=100_000,
    )

    def __post_init__(self):
        if not (self.p_yes + self.spread <= 1 and self.p_no - self.spread >= 0):
            raise ValueError(
                f"spread={self.spread}: need 0 <= spread, p_yes + spread <= 1 and "
                "p_no - spread >= 0"
            )
        if self.n_b in self.n_b_sweep or len(set(self.n_b_sweep)) != len(self.n_b_sweep):
            raise ValueError(
                f"n_b_sweep={list(self.n_b_sweep)}: need distinct integers >= 1, "
                f"none equal to n_b={self.n_b}"
            )
        periods = -(-self.steps // self.log_every)
        if self.chunks > periods:
            raise ValueError(
                f"chunks={self.chunks}: must be <= ceil(steps / log_every) = "
                f"{periods} (each chunk runs >= 1 monitor period)"
            )


SIZES = {
    "quick": {
        "T": 4,
        "seeds": 4,
        "steps": 300,
        "mc_trials": 0,
        "ablate_tail": False,
        "n_b_sweep": (),
    },
    "full": {"T": 10, "seeds": 32, "steps": 3000, "mc_trials": 20000, "checkpoint_every": 1},
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run (float32; dedebate/lab/memory.py): a training chunk's Alice
    activations and their gradients over the 2^T prefix nodes, both instances and every seed
    (XLA's chunk program holds ~3 such, measured), every training row's monitors, and the
    Monte-Carlo check's lanes (every seed's pair copied per debate, and the play loop's
    :func:`~dedebate.agents.stochastic_zoo.lane_bytes`)."""
    rows = 1 + cfg.ablate_tail + len(cfg.n_b_sweep)
    lane = 4 * (N_FEATURES + 2) * cfg.hidden + lane_bytes(cfg.T)
    return {
        "Alice's activations and gradients": 3 * 4 * 2 * cfg.seeds * 2**cfg.T * cfg.hidden,
        "monitors": 2 * 2 * 4 * cfg.seeds * -(-cfg.steps // cfg.log_every) * rows,
        "Monte-Carlo lanes": cfg.seeds * cfg.mc_trials * lane,
    }


def _rows(cfg: Config, dynamic) -> dict:
    """The training rows of a run, in training order: the main pairs (the sweep's row), then
    the tail ablation and one row per extra n_B (the same point, other hyperparameters)."""
    hp = dynamic["hp"]
    out = {"main": dynamic}
    if cfg.ablate_tail:
        out["ablation"] = {**dynamic, "hp": hp.replace(vera_grad_mix=np.float32(0))}
    out.update({f"n_b_{n}": {**dynamic, "hp": hp.replace(n_b=np.int32(n))} for n in cfg.n_b_sweep})
    return out


def training(cfg: Config, _key) -> Training:
    """Every training row through :func:`point`'s compiled programs (:func:`_rows`), a checkpoint
    every ``checkpoint_every`` chunks; the main row's monitors are logged at step = Alice
    updates, one row per instance and period."""
    lengths = chunk_lengths(n_periods(setup(cfg)[3]), cfg.chunks)
    starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()

    def rows(name, c, mon):
        if name != "main":
            return []
        per_case = [
            chunk_rows(
                case,
                jax.tree.map(lambda x, i=i: x[i], mon),
                starts[c] * cfg.log_every,
                cfg.log_every,
            )
            for i, case in enumerate(CASES)
        ]
        return [r for pair in zip(*per_case) for r in pair]  # by step, yes then no

    return Training(rows=_rows(cfg, point(cfg)[0]), every=cfg.checkpoint_every, log_rows=rows)


# ---- the swept function: one self-play point, exact measurements ---------------------------------
DYNAMIC = (
    "p_yes",
    "p_no",
    "spread",
    "lr_a",
    "lr_b",
    "n_b",
    "alice_init",
    "bob_init",
    "vera_grad_mix",
    "gap_tol",
)
"""Fields entering :func:`point` only as numbers (``n_b`` is a traced loop bound; under ``vmap``
a row waits for its group's largest n_B). Static: ``T``, ``hidden``, ``steps``, ``log_every``,
``seeds``, ``chunks``. Run only (not in :func:`point`): ``n_b_sweep``, ``ablate_tail``,
``mc_trials``, ``checkpoint_every``."""


def point(cfg: Config):
    """One sweep point ``(dynamic, ChunkedFn)``: the main runs of both instances, every seed
    (seed keys :func:`seed_keys`), trained in ``chunks`` chunks of :func:`make_chunk` (seeds
    vmapped with :func:`carry_axes`, the two instances vmapped too); ``finish`` is
    :func:`point_metrics` of their :func:`measure_pairs` (host, ``jax.pure_callback``, float32
    in the row). A run trains these rows through the same compiled programs (:func:`training`,
    one row per call, checkpointed) and measures the same players in float64
    (``metrics["point"]``: the row before its float32 rounding). The tail ablation, n_B
    schedule, Monte-Carlo check and monitors are run only.

    Args:
        cfg: the Config.

    Returns:
        ``(dynamic, ChunkedFn)``: the row's dynamic numbers (both instances' level inputs, the
        hyperparameters, the float64 words of ``p_yes, p_no, spread, gap_tol``) and the chunked
        training (monitor time axis 2: ``[instance, seed, period]``).
    """
    instances, _, _, static, hp = setup(cfg)
    levels = [
        jax.tree.map(np.asarray, level_inputs(prefix_tree(fx.machine))) for _, fx in instances
    ]
    dynamic = {
        "inputs": jax.tree.map(lambda *x: np.stack(x), *levels),
        "hp": jax.tree.map(np.asarray, hp),
        "words": np.stack([f64_words(x) for x in (cfg.p_yes, cfg.p_no, cfg.spread, cfg.gap_tol)]),
    }
    axes = carry_axes(static)
    init = jax.vmap(
        jax.vmap(functools.partial(init_carry, static), in_axes=(None, 0), out_axes=axes),
        in_axes=(None, 0),
        out_axes=axes,
    )
    names = list(
        point_metrics(
            {
                c: ([dict.fromkeys(MEASURED + ("value",), 0.0)] * cfg.seeds, [0.0] * cfg.seeds)
                for c in CASES
            },
            0.0,
        )
    )
    shapes = {k: jax.ShapeDtypeStruct((), jax.dtypes.canonicalize_dtype(np.float64)) for k in names}

    def start(dyn, key):
        keys = jax.numpy.stack([seed_keys(key, i, cfg.seeds) for i in range(len(CASES))])
        return init(dyn["hp"], keys)

    def chunk(dyn, carry, periods):
        train = jax.vmap(
            jax.vmap(make_chunk(static, periods), in_axes=(None, None, axes), out_axes=(axes, 0)),
            in_axes=(0, None, axes),
            out_axes=(axes, 0),
        )
        return train(dyn["inputs"], dyn["hp"], carry)

    def finish(dyn, carry, _mon):
        players = {
            case: (
                jax.tree.map(lambda x, i=i: x[i], carry.alice),
                jax.tree.map(lambda x, i=i: x[i], carry.bob),
            )
            for i, case in enumerate(CASES)
        }
        return jax.pure_callback(
            functools.partial(measure_host, cfg),
            shapes,
            dyn["words"],
            players,
            vmap_method="sequential",
        )

    chunks = chunk_lengths(n_periods(static), cfg.chunks)
    return dynamic, ChunkedFn(init=start, chunk=chunk, chunks=chunks, finish=finish, axis=2)


def sweep_figures(rows) -> dict:
    """The learning-rate sweep (``configs/sweeps/selfplay_rates.yaml``): per instance the trained
    pair's acceptance and the exploitability gap (means over seeds and sweep seeds) against
    Alice's step size, one line per Bob step size, with the Lean bounds drawn."""
    import matplotlib.pyplot as plt

    if not rows or "lr_a" not in rows[0]:
        return {}
    lr_b = sorted({float(r["lr_b"]) for r in rows}) if "lr_b" in rows[0] else [None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for b in lr_b:
        sel = [r for r in rows if b is None or float(r["lr_b"]) == b]
        xs = sorted({float(r["lr_a"]) for r in sel})
        lab = "lr_b fixed" if b is None else f"lr_b = {b:g}"
        for ax, metric in ((axes[0], "value_mean"), (axes[1], "gap_mean")):
            for case, ls in (("yes", "-"), ("no", "--")):
                ys = [
                    np.mean([float(r[f"{case}/{metric}"]) for r in sel if float(r["lr_a"]) == x])
                    for x in xs
                ]
                ax.plot(xs, ys, "o" + ls, label=f"{case}, {lab}")
    comp, sound = guaranteed_sides(int(rows[0].get("T", Config().T)))
    axes[0].axhline(comp, color="g", ls=":", label=f"completeness {comp:.4f}")
    axes[0].axhline(sound, color="r", ls=":", label=f"soundness {sound:.4f}")
    axes[0].set_ylabel("trained pair's P[out = 1] (exact, mean over seeds)")
    axes[1].set_ylabel("exploitability gap (mean over seeds)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("Alice's step size lr_a")
        ax.legend(fontsize=7)
    fig.suptitle("Stochastic debate self-play: outcome against the learning rates")
    fig.tight_layout()
    return {"selfplay_rates": fig}


def report(cfg: Config, measured, results) -> ExperimentResult:
    """The gating, self-play, tracking, targeting, schedule and convergence rows of the
    measured pairs (``results``: :func:`host`'s), the training curves' figure."""
    claims, tables, metrics = [], {}, {}
    instances, params, constants, _, _ = setup(cfg)
    K = instances[0][1].K
    sides = guaranteed_sides(cfg.T, K)
    tables["seeds"] = [
        {
            "instance": case,
            "seed": s,
            "honest_alice_vs_bob": res["honest_alice"][s],
            **{k: float(v) for k, v in e.items()},
        }
        for case, res in results.items()
        for s, e in enumerate(res["ev"])
    ]

    S = cfg.seeds
    yes, no = results["yes"], results["no"]
    comp = params.completeness(K, cfg.T, yes["p1"])
    sound_acc = 1.0 - params.soundness(K, cfg.T, 1.0 - no["p1"])
    setting = (
        f"F2 (K = {K:g}), T = {cfg.T}, P_M(1) = {yes['p1']:.4f} / {no['p1']:.4f}, "
        f"{S} seeds x {cfg.steps} Alice updates, n_B = {cfg.n_b}"
    )

    # ---- proven bounds against the learned adversaries (gating) -------------------------------
    claims.extend(
        proven_claims(
            Measured(
                comp=comp,
                sound_acc=sound_acc,
                setting=setting,
                honest_vs_bob=np.array(yes["honest_alice"]),
                alice_vs_honest=seed_values(no, "value_vs_honest_bob"),
                sides=sides,
            )
        )
    )
    # ---- findings: self-play outcome, Monte-Carlo check (gating), tracking, targeting ----------
    claims.extend(outcome_claims(results, sides))
    if cfg.mc_trials > 0:
        claims.extend(
            mc_claims(
                {
                    case: (
                        float(seed_values(res, "value").mean()),
                        int(res["mc_wins"].sum()),
                        S * cfg.mc_trials,
                    )
                    for case, res in (("yes", yes), ("no", no))
                }
            )
        )
    claims.extend(tracking_claims(results, constants) + targeting_claims(results))
    # ---- schedules: n_B, then convergence -------------------------------------------------------
    if cfg.n_b_sweep:
        claim, metrics["wrong_side_by_n_b"] = schedule_claim(cfg.n_b, cfg.n_b_sweep, results)
        claims.append(claim)
        tables["n_b_sweep"] = [
            {"instance": c, "n_b": n, "seed": s, **{k: float(v) for k, v in e.items()}}
            for c in results
            for n in cfg.n_b_sweep
            for s, e in enumerate(results[c]["sweep"][n])
        ]
    claims.extend(convergence_claims(results, cfg.gap_tol))

    metrics |= {
        "K": K,
        "T": cfg.T,
        "constants": dataclasses.asdict(constants),
        "completeness_bound_instance": comp,
        "soundness_acceptance_bound_instance": sound_acc,
        "wall_s": {"train" if k == "main" else k: v for k, v in measured["wall_s"].items()},
    }
    # the swept function's metrics of this run (point(), float64 here; a sweep row holds them
    # rounded to float32)
    metrics["point"] = point_metrics(
        {case: (res["ev"], res["honest_alice"]) for case, res in results.items()}, cfg.gap_tol
    )
    for case, res in results.items():
        summary = {k: float(seed_values(res, k).mean()) for k in res["ev"][0]}
        summary["p1"] = res["p1"]
        summary["wrong_side_seeds"] = wrong_side(res["ev"], case)
        if "ablation" in res:
            ab = res["ablation"]
            summary["ablation_no_tail"] = {
                "value_per_seed": [round(e["value"], 4) for e in ab],
                "tracking_per_seed": [round(e["tracking"], 4) for e in ab],
                "wrong_side_seeds": wrong_side(ab, case),
            }
        if "mc_wins" in res:
            summary["mc_wins_per_seed"] = res["mc_wins"].tolist()
        metrics[case] = summary
    mons = [
        jax.tree.map(lambda x, i=i: x[i], measured["monitors"]["main"]) for i in range(len(CASES))
    ]
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        tables=tables,
        figures={"stochastic_selfplay": plot_training(cfg, mons, list(CASES), constants.b)},
    )
