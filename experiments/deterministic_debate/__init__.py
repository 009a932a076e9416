"""Deterministic debate: Fig 3 / Thm 5.1, Fig 4 / Thm 5.3, Fig 2+4 / Thm 7.1 (spec DED 6-8.3)."""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from dedebate.agents.deterministic_grids import GRID_PLAY, judged_counts, witness_suite
from dedebate.agents.deterministic_players import JUDGED, merge_judged
from dedebate.core.stats import finite_linfit, finite_loglog_slope
from dedebate.lab.experiment import Claim, ExperimentResult, strict_max, strict_min
from dedebate.lab.params import config_dataclass, param
from dedebate.machines.configurations import clog2
from dedebate.programs import FASTEST_COMPILE, cpu_only
from dedebate.protocols.det_witness import constraint_task, plan_task

from . import population as pop
from .population import PROTOCOL_FAMILIES, col, cost_table

NAME = "deterministic_debate"
TITLE = (
    "Deterministic debate: binary search (Thm 5.1), cross-examination (Thm 5.3), witness (Thm 7.1)"
)
TYPICAL_SECONDS = 32  # a cold default-size run on two CPU cores (reproduce's order of work)

# integer counts: the options change compile time only (level 0 on a CPU, where it dominates)
COMPILE_OPTIONS = cpu_only(FASTEST_COMPILE)


@config_dataclass
class Config:
    n_machines: int = param(16, "random machines per T, half output 1", ge=2, le=512, multiple_of=2)
    n_inputs: int = param(4, "input bits n of every random machine", ge=0, le=16)
    deps: tuple[int, ...] = param(
        (2, 4, 6), "|I(t)| = l (cycled)", ge=1, le=8, min_len=1, max_len=16, distinct=False
    )
    dep_window: int = param(8, "a step reads inputs and the last dep_window steps", ge=1, le=2**16)
    window: int = param(8, "Fig 3's register buffer W (>= dep_window)", ge=1, le=2**16)
    oracle_frac: float = param(0.3, "fraction of ORACLE steps (the rest are DET)", ge=0.0, le=1.0)
    check_T: int = param(11, "T of the exhaustive checks (every claimed transcript)", ge=2, le=14)
    fixed_bob_max_T: int = param(64, "try every fixed B when T <= this", ge=0, le=2**16)
    n_random: int = param(4, "random B strategies and random liars per family", ge=0, le=64)
    cost_log2: tuple[int, ...] = param(
        (4, 6, 8, 10, 12), "cost sweep T = 2^e (>= window)", ge=3, le=16, min_len=1, max_len=16
    )
    exhaustive_fig3: bool = param(True, "every Fig 3 message sequence of a 3-step machine (2^15)")
    witness_instances: int = param(
        8, "instances per NP^O task family, half yes (at least one no)", ge=2, le=64
    )

    def __post_init__(self):
        if self.window < self.dep_window:
            raise ValueError(f"window={self.window}: must be >= dep_window={self.dep_window}")
        if 2 ** min(self.cost_log2) < max(self.window, self.n_inputs):
            raise ValueError(f"cost_log2={self.cost_log2!r}: 2^e must be >= window and n_inputs")


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
    """Peak bytes of a run: the judged grids of every T (held together) and Fig 3's exhaustive."""
    grids = sum(grid_bytes(cfg, T) for T in _Ts(cfg)[1])
    return {"judged grids": grids, "Figure 3's exhaustive grid": 10 * 2**20 * cfg.exhaustive_fig3}


def grid_bytes(cfg: Config, T: int) -> int:
    """Bytes of one T's grids and their play (fitted to XLA's buffers on a CPU, T = 8..4096)."""
    fixed = T <= cfg.fixed_bob_max_T
    pairs = 18 + 3 * cfg.n_random + (2**T if T == cfg.check_T else 0)
    fig3 = (1 + (cfg.window < T)) * (pairs + 16 + (2 ** clog2(T) if fixed else 0))
    tables = (2 + (cfg.window < T)) * T * (4 + 1.5 * 2 ** max(cfg.deps))  # per family
    return int(cfg.n_machines * ((pairs + (T if fixed else 0) + fig3) * (5.5 * T + 52) + tables))


