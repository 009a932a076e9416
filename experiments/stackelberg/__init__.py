"""Stackelberg self-play for prover-estimator debate (spec PED 7.4, 8.5), prover side.

A learned prover A leads; a learned estimator B follows with ``n_B`` Adam steps per A step on the
exact expected payoff. Parts: (1) a stable decomposition is available: does A converge to correct
answers, the stable candidate and payoff rho^-(d+1)? (2) only the unstable decomposition: A's
payoff should stay below rho^-(d+1); (3) schedules n_B vs simultaneous play; (4) B warm-started
from Algorithm 1 vs cold. What training achieves is a finding; the gating claims are what a
theorem settles, exactly on the trained players: completeness of the honest A against every
trained B (spec PED 4, Thm 6.1(1)) and chaining (spec 6.3, 6.4). Training runs chunk by chunk
through the lab's chunked driver (checkpoints, resume), each run of each part one row of the
swept function's compiled programs (``point``, ``DYNAMIC``: a chunked point), so a sweep row is
the run's seed-0 pair of part 1, bit for bit. The design and the monitors:
``docs/prover-estimator-debate.md`` section 8.5.1. The training code:
``dedebate.training.stackelberg``; this package's ``runs`` (the parts and their exact
measurements), ``warm`` (Algorithm 1's warm start) and ``claims`` (the rows and figures).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from dedebate.agents.learned import N_CAND, N_CHILD, N_GLOBAL, N_NODE, N_ROOT, N_SEL
from dedebate.lab.experiment import ChunkedFn, ExperimentResult, Training
from dedebate.lab.params import config_dataclass, param
from dedebate.programs import TRAINING, jit
from dedebate.training import stackelberg as sb
from dedebate.training.stackelberg import StackelbergStatic, summary

from . import runs
from .claims import plot_schedules, proven_claims, stable_claims, unstable_claim, warm_claim
from .claims import sweep_figures as sweep_figures  # the lab's sweep hook
from .runs import Part, ProvenMeasured, Run, Trained, dynamic
from .warm import ogd_targets, warm_info_template, warm_start

NAME = "stackelberg"
TITLE = "Stackelberg self-play: learned prover and estimator toward the A-leading equilibrium"
TYPICAL_SECONDS = 27  # a cold default-size run on two CPU cores (reproduce's order of work)

COMPILE_OPTIONS = TRAINING  # the swept programs' XLA options (long training chunks)


@config_dataclass
class Config:
    depth: int = param(1, "tree depth d (threshold rho^-(d+1))", ge=1, le=2)
    n_trees: int = param(
        4, "trees (inputs x) per seed (half true roots)", ge=2, le=256, multiple_of=2
    )
    seeds: int = param(4, "training runs per schedule", ge=1, le=256)
    steps: int = param(
        150, "A updates per run (monitors keep every step: runs x seeds x steps)", ge=2, le=20_000
    )
    n_b_values: tuple[int, ...] = param(
        (1, 5, 20), "B updates per A update (Stackelberg)", ge=1, le=1000, min_len=1, max_len=8
    )
    main_n_b: int = param(20, "n_B of parts 1-2; must be one of n_b_values", ge=1, le=1000)
    lr_a: float = param(0.03, "A's Adam step size", gt=0.0)
    lr_b: float = param(0.01, "B's Adam step size", gt=0.0)
    rho: float = param(2.0, "stability parameter rho (fbs of the stable candidate)", ge=1.0)
    eta: float = param(0.0, "soundness slack in the certified bound rho^(d+1)(U_A - eta)", ge=0.0)
    tol: float = param(
        0.1, "relative payoff tolerance around rho^-(d+1) for converged", gt=0.0, lt=1.0
    )
    hidden_a: tuple[int, ...] = param(
        (16,), "prover MLP hidden widths", ge=1, le=4096, min_len=1, max_len=8
    )
    hidden_b: tuple[int, ...] = param(
        (32,), "estimator MLP hidden widths", ge=1, le=4096, min_len=1, max_len=8
    )
    unstable_part: bool = param(True, "run part 2 (only unstable decompositions)")
    chunks: int = param(
        5, "jitted chunks per part (log + checkpoint after each); divides steps", ge=1, le=20_000
    )
    b_warm_start: bool = param(
        False, "parts 1-3: fit B to Algorithm 1's estimator for the initial A before training"
    )
    a_init_scale: float = param(
        0.0, "parts 1-3: A's output-layer init scale (0: fair coins)", ge=0.0
    )
    warm_seeds: int = param(
        0,
        "part 4 (cold vs warm-started B, random initial A) seeds; 0 "
        "skips it (Algorithm 1 costs ~10-30 s per seed on a CPU)",
        ge=0,
        le=256,
    )
    warm_a_init_scale: float = param(2.0, "part 4: A's output-layer init scale", gt=0.0)
    warm_delta: float = param(0.02, "Algorithm 1's delta for the warm start", gt=0.0, le=1.0)
    warm_fit_steps: int = param(
        300, "Adam steps fitting B to Algorithm 1's estimator", ge=1, le=100_000
    )

    def __post_init__(self):
        if self.main_n_b not in self.n_b_values:
            raise ValueError(f"main_n_b={self.main_n_b}: must be one of {list(self.n_b_values)}")
        if self.steps % self.chunks:
            raise ValueError(f"chunks={self.chunks}: must divide steps={self.steps}")


# quick: 16 seeds and 150 A updates, so that the n_B = 20 row tolerates the ~1 in 8 seeds that
# stall (at the fair-coin saddle, or late): the Wilson lower bound exceeds 1/2 from 12/16 on (with
# 2 or 4 seeds every seed would have to converge). Probes of 8 seeds at run seeds 0 and 1 each
# converged 7/8, the slowest at A update 123; quick itself converges 14/16.
SIZES = {
    "quick": {
        "seeds": 16,
        "steps": 150,
        "chunks": 5,
        "n_b_values": (20,),
        "main_n_b": 20,
        "n_trees": 2,
        "unstable_part": False,
        "warm_seeds": 0,
    },
    "full": {"seeds": 32, "steps": 400, "depth": 2, "n_trees": 8, "warm_seeds": 8},
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run, by part (float32; dedebate/lab/memory.py): one training run's seeds at
    once (the largest part), each with both players' parameters P, gradients and Adam moments
    (XLA's chunk program holds ~10 P, measured), the players' activations per tree node, and
    every run's monitors (``6 + 2 (d + 1)`` numbers per A update)."""

    def mlp(widths):
        return sum((a + 1) * b for a, b in zip(widths, widths[1:]))

    Q = 5  # noqa: N806 - the trees' width q (runs.stable_trees)
    a, b = list(cfg.hidden_a), list(cfg.hidden_b)
    n_params = sum(mlp([n, *a, 1]) for n in (N_ROOT, N_NODE, N_CAND, N_SEL)) + sum(
        mlp([n, *b, out]) for n, out in ((N_ROOT, 1), (N_CHILD, 1), (N_GLOBAL, 2**Q))
    )
    seeds = max(cfg.seeds, cfg.warm_seeds)
    nodes = (Q ** (cfg.depth + 1) - 1) // (Q - 1)
    runs = (len(cfg.n_b_values) + 1 + cfg.unstable_part) * cfg.seeds + 2 * cfg.warm_seeds
    return {
        "players, gradients and Adam states": 4 * 10 * seeds * n_params,
        "activations": 4 * 4 * seeds * cfg.n_trees * nodes * (4 * sum(a) + 3 * sum(b)),
        "monitors": 4 * (6 + 2 * (cfg.depth + 1)) * cfg.steps * runs,
    }


