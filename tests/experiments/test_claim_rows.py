"""Every gating row can fail: the experiments' claim-building code, fed synthetic numbers that
break a bound (a lying measurement), produces a FAIL; consistency checks that hold add no row."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

import experiments.deterministic_debate as dd
import experiments.machines as machines
import experiments.ogd_estimator as ogd
import experiments.prover_estimator as pe
import experiments.stackelberg as sb
import experiments.stochastic_debate as sd
import experiments.stochastic_selfplay as ssp
from dedebate.estimators.ogd import iteration_bound
from dedebate.lab.experiment import Claim, ExperimentResult, consistency_rows
from dedebate.machines.configurations import clog2
from experiments.stochastic_debate.budget import lean_n_vera


def _ogd_rows(
    rule="tight", steps_factor=0.5, adv_ratio=0.5, regret_ratio=0.5, numpy_gap=0.0, fresh_ratio=0.9
):
    rows = []
    for delta in (0.1, 0.2):
        n_z = 8
        bound = iteration_bound(rule, n_z, delta)
        rows.append(
            {
                "q": 3,
                "n_z": n_z,
                "delta": delta,
                "seed": 0,
                "step_rule": rule,
                "steps": int(steps_factor * bound),
                "max_adv": adv_ratio * delta,
                "converged": True,
                "bound": bound,
                "bound_hazan": bound,
                "bound_tight": bound,
                "regret_sum": regret_ratio,
                "regret_bound": 1.0,
                "circuit_size": 1,
                "z_over_delta2": n_z / delta**2,
                "max_adv_numpy": adv_ratio * delta + numpy_gap,
                "fresh_max_adv": fresh_ratio * delta,
                "fresh_share_below_delta": 1.0,
                "fresh_tests": 32,
            }
        )
    return rows


def test_ogd_sweep_rows_fail_when_a_bound_is_broken():
    cfg = ogd.Config(q_values=(3,), step_rules=("tight",))
    ok = ogd.algorithm1_claims(cfg, _ogd_rows())
    # T bound, regret, the generalisation finding; no consistency row
    assert len(ok) == 3 and all(c.passed for c in ok)
    assert [c.finding for c in ok] == [False, False, True]
    for bad, which in (
        ({"steps_factor": 1.5}, "T <= 4.5"),
        ({"regret_ratio": 1.5}, "regret"),
        ({"adv_ratio": 1.2}, "consistency check failed"),
        # below delta in float32, above it in the float64 recheck (which agrees to 8e-5)
        ({"adv_ratio": 0.9995, "numpy_gap": 8e-5}, "consistency check failed"),
        ({"adv_ratio": math.nan}, "consistency check failed"),
        ({"regret_ratio": math.nan}, "regret"),
        ({"numpy_gap": 1e-3}, "recomputed in float64 numpy"),
        ({"numpy_gap": math.nan}, "consistency check failed"),  # the recheck and the exit
    ):
        claims = ogd.algorithm1_claims(cfg, _ogd_rows(**bad))
        failed = [c.claim for c in claims if not c.passed]
        assert failed and all(which in f for f in failed), (bad, failed)
        assert not ExperimentResult(claims=claims).passed
    # at the bounds: T = bound holds, an exit advantage or a fresh one of exactly delta is not
    # below it, a regret ratio of 1 holds, a float64 gap of twice the tolerance is too far
    assert _ogd_rows(steps_factor=1.0)[0]["steps"] == 3600  # the bound at delta = 0.1
    assert all(c.passed for c in ogd.algorithm1_claims(cfg, _ogd_rows(steps_factor=1.0)))
    for bad, which in (
        ({"adv_ratio": 1.0}, "consistency check failed"),
        ({"fresh_ratio": 1.0}, "generalises"),
        ({"numpy_gap": 2e-4}, "recomputed in float64 numpy"),
    ):
        failed = [c.claim for c in ogd.algorithm1_claims(cfg, _ogd_rows(**bad)) if not c.passed]
        assert failed and all(which in f for f in failed), (bad, failed)
    assert all(c.passed for c in ogd.algorithm1_claims(cfg, _ogd_rows(regret_ratio=1.0)))
    rows = _ogd_rows()
    rows[1]["regret_sum"] = math.nan  # a NaN in the second run, not the first
    (reg,) = [c for c in ogd.algorithm1_claims(cfg, rows) if "regret" in c.claim]
    assert not reg.passed
    # the loop stops at the bound: a run that had not converged there shows inf, not its T
    rows = _ogd_rows(steps_factor=1.0)
    rows[1]["converged"] = False
    (t_row, *_) = ogd.algorithm1_claims(cfg, rows)
    assert not t_row.passed and t_row.value == math.inf
    assert "largest T / bound: T = " in ok[0].note and "largest T = " in ok[0].note


def test_ogd_network_row_reads_the_best_learning_rates_worst_seed():
    """Per learning rate the worst seed's final max|Adv|; the row takes the rate whose worst is
    least and passes iff it is below net_delta (a finding)."""
    cfg = ogd.Config(net_lrs=(0.3, 1.0), seeds=2, net_delta=0.05)
    net = types.SimpleNamespace(resumed_from=0, wall_s=1.0, chunks_run=1)

    def rows(by_lr):
        return [
            {"lr": lr, "net_final_max_adv": a, "net_rounds_to_delta": 9, "tab_steps": 9}
            for lr, advs in by_lr.items()
            for a in advs
        ]

    row = ogd.network_claim(cfg, rows({0.3: [0.03, 0.04], 1.0: [0.01, 0.08]}), net)
    assert (row.value, row.passed, row.finding) == (0.04, True, True) and "lr = 0.3" in row.claim
    row = ogd.network_claim(cfg, rows({0.3: [0.03, 0.06], 1.0: [0.01, 0.08]}), net)
    assert (row.value, row.passed) == (0.06, False)


def test_ogd_regret_holds_where_no_run_took_a_step():
    """A delta above every initial advantage (deltas may be up to 1): Algorithm 1 exits at once,
    T = 0 and the regret bound reads 0 <= 0. The row was NaN and failed."""
    cfg = ogd.Config(q_values=(3,), step_rules=("tight",))
    rows = [r | {"steps": 0, "regret_sum": 0.0, "regret_bound": 0.0} for r in _ogd_rows()]
    (reg,) = [c for c in ogd.algorithm1_claims(cfg, rows) if "regret" in c.claim]
    assert reg.passed and reg.value == 0.0 and "no run took a step" in reg.note
    rows[0] |= {"steps": 3, "regret_sum": 0.4, "regret_bound": 1.0}  # one run stepped: its ratio
    (reg,) = [c for c in ogd.algorithm1_claims(cfg, rows) if "regret" in c.claim]
    assert reg.passed and reg.value == 0.4 and "the 1 run(s) that took a step" in reg.note


def test_ogd_generalisation_finding_fails_on_fresh_tests_above_delta():
    """The exit h's advantage on fresh tests is a finding: above delta (or NaN) it fails, and
    being a finding it does not gate the experiment."""
    cfg = ogd.Config(q_values=(3,), step_rules=("tight",))
    for bad in (1.01, math.nan):
        claims = ogd.algorithm1_claims(cfg, _ogd_rows(fresh_ratio=bad))
        (row,) = [c for c in claims if not c.passed]
        assert row.finding and "generalises" in row.claim and "32 fresh tests" in row.claim
        assert ExperimentResult(claims=claims).passed  # the gating rows still pass


def _qrows(vera_max=None, alice_c=5000.0, n_vera=None):
    """Lean rows of the stochastic experiment's cost table for K = 2, T in (8, 16): Vera's
    measured largest count ``vera_max`` (default: N_V from Lean's formula, as measured)."""
    nv = lean_n_vera(2.0, 8)
    rows = []
    for T, n in zip((8, 16), n_vera or (nv, nv)):
        rows.append(
            {
                "K": 2,
                "T": T,
                "constants": "lean",
                "n_vera": n,
                "aborts": 10,
                "vera_max": float(nv) if vera_max is None else vera_max,
                "alice": alice_c * 4 * T * math.log(200 * T),
            }
        )
    return rows


def test_stochastic_cost_checks_fail_when_the_accounting_is_wrong():
    # N_V from Lean's formula samples((s-c)/2, v) = ceil(ln(2/v) / (2 ((s-c)/2)^2)), K = 2
    nv = lean_n_vera(2.0, 8)
    assert nv == math.ceil(math.log(200) / (2 * (0.005 / 2) ** 2)) == lean_n_vera(2.0, 64)
    _, checks, fit = sd.cost_rows((2,), (8, 16), _qrows())
    assert all(ok for ok, _ in checks.values()) and not consistency_rows(checks)
    assert math.isclose(fit["c"], 5000.0) and math.isclose(fit["loglog_slope"], 1.0)
    for bad in ({"alice_c": 5100.0}, {"n_vera": (nv, nv + 1)}):
        _, checks, _ = sd.cost_rows((2,), (8, 16), _qrows(**bad))
        rows = consistency_rows(checks)
        assert len(rows) == 1 and not rows[0].passed, bad
        assert not ExperimentResult(claims=rows).passed
    # at scaled counts (a sweep's scale < 1) the formula scales with them: N_V rounded up, c x f
    half = math.ceil(nv / 2)
    scaled = _qrows(vera_max=float(half), alice_c=2500.0, n_vera=(half, half))
    vera, checks, _ = sd.cost_rows((2,), (8, 16), scaled, scale=0.5)
    assert vera[0].passed and not consistency_rows(checks)
    (row,), checks, _ = sd.cost_rows((2,), (8, 16), _qrows(), scale=0.5)  # unscaled counts
    assert not row.passed and len(consistency_rows(checks)) == 2
    _, checks, fit = sd.cost_rows((2,), (8,), _qrows()[:1])  # one point: no slope to check
    assert not consistency_rows(checks) and math.isnan(fit["loglog_slope"])


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
def _fixture_rows(
    name="F2",
    p_enum=0.75,
    p_dp=0.75,
    closed=0.75,
    ones=750.0,
    trials=1000,
    best=1.9999999,
    K=2.0,
    hybrid=2.0,
):
    fx = types.SimpleNamespace(name=name, T=8, K=K, exact_p1=closed)
    est = types.SimpleNamespace(best=best, family="sign ascent", eps=1e-3, hybrid=hybrid)
    return machines.fixture_claims(fx, trials, p_enum, p_dp, ones, est)


def test_machines_rows_fail_when_a_measurement_breaks_its_bound():
    good = {}
    assert len(_fixture_rows()) == 4  # Monte Carlo, Lipschitz <= K, hybrid <= K, tightness (F2)
    assert len(_fixture_rows(name="AND", closed=None)) == 3
    for bad, which in (
        ({"ones": 650.0}, "Monte-Carlo count"),  # the exact test rejects the exact P_M
        ({"p_dp": 0.76}, "Monte-Carlo count"),  # the DP disagrees with enumeration
        ({"closed": 0.7}, "Monte-Carlo count"),  # the closed form disagrees
        ({"ones": math.nan}, "Monte-Carlo count"),
        ({"p_enum": math.nan}, "Monte-Carlo count"),
        ({"best": 2.01, "hybrid": 2.01}, "proven K"),  # both constants above the proven K
        # a K between the empirical constant (a lower bound) and the hybrid bound (the AND gate's
        # constant is 6.12 at T = 16, its estimate 5.70): only the hybrid row sees it
        ({"name": "AND", "closed": None, "best": 1.5, "K": 1.8}, "hybrid bound <= proven K"),
        ({"best": 1.99}, "reaches the exact hybrid bound"),  # a weak estimate: not tight
        ({"best": 2.00002}, "Lipschitz constant <= proven K"),  # 1e-5 over: past the 1e-6 slack
        ({"hybrid": 2.00002}, "hybrid bound <= proven K"),
        ({"best": math.nan}, "Lipschitz"),
        ({"hybrid": math.nan}, "hybrid bound"),
    ):
        _assert_fails(_fixture_rows, good, bad, which)


# ---- prover_estimator ------------------------------------------------------------------------
def _fbs(err_lp=0.0, err_dual=0.0, flip=0.0):
    return pe.fbs_claims((3,), *_fbs_tables(err_lp, err_dual, flip))


def _fbs_tables(err_lp=0.0, err_dual=0.0, flip=0.0):
    rows = [
        {"family": f, "q": 3, "t": 1, "w": w, "lp": 1.0 + w, "dual": 1.0 + w, "closed": 1.0 + w}
        for f in ("threshold", "AND")
        for w in range(3)
    ]
    rows[-1] = {
        **rows[-1],
        "lp": rows[-1]["lp"] + err_lp,
        "dual": rows[-1]["dual"] + err_lp + err_dual,
    }
    flips = [{"F": 0.01 * k, "eps_fbs": 0.01 * k} for k in range(4)]
    flips[2] = {**flips[2], "F": flips[2]["F"] + flip}
    return rows, flips


def _completeness_m(
    honest=0.0, liar=0.0, shift=0.0, unstable=0.0, nan_joint=False, half=0.0, shift1=0.0
):
    base, d = 2.0**-3, 2  # rho = 2, d = 2
    bounds = [base + e * 2.0**-d * (1 - 1 / 2.0) for e in (0.2, 1.0)]
    return {
        "completeness/honest_min": base + honest,
        "completeness/honest_dev": abs(honest),
        "completeness/root_liar_min": min(0.3, base + liar),
        "completeness/constant_half_min": 0.2 + half,
        "completeness/random_joint_min": math.nan if nan_joint else 0.2,
        "completeness/error_shifting_min/0": bounds[0] + shift,
        "completeness/error_shifting_min/1": bounds[1] + shift1,
        "completeness/unstable_max_e1": 9.0**-d + unstable,
    }


_PE_CFG = types.SimpleNamespace(shift_errors=(0.2, 1.0), random_joints=3, noisy_trees=2)


def _completeness(tree_fbs=2.0, **kw):
    return pe.completeness_claims(_completeness_m(**kw), 2.0, 2, _PE_CFG, tree_fbs)


def _error_shift_m(u0=0.0, rho5=2.0, u_ctrl=0.0625):
    u5 = [0.0375 + u0, 0.046875, 0.0625]  # e = 0.2, 0.5, 1
    m = {"error_shift/honest": rho5**-5, "error_shift/fbs": rho5, "error_shift/control_u": u_ctrl}
    m["error_shift/rho"] = rho5  # rho = fbs (rho_scale 1): the u's above are rho = 2's
    return m | {f"error_shift/u/{i}": u for i, u in enumerate(u5)}


def _error_shift(**kw):
    return pe.error_shift_claims(_error_shift_m(**kw), (0.2, 0.5, 1.0), 1.5)


def _obfuscation(**kw):
    return pe.obfuscation_claims(_obfuscation_m(**kw), 2.0, 4, 3, 3)


def _obfuscation_m(
    always=0.0, random=0.0, stable=0.0, wrong=0.01, naive=0.0, honest_spread=0.0, naive_spread=0.0
):
    """``*_spread``: honest A's or the naive liar's trees off by +-spread (their means exact)."""
    q, d = 4, 3
    m = {
        "obfuscation/liar_max_abs/0": abs(always),
        "obfuscation/liar_max_abs/1": 0.0,
        "obfuscation/liar_max_abs/2": abs(random),
        "obfuscation/stable_liar_max": stable,
        "obfuscation/wrong_direction_max": wrong,
        "obfuscation/honest_min": 2.0 ** -(d + 1),
        "obfuscation/honest_dev": honest_spread,
        "obfuscation/naive_liar_mean": 1 - q**-d + naive,
        "obfuscation/naive_liar_dev": abs(naive) + naive_spread,
        "obfuscation/naive_honest_min": 1.0,
    }
    return m | {"obfuscation/rho": 2.0}


def _sampled(**kw):
    return pe.sampled_claims(*_sampled_draws(**kw), 4, 3, 2)


def _sampled_draws(shift=0.0, ones=6300, nan=False, random_shift=0.0):
    us = np.tile(np.array([1.0, -1.0]), (3, 2, 500))  # mean exactly 0 per policy
    us[0] += shift
    us[2] += random_shift  # random +-1: a finding (E[U_A] = 0 by symmetry against any B)
    if nan:
        us[1, 1, 7] = math.nan
    surv = np.zeros(6400)
    surv[:ones] = 1.0  # 6300 / 6400 = 1 - 4^-3 exactly
    return us, surv


def _signal(**kw):
    return pe.signal_claims(_signal_rows(**kw), 2.0, 4)


def _signal_rows(ped=0.0, naive=0.0):
    sig = [
        {
            "depth": d,
            "ped_delta": 2.0 ** -(d + 1),
            "rho_power": 2.0 ** -(d + 1),
            "naive_delta": 4.0**-d,
            "q_power": 4.0**-d,
        }
        for d in (1, 2, 3)
    ]
    sig[1] = {
        **sig[1],
        "ped_delta": sig[1]["ped_delta"] + ped,
        "naive_delta": sig[1]["naive_delta"] + naive,
    }
    return sig


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
        (_completeness, {"half": -0.1}, "constant 1/2"),
        (_completeness, {"shift1": -1e-3}, "error-shifting B (e=1)"),
        (_error_shift, {"u0": 1e-3}, "error-shifting B (e=0.2)"),
        (_error_shift, {"rho5": 2.1}, "meets the bound exactly"),
        (_error_shift, {"u_ctrl": 0.2}, "negative control"),  # completeness did not fail
        (_obfuscation, {"always": 0.01}, "(always +1) vs calibrated"),  # a paying liar
        (_obfuscation, {"random": 0.01}, "consistency check failed"),
        (_obfuscation, {"stable": 0.01}, "stable decomposition"),
        (_obfuscation, {"wrong": 0.07}, "wrong-direction"),  # above r^(d+1) = 1/16
        (_obfuscation, {"naive": 1e-3}, "1 - q^-d (q=4, d=3, exact)"),
        (_sampled, {"shift": 0.2}, "(always +1) vs calibrated B earns 0"),
        (_sampled, {"nan": True}, "(always -1) vs calibrated B earns 0"),
        (_sampled, {"ones": 6100}, "liar survival"),  # the Wilson interval misses 63/64
        (_signal, {"ped": 1e-3}, "prover-estimator debate = rho^-(d+1)"),
        (_signal, {"naive": math.nan}, "naive recursive debate = q^-d"),
    ]
    # at the rows' tolerance (1e-6): 1e-5 off fails, honest A's tie rule is allowed
    tie = pe.tie_loss(2.0, 2)
    cases += [
        (_error_shift, {"u0": 1e-5}, "error-shifting B (e=0.2)"),
        (_error_shift, {"u_ctrl": 0.15}, "negative control"),  # above (1/1.5)^5 = 0.1317
        (_completeness, {"unstable": 2.0**-3 - 9.0**-2}, "unstable decomposition"),  # = r^(d+1)
        (_obfuscation, {"honest_spread": 1e-3}, "rho^-(d+1) (rho=2)"),
        (_obfuscation, {"naive_spread": 1e-3}, "1 - q^-d (q=4, d=3, exact)"),
    ]
    for make, bad, which in cases:
        _assert_fails(make, {}, bad, which)
    assert _failing(_completeness(liar=-(1e-6 + tie / 2), shift=-(1e-6 + tie / 2))) == []
    for rhos, which in (
        ((2.0, 1.8, math.nan), "AND decomposition"),
        ((1.9, 1.8, 9.0), "noisy-evidence"),
        ((2.0 + 5e-6, 1.8, 9.0), "noisy-evidence"),
    ):
        failed = _failing(pe.rho_claims(*rhos))
        assert failed and all(which in f for f in failed), (rhos, failed)


