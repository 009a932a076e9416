"""Every gating row can fail: the experiments' claim-building code, fed synthetic numbers that
break a bound (a lying measurement), produces a FAIL; consistency checks that hold add no row."""

from __future__ import annotations

import math
import types

import numpy as np

import experiments.machines as machines
import experiments.ogd_estimator as ogd
import experiments.prover_estimator as pe
import experiments.stochastic_debate as sd
from dedebate.estimators.ogd import iteration_bound
from dedebate.lab.experiment import Claim, ExperimentResult, consistency_rows


def _ogd_rows(rule="tight", steps_factor=0.5, adv_ratio=0.5, regret_ratio=0.5, numpy_gap=0.0,
              fresh_ratio=0.9):
    rows = []
    for delta in (0.1, 0.2):
        n_z = 8
        bound = iteration_bound(rule, n_z, delta)
        rows.append({"q": 3, "n_z": n_z, "delta": delta, "seed": 0, "step_rule": rule,
                     "steps": int(steps_factor * bound), "max_adv": adv_ratio * delta,
                     "converged": True, "bound": bound, "bound_hazan": bound,
                     "bound_tight": bound, "regret_sum": regret_ratio,
                     "regret_bound": 1.0, "circuit_size": 1, "z_over_delta2": n_z / delta**2,
                     "max_adv_numpy": adv_ratio * delta + numpy_gap,
                     "fresh_max_adv": fresh_ratio * delta, "fresh_share_below_delta": 1.0,
                     "fresh_tests": 32})
    return rows


def test_ogd_sweep_rows_fail_when_a_bound_is_broken():
    cfg = ogd.Config(q_values=(3,), step_rules=("tight",))
    ok = ogd._sweep_claims(cfg, _ogd_rows())
    # T bound, regret, the generalisation finding; no consistency row
    assert len(ok) == 3 and all(c.passed for c in ok)
    assert [c.finding for c in ok] == [False, False, True]
    for bad, which in (({"steps_factor": 1.5}, "T <= 4.5"), ({"regret_ratio": 1.5}, "regret"),
                       ({"adv_ratio": 1.2}, "consistency check failed"),
                       ({"adv_ratio": math.nan}, "consistency check failed"),
                       ({"regret_ratio": math.nan}, "regret"),
                       ({"numpy_gap": 1e-3}, "recomputed in float64 numpy"),
                       ({"numpy_gap": math.nan}, "recomputed in float64 numpy")):
        claims = ogd._sweep_claims(cfg, _ogd_rows(**bad))
        failed = [c.claim for c in claims if not c.passed]
        assert failed and all(which in f for f in failed), (bad, failed)
        assert not ExperimentResult(claims=claims).passed


def test_ogd_generalisation_finding_fails_on_fresh_tests_above_delta():
    """The exit h's advantage on fresh tests is a finding: above delta (or NaN) it fails, and
    being a finding it does not gate the experiment."""
    cfg = ogd.Config(q_values=(3,), step_rules=("tight",))
    for bad in (1.01, math.nan):
        claims = ogd._sweep_claims(cfg, _ogd_rows(fresh_ratio=bad))
        (row,) = [c for c in claims if not c.passed]
        assert row.finding and "generalises" in row.claim and "32 fresh tests" in row.claim
        assert ExperimentResult(claims=claims).passed  # the gating rows still pass


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


# ---- helpers: a row set that passes, then one perturbation at a time ----------------------------
def _failing(claims: list[Claim]) -> list[str]:
    """Names of the rows that fail, after checking that they make the experiment fail."""
    failed = [c.claim for c in claims if not c.passed]
    assert not failed or not ExperimentResult(claims=claims).passed
    return failed


def _assert_fails(make, good: dict, bad: dict, which: str):
    """``make(**good)`` passes entirely; ``make(**{**good, **bad})`` fails exactly in rows whose
    name contains ``which``."""
    assert _failing(make(**good)) == []
    failed = _failing(make(**{**good, **bad}))
    assert failed and all(which in f for f in failed), (bad, failed)


