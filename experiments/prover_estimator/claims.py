"""The claim rows of sections 1-5: measured numbers in, rows out (pure; tests feed them lies)."""

from __future__ import annotations

from dedebate.lab.experiment import Claim, consistency_rows, strict_max

from .families import DIRECTION_POLICIES, SYMMETRIC_POLICIES

EXACT_TOL = 1e-6  # float32 rounding of exact expectations
LP_TOL = 1e-6  # HiGHS optimality tolerance


def _exact(claim, source, bound, value, passed, note="") -> Claim:
    return Claim.exact(claim, source, bound, float(value), bool(passed), note)


def fbs_claims(qs, rows, flips) -> list[Claim]:
    """Section 1: the fbs closed forms, primal = dual, and ``F(eps) = eps fbs`` from the LP rows of
    :func:`.fbs_table.fbs_rows` and
    :func:`.fbs_table.flip_rows`."""
    claims = []
    for family in ("threshold", "AND", "OR", "majority", "parity", "dictator"):
        fam = [r for r in rows if r["family"] == family]
        if not fam:
            continue
        err = strict_max(abs(r["lp"] - r["closed"]) for r in fam)
        claims.append(
            _exact(
                f"fbs of {family} = closed form (LP, q in {list(qs)}, all w)",
                "spec PED 3.4",
                f"max |LP - closed| <= {LP_TOL:g}",
                err,
                err <= LP_TOL,
                f"{len(fam)} points",
            )
        )
    dual_err = strict_max(abs(r["lp"] - r["dual"]) for r in rows)
    claims.append(
        _exact(
            "fbs packing LP = certificate (dual) LP",
            "spec PED 3.2",
            f"max |primal - dual| <= {LP_TOL:g}",
            dual_err,
            dual_err <= LP_TOL,
            f"{len(rows)} points",
        )
    )
    ferr = strict_max(abs(r["F"] - r["eps_fbs"]) for r in flips)
    claims.append(
        _exact(
            "worst-case flip probability F(eps) = eps * fbs for eps <= 1/q (LP)",
            "spec PED 3.3",
            f"max |F - eps fbs| <= {LP_TOL:g}",
            ferr,
            ferr <= LP_TOL,
            f"thresholds, q <= 5, eps in {{0.01, 1/q}}, {len(flips)} points",
        )
    )
    return claims


def rho_claims(rho_noisy, rho_unanimous, rho_and) -> list[Claim]:
    """Section 2: rho (max fbs over internal nodes, by LP) of the library trees."""
    return [
        _exact(
            f"rho of the {name} = max fbs over internal nodes (LP)",
            "spec PED 3.3, 3.4, 9.4, 9.5",
            f"== {expected:.6g}",
            value,
            abs(value - expected) <= LP_TOL,
        )
        for name, expected, value in (
            ("noisy-evidence trees Thr_5 of 9 (8-9 / 0-1 true children)", 2.0, rho_noisy),
            ("unanimous Thr_5 of 9 tree", 9.0 / 5.0, rho_unanimous),
            ("AND decomposition (q = 9) offered as the unstable alternative", 9.0, rho_and),
        )
    ]