def test_prover_estimator_theorem_rows_are_findings_where_rho_is_below_the_trees_fbs():
    """rho below the trees' fbs (rho_scale < 1): Thm 6.1(1) does not apply, so honest A below
    its bound is a finding and the run passes; the sampled random +-1 row is a finding too."""
    rows = _completeness(tree_fbs=2.5, liar=-1e-3, shift=-1e-3)
    below = [c for c in rows if not c.passed]
    assert len(below) == 2 and all(c.finding and "below the trees' fbs" in c.note for c in below)
    assert ExperimentResult(claims=rows).passed
    (random,) = [c for c in _sampled(random_shift=0.2) if "random +-1" in c.claim]
    assert random.finding and not random.passed and "checks only the sampler" in random.note
    assert ExperimentResult(claims=_sampled(random_shift=0.2)).passed


def test_prover_estimator_report_judges_completeness_by_the_noisy_trees_fbs():
    """``report`` decides whether Thm 6.1(1) applies by the noisy trees' rho (its host's first
    rho), not the unanimous tree's: rho = 2 below the noisy trees' 2.5 makes honest A's shortfall
    a finding, where the unanimous tree's 1.8 would have made it fail."""
    sizes = dict(noisy_depth=2, obf_q=4, obf_depth=3, obf_trees=2, fbs_qs=(3,), control_rho=1.5)
    cfg = types.SimpleNamespace(**vars(_PE_CFG), **sizes)
    shifted = _error_shift_m()  # its e = 0.2, 0.5, 1, of which the config keeps 0.2 and 1
    shifted["error_shift/u/1"] = shifted.pop("error_shift/u/2")
    measured = _completeness_m(liar=-1e-3) | {"completeness/rho": 2.0} | shifted
    measured |= _obfuscation_m()
    us, surv = _sampled_draws()
    (fbs, flips), signal = _fbs_tables(), _signal_rows()
    host = {"fbs": fbs, "flips": flips, "us": us, "surv": surv, "signal": signal}
    host["rhos"] = (2.5, 1.8, 9.0)
    claims = pe.report(cfg, measured, host).claims
    (liar,) = [c for c in claims if "root liar" in c.claim]
    assert liar.finding and not liar.passed and "below the trees' fbs 2.5" in liar.note
    failed = [c.claim for c in claims if not (c.passed or c.finding)]
    assert len(failed) == 1 and "noisy-evidence" in failed[0]  # its rho row: 2.5 is not 2


