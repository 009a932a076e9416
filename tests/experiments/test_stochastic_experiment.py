"""``experiments/stochastic_debate/``: bad configs are rejected; the experiment as a sweep
(``point`` / ``DYNAMIC``): a grid of sample-count scale factors x seeds is one compiled program,
and the quick run, at a row's documented key, goes through that program (no second compile), reads
its report from that row bit for bit and passes every claim row with its plots; the scaled counts
follow spec DED 5.2, and honest completeness at scale 1 meets the Lean bound of spec DED 5.3
(minus 3 binomial standard errors, spec DED 9). The budget-frontier sweep plans one program per K,
and its frontier (one-sided Clopper-Pearson bounds of pooled counts) and figure follow from the
rows; at K = 2, T = 8 it never calls factor 1/16 safe (exact DP: 0.4022 > 2/5)."""

from __future__ import annotations

import math
import re

import jax
import numpy as np
import pytest

import experiments.stochastic_debate as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.evaluate import run_module
from dedebate.lab.sweep import plan, point_key, run_sweep
from dedebate.protocols.stochastic import lean_defaults
from experiments.stochastic_debate.budget import frontier
from tests.conftest import REPO, assert_shipped_sweeps_plot
from tests.fakes import FakeContext, count_point_traces

QUICK = exp.SIZES["quick"]
K, T, TRIALS = 2, 8, QUICK["trials"]  # the quick run's one (K, T) cell
assert (QUICK["Ks"], QUICK["Ts"]) == ((K,), (T,))
CELL = f"K{K}_T{T}"
SCALES = [1.0, 0.25]


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("Ks", (3,), "Ks="),
        ("Ts", (2,), "Ts="),
        ("trials", 10, "trials="),
        ("p_yes", 0.5, "p_yes="),
        ("p_no", 0.4, "p_no="),
        ("es_population", 3, "es_population="),
        ("scale_factors", (2.0,), "scale_factors="),
        ("scale_T", 20, "scale_T="),
    ],
)
def test_config_rejects_bad_values(field, value, match):
    with pytest.raises(ValueError, match=match):
        exp.Config(**{field: value})


def sweep_config(tmp_path, seeds=2):
    raw = {
        "experiment": exp.NAME,
        "seed": 3,
        "output_dir": str(tmp_path),
        "tracking": {"mode": "disabled"},
        "params": QUICK,
        "sweep": {"seeds": seeds, "axes": {"scale": SCALES}, "plots": False, "batch": 1},
    }
    return resolve(raw, {exp.NAME: exp})


