"""OI estimator construction (spec PED 5-6): Algorithm 1, a Flax estimator, soundness.

1. **Algorithm 1** (spec PED 5.3) on random problems for every |Z|, step rule and delta, over
   seeds: the iteration bounds (spec PED 5.5), exit below delta, the regret bound (spec PED 5.4)
   and a finding, whether the exit h generalises to fresh tests. :func:`point` is the swept
   function (``DYNAMIC``: deltas, the tests' scale); a run evaluates it as a sweep's one point.
2. **Flax estimator** (spec PED 10) trained by OGD against the worst test per round, against the
   tabular algorithm on the same problems; trained in checkpointed chunks by the lab's driver.
3. **Soundness** (spec PED 6, 9.6): B built by Algorithm 1 against fixed provers A; A's exact
   payoff must satisfy U_A <= rho^-(d+1) Pr[A correct] + eta and each round's reward <= 2 delta.

Parts, keys and run order: docs/prover-estimator-debate.md, spec PED 9.8. Library code:
:mod:`.algorithm1`, :mod:`.network`, :mod:`.provers`; the rows :mod:`.claims`, the figures
:mod:`.figures`.
"""

from __future__ import annotations

import numpy as np

from dedebate.estimators.ogd import STEP_RULES, OGDStatic, solve_grid
from dedebate.estimators.train import BEST_RESPONSES
from dedebate.lab.experiment import Chunks, ExperimentResult
from dedebate.lab.params import config_dataclass, param

from .algorithm1 import FRESH_FACTOR, algorithm1_grid, algorithm1_table
from .claims import RECOMPUTE_TOL as RECOMPUTE_TOL  # read by the tests
from .claims import algorithm1_claims, network_claim, sound_delta, soundness_claims
from .figures import plot_steps, plot_traces
from .figures import sweep_figures as sweep_figures  # the lab's sweep hook
from .network import (
    comparison_rows,
    net_run,
    net_training,
    tabular_inputs,
)
from .problems import TRUTHS
from .provers import (
    PROVERS,
    against_fixed_prover,
    soundness_trees,
    stage_rows,
)