# ---- machines --------------------------------------------------------------------------------
def _fixture_rows(name="F2", p_enum=0.75, p_dp=0.75, closed=0.75, ones=750.0, trials=1000,
                  best=1.5, K=2.0):
    fx = types.SimpleNamespace(name=name, T=8, K=K, exact_p1=closed)
    est = types.SimpleNamespace(best=best, family="sign ascent", eps=1e-3, hybrid=K)
    return machines.fixture_claims(fx, trials, p_enum, p_dp, ones, est)


def test_machines_rows_fail_when_a_measurement_breaks_its_bound():
    good = {}
    assert len(_fixture_rows()) == 3  # MC interval, Lipschitz <= K, tightness (F2)
    assert len(_fixture_rows(name="AND", closed=None)) == 2
    for bad, which in (
            ({"ones": 650.0}, "Monte-Carlo interval"),  # the interval misses the exact P_M
            ({"p_dp": 0.76}, "Monte-Carlo interval"),  # the DP disagrees with enumeration
            ({"closed": 0.7}, "Monte-Carlo interval"),  # the closed form disagrees
            ({"ones": math.nan}, "Monte-Carlo interval"),
            ({"p_enum": math.nan}, "Monte-Carlo interval"),
            ({"best": 2.01}, "<= proven K"),  # empirical Lipschitz above the proven K
            ({"best": 0.9}, "factor 2"),  # not tight: below K/2
            ({"best": math.nan}, "Lipschitz")):
        _assert_fails(_fixture_rows, good, bad, which)


# ---- prover_estimator ------------------------------------------------------------------------
def _fbs(err_lp=0.0, err_dual=0.0, flip=0.0):
    rows = [{"family": f, "q": 3, "t": 1, "w": w, "lp": 1.0 + w, "dual": 1.0 + w,
             "closed": 1.0 + w} for f in ("threshold", "AND") for w in range(3)]
    rows[-1] = {**rows[-1], "lp": rows[-1]["lp"] + err_lp, "dual": rows[-1]["dual"] + err_lp
                + err_dual}
    flips = [{"F": 0.01 * k, "eps_fbs": 0.01 * k} for k in range(4)]
    flips[2] = {**flips[2], "F": flips[2]["F"] + flip}
    return pe.fbs_claims((3,), rows, flips)


def _completeness(rho=2.0, d=2, honest=0.0, liar=0.0, shift=0.0, unstable=0.0, nan_joint=False):
    base = rho ** -(d + 1)
    errors = (0.2, 1.0)
    bounds = [base + e * rho**-d * (1 - 1 / rho) for e in errors]
    m = {"completeness/honest_min": base + honest, "completeness/honest_dev": abs(honest),
         "completeness/root_liar_min": min(0.3, base + liar),
         "completeness/constant_half_min": 0.2,
         "completeness/random_joint_min": math.nan if nan_joint else 0.2,
         "completeness/error_shifting_min/0": bounds[0] + shift,
         "completeness/error_shifting_min/1": bounds[1],
         "completeness/unstable_max_e1": 9.0**-d + unstable}
    return pe.completeness_claims(m, rho, d, errors, 3, 2)


def _error_shift(u0=0.0, rho5=2.0, u_ctrl=0.0625):
    u5 = np.array([0.0375 + u0, 0.046875, 0.0625, 0.0625])
    return pe.error_shift_claims(0.03125, u5, rho5, (0.2, 0.5, 1.0), u_ctrl, 1.5)


def _obfuscation(always=0.0, random=0.0, stable=0.0, wrong=0.01, naive=0.0):
    q, d = 4, 3
    m = {"obfuscation/liar_max_abs/0": abs(always), "obfuscation/liar_max_abs/1": 0.0,
         "obfuscation/liar_max_abs/2": abs(random), "obfuscation/stable_liar_max": stable,
         "obfuscation/wrong_direction_max": wrong, "obfuscation/honest_min": 2.0 ** -(d + 1),
         "obfuscation/honest_dev": 0.0, "obfuscation/naive_liar_mean": 1 - q**-d + naive,
         "obfuscation/naive_liar_dev": abs(naive), "obfuscation/naive_honest_min": 1.0}
    return pe.obfuscation_claims(m, 2.0, q, d, 3)


