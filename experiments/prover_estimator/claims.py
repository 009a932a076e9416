"""The claim rows of sections 1-5: measured numbers in, rows out (pure; tests feed them lies)."""

from __future__ import annotations

from dedebate.lab.experiment import Claim, consistency_rows, strict_max

from .zoo import DIRECTION_POLICIES, SYMMETRIC_POLICIES

TOL = 1e-6  # float32 rounding of exact expectations; HiGHS optimality tolerance


def _exact(claim, source, bound, value, passed, note="") -> Claim:
    return Claim.exact(claim, source, bound, float(value), bool(passed), note)


def fbs_claims(qs, rows, flips) -> list[Claim]:
    """Section 1: the fbs closed forms, primal = dual, and ``F(eps) = eps fbs`` (LP rows)."""
    claims = []
    for family in ("threshold", "AND", "OR", "majority", "parity", "dictator"):
        fam = [r for r in rows if r["family"] == family]
        if fam:
            err = strict_max(abs(r["lp"] - r["closed"]) for r in fam)
            claims.append(
                _exact(
                    f"fbs of {family} = closed form (LP, q in {list(qs)}, all w)",
                    "spec PED 3.4",
                    f"max |LP - closed| <= {TOL:g}",
                    err,
                    err <= TOL,
                    f"{len(fam)} points",
                )
            )
    dual = strict_max(abs(r["lp"] - r["dual"]) for r in rows)
    flip = strict_max(abs(r["F"] - r["eps_fbs"]) for r in flips)
    return [
        *claims,
        _exact(
            "fbs packing LP = certificate (dual) LP",
            "spec PED 3.2",
            f"max |primal - dual| <= {TOL:g}",
            dual,
            dual <= TOL,
            f"{len(rows)} points",
        ),
        _exact(
            "worst-case flip probability F(eps) = eps * fbs for eps <= 1/q (LP)",
            "spec PED 3.3",
            f"max |F - eps fbs| <= {TOL:g}",
            flip,
            flip <= TOL,
            f"thresholds, q <= 5, eps in {{0.01, 1/q}}, {len(flips)} points",
        ),
    ]


def rho_claims(rho_noisy, rho_unanimous, rho_and) -> list[Claim]:
    """Section 2: rho (max fbs over internal nodes, by LP) of the library trees."""
    return [
        _exact(
            f"rho of the {name} = max fbs over internal nodes (LP)",
            "spec PED 3.3, 3.4, 9.4, 9.5",
            f"== {expected:.6g}",
            value,
            abs(value - expected) <= TOL,
        )
        for name, expected, value in (
            ("noisy-evidence trees Thr_5 of 9 (8-9 / 0-1 true children)", 2.0, rho_noisy),
            ("unanimous Thr_5 of 9 tree", 9.0 / 5.0, rho_unanimous),
            ("AND decomposition (q = 9) offered as the unstable alternative", 9.0, rho_and),
        )
    ]


def completeness_claims(m, rho, d, shift_errors, random_joints, n_trees) -> list[Claim]:
    """Section 2: honest A vs the completeness zoo (``completeness/...`` mins over the trees)."""
    r = 1.0 / rho
    base = r ** (d + 1)
    dev = float(m["completeness/honest_dev"])
    claims = [
        _exact(
            f"honest vs honest: U_A = rho^-(d+1) (noisy evidence, d={d}, rho={rho:g})",
            "spec PED 2.3, 9.1",
            f"== {base:.6g}",
            float(m["completeness/honest_min"]),
            dev <= TOL,
            f"{n_trees} trees, max |U_A - rho^-(d+1)| = {dev:.2g}",
        )
    ]
    for name, key, n in (
        ("root liar", "root_liar", n_trees),
        ("constant 1/2", "constant_half", n_trees),
        (f"random joints (x{random_joints})", "random_joint", n_trees * random_joints),
    ):
        v = float(m[f"completeness/{key}_min"])
        claims.append(
            _exact(
                f"completeness: honest A vs {name} B earns >= rho^-(d+1)",
                "spec PED 4, Thm 6.1(1)",
                f">= {base:.6g}",
                v,
                v >= base - TOL,
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
                v >= bound - TOL,
                f"min over {n_trees} trees",
            )
        )
    u = float(m["completeness/unstable_max_e1"])  # spec 9.5: pushed below the margin
    claims.append(
        _exact(
            "a prover arguing on an unstable decomposition (AND, fbs = 9) falls below "
            "rho^-(d+1) against error-shifting B (e=1): the protocol errs toward rejecting",
            "spec PED 9.5, 8.7",
            f"< {base:.6g}",
            u,
            u < base - TOL,
            f"max over {n_trees} trees; expected 9^-{d} = {9.0**-d:.6g}",
        )
    )
    return claims