def test_prover_estimator_error_shifting_rows_are_unmet_findings_where_rho_is_not_the_fbs():
    """With rho = 2 but the path's fbs 2.5 the bound is no theorem: each e row is a finding, and
    not met even where U_A hits rho's number exactly."""
    m = {**_error_shift_m(), "error_shift/fbs": 2.5}
    rows = [r for r in pe.error_shift_claims(m, (0.2, 0.5, 1.0), 1.5) if "(e=" in r.claim]
    assert len(rows) == 3 and all(r.finding and not r.passed for r in rows)
    assert all("is not the path's fbs 2.5" in r.note for r in rows)


def test_prover_estimator_a_nan_in_any_measurement_fails_a_row():
    """A non-finite number is a failure: each measurement of the completeness and
    error-shifting sections, set to NaN alone, fails a row and the experiment (error-shifting B
    at e = 1 and the constant-1/2 B included, which no bound-breaking case above reaches)."""
    for m, build in (
        (_completeness_m(), lambda m: pe.completeness_claims(m, 2.0, 2, _PE_CFG, 2.0)),
        (_error_shift_m(), lambda m: pe.error_shift_claims(m, (0.2, 0.5, 1.0), 1.5)),
    ):
        assert _failing(build(m)) == []
        for key in m:
            assert _failing(build({**m, key: math.nan})), key


