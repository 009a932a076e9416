"""Sample budgets of the stochastic-oracle debate: the constants sets of a (K, T) cell with their
proven bounds, Lean's N_V recomputed on the host, honest Alice's query constant and the empirical
budget frontier of a sweep over a common factor on (N_A, N_B, N_V).

The frontier is an empirical finding (no theorem settles it): per (K, T) cell of a sweep's rows,
the smallest factor before the first that is not confidently safe, where safe means every zoo
Bob's completeness is above 3/5 and every zoo Alice's soundness below 2/5 (spec DED 5.4), decided
on one-sided Clopper-Pearson bounds of the integer win counts, set against Lean's proven counts
(spec DED 5.2).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from scipy import stats

from dedebate.core.samples import hoeffding_samples
from dedebate.machines.fixtures import fixture_for_k
from dedebate.protocols.stochastic import lean_defaults, paper_constants

if TYPE_CHECKING:
    from . import Config

CELL = re.compile(r"K(\d+)_T(\d+)")
ALICE_C = 5000
"""Honest Alice's charged queries are ALICE_C K^2 T ln(200T) with Lean's constants (T N_A)."""


def lean_n_vera(K: float, T: int) -> int:
    """Lean's ``samples((s - c) / 2, v)`` at its defaults for (K, T), without debate constants."""
    lp = lean_defaults(K, T)
    return hoeffding_samples((lp.s - lp.c) / 2, lp.v)


def cells(cfg: Config, K: int, T: int):
    """The host side of the (K, T) cells: ``(fixture name, m_no, m_yes, (p_yes, p_no) exact,
    [(cell name, constants set, constants, (completeness bound, soundness bound))])``: Lean's
    constants x ``scale`` (bounds of spec DED 5.3 at the exact P_M(1)) and, with ``paper``, the
    paper's (3/5, 2/5)."""
    fname, m_no, K_decl = fixture_for_k(K, T, cfg.p_no)
    _, m_yes, _ = fixture_for_k(K, T, cfg.p_yes)
    lp = lean_defaults(K_decl, T)
    p_yes, p_no = float(m_yes.output_prob_dp()), float(m_no.output_prob_dp())
    sets = [
        (
            f"K{K}_T{T}",
            "lean",
            lp.constants(K_decl, T).scaled(cfg.scale),
            (lp.completeness(K_decl, T, p_yes), 1 - lp.soundness(K_decl, T, 1 - p_no)),
        )
    ]
    if cfg.paper:
        sets.append((f"K{K}_T{T}_paper", "paper", paper_constants(K_decl, T), (3 / 5, 2 / 5)))
    return fname, m_no, m_yes, (p_yes, p_no), sets


def frontier(rows, alpha: float = 0.05) -> list[dict]:
    """The budget frontier of a sweep over ``scale`` from its ``sweep.csv`` rows, one dict per cell.

    Per (K, T) cell ``K{K}_T{T}`` (and per value of any other swept axis), a factor is ``safe``,
    ``unsafe`` or ``undecided`` by one-sided Clopper-Pearson bounds on every member's pooled wins
    against 2/5 and 3/5 (Bonferroni ``alpha / m`` for unsafe, ``m`` = members x factors), and the
    frontier is the smallest safe factor before the first that is not (spec DED 5.8). Calling any
    unsafe factor safe has probability at most ``alpha`` (a fixed-sequence test of
    intersection-union tests: neither members nor factors split ``alpha``). Cells of other names are
    skipped. A cell's dict: ``K``, ``T``, ``others``, ``factor`` (None: the largest is not safe),
    ``stop``, ``tried`` (per factor: ``verdict``, ``trials``, point estimates and bounds), ``lean``,
    ``seeds`` and, where a factor is safe, ``counts``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha}: the family-wise error level must be in (0, 1)")
    groups: dict[tuple, dict[float, list[dict]]] = {}
    for r in rows:
        others = tuple(
            sorted(
                (k, str(v))
                for k, v in r.items()
                if "/" not in k and k not in ("point", "seed", "group", "scale", "Ks", "Ts")
            )
        )
        for k in r:
            cell = k.split("/")[0]
            if k.endswith("/trials") and r[k] is not None and CELL.fullmatch(cell):  # else K's
                groups.setdefault((cell, others), {}).setdefault(float(r["scale"]), []).append(r)
    out = []
    for (cell, others), by_f in groups.items():
        K, T = (int(x) for x in CELL.fullmatch(cell).groups())
        lean = lean_defaults(float(K), T).constants(float(K), T)
        pooled = {f: _pooled_wins(rs, cell) for f, rs in by_f.items()}
        split = alpha / sum(len(a) + len(b) for _, a, b in pooled.values())
        best, stop, tried = None, None, []
        for f in sorted(by_f, reverse=True):
            e = _verdict(*pooled[f], alpha, split)
            tried.append({"factor": f, **e})
            if e["verdict"] != "safe":
                stop = e["verdict"]
                break
            best = f
        e = {
            "K": K,
            "T": T,
            "others": dict(others),
            "factor": best,
            "stop": stop,
            "tried": tried,
            "lean": (lean.n_alice, lean.n_bob, lean.n_vera),
            "seeds": len(by_f[max(by_f)]),
        }
        if best is not None:
            rs = by_f[best]
            e["counts"] = tuple(int(rs[0][f"{cell}/{n}"]) for n in ("n_alice", "n_bob", "n_vera"))
        out.append(e)
    return sorted(out, key=lambda e: (sorted(e["others"].items()), e["K"], e["T"]))


def _pooled_wins(rs, cell) -> tuple[int, list[int], list[int]]:
    """``(n, Alice wins, Bob wins)``: the members' integer win counts summed over the rows."""

    def wins(side):
        m = sum(1 for k in rs[0] if re.fullmatch(rf"{cell}/{side}\d+_wins", k))
        return [sum(round(float(r[f"{cell}/{side}{j}_wins"])) for r in rs) for j in range(m)]

    return sum(round(float(r[f"{cell}/trials"])) for r in rs), wins("alice"), wins("bob")


def _verdict(n: int, alice: list[int], bob: list[int], level: float, split: float) -> dict:
    """A factor's verdict from pooled counts: bounds at ``level`` (safe), ``split`` (unsafe)."""
    if n <= 0 or not alice or not bob:
        raise ValueError(
            f"{n} trials, {len(alice)} Alice and {len(bob)} Bob members: a factor "
            "needs trials > 0 and members on both sides"
        )
    s_hi = max(_bound(k, n, level, upper=True) for k in alice)
    c_lo = min(_bound(k, n, level, upper=False) for k in bob)
    bad = (
        max(_bound(k, n, split, upper=False) for k in alice) > 2 / 5
        or min(_bound(k, n, split, upper=True) for k in bob) < 3 / 5
    )
    verdict = "safe" if s_hi < 2 / 5 and c_lo > 3 / 5 else "unsafe" if bad else "undecided"
    return {
        "verdict": verdict,
        "trials": n,
        "completeness_min": min(bob) / n,
        "soundness_max": max(alice) / n,
        "completeness_lo": c_lo,
        "soundness_hi": s_hi,
    }


def _bound(k: int, n: int, level: float, upper: bool) -> float:
    """The one-sided Clopper-Pearson bound on a proportion from ``k`` of ``n`` at ``level``."""
    if upper:
        return 1.0 if k >= n else float(stats.beta.ppf(1 - level, k + 1, n - k))
    return 0.0 if k <= 0 else float(stats.beta.ppf(level, k, n - k + 1))
