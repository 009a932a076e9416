"""``experiments/machines.py`` as a sweep (``point`` / ``DYNAMIC``): a grid over the perturbation
size and the fixtures' target P_M(1) x seeds is one compiled program; a run alone (``run``, with
the row's documented key ``point_key``) goes through the same program (no second compile) and
equals its sweep row bit for bit; and the float32 Lipschitz estimate of the swept function agrees
with the host float64 one."""

from __future__ import annotations

import pytest

import experiments.machines as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from tests.fakes import FakeContext, count_point_traces

SMALL = {"T": 4, "trials": 100, "n_random": 1, "ascent_iters": 2}
EPS = [[0.001], [0.05]]


@pytest.mark.slow
def test_lipschitz_sweep_compiles_once_and_a_row_is_the_run_alone(tmp_path, monkeypatch):
    traces = count_point_traces(monkeypatch, exp)  # traces of the sweep's fn (once per compile)
    raw = {"experiment": exp.NAME, "seed": 1, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": SMALL,
           "sweep": {"seeds": 2, "axes": {"eps": EPS, "high": [True, False]}, "plots": False,
                     "batch": 1}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["eps", "high"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces[0] and res["rows"] == 8 == len(rec.rows)

    # the point eps=0.05, high=False, seed 2, run alone by run() with the row's key: the one-point
    # case of the sweep, so it reuses the sweep's program (one row per call) and compiles nothing
    pt = next(p for p in plan(exp, cfg).points
              if p.values["eps"] == (0.05,) and p.values["high"] is False)
    seed = 2
    ctx = FakeContext(tmp_path / "alone", seed=seed, name=exp.NAME)
    ctx.key = point_key(exp.NAME, seed, pt.cfg)
    result = exp.run(pt.cfg, ctx)
    assert traces[0] == 1
    alone = result.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert len(alone) == 7 * 15 and {m: row[m] for m in alone} == alone
    other = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] != seed)
    assert sum(other[m] != alone[m] for m in alone) >= 7  # the seed moves every fixture's counts
    for fx in ("F1", "F2", "F3", "majority", "AND", "OR", "meta-analysis"):
        host = result.metrics[fx]  # the exact rows' float64 numbers (host, outside fn)
        assert alone[f"{fx}/ones"] == round(host["p1_mc"] * SMALL["trials"])
        assert alone[f"{fx}/K_empirical"] == pytest.approx(host["K_empirical"], rel=1e-5)
        assert alone[f"{fx}/K_hybrid"] == pytest.approx(host["K_hybrid"], rel=1e-5)
        assert alone[f"{fx}/p1_tree"] == pytest.approx(host["p1_enumeration"], abs=1e-6)
        assert alone[f"{fx}/K_empirical"] <= alone[f"{fx}/K_proven"] * (1 + 1e-6)