def test_stochastic_vera_row_fails_on_a_lying_count():
    """Vera's queries as the play loop counted them, against N_V from Lean's formula: a gating
    row that holds on the true count and fails on a count above N_V or a missing one."""
    nv = lean_n_vera(2.0, 8)
    (row,), _, _ = sd.cost_rows((2,), (8, 16), _qrows())
    assert row.passed and row.value == nv and not row.finding
    assert ExperimentResult(claims=[row]).passed
    for lie in (nv + 1.0, 2.0 * nv, math.nan, math.inf):
        (row,), _, _ = sd.cost_rows((2,), (8, 16), _qrows(vera_max=lie))
        assert not row.passed, lie
        assert not ExperimentResult(claims=[row]).passed
    (row,), _, _ = sd.cost_rows((2,), (8, 16), [])  # no debate measured: fails closed
    assert not row.passed


def _assert_each_fails(make, cases):
    """``make()`` passes entirely (and gates); for each ``(bad, which)``, ``make(**bad)`` fails
    exactly in rows whose name contains ``which``."""
    ok = make()
    assert ok and all(c.passed for c in ok) and ExperimentResult(claims=ok).passed
    for bad, which in cases:
        _assert_fails(make, {}, bad, which)


# ---- deterministic_debate --------------------------------------------------------------------
_DD_FAMS = {
    "fig4": "Fig 4 cross-examination",
    "fig3_window": "register configurations",
    "fig3_full": "full-tape configurations",
}


def _judged(comp=10, sound=10, v_queries=1, bits=20):
    return {
        "comp_debates": comp,
        "comp_accepts": comp,
        "sound_debates": sound,
        "sound_accepts": 0,
        "v_queries_max": v_queries,
        "bits_max": bits,
    }


def _dd_measured() -> dd.Measured:
    """Numbers a correct run could give at the quick size: T in (8, 16), check_T = 8, l in
    (2, 4); honest costs at the protocols' own counts (inside the bands)."""
    Ts = [8, 16]
    table = []
    for T in Ts:
        m = clog2(T)
        for fam in _DD_FAMS:
            for l in (2, 4):
                S = (
                    None
                    if fam == "fig4"
                    else (T.bit_length() + 4 + (T if fam == "fig3_full" else 8))
                )
                w = 1 + clog2(4 + T)  # a position read: its bit and address (n = 4 inputs)
                bits = m + (l + 2) * w if fam == "fig4" else (m + 1) * S + m  # the zoo's worst
                honest = m + (l + 1) * w if fam == "fig4" else bits  # V checks the last step
                table.append(
                    {
                        "T": T,
                        "protocol": fam,
                        "l": l,
                        "m": m,
                        "S": S,
                        "rounds": 1 if fam == "fig4" else m + 1,
                        "rounds_max_over_zoo": 1 if fam == "fig4" else m + 1,
                        "bits_read": honest,
                        "bits_read_min": honest if fam == "fig4" else S,  # output 0: stops at once
                        "bits_read_max_over_zoo": bits,
                        "v_queries_max": 1,
                        "a_message_bits": T if fam == "fig4" else (m + 1) * S,
                        "a_steps": T,
                        "b_steps": T if fam == "fig4" else T - 1,
                        "machines": 2,
                    }
                )
    wit = {
        name: {
            **_judged(sound=2 * 16),  # every witness of each no-instance
            "yes": 2,
            "no": 2,
            "witnesses": 16,
            "T": 8,
            "n": 4,
            "l": 2,
            "bits_bound": 19,
            "bits_max": 19,
            "a_steps_max": 8,
            "rounds": 4,
            "valid_min": 1,
            "valid": 5,  # x 2 Bs: the 10 completeness debates of _judged
            "n_comp": 2,
        }
        for name in ("plan", "constraints")
    }
    return dd.Measured(
        all_T=Ts,
        cost_T=Ts,
        stats={f: [_judged(), _judged()] for f in _DD_FAMS},
        ex_T={f: _judged(comp=256, sound=2048) for f in _DD_FAMS},
        ex3={**_judged(comp=0, sound=2 * 2**15), "S": 5, "sequences": 2**15},
        wit=wit,
        table=table,
    )


def _dd_rows(edit=None):
    cfg = dd.Config(**dd.SIZES["quick"])
    m = _dd_measured()
    if edit is not None:
        edit(m)
    return dd.claim_rows(cfg, m)[0]


def _set(path, value):
    """An edit of the measurement: ``path`` = (attribute, key, ...), the last item set."""

    def edit(m):
        obj = getattr(m, path[0])
        for k in path[1:-1]:
            obj = obj[k]
        obj[path[-1]] = value

    return edit


def _dd_table(protocol, column, factor, delta=0):
    def edit(m):
        for r in m.table:
            if r["protocol"] == protocol and r["T"] == 16 and r["l"] == 4:
                r[column] = r[column] * factor + delta

    return edit


