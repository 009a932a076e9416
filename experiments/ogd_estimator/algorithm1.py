"""Part 1 of ogd_estimator: Algorithm 1 on random problems with tanh tests (the swept point),
its exit h rechecked in float64 numpy, its claims and figures."""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.core.stats import nan_last
from dedebate.estimators.advantage import OIProblem
from dedebate.estimators.families import TanhFamily
from dedebate.estimators.ogd import OGDStatic, iteration_bound, solve_block
from dedebate.lab.experiment import Claim, consistency_rows, strict_max

PER_RUN = ("steps", "max_adv", "converged", "regret_sum", "regret_bound", "circuit_size")
FRESH_FACTOR = 4  # the generalisation check draws FRESH_FACTOR * n_tests fresh tests per problem
RECOMPUTE_TOL = 1e-4  # float64 numpy recomputation of an exit advantage vs Algorithm 1's float32
RULES = {"hazan": (36.0, "1/sqrt(|Z| t)"), "tight": (4.5, "sqrt(2/(|Z| t))")}  # T bound, step
PROBLEM_KEY, FRESH_KEY = 100, 110  # fold_in(key, K), then fold_in(., q)


def _dim(spec, n_z: int) -> int:  # a tanh test's input: features, one-hot z, h(x), h(x, z), 1
    return spec.n_features + 2 * n_z + 2


def problem_arrays(spec, n_z: int, draw, dirichlet, test_scale) -> tuple[np.ndarray, ...]:
    """``(mu, g, features, weights, base)`` per problem from the normals ``draw`` (float64)."""
    dim, d, scale = _dim(spec, n_z), spec.n_features, float(test_scale)
    dirichlet, out = np.asarray(dirichlet, np.float64), []
    for s in range(spec.seeds):
        a, b, c = np.split(np.asarray(draw[s], np.float64), [spec.n_x * d, (spec.n_x + n_z) * d])
        feat = a.reshape(spec.n_x, d).astype(np.float32)
        logits = feat @ b.reshape(d, n_z)
        if spec.truth == "softmax":
            e = np.exp(2.0 * (logits - logits.max(axis=1, keepdims=True)))
            g = e / e.sum(axis=1, keepdims=True)
        elif spec.truth == "dirichlet":
            g = dirichlet[s] / dirichlet[s].sum(axis=1, keepdims=True)
        else:
            g = np.eye(n_z)[np.argmax(logits, axis=1)]
        weights = (scale * c.reshape(spec.n_tests, dim) / np.sqrt(dim)).astype(np.float32)
        base = weights[:, :d] @ feat.T + weights[:, -1:]
        out.append((np.full(spec.n_x, 1.0 / spec.n_x), g, feat, weights, base))
    return tuple(np.stack(x).astype(np.float32) for x in zip(*out))


def make_problems(spec, key, n_z: int, test_scale) -> tuple[OIProblem, TanhFamily]:
    """``spec.seeds`` problems and test families, drawn in JAX, shaped on the host."""
    x, f, dim = spec.n_x, spec.n_tests, _dim(spec, n_z)
    k_draw, k_dir = jax.random.split(key)
    total = (x + n_z) * spec.n_features + f * dim  # normals: features, truth logits, tests
    draw = jax.random.normal(k_draw, (spec.seeds, total), jnp.float32)
    if spec.truth == "dirichlet":
        dirichlet = jax.random.dirichlet(k_dir, jnp.full((n_z,), 2.0), (spec.seeds, x))
    else:
        dirichlet = jnp.zeros((spec.seeds, 0, n_z), jnp.float32)
    shapes = ((x,), (x, n_z), (x, spec.n_features), (f, dim), (f, x))
    mu, g, feat, weights, base = jax.pure_callback(
        functools.partial(problem_arrays, spec, n_z),
        tuple(jax.ShapeDtypeStruct((spec.seeds, *s), jnp.float32) for s in shapes),
        draw,
        dirichlet,
        test_scale,
        vmap_method="sequential",
    )
    return OIProblem(mu=mu, g=g), TanhFamily(features=feat, weights=weights, base=base, n_z=n_z)


