"""``experiments/deterministic_debate.py`` as a sweep (``point`` / ``DYNAMIC`` / ``inputs``): a
grid over the fraction of ORACLE steps x seeds is one compiled program, and a sweep row equals the
same point run alone by ``run`` with the row's documented key (``point_key``), bit for bit."""

from __future__ import annotations

import pytest

import experiments.deterministic_debate as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from dedebate.machines.configurations import clog2
from tests.fakes import FakeContext, count_point_traces

# one T (= check_T: every claimed transcript), one complement pair of machines, no random or
# fixed B; window = T, so the register and full-tape Figure 3 grids are one
TINY = {"n_machines": 2, "n_inputs": 1, "deps": [2], "dep_window": 2, "window": 8,
        "check_T": 8, "cost_log2": [3], "n_random": 0, "fixed_bob_max_T": 0,
        "exhaustive_fig3": False, "witness_instances": 2}


@pytest.mark.slow  # two compiles of the tiny grids (~13 CPU-s on 2 cores): the sweep and run
def test_oracle_frac_sweep_compiles_once_and_a_row_is_the_run_alone(tmp_path, monkeypatch):
    real_point = exp.point
    traces = count_point_traces(monkeypatch, exp)  # traces of the sweep's fn (once per compile)
    raw = {"experiment": exp.NAME, "seed": 0, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": TINY,
           "sweep": {"seeds": 2, "axes": {"oracle_frac": [0.0, 1.0]}, "plots": False}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["oracle_frac"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces[0] and res["rows"] == 4 == len(rec.rows)
    monkeypatch.setattr(exp, "point", real_point)

    # the point oracle_frac = 1, seed 1, run alone by run() with the row's key
    pt = next(p for p in plan(exp, cfg).points if p.values["oracle_frac"] == 1.0)
    seed = 1
    ctx = FakeContext(tmp_path / "alone", seed=seed, name=exp.NAME)
    ctx.key = point_key(exp.NAME, seed, pt.cfg)
    result = exp.run(pt.cfg, ctx)
    assert all(c.passed for c in result.claims), [c.claim for c in result.claims if not c.passed]
    alone = result.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert len(alone) == 3 * (7 + 9) + 2 and {m: row[m] for m in alone} == alone
    assert result.tables["costs"] == exp.cost_table(row)  # the report's table is the row's
    # Fig 4's honest debate checks the last step (DET): (1 + l) positions and a_T-1, exactly
    assert row["T8/fig4/l2/bits_read"] == clog2(8) + (1 + 2) * (1 + clog2(1 + 8))
    # every step but the last is ORACLE at oracle_frac = 1: honest B's pointer at a lie's first
    # inconsistent step makes V query the oracle; at oracle_frac = 0 never
    other = [r for r in rec.rows if r["point"] != pt.index]
    assert row["T8/fig4/v_queries_sound"] > 0
    assert all(r["T8/fig4/v_queries_sound"] == 0 for r in other)
    assert all(r["T8/fig4/sound_accepts"] == 0 < r["T8/fig4/sound_debates"] for r in rec.rows)