def test_deterministic_rows_fail_when_a_measurement_breaks_its_bound():
    ok = _dd_rows()
    # per family: completeness, soundness, one oracle query; 2 exhaustive; Fig 3 3-step;
    # per witness task: completeness, soundness, costs; 2 bit bands, exact bits, rounds, prover work
    assert len(ok) == 3 * 3 + 2 + 1 + 3 * 2 + 5
    # by construction (per family V's query flag; the witness cost formula, T and T_pad - 1 steps)
    assert sum(c.finding for c in ok) == 3 + 2 + 1
    nan = math.nan
    cases = []
    for fam, label in _DD_FAMS.items():
        cases += [
            (
                {"edit": _set(("stats", fam, 1, "comp_accepts"), 9)},
                f"{label}: completeness",
            ),  # an honest A rejected once
            (
                {"edit": _set(("stats", fam, 0, "sound_accepts"), 1)},
                f"{label}: soundness",
            ),  # a lying A accepted once
            ({"edit": _set(("stats", fam, 1, "comp_accepts"), nan)}, f"{label}: completeness"),
            ({"edit": _set(("stats", fam, 0, "sound_accepts"), nan)}, f"{label}: soundness"),
        ]
    for fam in ("fig4", "fig3_full"):
        for v in (1, nan):
            cases.append(
                (
                    {"edit": _set(("ex_T", fam, "sound_accepts"), v)},
                    f"{_DD_FAMS[fam]}: no claimed transcript wins",
                )
            )
    for v in (1, nan):
        cases.append(({"edit": _set(("ex3", "sound_accepts"), v)}, "no message sequence wins"))
    # an exhaustive row that covered less than everything (a dropped batch) fails
    cases.append(({"edit": _set(("ex3", "sound_debates"), 2**15)}, "no message sequence wins"))
    for fam in ("fig4", "fig3_full"):
        which = f"{_DD_FAMS[fam]}: no claimed transcript wins"
        cases.append(({"edit": _set(("ex_T", fam, "sound_debates"), 511)}, which))  # 2 x 2^8
    for name in ("plan", "constraints"):
        which = f"Witness debate ({name}): soundness"
        cases.append(({"edit": _set(("wit", name, "sound_debates"), 31)}, which))
        which = f"Witness debate ({name}): completeness"  # a valid witness's debates dropped

        def dropped(m, name=name):
            m.wit[name].update(comp_debates=9, comp_accepts=9)  # all accepted, one short

        cases.append(({"edit": dropped}, which))
    for name in ("plan", "constraints"):
        for key, v, which in (
            ("comp_accepts", 9, "completeness"),
            ("comp_accepts", nan, "completeness"),
            ("sound_accepts", 1, "soundness"),
            ("sound_accepts", nan, "soundness"),
        ):
            cases.append(
                ({"edit": _set(("wit", name, key), v)}, f"Witness debate ({name}): {which}")
            )
    for proto, col, factor, which in (
        ("fig3_full", "rounds", 2.0, "Rounds: binary search"),  # reads the transcript linearly
        ("fig4", "rounds", nan, "Rounds: binary search"),
        ("fig3_window", "rounds_max_over_zoo", 1.5, "Rounds: binary search"),  # a liar's longer
        ("fig4", "rounds_max_over_zoo", 2.0, "Rounds: binary search"),
    ):
        cases.append(({"edit": _dd_table(proto, col, factor)}, which))
    _assert_each_fails(_dd_rows, cases)
    exact = "Bits V reads: the exact counts of docs/outcomes.md at every cost row (Fig 3, Fig 4)"
    for proto, col, factor, band in (  # out of its band: the band's row and the exact row fail
        ("fig4", "bits_read_max_over_zoo", 2.5, "grow as l log T"),  # reads ~ S log T
        ("fig4", "bits_read_max_over_zoo", 0.5, "grow as l log T"),
        ("fig4", "bits_read_max_over_zoo", nan, "grow as l log T"),
        ("fig3_full", "bits_read", 2.0, "grow as S log T"),  # reads the whole transcript
        ("fig3_window", "bits_read", nan, "grow as S log T"),
    ):
        failed = _failing(_dd_rows(_dd_table(proto, col, factor)))
        assert len(failed) == 2 and exact in failed and band in " ".join(failed), failed
    for proto, col, delta in (  # off the exact count, inside the bands: the exact row alone
        ("fig4", "bits_read_max_over_zoo", -(1 + clog2(4 + 16))),  # a_{T-1}'s read dropped
        ("fig4", "bits_read", 1),
        ("fig4", "bits_read_min", nan),
        ("fig3_window", "bits_read", -4),  # B's m answer bits dropped
        ("fig3_full", "bits_read_min", 1),
        ("fig3_full", "bits_read_max_over_zoo", 1),
        ("fig3_window", "a_message_bits", -17),  # one configuration (S = 17) short
        ("fig4", "a_message_bits", 1),
        ("fig4", "a_message_bits", nan),
    ):
        assert _failing(_dd_rows(_dd_table(proto, col, 1.0, delta))) == [exact], (proto, col)
    # no debate at all fails closed (not 0/0 = "completeness 1")
    none = _dd_rows(_set(("stats", "fig4"), [_judged(comp=0), _judged(comp=0)]))
    assert _failing(none) == [
        "Fig 4 cross-examination: completeness = 1 (honest A vs every B of the zoo)"
    ]
    # the spec's O(1) queries: the protocol records a 0/1 flag, so the row holds by construction
    # and is a finding (as the witness rows' are); a second query or a NaN is "not met"
    for fam, label in _DD_FAMS.items():
        for v in (2, nan):
            rows = _dd_rows(_set(("stats", fam, 1, "v_queries_max"), v))
            (row,) = [c for c in rows if f"{label}: V makes at most" in c.claim]
            assert row.finding and not row.passed and "holds by construction" in row.note
    # the findings still show a broken count (FAIL), without gating the run
    findings = [
        (_set(("wit", "plan", key), v), "Witness debate (plan): V queries")
        for key, v in (
            ("bits_max", 20),
            ("bits_max", nan),
            ("v_queries_max", 2),
            ("a_steps_max", 9),
        )
    ]
    findings += [
        (_dd_table("fig3_full", "b_steps", 3.0), "Honest prover work"),
        (_dd_table("fig4", "a_steps", nan), "Honest prover work"),
    ]
    for edit, which in findings:
        rows = _dd_rows(edit)
        failed = [c for c in rows if not c.passed]
        assert failed and all(c.finding and which in c.claim for c in failed), which
        assert "holds by construction" in failed[0].note
        assert ExperimentResult(claims=rows).passed


def _fig4_row(T, l, worst, a_bits=None, n=4):
    m, w = clog2(T), 1 + clog2(n + T)
    honest = m + (l + 1) * w
    return {"T": T, "protocol": "fig4", "l": l, "m": m, "S": None, "bits_read": honest}, {
        "bits_read_min": honest,
        "bits_read_max_over_zoo": worst,
        "a_message_bits": T if a_bits is None else a_bits,
    }


def _fig4_misses(cfg, T, l, worst, **kw):
    row, counts = _fig4_row(T, l, worst, n=cfg.n_inputs, **kw)
    return dd.formula_misses(cfg, [row | counts])


def test_deterministic_cost_counts_are_exact_where_the_zoo_reaches_them():
    """V's reads and A's messages equal docs/outcomes.md's counts: at T = fixed_bob_max_T every
    fixed B plays, so the zoo's worst Fig 4 read is the full count (one bit less fails); where
    only the last step reads l the worst may be less; honest A sends exactly T bits; the Fig 3
    zoo's worst and least reads are their counts, not bounds."""
    cfg = dd.Config(**dd.SIZES["quick"])  # fixed_bob_max_T = 16, n_inputs = 4, dep_window = 4
    T, l = cfg.fixed_bob_max_T, 6  # step 14 reads 4 + 4 >= 6 positions
    full = clog2(T) + (l + 2) * (1 + clog2(cfg.n_inputs + T))
    assert _fig4_misses(cfg, T, l, full) == []
    for worst, a_bits in ((full - 1, T), (full, T - 1)):
        assert _fig4_misses(cfg, T, l, worst, a_bits=a_bits) == [f"T{T}/fig4/l{l}"]
    late = dd.Config(n_machines=4, n_inputs=1, deps=(8,), dep_window=8, window=8, check_T=8)
    assert _fig4_misses(late, 8, 8, clog2(8) + 9 * (1 + clog2(9))) == []  # l + 1 reads: allowed
    m, S = clog2(T), 25
    fig3 = {"T": T, "protocol": "fig3_full", "l": 2, "m": m, "S": S, "bits_read_min": S}
    fig3 |= {"bits_read": (m + 1) * S + m, "a_message_bits": (m + 1) * S}
    assert dd.formula_misses(cfg, [fig3 | {"bits_read_max_over_zoo": (m + 1) * S + m}]) == []
    for bad in ({"bits_read_max_over_zoo": (m + 1) * S + m - 1}, {"bits_read_min": S - 1}):
        row = fig3 | {"bits_read_max_over_zoo": (m + 1) * S + m} | bad
        assert dd.formula_misses(cfg, [row]) == [f"T{T}/fig3_full/l2"], bad


