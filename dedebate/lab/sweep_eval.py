"""Rows of a sweep group through one compiled program: inputs, row keys and metrics.

:func:`evaluate_group` stacks the dynamic pytrees (and host inputs) of a static group's points x
seeds along one run axis and evaluates ``jit(vmap(fn))`` over every device; row ``(point,
seed)`` gets the key of :func:`~dedebate.lab.sweep_plan.point_key`. :func:`point_row` is the
one-point case, a run's numbers through the same cached program. More: docs/lab.md, "Sweeps".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dedebate.lab.context import experiment_key
from dedebate.lab.devices import EvalInfo, evaluate
from dedebate.lab.sweep_plan import Group, Point, SweepError, SweepPlan, describe_values, point_key
from dedebate.lab.sweep_programs import (
    ChunkedFn,
    ChunkedPrograms,
    canonical,
    compile_options,
    program_key,
)
from dedebate.programs import jit, program_cache


def _stack_trees(trees: list[Any], differs: Callable[[int], str]) -> Any:
    """Stack pytrees of one structure, shapes and dtypes along a new leading axis."""
    # Stack pytrees of one structure, shapes and dtypes (leaves canonicalised) along a new leading
    # axis; ``differs(i)`` is the message of the SweepError when tree ``i`` differs from the first.
    import jax

    first, per_tree = None, []
    for i, tree in enumerate(trees):
        leaves, treedef = jax.tree.flatten(tree)
        leaves = [canonical(v) for v in leaves]
        sig = (treedef, [(v.shape, v.dtype) for v in leaves])
        if first is None:
            first = sig
        elif sig != first:
            raise SweepError(differs(i))
        per_tree.append(leaves)
    assert first is not None, "no trees to stack"
    return jax.tree.unflatten(
        first[0], [np.stack([r[j] for r in per_tree]) for j in range(len(first[1]))]
    )


def group_inputs(module: Any, plan_: SweepPlan, group: Group):
    """The inputs of one static group's rows, stacked along the run axis.

    Returns ``(fn, key impl, (stacked dynamic params, row key data[, host inputs]), rows)`` for the
    rows ``[(point, seed), ...]`` of ``group`` (point-major, seed-minor).
    """
    import jax

    points = group.points
    pairs = [module.point(p.cfg) for p in points]
    fn = pairs[0][1]
    by_point = _stack_trees(
        [dyn for dyn, _ in pairs],
        lambda i: (
            f"{plan_.experiment}.point() returned dynamic params of another structure at "
            f"point {points[i].index} ({describe_values(points[i].values)}) than at point "
            f"{points[0].index}; a field that changes shapes must not be listed in DYNAMIC"
        ),
    )
    rows = [(p, s) for p in points for s in plan_.seeds]
    n_seeds = len(plan_.seeds)
    dynamic = jax.tree.map(lambda a: np.repeat(a, n_seeds, axis=0), by_point)
    roots = {s: experiment_key(s, plan_.experiment) for s in plan_.seeds}
    impl = jax.random.key_impl(roots[plan_.seeds[0]])
    root_data = np.stack([np.asarray(jax.random.key_data(roots[s])) for _, s in rows])
    words = np.asarray([p.words for p, _ in rows], dtype=np.uint32)
    keys = _row_keys(root_data, words, impl)
    if callable(getattr(module, "inputs", None)):
        return fn, impl, (dynamic, keys, row_inputs(module, plan_, rows)), rows
    return fn, impl, (dynamic, keys), rows


@program_cache
def _fold_words():
    """``jit(vmap(fold_in(fold_in(key, w0), w1)))`` over rows, built once per process."""
    import jax

    def one(key, w):
        return jax.random.fold_in(jax.random.fold_in(key, w[0]), w[1])

    return jit(jax.vmap(one))


def _row_keys(root_data: np.ndarray, words: np.ndarray, impl: Any) -> np.ndarray:
    """Key data of every row: :func:`point_key`, computed for all rows in one vmapped call."""
    import jax

    keys = _fold_words()(jax.random.wrap_key_data(jax.numpy.asarray(root_data), impl=impl), words)
    return np.asarray(jax.random.key_data(keys))


def row_inputs(module: Any, plan_: SweepPlan, rows: list[tuple[Point, int]]):
    """``module.inputs(cfg, seed, key)`` of every row (host-built data: populations, strategy
    batches), at the row's key (:func:`point_key`), stacked along the run axis.
    """
    return _stack_trees(
        [module.inputs(p.cfg, s, point_key(plan_.experiment, s, p.cfg)) for p, s in rows],
        lambda i: (
            f"{plan_.experiment}.inputs() returned data of another structure at point "
            f"{rows[i][0].index} ({describe_values(rows[i][0].values)}), seed {rows[i][1]}, than "
            f"at point {rows[0][0].index}; a field that changes shapes must not be listed "
            "in DYNAMIC"
        ),
    )


def _keyed(fn: Callable[..., Any], impl: Any) -> Callable[..., Any]:
    """The row function ``fn(dynamic, key, *host)`` of a sweep and of :func:`point_row`."""
    # The row function of a sweep and of :func:`point_row`: ``fn(dynamic, key, *host)`` with the
    # row's key passed as key data (so that both share one compiled program).
    import jax

    def row_fn(dyn, key_data, *host):
        return fn(dyn, jax.random.wrap_key_data(key_data, impl=impl), *host)

    return row_fn


def evaluate_group(
    module: Any,
    plan_: SweepPlan,
    group: Group,
    *,
    batch: int = 0,
    devices: list[Any] | None = None,
    info: EvalInfo | None = None,
):
    """The metrics of one group's rows, in one compiled program over every device (a
    :class:`ChunkedFn`: its init, chunk and finish programs, each compiled once).

    Returns ``(rows, metrics)``: ``[(point, seed)]`` and ``{metric: numpy array [rows]}``.
    """
    fn, impl, inputs, rows = group_inputs(module, plan_, group)
    if isinstance(fn, ChunkedFn):
        progs = ChunkedPrograms(module, group.points[0].cfg, fn, impl, devices=devices, info=info)
        return rows, progs.evaluate(*inputs, batch=batch)
    metrics = evaluate(
        _keyed(fn, impl),
        inputs,
        len(rows),
        devices=devices,
        batch=batch,
        info=info,
        cache_key=program_key(module, group.points[0].cfg, impl),
        options=compile_options(module, devices),
    )
    return rows, metrics


def point_row(
    module: Any,
    cfg: Any,
    key: Any,
    seed: int,
    *,
    devices: list[Any] | None = None,
    info: EvalInfo | None = None,
    extras: bool = False,
) -> Any:
    """The metrics of ``module.point(cfg)`` at ``key`` (a run's ``ctx.key``; ``seed`` for the
    experiment's ``inputs``): the one-point case of a sweep, through the same compiled program
    as a sweep group of ``cfg``'s static fields evaluated one row per call (``sweep.batch: 1``).
    So a run after such a sweep in one process compiles nothing, and a run's numbers come from
    the code path of a sweep row.

    Args:
        module: the experiment module (sweepable).
        cfg: its Config.
        key: the row's key (a typed PRNG key).
        seed: the run's seed (for ``inputs``).
        devices: the devices of the run axis (default: all).
        info: counts traces and calls.
        extras: for a fn that returns ``(metrics, extras)``: return the extras too.

    Returns ``{metric: Python scalar}``; with ``extras=True``, ``(those scalars, the row's extras as
    numpy)``.
    """
    import jax

    dynamic, fn = module.point(cfg)
    impl = jax.random.key_impl(key)
    if isinstance(fn, ChunkedFn):
        progs = ChunkedPrograms(module, cfg, fn, impl, devices=devices, info=info)
        metrics = progs.evaluate(
            jax.tree.map(lambda a: canonical(a)[None], dynamic),
            np.asarray(jax.random.key_data(key))[None],
        )
        return {k: v[0].item() for k, v in metrics.items()}
    one = jax.tree.map(lambda a: canonical(a)[None], dynamic)
    inputs: tuple[Any, ...] = (one, np.asarray(jax.random.key_data(key))[None])
    if callable(getattr(module, "inputs", None)):
        host = module.inputs(cfg, seed, key)
        inputs += (jax.tree.map(lambda a: canonical(a)[None], host),)
    out = evaluate(
        _keyed(fn, impl),
        inputs,
        1,
        devices=devices,
        info=info,
        cache_key=program_key(module, cfg, impl),
        options=compile_options(module, devices),
        extras=extras,
    )
    metrics, more = out if extras else (out, None)
    row = {k: v[0].item() for k, v in metrics.items()}
    return (row, jax.tree.map(lambda a: a[0], more)) if extras else row