def tanh_advantages(features, weights, mu, g, h) -> np.ndarray:
    """``Adv_f(h)`` per row of ``weights``, literally, in float64 numpy (spec PED 5.1)."""
    feat, w, h = (np.asarray(a, np.float64) for a in (features, weights, h))
    d, n_z = feat.shape[1], h.shape[1]
    w_x, w_z, w_h = w[:, :d], w[:, d : d + n_z], w[:, d + n_z : d + 2 * n_z]
    w_hz, w_b = w[:, d + 2 * n_z], w[:, -1]
    pre = (feat @ w_x.T + h @ w_h.T + w_b)[:, None, :] + w_z.T[None] + h[:, :, None] * w_hz
    weight = np.asarray(mu, np.float64)[:, None] * (np.asarray(g, np.float64) - h)
    return np.einsum("xz,xzf->f", weight, np.tanh(pre))


def algorithm1_grid(spec, deltas, test_scale, key):
    """``(metrics, extras)``: scalars per run and per (|Z|, rule, delta), arrays per q and rule."""
    metrics = {f"d{j}/delta": deltas[j] for j in range(len(spec.deltas))}
    extras = {}
    for q in spec.q_values:
        n_z = 2**q
        key_q = jax.random.fold_in(jax.random.fold_in(key, PROBLEM_KEY), q)
        problems, families = make_problems(spec, key_q, n_z, test_scale)
        extras[str(q)] = {"problems": problems, "families": families}
        for rule in spec.step_rules:
            states, summ = solve_block(
                OGDStatic(step_rule=rule, trace_len=spec.trace_len), families, problems, deltas
            )
            extras[f"{q}/{rule}"] = {"h": states.h, "trace": states.trace[0]}
            summ = summ.replace(converged=summ.converged.astype(jnp.int32))
            bound = iteration_bound(rule, n_z, deltas)
            for j in range(len(spec.deltas)):
                pre, steps = f"Z{n_z}/{rule}/d{j}", summ.steps[:, j]
                metrics[f"{pre}/steps_mean"] = jnp.mean(steps.astype(jnp.float32))
                metrics[f"{pre}/steps_max"] = jnp.max(steps)
                metrics[f"{pre}/bound"] = bound[j]
                metrics[f"{pre}/steps_over_bound_max"] = jnp.max(steps / bound[j])
                for s in range(spec.seeds):
                    for m in PER_RUN:
                        metrics[f"{pre}/s{s}/{m}"] = getattr(summ, m)[s, j]
    return metrics, extras


def algorithm1_table(spec, metrics, extras, key):
    """A row per run (the exit h rechecked in float64, also on fresh tests), problem 0's traces."""
    rows, traces = [], {}
    for q in spec.q_values:
        n_z, dim = 2**q, _dim(spec, 2**q)
        problems, families = extras[str(q)]["problems"], extras[str(q)]["families"]
        key_q = jax.random.fold_in(jax.random.fold_in(key, FRESH_KEY), q)
        draw = jax.random.normal(key_q, (spec.seeds, FRESH_FACTOR * spec.n_tests, dim), jnp.float32)
        fresh = spec.test_scale * np.asarray(draw, np.float64) / np.sqrt(dim)
        feats, weights = np.asarray(families.features), np.asarray(families.weights)
        mu, g = np.asarray(problems.mu), np.asarray(problems.g)
        for rule in spec.step_rules:
            h = np.asarray(extras[f"{q}/{rule}"]["h"])
            for s, (j, delta) in itertools.product(range(spec.seeds), enumerate(spec.deltas)):
                run = {k: metrics[f"Z{n_z}/{rule}/d{j}/s{s}/{k}"] for k in PER_RUN}
                seen = tanh_advantages(feats[s], weights[s], mu[s], g[s], h[s, j])
                new = np.abs(tanh_advantages(feats[s], fresh[s], mu[s], g[s], h[s, j]))
                bounds = {r: float(iteration_bound(r, n_z, delta)) for r in RULES}
                rows.append(
                    {
                        "q": q,
                        "n_z": n_z,
                        "delta": delta,
                        "seed": s,
                        "step_rule": rule,
                        "steps": int(run["steps"]),
                        "max_adv": float(run["max_adv"]),
                        "converged": bool(run["converged"]),
                        "bound": bounds[rule],
                        "bound_hazan": bounds["hazan"],
                        "bound_tight": bounds["tight"],
                        "regret_sum": float(run["regret_sum"]),
                        "regret_bound": float(run["regret_bound"]),
                        "circuit_size": int(run["steps"]) * n_z,  # exact on the host
                        "z_over_delta2": n_z / delta**2,
                        "max_adv_numpy": float(np.max(np.abs(seen))),
                        "fresh_max_adv": float(np.max(new)),
                        "fresh_share_below_delta": float(np.mean(new < delta)),
                        "fresh_tests": int(new.size),
                    }
                )
            trace = np.asarray(extras[f"{q}/{rule}"]["trace"])
            traces.update({(rule, q, d): trace[j] for j, d in enumerate(spec.deltas)})
    return rows, traces