def test_deterministic_bands_are_closed_at_2_and_divide_by_s_log_t():
    """[1, 2] is closed: Fig 4's worst case reaches 2 exactly (T = 8, l = 1, n = 4: 18 reads of
    (l + 2) log T = 9). Fig 3's reads are compared with S log T: 2.25 S log T fails (against
    S (log T + 1) it would have shown as 1.8)."""
    assert (clog2(8) + 3 * (1 + clog2(12))) / (3 * clog2(8)) == 2.0
    assert dd._band("b", "s", [1.0, 2.0], "").passed
    assert not dd._band("b", "s", [1.5, 2.0 + 2**-40], "").passed

    def edit(m):
        for r in m.table:
            if r["protocol"] == "fig3_full" and r["T"] == 16 and r["l"] == 4:
                r["bits_read"] = 9 * r["S"] * r["m"] // 4

    failed = _failing(_dd_rows(edit))
    assert any("grow as S log T" in c for c in failed), failed  # and the exact counts row


def test_deterministic_witness_soundness_over_no_debates_fails():
    def edit(m):
        m.wit["plan"].update(no=0, sound_debates=0, sound_accepts=0)

    failed = _failing(_dd_rows(edit))
    assert failed == [
        "Witness debate (plan): soundness = 0 over every witness of every no-instance"
    ]


@pytest.mark.parametrize("T", [1, 2, 5, 8, 16])
@pytest.mark.parametrize(
    "sizes",
    [
        dd.SIZES["quick"],
        dict(n_machines=8, n_inputs=1, deps=(2, 8), dep_window=8, window=8, check_T=8),
        dict(n_machines=4, n_inputs=0, deps=(3,), dep_window=2, window=8, check_T=8),
    ],
)
def test_deterministic_cost_groups_are_the_programs_largest_read_sets(sizes, T):
    """Each machine's group is l = max_t |I(t)| of the programs the experiment draws."""
    from dedebate.machines.configurations import random_programs
    from experiments.deterministic_debate import population

    cfg = dd.Config(**sizes)
    kw = dict(n_inputs=cfg.n_inputs, n_deps=cfg.deps, dep_window=cfg.dep_window)
    progs = random_programs(0, cfg.n_machines, T, oracle_frac=cfg.oracle_frac, **kw)
    reads = np.asarray(progs.dep_mask).sum(-1).max(-1)
    groups = population.cost_groups(cfg, T)
    assert {l: rows.tolist() for l, rows in groups.items()} == {
        int(l): np.flatnonzero(reads == l).tolist() for l in np.unique(reads)
    }


# ---- stackelberg -----------------------------------------------------------------------------
def _sb_rows(
    honest_min=None, rho_max=1.5, chain_max=2e-7, exploited=(None, None), in_class=(None, None)
):
    cfg = sb.Config(**sb.SIZES["quick"])
    thr = cfg.rho ** -(cfg.depth + 1)
    honest_min = thr + 0.01 if honest_min is None else honest_min
    rows = [  # two pairs on the rho-stable trees, one (no honest payoff) on the unstable ones
        {"part": "stable", "run": "nB20", "honest_u_a_min": honest_min + 0.01, "chain_abs_err": 0},
        {"part": "stable", "run": "nB20", "honest_u_a_min": honest_min, "chain_abs_err": chain_max},
        {"part": "unstable", "run": "nB20", "honest_u_a_min": math.nan, "chain_abs_err": 0.0},
    ]
    for r, e, c in zip(rows, (*exploited, None), (*in_class, None)):
        r["exploited_u_a"], r["class_exploited_u_a"] = e, c
    return sb.proven_rows(cfg, rho_max, rows)[0]


def test_stackelberg_exploit_row_counts_seeds_that_hold_against_the_searched_b():
    """A's payoff against the strongest B found, per seed of the main schedule: the fraction of
    seeds within tol of rho^-(d+1) (a NaN is not), met when its exact lower bound is above 1/2
    (never with 2 seeds: 2/2 has 0.158); no row where nothing was searched."""
    thr = sb.Config().rho ** -(sb.Config().depth + 1)
    assert len(_sb_rows()) == 2
    for exploited, k in (((thr, 0.95 * thr), 2), ((0.04, thr), 1), ((math.nan, thr), 1)):
        *_, row = _sb_rows(exploited=exploited)
        assert row.finding and not row.passed and "strongest B a search finds" in row.claim
        assert row.value == k / 2 and (row.lo, row.hi) == sb.exact_interval(k, 2)[1:]
        assert row.note.startswith(f"{k}/2 seeds at >= {0.9 * thr:.4f}")
    *_, table, within = _sb_rows(exploited=(thr, thr), in_class=(0.04, thr))
    assert "of tabular Bs" in table.note and table.value == 1.0
    assert "its trained class" in within.claim and "class (the (32,) MLP" in within.note
    assert within.value == 0.5 and not within.passed


def test_stackelberg_proven_rows_fail_when_a_measurement_breaks_its_bound():
    assert [c.claim.split(":")[0] for c in _sb_rows()] == [
        "Completeness against the trained estimators",
        "Chaining at the end of training",
    ]
    thr = sb.Config().rho ** -(sb.Config().depth + 1)
    _assert_each_fails(
        _sb_rows,
        [
            ({"honest_min": thr - 1e-4}, "Completeness"),  # a trained B beats the honest A
            ({"honest_min": math.nan}, "Completeness"),
            ({"honest_min": math.inf}, "Completeness"),  # no rho-stable tree measured
            ({"rho_max": 2.1}, "Completeness"),  # the trees are not rho-stable: no premise
            ({"rho_max": math.nan}, "Completeness"),
            ({"chain_max": 1e-5}, "Chaining"),  # the rewards do not decompose
            ({"chain_max": math.nan}, "Chaining"),
        ],
    )


