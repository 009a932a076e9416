"""Stackelberg self-play for prover-estimator debate (spec PED 7.4, 8.5; docs section 8.5.1):
a learned prover A leads, a learned estimator B follows with ``n_B`` Adam steps per A step.
Training's outcomes are findings; the gating rows are theorems checked exactly on the trained
players. Every run is a row of the point's programs: a sweep row is part 1's seed-0 pair."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.learned import N_CAND, N_CHILD, N_GLOBAL, N_NODE, N_ROOT, N_SEL
from dedebate.lab.experiment import ChunkedFn, ExperimentResult, Training
from dedebate.lab.params import config_dataclass, param
from dedebate.programs import TRAINING, jit
from dedebate.training import stackelberg as sb

from . import runs
from .claims import labels, plot_schedules, proven_claims, stable_rows, unstable_rows, warm_rows
from .claims import sweep_figures as sweep_figures  # the lab's sweep hook
from .runs import Trained, dynamic
from .warm import warm_start

NAME = "stackelberg"
TITLE = "Stackelberg self-play: learned prover and estimator toward the A-leading equilibrium"
TYPICAL_SECONDS = 27  # a cold default-size run on two CPU cores (reproduce's order of work)

COMPILE_OPTIONS = TRAINING  # the swept programs' XLA options (long training chunks)


@config_dataclass
class Config:
    depth: int = param(1, "tree depth d (threshold rho^-(d+1))", ge=1, le=2)
    n_trees: int = param(4, "trees per seed (half true roots)", ge=2, le=256, multiple_of=2)
    seeds: int = param(4, "training runs per schedule", ge=1, le=256)
    steps: int = param(150, "A updates per run (monitors keep every one)", ge=2, le=20_000)
    n_b_values: tuple[int, ...] = param(
        (1, 5, 20), "B updates per A update (Stackelberg)", ge=1, le=1000, min_len=1, max_len=8
    )
    main_n_b: int = param(20, "n_B of parts 1-2; one of n_b_values", ge=1, le=1000)
    lr_a: float = param(0.03, "A's Adam step size", gt=0.0)
    lr_b: float = param(0.01, "B's Adam step size", gt=0.0)
    rho: float = param(2.0, "stability parameter rho (fbs of the stable candidate)", ge=1.0)
    eta: float = param(0.0, "soundness slack in the certified bound rho^(d+1)(U_A - eta)", ge=0.0)
    tol: float = param(0.1, "relative payoff tolerance around rho^-(d+1)", gt=0.0, lt=1.0)
    hidden_a: tuple[int, ...] = param((16,), "A's MLP widths", ge=1, le=4096, min_len=1, max_len=8)
    hidden_b: tuple[int, ...] = param((32,), "B's MLP widths", ge=1, le=4096, min_len=1, max_len=8)
    unstable_part: bool = param(True, "run part 2 (only unstable decompositions)")
    chunks: int = param(5, "chunks per run (checkpoint after each); divides steps", ge=1, le=20_000)
    b_warm_start: bool = param(False, "parts 1-3: fit B to Algorithm 1's estimator first")
    a_init_scale: float = param(0.0, "parts 1-3: A's output init scale (0: fair coins)", ge=0.0)
    warm_seeds: int = param(0, "part 4 (cold vs warm B) seeds, ~20 s each; 0 skips", ge=0, le=256)
    warm_a_init_scale: float = param(2.0, "part 4: A's output-layer init scale", gt=0.0)
    warm_delta: float = param(0.02, "Algorithm 1's delta for the warm start", gt=0.0, le=1.0)
    warm_fit_steps: int = param(300, "Adam steps fitting B to Algorithm 1", ge=1, le=100_000)

    def __post_init__(self):
        if self.main_n_b not in self.n_b_values:
            raise ValueError(f"main_n_b={self.main_n_b}: must be one of {list(self.n_b_values)}")
        if self.steps % self.chunks:
            raise ValueError(f"chunks={self.chunks}: must divide steps={self.steps}")


# quick: 16 seeds, so that n_B = 20 tolerates the ~1 in 8 seeds that stall (Wilson lower bound
# > 1/2 from 12/16 on); quick converges 14/16
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
    """Peak bytes of a run (float32): the largest part's players (~10 copies in XLA's chunk
    program, measured), activations per tree node, and every run's monitors."""

    def mlp(widths):
        return sum((a + 1) * b for a, b in zip(widths, widths[1:]))

    Q = 5  # noqa: N806 - the trees' width q (runs.stable_trees)
    a, b = list(cfg.hidden_a), list(cfg.hidden_b)
    n_params = sum(mlp([n, *a, 1]) for n in (N_ROOT, N_NODE, N_CAND, N_SEL)) + sum(
        mlp([n, *b, out]) for n, out in ((N_ROOT, 1), (N_CHILD, 1), (N_GLOBAL, 2**Q))
    )
    seeds = max(cfg.seeds, cfg.warm_seeds)
    nodes = (Q ** (cfg.depth + 1) - 1) // (Q - 1)
    n_runs = (len(cfg.n_b_values) + 1 + cfg.unstable_part) * cfg.seeds + 2 * cfg.warm_seeds
    return {
        "players, gradients and Adam states": 4 * 10 * seeds * n_params,
        "activations": 4 * 4 * seeds * cfg.n_trees * nodes * (4 * sum(a) + 3 * sum(b)),
        "monitors": 4 * (6 + 2 * (cfg.depth + 1)) * cfg.steps * n_runs,
    }