def completeness_claims(m, rho, d, shift_errors, random_joints, n_trees) -> list[Claim]:
    """Section 2: honest vs honest, the completeness zoo, error-shifting B and the unstable
    decomposition, from the ``completeness/...`` numbers ``m`` of :func:`point`'s ``fn`` (mins
    and maxes over ``n_trees`` trees)."""
    r = 1.0 / rho
    base = r ** (d + 1)
    dev = float(m["completeness/honest_dev"])
    claims = [
        _exact(
            f"honest vs honest: U_A = rho^-(d+1) (noisy evidence, d={d}, rho={rho:g})",
            "spec PED 2.3, 9.1",
            f"== {base:.6g}",
            float(m["completeness/honest_min"]),
            dev <= EXACT_TOL,
            f"{n_trees} trees, max |U_A - rho^-(d+1)| = {dev:.2g}",
        )
    ]
    zoo = {
        "root liar": ("root_liar_min", n_trees),
        "constant 1/2": ("constant_half_min", n_trees),
        f"random joints (x{random_joints})": ("random_joint_min", n_trees * random_joints),
    }
    for name, (key, n) in zoo.items():
        v = float(m[f"completeness/{key}"])
        claims.append(
            _exact(
                f"completeness: honest A vs {name} B earns >= rho^-(d+1)",
                "spec PED 4, Thm 6.1(1)",
                f">= {base:.6g}",
                v,
                v >= base - EXACT_TOL,
                f"min over {n} debates",
            )
        )
    for i, e in enumerate(shift_errors):
        bound = base + e * r**d * (1 - r)
        v = float(m[f"completeness/error_shifting_min/{i}"])
        claims.append(
            _exact(
                f"completeness: honest A vs error-shifting B (e={e:g}) earns "
                f">= r^(d+1) + e r^d (1-r)",
                "spec PED 4",
                f">= {bound:.6g}",
                v,
                v >= bound - EXACT_TOL,
                f"min over {n_trees} trees",
            )
        )
    # spec 9.5: honest answers on an unstable (AND) decomposition are pushed below the margin
    u_unst = float(m["completeness/unstable_max_e1"])
    claims.append(
        _exact(
            "a prover arguing on an unstable decomposition (AND, fbs = 9) falls below "
            "rho^-(d+1) against error-shifting B (e=1): the protocol errs toward rejecting",
            "spec PED 9.5, 8.7",
            f"< {base:.6g}",
            u_unst,
            u_unst < base - EXACT_TOL,
            f"max over {n_trees} trees; expected 9^-{d} = {9.0**-d:.6g}",
        )
    )
    return claims


def error_shift_claims(u5_hh, u5, rho5, shift_errors, u_ctrl, control_rho) -> list[Claim]:
    """Section 3: error-shifting B meets its bound exactly when fbs = rho = 2 on the path (q=5
    Thr_3, d=4), and the negative control (rho below fbs) loses completeness. ``u5[i]`` is U_A at
    root error ``shift_errors[i]``; ``u_ctrl`` U_A at e = 1 with ``rho = control_rho``."""
    claims = [
        _exact(
            "honest vs honest: U_A = rho^-(d+1) (q=5 Thr_3, d=4, rho=2)",
            "spec PED 9.1",
            "== 0.03125",
            u5_hh,
            abs(u5_hh - 0.03125) <= EXACT_TOL,
            "B = error-shifting estimator at e = 0, i.e. honest",
        )
    ]
    spec_values = {0.2: 0.0375, 0.5: 0.046875, 1.0: 0.0625}
    for i, e in enumerate(shift_errors):
        target = 0.5**5 + e * 0.5**4 * 0.5
        note = f"spec's number {spec_values[e]}" if e in spec_values else ""
        claims.append(
            _exact(
                f"error-shifting B (e={e:g}) meets the bound exactly when fbs = rho "
                f"= 2 on the path (q=5 Thr_3, d=4)",
                "spec PED 4, 9.2",
                f"== {target:.6g}",
                u5[i],
                abs(u5[i] - target) <= EXACT_TOL and abs(rho5 - 2) <= LP_TOL,
                note,
            )
        )
    base_ctrl = (1.0 / control_rho) ** (4 + 1)
    claims.append(
        _exact(
            f"negative control: with rho={control_rho:g} < fbs=2 completeness fails "
            "(error-shifting B, e=1)",
            "spec PED 4, 2.5",
            f"< {base_ctrl:.6g}",
            u_ctrl,
            bool(u_ctrl < base_ctrl - EXACT_TOL),
            f"expected 2^-4 = 0.0625; r^(d+1) = {base_ctrl:.4f}",
        )
    )
    return claims