NAME = "ogd_estimator"
TITLE = "OI estimator construction: Algorithm 1 bound, Flax estimator, soundness against fixed A"
TYPICAL_SECONDS = 38  # a cold default-size run on two CPU cores (reproduce's order of work)


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
    test_scale: float = param(3.0, "weight scale of the tanh tests", gt=0.0)
    truth: str = param("softmax", "truth g", choices=TRUTHS)
    seeds: int = param(4, "random problems per (|Z|, delta) point", ge=1, le=256)
    step_rules: tuple[str, ...] = param(
        ("hazan", "tight"),
        "Algorithm 1 step rules: hazan: eta_t = 1/sqrt(|Z| t) "
        "(T <= 36|Z|/delta^2); tight: sqrt(2/(|Z| t)) (T <= 4.5|Z|/delta^2)",
        choices=tuple(STEP_RULES),
        min_len=1,
        max_len=len(STEP_RULES),
    )
    trace_len: int = param(4096, "advantage-trace buffer length per run", ge=2, le=65_536)
    net_q: int = param(2, "q of the network-vs-tabular comparison", ge=1, le=5)
    net_delta: float = param(0.05, "delta of the network-vs-tabular comparison", gt=0.0, le=1.0)
    net_lrs: tuple[float, ...] = param(
        (1.0, 3.0), "estimator learning rates (one vmapped grid)", gt=0.0, min_len=1, max_len=64
    )
    net_rounds: int = param(300, "estimator training rounds", ge=1, le=100_000)
    net_hidden: tuple[int, ...] = param(
        (32,), "estimator MLP hidden widths", ge=1, le=4096, min_len=1, max_len=8
    )
    net_optimizer: str = param("sgd", "sgd (lr / sqrt(t), OGD) or adam", choices=("sgd", "adam"))
    net_best_response: str = param(
        "family",
        "family: each round the test of F with the largest |Adv|; family+mlp: also an "
        "MLP distinguisher trained by Adam ascent on |Adv|, warm-started across rounds",
        choices=BEST_RESPONSES,
    )
    net_checkpoint_every: int = param(
        100,
        "estimator rounds per chunk: the training state is checkpointed (Orbax) after every chunk",
        ge=1,
        le=100_000,
    )
    sound_provers: tuple[str, ...] = param(
        tuple(PROVERS),
        "fixed provers A ([] skips the part)",
        choices=tuple(PROVERS),
        max_len=len(PROVERS),
    )
    sound_trees: int = param(4, "hidden-flaw trees (inputs x, mu uniform)", ge=1, le=1024)
    sound_depth: int = param(2, "tree depth d (rounds k = d..1 plus the human check)", ge=1, le=4)
    sound_q: int = param(3, "tree width q", ge=2, le=4)
    sound_rho: float = param(2.0, "stability parameter rho (reward weights r^k, r = 1/rho)", ge=1.0)
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
        "sound_provers": ("obfuscating",),
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
    """Peak bytes of a run, by part (float32 = 4 bytes; the lab refuses a run over its memory
    limit, dedebate/lab/memory.py): part 1's problems ``[S, F, X]`` and ``[S, X, Z]`` per q and
    its states ``[S, J, X, Z]`` and traces per (q, rule) (a while loop holds two), its float64
    recheck ``[X, Z, FRESH_FACTOR F]`` (and its tanh), the networks' parameters, gradients,
    optimizer moments and activations per (lr, seed) lane, and the tabular comparison."""
    s, j, x, d, f, t = (
        cfg.seeds,
        len(cfg.deltas),
        cfg.n_x,
        cfg.n_features,
        cfg.n_tests,
        cfg.trace_len,
    )

    def problems(z):
        return 4 * s * (x * (1 + z + d) + f * (d + 2 * z + 2 + x))

    def states(z):
        return 2 * 4 * s * j * (x * z + f + 2 * t)

    zs = [2**q for q in cfg.q_values]
    widths = [d, *cfg.net_hidden, 2**cfg.net_q]
    params = sum((a + 1) * b for a, b in zip(widths, widths[1:]))
    lanes, moments = len(cfg.net_lrs) * s, 2 if cfg.net_optimizer == "adam" else 0
    rounds = -(-cfg.net_rounds // min(cfg.net_checkpoint_every, cfg.net_rounds)) * min(
        cfg.net_checkpoint_every, cfg.net_rounds
    )
    return {
        "Algorithm 1 problems": sum(problems(z) for z in zs),
        "Algorithm 1 states and traces": len(cfg.step_rules) * sum(states(z) for z in zs),
        "float64 recheck of the exit h": 2 * 8 * x * max(zs) * FRESH_FACTOR * f,
        "estimator networks": 4
        * lanes
        * ((2 + moments) * params + 3 * x * sum(widths) + 2 * 3 * rounds),
        "tabular comparison": problems(2**cfg.net_q) + states(2**cfg.net_q),
    }


# ---- part 1: Algorithm 1, the swept function ----------------------------------------------------
DYNAMIC = ("deltas", "test_scale")
"""Fields that enter :func:`point` only as numbers (points of one sweep group need equally many
deltas); every other field of part 1 is a shape or a choice: static, one compile per value."""


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)``; ``fn(dynamic, key)`` is
    :func:`.algorithm1.algorithm1_grid`'s ``(metrics, extras)`` (a sweep
    keeps the metrics; the report also reads the extras: problems, exit h, traces)."""
    dynamic = {
        "deltas": np.asarray(cfg.deltas, np.float32),
        "test_scale": np.asarray(cfg.test_scale, np.float32),
    }
    return dynamic, lambda dyn, key: algorithm1_grid(cfg, dyn["deltas"], dyn["test_scale"], key)


# ---- the host parts: soundness (beside part 1), the network (the lab's chunked driver), tabular --
def side(cfg: Config, _seed, key) -> list:
    """Part 3, run by the lab beside part 1: per fixed prover, B built by Algorithm 1 against it
    and A's exact payoffs (``(report, payoff)``)."""
    trees = soundness_trees(key, cfg.sound_trees, cfg.sound_depth, cfg.sound_q)
    return [
        against_fixed_prover(name, trees, cfg.sound_rho, sound_delta(cfg))
        for name in cfg.sound_provers
    ]