@pytest.mark.slow
def test_scale_sweep_compiles_once_and_the_quick_run_is_its_point(tmp_path, monkeypatch):
    traces = count_point_traces(monkeypatch, exp)  # traces of the sweep's fn (once per compile)
    cfg = sweep_config(tmp_path / "sweep")
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["scale"] and res["static_axes"] == []
    assert res["groups"] == 1 and res["compilations"] == 1 == traces[0]
    assert res["rows"] == len(SCALES) * 2 == len(rec.rows)
    assert (rec.sweep_dir / "sweep.csv").is_file()

    # (a) one code path: the quick run at the point scale = 1 with a row's key (point_key) goes
    # through the sweep's program (no second trace) and reads its numbers from that row
    pt = next(p for p in plan(exp, cfg).points if p.values["scale"] == 1.0)
    assert pt.cfg == exp.Config(**QUICK)
    seed = 4
    ctx = FakeContext(tmp_path / "run", seed=seed, name=exp.NAME)
    ctx.key = point_key(exp.NAME, seed, pt.cfg)
    result = run_module(exp, pt.cfg, ctx)
    assert traces[0] == 1
    alone = result.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert_shipped_sweeps_plot("stochastic_debate", row)
    # 2 constants' cells; Lean's also carries the exact best responses (T <= 12)
    assert {m: row[m] for m in alone} == alone and len(alone) == 2 * 46 + 3
    other = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] != seed)
    assert sum(other[m] != alone[m] for m in alone if m.endswith("_wins")) >= 3  # seed counts
    # the report's rows are that row's counts: the worst members' rates and the costs
    for r in result.tables["acceptance"]:
        cell = CELL + ("" if r["constants"] == "lean" else "_paper")
        m = "completeness_min" if r["side"] == "completeness" else "soundness_max"
        assert round(r["value"] * TRIALS) == round(alone[f"{cell}/{m}"] * TRIALS)
    q = {r["constants"]: r for r in result.tables["queries"]}
    assert q["lean"]["vera_max"] == alone[f"{CELL}/queries_vera_max"] <= q["lean"]["n_vera"]
    assert q["paper"]["alice"] == alone[f"{CELL}_paper/queries_alice"]

    # (b) the quick run passes every row and saves its plots
    failed = [(c.claim, c.value, c.lo, c.hi, c.bound) for c in result.claims if not c.passed]
    assert not failed, failed
    kinds = " ".join(c.claim for c in result.claims)
    for word in ("completeness", "soundness", "beyond the paper", "paper constants"):
        assert word in kinds
    checks = result.metrics["consistency_checks"]  # the cost rows hold by construction
    assert checks and all(c["holds"] for c in checks.values()), checks
    assert all(c.finding for c in result.claims if "beyond the paper" in c.claim)
    assert sorted(result.plots) == ["acceptance_vs_T.png", "queries_vs_T.png"]
    assert all((tmp_path / "run" / "plots" / p).exists() for p in result.plots)
    assert result.tables["scale"]
    # every adversary's best, exactly, gates beside the zoo: at most what the optimised Bob
    # holds honest Alice to, at least what the optimised Alice reaches (both exact, at T = 8)
    best = [c for c in result.claims if "exact best response" in c.claim]
    assert [(c.passed, c.finding) for c in best] == [(True, False)] * 2
    (br,), (adv,) = result.tables["best_responses"], result.tables["adversaries"]
    assert (br["K"], br["T"]) == (K, T) == (adv["K"], adv["es_T"])
    assert br["bob"] <= adv["es_bob_best_exact_alice_win"]
    assert br["alice"] >= adv["es_alice_best_exact_acceptance"]
    assert (best[0].value, best[1].value) == (br["bob"], br["alice"])
    exact = (alone[f"{CELL}/exact_completeness"], alone[f"{CELL}/exact_soundness"])
    assert exact == (np.float32(br["bob"]), np.float32(br["alice"]))  # what the frontier reads
    assert alone[f"{CELL}/exact_holds"] == int(br["bob"] >= 3 / 5 and br["alice"] <= 2 / 5)
    assert f"{CELL}_paper/exact_completeness" not in alone  # the paper's constants: none
    fig = exp.plot_acceptance(result.tables["acceptance"], pt.cfg, result.tables["best_responses"])
    (ax,) = fig.axes  # the report's figure, drawn again (run_module saved and dropped it)
    stars = [ln for ln in ax.lines if ln.get_label().startswith("exact best response")]
    assert [list(ln.get_ydata()) for ln in stars] == [[br["bob"], br["alice"]]]

    # (c) the scaled sample counts are Lean's (spec DED 5.2) times the factor, rounded up
    lean = lean_defaults(float(K), T).constants(float(K), T)
    for r in rec.rows:
        f = r["scale"]
        assert (r[f"{CELL}/n_alice"], r[f"{CELL}/n_bob"], r[f"{CELL}/n_vera"]) == tuple(
            max(1, math.ceil(f * n)) for n in (lean.n_alice, lean.n_bob, lean.n_vera)
        )
        assert r[f"{CELL}/queries_vera_max"] <= r[f"{CELL}/n_vera"]  # spec DED 5.3 (Cost.lean)
        holds = (
            5 * round(r[f"{CELL}/completeness_min"] * TRIALS) >= 3 * TRIALS
            and 5 * round(r[f"{CELL}/soundness_max"] * TRIALS) <= 2 * TRIALS
        )
        assert r[f"{CELL}/holds"] == float(holds)
        for m in ("honest_completeness", "completeness_min", "soundness_max"):
            v = r[f"{CELL}/{m}"]
            assert r[f"{CELL}/{m}_lo"] <= v <= r[f"{CELL}/{m}_hi"]
            assert round(v * TRIALS) == pytest.approx(v * TRIALS, abs=1e-3)  # a count / trials
        assert r[f"{CELL}/completeness_min"] <= r[f"{CELL}/honest_completeness"]
        wins = [v for k, v in r.items() if re.fullmatch(rf"{CELL}/bob\d+_wins", k)]
        assert len(wins) == 10  # 4 kinds, 4 thresholds, honest and optimised
        assert r[f"{CELL}/completeness_min"] * TRIALS == pytest.approx(min(wins), abs=1e-3)
        assert r[f"{CELL}_paper/n_alice"] > r[f"{CELL}/n_alice"]  # the paper's: not scaled
        assert (r[f"{CELL}_paper/completeness_bound"], r[f"{CELL}_paper/soundness_bound"]) == (
            pytest.approx(0.6),
            pytest.approx(0.4),
        )

    # (d) honest completeness at scale 1, pooled over the seeds, is at least the Lean bound
    # (spec DED 5.3, at the fixture's exact P_M(1)) minus 3 binomial standard errors (spec DED 9)
    ones = [r for r in rec.rows if r["scale"] == 1.0]
    n = TRIALS * len(ones)
    wins = sum(round(r[f"{CELL}/honest_completeness"] * TRIALS) for r in ones)
    bound = ones[0][f"{CELL}/completeness_bound"]
    assert bound == pytest.approx(0.6402, abs=1e-3)
    assert wins / n >= bound - 3 * math.sqrt(bound * (1 - bound) / n), (wins, n, bound)