# numbers to point(); main_n_b is a vmapped loop count (masked beyond a row's own n_B)
DYNAMIC = ("lr_a", "lr_b", "main_n_b", "rho", "eta", "tol")
LOGGED = ("u_a", "a_correct", "p_stable", "certified", "max_adv", "calib")  # per seed


def _chunked(cfg: Config) -> ChunkedFn:
    """Part 1 at one schedule: every seed's trees and players at ``fold_in(key, 1)`` (seed ``s``
    at ``fold_in(., s)``), ``chunks`` chunks of seeds-vmapped training, seed 0's summary."""
    static, a_scale = runs.static(cfg), float(cfg.a_init_scale)

    def init(dyn, key):
        part = jax.random.fold_in(key, 1)

        def one(k):
            trees = runs.stable_trees(jax.random.fold_in(k, 0), cfg.n_trees, cfg.depth)
            carry = sb.init_carry(static, trees, jax.random.fold_in(k, 1), a_scale)
            return {"trees": trees, "carry": carry}

        return jax.vmap(one)(jnp.stack([jax.random.fold_in(part, s) for s in range(cfg.seeds)]))

    def chunk(dyn, state, n):
        carry, mon = jax.vmap(sb.make_chunk(static, n), in_axes=(None, 0, 0))(
            dyn["hp"], state["trees"], state["carry"]
        )
        return {**state, "carry": carry}, mon

    def finish(dyn, _state, mon):
        return {k: v[0] for k, v in sb.summary(mon, dyn["thr"], dyn["band"]).items()}

    chunks = (cfg.steps // cfg.chunks,) * cfg.chunks
    return ChunkedFn(init=init, chunk=chunk, chunks=chunks, finish=finish, axis=1)


def point(cfg: Config):
    """``(dynamic, ChunkedFn)``: part 1's seeds at schedule ``main_n_b``, trained chunk by chunk;
    the row is seed 0's summary (a sweep wants ``seeds=1``). The warm start is not sweepable."""
    if cfg.b_warm_start:
        raise ValueError(
            "b_warm_start=True: Algorithm 1 runs on the host, outside the swept "
            "function; a sweep trains a cold B (b_warm_start=false)"
        )
    return dynamic(cfg, cfg.main_n_b), _chunked(cfg)


def training(cfg: Config, key) -> Training:
    """Every run of every part as a row of :func:`point`'s programs: part 1's cold rows start at
    the run's key (the sweep row's pairs), the others at :func:`runs.part_start`; a warm run's B
    is first fitted to Algorithm 1's estimator (``setup``: the fits' numbers by part)."""
    static, rows, starts, setup = runs.static(cfg), {}, {}, {}
    for p in runs.parts(cfg):
        names = {f"{p.name}/{r.label}": r for r in p.runs}
        rows |= {n: dynamic(cfg, r.n_b, r.simultaneous) for n, r in names.items()}
        if p.name == "stable" and not cfg.b_warm_start:
            continue
        if p.name == "stable":
            first = jit(_chunked(cfg).init)(None, key)
            trees, cold = first["trees"], first["carry"]
        else:
            k = jax.random.fold_in(key, p.key_index)
            trees, cold = runs.part_start(static, p, k, cfg.n_trees, cfg.depth)
        warm = cold
        if any(r.warm for r in p.runs):
            fit = (cfg.rho, cfg.warm_delta, cfg.warm_fit_steps)
            warm, setup[p.name] = warm_start(static, trees, cold, *fit)
        starts |= {n: {"trees": trees, "carry": warm if r.warm else cold} for n, r in names.items()}
    order, length = list(rows), cfg.steps // cfg.chunks

    def log_rows(name, c, mon):  # one row per A update, at step (row, A update)
        arrays = {("payoff" if f == "u_a" else f): np.asarray(getattr(mon, f)) for f in LOGGED}
        start, out = (order.index(name) * cfg.chunks + c) * length, []
        for t in range(length):
            row = {
                f"{name}/seed{s}/{k}": float(v[s, t])
                for s in range(len(arrays["payoff"]))
                for k, v in arrays.items()
            }
            out.append((start + t, {**row, f"{name}/a_update": c * length + t}))
        return out

    cold_cfg = dataclasses.replace(cfg, b_warm_start=False)
    return Training(rows=rows, starts=starts, log_rows=log_rows, setup=setup, cfg=cold_cfg)


def trained_parts(cfg: Config, measured) -> dict[str, Trained]:
    """Each part's :class:`Trained` from the lab's trained rows, stacked over its runs."""
    state, mons, out = measured["state"], measured["monitors"], {}
    for p in runs.parts(cfg):
        names = [f"{p.name}/{r.label}" for r in p.runs]
        out[p.name] = Trained(
            mon=jax.tree.map(lambda *m: np.stack(m), *[mons[n] for n in names]),
            warm=measured["setup"].get(p.name),
            trees=state[names[0]]["trees"],
            carry=jax.tree.map(
                lambda *x: jnp.asarray(np.stack(x)), *[state[n]["carry"] for n in names]
            ),
            part=p,
            wall=sum(measured["wall_s"][n] for n in names),
        )
    return out


def host(cfg: Config, _seed, _key, measured):
    """The proven rows' numbers, exact on every trained pair, and their table."""
    return runs.measure_proven(cfg, trained_parts(cfg, measured).values())


def report(cfg: Config, measured, host) -> ExperimentResult:
    """Each part's rows, the proven rows (``host``'s numbers) and the schedules' figure."""
    res = trained_parts(cfg, measured)
    m, proven = host
    out = [stable_rows(cfg, res["stable"])]
    if "unstable" in res:
        out.append(unstable_rows(cfg, res["unstable"].mon, res["unstable"].wall))
    if "warm" in res:
        w = res["warm"]
        out.append(warm_rows(cfg, w.mon, w.warm, w.wall, measured["wall_s"]["setup"]))
    proven_metrics = {
        "honest_u_a_min": m.honest_min,
        "honest_min_per_run": m.per_run,
        "tree_rho_max": m.rho_max,
        "chain_abs_err_max": m.chain_max,
    }
    out.append((proven_claims(cfg, m), {"proven": proven}, {"proven": proven_metrics}))
    thr = cfg.rho ** -(cfg.depth + 1)
    return ExperimentResult(
        claims=[c for claims, _, _ in out for c in claims],
        metrics={k: v for _, _, metrics in out for k, v in metrics.items()},
        tables={k: v for _, tables, _ in out for k, v in tables.items()},
        figures={"schedules": plot_schedules(cfg, res["stable"].mon, labels(cfg), thr)},
    )