def parts(cfg: Config) -> list[Part]:
    """The parts the configuration trains (part 1 always; 2 and 4 when asked)."""
    stable_runs = tuple(Run(f"nB{n}", n, False, cfg.b_warm_start) for n in cfg.n_b_values) + (
        Run("simultaneous", 1, True, cfg.b_warm_start),
    )
    out = [Part("stable", 1, True, stable_runs, cfg.seeds, cfg.a_init_scale)]
    if cfg.unstable_part:
        out.append(
            Part(
                "unstable",
                2,
                False,
                (Run(f"nB{cfg.main_n_b}", cfg.main_n_b, False, cfg.b_warm_start),),
                cfg.seeds,
                cfg.a_init_scale,
            )
        )
    if cfg.warm_seeds:
        out.append(
            Part(
                "warm",
                3,
                True,
                (Run("cold", cfg.main_n_b, False, False), Run("warm", cfg.main_n_b, False, True)),
                cfg.warm_seeds,
                cfg.warm_a_init_scale,
            )
        )
    return out


def _static(cfg: Config) -> StackelbergStatic:
    return StackelbergStatic(
        steps=cfg.steps, hidden_a=tuple(cfg.hidden_a), hidden_b=tuple(cfg.hidden_b)
    )


DYNAMIC = ("lr_a", "lr_b", "main_n_b", "rho", "eta", "tol")
"""Config fields that enter :func:`point` only as numbers (``main_n_b`` is a vmapped loop count:
every row of a group runs to the group's largest n_B, masked beyond its own). The others set
shapes, trip counts or compile-time constants: static. ``n_b_values`` must hold every swept
``main_n_b``."""