def test_scale_is_validated():
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="scale="):
            exp.Config(scale=bad)
    assert exp.Config().scale == 1.0 and set(exp.DYNAMIC) == {"scale", "p_yes", "p_no"}


def test_jitted_wilson_matches_the_lab_interval():
    from dedebate.core.stats import wilson_jnp
    from dedebate.lab.experiment import wilson_interval

    for k, n in ((0, 100), (1, 100), (37, 200), (133, 200), (400, 400)):
        got = [float(x) for x in wilson_jnp(k, n)]
        assert got == pytest.approx(list(wilson_interval(k, n)), abs=1e-6), (k, n)


def test_budget_frontier_config_plans_one_program_per_K():
    from dedebate.lab.config import load_config

    cfg = load_config(REPO / "configs" / "sweeps" / "budget_frontier.yaml", {exp.NAME: exp})
    p = plan(exp, cfg)
    assert p.vmapped and p.dynamic_axes == ("scale",) and p.static_axes == ("Ks",)
    assert [g.static["Ks"] for g in p.groups] == [(1,), (2,), (4,)]
    assert all(len(g.points) == len(p.axes["scale"]) >= 6 for g in p.groups)
    assert cfg.params.Ts == (8, 64, 256) and max(p.axes["scale"]) == 1.0


def _frontier_rows(comp, cell="K2_T8", seeds=(0, 1), snd=(300, 450), n=1000):
    """Synthetic sweep rows at factors 1, 1/2, 1/4, 1/8: ``comp(f)`` is every Bob's wins per
    seed at factor f, the two Alices win ``snd[s]`` and 250 of ``n`` in seed s."""
    rows = []
    for f in (1.0, 0.5, 0.25, 0.125):
        for s in seeds:
            c = [max(1, math.ceil(f * x)) for x in (1000, 500, 2000)]
            rows.append(
                {
                    "point": 0,
                    "seed": s,
                    "group": 0,
                    "scale": f,
                    "Ks": "[2]",
                    f"{cell}/trials": n,
                    f"{cell}/alice0_wins": snd[s],
                    f"{cell}/alice1_wins": 250,
                    f"{cell}/bob0_wins": comp(f),
                    f"{cell}/bob1_wins": comp(f) + 50,
                    f"{cell}/completeness_min": comp(f) / n,
                    f"{cell}/soundness_max": max(snd[s], 250) / n,
                    f"{cell}/n_alice": c[0],
                    f"{cell}/n_bob": c[1],
                    f"{cell}/n_vera": c[2],
                }
            )
    return rows


