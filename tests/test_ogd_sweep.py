"""``experiments/ogd_estimator.py`` as a sweep (``point`` / ``DYNAMIC``): Algorithm 1 over deltas x
seeds is one compiled program; the report's Algorithm 1 rows for the same point run alone
(``algorithm1_rows``, the part of ``run`` that builds them) at the row's documented key
(``point_key``) go through that same program (no second compile) and hold exactly the row's
numbers."""

from __future__ import annotations

import numpy as np
import pytest

import experiments.ogd_estimator as exp
from dedebate.estimators.algorithm1_grid import PER_RUN
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from tests.fakes import FakeContext, count_point_traces

TINY = {"q_values": [2], "n_x": 8, "n_tests": 4, "seeds": 2, "trace_len": 2}


@pytest.mark.slow  # one compile of Algorithm 1 at tiny sizes, shared by the sweep and the run
def test_delta_sweep_compiles_once_and_a_row_is_the_report_alone(tmp_path, monkeypatch):
    traces = count_point_traces(monkeypatch, exp)  # traces of the sweep's fn (once per compile)
    raw = {"experiment": exp.NAME, "seed": 2, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": TINY,
           "sweep": {"seeds": 2, "axes": {"deltas": [[0.2], [0.1]]}, "plots": False,
                     "batch": 1}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["deltas"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces[0] and res["rows"] == 4 == len(rec.rows)

    # the point delta = 0.1, seed 2, alone through the report's code (run's part 1): the
    # one-point case of the sweep, so it reuses the sweep's program and compiles nothing
    pt = next(p for p in plan(exp, cfg).points if p.values["deltas"] == (0.1,))
    ctx = FakeContext(tmp_path / "alone", seed=2, name=exp.NAME)
    ctx.key = point_key(exp.NAME, 2, pt.cfg)
    report, traces_by_run = exp.algorithm1_rows(pt.cfg, ctx)
    assert traces[0] == 1
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == 2)
    other = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] != 2)
    assert len(report) == 2 * 2  # problems x step rules (one q, one delta)
    for r in report:
        pre = f"Z{r['n_z']}/{r['step_rule']}/d0/s{r['seed']}"
        for m in PER_RUN:
            assert row[f"{pre}/{m}"] == r[m], (pre, m)  # bit for bit (Python floats of float32)
        assert r["steps"] <= r["bound"] and r["max_adv"] < 0.1
        # the float64 recomputation of the exit h (from the program's extras) agrees
        assert r["max_adv_numpy"] == pytest.approx(r["max_adv"], abs=exp.RECOMPUTE_TOL)
        assert r["fresh_tests"] == 4 * TINY["n_tests"]
    # the other seed's problems are other problems
    assert sum(other[f"{p}/max_adv"] != row[f"{p}/max_adv"] for p in (
        f"Z4/{rule}/d0/s{s}" for rule in ("hazan", "tight") for s in (0, 1))) >= 3
    for rule in ("hazan", "tight"):  # problem 0's advantage trace, for the report's figure
        tr = traces_by_run[(rule, 2, 0.1)]
        assert tr.shape == (TINY["trace_len"],) and np.isfinite(tr[0])
    assert row["d0/delta"] == pytest.approx(0.1)
    for rule in ("hazan", "tight"):  # the aggregates over the problems, from the same runs
        steps = [r["steps"] for r in report if r["step_rule"] == rule and r["n_z"] == 4]
        assert row[f"Z4/{rule}/d0/steps_max"] == max(steps)
        assert row[f"Z4/{rule}/d0/steps_over_bound_max"] <= 1.0

    # the sweep's figure: measured T and the proven bound per |Z|, one panel per step rule
    fig = exp.sweep_figures(rec.rows)["algorithm1_steps_vs_bound"]
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 2]
    bound = fig.axes[0].get_lines()[1].get_ydata()  # hazan, |Z| = 4, at 1/delta^2 = 25, 100
    assert list(bound) == pytest.approx([36 * 4 * 25, 36 * 4 * 100])