def _chunked(cfg: Config) -> ChunkedFn:
    """Part 1's training at one schedule as a :class:`ChunkedFn`: ``init`` draws every seed's
    trees and initial players as :func:`train_parts` does (part key ``fold_in(key, 1)``, seed
    ``s`` from ``fold_in(., s)``), ``chunk`` is ``chunks`` chunks of :func:`sb.make_chunk`
    (seeds vmapped), ``finish`` is :func:`summary` of seed 0's monitors."""
    static = _static(cfg)
    length, a_scale = cfg.steps // cfg.chunks, float(cfg.a_init_scale)

    def init(dyn, key):
        part = jax.random.fold_in(key, 1)
        keys = jax.numpy.stack([jax.random.fold_in(part, s) for s in range(cfg.seeds)])

        def one(k):
            trees = runs.stable_trees(jax.random.fold_in(k, 0), cfg.n_trees, cfg.depth)
            return {
                "trees": trees,
                "carry": sb.init_carry(static, trees, jax.random.fold_in(k, 1), a_scale),
            }

        return jax.vmap(one)(keys)

    def chunk(dyn, state, n):
        carry, mon = jax.vmap(sb.make_chunk(static, n), in_axes=(None, 0, 0))(
            dyn["hp"], state["trees"], state["carry"]
        )
        return {**state, "carry": carry}, mon

    def finish(dyn, _state, mon):
        return {k: v[0] for k, v in summary(mon, dyn["thr"], dyn["band"]).items()}

    return ChunkedFn(init=init, chunk=chunk, chunks=(length,) * cfg.chunks, finish=finish, axis=1)


def point(cfg: Config):
    """One sweep point ``(dynamic, ChunkedFn)``: part 1's ``seeds`` pairs at schedule
    ``main_n_b``, trained chunk by chunk (:func:`_chunked`); the row is :func:`summary` of seed
    0's monitors (:func:`point_metrics`). A run trains every run of every part through these
    compiled programs (:func:`training`, one row per call), so a row swept one per call is the
    run's seed-0 pair, bit for bit (a sweep wants ``params.seeds=1``: the other seeds
    train for nothing). Algorithm 1's warm start runs on the host: not sweepable.

    Args:
        cfg: the Config (``b_warm_start`` must be False).

    Returns:
        ``(dynamic, ChunkedFn)``: the row's dynamic numbers (:func:`_dynamic`) and the chunked
        training.
    """
    if cfg.b_warm_start:
        raise ValueError(
            "b_warm_start=True: Algorithm 1 runs on the host, outside the swept "
            "function; a sweep trains a cold B (b_warm_start=false)"
        )
    return dynamic(cfg, cfg.main_n_b), _chunked(cfg)


def _row(p: Part, r: Run) -> str:
    return f"{p.name}/{r.label}"