def algorithm1_claims(cfg, rows) -> list[Claim]:
    """Per step rule: T <= c |Z|/delta^2 per |Z|, regret, generalisation; checks only on failure."""
    claims = []
    for rule in cfg.step_rules:
        const, eta = RULES[rule]
        for q in cfg.q_values:
            sel = [r for r in rows if r["step_rule"] == rule and r["q"] == q]
            # the loop stops at the bound: a run that did not converge there is the failure (inf)
            norm = strict_max(
                r["steps"] * r["delta"] ** 2 / r["n_z"] if r["converged"] else math.inf for r in sel
            )
            worst = max(sel, key=lambda r: r["steps"] / r["bound"])
            longest = max(sel, key=lambda r: r["steps"])
            claims.append(
                Claim.exact(
                    f"Algorithm 1 ({rule} step {eta}), |Z| = {2**q}: T <= {const:g} |Z| / delta^2",
                    "spec PED 5.5 (paper eq. (4))",
                    f"T delta^2/|Z| <= {const:g}",
                    norm,
                    passed=all(r["steps"] <= r["bound"] and r["converged"] for r in sel),
                    note=f"{len(sel)} runs; largest T / bound: T = {worst['steps']} at delta = "
                    f"{worst['delta']:g} vs bound {worst['bound']:.0f}; largest T = "
                    f"{longest['steps']} (delta = {longest['delta']:g}); the loop stops at the "
                    "bound, so a run that has not converged there reads inf",
                )
            )
        sel = [r for r in rows if r["step_rule"] == rule]
        # the exit advantage as Algorithm 1 measured it (float32) and as recomputed (float64)
        ratio = strict_max(np.maximum(r["max_adv"], r["max_adv_numpy"]) / r["delta"] for r in sel)
        gap = strict_max(abs(r["max_adv_numpy"] - r["max_adv"]) for r in sel)
        exits = f"Algorithm 1 ({rule}) exits with max_f |Adv_f| < delta"
        recheck = f"Algorithm 1 ({rule}) exit advantage recomputed in float64 numpy agrees"
        claims += consistency_rows(
            {
                exits: (ratio < 1.0, f"largest exit advantage / delta {ratio:.4g}"),
                recheck: (gap <= RECOMPUTE_TOL, f"largest |numpy - Algorithm 1| = {gap:.3g}"),
            }
        )
        took = [r["regret_sum"] / r["regret_bound"] for r in sel if r["steps"] > 0]
        reg = strict_max(took) if took else 0.0  # no step: T = 0, and the bound is 0 <= 0
        claims.append(
            Claim.exact(
                f"Algorithm 1 ({rule}): OGD regret sum_t |Adv_t| <= (3/2) G D sqrt(T)",
                "spec PED 5.4 (Hazan Thm 3.1)",
                "ratio <= 1",
                reg,
                passed=reg <= 1.0,
                note=f"largest ratio over the {len(took)} run(s) that took a step"
                if took
                else "no run took a step (delta above every initial advantage): 0 <= 0",
            )
        )
        # the exit h on fresh tests drawn with another key: no theorem bounds them, a finding
        ratio = strict_max(r["fresh_max_adv"] / r["delta"] for r in sel)
        share = min(r["fresh_share_below_delta"] for r in sel)  # a mean of booleans: never NaN
        worst = max(sel, key=lambda r: nan_last(r["fresh_max_adv"] / r["delta"]))
        claims.append(
            Claim.exact(
                f"Algorithm 1 ({rule}) generalises: its exit h is (delta, F')-indistinguishable "
                f"for {worst['fresh_tests']} fresh tests F' drawn with another key",
                "finding (no theorem bounds an unseen test's advantage; spec PED 5.1, 5.5)",
                "criterion: fresh max|Adv| / delta < 1",
                ratio,
                passed=ratio < 1.0,
                note=f"{len(sel)} runs; largest at |Z| = {worst['n_z']}, delta = "
                f"{worst['delta']:g}: fresh {worst['fresh_max_adv']:.4g} vs training "
                f"{worst['max_adv']:.4g}; smallest share of fresh |Adv| < delta {share:.4g}",
                finding=True,
            )
        )
    return claims


