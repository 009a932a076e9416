"""Every gating row can fail: the experiments' claim-building code, fed synthetic numbers that
break a bound (a lying measurement), produces a FAIL; consistency checks that hold add no row."""

from __future__ import annotations

import math

import experiments.ogd_estimator as ogd
import experiments.stochastic_debate as sd
from dedebate.estimators.ogd import iteration_bound
from dedebate.lab.experiment import ExperimentResult, consistency_rows


def _ogd_rows(rule="tight", steps_factor=0.5, adv_ratio=0.5, regret_ratio=0.5):
    rows = []
    for delta in (0.1, 0.2):
        n_z = 8
        bound = iteration_bound(rule, n_z, delta)
        rows.append({"q": 3, "n_z": n_z, "delta": delta, "seed": 0, "step_rule": rule,
                     "steps": int(steps_factor * bound), "max_adv": adv_ratio * delta,
                     "converged": True, "bound": bound, "bound_hazan": bound,
                     "bound_tight": bound, "regret_sum": regret_ratio,
                     "regret_bound": 1.0, "circuit_size": 1, "z_over_delta2": n_z / delta**2})
    return rows


def test_ogd_sweep_rows_fail_when_a_bound_is_broken():
    cfg = ogd.Config(q_values=(3,), step_rules=("tight",))
    ok = ogd._sweep_claims(cfg, _ogd_rows())
    assert len(ok) == 2 and all(c.passed for c in ok)  # T bound, regret; no consistency row
    for bad, which in (({"steps_factor": 1.5}, "T <= 4.5"), ({"regret_ratio": 1.5}, "regret"),
                       ({"adv_ratio": 1.2}, "consistency check failed"),
                       ({"adv_ratio": math.nan}, "consistency check failed"),
                       ({"regret_ratio": math.nan}, "regret")):
        claims = ogd._sweep_claims(cfg, _ogd_rows(**bad))
        failed = [c.claim for c in claims if not c.passed]
        assert failed and all(which in f for f in failed), (bad, failed)
        assert not ExperimentResult(claims=claims).passed


def _qrows(vera_max=None, alice_c=5000.0, n_vera=None):
    """Lean rows of the stochastic experiment's cost table for K = 2, T in (8, 16): Vera's
    measured largest count ``vera_max`` (default: N_V from Lean's formula, as measured)."""
    nv = sd.lean_n_vera(2.0, 8)
    rows = []
    for T, n in zip((8, 16), n_vera or (nv, nv)):
        rows.append({"K": 2, "T": T, "constants": "lean", "n_vera": n, "aborts": 10,
                     "vera_max": float(nv) if vera_max is None else vera_max,
                     "alice": alice_c * 4 * T * math.log(200 * T)})
    return rows


def test_stochastic_cost_checks_fail_when_the_accounting_is_wrong():
    # N_V from Lean's formula samples((s-c)/2, v) = ceil(ln(2/v) / (2 ((s-c)/2)^2)), K = 2
    nv = sd.lean_n_vera(2.0, 8)
    assert nv == math.ceil(math.log(200) / (2 * (0.005 / 2) ** 2)) == sd.lean_n_vera(2.0, 64)
    checks, fit = sd.cost_checks((2,), (8, 16), _qrows())
    assert all(ok for ok, _ in checks.values()) and not consistency_rows(checks)
    assert math.isclose(fit["c"], 5000.0) and math.isclose(fit["loglog_slope"], 1.0)
    for bad in ({"alice_c": 5100.0}, {"n_vera": (nv, nv + 1)}):
        checks, _ = sd.cost_checks((2,), (8, 16), _qrows(**bad))
        rows = consistency_rows(checks)
        assert len(rows) == 1 and not rows[0].passed, bad
        assert not ExperimentResult(claims=rows).passed


def test_stochastic_vera_row_fails_on_a_lying_count():
    """Vera's queries as the play loop counted them, against N_V from Lean's formula: a gating
    row that holds on the true count and fails on a count above N_V or a missing one."""
    nv = sd.lean_n_vera(2.0, 8)
    (row,) = sd.vera_claims((2,), (8, 16), _qrows())
    assert row.passed and row.value == nv and not row.finding
    assert ExperimentResult(claims=[row]).passed
    for lie in (nv + 1.0, 2.0 * nv, math.nan, math.inf):
        (row,) = sd.vera_claims((2,), (8, 16), _qrows(vera_max=lie))
        assert not row.passed, lie
        assert not ExperimentResult(claims=[row]).passed
    (row,) = sd.vera_claims((2,), (8, 16), [])  # no debate measured: fails closed
    assert not row.passed
