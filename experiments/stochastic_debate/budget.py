"""The cells' constants and bounds, the host's searches and a ``scale`` sweep's budget frontier."""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from typing import TYPE_CHECKING

import jax
import numpy as np
from scipy import stats

from dedebate.agents import stochastic_players as sp
from dedebate.agents.stochastic_zoo import alice_members, bob_members, measure_cell, zoo_cell
from dedebate.core.samples import hoeffding_samples
from dedebate.exact.acceptance import acceptance_exact
from dedebate.exact.best_response import alice_best_response, bob_best_response
from dedebate.lab.claims import strict_max, strict_min
from dedebate.machines.fixtures import fixture_for_k
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import debate_static, lean_defaults, make_vera, paper_constants

if TYPE_CHECKING:
    from . import Config

COUNTS = ("n_alice", "n_bob", "n_vera")
CELL = re.compile(r"(K(\d+)_T(\d+))/trials")  # a (K, T) cell's trials in a sweep row
ALICE_C = 5000  # honest Alice's charged queries are ALICE_C K^2 T ln(200T) (Lean's T N_A)


def lean_n_vera(K: float, T: int) -> int:
    """Lean's ``samples((s - c) / 2, v)`` at its defaults for (K, T)."""
    lp = lean_defaults(K, T)
    return hoeffding_samples((lp.s - lp.c) / 2, lp.v)


def instances(K: int, T: int, p_yes: float, p_no: float):
    """``(fixture name, m_no, m_yes)``: K's fixture at T steps, no- and yes-instance."""
    fname, m_no, _ = fixture_for_k(K, T, p_no)
    return fname, m_no, fixture_for_k(K, T, p_yes)[1]


def cells(cfg: Config, K: int, T: int):
    """``(fixture, m_no, m_yes, exact (p_yes, p_no), [(name, "lean"/"paper", consts, bounds)])``."""
    fname, m_no, m_yes = instances(K, T, cfg.p_yes, cfg.p_no)
    lp = lean_defaults(float(K), T)
    p_yes, p_no = float(m_yes.output_prob_dp()), float(m_no.output_prob_dp())
    bounds = (lp.completeness(float(K), T, p_yes), 1 - lp.soundness(float(K), T, 1 - p_no))
    sets = [(f"K{K}_T{T}", "lean", lp.constants(float(K), T).scaled(cfg.scale), bounds)]
    if cfg.paper:
        sets.append((f"K{K}_T{T}_paper", "paper", paper_constants(float(K), T), (3 / 5, 2 / 5)))
    return fname, m_no, m_yes, (p_yes, p_no), sets


def _optimise_alice(m_no, levels, consts, gens, pop, seed):
    bob, vera = sp.honest_bob(consts), make_vera(consts)

    def acceptance(lies):
        alices = [sp.zoo_alice(consts, sp.A_PER_STEP, lies=li) for li in lies]
        return np.array([acceptance_exact(m_no, a, bob, vera, levels) for a in alices])

    return sp.optimise_alice(acceptance, consts, generations=gens, population=pop, seed=seed)