def sweep_figures(rows) -> dict:
    """The sweep's mean steps and proven bound against 1/delta^2 (configs/sweeps/ogd_steps.yaml)."""
    import matplotlib.pyplot as plt

    series: dict[tuple[str, int], dict[float, list[float]]] = {}
    for r in rows:
        for k, v in r.items():
            if k.count("/") == 3 and k.endswith("/steps_mean") and isinstance(v, (int, float)):
                z, rule, d, _ = k.split("/")
                by_delta = series.setdefault((rule, int(z[1:])), {})
                by_delta.setdefault(float(r[f"{d}/delta"]), []).append(float(v))
    rules = sorted({rule for rule, _ in series})
    if not rules:
        return {}
    fig, axes = plt.subplots(1, len(rules), figsize=(6 * len(rules), 4.5), squeeze=False)
    for ax, rule in zip(axes[0], rules):
        for n_z in sorted(z for r_, z in series if r_ == rule):
            pts = sorted(series[(rule, n_z)].items(), reverse=True)
            x = [1.0 / d**2 for d, _ in pts]
            mean = [max(float(np.mean(v)), 0.8) for _, v in pts]
            (line,) = ax.plot(x, mean, "o-", label=f"|Z| = {n_z}: measured T")
            bound = [iteration_bound(rule, n_z, d) for d, _ in pts]
            ax.plot(x, bound, "--", color=line.get_color(), label=f"|Z| = {n_z}: proven bound")
        ax.set(xscale="log", yscale="log", xlabel="1 / delta^2", ylabel="mean T (0 drawn at 0.8)")
        ax.set_title(f"Algorithm 1, {rule} step: measured vs proven")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return {"algorithm1_steps_vs_bound": fig}


def steps_figure(cfg, rows):
    """Every run's steps T against |Z|/delta^2 beside both proven bounds."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for rule, marker in zip(cfg.step_rules, ("o", "s")):
        sel = [r for r in rows if r["step_rule"] == rule]
        x, y = [r["z_over_delta2"] for r in sel], [max(r["steps"], 0.8) for r in sel]
        ax.scatter(x, y, marker=marker, alpha=0.6, label=f"T, {rule} step")
    xs = np.asarray(sorted({r["z_over_delta2"] for r in rows}))
    for (rule, (const, _)), ls in zip(RULES.items(), ("k-", "k--")):
        ax.plot(xs, const * xs, ls, label=f"{const:g} |Z|/delta^2 ({rule} bound)")
    ax.set(xscale="log", yscale="log", xlabel="|Z| / delta^2", ylabel="steps T (0 drawn at 0.8)")
    ax.set_title("Algorithm 1 steps vs the proven bound")
    ax.legend()
    fig.tight_layout()
    return fig
