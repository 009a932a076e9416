"""Deterministic debate: Figure 3 / Theorem 5.1, Figure 4 / Theorem 5.3, Figure 2+4 / Theorem 7.1.

Spec DED 6, 7, 8; what each part checks and why is spec DED 8.3.

1. Exact completeness and soundness on random machines (complement pairs) against the strategy
   zoos, every claimed transcript at ``check_T`` and, for Figure 3, every message sequence of a
   3-step machine.
2. The witness variant on two NP^O task families (every witness enumerated; host only).
3. Bits V reads, V's oracle queries and the honest provers' steps against ``T = 2^e``, checked as
   a T-independent band ``bits / (S log T)``, ``bits / ((l + 2) log T)`` in [1, 2].
4. A side-by-side table of Figure 3 and Figure 4.

Sweepable: parts 1 and 3 are :func:`point`'s ``fn`` over the grids of :func:`inputs` (built on
the host); ``oracle_frac`` is dynamic, T and every size static; a run is the one-point case.
Part 2 is :func:`host`; :func:`report` turns the numbers into the claims.
"""

from __future__ import annotations

import jax
import numpy as np

from dedebate.agents.deterministic_grids import GRID_PLAY, judged_counts, witness_suite
from dedebate.agents.deterministic_players import JUDGED
from dedebate.lab.experiment import ExperimentResult
from dedebate.lab.params import config_dataclass, param
from dedebate.machines.configurations import clog2
from dedebate.programs import FASTEST_COMPILE, cpu_only
from dedebate.protocols.det_witness import constraint_task, plan_task

from .claims import Measured, claim_rows
from .population import (
    EXHAUSTIVE_S,
    EXHAUSTIVE_SEQUENCES,
    PROTOCOL_FAMILIES,
    Population,
    cost_table,
    exhaustive_fig3_grid,
    play_families,
    side_by_side,
)

NAME = "deterministic_debate"
TITLE = (
    "Deterministic debate: binary search (Thm 5.1), cross-examination (Thm 5.3), witness (Thm 7.1)"
)
TYPICAL_SECONDS = 32  # a cold default-size run on two CPU cores (reproduce's order of work)

COMPILE_OPTIONS = cpu_only(FASTEST_COMPILE)
"""XLA options of the swept program (run and sweep alike): on a CPU, optimisation level 0,
since compile time dominates these grids there; XLA's defaults on accelerators. The debates
are integer counts, so the options change compile time only, never a number."""


@config_dataclass
class Config:
    n_machines: int = param(
        16, "random machines per T (complement pairs: half output 1)", ge=2, le=512, multiple_of=2
    )
    n_inputs: int = param(4, "input bits n of every random machine", ge=0, le=16)
    deps: tuple[int, ...] = param(
        (2, 4, 6),
        "|I(t)| = l of the population's machines (cycled)",
        ge=1,
        le=8,
        min_len=1,
        max_len=16,
    )
    dep_window: int = param(
        8, "a step reads only inputs and the last dep_window steps", ge=1, le=2**16
    )
    window: int = param(
        8,
        "register configuration buffer W for Fig 3 (>= dep_window; the "
        "smallest cost-sweep T = 2^e must be >= W)",
        ge=1,
        le=2**16,
    )
    oracle_frac: float = param(0.3, "fraction of ORACLE steps (the rest are DET)", ge=0.0, le=1.0)
    check_T: int = param(11, "T of the exhaustive checks (every claimed transcript)", ge=2, le=14)
    fixed_bob_max_T: int = param(
        64,
        "try every fixed B (each step / each bit pattern) when T <= this (2^16, the largest "
        "cost-sweep T, means always)",
        ge=0,
        le=2**16,
    )
    n_random: int = param(4, "random B strategies and random liars per family", ge=0, le=64)
    cost_log2: tuple[int, ...] = param(
        (4, 6, 8, 10, 12),
        "cost sweep over T = 2^e for these e (2^e >= window and >= n_inputs)",
        ge=3,
        le=16,
        min_len=1,
        max_len=16,
    )
    exhaustive_fig3: bool = param(
        True, "every Fig 3 message sequence of a 3-step machine (T=3, W=2, n=1: 2^15 of them)"
    )
    witness_instances: int = param(
        8, "instances per NP^O task family (plans, constraints), half yes", ge=1, le=64
    )

    def __post_init__(self):
        if self.window < self.dep_window:
            raise ValueError(f"window={self.window}: must be >= dep_window={self.dep_window}")
        if 2 ** min(self.cost_log2) < max(self.window, self.n_inputs):
            raise ValueError(
                f"cost_log2={self.cost_log2!r}: the smallest T = 2^e must be >= "
                f"window={self.window} and >= n_inputs={self.n_inputs}"
            )