def chunks(cfg: Config, key) -> Chunks:
    """Part 2: the Flax estimators' training grid (:func:`net_training`) in chunks of
    ``net_checkpoint_every`` rounds, a log row after each (step = rounds done)."""
    tr = net_training(cfg, key)

    def chunk(state, _c):
        train, log, final = tr.chunk_fn(tr.hp, state["train"], *tr.data)
        return {"train": train, "final_max_adv": final}, {"net": log}

    def rows(c, state, _mon):
        done, final = min((c + 1) * tr.chunk_len, cfg.net_rounds), state["final_max_adv"]
        return [
            (
                done,
                {
                    "net_round": done,
                    "net_max_adv_worst": float(np.max(final)),
                    "net_max_adv_best": float(np.min(final)),
                },
            )
        ]

    return Chunks(
        init_state=tr.init_state,
        chunk=chunk,
        n_chunks=tr.n_chunks,
        monitors=tr.monitors,
        axis=2,
        keep=2,
        log_rows=rows,
        setup=tr,
        desc="Flax estimator training (chunks)",
    )


def host(cfg: Config, _seed, key, measured) -> dict:
    """Part 1's rows and traces with their float64 rechecks (:func:`algorithm1_table`), the
    trained network against the tabular runs on its problems, and part 3's numbers."""
    row = {
        k: v for k, v in measured.items() if k not in ("extras", "trained", "chunks_setup", "side")
    }
    rows, traces = algorithm1_table(cfg, row, measured["extras"], key)
    net = net_run(cfg, measured["chunks_setup"], measured["trained"])
    _, tab_summary = solve_grid(OGDStatic(trace_len=cfg.trace_len))(*tabular_inputs(cfg, key))
    sound = [
        (name, rep, float(ep.u_a.mean()), float(ep.a_correct.mean()))
        for name, (rep, ep) in zip(cfg.sound_provers, measured["side"])
    ]
    return {
        "rows": rows,
        "traces": traces,
        "net": net,
        "net_rows": comparison_rows(cfg, net, tab_summary),
        "sound": sound,
    }


def report(cfg: Config, _measured, host) -> ExperimentResult:
    """Part 1's, 2's and 3's rows from :func:`host`'s numbers, the traces and steps figures."""
    rows, net, net_rows = host["rows"], host["net"], host["net_rows"]
    timing = {
        "net_wall_s": net.wall_s,
        "net_chunks_run": net.chunks_run,
        "net_resumed_from_round": net.resumed_from,
        "net_runs": cfg.seeds * len(cfg.net_lrs),
        "tab_runs": cfg.seeds * len(cfg.deltas),
    }
    sound_claims, sound_rows = [], []
    for name, rep, u_proto, pr in host["sound"]:
        sound_claims += soundness_claims(cfg, name, u_proto, pr, rep.u_a, rep.stages)
        sound_rows += stage_rows(name, rep, sound_delta(cfg))
    claims = [
        *algorithm1_claims(cfg, rows),
        network_claim(cfg, net_rows, net, timing),
        *sound_claims,
    ]
    fig_trace, fig_net = plot_traces(cfg, host["traces"], net_rows)
    net_table = [{k: v for k, v in r.items() if k != "net_trace"} for r in net_rows]
    metrics = {
        "max_steps": max(r["steps"] for r in rows),
        "max_steps_over_hazan_bound": max(r["steps"] / r["bound_hazan"] for r in rows),
        "max_steps_over_tight_bound": max(r["steps"] / r["bound_tight"] for r in rows),
        "max_exit_adv_over_delta": max(r["max_adv"] / r["delta"] for r in rows),
        "network": net_table,
        "network_timing": timing,
    }
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        tables={"algorithm1": rows, "network": net_table, "soundness": sound_rows},
        figures={
            "advantage_trace": fig_trace,
            "network_advantage_trace": fig_net,
            "steps_vs_bound": plot_steps(cfg, rows),
        },
    )
