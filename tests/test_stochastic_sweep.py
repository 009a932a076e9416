"""``experiments/stochastic_debate.py`` as a sweep (``point`` / ``DYNAMIC``): a grid of sample-count
scale factors x seeds is one compiled program, a point's row equals the point computed alone from
its documented key, the scaled counts follow spec DED 5.2, and honest completeness at scale 1
meets the Lean bound of spec DED 5.3 (minus 3 binomial standard errors, spec DED 9)."""

from __future__ import annotations

import math

import jax
import pytest

import experiments.stochastic_debate as exp
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.sweep import plan, point_key, run_sweep
from dedebate.protocols.stochastic import lean_defaults

K, T, TRIALS = 2, 8, 200
CELL = f"K{K}_T{T}"
SMALL = {"Ks": [K], "Ts": [T], "trials": TRIALS, "es_generations": 1, "es_population": 2}
SCALES = [1.0, 0.25]


def sweep_config(tmp_path, seeds=2):
    raw = {"experiment": exp.NAME, "seed": 3, "output_dir": str(tmp_path),
           "tracking": {"mode": "disabled"}, "params": SMALL,
           "sweep": {"seeds": seeds, "axes": {"scale": SCALES}, "plots": False}}
    return resolve(raw, {exp.NAME: exp})


@pytest.mark.slow
def test_scale_sweep_compiles_once_and_points_stand_alone(tmp_path, monkeypatch):
    traces = [0]
    real_point = exp.point

    def counting(cfg):  # counts how often the sweep's fn is traced (once per compile)
        dyn, fn = real_point(cfg)

        def traced(d, key):
            traces[0] += 1
            return fn(d, key)

        return dyn, traced

    monkeypatch.setattr(exp, "point", counting)
    cfg = sweep_config(tmp_path)
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["scale"] and res["static_axes"] == []
    assert res["groups"] == 1 and res["compilations"] == 1 == traces[0]
    assert res["rows"] == len(SCALES) * 2 == len(rec.rows)
    assert (rec.sweep_dir / "sweep.csv").is_file()
    monkeypatch.setattr(exp, "point", real_point)

    # (a) a point computed alone: point() + jit(fn) on point_key, outside any sweep
    pts = plan(exp, cfg).points
    pt = next(p for p in pts if p.values["scale"] == 0.25)
    seed = 4
    dyn, fn = exp.point(pt.cfg)
    alone = jax.jit(fn)(dyn, point_key(exp.NAME, seed, pt.cfg))
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert set(alone) <= set(row)
    for m, v in alone.items():
        assert row[m] == v.item(), m

    # (b) the scaled sample counts are Lean's (spec DED 5.2) times the factor, rounded up
    lean = lean_defaults(float(K), T).constants(float(K), T)
    for r in rec.rows:
        f = r["scale"]
        assert (r[f"{CELL}/n_alice"], r[f"{CELL}/n_bob"], r[f"{CELL}/n_vera"]) == tuple(
            max(1, math.ceil(f * n)) for n in (lean.n_alice, lean.n_bob, lean.n_vera))
        assert r[f"{CELL}/queries_vera_max"] <= r[f"{CELL}/n_vera"]  # spec DED 5.3 (Cost.lean)
        for m in ("honest_completeness", "completeness_min", "soundness_max"):
            v = r[f"{CELL}/{m}"]
            assert r[f"{CELL}/{m}_lo"] <= v <= r[f"{CELL}/{m}_hi"]
            assert round(v * TRIALS) == pytest.approx(v * TRIALS, abs=1e-3)  # a count / trials
        assert r[f"{CELL}/completeness_min"] <= r[f"{CELL}/honest_completeness"]

    # (c) honest completeness at scale 1, pooled over the seeds, is at least the Lean bound
    # (spec DED 5.3, at the fixture's exact P_M(1)) minus 3 binomial standard errors (spec DED 9)
    ones = [r for r in rec.rows if r["scale"] == 1.0]
    n = TRIALS * len(ones)
    wins = sum(round(r[f"{CELL}/honest_completeness"] * TRIALS) for r in ones)
    bound = ones[0][f"{CELL}/lean_completeness_bound"]
    assert bound == pytest.approx(0.6402, abs=1e-3)
    assert wins / n >= bound - 3 * math.sqrt(bound * (1 - bound) / n), (wins, n, bound)


def test_scale_is_validated():
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="scale="):
            exp.Config(scale=bad)
    assert exp.Config().scale == 1.0 and set(exp.DYNAMIC) == {"scale", "p_yes", "p_no"}


def test_jitted_wilson_matches_the_lab_interval():
    from dedebate.lab.experiment import wilson_interval

    for k, n in ((0, 100), (1, 100), (37, 200), (133, 200), (400, 400)):
        got = [float(x) for x in exp.wilson_jnp(k, n)]
        assert got == pytest.approx(list(wilson_interval(k, n)), abs=1e-6), (k, n)
