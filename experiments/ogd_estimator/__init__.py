"""OI estimator construction (spec PED 5-6): Algorithm 1's bounds on random problems with tanh
tests (the swept :func:`point`, its exit h rechecked in float64 numpy), a Flax estimator trained
by OGD beside tabular Algorithm 1, soundness of B built against fixed provers."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.ped_strategies import (
    honest_prover,
    lie_then_honest_prover,
    obfuscating_liar,
    wrong_direction_prover,
)
from dedebate.core.stats import nan_last
from dedebate.estimators import train
from dedebate.estimators.ogd import STEP_RULES, OGDStatic, solve_grid
from dedebate.estimators.soundness import construct_estimator
from dedebate.lab.experiment import Chunks, Claim, ExperimentResult, strict_max
from dedebate.lab.params import config_dataclass, param
from dedebate.programs import jit
from dedebate.protocols.prover_estimator import PEDStatic, expected_payoff, ped_params
from dedebate.protocols.prover_estimator_interface import Prover
from dedebate.trees.library import hidden_flaw_tree

from .algorithm1 import (
    FRESH_FACTOR,
    algorithm1_claims,
    algorithm1_grid,
    algorithm1_table,
    make_problems,
    steps_figure,
)
from .algorithm1 import sweep_figures as sweep_figures  # the sweep's hook

NAME = "ogd_estimator"
TITLE = "OI estimator construction: Algorithm 1 bound, Flax estimator, soundness against fixed A"
TYPICAL_SECONDS = 38  # a cold default-size run on two CPU cores (reproduce's order of work)
PROVERS: dict[str, Callable[[], Prover]] = {"honest": honest_prover}
PROVERS |= {"lie_then_honest": lie_then_honest_prover, "obfuscating": obfuscating_liar}
PROVERS["wrong_direction"] = wrong_direction_prover
NET_INIT_KEY, NET_PROBLEM_KEY, TREE_KEY = 200, 201, 300  # fold_in(key, K)


@config_dataclass
class Config:
    n_x: int = param(100, "contexts |X| per random problem", ge=2, le=20_000)
    n_features: int = param(4, "context features read by the tests and the network", ge=1, le=1024)
    q_values: tuple[int, ...] = param(
        (1, 2, 3), "outcome bits q of the sweep (|Z| = 2^q)", ge=1, le=5, min_len=1, max_len=16
    )
    deltas: tuple[float, ...] = param(
        (0.1, 0.05, 0.025), "indistinguishability levels", gt=0.0, le=1.0, min_len=1, max_len=16
    )
    n_tests: int = param(40, "random prediction-dependent tanh tests per problem", ge=1, le=4096)
    test_scale: float = param(3.0, "weight scale of the tanh tests", gt=0.0, le=100.0)
    truth: str = param("softmax", "truth g", choices=("softmax", "dirichlet", "point"))
    seeds: int = param(4, "random problems per (|Z|, delta) point", ge=1, le=256)
    step_rules: tuple[str, ...] = param(
        ("hazan", "tight"), "OGD step rules", choices=tuple(STEP_RULES), min_len=1, max_len=2
    )
    trace_len: int = param(4096, "advantage-trace buffer length per run", ge=2, le=65_536)
    net_q: int = param(2, "q of the network-vs-tabular comparison", ge=1, le=5)
    net_delta: float = param(0.05, "delta of the network-vs-tabular comparison", gt=0.0, le=1.0)
    net_lrs: tuple[float, ...] = param(
        (1.0, 3.0), "learning rates", gt=0.0, le=100.0, min_len=1, max_len=64
    )
    net_rounds: int = param(300, "estimator training rounds", ge=1, le=100_000)
    net_hidden: tuple[int, ...] = param(
        (32,), "MLP widths", ge=1, le=4096, min_len=1, max_len=8, distinct=False
    )
    net_optimizer: str = param("sgd", "sgd (lr / sqrt(t), OGD) or adam", choices=("sgd", "adam"))
    net_best_response: str = param(
        "family", "family: F's max-|Adv| test; family+mlp: and an MLP", choices=train.BEST_RESPONSES
    )
    net_checkpoint_every: int = param(100, "rounds per checkpointed chunk", ge=1, le=100_000)
    sound_provers: tuple[str, ...] = param(
        tuple(PROVERS), "fixed provers A ([] skips)", choices=tuple(PROVERS), max_len=len(PROVERS)
    )
    sound_trees: int = param(4, "hidden-flaw trees (inputs x, mu uniform)", ge=1, le=1024)
    sound_depth: int = param(2, "tree depth d (rounds k = d..1 plus the human check)", ge=1, le=4)
    sound_q: int = param(3, "tree width q", ge=2, le=4)
    sound_rho: float = param(
        2.0, "stability parameter rho (reward weights r^k, r = 1/rho)", ge=1.0, le=100.0
    )
    sound_eta: float = param(0.2, "soundness slack eta; delta = eta / (2d + 3)", gt=0.0, le=1.0)


SIZES = {
    "quick": {
        "n_x": 30,
        "q_values": (2,),
        "deltas": (0.1, 0.05),
        "n_tests": 16,
        "seeds": 2,
        "trace_len": 512,
        "net_lrs": (3.0,),
        "net_rounds": 60,
        "net_hidden": (16,),
        "net_checkpoint_every": 20,
        "sound_provers": ("lie_then_honest", "obfuscating"),
        "sound_trees": 2,
        "sound_depth": 1,
        "sound_q": 2,
    },
    "full": {
        "n_x": 1000,
        "q_values": (1, 2, 3, 4),
        "deltas": (0.1, 0.05, 0.025, 0.0125),
        "n_tests": 64,
        "seeds": 16,
        "trace_len": 16384,
        "net_lrs": (0.3, 1.0, 3.0, 10.0),
        "net_rounds": 2000,
        "net_hidden": (64, 64),
        "net_checkpoint_every": 500,
        "sound_trees": 16,
        "sound_depth": 3,
    },
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes by part (float32 unless said). Algorithm 1 holds about five ``[x, z]`` arrays
    per (seed, delta) lane in its loop, shared by the rules it runs in turn, and each rule's exit
    h (XLA's count at four shapes: 6.2-6.3 such arrays with one rule, 7.2-7.8 with two)."""
    s, j, t = cfg.seeds, len(cfg.deltas), cfg.trace_len
    x, d, f = cfg.n_x, cfg.n_features, cfg.n_tests

    def problems(z):
        return 4 * s * (x * (1 + z + d) + f * (d + 2 * z + 2 + x))

    def states(z, rules):
        return (5 + rules) * 4 * s * j * (x * z + f + 2 * t)

    zs = [2**q for q in cfg.q_values]
    widths = [d, *cfg.net_hidden, 2**cfg.net_q]
    params = sum((a + 1) * b for a, b in zip(widths, widths[1:]))
    moments = 2 if cfg.net_optimizer == "adam" else 0
    every = min(cfg.net_checkpoint_every, cfg.net_rounds)
    rounds = -(-cfg.net_rounds // every) * every
    lane = (2 + moments) * params + 3 * x * sum(widths) + 2 * 3 * rounds  # per (lr, seed)
    return {
        "Algorithm 1 problems": sum(problems(z) for z in zs),
        "Algorithm 1 states and traces": sum(states(z, len(cfg.step_rules)) for z in zs),
        "float64 recheck of the exit h": 2 * 8 * x * max(zs) * FRESH_FACTOR * f,
        "estimator networks": 4 * len(cfg.net_lrs) * s * lane,
        "tabular comparison": problems(2**cfg.net_q) + states(2**cfg.net_q, 1),
    }


DYNAMIC = ("deltas", "test_scale")  # enter point only as numbers: every other field is static


def point(cfg: Config):
    """Part 1, one sweep point: ``fn(dynamic, key)`` is :func:`algorithm1_grid`."""
    dynamic = {k: np.asarray(getattr(cfg, k), np.float32) for k in DYNAMIC}
    return dynamic, lambda dyn, key: algorithm1_grid(cfg, dyn["deltas"], dyn["test_scale"], key)


def side(cfg: Config, _seed, key) -> list:
    """Part 3 (beside part 1): per fixed prover, B built against it, U_A and Pr[A correct]."""
    keys = jax.random.split(jax.random.fold_in(key, TREE_KEY), cfg.sound_trees)
    trees = hidden_flaw_tree(keys, cfg.sound_depth, cfg.sound_q, 0)
    out = []
    for name in cfg.sound_provers:
        prover = PROVERS[name]()
        rep = construct_estimator(prover, trees, cfg.sound_rho, sound_delta(cfg))
        payoff = functools.partial(expected_payoff, PEDStatic(), ped_params(cfg.sound_rho), prover)
        ep = jit(jax.vmap(payoff))(rep.estimator, trees)
        out.append((rep, float(ep.u_a.mean()), float(ep.a_correct.mean())))
    return out


def chunks(cfg: Config, key) -> Chunks:
    """Part 2: the Flax estimators (learning rates x seeds) in checkpointed chunks, logged."""
    net_key = jax.random.fold_in(key, NET_PROBLEM_KEY)
    problems, families = make_problems(cfg, net_key, 2**cfg.net_q, cfg.test_scale)
    static = train.NetTrainStatic(
        cfg.net_rounds, tuple(cfg.net_hidden), cfg.net_optimizer, cfg.net_best_response
    )
    hp = train.net_train_params([cfg.net_delta] * len(cfg.net_lrs), list(cfg.net_lrs))
    keys = jax.random.split(jax.random.fold_in(key, NET_INIT_KEY), cfg.seeds)
    every = min(cfg.net_checkpoint_every, cfg.net_rounds)
    n_chunks = -(-cfg.net_rounds // every)
    init, chunk_fn = train.grid_programs(static, every)
    grid = (len(cfg.net_lrs), cfg.seeds)
    nan = np.full((*grid, n_chunks * every), np.nan, np.float32)
    # the monitors' numpy host buffers (NetTrainLog's fields are typed jax.Array)
    empty = train.NetTrainLog(nan, nan, np.full(nan.shape, -1, np.int32))  # type: ignore[arg-type]

    def chunk(state, _c):
        trained, log, final = chunk_fn(hp, state["train"], families, problems, families.features)
        return {"train": trained, "final_max_adv": final}, {"net": log}

    def rows(c, state, _mon):
        done, final = min((c + 1) * every, cfg.net_rounds), state["final_max_adv"]
        row = {"net_round": done, "net_max_adv_worst": float(np.max(final))}
        return [(done, {**row, "net_max_adv_best": float(np.min(final))})]

    return Chunks(
        init_state={
            "train": init(hp, keys, problems, families.features),
            "final_max_adv": np.full(grid, np.nan, np.float32),
        },
        chunk=chunk,
        n_chunks=n_chunks,
        monitors={"net": empty},
        axis=2,
        log_rows=rows,
        setup=(problems, families),
        desc="Flax estimator training (chunks)",
    )


def net_run(cfg: Config, done) -> SimpleNamespace:
    """Part 2's training from the driver's result (axes: learning rate, seed, round)."""
    r, log = cfg.net_rounds, done.monitors["net"]
    return SimpleNamespace(
        state=done.state["train"],
        **{name: getattr(log, name)[:, :, :r] for name in ("max_adv", "dist_adv", "chosen")},
        final_max_adv=np.asarray(done.state["final_max_adv"]),
        resumed_from=min(done.restored * min(cfg.net_checkpoint_every, r), r),
        wall_s=sum(done.wall_s),
        chunks_run=done.ran,
    )


def host(cfg: Config, _seed, key, measured) -> dict:
    """Part 1's rows and traces, the networks beside tabular Algorithm 1."""
    rows, traces = algorithm1_table(cfg, measured, measured["extras"], key)
    net = net_run(cfg, measured["trained"])
    problems, families = measured["chunks_setup"]
    deltas = jnp.full((len(cfg.deltas),), cfg.net_delta, jnp.float32)
    _, tab = solve_grid(OGDStatic(trace_len=cfg.trace_len))(families, problems, deltas)
    final, state, tab = jax.device_get((net.final_max_adv, net.state, tab))  # one copy
    net_rows = [
        {
            "seed": s,
            "lr": lr,
            "delta": cfg.net_delta,
            "n_z": 2**cfg.net_q,
            "net_final_max_adv": float(final[g, s]),
            "net_rounds_to_delta": int(state.rounds_to_delta[g, s]),
            "net_updates": int(state.updates[g, s]),
            "tab_steps": int(tab.steps[s, 0]),
            "tab_max_adv": float(tab.max_adv[s, 0]),
        }
        for s in range(cfg.seeds)
        for g, lr in enumerate(cfg.net_lrs)
    ]
    return {"rows": rows, "traces": traces, "net": net, "net_rows": net_rows}


def sound_delta(cfg) -> float:  # Algorithm 1's delta in B's construction (spec PED 6.4)
    return cfg.sound_eta / (2 * cfg.sound_depth + 3)


def network_claim(cfg, rows, net) -> Claim:
    """The best learning rate's worst final max|Adv| < net_delta (a finding: no proven bound)."""
    by_lr = {lr: [r for r in rows if r["lr"] == lr] for lr in cfg.net_lrs}
    worst_by_lr = {lr: strict_max(r["net_final_max_adv"] for r in sel) for lr, sel in by_lr.items()}
    best_lr = min(worst_by_lr, key=lambda lr: nan_last(worst_by_lr[lr]))
    best, worst = by_lr[best_lr], worst_by_lr[best_lr]
    resumed = f"; resumed at round {net.resumed_from}" if net.resumed_from else ""
    broken = [lr for lr, w in worst_by_lr.items() if not math.isfinite(w)]
    resumed += f"; not finite at lr {broken}" if broken else ""
    return Claim.exact(
        f"Flax estimator trained by OGD reaches max|Adv| < delta = {cfg.net_delta:g} "
        f"(|Z| = {2**cfg.net_q}, best lr = {best_lr:g})",
        "network analogue of spec PED 5.3; no proven bound",
        f"< {cfg.net_delta:g}",
        worst,
        passed=worst < cfg.net_delta,
        note=f"{cfg.seeds} seeds; best response: {cfg.net_best_response}, {cfg.net_optimizer}; "
        f"rounds to delta {[r['net_rounds_to_delta'] for r in best]} (of {cfg.net_rounds}; "
        f"-1 = not reached); tabular steps {[r['tab_steps'] for r in best]}; network wall "
        f"{net.wall_s:.3f} s incl. compilation ({net.chunks_run} chunks{resumed})",
        finding=True,
    )


def payoff_tol(cfg) -> float:
    """How far two float32 computations of E[U_A] may differ: twice one's rounding, at most
    ``4 2^q + 12`` roundings (a softmax over 2^q outcomes, two dot products, the reward) on each
    of the d + 2 terms (weights r^k, each term at most r^k), their sum and the mean over trees."""
    scale = sum(cfg.sound_rho**-k for k in range(cfg.sound_depth + 2))
    ops = 4 * 2**cfg.sound_q + 12 + cfg.sound_depth + 2 + cfg.sound_trees
    return 2 * ops * 2.0**-24 * scale


def soundness_claims(cfg, name: str, u_proto: float, prs, u_construct, stages) -> list:
    """U_A <= rho^-(d+1) Pr[A correct] + eta (enumeration = construction) and E[R_k] <= 2 delta.

    ``prs``: Pr[A correct] by the protocol's enumeration (float32) and by the construction
    (float64); they agree to float32 rounding (three operations per tree, a mean over trees)."""
    d, rho, delta = cfg.sound_depth, cfg.sound_rho, sound_delta(cfg)
    pr, pr_construct = prs
    bound = rho ** -(d + 1) * pr + cfg.sound_eta
    pr_agree = abs(pr - pr_construct) <= (cfg.sound_trees + 3) * 2.0**-23
    agree = abs(u_proto - u_construct) <= payoff_tol(cfg) and pr_agree
    rounds = [s for s in stages if s.stage != "init"]  # k = d..1 (<= 2 delta) and 0 (<= delta)
    worst_round = strict_max(s.reward / s.bound for s in rounds)  # each against its own bound
    steps = [s.steps for s in stages if s.stage != "final"]
    exits = all(s.max_adv < delta for s in stages if s.stage != "final")
    return [
        Claim.exact(
            f"Soundness vs fixed A = {name}: U_A <= rho^-(d+1) Pr[A correct] + eta",
            "spec PED 6.4, 9.6 (Lemma A.4)",
            f"<= {bound:.4f}",
            u_proto,
            passed=u_proto <= bound and agree and exits,
            note=f"d = {d}, rho = {rho:g}, eta = {cfg.sound_eta:g}, delta = {delta:.4f}; "
            f"Pr[A correct] = {pr:.3f} (construction {pr_construct:.3f}); path enumeration "
            f"{u_proto:.6f} vs construction {u_construct:.6f} (within {payoff_tol(cfg):.1e}: "
            f"{abs(u_proto - u_construct):.1e}); Algorithm 1 steps per stage {steps}",
        ),
        Claim.exact(
            f"Soundness vs fixed A = {name}: per-round mean reward <= 2 delta (round 0: delta)",
            "spec PED 6.4 eq. (11)",
            f"largest E[R] / its bound <= 1 (2 delta = {2 * delta:.4f}, round 0: {delta:.4f})",
            worst_round,
            passed=worst_round <= 1,  # a NaN fails
            note="E[R] by stage: " + ", ".join(f"{s.stage}: {s.reward:.4f}" for s in stages),
        ),
    ]


def trace_figure(curves, delta, title, xlabel):
    """Problem 0's advantage traces (``curves``: ``(label, trace)``) against delta."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, tr in curves:
        ax.plot(tr[~np.isnan(tr)], label=label)
    ax.axhline(delta, color="k", ls="--", label=f"delta = {delta:g}")
    ax.set(xlabel=xlabel, ylabel="max_f |Adv_f(h)|", yscale="log", title=title)
    ax.legend()
    fig.tight_layout()
    return fig


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The three parts' claims and tables from :func:`host`'s numbers, and the figures."""
    rows, net, net_rows = host["rows"], host["net"], host["net_rows"]
    claims = [*algorithm1_claims(cfg, rows), network_claim(cfg, net_rows, net)]
    sound_rows = []
    for name, (rep, u_proto, pr) in zip(cfg.sound_provers, measured["side"]):
        claims += soundness_claims(cfg, name, u_proto, (pr, rep.pr_correct), rep.u_a, rep.stages)
        sound_rows += [
            {"prover": name, **dataclasses.asdict(s), "delta": sound_delta(cfg)} for s in rep.stages
        ]
    q = cfg.net_q if cfg.net_q in cfg.q_values else cfg.q_values[-1]  # the traces' |Z|, delta
    delta = min(cfg.deltas)
    tab = [(f"tabular, {r} step", host["traces"][(r, q, delta)]) for r in cfg.step_rules]
    nets = [(f"network, lr = {lr:g}", net.max_adv[g, 0]) for g, lr in enumerate(cfg.net_lrs)]
    metrics = {
        "max_steps": max(r["steps"] for r in rows),
        "max_steps_over_hazan_bound": max(r["steps"] / r["bound_hazan"] for r in rows),
        "max_steps_over_tight_bound": max(r["steps"] / r["bound_tight"] for r in rows),
        "max_exit_adv_over_delta": strict_max(  # as the exit row: float32 or float64, NaN wins
            np.maximum(r["max_adv"], r["max_adv_numpy"]) / r["delta"] for r in rows
        ),
        "network_timing": {
            "net_wall_s": net.wall_s,
            "net_chunks_run": net.chunks_run,
            "net_resumed_from_round": net.resumed_from,
        },
    }
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        tables={"algorithm1": rows, "network": net_rows, "soundness": sound_rows},
        figures={
            "advantage_trace": trace_figure(
                tab, delta, f"Algorithm 1 advantage trace (|Z| = {2**q}, seed 0)", "step t"
            ),
            "network_advantage_trace": trace_figure(
                nets, cfg.net_delta, f"Flax estimator trace (|Z| = {2**cfg.net_q}, seed 0)", "round"
            ),
            "steps_vs_bound": steps_figure(cfg, rows),
        },
    )
