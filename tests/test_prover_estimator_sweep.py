"""``experiments/prover_estimator.py`` as a sweep (``point`` / ``DYNAMIC``): a grid over the
protocol's rho (relative to the trees' fbs) x seeds is one compiled program, and a sweep row equals
``point``'s fn evaluated alone at the row's documented key (``point_key``), bit for bit."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import experiments.prover_estimator as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from tests.fakes import count_point_traces

TINY = {"fbs_qs": [3], "noisy_depth": 1, "noisy_trees": 1, "random_joints": 1, "obf_q": 2,
        "obf_depth": 1, "obf_trees": 1, "obf_episodes": 1000, "naive_episodes": 1000,
        "signal_depths": [1]}


@pytest.mark.slow  # two compiles of the exact sections (~25 s on 2 cores): sweep and fn alone
def test_rho_sweep_compiles_once_and_a_row_is_fn_alone(tmp_path, monkeypatch):
    real_point = exp.point
    traces = count_point_traces(monkeypatch, exp)  # traces of the sweep's fn (once per compile)
    raw = {"experiment": exp.NAME, "seed": 3, "output_dir": str(tmp_path / "out"),
           "tracking": {"mode": "disabled"}, "params": TINY,
           "sweep": {"seeds": 1, "axes": {"rho_scale": [1.0, 0.75]}, "plots": False}}
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["rho_scale"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces[0] and res["rows"] == 2 == len(rec.rows)
    monkeypatch.setattr(exp, "point", real_point)

    # the point rho_scale = 0.75, alone: fn of point() at point_key, run axis of 1
    pt = next(p for p in plan(exp, cfg).points if p.values["rho_scale"] == 0.75)
    dyn, fn = exp.point(pt.cfg)
    key = point_key(exp.NAME, 3, pt.cfg)
    one = jax.tree.map(lambda x: np.asarray(x)[None], dyn)
    alone = {k: v[0].item() for k, v in jax.jit(jax.vmap(fn))(one, key[None]).items()}
    row = next(r for r in rec.rows if r["point"] == pt.index)
    assert len(alone) > 30 and {m: row[m] for m in alone} == alone
    # rho = 0.75 x fbs = 1.5 on the q=5 Thr_3 tree (fbs 2): the negative control's rho, where
    # error-shifting B (e = 1) pushes honest A below rho^-(d+1) = 1.5^-5 (completeness fails)
    assert alone["error_shift/fbs"] == 2.0 and alone["error_shift/rho"] == 1.5
    assert alone["error_shift/control_u"] == alone["error_shift/u/3"] < 1.5**-5 - 1e-3  # e = 1
    other = next(r for r in rec.rows if r["point"] != pt.index)
    assert other["completeness/worst_minus_margin"] >= -1e-6  # rho = fbs: completeness holds
