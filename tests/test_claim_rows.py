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


def _qrows(vera_max=1000.0, alice_c=5000.0, n_vera=(1000, 1000)):
    rows = []
    for T, nv in zip((8, 16), n_vera):
        rows.append({"K": 2, "T": T, "constants": "lean", "n_vera": nv, "vera_max": vera_max,
                     "alice": alice_c * 4 * T * math.log(200 * T)})
    return rows


def test_stochastic_cost_checks_fail_when_the_accounting_is_wrong():
    checks, fit = sd.cost_checks((2,), (8, 16), _qrows())
    assert all(ok for ok, _ in checks.values()) and not consistency_rows(checks)
    assert math.isclose(fit["c"], 5000.0) and math.isclose(fit["loglog_slope"], 1.0)
    for bad in ({"vera_max": 1001.0}, {"vera_max": math.nan}, {"alice_c": 5100.0},
                {"n_vera": (1000, 1200)}):
        checks, _ = sd.cost_checks((2,), (8, 16), _qrows(**bad))
        rows = consistency_rows(checks)
        assert len(rows) == 1 and not rows[0].passed, bad
        assert not ExperimentResult(claims=rows).passed