def obfuscation_claims(m, rho_o, qo, do, n_trees) -> list[Claim]:
    """Section 4, exact: the A zoo vs the calibrated estimator and the naive-debate liar, from the
    ``obfuscation/...`` numbers ``m`` of :func:`point`'s ``fn`` (over ``n_trees`` trees;
    ``liar_max_abs/i`` for policy i of DIRECTION_POLICIES). The symmetric policies' E[U_A] = 0
    is a consistency check (a row only if it fails)."""
    base_o = rho_o ** -(do + 1)
    claims = []
    for i, name in enumerate(DIRECTION_POLICIES):
        v = float(m[f"obfuscation/liar_max_abs/{i}"])
        if name in SYMMETRIC_POLICIES:
            # E[U_A] = 0 for every B that gives the direction no weight (p_d = 0), by
            # symmetry: a consistency check of the payoff code, not a test of B
            claims.extend(
                consistency_rows(
                    {
                        f"obfuscating liar ({name}): E[U_A] = 0 by symmetry": (
                            v <= EXACT_TOL,
                            f"max |E U_A| = {v:.3g} over {n_trees} trees",
                        )
                    }
                )
            )
            continue
        claims.append(
            _exact(
                f"obfuscating liar ({name}) vs calibrated B: E[U_A] = 0 exactly (all "
                f"paths, q={qo}, d={do})",
                "spec PED 9.3, Thm 6.1(2)",
                "== 0",
                v,
                v <= EXACT_TOL,
                f"max |E U_A| over {n_trees} trees",
            )
        )
    v = float(m["obfuscation/stable_liar_max"])
    claims.append(
        _exact(
            "liar on the stable decomposition vs calibrated B: E[U_A] <= r^(d+1) Pr[A correct] = 0",
            "Thm 6.1(2)",
            "<= 0",
            v,
            v <= EXACT_TOL,
        )
    )
    v = float(m["obfuscation/wrong_direction_max"])
    claims.append(
        _exact(
            "wrong-direction A vs calibrated B: U_A <= r^(d+1) Pr[A correct]",
            "Thm 6.1(2)",
            f"<= {base_o:.6g}",
            v,
            v <= base_o + EXACT_TOL,
        )
    )
    dev = float(m["obfuscation/honest_dev"])
    claims.append(
        _exact(
            f"honest A on the stable decomposition vs calibrated B earns rho^-(d+1) "
            f"(rho={rho_o:g})",
            "spec PED 9.3",
            f"== {base_o:.6g}",
            float(m["obfuscation/honest_min"]),
            dev <= EXACT_TOL,
        )
    )
    target = 1.0 - qo**-do
    dev = float(m["obfuscation/naive_liar_dev"])
    claims.append(
        _exact(
            f"naive recursive debate: the obfuscating liar survives a uniform "
            f"challenger with probability 1 - q^-d (q={qo}, d={do}, exact)",
            "spec PED 9.3",
            f"== {target:.6g}",
            float(m["obfuscation/naive_liar_mean"]),
            dev <= EXACT_TOL,
            f"honest survival {float(m['obfuscation/naive_honest_min']):.6g}",
        )
    )
    return claims


def sampled_claims(us, surv, qo, do, n_trees) -> list[Claim]:
    """Section 4, sampled: the obfuscating liar's mean U_A per direction policy (``us``:
    [policy, tree, episode]) contains 0, and the naive liar's survival (``surv``: 0/1 outcomes)
    has an exact interval containing ``1 - q^-d``. One row per policy, then the naive row."""
    claims = []
    for i, name in enumerate(DIRECTION_POLICIES):
        claims.append(
            Claim.mean(
                f"obfuscating liar ({name}) vs calibrated B earns 0 (sampled debates)",
                "spec PED 9.3",
                "==",
                0.0,
                us[i].ravel(),
                f"{us[i].size} sampled debates over {n_trees} trees",
                bound="== 0 (interval contains 0)",
            )
        )
    target = 1.0 - qo**-do
    claims.append(
        Claim.proportion(
            f"naive recursive debate: liar survival 1 - q^-d (q={qo}, d={do}, sampled)",
            "spec PED 9.3",
            "==",
            target,
            float(surv.sum()),
            surv.size,
            f"{surv.size} sampled debates",
            bound=f"== {target:.6g} (exact interval contains it)",
        )
    )
    return claims


def signal_claims(sig, rho_o, qo) -> list[Claim]:
    """Section 5: the exact training signals of both protocols against ``rho^-(d+1)`` and
    ``q^-d`` (rows of the ``signal`` table)."""
    dev_p = strict_max(abs(s["ped_delta"] - s["rho_power"]) for s in sig)
    dev_n = strict_max(abs(s["naive_delta"] - s["q_power"]) for s in sig)
    ds = [s["depth"] for s in sig]
    return [
        _exact(
            f"training signal of prover-estimator debate = rho^-(d+1) (d in {ds})",
            "spec PED 7.3",
            "max |Delta - rho^-(d+1)| <= 1e-6",
            dev_p,
            dev_p <= EXACT_TOL,
            f"hidden-flaw trees q={qo}, rho={rho_o:g}",
        ),
        _exact(
            f"training signal of naive recursive debate = q^-d (d in {ds})",
            "spec PED 7.3, 9.3",
            "max |Delta - q^-d| <= 1e-6",
            dev_n,
            dev_n <= EXACT_TOL,
            f"q={qo}",
        ),
    ]
