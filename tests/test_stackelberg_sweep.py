"""``experiments/stackelberg.py`` as a sweep (``point`` / ``DYNAMIC``): a grid over n_B and A's
learning rate is one compiled program, and a sweep row equals the same pair trained alone by
``run``'s training path with the row's documented key (``point_key``), bit for bit: ``run`` trains
it as seed 0 of its main schedule through the checkpointed chunked driver (the chunk program of
each schedule, vmapped over seeds), the sweep in one vmapped call (at ``sweep.batch = 1``). The
two are two compiled programs by design (a run stops for a checkpoint after every chunk; a swept
call cannot): docs/prover-estimator-debate.md, section 8.5.1."""

from __future__ import annotations

import dataclasses

import pytest

import experiments.stackelberg as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from tests.fakes import FakeContext, count_point_traces

# 6 A updates in 2 chunks on 2 trees of depth 1, tiny players, one seed per schedule
TINY = {"seeds": 1, "steps": 6, "chunks": 2, "n_b_values": [1, 2], "main_n_b": 2, "n_trees": 2,
        "hidden_a": [4], "hidden_b": [4], "unstable_part": False, "warm_seeds": 0}


def test_point_refuses_the_host_warm_start():
    cfg = exp.Config(**{**TINY, "n_b_values": (1, 2), "hidden_a": (4,), "hidden_b": (4,)})
    with pytest.raises(ValueError, match="b_warm_start=True"):
        exp.point(dataclasses.replace(cfg, b_warm_start=True))


@pytest.mark.slow  # two compiles of the tiny training (the sweep's program, the run's chunk)
def test_rates_sweep_compiles_once_and_a_row_is_the_run_alone(tmp_path, monkeypatch):
    real_point = exp.point
    traces = count_point_traces(monkeypatch, exp)  # traces of the sweep's fn (once per compile)
    raw = {"experiment": exp.NAME, "seed": 0, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": TINY,
           "sweep": {"seeds": 2, "axes": {"main_n_b": [1, 2], "lr_a": [0.03, 0.3]},
                     "batch": 1, "plots": False}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["main_n_b", "lr_a"] and res["groups"] == 1
    # batch 1: every row in its own call of the one program, as the run trains its one seed (at
    # other batch sizes XLA's CPU code may round the last bit differently, which training grows)
    assert res["compilations"] == 1 == traces[0] and res["rows"] == 8 == len(rec.rows)
    monkeypatch.setattr(exp, "point", real_point)

    # the point n_B = 1 (the group runs the inner loop to n_B = 2: masked), seed 1, trained alone
    # by run()'s training path (the chunked driver, seed 0 of each schedule, at the row's key)
    pt = next(p for p in plan(exp, cfg).points
              if p.values == {"main_n_b": 1, "lr_a": 0.3})
    seed = 1
    ctx = FakeContext(tmp_path / "alone", seed=seed, name=exp.NAME)
    ctx.key = point_key(exp.NAME, seed, pt.cfg)
    trained, _ = exp.train_parts(pt.cfg, ctx)
    alone = exp.point_metrics(pt.cfg, trained["stable"].mon)
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert len(alone) == 9 and {m: row[m] for m in alone} == alone
    # the dynamic numbers reach the training: every point of seed 1 ends at another payoff
    finals = {r["point"]: r["final_u_a"] for r in rec.rows if r["seed"] == seed}
    assert len(set(finals.values())) == 4
    for r in rec.rows:
        assert 0 <= r["converged_at"] <= 6 and r["converged"] == int(r["converged_at"] < 6)
        assert r["final_u_a_rel"] == pytest.approx(r["final_u_a"] / 0.25, rel=1e-6)
