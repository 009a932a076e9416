"""``experiments/stackelberg.py`` as a sweep (``point`` / ``DYNAMIC``, a chunked point): a grid
over n_B and A's learning rate compiles each of its programs (init, chunk, finish) once, and a
run of the same point at the row's documented key (``point_key``) trains its pairs through those
same programs, chunk by chunk through the checkpointed driver, tracing nothing again: its
seed-0 pair of the main schedule is the sweep row, bit for bit (at ``sweep.batch = 1``)."""

from __future__ import annotations

import dataclasses

import pytest

import experiments.stackelberg as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from tests.fakes import FakeContext, count_chunked_traces

# 6 A updates in 2 chunks on 2 trees of depth 1, tiny players, one seed per schedule
TINY = {"seeds": 1, "steps": 6, "chunks": 2, "n_b_values": [1, 2], "main_n_b": 2, "n_trees": 2,
        "hidden_a": [4], "hidden_b": [4], "unstable_part": False, "warm_seeds": 0}


def test_point_refuses_the_host_warm_start():
    cfg = exp.Config(**{**TINY, "n_b_values": (1, 2), "hidden_a": (4,), "hidden_b": (4,)})
    with pytest.raises(ValueError, match="b_warm_start=True"):
        exp.point(dataclasses.replace(cfg, b_warm_start=True))


@pytest.mark.slow  # one compile of the tiny training's programs, shared by sweep and run
def test_rates_sweep_compiles_once_and_a_row_is_the_run_alone(tmp_path, monkeypatch):
    traces = count_chunked_traces(monkeypatch, exp)  # traces of point's programs (per compile)
    raw = {"experiment": exp.NAME, "seed": 0, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": TINY,
           "sweep": {"seeds": 2, "axes": {"main_n_b": [1, 2], "lr_a": [0.03, 0.3]},
                     "batch": 1, "plots": False}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["main_n_b", "lr_a"] and res["groups"] == 1
    # batch 1: every row in its own call, as the run trains each of its schedules
    assert res["compilations"] == 3 and res["rows"] == 8 == len(rec.rows)
    assert traces == {"init": 1, ("chunk", 3): 1, "finish": 1}

    # the point n_B = 1, seed 1, trained alone by run()'s training path (the chunked driver,
    # every schedule a row of the point's programs, at the row's key)
    pt = next(p for p in plan(exp, cfg).points
              if p.values == {"main_n_b": 1, "lr_a": 0.3})
    seed = 1
    ctx = FakeContext(tmp_path / "alone", seed=seed, name=exp.NAME)
    ctx.key = point_key(exp.NAME, seed, pt.cfg)
    trained, _ = exp.train_parts(pt.cfg, ctx)
    assert traces == {"init": 1, ("chunk", 3): 1, "finish": 1}  # nothing traced again
    alone = exp.point_metrics(pt.cfg, trained["stable"].mon)
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert len(alone) == 9 and {m: row[m] for m in alone} == alone
    # the dynamic numbers reach the training: every point of seed 1 ends at another payoff
    finals = {r["point"]: r["final_u_a"] for r in rec.rows if r["seed"] == seed}
    assert len(set(finals.values())) == 4
    for r in rec.rows:
        assert 0 <= r["converged_at"] <= 6 and r["converged"] == int(r["converged_at"] < 6)
        assert r["final_u_a_rel"] == pytest.approx(r["final_u_a"] / 0.25, rel=1e-6)