def _Ts(cfg):  # (cost_T, all_T): the cost sweep's T = 2^e, and those with check_T
    cost_T = [2**e for e in sorted(set(cfg.cost_log2))]
    return cost_T, sorted(set(cost_T) | {cfg.check_T})


def host_seed(seed: int, *purpose: int) -> int:
    """numpy's seed for one use of a run's seed (``seed + j`` made seeds s and s + 1 overlap)."""
    return int(np.random.SeedSequence([seed, *purpose]).generate_state(1, np.uint64)[0])


def inputs(cfg: Config, seed: int, key):
    """The debate grids of a run (host): the j-th T's from ``host_seed(seed, 0, j)`` and
    ``fold_in(key, j)``."""
    out = {
        f"T{T}": pop.grids(
            cfg, T, host_seed(seed, 0, j), jax.random.fold_in(key, j), T == cfg.check_T
        )
        for j, T in enumerate(_Ts(cfg)[1])
    }
    if cfg.exhaustive_fig3:
        out["fig3_exhaustive"] = pop.exhaustive_fig3_grid(host_seed(seed, 1), cfg.oracle_frac)
    return out


DYNAMIC = ("oracle_frac",)  # enters only through the host-drawn machines; the rest sets shapes


def point(cfg: Config):
    """``(dynamic, fn)``: judged counts per T and family, costs per l at the cost sweep's T."""
    cost_T, all_T = _Ts(cfg)
    groups = {T: pop.cost_groups(cfg, T) for T in cost_T}
    S = {T: {fam: pop.fig3_S(cfg, T, fam) for fam in PROTOCOL_FAMILIES[1:]} for T in all_T}

    def fn(dyn, key, host):
        del dyn, key  # oracle_frac and the randomness enter through the host-built grids
        out = {}
        for T in all_T:
            out.update(pop.play_families(host[f"T{T}"], groups.get(T, {}), S[T], f"T{T}"))
        if cfg.exhaustive_fig3:
            g = host["fig3_exhaustive"]
            res = GRID_PLAY["fig3"](g["machines"], g["A"], g["B"])
            out.update({f"fig3_exhaustive/{k}": v for k, v in judged_counts(res, g).items()})
        return out

    return {"oracle_frac": np.asarray(cfg.oracle_frac, np.float32)}, fn


# -- claims ----------------------------------------------------------------------------------------
SRC_53 = "spec DED 6 (Fig 4 / Thm 5.3)"
SRC_51 = "spec DED 7 (Fig 3 / Thm 5.1)"
SRC_71 = "spec DED 8 (Fig 2+4 / Thm 7.1)"
LABELS = {
    "fig4": ("Fig 4 cross-examination", SRC_53),
    "fig3_window": ("Fig 3 binary search, register configurations", SRC_51),
    "fig3_full": ("Fig 3 binary search, full-tape configurations", SRC_51),
}
ZOO_RATES = (
    ("comp", "completeness = 1 (honest A vs every B of the zoo)"),
    ("sound", "soundness = 0 (every A of the zoo vs honest B)"),
)
WITNESS_RATES = (
    ("comp", "completeness = 1 over every valid witness and every B of the zoo"),
    ("sound", "soundness = 0 over every witness of every no-instance"),
)


@dataclasses.dataclass
class Measured:
    """Judged counts per family and T, at check_T, of Fig 3's exhaustive adversary, witnesses."""

    all_T: list[int]
    cost_T: list[int]
    stats: dict[str, list[dict]]
    ex_T: dict[str, dict]
    ex3: dict | None
    wit: dict[str, dict]
    table: list[dict]