def _upper(k, n, level):  # the one-sided bound, from scipy's two-sided exact interval
    from scipy.stats import binomtest

    return binomtest(k, n).proportion_ci(1 - 2 * level, method="exact").high


def _lower(k, n, level):
    from scipy.stats import binomtest

    return binomtest(k, n).proportion_ci(1 - 2 * level, method="exact").low


def test_the_verdicts_bounds_are_one_sided_clopper_pearson_bounds():
    import experiments.stochastic_debate.budget as budget

    v = budget._verdict(100, [30], [70], 0.05, 0.025)
    assert v["completeness_lo"] == pytest.approx(_lower(70, 100, 0.05), rel=1e-9)
    assert v["soundness_hi"] == pytest.approx(_upper(30, 100, 0.05), rel=1e-9)


def test_frontier_decides_on_family_wise_bounds_of_pooled_counts(tmp_path):
    from dedebate.lab.sweep import experiment_figures

    def fails_below(x):
        return lambda f: 700 if f >= x or f == 0.125 else 550  # 1/8 holds again: ignored

    (e,) = frontier(_frontier_rows(fails_below(0.5), snd=(300, 300)))
    assert (e["K"], e["T"], e["factor"], e["counts"], e["stop"]) == (
        2,
        8,
        0.5,
        (500, 250, 1000),
        "unsafe",
    )
    assert [t["factor"] for t in e["tried"]] == [1.0, 0.5, 0.25]
    assert [t["verdict"] for t in e["tried"]] == ["safe", "safe", "unsafe"]  # 1100 of 2000
    lean = lean_defaults(2.0, 8).constants(2.0, 8)
    assert e["lean"] == (lean.n_alice, lean.n_bob, lean.n_vera)
    # seeds pooled: 780 of 2000, whose mean over seeds (0.39) the old rule passed; a safe
    # verdict takes every member's bound at alpha (no split), an unsafe one at alpha / 16
    # (4 members x 4 factors)
    (e,) = frontier(_frontier_rows(fails_below(0.5), snd=(380, 400)))
    t = e["tried"][0]
    assert (t["trials"], t["soundness_max"], t["completeness_min"]) == (2000, 0.39, 0.7)
    assert t["soundness_hi"] == pytest.approx(_upper(780, 2000, 0.05), abs=1e-9)
    assert t["soundness_hi"] > 0.4 and (e["factor"], e["stop"], "counts" in e) == (
        None,
        "undecided",
        False,
    )
    assert (
        frontier(_frontier_rows(fails_below(0.5), snd=(380, 400)), alpha=0.5)[0]["factor"] == 0.5
    )  # at 0.5 / 16 factor 1 would not be safe
    assert _upper(780, 2000, 0.5) < 0.4 < _upper(780, 2000, 0.5 / 16)
    (e,) = frontier(_frontier_rows(lambda f: 700 if f >= 0.5 else 575, snd=(300, 300)))
    assert (e["factor"], e["stop"]) == (0.5, "undecided")  # 1150 of 2000: not unsafe
    (e,) = frontier(_frontier_rows(lambda f: 700, snd=(428, 428)))  # Alice: 856 of 2000
    assert (e["factor"], e["stop"]) == (None, "undecided")  # surely above 2/5 only at 0.05 / 8
    assert _lower(856, 2000, 0.05 / 16) <= 0.4 < _lower(856, 2000, 0.05 / 8)
    assert _upper(1150, 2000, 0.05) < 0.6 < _upper(1150, 2000, 0.05 / 16)
    # exactly 3/5 (1200 of 2000) is undecided, not safe
    (e,) = frontier(_frontier_rows(lambda f: 700 if f >= 0.5 else 600, snd=(300, 300)))
    assert (e["factor"], e["stop"], e["tried"][-1]["completeness_min"]) == (0.5, "undecided", 0.6)
    (e,) = frontier(_frontier_rows(fails_below(2.0), snd=(300, 300)))  # factor 1 fails
    assert e["factor"] is None and "counts" not in e and e["stop"] == "unsafe"
    rows = _frontier_rows(fails_below(0.25), snd=(300, 300)) + _frontier_rows(
        fails_below(0.25), cell="K2_T64", snd=(300, 300)
    )
    assert [(x["factor"], x["stop"]) for x in frontier(rows)] == [(0.125, None)] * 2  # all safe
    other_k = [
        {**r, "K2_T8/trials": None}
        for r in _frontier_rows(fails_below(0.5), "K4_T8", snd=(300, 300))
    ]
    assert [x["factor"] for x in frontier(rows + other_k)] == [0.125, 0.125, 0.5]
    with pytest.raises(ValueError, match="alpha=1.5"):
        frontier(rows, alpha=1.5)
    # K's adversaries depend on its place in Ks: rows of another Ks are a cell of their own, so a
    # strong Alice there (450 of 1000 at every factor) is not averaged away by this Ks's rows
    strong = [{**r, "Ks": "[1, 2]"} for r in _frontier_rows(fails_below(0.25), snd=(450, 450))]
    mine = _frontier_rows(fails_below(0.25), snd=(100, 100))
    (alone,) = frontier(mine)
    assert [(e["Ks"], e["factor"], e["stop"]) for e in frontier(mine + strong)] == [
        ("[2]", alone["factor"], None),
        ("[1, 2]", None, "unsafe"),
    ]
    # the lab saves the experiment's figure (cells safe, unsafe and undecided at factor 1); a
    # failing hook costs only its figures
    rows += _frontier_rows(fails_below(2.0), "K1_T8", snd=(300, 300)) + _frontier_rows(
        fails_below(0.5), "K1_T64", snd=(380, 400)
    )
    assert [e["stop"] for e in frontier(rows)][:2] == ["unsafe", "undecided"]
    assert experiment_figures(exp, rows, tmp_path) == ["budget_frontier.png"]
    assert (tmp_path / "budget_frontier.png").stat().st_size > 0

    class Broken:
        NAME = "broken"

        @staticmethod
        def sweep_figures(rows):
            raise RuntimeError("no")

    assert experiment_figures(Broken, rows, tmp_path) == []


