"""The claim rows of sections 1-5: measured numbers in, rows out (pure; tests feed them lies)."""

from __future__ import annotations

from dedebate.lab.experiment import Claim, consistency_rows, strict_max

from .zoo import DIRECTION_POLICIES, SYMMETRIC_POLICIES

TOL = 1e-6  # float32 rounding of exact expectations; HiGHS optimality tolerance
CHECK = {
    "==": lambda v, t: abs(v - t) <= TOL,
    ">=": lambda v, t: v >= t - TOL,
    "<=": lambda v, t: v <= t + TOL,
    "<": lambda v, t: v < t - TOL,
}


def _row(claim, source, op, target, value, note="", ok=None) -> Claim:
    """An exact row ``value OP target`` (within TOL); ``ok``, if given, decides instead."""
    v = float(value)
    passed = CHECK[op](v, target) if ok is None else ok
    return Claim.exact(claim, source, f"{op} {target:.6g}", v, bool(passed), note)


def _dev(claim, source, bound, devs, note) -> Claim:
    dev = strict_max(devs)
    return Claim.exact(claim, source, bound, dev, dev <= TOL, note)


def fbs_claims(qs, rows, flips) -> list[Claim]:
    """Section 1: the fbs closed forms, primal = dual, and ``F(eps) = eps fbs`` (LP rows)."""
    claims = []
    for family in ("threshold", "AND", "OR", "majority", "parity", "dictator"):
        fam = [abs(r["lp"] - r["closed"]) for r in rows if r["family"] == family]
        if fam:
            name = f"fbs of {family} = closed form (LP, q in {list(qs)}, all w)"
            bound = f"max |LP - closed| <= {TOL:g}"
            claims.append(_dev(name, "spec PED 3.4", bound, fam, f"{len(fam)} points"))
    dual = [abs(r["lp"] - r["dual"]) for r in rows]
    flip = [abs(r["F"] - r["eps_fbs"]) for r in flips]
    dual_name = "fbs packing LP = certificate (dual) LP"
    dual_bound = f"max |primal - dual| <= {TOL:g}"
    flip_name = "worst-case flip probability F(eps) = eps * fbs for eps <= 1/q (LP)"
    flip_note = f"thresholds, q <= 5, eps in {{0.01, 1/q}}, {len(flips)} points"
    return [
        *claims,
        _dev(dual_name, "spec PED 3.2", dual_bound, dual, f"{len(rows)} points"),
        _dev(flip_name, "spec PED 3.3", f"max |F - eps fbs| <= {TOL:g}", flip, flip_note),
    ]


def rho_claims(rho_noisy, rho_unanimous, rho_and) -> list[Claim]:
    """Section 2: rho (max fbs over internal nodes, by LP) of the library trees."""
    trees = (
        ("noisy-evidence trees Thr_5 of 9 (8-9 / 0-1 true children)", 2.0, rho_noisy),
        ("unanimous Thr_5 of 9 tree", 9.0 / 5.0, rho_unanimous),
        ("AND decomposition (q = 9) offered as the unstable alternative", 9.0, rho_and),
    )
    name = "rho of the {} = max fbs over internal nodes (LP)"
    return [_row(name.format(t), "spec PED 3.3, 3.4, 9.4, 9.5", "==", e, v) for t, e, v in trees]


def completeness_claims(m, rho, d, shift_errors, random_joints, n_trees) -> list[Claim]:
    """Section 2: honest A vs the completeness zoo (``completeness/...`` mins over the trees)."""
    r, c = 1.0 / rho, {k.removeprefix("completeness/"): v for k, v in m.items()}
    base, dev = r ** (d + 1), float(c["honest_dev"])
    name = f"honest vs honest: U_A = rho^-(d+1) (noisy evidence, d={d}, rho={rho:g})"
    note = f"{n_trees} trees, max |U_A - rho^-(d+1)| = {dev:.2g}"
    rows = [_row(name, "spec PED 2.3, 9.1", "==", base, c["honest_min"], note, dev <= TOL)]
    zoo = {"root liar": ("root_liar", 1), "constant 1/2": ("constant_half", 1)}
    zoo[f"random joints (x{random_joints})"] = ("random_joint", random_joints)
    for name, (key, k) in zoo.items():
        name = f"completeness: honest A vs {name} B earns >= rho^-(d+1)"
        note = f"min over {n_trees * k} debates"
        rows.append(_row(name, "spec PED 4, Thm 6.1(1)", ">=", base, c[f"{key}_min"], note))
    for i, e in enumerate(shift_errors):
        name = (
            f"completeness: honest A vs error-shifting B (e={e:g}) earns >= r^(d+1) + e r^d (1-r)"
        )
        bound, u = base + e * r**d * (1 - r), c[f"error_shifting_min/{i}"]
        rows.append(_row(name, "spec PED 4", ">=", bound, u, f"min over {n_trees} trees"))
    name = (  # spec 9.5: pushed below the margin
        "a prover arguing on an unstable decomposition (AND, fbs = 9) falls below "
        "rho^-(d+1) against error-shifting B (e=1): the protocol errs toward rejecting"
    )
    note = f"max over {n_trees} trees; expected 9^-{d} = {9.0**-d:.6g}"
    return [*rows, _row(name, "spec PED 9.5, 8.7", "<", base, c["unstable_max_e1"], note)]