SIZES = {
    # quick: T = 8 (exhaustive, and W = T so both Fig 3 variants share one compilation) and 16
    "quick": {
        "n_machines": 4,
        "deps": (2, 4),
        "dep_window": 4,
        "check_T": 8,
        "cost_log2": (3, 4),
        "n_random": 2,
        "witness_instances": 4,
        "fixed_bob_max_T": 16,
    },
    "full": {
        "n_machines": 32,
        "check_T": 14,
        "cost_log2": tuple(range(4, 17)),
        "n_random": 8,
        "witness_instances": 32,
    },
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run (dedebate/lab/memory.py): the judged grids of every T of section 1
    (:func:`grid_bytes`; the program holds them all) and Figure 3's exhaustive grid (~10 MiB)."""
    return {
        "judged grids": sum(grid_bytes(cfg, T) for T in _Ts(cfg)[1]),
        "Figure 3's exhaustive grid": 10 * 2**20 * cfg.exhaustive_fig3,
    }


def grid_bytes(cfg: Config, T: int) -> int:
    """Bytes of one T's grids and their play: per machine, ``5.5 T + 52`` for each strategy pair
    of each family (the zoos of :func:`~dedebate.agents.deterministic_players.zoo_pairs`) and
    ``T (4 + 1.5 * 2^max(deps))`` for each family's machine tables (fitted to XLA's buffers on a
    CPU, within 5% from T = 8 to 4096)."""
    fixed = T <= cfg.fixed_bob_max_T
    pairs = 18 + 3 * cfg.n_random + (2**T if T == cfg.check_T else 0)
    fig3 = (1 + (cfg.window < T)) * (pairs + 16 + (2 ** clog2(T) if fixed else 0))
    families = 2 + (cfg.window < T)
    return int(
        cfg.n_machines
        * (
            (pairs + (T if fixed else 0) + fig3) * (5.5 * T + 52)
            + families * T * (4 + 1.5 * 2 ** max(cfg.deps))
        )
    )


def _Ts(cfg):
    """``(cost_T, all_T)``: the cost sweep's T = 2^e and every T of section 1 (with check_T)."""
    cost_T = [2**e for e in sorted(set(cfg.cost_log2))]
    return cost_T, sorted(set(cost_T) | {cfg.check_T})


def inputs(cfg: Config, seed: int, key):
    """The debate grids of one run, built on the host: at the j-th T of section 1, the
    population's grids (:meth:`Population.grids` with seed ``seed + j`` and key
    ``fold_in(key, j)``; every claimed transcript at ``check_T``); with ``exhaustive_fig3``, every
    Figure 3 message sequence of four 3-step machines (seed ``seed + 1000``)."""
    pop = Population.of(cfg)
    out = {
        f"T{T}": pop.grids(T, seed + j, jax.random.fold_in(key, j), T == cfg.check_T)
        for j, T in enumerate(_Ts(cfg)[1])
    }
    if cfg.exhaustive_fig3:
        out["fig3_exhaustive"] = exhaustive_fig3_grid(seed + 1000, cfg.oracle_frac)
    return out


DYNAMIC = ("oracle_frac",)
"""Config fields a sweep may vary within one compiled program: ``oracle_frac``, which enters only
through :func:`inputs` (which steps of the host-drawn machines are ORACLE) and changes no shape.
T (``cost_log2``, ``check_T``), the population and zoo sizes, ``deps``, ``dep_window``,
``window``, ``fixed_bob_max_T`` and ``exhaustive_fig3`` set shapes or the cost table's l groups:
static."""


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)``; ``fn(dynamic, key, inputs)`` is pure JAX over the grids
    of :func:`inputs` (``key`` is unused: the randomness is in the host-built grids). Metrics
    (int32): :func:`play_families`' ``T{T}/F/...`` judged counts for every T of section 1 and
    cost rows ``T{T}/F/l{l}/...`` for every T of the cost sweep, and with ``exhaustive_fig3``
    the judged counts ``fig3_exhaustive/...``. :func:`report` reports from exactly these
    numbers."""
    cost_T, all_T = _Ts(cfg)
    pop = Population.of(cfg)
    dynamic = {"oracle_frac": np.asarray(cfg.oracle_frac, np.float32)}
    groups = {T: pop.cost_groups(T) for T in cost_T}
    S = {T: {fam: pop.fig3_S(T, fam) for fam in PROTOCOL_FAMILIES[1:]} for T in all_T}
    exhaustive = cfg.exhaustive_fig3

    def fn(dyn, key, host):
        del dyn, key  # oracle_frac and the randomness enter through the host-built grids
        out = {}
        for T in all_T:
            out.update(play_families(host[f"T{T}"], groups.get(T, {}), S[T], f"T{T}"))
        if exhaustive:
            g = host["fig3_exhaustive"]
            res = GRID_PLAY["fig3"](g["machines"], g["A"], g["B"])
            out.update({f"fig3_exhaustive/{k}": v for k, v in judged_counts(res, g).items()})
        return out

    return dynamic, fn


# -- plots ----------------------------------------------------------------------------------------
def _plot(rows, ls):
    """Bits V reads (Fig 3 honest, Fig 4 worst over the zoo) within the claims' bands
    [1, 2] x S log2 T and [1, 2] x (l+2) log2 T, and the honest provers' steps under 2T."""
    from matplotlib.figure import Figure  # no pyplot: nothing global to close

    fig = Figure(figsize=(11, 4.2))
    ax1, ax2 = fig.subplots(1, 2)
    curves = [
        (
            f"Fig 3, {what}",
            "configurations",
            "bits_read",
            "S log2 T",
            style,
            [x for x in rows if x["protocol"] == proto and x["l"] == ls[0]],
        )
        for proto, style, what in (
            ("fig3_full", "s-", "full-tape"),
            ("fig3_window", "o-", "register"),
        )
    ]
    curves += [
        (
            f"Fig 4, l = {l}",
            "(worst over the zoo)",
            "bits_read_max_over_zoo",
            "(l+2) log2 T",
            "^--",
            [x for x in rows if x["protocol"] == "fig4" and x["l"] == l],
        )
        for l in ls
    ]
    for name, what, key, unit, style, r in curves:
        T = [x["T"] for x in r]
        (line,) = ax1.plot(T, [x[key] for x in r], style, label=f"{name} {what}")
        unit_bits = np.array([(x["S"] if unit == "S log2 T" else x["l"] + 2) * x["m"] for x in r])
        ax1.fill_between(
            T,
            unit_bits,
            2 * unit_bits,
            color=line.get_color(),
            alpha=0.12,
            label=f"{name}: the claim's band [1, 2] x {unit}",
        )
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xlabel("T (steps)")
    ax1.set_ylabel("bits V reads")
    ax1.legend(fontsize=6)
    ax1.set_title("Verifier cost")
    for proto, key, style in (
        ("fig3_full", "b_steps", "s-"),
        ("fig3_full", "a_steps", "o-"),
        ("fig4", "b_steps", "^--"),
    ):
        r = [x for x in rows if x["protocol"] == proto and x["l"] == max(ls)]
        ax2.plot(
            [x["T"] for x in r],
            [x[key] for x in r],
            style,
            label=f"{'Fig 3' if proto != 'fig4' else 'Fig 4'} {key[0].upper()} steps",
        )
    T_all = sorted({x["T"] for x in rows})
    ax2.plot(T_all, [2 * T for T in T_all], "k:", lw=1, label="2T (the claim: steps / T <= 2)")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log", base=2)
    ax2.set_xlabel("T (steps)")
    ax2.set_ylabel("steps simulated by the honest prover")
    ax2.legend(fontsize=7)
    ax2.set_title("Honest prover work")
    fig.tight_layout()
    return fig