def test_frontier_takes_the_exact_best_responses_where_the_rows_carry_them():
    """At T <= 12 the rows carry every adversary's best (exact DP): a factor the zoo's Monte
    Carlo calls safe is unsafe where either best response breaks its bound, safe where both hold
    even when the Monte Carlo is undecided, and unsafe where the Monte Carlo is confidently so."""

    def with_exact(rows, comp, sound=lambda f: 0.35):
        return [
            r
            | {
                "K2_T8/exact_completeness": comp(r["scale"]),
                "K2_T8/exact_soundness": sound(r["scale"]),
            }
            for r in rows
        ]

    zoo_safe = _frontier_rows(lambda f: 700, snd=(300, 300))  # the zoo: safe at every factor
    (plain,) = frontier(zoo_safe)
    assert (plain["factor"], plain["exact"]) == (0.125, False)
    (e,) = frontier(with_exact(zoo_safe, lambda f: 0.65 if f >= 0.5 else 0.59))
    assert (e["factor"], e["stop"], e["exact"]) == (0.5, "unsafe", True)
    t = e["tried"][-1]
    assert (t["factor"], t["monte_carlo"], t["exact_holds"]) == (0.25, "safe", False)
    (e,) = frontier(with_exact(zoo_safe, lambda f: 0.65, lambda f: 0.35 if f >= 0.25 else 0.41))
    assert (e["factor"], e["stop"]) == (0.25, "unsafe")
    (e,) = frontier(with_exact(zoo_safe, lambda f: math.nan))  # a NaN holds nothing
    assert (e["factor"], e["stop"]) == (None, "unsafe")
    undecided = _frontier_rows(lambda f: 700 if f >= 0.5 else 575, snd=(300, 300))
    assert frontier(undecided)[0]["stop"] == "undecided"  # the zoo alone: 1/4 undecided
    (e,) = frontier(with_exact(undecided, lambda f: 0.65))
    assert (e["factor"], e["stop"], e["tried"][2]["monte_carlo"]) == (0.125, None, "undecided")
    # the rows' float64 decision wins over their float32 values (float32(0.6) reads as >= 3/5)
    flagged = [
        r | {"K2_T8/exact_holds": int(r["scale"] >= 0.5)}
        for r in with_exact(zoo_safe, lambda f: 0.6)
    ]
    assert (
        frontier(flagged)[0]["factor"] == 0.5
        and frontier(with_exact(zoo_safe, lambda f: 0.6))[0]["factor"] == 0.125
    )
    one_seed_fails = [  # every seed's float64 decision must hold
        r | {"K2_T8/exact_holds": int(r["seed"] == 0)} for r in with_exact(zoo_safe, lambda f: 0.65)
    ]
    (e,) = frontier(one_seed_fails)
    assert (e["factor"], e["stop"]) == (None, "unsafe")
    unsafe = _frontier_rows(lambda f: 700 if f >= 0.5 else 500, snd=(300, 300))
    (e,) = frontier(with_exact(unsafe, lambda f: 0.65))
    assert (e["factor"], e["stop"], e["tried"][-1]["exact_holds"]) == (0.5, "unsafe", True)


