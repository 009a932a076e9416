"""``experiments/stochastic_selfplay.py`` as a sweep (``point`` / ``DYNAMIC``): the learning-rate
grid x seeds is one compiled program, and a sweep row holds the numbers of the report's
``metrics["point"]`` for the same point run alone with ``run`` (the chunked, checkpointed
training and the report's host measurement) at the row's documented key (``point_key``), to
float32 training's last bits (not bit for bit: see the test)."""

from __future__ import annotations

import pytest

import experiments.stochastic_selfplay as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from tests.fakes import FakeContext, count_point_traces

TINY = {"T": 3, "seeds": 2, "steps": 20, "log_every": 10, "chunks": 2, "hidden": 4, "n_b": 2,
        "mc_trials": 0, "ablate_tail": False, "n_b_sweep": []}


@pytest.mark.slow  # two compiles of the training at tiny sizes: the sweep's and the run's
def test_rate_sweep_compiles_once_and_a_row_is_the_report_alone(tmp_path, monkeypatch):
    real_point = exp.point
    traces = count_point_traces(monkeypatch, exp)
    raw = {"experiment": exp.NAME, "seed": 1, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": TINY,
           "sweep": {"seeds": 2, "axes": {"lr_a": [0.01, 0.05], "n_b": [1, 3]}, "plots": False}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["lr_a", "n_b"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces[0] and res["rows"] == 8 == len(rec.rows)
    monkeypatch.setattr(exp, "point", real_point)

    # the point lr_a = 0.05, n_b = 3, seed 1 alone through run (chunked training, report code)
    pt = next(p for p in plan(exp, cfg).points if p.values == {"lr_a": 0.05, "n_b": 3})
    ctx = FakeContext(tmp_path / "alone", seed=1, name=exp.NAME)
    ctx.key = point_key(exp.NAME, 1, pt.cfg)
    report = exp.run(pt.cfg, ctx)
    alone = report.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == 1)
    assert set(alone) <= set(row)
    # not bit for bit: the swept program batches the rates over rows (Adam's hyperparameters
    # and the n_B loop become per-row vectors), which moves float32 training in the last bits
    for k, v in alone.items():
        assert row[k] == pytest.approx(v, abs=1e-5), k
    # the report's rows read the same numbers
    assert report.claims[0].value == alone["honest_alice_vs_bob_min"]
    assert report.claims[1].value == alone["alice_vs_honest_bob_max"]
    assert [t["value"] for t in report.tables["seeds"]] == [
        alone[f"{c}/s{s}/value"] for c in ("yes", "no") for s in range(2)]
    # the rows differ in the swept rates (a sweep that ignored them would repeat one row)
    assert len({r["yes/s0/value"] for r in rec.rows}) == 8
    assert all(0.0 <= r["no/value_min"] <= r["no/value_mean"] <= r["no/value_max"] <= 1.0
               for r in rec.rows)

    # the sweep's figure: acceptance and gap vs lr_a (two instances x one line per lr_b)
    fig = exp.sweep_figures(rec.rows)["selfplay_rates"]
    assert [len(ax.get_lines()) for ax in fig.axes] == [4, 2]