def training(cfg: Config, key) -> Training:
    """Every run of every part (:func:`parts`) as a row of :func:`point`'s compiled programs (no
    run pays for another's n_B): part 1's rows start from the init program at the run's key (the
    sweep row's pairs), the others' from :func:`runs.part_start` at ``fold_in(key, key_index)``;
    a warm run's B is first fitted to Algorithm 1's estimator for the initial A (``setup``: the
    fits' numbers by part)."""
    static, rows, starts, setup = _static(cfg), {}, {}, {}
    for p in parts(cfg):
        rows |= {_row(p, r): dynamic(cfg, r.n_b, r.simultaneous) for r in p.runs}
        setup[p.name] = warm_info_template(p.seeds, cfg.depth)
        if p.name == "stable" and not cfg.b_warm_start:
            continue
        if p.name == "stable":
            first = jit(_chunked(cfg).init)(None, key)
            trees, carry = first["trees"], first["carry"]
        else:
            trees, carry = runs.part_start(
                static, p, jax.random.fold_in(key, p.key_index), cfg.n_trees, cfg.depth
            )
        fitted = carry
        if any(r.warm for r in p.runs):
            targets, steps, max_adv = ogd_targets(static, trees, carry, cfg.rho, cfg.warm_delta)
            fitted, info = warm_start(static, trees, carry, targets, cfg.rho, cfg.warm_fit_steps)
            setup[p.name] = {**info, "ogd_steps": steps, "ogd_max_adv": max_adv}
        starts |= {
            _row(p, r): {"trees": trees, "carry": fitted if r.warm else carry} for r in p.runs
        }
    order = list(rows)
    length = cfg.steps // cfg.chunks

    def log_rows(name, c, mon):
        part = next(p for p in parts(cfg) if name.startswith(p.name + "/"))
        run = next(r for r in part.runs if _row(part, r) == name)
        one = jax.tree.map(lambda x: np.asarray(x)[None], mon)
        start = (order.index(name) * cfg.chunks + c) * length
        return [
            (step, {**row, f"{name}/a_update": step - start + c * length})
            for step, row in runs.monitor_rows(dataclasses.replace(part, runs=(run,)), one, start)
        ]

    return Training(
        rows=rows,
        starts=starts,
        log_rows=log_rows,
        setup=setup,
        cfg=dataclasses.replace(cfg, b_warm_start=False),
    )


def trained_parts(cfg: Config, measured) -> dict[str, Trained]:
    """Each part's :class:`Trained` from the lab's trained rows: monitors and final carries
    stacked over its runs, its trees, warm-start numbers and wall seconds."""
    state, mons, out = measured["state"], measured["monitors"], {}
    for p in parts(cfg):
        names = [_row(p, r) for r in p.runs]
        out[p.name] = Trained(
            mon=jax.tree.map(
                lambda *m: np.stack([np.asarray(x) for x in m]), *[mons[n] for n in names]
            ),
            warm=jax.tree.map(np.asarray, measured["setup"][p.name]),
            trees=state[names[0]]["trees"],
            carry=jax.tree.map(
                lambda *x: jax.numpy.asarray(np.stack([np.asarray(a) for a in x])),
                *[state[n]["carry"] for n in names],
            ),
            part=p,
            wall=sum(measured["wall_s"][n] for n in names),
        )
    return out


def host(cfg: Config, _seed, _key, measured) -> tuple[ProvenMeasured, list[dict]]:
    """The proven rows' numbers, measured exactly on every trained pair, and their table."""
    return runs.measure_proven(
        _static(cfg),
        float(cfg.rho),
        cfg.rho ** -(cfg.depth + 1),
        [(t.part, t.trees, t.carry) for t in trained_parts(cfg, measured).values()],
    )


def report(cfg: Config, measured, host) -> ExperimentResult:
    """Each part's rows from the trained runs, the proven rows measured exactly on every
    trained pair (``host``: :func:`host`'s; :func:`proven_claims`) and the schedules' figure."""
    thr = cfg.rho ** -(cfg.depth + 1)
    labels = [f"n_B = {n}" for n in cfg.n_b_values] + ["simultaneous"]
    tables, metrics = {}, {}
    res = trained_parts(cfg, measured)
    mon = res["stable"].mon
    claims = stable_claims(cfg, res["stable"], labels, tables, metrics)
    tables["schedules"] = [
        {
            "part": "stable",
            "schedule": lab,
            "converged": sum(
                r["converged_at"] < cfg.steps
                for r in tables["stable"][i * cfg.seeds : (i + 1) * cfg.seeds]
            ),
            "final_u_a_mean": float(mon.u_a[i, :, -1].mean()),
        }
        for i, lab in enumerate(labels)
    ]
    if "unstable" in res:
        claims.append(
            unstable_claim(cfg, res["unstable"].mon, res["unstable"].wall, thr, tables, metrics)
        )
    if "warm" in res:
        claims.append(
            warm_claim(
                cfg,
                res["warm"].mon,
                res["warm"].warm,
                res["warm"].wall,
                thr,
                tables,
                metrics,
                measured["wall_s"]["setup"],
            )
        )
    m, tables["proven"] = host
    metrics["proven"] = {
        "honest_u_a_min": m.honest_min,
        "honest_min_per_run": m.per_run,
        "tree_rho_max": m.rho_max,
        "chain_abs_err_max": m.chain_max,
    }
    claims.extend(proven_claims(cfg, m))
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        tables=tables,
        figures={"schedules": plot_schedules(cfg, mon, labels, thr)},
    )