def _rate(st, side, claim, src, note, least=1):
    # completeness (side "comp") == 1 or soundness == 0, over at least `least` debates (what an
    # exhaustive row must have covered)
    n = st[f"{side}_debates"]
    r, want = st[f"{side}_accepts"] / max(n, 1), 1.0 if side == "comp" else 0.0
    if n < least:
        note = f"{note}; FAIL: {n} debates, fewer than the {least} it must cover"
    return Claim.exact(claim, src, f"== {want:g}", r, n >= max(least, 1) and r == want, note)


def _finding(claim, src, bound, value, passed, note, why):
    note = (f"{note}; " if note else "") + f"a finding, not gating: holds by construction ({why})"
    return Claim.exact(claim, src, bound, value, passed, note, finding=True)


def _band(claim, src, ratios, note):
    lo, hi = strict_min(ratios), strict_max(ratios)
    note = f"ratio range [{lo:.3f}, {hi:.3f}]{note}"
    return Claim.exact(claim, src, "in [1, 2]", hi, lo >= 1.0 and hi <= 2.0, note)


def formula_misses(cfg: Config, table: list[dict]) -> list[str]:
    """The cost rows whose bits (V's reads, A's messages) differ from docs/outcomes.md's counts.

    Every machine of group l reads l positions at its last step (``random_programs``); some B of
    the zoo points at a step t != T-1 reading l when every fixed B plays (T <= fixed_bob_max_T) and
    such a step exists, or when step 0 reads l (l <= n_inputs; the zoo's "first" B)."""
    misses = []
    for r in table:
        T, l, m, S = r["T"], r["l"], r["m"], r["S"]
        if r["protocol"] == "fig4":
            bits = [clog2(T) + reads * (1 + clog2(cfg.n_inputs + T)) for reads in (l + 1, l + 2)]
            fixed = T <= cfg.fixed_bob_max_T and cfg.n_inputs + min(T - 2, cfg.dep_window) >= l
            worst = r["bits_read_max_over_zoo"]
            ok = worst == bits[1] if fixed or l <= cfg.n_inputs else worst <= bits[1]
            ok = ok and r["bits_read"] == r["bits_read_min"] == bits[0]
            ok = ok and r["a_message_bits"] == T
        else:
            ok = r["bits_read"] == (m + 1) * S + m == r["bits_read_max_over_zoo"]
            ok = ok and r["bits_read_min"] == S and r["a_message_bits"] == (m + 1) * S
        if not ok:
            misses.append(f"T{T}/{r['protocol']}/l{l}")
    return misses