def error_shift_claims(u5_hh, u5, rho5, shift_errors, u_ctrl, control_rho) -> list[Claim]:
    """Section 3: error-shifting B meets its bound exactly where fbs = rho = 2 (``u5[i]``: U_A at
    ``shift_errors[i]``); with ``rho = control_rho`` below fbs completeness fails (``u_ctrl``)."""
    claims = [
        _exact(
            "honest vs honest: U_A = rho^-(d+1) (q=5 Thr_3, d=4, rho=2)",
            "spec PED 9.1",
            "== 0.03125",
            u5_hh,
            abs(u5_hh - 0.03125) <= TOL,
            "B = error-shifting estimator at e = 0, i.e. honest",
        )
    ]
    spec_values = {0.2: 0.0375, 0.5: 0.046875, 1.0: 0.0625}
    for i, e in enumerate(shift_errors):
        target = 0.5**5 + e * 0.5**4 * 0.5
        claims.append(
            _exact(
                f"error-shifting B (e={e:g}) meets the bound exactly when fbs = rho "
                f"= 2 on the path (q=5 Thr_3, d=4)",
                "spec PED 4, 9.2",
                f"== {target:.6g}",
                u5[i],
                abs(u5[i] - target) <= TOL and abs(rho5 - 2) <= TOL,
                f"spec's number {spec_values[e]}" if e in spec_values else "",
            )
        )
    base = (1.0 / control_rho) ** (4 + 1)
    claims.append(
        _exact(
            f"negative control: with rho={control_rho:g} < fbs=2 completeness fails "
            "(error-shifting B, e=1)",
            "spec PED 4, 2.5",
            f"< {base:.6g}",
            u_ctrl,
            u_ctrl < base - TOL,
            f"expected 2^-4 = 0.0625; r^(d+1) = {base:.4f}",
        )
    )
    return claims


def obfuscation_claims(m, rho_o, qo, do, n_trees) -> list[Claim]:
    """Section 4, exact: the A zoo vs the calibrated B and the naive liar (``obfuscation/...``)."""
    base = rho_o ** -(do + 1)
    claims = []
    for i, name in enumerate(DIRECTION_POLICIES):
        v = float(m[f"obfuscation/liar_max_abs/{i}"])
        if name in SYMMETRIC_POLICIES:  # E[U_A] = 0 by symmetry whatever B: a row if it fails
            check = (v <= TOL, f"max |E U_A| = {v:.3g} over {n_trees} trees")
            claims += consistency_rows(
                {f"obfuscating liar ({name}): E[U_A] = 0 by symmetry": check}
            )
            continue
        claims.append(
            _exact(
                f"obfuscating liar ({name}) vs calibrated B: E[U_A] = 0 exactly (all "
                f"paths, q={qo}, d={do})",
                "spec PED 9.3, Thm 6.1(2)",
                "== 0",
                v,
                v <= TOL,
                f"max |E U_A| over {n_trees} trees",
            )
        )
    stable = float(m["obfuscation/stable_liar_max"])
    wrong = float(m["obfuscation/wrong_direction_max"])
    target = 1.0 - qo**-do
    return [
        *claims,
        _exact(
            "liar on the stable decomposition vs calibrated B: E[U_A] <= r^(d+1) Pr[A correct] = 0",
            "Thm 6.1(2)",
            "<= 0",
            stable,
            stable <= TOL,
        ),
        _exact(
            "wrong-direction A vs calibrated B: U_A <= r^(d+1) Pr[A correct]",
            "Thm 6.1(2)",
            f"<= {base:.6g}",
            wrong,
            wrong <= base + TOL,
        ),
        _exact(
            f"honest A on the stable decomposition vs calibrated B earns rho^-(d+1) "
            f"(rho={rho_o:g})",
            "spec PED 9.3",
            f"== {base:.6g}",
            float(m["obfuscation/honest_min"]),
            float(m["obfuscation/honest_dev"]) <= TOL,
        ),
        _exact(
            f"naive recursive debate: the obfuscating liar survives a uniform "
            f"challenger with probability 1 - q^-d (q={qo}, d={do}, exact)",
            "spec PED 9.3",
            f"== {target:.6g}",
            float(m["obfuscation/naive_liar_mean"]),
            float(m["obfuscation/naive_liar_dev"]) <= TOL,
            f"honest survival {float(m['obfuscation/naive_honest_min']):.6g}",
        ),
    ]


def sampled_claims(us, surv, qo, do, n_trees) -> list[Claim]:
    """Section 4, sampled: per policy the liar's mean U_A (``us[policy]``) contains 0; the naive
    liar's survival (0/1 outcomes ``surv``) has an exact interval containing ``1 - q^-d``."""
    target = 1.0 - qo**-do
    return [
        *(
            Claim.mean(
                f"obfuscating liar ({name}) vs calibrated B earns 0 (sampled debates)",
                "spec PED 9.3",
                "==",
                0.0,
                us[i].ravel(),
                f"{us[i].size} sampled debates over {n_trees} trees",
                bound="== 0 (interval contains 0)",
            )
            for i, name in enumerate(DIRECTION_POLICIES)
        ),
        Claim.proportion(
            f"naive recursive debate: liar survival 1 - q^-d (q={qo}, d={do}, sampled)",
            "spec PED 9.3",
            "==",
            target,
            float(surv.sum()),
            surv.size,
            f"{surv.size} sampled debates",
            bound=f"== {target:.6g} (exact interval contains it)",
        ),
    ]


def signal_claims(sig, rho_o, qo) -> list[Claim]:
    """Section 5: the exact training signals against ``rho^-(d+1)`` and ``q^-d``."""
    dev_p = strict_max(abs(s["ped_delta"] - s["rho_power"]) for s in sig)
    dev_n = strict_max(abs(s["naive_delta"] - s["q_power"]) for s in sig)
    ds = [s["depth"] for s in sig]
    return [
        _exact(
            f"training signal of prover-estimator debate = rho^-(d+1) (d in {ds})",
            "spec PED 7.3",
            "max |Delta - rho^-(d+1)| <= 1e-6",
            dev_p,
            dev_p <= TOL,
            f"hidden-flaw trees q={qo}, rho={rho_o:g}",
        ),
        _exact(
            f"training signal of naive recursive debate = q^-d (d in {ds})",
            "spec PED 7.3, 9.3",
            "max |Delta - q^-d| <= 1e-6",
            dev_n,
            dev_n <= TOL,
            f"q={qo}",
        ),
    ]
