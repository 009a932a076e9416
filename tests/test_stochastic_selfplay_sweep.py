"""``experiments/stochastic_selfplay.py`` as a sweep (``point`` / ``DYNAMIC``, a chunked point):
the learning-rate grid x seeds compiles each of its programs (init, chunk, finish) once, and the
same point run alone with ``run`` at the row's documented key (``point_key``) trains through those
same programs (chunked, checkpointed), compiling nothing more: its ``metrics["point"]`` (float64)
is the sweep row before the row's float32 rounding, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import experiments.stochastic_selfplay as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from tests.fakes import FakeContext, count_chunked_traces

TINY = {"T": 3, "seeds": 2, "steps": 20, "log_every": 10, "chunks": 2, "hidden": 4, "n_b": 2,
        "mc_trials": 0, "ablate_tail": False, "n_b_sweep": []}


@pytest.mark.slow  # one compile of the tiny training's programs, shared by the sweep and the run
def test_rate_sweep_compiles_once_and_a_row_is_the_report_alone(tmp_path, monkeypatch):
    traces = count_chunked_traces(monkeypatch, exp)  # traces of point's programs (per compile)
    raw = {"experiment": exp.NAME, "seed": 1, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": TINY,
           "sweep": {"seeds": 2, "axes": {"lr_a": [0.01, 0.05], "n_b": [1, 3]}, "batch": 1,
                     "plots": False}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["lr_a", "n_b"] and res["groups"] == 1
    # init, the one chunk length (2 chunks of 1 period) and finish: each compiled once
    assert res["compilations"] == 3 and res["rows"] == 8 == len(rec.rows)
    assert traces == {"init": 1, ("chunk", 1): 1, "finish": 1}

    # the point lr_a = 0.05, n_b = 3, seed 1 alone through run (chunked training, report code)
    pt = next(p for p in plan(exp, cfg).points if p.values == {"lr_a": 0.05, "n_b": 3})
    ctx = FakeContext(tmp_path / "alone", seed=1, name=exp.NAME)
    ctx.key = point_key(exp.NAME, 1, pt.cfg)
    report = exp.run(pt.cfg, ctx)
    # the run trained through the sweep's programs: nothing traced (nor compiled) again
    assert traces == {"init": 1, ("chunk", 1): 1, "finish": 1}
    alone = report.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == 1)
    assert set(alone) <= set(row)
    # bit for bit: the row is the run's float64 measurement of the same players, as float32
    assert {k: row[k] for k in alone} == {k: float(np.float32(v)) for k, v in alone.items()}
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