@pytest.fixture(scope="module")
def exact_k2_t8():
    """Per factor 1/8 and 1/16 of Lean's counts at K = 2, T = 8: the exact DP's acceptance of
    every soundness-zoo Alice (vs honest Bob, no-instance) and honest Alice's win against every
    completeness-zoo Bob and honest Bob (yes-instance)."""
    from dedebate.agents.stochastic_players import (
        completeness_zoo,
        honest_alice,
        honest_bob,
        soundness_zoo,
    )
    from dedebate.exact.acceptance import acceptance_exact, acceptance_exact_many
    from dedebate.machines.fixtures import fixture_for_k
    from dedebate.protocols.stochastic import make_vera

    _, m_no, k_decl = fixture_for_k(K, T, exp.Config().p_no)
    _, m_yes, _ = fixture_for_k(K, T, exp.Config().p_yes)
    out = {}
    for f in (1 / 8, 1 / 16):
        c = lean_defaults(k_decl, T).constants(k_decl, T).scaled(f)
        bob, vera = honest_bob(c), make_vera(c)
        out[f] = (
            c,
            acceptance_exact_many(m_no, soundness_zoo(c)[1], bob, vera),
            [
                acceptance_exact(m_yes, honest_alice(c), b, vera)
                for b in completeness_zoo(c)[1] + [bob]
            ],
        )
    return out


@pytest.mark.parametrize("luck", [0.5, 0.05])
def test_budget_frontier_calls_neither_small_factor_safe_at_k2_t8(exact_k2_t8, luck):
    """Rows of the shipped sweep's size whose win counts are quantiles of the exact DP's laws
    (``luck`` 0.5: the medians; 0.05: every member as lucky as the frontier's 95% allows, Alices
    low and Bobs high): neither 1/16 (honest-estimate Alice: 0.4022 > 2/5, exactly) nor 1/8 (the
    Bob that aborts past 0.9 tau_V holds honest Alice to 0.5925 < 3/5, exactly) is safe. Before
    the threshold Bobs joined the zoo, 1/8 was called safe."""
    from scipy.stats import binom

    from dedebate.lab.config import load_config

    cfg = load_config(REPO / "configs" / "sweeps" / "budget_frontier.yaml", {exp.NAME: exp})
    n = cfg.params.trials
    rows = []
    for f, (c, snd, comp) in exact_k2_t8.items():
        a = [int(binom.ppf(luck, n, p)) for p in snd]
        b = [int(binom.isf(luck, n, p)) for p in comp]
        rows.append(
            {
                "point": 0,
                "seed": 0,
                "group": 0,
                "scale": f,
                "Ks": "[2]",
                f"{CELL}/trials": n,
                f"{CELL}/completeness_min": min(b) / n,
                f"{CELL}/soundness_max": max(a) / n,
                f"{CELL}/n_alice": c.n_alice,
                f"{CELL}/n_bob": c.n_bob,
                f"{CELL}/n_vera": c.n_vera,
                **{f"{CELL}/alice{i}_wins": k for i, k in enumerate(a)},
                **{f"{CELL}/bob{j}_wins": k for j, k in enumerate(b)},
            }
        )
    assert max(exact_k2_t8[1 / 16][1]) == pytest.approx(0.4022, abs=1e-4)
    assert min(exact_k2_t8[1 / 8][2]) == pytest.approx(0.5925, abs=1e-4)
    (e,) = frontier(rows)
    assert (e["factor"], e["stop"]) == (None, "undecided"), e["tried"]