def error_shift_claims(m, shift_errors, control_rho) -> list[Claim]:
    """Section 3: error-shifting B meets its bound where fbs = rho = 2; the negative control."""
    name = "honest vs honest: U_A = rho^-(d+1) (q=5 Thr_3, d=4, rho=2)"
    note = "B = error-shifting estimator at e = 0, i.e. honest"
    rows = [_row(name, "spec PED 9.1", "==", 0.03125, m["error_shift/honest"], note)]
    spec_values = {0.2: 0.0375, 0.5: 0.046875, 1.0: 0.0625}
    for i, e in enumerate(shift_errors):
        name = f"error-shifting B (e={e:g}) meets the bound exactly when fbs = rho = 2 on the path"
        target, u = 0.5**5 + e * 0.5**4 * 0.5, float(m[f"error_shift/u/{i}"])
        ok = abs(u - target) <= TOL and abs(m["error_shift/fbs"] - 2) <= TOL
        note = f"spec's number {spec_values[e]}" if e in spec_values else ""
        rows.append(_row(f"{name} (q=5 Thr_3, d=4)", "spec PED 4, 9.2", "==", target, u, note, ok))
    base = (1.0 / control_rho) ** (4 + 1)
    name = f"negative control: with rho={control_rho:g} < fbs=2 completeness fails"
    note = f"expected 2^-4 = 0.0625; r^(d+1) = {base:.4f}"
    u = m["error_shift/control_u"]
    return [*rows, _row(f"{name} (error-shifting B, e=1)", "spec PED 4, 2.5", "<", base, u, note)]


def obfuscation_claims(m, rho_o, qo, do, n_trees) -> list[Claim]:
    """Section 4, exact: the A zoo vs the calibrated B and the naive liar (``obfuscation/...``)."""
    base, o = rho_o ** -(do + 1), {k.removeprefix("obfuscation/"): v for k, v in m.items()}
    rows = []
    for i, name in enumerate(DIRECTION_POLICIES):
        v, note = float(o[f"liar_max_abs/{i}"]), f"max |E U_A| over {n_trees} trees"
        if name in SYMMETRIC_POLICIES:  # E[U_A] = 0 by symmetry whatever B: a row if it fails
            check = (v <= TOL, f"max |E U_A| = {v:.3g} over {n_trees} trees")
            rows += consistency_rows({f"obfuscating liar ({name}): E[U_A] = 0 by symmetry": check})
            continue
        name = f"obfuscating liar ({name}) vs calibrated B: E[U_A] = 0 exactly (all paths, "
        rows.append(_row(f"{name}q={qo}, d={do})", "spec PED 9.3, Thm 6.1(2)", "==", 0, v, note))
    stable = "liar on the stable decomposition vs calibrated B: E[U_A] <= r^(d+1) Pr[A correct]"
    wrong = "wrong-direction A vs calibrated B: U_A <= r^(d+1) Pr[A correct]"
    honest = (
        f"honest A on the stable decomposition vs calibrated B earns rho^-(d+1) (rho={rho_o:g})"
    )
    naive = (
        "naive recursive debate: the obfuscating liar survives a uniform challenger with "
        f"probability 1 - q^-d (q={qo}, d={do}, exact)"
    )
    note = f"honest survival {float(o['naive_honest_min']):.6g}"
    naive_ok = float(o["naive_liar_dev"]) <= TOL
    return [
        *rows,
        _row(f"{stable} = 0", "Thm 6.1(2)", "<=", 0.0, o["stable_liar_max"]),
        _row(wrong, "Thm 6.1(2)", "<=", base, o["wrong_direction_max"]),
        _row(honest, "spec PED 9.3", "==", base, o["honest_min"], ok=float(o["honest_dev"]) <= TOL),
        _row(naive, "spec PED 9.3", "==", 1.0 - qo**-do, o["naive_liar_mean"], note, naive_ok),
    ]


def sampled_claims(us, surv, qo, do, n_trees) -> list[Claim]:
    """Section 4, sampled: the liar's mean U_A per policy; the naive liar's survival."""
    target = 1.0 - qo**-do
    name = "obfuscating liar ({}) vs calibrated B earns 0 (sampled debates)"
    rows = [
        Claim.mean(
            name.format(p),
            "spec PED 9.3",
            "==",
            0.0,
            us[i].ravel(),
            f"{us[i].size} sampled debates over {n_trees} trees",
            bound="== 0 (interval contains 0)",
        )
        for i, p in enumerate(DIRECTION_POLICIES)
    ]
    name = f"naive recursive debate: liar survival 1 - q^-d (q={qo}, d={do}, sampled)"
    bound = f"== {target:.6g} (exact interval contains it)"
    note = f"{surv.size} sampled debates"
    return [
        *rows,
        Claim.proportion(
            name, "spec PED 9.3", "==", target, float(surv.sum()), surv.size, note, bound=bound
        ),
    ]


def signal_claims(sig, rho_o, qo) -> list[Claim]:
    """Section 5: the exact training signals against ``rho^-(d+1)`` and ``q^-d``."""
    ds = [s["depth"] for s in sig]
    ped = [abs(s["ped_delta"] - s["rho_power"]) for s in sig]
    naive = [abs(s["naive_delta"] - s["q_power"]) for s in sig]
    ped_name = f"training signal of prover-estimator debate = rho^-(d+1) (d in {ds})"
    naive_name = f"training signal of naive recursive debate = q^-d (d in {ds})"
    note = f"hidden-flaw trees q={qo}, rho={rho_o:g}"
    return [
        _dev(ped_name, "spec PED 7.3", "max |Delta - rho^-(d+1)| <= 1e-6", ped, note),
        _dev(naive_name, "spec PED 7.3, 9.3", "max |Delta - q^-d| <= 1e-6", naive, f"q={qo}"),
    ]