@functools.lru_cache(maxsize=16)  # host() reuses what point() found
def adversaries(K: int, t: int, ki: int, scale: float, p_yes: float, p_no: float, gens, pop):
    """The zoos' optimised Alice and Bob of K by exact DP at ``t`` (seed ``ki``)."""
    _, m_no, m_yes = instances(K, t, p_yes, p_no)
    consts = lean_defaults(float(K), t).constants(float(K), t).scaled(scale)
    alice, vera, levels = sp.honest_alice(consts), make_vera(consts), prefix_tree(m_yes)

    def alice_win(w, w_dev, w_prev):
        rows = zip(w, map(float, w_dev), map(float, w_prev))
        bobs = [sp.zoo_bob(consts, sp.B_LEARNED, w=a, w_dev=d, w_prev=p) for a, d, p in rows]
        return np.array([acceptance_exact(m_yes, alice, b, vera, levels) for b in bobs])

    opt_a = _optimise_alice(m_no, prefix_tree(m_no), consts, gens, pop, ki)
    opt_b = sp.optimise_bob(
        alice_win, consts, generations=max(1, gens // 2), population=pop, seed=ki
    )
    return opt_a, opt_b


@functools.lru_cache(maxsize=64)  # host's rows and the scale search ask for the same cells
def best_responses(K: int, T: int, scale: float, p_yes: float, p_no: float) -> tuple[float, float]:
    """``(bob, alice)`` at Lean's counts for (K, T) times ``scale``: honest Alice's win against
    Bob's exact best response on the yes-instance, and the acceptance of Alice's best response to
    honest Bob on the no-instance (every adversary)."""
    _, m_no, m_yes = instances(K, T, p_yes, p_no)
    c = lean_defaults(float(K), T).constants(float(K), T).scaled(scale)
    vera = make_vera(c)
    bob = bob_best_response(m_yes, sp.honest_alice(c), vera)
    return bob, alice_best_response(m_no, sp.honest_bob(c), vera)


def members_exact(consts, m_no, m_yes, theta_a, theta_b) -> tuple[np.ndarray, np.ndarray]:
    """``(alice, bob)``: each zoo member's exact acceptance, as the cell plays it (every Alice
    against honest Bob on ``m_no``, honest Alice against every Bob on ``m_yes``)."""
    vera = make_vera(consts)
    lv_no, lv_yes = prefix_tree(m_no), prefix_tree(m_yes)
    bob, alice = sp.honest_bob(consts), sp.honest_alice(consts)
    alices, bobs = alice_members(consts, theta_a)[1], bob_members(consts, theta_b)[1]
    return (
        np.array([acceptance_exact(m_no, a, bob, vera, lv_no) for a in alices]),
        np.array([acceptance_exact(m_yes, alice, b, vera, lv_yes) for b in bobs]),
    )


def _row(K, f, method, comp, sound, c) -> dict:
    row = {"K": K, "factor": f, "method": method, "completeness_min": comp, "soundness_max": sound}
    return row | {"holds": comp >= 3 / 5 and sound <= 2 / 5} | {n: getattr(c, n) for n in COUNTS}


def scale_search(cfg: Config, K: int, ki: int, key_k, theta_b, lanes: int) -> dict:
    """K's smallest factor on (N_A, N_B, N_V) keeping completeness >= 3/5, soundness <= 2/5."""
    sT = cfg.scale_T  # noqa: N806 - the paper's symbol
    _, m_no, _ = instances(K, sT, cfg.p_yes, cfg.p_no)
    l_no = prefix_tree(m_no)
    base = lean_defaults(float(K), sT).constants(float(K), sT)
    rows, thetas, f_exact, gens = [], {}, None, max(1, cfg.es_generations // 2)
    for f in sorted(cfg.scale_factors, reverse=True):  # down while every best response holds
        c = base.scaled(f)  # every adversary's best, exactly
        comp, sound = best_responses(K, sT, f, cfg.p_yes, cfg.p_no)
        rows.append(_row(K, f, f"exact best responses, T={sT}", comp, sound, c))
        if not rows[-1]["holds"]:
            break
        opt = _optimise_alice(m_no, l_no, c, gens, cfg.es_population, 100 + ki)  # for the zoo
        thetas[f], f_exact = opt.params["theta"], f
    out = {"rows": rows, "f_exact": f_exact, "factor": None}
    if f_exact is None:
        return out
    Tmax, n = max(cfg.Ts), cfg.trials  # noqa: N806 - the paper's symbol
    _, m_no, m_yes = instances(K, Tmax, cfg.p_yes, cfg.p_no)
    lean = lean_defaults(float(K), Tmax).constants(float(K), Tmax)
    key = jax.random.fold_in(key_k, 99)
    tries = sorted(x for x in cfg.scale_factors if x >= f_exact)  # then up by Monte Carlo,
    level = 0.05 / len(tries)  # each factor's test at 0.05 / the factors it may try (Bonferroni)
    for j, f in enumerate(tries):  # each factor its own debates
        d, a_names, b_names = zoo_cell(lean.scaled(f), m_no, m_yes, thetas[f], theta_b)
        ma, k_f = len(a_names), jax.random.fold_in(key, j)
        st = measure_cell(debate_static(Tmax), d, k_f, n, ma, b_names.index("honest"), lanes)
        wins = np.asarray(st["wins"]).tolist()  # Alices', then Bobs'
        v = _verdict(n, wins[:ma], wins[ma:], level, level / len(wins))  # the frontier's test
        comp, sound = v["completeness_min"], v["soundness_max"]
        row = _row(K, f, f"Monte Carlo, T={Tmax}", comp, sound, lean.scaled(f))
        rows.append(row | {"holds": v["verdict"] == "safe", "verdict": v["verdict"]})
        if rows[-1]["holds"]:
            bounds = (v["completeness_lo"], v["soundness_hi"])
            return out | {"factor": f, "bounds": bounds, "tries": len(tries)}
    return out


def frontier(rows, alpha: float = 0.05) -> list[dict]:
    """Per (K, T) cell and value of the other axes, the smallest safe ``scale`` (docs: DED 5.8);
    at T <= 12 against every adversary (the rows' exact best responses), else against the zoo."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha}: the family-wise error level must be in (0, 1)")
    skip = ("point", "seed", "group", "scale", "Ks", "Ts")
    # (cell, K, T, others) -> factor -> rows
    groups: defaultdict[tuple, defaultdict[float, list]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        others = tuple(sorted((k, str(v)) for k, v in r.items() if "/" not in k and k not in skip))
        zoo = str(r.get("Ks"))  # K's optimised adversaries depend on its place in Ks: not pooled
        for m in filter(None, (CELL.fullmatch(k) for k in r if r[k] is not None)):  # not K's
            groups[m[1], int(m[2]), int(m[3]), others, zoo][float(r["scale"])].append(r)
    out = []
    for (cell, K, T, others, zoo), by_f in groups.items():
        lean = lean_defaults(float(K), T).constants(float(K), T)
        pooled = {f: _pooled(rs, cell) for f, rs in by_f.items()}
        split = alpha / sum(len(a) + len(b) for _, a, b in pooled.values())
        best, stop, tried = None, None, []
        for f in sorted(by_f, reverse=True):
            tried.append({"factor": f, **_verdict(*pooled[f], alpha, split)})
            tried[-1] |= _exact_verdict(by_f[f], cell, tried[-1]["verdict"])
            if tried[-1]["verdict"] != "safe":
                stop = tried[-1]["verdict"]
                break
            best = f
        e = {"K": K, "T": T, "others": dict(others), "Ks": zoo, "factor": best, "stop": stop}
        e["exact"] = all("exact_holds" in t for t in tried)  # against every adversary
        e["tried"] = tried
        e |= {"lean": tuple(getattr(lean, n) for n in COUNTS), "seeds": len(by_f[max(by_f)])}
        if best is not None:
            e["counts"] = tuple(int(by_f[best][0][f"{cell}/{n}"]) for n in COUNTS)
        out.append(e)
    return sorted(out, key=lambda e: (sorted(e["others"].items()), e["K"], e["T"]))


def _exact_verdict(rs, cell: str, mc: str) -> dict:
    """The verdict against every adversary where rows carry the best responses (T <= 12)."""
    vals = [(r.get(f"{cell}/exact_completeness"), r.get(f"{cell}/exact_soundness")) for r in rs]
    if not vals or any(None in v for v in vals):
        return {}
    comp, sound = strict_min(c for c, _ in vals), strict_max(a for _, a in vals)  # NaN stays
    flags = [r.get(f"{cell}/exact_holds") for r in rs]  # the float64 decision, where rows carry it
    if None in flags:  # rows without it: their float32 values (a NaN does not hold)
        holds = comp >= 3 / 5 and sound <= 2 / 5
    else:
        holds = all(f == 1 for f in flags)
    verdict = "safe" if holds and mc != "unsafe" else "unsafe"  # and the zoo not surely unsafe
    out = {"verdict": verdict, "monte_carlo": mc, "exact_completeness": comp}
    return out | {"exact_soundness": sound, "exact_holds": holds}


def _pooled(rs, cell) -> tuple[int, list[int], list[int]]:  # summed (trials, Alice's, Bob's wins)
    def total(k):
        return sum(round(float(r[k])) for r in rs)

    def wins(side):
        return [total(k) for k in rs[0] if re.fullmatch(rf"{cell}/{side}\d+_wins", k)]

    return total(f"{cell}/trials"), wins("alice"), wins("bob")


def _verdict(n: int, alice: list[int], bob: list[int], level: float, split: float) -> dict:
    def upper(k, a):  # one-sided Clopper-Pearson bounds
        return 1.0 if k >= n else float(stats.beta.ppf(1 - a, k + 1, n - k))

    def lower(k, a):
        return 0.0 if k <= 0 else float(stats.beta.ppf(a, k, n - k + 1))

    s_hi, c_lo = max(upper(k, level) for k in alice), min(lower(k, level) for k in bob)
    bad = max(lower(k, split) for k in alice) > 2 / 5 or min(upper(k, split) for k in bob) < 3 / 5
    verdict = "safe" if s_hi < 2 / 5 and c_lo > 3 / 5 else "unsafe" if bad else "undecided"
    out = {"verdict": verdict, "trials": n, "completeness_min": min(bob) / n}
    return out | {"soundness_max": max(alice) / n, "completeness_lo": c_lo, "soundness_hi": s_hi}


def sweep_figures(rows) -> dict:
    """``{"budget_frontier": figure}``: per count, Lean's and the frontier's against T."""
    fr = [e for e in frontier(rows) if not e["others"]]
    if not rows or "scale" not in rows[0] or not fr:
        return {}
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for i, (ax, label) in enumerate(zip(axes, ("N_A (Alice)", "N_B (Bob)", "N_V (Vera)"))):
        for K in sorted({e["K"] for e in fr}):
            es = sorted((e for e in fr if e["K"] == K), key=lambda e: e["T"])
            col = {1: "tab:blue", 2: "tab:orange", 4: "tab:green"}.get(K)
            T = [e["T"] for e in es]
            ax.plot(T, [e["lean"][i] for e in es], "o-", color=col, label=f"K={K} Lean (proven)")
            ok = [e for e in es if e["factor"] is not None]
            y = [e["counts"][i] for e in ok]
            ax.plot([e["T"] for e in ok], y, "s--", color=col, label=f"K={K} frontier")
            for e, yi in zip(ok, y):  # "?": the next factor undecided; "*": every adversary
                text = f"x{e['factor']:g}" + "?" * (e["stop"] == "undecided") + "*" * e["exact"]
                ax.annotate(text, (e["T"], yi), size=6, textcoords="offset points", xytext=(3, -9))
            for stop, mark in (("unsafe", "x"), ("undecided", "$?$")):  # at Lean's: factor 1
                bad = [e for e in es if e["factor"] is None and e["stop"] == stop]
                x, y = [e["T"] for e in bad], [e["lean"][i] for e in bad]
                ax.plot(x, y, marker=mark, linestyle="none", color="k", ms=9)
        ax.set(xscale="log", yscale="log", xlabel="T (steps)")
        ax.set_title(label, fontsize=9)
    axes[0].set_ylabel("oracle samples per estimate")
    axes[0].legend(fontsize=6)
    title = "Smallest common factor keeping completeness > 3/5, soundness < 2/5 (95% per cell)"
    title += " vs every zoo member (*: every adversary, exact DP), against Lean's counts"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return {"budget_frontier": fig}