def claim_rows(cfg: Config, m: Measured) -> tuple[list[Claim], dict]:
    """The report rows of ``m`` and the metrics they summarise (pure)."""
    claims: list[Claim] = []
    metrics: dict[str, dict] = {}
    for fam, (label, src) in LABELS.items():
        tot = metrics[fam] = merge_judged(m.stats[fam])
        note = (
            f"{cfg.n_machines} random machines at each T in {m.all_T} (half output 1); "
            f"{tot['comp_debates']} honest-A debates, {tot['sound_debates']} honest-B debates"
        )
        claims += [_rate(tot, side, f"{label}: {t}", src, note) for side, t in ZOO_RATES]
        q, c = tot["v_queries_max"], f"{label}: V makes at most one oracle query"
        why = "the protocol records V's query as a 0/1 flag per debate"
        claims.append(_finding(c, src, "<= 1", q, q <= 1, "the spec's O(1) queries", why))
    for fam in ("fig4", "fig3_full"):
        st, (label, src) = m.ex_T[fam], LABELS[fam]
        note = (
            f"all 2^{cfg.check_T} transcripts + the zoo vs honest B: {st['sound_debates']} debates"
            f"; honest A vs every fixed B: {st['comp_accepts']}/{st['comp_debates']} accepted"
        )
        name = f"{label}: no claimed transcript wins at T={cfg.check_T} (exhaustive)"
        every = (cfg.n_machines // 2) * 2**cfg.check_T  # each output-0 machine, every transcript
        claims.append(_rate(st, "sound", name, src, note, every))
    if m.ex3 is not None:
        ex3 = metrics["fig3_exhaustive"] = m.ex3
        note = (
            f"all {ex3['sequences']} sequences (Z', a_1, a_2) of S={ex3['S']}-bit "
            f"configurations x output-0 machines = {ex3['sound_debates']} debates"
        )
        name = "Fig 3: no message sequence wins (exhaustive adversary, T=3 padded to 4, W=2)"
        every = pop.EXHAUSTIVE_MACHINES // 2 * ex3["sequences"]
        claims.append(_rate(ex3, "sound", name, SRC_51, note, every))
    for name, st in m.wit.items():
        metrics[f"witness_{name}"] = st
        w = f"Witness debate ({name})"
        note = (
            f"{st['yes']} yes / {st['no']} no instances, 2^{int(math.log2(st['witnesses']))} "
            f"witnesses each, T={st['T']}, n={st['n']}, l={st['l']}"
        )
        for side, t in WITNESS_RATES:
            sub = f"{note}; {st[side + '_debates']} debates"
            # every witness of every no-instance; every valid witness against every B
            every = st["no"] * st["witnesses"] if side == "sound" else st["valid"] * st["n_comp"]
            claims.append(_rate(st, side, f"{w}: {t}", SRC_71, sub, every))
        c = f"{w}: V queries <= 1, bits <= ceil(log2 T) + (l+2)(1+w), honest A simulates T steps"
        ok = st["v_queries_max"] <= 1 and st["bits_max"] <= st["bits_bound"]
        ok = ok and st["a_steps_max"] == st["T"]
        why = "V reads <= l + 2 cells of 1 + w bits, its queries are a 0/1 flag, A's cost is T"
        claims.append(
            _finding(c, SRC_71, f"<= {st['bits_bound']} bits", st["bits_max"], ok, note, why)
        )
    # -- costs against T: a fit needs two T ------------------------------------------------------
    two, nan = len(m.cost_T) >= 2, math.nan
    f4 = [r for r in m.table if r["protocol"] == "fig4"]
    f3 = [r for r in m.table if r["protocol"] != "fig4"]
    ls = sorted({r["l"] for r in f4})
    lmax = ls[-1]
    per_l = {l: finite_linfit(col(f4, "m", l=l), col(f4, "bits_read", l=l))[0] for l in ls if two}
    note = f" over T={m.cost_T}, worst case over the zoo; per-doubling slopes d bits / d log2 T: "
    note += ", ".join(f"l={l}: {v:.2f}" for l, v in per_l.items())
    if two and len(ls) >= 2:
        a, b, r2 = finite_linfit(list(per_l), list(per_l.values()))
        note += f"; slope = {a:.3f} l + {b:.3f} (R^2 {r2:.4f}); expected l + 2"
        metrics["fig4_slope_fit"] = {"a": a, "b": b, "r2": r2}
    ratios = [r["bits_read_max_over_zoo"] / ((r["l"] + 2) * r["m"]) for r in f4]
    name = "Fig 4: bits V reads grow as l log T: bits / ((l+2) log2 T) in [1, 2] at every T"
    claims.append(_band(name, SRC_53, ratios, note))
    Sm = [r["S"] * r["m"] for r in f3]
    a3, b3, r23 = finite_linfit(Sm, col(f3, "bits_read")) if two else (nan,) * 3
    slopes3 = {
        fam: finite_loglog_slope(col(f3, "T", protocol=fam), col(f3, "bits_read", protocol=fam))
        for fam in ("fig3_window", "fig3_full")
        if two
    }
    slope4 = finite_loglog_slope(col(f4, "T", l=lmax), col(f4, "bits_read", l=lmax)) if two else nan
    metrics["fig3_fit"] = dict(a=a3, b=b3, r2=r23, loglog_vs_T=slopes3, fig4_loglog_vs_T=slope4)
    slopes = ", ".join(f"{k} {v:.3f}" for k, v in slopes3.items())
    note = (
        f"; linear fit bits = {a3:.4f} S log2 T + {b3:.1f} (R^2 {r23:.5f}); log-log slopes vs T: "
        f"{slopes}, Fig 4 (l={lmax}) {slope4:.3f}"
    )
    name = "Fig 3: bits V reads grow as S log T: bits / (S log2 T) in [1, 2] at every T"
    claims.append(_band(name, SRC_51, [r["bits_read"] / x for r, x in zip(f3, Sm)], note))
    misses = formula_misses(cfg, m.table)
    name = "Bits V reads: the exact counts of docs/outcomes.md at every cost row (Fig 3, Fig 4)"
    note = (
        f"cost-table rows off: {misses or 'none'}; honest debates: Fig 3 (m+1) S + m bits, S on an "
        "output-0 machine; Fig 4 ceil(log2 T) + (l+1)(1+w); the zoo's worst Fig 4 debate "
        "(l+2)(1+w) + ceil(log2 T) where a B of the zoo points at a step reading l positions, "
        "at most that elsewhere; honest A sends (m+1) S bits (Fig 3), T bits (Fig 4)"
    )
    claims.append(
        Claim.exact(name, "docs/outcomes.md", "== 0 rows off", len(misses), not misses, note)
    )
    off = sum(  # the count from T alone: honest debates take it, no debate of the zoo more
        not r["rounds"]
        == r["rounds_max_over_zoo"]
        == (1 if r["protocol"] == "fig4" else r["m"] + 1)
        for r in m.table
    )
    name = "Rounds: binary search takes ceil(log2 T) + 1 (Fig 3), cross-examination 1 (Fig 4)"
    note = (
        f"honest debates of every cost row ({len(m.table)}), and no debate of the zoo takes "
        "more (a liar's malformed message ends it early): cost-table rows off the count"
    )
    claims.append(Claim.exact(name, "spec DED 6, 7 step 1", "== 0 rows off", off, off == 0, note))
    work = metrics["prover_work"] = {}
    for fam in ("fig3_full", "fig3_window", "fig4"):
        r = [x for x in m.table if x["protocol"] == fam and x["l"] == lmax]
        per_T = [strict_max((x["a_steps"], x["b_steps"])) / x["T"] for x in r]
        steps = [x["a_steps"] + x["b_steps"] for x in r]
        slope = finite_loglog_slope(col(r, "T"), steps) if len(r) >= 2 else nan
        work[fam] = {"max_steps_per_T": strict_max(per_T), "loglog_slope": slope}
    worst = strict_max(w["max_steps_per_T"] for w in work.values())
    slopes = ", ".join(f"{k} {v['loglog_slope']:.3f}" for k, v in work.items())
    note = f"log-log slopes of A+B steps vs T: {slopes}; A: T, B: T_pad - 1 (Fig 3) or T (Fig 4)"
    name = "Honest prover work: O(T) steps simulated (within the O(T log T) bound)"
    why = "A's count is T and B's at most T_pad - 1 < 2T by the protocols' definitions"
    claims.append(
        _finding(name, "spec DED 6-7 (Ptime)", "steps / T <= 2", worst, worst <= 2.0, note, why)
    )
    return claims, metrics


# -- plots ----------------------------------------------------------------------------------------
def _plot(rows):
    """Bits V reads within the claims' bands [1, 2] x S or (l+2) log2 T; the provers' steps."""
    from matplotlib.figure import Figure  # no pyplot: nothing global to close

    ls = sorted({r["l"] for r in rows if r["protocol"] == "fig4"})
    fig = Figure(figsize=(11, 4.2))
    ax1, ax2 = fig.subplots(1, 2)
    curves = [
        ("fig3_full", ls[0], "s-", "Fig 3, full-tape"),
        ("fig3_window", ls[0], "o-", "Fig 3, register"),
    ]
    for proto, l, style, name in curves + [("fig4", l, "^--", f"Fig 4, l = {l}") for l in ls]:
        fig4, where = proto == "fig4", {"protocol": proto, "l": l}
        T, m = col(rows, "T", **where), np.array(col(rows, "m", **where))
        y = col(rows, "bits_read_max_over_zoo" if fig4 else "bits_read", **where)
        what, unit = ("(worst over the zoo)", "(l+2)") if fig4 else ("configurations", "S")
        (line,) = ax1.plot(T, y, style, label=f"{name} {what}")
        band = (l + 2 if fig4 else np.array(col(rows, "S", **where))) * m
        label = f"{name}: the claim's band [1, 2] x {unit} log2 T"
        ax1.fill_between(T, band, 2 * band, color=line.get_color(), alpha=0.12, label=label)
    ax1.set_xscale("log", base=2)
    ax1.set(yscale="log", xlabel="T (steps)", ylabel="bits V reads", title="Verifier cost")
    ax1.legend(fontsize=6)
    for proto, key, style in (
        ("fig3_full", "b_steps", "s-"),
        ("fig3_full", "a_steps", "o-"),
        ("fig4", "b_steps", "^--"),
    ):
        where = {"protocol": proto, "l": ls[-1]}
        label = f"Fig {proto[3]} {key[0].upper()} steps"
        ax2.plot(col(rows, "T", **where), col(rows, key, **where), style, label=label)
    T_all = sorted({x["T"] for x in rows})
    ax2.plot(T_all, [2 * T for T in T_all], "k:", lw=1, label="2T (the claim: steps / T <= 2)")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log", base=2)
    ax2.set(xlabel="T (steps)", ylabel="steps simulated by the honest prover")
    ax2.set_title("Honest prover work")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def sweep_figures(rows):
    """``deterministic_costs`` from the first row of each T (honest costs depend on T alone)."""
    first: dict[tuple, dict] = {}
    for r in rows:
        for c in cost_table(r):
            first.setdefault((c["T"], PROTOCOL_FAMILIES.index(c["protocol"]), c["l"]), c)
    table = [first[k] for k in sorted(first)]
    return {"deterministic_costs": _plot(table)} if table else {}


# -- the experiment --------------------------------------------------------------------------------
def host(cfg: Config, seed: int, key, measured) -> dict[str, dict]:
    """The witness tasks' summaries (instances from ``host_seed(seed, 2, i)``)."""
    out = {}
    for i, (name, make) in enumerate((("plan", plan_task), ("constraints", constraint_task))):
        task = make(host_seed(seed, 2, i), cfg.witness_instances)
        zoo = pop.pairs(cfg, task.program.T, jax.random.fold_in(key, 10_000 + i), "cross_exam")
        out[name] = witness_suite(task, zoo)
    return out


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The claims of the point's row and the witness summaries."""
    cost_T, all_T = _Ts(cfg)
    keys, table = JUDGED + ("v_queries_max",), cost_table(measured)
    stats = {
        f: [{k: measured[f"T{T}/{f}/{k}"] for k in keys} for T in all_T] for f in PROTOCOL_FAMILIES
    }
    ex3 = None
    if cfg.exhaustive_fig3:
        ex3 = {k: measured[f"fig3_exhaustive/{k}"] for k in keys + ("bits_max",)}
        ex3 |= {"S": pop.EXHAUSTIVE_S, "sequences": pop.EXHAUSTIVE_SEQUENCES}
    ex_T = {fam: dict(st[all_T.index(cfg.check_T)]) for fam, st in stats.items()}
    claims, metrics = claim_rows(cfg, Measured(all_T, cost_T, stats, ex_T, ex3, host, table))
    return ExperimentResult(
        claims=claims,
        metrics=metrics,
        tables={"costs": table, "fig3_vs_fig4": pop.side_by_side(table)},
        figures={"deterministic_costs": _plot(table)},
    )
