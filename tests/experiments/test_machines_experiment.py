"""``experiments/machines.py``: a sweep over the perturbation sizes and the fixtures' target
P_M(1) x seeds is one compiled program; the quick run is that sweep's point (the quick config)
run alone (by the lab, with the row's documented key ``point_key``), through the same program (one
compile for both), equal to its row bit for bit; its claims pass; the float32 Lipschitz estimate
of the swept function agrees with the host float64 one; bad configs are rejected."""

from __future__ import annotations

import pytest

import experiments.machines as exp
from dedebate.lab.config import ConfigError, load_config
from tests.conftest import REPO, assert_shipped_sweeps_plot
from tests.fakes import sweep_then_run_alone

QUICK = exp.SIZES["quick"]
EPS = [list(QUICK["eps"]), [0.002, 0.1]]  # the quick point's eps first, then another


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The sweep eps x high x 2 seeds at the quick size (one row per call), then its point
    (quick eps, high=True: the quick config) at seed 2 run alone with the row's key:
    ``(sweep record, point, seed, run result, context, traces of point's fn after both)``."""
    return sweep_then_run_alone(
        exp,
        tmp_path_factory.mktemp("machines"),
        axes={"eps": EPS, "high": [True, False]},
        pick=lambda v: v["eps"] == QUICK["eps"] and v["high"] is True,
        seed=1,
        seeds=2,
        run_seed=2,
    )


@pytest.mark.slow  # one compile of the quick program, shared by the sweep and the run
def test_lipschitz_sweep_compiles_once_and_the_quick_run_is_its_row(quick):
    rec, pt, seed, result, ctx, traces = quick
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["eps", "high"] and res["groups"] == 1
    assert res["compilations"] == 1 and res["rows"] == 8 == len(rec.rows)
    assert traces == 1  # the run alone reused the sweep's program: no second compile
    assert pt.cfg == exp.Config(**QUICK)
    alone = result.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert_shipped_sweeps_plot("machines", row)
    assert len(alone) == 7 * 15 and {m: row[m] for m in alone} == alone
    other = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] != seed)
    assert sum(other[m] != alone[m] for m in alone) >= 7  # the seed moves every fixture's counts
    for fx in ("F1", "F2", "F3", "majority", "AND", "OR", "meta-analysis"):
        host = result.metrics[fx]  # the exact rows' float64 numbers (host, outside fn)
        assert alone[f"{fx}/ones"] == round(host["p1_mc"] * QUICK["trials"])
        assert alone[f"{fx}/K_empirical"] == pytest.approx(host["K_empirical"], rel=1e-5)
        assert alone[f"{fx}/K_hybrid"] == pytest.approx(host["K_hybrid"], rel=1e-5)
        for family in ("uniform", "per-step"):  # no search in these two: the same perturbations
            assert alone[f"{fx}/K_{family}"] == pytest.approx(host[f"K_{family}"], rel=1e-5)
        assert alone[f"{fx}/p1_tree"] == pytest.approx(host["p1_enumeration"], abs=1e-6)
        assert alone[f"{fx}/K_empirical"] <= alone[f"{fx}/K_proven"] * (1 + 1e-6)


def test_quick_run_claims_pass_and_plot_is_saved(quick):
    _, _, _, result, ctx, _ = quick
    names = [c.claim for c in result.claims]
    assert len(names) == 7 * 3 + 3
    assert sum("Monte-Carlo count" in n for n in names) == 7
    assert sum("Lipschitz constant <= proven K" in n for n in names) == 7
    assert sum("hybrid bound <= proven K" in n for n in names) == 7
    assert sum("reaches the exact hybrid bound" in n for n in names) == 3
    failed = [(c.claim, c.value, c.bound) for c in result.claims if not c.passed]
    assert not failed
    rows = {r["fixture"]: r for r in result.tables["fixtures"]}
    assert rows["F2"]["K_empirical"] >= 1.0 and rows["F3"]["K_empirical"] >= 4.0
    for r in rows.values():
        assert r["K_empirical"] <= r["K_hybrid"] * (1 + 1e-9) <= r["K_proven"] * (1 + 2e-6)
        assert r["p1_mc_lo"] <= r["p1_enumeration"] <= r["p1_mc_hi"]
    assert result.plots == ["lipschitz_empirical_vs_proven.png"]
    assert (ctx.plots_dir / result.plots[0]).stat().st_size > 0
    # the lab logs each table row as a step and counts point, host and report on one bar
    assert [(step, m["fixtures/K_empirical"]) for step, m in ctx.logged] == [
        (i, r["K_empirical"]) for i, r in enumerate(result.tables["fixtures"])
    ]
    assert ctx.bars[0].n == ctx.bars[0].total == 3


def test_config_file_loads_and_size_presets_apply():
    cfg = load_config(REPO / "configs" / "machines.yaml", {exp.NAME: exp})
    assert cfg.params == exp.Config()
    quick = load_config(REPO / "configs" / "machines.yaml", {exp.NAME: exp}, ["size=quick"])
    assert quick.params == exp.Config(**exp.SIZES["quick"])
    # The command line wins over the size preset and the file.
    pinned = load_config(
        REPO / "configs" / "machines.yaml", {exp.NAME: exp}, ["size=quick", "params.T=6"]
    )
    assert pinned.params == exp.Config(**{**exp.SIZES["quick"], "T": 6})


@pytest.mark.parametrize(
    "override,match",
    [
        ("params.T=3", "params.T=3"),
        ("params.T=19", "params.T=19"),
        ("params.trials=10", "params.trials=10"),
        ("params.eps=[0.0]", "params.eps"),
        ("params.n_random=-1", "params.n_random=-1"),
        ("params.ascent_iters=0", "params.ascent_iters=0"),
    ],
)
def test_bad_config_values_are_rejected(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config(REPO / "configs" / "machines.yaml", {exp.NAME: exp}, [override])