def _sampled(shift=0.0, ones=6300, nan=False):
    us = np.tile(np.array([1.0, -1.0]), (3, 2, 500))  # mean exactly 0 per policy
    us[0] += shift
    if nan:
        us[2, 1, 7] = math.nan
    surv = np.zeros(6400)
    surv[:ones] = 1.0  # 6300 / 6400 = 1 - 4^-3 exactly
    return pe.sampled_claims(us, surv, 4, 3, 2)


def _signal(ped=0.0, naive=0.0):
    sig = [{"depth": d, "ped_delta": 2.0 ** -(d + 1), "rho_power": 2.0 ** -(d + 1),
            "naive_delta": 4.0**-d, "q_power": 4.0**-d} for d in (1, 2, 3)]
    sig[1] = {**sig[1], "ped_delta": sig[1]["ped_delta"] + ped,
              "naive_delta": sig[1]["naive_delta"] + naive}
    return pe.signal_claims(sig, 2.0, 4)


def test_prover_estimator_rows_fail_when_a_measurement_breaks_its_bound():
    assert len(_fbs()) == 4 and len(_completeness()) == 7 and len(_error_shift()) == 5
    assert len(_obfuscation()) == 6  # the symmetric policy's check adds no row when it holds
    assert len(_sampled()) == 4 and len(_signal()) == 2
    assert len(pe.rho_claims(2.0, 1.8, 9.0)) == 3
    cases = [
        (_fbs, {"err_lp": 1e-3}, "fbs of AND"),  # the LP disagrees with the closed form
        (_fbs, {"err_dual": 1e-3}, "certificate (dual)"),
        (_fbs, {"flip": math.nan}, "flip probability"),  # a NaN that is not first
        (_completeness, {"honest": 1e-3}, "honest vs honest"),
        (_completeness, {"liar": -1e-3}, "root liar"),  # honest A below rho^-(d+1)
        (_completeness, {"nan_joint": True}, "random joints"),
        (_completeness, {"shift": -1e-3}, "error-shifting B (e=0.2)"),
        (_completeness, {"unstable": 0.2}, "unstable decomposition"),
        (_error_shift, {"u0": 1e-3}, "error-shifting B (e=0.2)"),
        (_error_shift, {"rho5": 2.1}, "meets the bound exactly"),
        (_error_shift, {"u_ctrl": 0.2}, "negative control"),  # completeness did not fail
        (_obfuscation, {"always": 0.01}, "(always +1) vs calibrated"),  # a paying liar
        (_obfuscation, {"random": 0.01}, "consistency check failed"),
        (_obfuscation, {"stable": 0.01}, "stable decomposition"),
        (_obfuscation, {"wrong": 0.07}, "wrong-direction"),  # above r^(d+1) = 1/16
        (_obfuscation, {"naive": 1e-3}, "1 - q^-d (q=4, d=3, exact)"),
        (_sampled, {"shift": 0.2}, "(always +1) vs calibrated B earns 0"),
        (_sampled, {"nan": True}, "(random +-1) vs calibrated B earns 0"),
        (_sampled, {"ones": 6100}, "liar survival"),  # the Wilson interval misses 63/64
        (_signal, {"ped": 1e-3}, "prover-estimator debate = rho^-(d+1)"),
        (_signal, {"naive": math.nan}, "naive recursive debate = q^-d"),
    ]
    for make, bad, which in cases:
        _assert_fails(make, {}, bad, which)
    for rhos, which in (((2.0, 1.8, math.nan), "AND decomposition"),
                        ((1.9, 1.8, 9.0), "noisy-evidence")):
        failed = _failing(pe.rho_claims(*rhos))
        assert failed and all(which in f for f in failed), (rhos, failed)


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
