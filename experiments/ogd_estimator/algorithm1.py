"""Algorithm 1 over a grid of random problems: |Z| x step rule x delta x problems (spec PED 5.3).

:func:`algorithm1_grid` is one pure function of the deltas, the tests' scale and a typed key (one
vmapped while loop per (|Z|, step rule)); its scalar metrics are what a sweep row and a report
share. :func:`algorithm1_table` turns those metrics and the arrays beside them (problems, exit h,
advantage traces) into one row per run, with the exit advantages recomputed in float64 numpy on
the training tests and on fresh ones (:mod:`.recheck`).

``spec`` is any object with the fields ``q_values``, ``deltas``, ``step_rules``, ``seeds``,
``trace_len`` and those :mod:`.problems` reads.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.estimators.ogd import OGDStatic, iteration_bound, solve_block

from .problems import traced_problems
from .recheck import exit_advantages, fresh_tanh_draw, fresh_tanh_weights

PER_RUN = ("steps", "max_adv", "converged", "regret_sum", "regret_bound", "circuit_size")
"""Metrics per Algorithm 1 run, named ``Z{|Z|}/{rule}/d{j}/s{s}/{metric}`` for ``deltas[j]`` and
problem ``s`` of ``spec.seeds``."""
PROBLEM_KEY = 100
"""The problems of q come from ``fold_in(fold_in(key, PROBLEM_KEY), q)``."""
FRESH_KEY = 110
"""Fresh tests come from ``fold_in(fold_in(key, FRESH_KEY), q)``: independent of the problems."""
FRESH_FACTOR = 4
"""The generalisation check draws ``FRESH_FACTOR * n_tests`` fresh tanh tests per problem."""


def algorithm1_grid(spec, deltas, test_scale, key):
    """Algorithm 1 on ``spec.seeds`` random problems per q, for every step rule and delta.

    q's problems come from ``fold_in(fold_in(key, PROBLEM_KEY), q)``. Returns ``(metrics, extras)``:
    scalars ``Z{|Z|}/{rule}/d{j}/s{s}/{m}`` for m in :data:`PER_RUN`, per (|Z|, rule, delta j)
    ``steps_mean``, ``steps_max``, ``bound`` and ``steps_over_bound_max``, and ``d{j}/delta``;
    arrays per q ``{"problems", "families"}`` and per ``f"{q}/{rule}"`` the exit h ``[S, J, X, Z]``
    and problem 0's advantage trace ``[J, trace_len]``.
    """
    metrics, extras = {}, {}
    for j in range(len(spec.deltas)):
        metrics[f"d{j}/delta"] = deltas[j]
    for q in spec.q_values:
        n_z = 2**q
        problems, families = traced_problems(
            spec, jax.random.fold_in(jax.random.fold_in(key, PROBLEM_KEY), q), n_z, test_scale
        )
        extras[str(q)] = {"problems": problems, "families": families}
        for rule in spec.step_rules:
            states, summ = solve_block(
                OGDStatic(step_rule=rule, trace_len=spec.trace_len), families, problems, deltas
            )
            extras[f"{q}/{rule}"] = {"h": states.h, "trace": states.trace[0]}
            per_run = {
                "steps": summ.steps,
                "max_adv": summ.max_adv,
                "converged": summ.converged.astype(jnp.int32),
                "regret_sum": summ.regret_sum,
                "regret_bound": summ.regret_bound,
                "circuit_size": summ.circuit_size,
            }
            bound = iteration_bound(rule, n_z, deltas)
            for j in range(len(spec.deltas)):
                pre = f"Z{n_z}/{rule}/d{j}"
                steps = summ.steps[:, j]
                metrics[f"{pre}/steps_mean"] = jnp.mean(steps.astype(jnp.float32))
                metrics[f"{pre}/steps_max"] = jnp.max(steps)
                metrics[f"{pre}/bound"] = bound[j]
                metrics[f"{pre}/steps_over_bound_max"] = jnp.max(steps / bound[j])
                for s in range(spec.seeds):
                    for m in PER_RUN:
                        metrics[f"{pre}/s{s}/{m}"] = per_run[m][s, j]
    return metrics, extras


def algorithm1_table(spec, metrics, extras, key):
    """``(rows, traces)``: one row per Algorithm 1 run of :func:`algorithm1_grid` at ``key``.

    Rows (q, rule, problem, delta order) hold :data:`PER_RUN`, both rules' proven bounds,
    ``z_over_delta2`` and :func:`.recheck.exit_advantages`' columns on
    fresh tests from ``fold_in(fold_in(key, FRESH_KEY), q)``; ``traces[(rule, q, delta)]`` is
    problem 0's advantage trace.
    """
    rows, traces = [], {}
    for q in spec.q_values:
        n_z = 2**q
        problems, families = extras[str(q)]["problems"], extras[str(q)]["families"]
        fresh = fresh_tanh_weights(
            spec,
            fresh_tanh_draw(
                spec, jax.random.fold_in(jax.random.fold_in(key, FRESH_KEY), q), n_z, FRESH_FACTOR
            ),
            n_z,
        )
        for rule in spec.step_rules:
            ex = extras[f"{q}/{rule}"]
            gen = exit_advantages(spec.deltas, families, problems, ex["h"], fresh)
            for s in range(spec.seeds):
                for j, delta in enumerate(spec.deltas):
                    run = {k: metrics[f"Z{n_z}/{rule}/d{j}/s{s}/{k}"] for k in PER_RUN}
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
                            "bound": float(iteration_bound(rule, n_z, delta)),
                            "bound_hazan": float(iteration_bound("hazan", n_z, delta)),
                            "bound_tight": float(iteration_bound("tight", n_z, delta)),
                            "regret_sum": float(run["regret_sum"]),
                            "regret_bound": float(run["regret_bound"]),
                            "circuit_size": int(run["circuit_size"]),
                            "z_over_delta2": n_z / delta**2,
                            **{k: v[s][j] for k, v in gen.items()},
                        }
                    )
                    if s == 0:
                        traces[(rule, q, delta)] = np.asarray(ex["trace"])[j]
    return rows, traces
