"""``experiments/machines.py`` as a sweep (``point`` / ``DYNAMIC``): a grid over the perturbation
size and the fixtures' target P_M(1) x seeds is one compiled program; a sweep row equals the
same point run alone by ``run`` with the row's documented key (``point_key``) (bit for bit but
for float32 reduction order under vmap, see the test); and
the float32 Lipschitz estimate of the swept function agrees with the host float64 one."""

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
    real_point = exp.point
    traces = count_point_traces(monkeypatch, exp)  # traces of the sweep's fn (once per compile)
    raw = {"experiment": exp.NAME, "seed": 1, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": SMALL,
           "sweep": {"seeds": 2, "axes": {"eps": EPS, "high": [True, False]}, "plots": False}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["eps", "high"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces[0] and res["rows"] == 8 == len(rec.rows)
    monkeypatch.setattr(exp, "point", real_point)

    # the point eps=0.05, high=False, seed 2, run alone by run() with the row's key
    pt = next(p for p in plan(exp, cfg).points
              if p.values["eps"] == (0.05,) and p.values["high"] is False)
    seed = 2
    ctx = FakeContext(tmp_path / "alone", seed=seed, name=exp.NAME)
    ctx.key = point_key(exp.NAME, seed, pt.cfg)
    result = exp.run(pt.cfg, ctx)
    alone = result.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert len(alone) == 7 * 15 and set(alone) <= set(row)
    # bit for bit, except that XLA may order a float32 reduction of the Lipschitz estimator
    # differently for a run axis of 8 than of 1 (seen: one ulp in one K_random of 105 metrics)
    exact = {m for m in alone if not m.split("/")[1].startswith(("K_", "p1_tree"))}
    assert len(exact) == 7 * 5 and {m: row[m] for m in exact} == {m: alone[m] for m in exact}
    for m in set(alone) - exact:
        assert row[m] == pytest.approx(alone[m], rel=5e-7, abs=0), m
    assert sum(row[m] == alone[m] for m in alone) >= len(alone) - 2
    for fx in ("F1", "F2", "F3", "majority", "AND", "OR", "meta-analysis"):
        host = result.metrics[fx]  # the exact rows' float64 numbers (host, outside fn)
        assert alone[f"{fx}/ones"] == round(host["p1_mc"] * SMALL["trials"])
        assert alone[f"{fx}/K_empirical"] == pytest.approx(host["K_empirical"], rel=1e-5)
        assert alone[f"{fx}/K_hybrid"] == pytest.approx(host["K_hybrid"], rel=1e-5)
        assert alone[f"{fx}/p1_tree"] == pytest.approx(host["p1_enumeration"], abs=1e-6)
        assert alone[f"{fx}/K_empirical"] <= alone[f"{fx}/K_proven"] * (1 + 1e-6)