def test_stackelberg_completeness_reads_every_stable_part_at_one_trees_tolerance():
    """Honest A's minimum is per tree, so its tolerance is one tree's rounding and the tie rule
    (not the chaining row's mean over trees, nor twice the tie); the warm part's Bs count."""
    from dedebate.agents.ped_strategies import tie_loss

    cfg = sb.Config(**sb.SIZES["quick"])
    thr, tie = cfg.rho ** -(cfg.depth + 1), tie_loss(cfg.rho, cfg.depth)
    tol, wide = sb.exact_tol(cfg.depth), sb.exact_tol(cfg.depth, cfg.n_trees)
    assert wide > tol
    for honest, ok in (
        (thr - tol - tie, True),
        (thr - tol - tie - (wide - tol) / 2, False),
        (thr - tol - 1.5 * tie, False),
    ):
        row = {"part": "stable", "run": "nB20", "honest_u_a_min": honest, "chain_abs_err": 0.0}
        (completeness, _), _, _ = sb.proven_rows(cfg, 1.5, [row])
        assert completeness.passed is ok, honest
    warm = {"part": "warm", "run": "warm", "honest_u_a_min": thr - 0.01, "chain_abs_err": 0.0}
    row["honest_u_a_min"] = thr + 0.01
    (completeness, _), _, metrics = sb.proven_rows(cfg, 1.5, [row, warm])
    assert completeness.value == thr - 0.01 and not completeness.passed
    assert "warm/warm" in metrics["proven"]["honest_min_per_run"]


# ---- stochastic_selfplay ---------------------------------------------------------------------
def _ssp_rows(honest=(0.7, 0.8, 0.75), alice=(0.2, 0.3, 0.25), mc=None):
    main = (honest[:1], alice[:1])  # shown in the notes only
    sides = (0.6402, 0.3956)
    proven = ssp.proven_claims(0.6402, 0.3956, "F2 (K = 2), T = 4", honest, alice, sides, main)
    return proven + ssp.mc_claims(mc or {"yes": (0.75, 3000, 4000), "no": (0.25, 1000, 4000)})


def test_stochastic_selfplay_gating_rows_fail_when_a_measurement_breaks_its_bound():
    assert len(_ssp_rows()) == 4 and not any(c.finding for c in _ssp_rows())
    nan = math.nan
    _assert_each_fails(
        _ssp_rows,
        [
            ({"honest": (0.7, 0.63, 0.75)}, "Honest Alice vs every"),  # a Bob beats honest Alice
            ({"honest": (0.7, nan, 0.75)}, "Honest Alice vs every"),  # a NaN that is not first
            ({"honest": ()}, "Honest Alice vs every"),  # no seed
            ({"alice": (0.2, 0.3, 0.4)}, "Every self-play"),  # a lying Alice above
            ({"alice": (0.2, nan, 0.25)}, "Every self-play"),
            ({"mc": {"yes": (0.75, 3100, 4000), "no": (0.25, 1000, 4000)}}, "(yes) agrees"),
            ({"mc": {"yes": (0.75, 3000, 4000), "no": (0.25, nan, 4000)}}, "(no) agrees"),
            ({"mc": {"yes": (nan, 3000, 4000), "no": (0.25, 1000, 4000)}}, "(yes) agrees"),
            ({"mc": {"yes": (0.75, 0, 0), "no": (0.25, 1000, 4000)}}, "(yes) agrees"),
        ],
    )
    assert _failing(_ssp_rows(honest=(0.7, 0.6402, 0.75), alice=(0.2, 0.3956))) == []  # at bounds


def test_stochastic_selfplay_counts_a_nan_acceptance_on_the_wrong_side():
    """A seed whose acceptance is not a number is on the wrong side of 1/2 on either instance (on
    the no-instance it counted as right: NaN > 1/2 is false)."""
    evs = [{"value": v} for v in (0.3, 0.7, math.nan)]
    assert ssp.wrong_side(evs, "no") == 2 and ssp.wrong_side(evs, "yes") == 2
    assert ssp.wrong_side([{"value": 0.5}], "no") == 0  # 1/2 itself is not above 1/2
    assert ssp.wrong_side([{"value": 0.5}], "yes") == 1  # nor is it on the yes side


def test_stochastic_selfplay_schedule_finding_is_not_met_with_a_nan():
    """More n_B leaves no more no-instance seeds on the wrong side: met on the counts, and not
    met when a value is NaN, on either side (a NaN at the small n_B once raised its count)."""

    def evs(no_small, no_large):
        yes = [{"value": 0.9}] * 4
        return {
            1: {"yes": yes, "no": [{"value": v} for v in no_small]},
            20: {"yes": yes, "no": [{"value": v} for v in no_large]},
        }

    claim, per_n = ssp.schedule_claim(evs((0.9, 0.9, 0.2, 0.2), (0.9, 0.2, 0.2, 0.2)), 4)
    assert claim.finding and claim.passed and claim.value == 0.25
    assert per_n == {"1": {"yes": 0, "no": 2}, "20": {"yes": 0, "no": 1}}
    assert not ssp.schedule_claim(evs((0.2,) * 4, (0.9, 0.2, 0.2, 0.2)), 4)[0].passed
    assert ssp.schedule_claim(evs((0.9, 0.2, 0.2, 0.2), (0.2, 0.9, 0.2, 0.2)), 4)[0].passed  # 1, 1
    for small, large in (((math.nan,) * 4, (0.9,) * 4), ((0.9,) * 4, (0.2, 0.2, 0.2, math.nan))):
        claim, _ = ssp.schedule_claim(evs(small, large), 4)
        assert not claim.passed and "NaN" in claim.note


def _ssp_findings(values, aim=(0.9,) * 6, tracking=(0.0,) * 6, gap_ub=(0.0,) * 6):
    """The findings of 6 seeds per instance (b = 0.1, gap_tol 0.05, sides 0.6 / 0.4)."""
    zero = dict.fromkeys(("false_alarm", "false_alarm_c", "max_dev_visited", "gap"), 0.0)
    ev = [
        zero | {"value": v, "hit": a, "tracking": t, "gap_ub": g, "bob_best_response": 0.5}
        for v, a, t, g in zip(values, aim, tracking, gap_ub)
    ]
    constants = types.SimpleNamespace(b=0.1, tau_vera=0.5, s=0.01)
    results = {case: {"ev": ev, "p1": 0.5} for case in ("yes", "no")}
    return {k: rows[0] for k, rows in ssp.findings(results, constants, 0.05, (0.6, 0.4)).items()}


def test_stochastic_selfplay_findings_decide_on_the_worst_seed_and_the_95_percent_bounds():
    """Each finding of the yes-instance passes on good seeds, and fails where only its worst
    seed or its 95% bound (not its mean or fraction) misses: 6 seeds."""
    assert all(r.passed and r.finding for r in _ssp_findings((0.9,) * 6).values())
    outcome = _ssp_findings((0.9, 0.7, 0.55, 0.8, 0.9, 0.9))["outcome"]
    assert (outcome.value, outcome.passed) == (0.55, False)  # the worst seed, below 0.6
    aim = _ssp_findings((0.9,) * 6, aim=(0.2, 1.0) * 3)["targeting"]
    assert abs(aim.value - 0.6) < 1e-12 and not aim.passed  # its lower bound is below 1/2
    track = _ssp_findings((0.9,) * 6, tracking=(0.0,) * 5 + (0.3,))["tracking"]
    assert track.value < 0.1 and not track.passed  # its upper bound is above b
    conv = _ssp_findings((0.9,) * 6, gap_ub=(0.0,) * 5 + (0.1,))["convergence"]
    assert conv.value == 5 / 6 and not conv.passed  # 5/6: Clopper-Pearson's lower is below 1/2