@pytest.mark.parametrize("alice_wins, factor", [(370, None), (350, 0.25)])
def test_scale_search_tests_each_factor_at_the_bonferroni_level(monkeypatch, alice_wins, factor):
    """The Monte-Carlo walk up from the exact DP's factor keeps the first safe one, so each of the
    3 factors it may try is tested at 0.05/3: 370 of 1,000 (one-sided upper bound 0.395 at 0.05,
    0.402 at 0.05/3) is safe at no factor, 350 of 1,000 at the first."""
    import experiments.stochastic_debate.budget as budget

    class Opt:
        params, value = {"theta": None}, 0.0

    monkeypatch.setattr(budget, "_optimise_alice", lambda *a: Opt())
    monkeypatch.setattr(budget, "best_responses", lambda *a: (0.8, 0.2))  # safe exactly
    monkeypatch.setattr(budget, "zoo_cell", lambda *a: (None, ["a"], ["honest"]))
    cells = []

    def measure(static, d, key, n, ma, honest, lanes):
        cells.append(n)
        return {"wins": [alice_wins, 900]}

    monkeypatch.setattr(budget, "measure_cell", measure)
    cfg = exp.Config(scale_factors=(1.0, 0.5, 0.25), scale_T=4, Ts=(4,), trials=1000)
    search = budget.scale_search(cfg, 2, 0, jax.random.key(0), None, 1024)
    assert search["f_exact"] == 0.25 and search["factor"] == factor
    assert cells == [1000] * (3 if factor is None else 1)
    if factor is not None:
        c_lo, s_hi = search["bounds"]
        assert s_hi == pytest.approx(_upper(350, 1000, 0.05 / 3)) and s_hi < 2 / 5 < c_lo


@pytest.mark.parametrize(
    "comp, sound, holds", [(0.61, 0.39, True), (0.5858, 0.3867, False), (0.61, 0.41, False)]
)
def test_a_scale_search_row_holds_only_where_both_bounds_hold(comp, sound, holds):
    import experiments.stochastic_debate.budget as budget

    c = lean_defaults(2.0, 8).constants(2.0, 8)
    assert budget._row(2, 1.0, "exact best responses", comp, sound, c)["holds"] is holds


def test_the_points_float64_decision_needs_both_best_responses():
    """At 1/8 of Lean's counts (K = 2, T = 8) soundness holds exactly, completeness not."""
    sizes = {"trials": 100, "es_generations": 0, "es_population": 2, "paper": False}
    cfg = exp.Config(Ks=(2,), Ts=(8,), scale=0.125, scale_factors=(), **sizes)
    dynamic, _ = exp.point(cfg)
    comp, sound = dynamic["exact"][CELL]
    assert (comp, sound) == pytest.approx((0.5858, 0.3867), abs=1e-4)
    assert int(dynamic["exact_holds"][CELL]) == 0