def sweep_figures(rows):
    """``deterministic_costs``: the figure of a run (bits V reads and honest prover steps against
    T) from the first sweep row of each static group, i.e. of each ``cost_log2`` value (the costs
    of the honest debates do not depend on the seed or ``oracle_frac``)."""
    table, seen = [], set()
    for r in rows:
        for c in cost_table(r):
            if (c["T"], c["protocol"], c["l"]) not in seen:
                seen.add((c["T"], c["protocol"], c["l"]))
                table.append(c)
    table.sort(key=lambda c: (c["T"], PROTOCOL_FAMILIES.index(c["protocol"]), c["l"]))
    return {"deterministic_costs": _plot(table, sorted({c["l"] for c in table}))} if table else {}


# -- the experiment --------------------------------------------------------------------------------
def host(cfg: Config, seed: int, key, measured) -> dict[str, dict]:
    """Part 2 on the host: the witness tasks' summaries
    (:func:`~dedebate.agents.deterministic_grids.witness_suite`), instances from ``seed + 2000``
    (plans) and ``seed + 3000`` (constraints), the zoo from ``fold_in(key, 10_000 + i)``."""
    del measured
    tasks = (
        ("plan", plan_task(seed + 2000, cfg.witness_instances)),
        ("constraints", constraint_task(seed + 3000, cfg.witness_instances)),
    )
    return {
        name: witness_suite(
            task,
            Population.of(cfg).pairs(
                task.program.T, jax.random.fold_in(key, 10_000 + i), "cross_exam"
            ),
        )
        for i, (name, task) in enumerate(tasks)
    }


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The claims of the point's row (parts 1 and 3) and the witness summaries (part 2)."""
    cost_T, all_T = _Ts(cfg)
    stats = {
        fam: [{k: measured[f"T{T}/{fam}/{k}"] for k in JUDGED + ("v_queries_max",)} for T in all_T]
        for fam in PROTOCOL_FAMILIES
    }
    ex3 = None
    if cfg.exhaustive_fig3:
        ex3 = {
            k.split("/", 1)[1]: v
            for k, v in measured.items()
            if k.startswith("fig3_exhaustive/") and not k.endswith("_sound")
        }
        ex3 |= {"S": EXHAUSTIVE_S, "sequences": EXHAUSTIVE_SEQUENCES}
    table = cost_table(measured)
    m = Measured(
        all_T=all_T,
        cost_T=cost_T,
        stats=stats,
        ex_T={fam: dict(st[all_T.index(cfg.check_T)]) for fam, st in stats.items()},
        ex3=ex3,
        wit=host,
        table=table,
    )
    claims, metrics = claim_rows(cfg, m)
    ls_all = sorted({r["l"] for r in table if r["protocol"] == "fig4"})
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        tables={"costs": table, "fig3_vs_fig4": side_by_side(table)},
        figures={"deterministic_costs": _plot(table, ls_all)},
    )