def test_selfplay_order_check_fails_a_seed_whose_exact_values_are_out_of_order():
    """Bob's best response <= value <= Alice's best response <= its bound holds for any trained
    pair: a Bob "best response" that maximises (above the value), or a NaN, fails the run."""
    keys = ("bob_best_response", "value", "alice_best_response", "alice_best_response_ub")

    def results(*seeds):
        return {"yes": {"ev": [dict(zip(keys, s)) for s in seeds]}}

    good = (0.3, 0.5, 0.6, 0.61)
    assert consistency_rows(ssp.order_checks(results(good, (0.5, 0.5, 0.5, 0.5)))) == []
    for bad in (
        (0.7, 0.5, 0.6, 0.61),
        (0.3, 0.5, 0.6, 0.59),
        (0.3, math.nan, 0.6, 0.61),
        (0.3, 0.5, 0.6, 0.6 - 1e-4),  # out of order by 1e-4, far above float64 rounding
    ):
        (row,) = consistency_rows(ssp.order_checks(results(good, bad)))
        assert not row.passed and "seeds [1]" in row.note
    # the main run's Alices against honest Bob, by measure_pairs and by against_honest_bob: one
    # seed's value taken for another's (0.2 for 0.25) fails
    res = {"no": {"ev": [{**dict(zip(keys, good)), "value_vs_honest_bob": v} for v in (0.2, 0.25)]}}
    assert (
        consistency_rows(ssp.order_checks({"no": {**res["no"], "main_vs_honest_bob": [0.2, 0.25]}}))
        == []
    )
    (row,) = consistency_rows(
        ssp.order_checks({"no": {**res["no"], "main_vs_honest_bob": [0.2, 0.2]}})
    )
    assert not row.passed and "measured two ways" in row.claim


# ---- stochastic_debate: the zoo cells ----------------------------------------------------------
def _cell_rows(wins_a=(100, 250, 300), wins_b=(900, 800, 700), trials=1000, constants="lean"):
    claims, _ = sd.cell_claims(
        2,
        8,
        "F2",
        constants,
        (0.75, 0.25),
        (0.64, 0.3956),
        ["honest", "flip", "es"],
        ["honest", "random", "es"],
        np.array(wins_a, float),
        np.array(wins_b, float),
        trials,
    )
    return claims


def test_stochastic_cell_rows_fail_on_a_lying_alice_or_a_winning_bob():
    assert [c.claim.split(",")[0] for c in _cell_rows()] == ["completeness", "soundness"]
    assert all(c.p_value is not None for c in _cell_rows())  # Monte-Carlo rows of the family
    nan = math.nan
    _assert_each_fails(
        _cell_rows,
        [
            ({"wins_a": (100, 450, 300)}, "soundness"),  # a lying Alice accepted above the bound
            ({"wins_a": (100, nan, 300)}, "soundness"),
            ({"wins_b": (900, 800, 560)}, "completeness"),  # a Bob that beats honest Alice
            ({"wins_b": (900, nan, 700)}, "completeness"),
            ({"wins_a": (100, 450, 300), "constants": "paper"}, "soundness"),
        ],
    )
    assert len(_failing(_cell_rows(trials=0))) == 2  # no debate: both rows fail closed


def test_stochastic_member_row_fails_when_a_member_strays_from_its_exact_acceptance():
    """The members' row against the exact DP: counts at their exact rates pass; one member 0.1
    off (a checker that accepts some lies it should reject), a NaN or a count over n fail."""
    names, exact, n = ["always 1", "+s", "honest"], np.array([0.0, 0.3531, 1.0 + 1e-16]), 2000
    wins = np.round(exact * n)

    def row(w):
        return sd.member_claim(2, 8, names, np.array(w, float), exact, n)

    assert row(wins).passed and row(wins).p_value == 1.0
    assert row(wins + [0, 40, 0]).passed  # 0.02 off: within 0.05 / 3 at n = 2000
    for bad in (wins + [200, 0, 0], wins + [0, 200, 0], [0, math.nan, n], [0, 706, n + 1]):
        assert not row(bad).passed, bad
    assert not sd.member_claim(2, 8, names, wins, exact + [0, math.nan, 0], n).passed


# ---- ogd_estimator: soundness against fixed provers --------------------------------------------
def _ogd_sound(
    u=0.2,
    pr=0.5,
    u_construct=None,
    reward=0.01,
    max_adv=0.02,
    nan_reward=False,
    final=0.0,
    pr_construct=None,
):
    cfg = ogd.Config()  # d = 2, rho = 2, eta = 0.2: delta = 0.2 / 7, bound 0.5 / 8 + 0.2
    st, delta = types.SimpleNamespace, ogd.sound_delta(cfg)
    stages = [  # each with its bound (spec PED 6.4): 2 delta for k >= 1, delta for round 0
        st(stage="init", steps=4, max_adv=0.01, reward=0.07, bound=0.5 / 8 + delta),
        st(stage="k=2", steps=5, max_adv=max_adv, reward=reward, bound=2 * delta),
        st(
            stage="k=1",
            steps=3,
            max_adv=0.01,
            reward=math.nan if nan_reward else 0.0,
            bound=2 * delta,
        ),
        st(stage="final", steps=0, max_adv=1.0, reward=final, bound=delta),
    ]
    prs = (pr, pr if pr_construct is None else pr_construct)
    return ogd.soundness_claims(
        cfg, "obfuscating", u, prs, u if u_construct is None else u_construct, stages
    )


def test_ogd_soundness_rows_fail_on_a_paying_liar():
    assert len(_ogd_sound()) == 2
    at = _ogd_sound(reward=2 * ogd.sound_delta(ogd.Config()))[1]  # E[R_2] = 2 delta holds
    assert (at.value, at.passed) == (1.0, True)
    _assert_each_fails(
        _ogd_sound,
        [
            ({"u": 0.27}, "U_A <= rho^-(d+1)"),  # the liar earns above 2^-3 Pr + eta = 0.2625
            ({"u": math.nan}, "U_A <= rho^-(d+1)"),
            ({"pr": math.nan}, "U_A <= rho^-(d+1)"),
            ({"u_construct": 0.25}, "U_A <= rho^-(d+1)"),  # enumeration and construction disagree
            ({"u_construct": 0.2 + 2 * ogd.payoff_tol(ogd.Config())}, "U_A <= rho^-(d+1)"),
            ({"pr_construct": 0.0}, "U_A <= rho^-(d+1)"),  # Pr[A correct] too (A's answer taken)
            ({"pr_construct": math.nan}, "U_A <= rho^-(d+1)"),
            ({"max_adv": 0.03}, "U_A <= rho^-(d+1)"),  # a stage that did not get below delta
            ({"reward": 0.06}, "per-round mean reward"),  # E[R_k] above 2 delta = 0.0571
            ({"nan_reward": True}, "per-round mean reward"),
            ({"final": 0.04}, "per-round mean reward"),  # E[R_0] above delta = 0.0286
        ],
    )
    # float32 rounding (d = 2, q = 3, 4 trees: 2 (44 + 4 + 4) 2^-24 (1 + 1/2 + 1/4 + 1/8))
    assert ogd.payoff_tol(ogd.Config()) == 2 * 52 * 2.0**-24 * 1.875
    assert _ogd_sound(u_construct=0.2 + 0.5 * ogd.payoff_tol(ogd.Config()))[0].passed
    # each round against its own bound: round 0 at 0.04 reads 0.04 / delta = 1.4, above 1
    row = _ogd_sound(final=0.04)[1]
    assert math.isclose(row.value, 0.04 * 7 / 0.2) and not row.passed