def test_a_cells_rows_are_bonferroni_over_its_zoo():
    from dedebate.lab.claim_stats import binomial_p_value, exact_interval

    args = (2, 8, "f", "lean", (0.7, 0.3), (0.6, 0.4), ["a0", "a1"], ["honest", "b1", "b2"])
    (comp, sound), _ = exp.cell_claims(*args, [100, 120], [300, 216, 290], 400)
    # the worst of 3 Bobs, 216 of 400 against >= 0.6, tested at 0.05 / 3 (alone it would fail)
    assert comp.p_value == pytest.approx(3 * binomial_p_value(216, 400, 0.6, ">="), rel=1e-12)
    assert comp.passed and (comp.lo, comp.hi) == exact_interval(216, 400, 1 - 0.05 / 3)[1:]
    assert binomial_p_value(216, 400, 0.6, ">=") < 0.05
    # the worst of 2 Alices, 120 of 400 against <= 0.4
    assert sound.p_value == pytest.approx(min(1, 2 * binomial_p_value(120, 400, 0.4, "<=")))


def test_honest_alices_cost_row_needs_the_constant_and_the_slope():
    from experiments.stochastic_debate.budget import lean_n_vera

    def q(T, c):  # honest Alice's queries at c K^2 T ln(200 T), K = 2
        alice, n_vera = c * 4 * T * math.log(200 * T), lean_n_vera(2.0, T)
        row = {"K": 2, "T": T, "constants": "lean", "n_vera": n_vera, "aborts": 0}
        return row | {"vera_max": 1.0, "alice": alice}

    name = "honest Alice's queries = c K^2 T ln(200T) with c ~= 5000"
    _, checks, _ = exp.cost_rows((2,), (8, 256), [q(8, 5000.0), q(256, 5000.0)])
    assert checks[name][0]
    _, checks, fit = exp.cost_rows((2,), (8, 256), [q(8, 2500.0), q(256, 5000.0)])
    assert abs(fit["c"] / 5000 - 1) < 0.01 and fit["loglog_slope"] == pytest.approx(1.18, abs=0.01)
    assert not checks[name][0]  # c within 1%, but the slope is not 1


def test_rows_at_scaled_counts_are_findings_not_theorems():
    """Lean's and the paper's bounds are proven at their own counts: at ``scale`` < 1 a cell's
    rows are findings (they gate nothing), at 1 they gate."""
    args = (2, 8, "F2", "lean", (0.667, 0.333), (0.6402, 0.3956), ["a"], ["b"])
    wins = (np.array([100]), np.array([250]))
    gated, _ = exp.cell_claims(*args, *wins, 300)
    scaled, _ = exp.cell_claims(*args, *wins, 300, 0.125)
    assert [c.finding for c in gated] == [False, False]
    assert [c.finding for c in scaled] == [True, True]
    assert all("counts scaled by 0.125" in c.note for c in scaled)
    assert [(c.value, c.lo, c.hi) for c in gated] == [(c.value, c.lo, c.hi) for c in scaled]


def test_each_cell_gates_on_the_lean_bounds_of_its_own_instances():
    """The lean cells' bounds are spec DED 5.3's formulas, written out here, at the exact P_M of
    the cell's instances: completeness (1-v)(P_M(1) - K c - (1 - (1-q)^T)) on the yes-instance,
    acceptance at most 1 - (1-v)(1-q)^T (P_M(0) - K b) on the no-instance (0.6402 and 0.3956 at
    K = 2, T = 8); the paper's cells gate at 3/5 and 2/5."""
    from experiments.stochastic_debate.budget import cells

    cfg = exp.Config(**{**QUICK, "Ts": (8, 12), "paper": True})
    for T in cfg.Ts:
        _, m_no, m_yes, (p_yes, p_no), sets = cells(cfg, K, T)
        assert (p_yes, p_no) == (m_yes.output_prob_dp(), m_no.output_prob_dp())
        assert p_no < 1 / 2 < p_yes
        lp = lean_defaults(float(K), T)
        stay = (1 - lp.q) ** T
        comp = (1 - lp.v) * (p_yes - K * lp.c - (1 - stay))
        sound = 1 - (1 - lp.v) * stay * ((1 - p_no) - K * lp.b)
        (_, lean, _, got), (_, paper, _, fixed) = sets
        assert (lean, paper, fixed) == ("lean", "paper", (3 / 5, 2 / 5))
        np.testing.assert_allclose(got, (comp, sound), rtol=1e-12)
        assert sound < 1 / 2 < comp
