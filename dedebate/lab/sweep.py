"""Sweeps: a grid of runs of one experiment, vmapped where it can be, with no loop to write.

A ``sweep:`` block in a run config (or ``dedebate sweep CONFIG``) lists ``seeds`` and ``axes``
(params field -> values). Every combination of axis values is a *point*; every point runs once per
seed, and each (point, seed) is one row of ``sweep.csv``.

How a sweep runs depends on the experiment (contract: ``dedebate/lab/experiment.py``):

* **Sweepable** experiments define ``point(cfg) -> (dynamic, fn)`` and ``DYNAMIC`` (the Config
  fields that only enter through ``dynamic``). The points are split into *static groups*, one per
  combination of values of the axes not in ``DYNAMIC``. Within a group the dynamic pytrees of all
  points x seeds are stacked along one run axis and evaluated by ONE compiled program,
  ``jit(vmap(fn))``, sharded over every device (``dedebate/lab/devices.py``). So a sweep over
  seeds and any number of dynamic axes compiles once; each static value compiles once more.
  A *chunked point* (``fn`` a :class:`ChunkedFn`: ``init``, ``chunk``, ``finish``) is evaluated
  per batch as init, every chunk in order and finish, each one compiled program
  (:class:`ChunkedPrograms`); a run trains its rows through the same programs chunk by chunk,
  with checkpoints (:func:`train_point`). A program of one row runs the row unbatched.
* Other experiments run each (point, seed) as a full ``run(cfg, ctx)`` in its own run directory
  (``points/pNNNN-sS/``); their scalar metrics become the row.

Keys. Row (point, seed) uses ``fold_in(fold_in(root(seed), w0), w1)``, where ``root(seed)`` is the
key ``dedebate run`` would give that seed and ``(w0, w1)`` are two 31-bit words of the sha256 of
the point's resolved params (its *point id*). A point's numbers therefore depend only on the
experiment, the seed and its own params: never on its position in the grid, on how many points
ran beside it, on the batch, the device or the process that computed it.

Output (``<output_dir>/<experiment>-sweep-<UTC time>/``): ``config.yaml``, ``sweep.csv``,
``groups/group-NNN.csv`` (written as each static group finishes, before the next starts; a
resumed sweep skips groups that have one whose rows check out, and recomputes a damaged one),
``plots/METRIC-vs-AXIS.png`` (mean over seeds with a 95% t-interval band) and the experiment's own
``plots/NAME.png`` (its optional ``sweep_figures`` hook), ``results.json`` (per-point means and
intervals, compile count, throughput, provenance) and the W&B runs (one per point, grouped under
the sweep, plus one for the sweep).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dedebate.lab.config import (
    ConfigError,
    RunConfig,
    build_dataclass,
    dump_yaml,
    read_yaml,
    sweep_hash_of,
)
from dedebate.lab.devices import EvalInfo, evaluate
from dedebate.lab.rundir import (
    _cell,
    environment_provenance,
    eprint,
    flatten_numbers,
    jsonable,
    lock_run_dir,
    new_run_dir,
    utc_iso,
    write_csv,
    write_json,
    write_text,
)
from dedebate.lab.runner import experiment_key, run_experiment
from dedebate.lab.tracking import Tracker

SWEEP_SCHEMA_VERSION = 1
RESERVED = ("point", "seed", "group")


class SweepError(ValueError):
    """A sweep that cannot run as declared (one line naming the experiment and what is wrong)."""


# ----------------------------------------------------------------------------- plan


@dataclasses.dataclass(frozen=True)
class Point:
    """One combination of axis values: its grid index, values, Config and point id words."""

    index: int
    values: dict[str, Any]
    cfg: Any
    words: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Group:
    """The points sharing one value of every static axis: one compiled program."""

    index: int
    static: dict[str, Any]
    points: tuple[Point, ...]


@dataclasses.dataclass(frozen=True)
class SweepPlan:
    experiment: str
    axes: dict[str, list[Any]]
    dynamic_axes: tuple[str, ...]
    static_axes: tuple[str, ...]
    seeds: tuple[int, ...]
    points: tuple[Point, ...]
    groups: tuple[Group, ...]
    vmapped: bool

    @property
    def rows(self) -> int:
        return len(self.points) * len(self.seeds)


def point_words(params: Any) -> tuple[int, int]:
    """Two 31-bit words of sha256(canonical JSON of the resolved params): the point id."""
    text = json.dumps(jsonable(dataclasses.asdict(params)), sort_keys=True,
                      separators=(",", ":"), allow_nan=True)
    h = hashlib.sha256(text.encode()).digest()
    return (int.from_bytes(h[:4], "little") & 0x7FFFFFFF,
            int.from_bytes(h[4:8], "little") & 0x7FFFFFFF)


def point_key(experiment: str, seed: int, params: Any):
    """The key of a (point, seed) row, computed alone (equal to the key inside any sweep)."""
    import jax

    w0, w1 = point_words(params)
    return jax.random.fold_in(jax.random.fold_in(experiment_key(seed, experiment), w0), w1)


def is_sweepable(module: Any) -> bool:
    return callable(getattr(module, "point", None))


def plan(module: Any, cfg: RunConfig) -> SweepPlan:
    """The grid of ``cfg.sweep`` (axes in the order written, the last varying fastest), its
    static groups and seeds. Every point's Config is built and validated here."""
    if cfg.sweep is None:
        raise SweepError(f"{cfg.experiment}: the config has no sweep block")
    name = cfg.experiment
    sweep = cfg.sweep
    axes = {k: list(v) for k, v in sweep.axes.items()}
    fields = [f.name for f in dataclasses.fields(type(cfg.params))]
    clash = [a for a in axes if a in RESERVED]
    if clash:
        raise SweepError(f"sweep.axes.{clash[0]}: the name is a sweep.csv column "
                         f"({', '.join(RESERVED)}); rename the params field")
    vmapped = is_sweepable(module)
    dynamic = tuple(getattr(module, "DYNAMIC", ()) or ()) if vmapped else ()
    unknown = [d for d in dynamic if d not in fields]
    if unknown:
        raise SweepError(f"{name}.DYNAMIC names {unknown[0]!r}, which is not a Config field "
                         f"(fields: {', '.join(fields)})")
    dyn_axes = tuple(a for a in axes if a in dynamic)
    static_axes = tuple(a for a in axes if a not in dynamic)
    base = dataclasses.asdict(cfg.params)
    names = list(axes)
    points = []
    for i, combo in enumerate(itertools.product(*(axes[a] for a in names))):
        values = dict(zip(names, combo))
        try:
            pcfg = build_dataclass(type(cfg.params), {**base, **values}, "params")
        except ConfigError as err:
            raise SweepError(f"sweep point {i} ({_describe(values)}): {err}") from None
        values = {a: getattr(pcfg, a) for a in names}  # coerced (lists -> tuples, ints -> floats)
        points.append(Point(i, values, pcfg, point_words(pcfg)))
    groups: dict[tuple, list[Point]] = {}
    for p in points:
        groups.setdefault(tuple(json.dumps(jsonable(p.values[a])) for a in static_axes),
                          []).append(p)
    group_list = tuple(
        Group(g, {a: pts[0].values[a] for a in static_axes}, tuple(pts))
        for g, pts in enumerate(groups.values()))
    return SweepPlan(name, axes, dyn_axes, static_axes, tuple(sweep.seed_list(cfg.seed)),
                     tuple(points), group_list, vmapped)


def _describe(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items()) or "no axes"


# ----------------------------------------------------------------------------- evaluation


def _canonical(x: Any) -> np.ndarray:
    import jax

    a = np.asarray(x)
    return a.astype(jax.dtypes.canonicalize_dtype(a.dtype))


def _stack_trees(trees: list[Any], differs: Callable[[int], str]) -> Any:
    """Stack pytrees of one structure, shapes and dtypes (leaves canonicalised) along a new
    leading axis; ``differs(i)`` is the message of the SweepError when tree ``i`` differs from
    the first."""
    import jax

    first, per_tree = None, []
    for i, tree in enumerate(trees):
        leaves, treedef = jax.tree.flatten(tree)
        leaves = [_canonical(v) for v in leaves]
        sig = (treedef, [(v.shape, v.dtype) for v in leaves])
        if first is None:
            first = sig
        elif sig != first:
            raise SweepError(differs(i))
        per_tree.append(leaves)
    return jax.tree.unflatten(first[0], [np.stack([r[j] for r in per_tree])
                                         for j in range(len(first[1]))])


def group_inputs(module: Any, plan_: SweepPlan, group: Group):
    """``(fn, key impl, (stacked dynamic params, row key data[, host inputs]), rows)`` for the
    rows ``[(point, seed), ...]`` of ``group`` (point-major, seed-minor)."""
    import jax

    points = group.points
    pairs = [module.point(p.cfg) for p in points]
    fn = pairs[0][1]
    by_point = _stack_trees(
        [dyn for dyn, _ in pairs],
        lambda i: f"{plan_.experiment}.point() returned dynamic params of another structure at "
                  f"point {points[i].index} ({_describe(points[i].values)}) than at point "
                  f"{points[0].index}; a field that changes shapes must not be listed in DYNAMIC")
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


@functools.cache
def _fold_words():
    """``jit(vmap(fold_in(fold_in(key, w0), w1)))`` over rows, built once per process."""
    import jax

    def one(key, w):
        return jax.random.fold_in(jax.random.fold_in(key, w[0]), w[1])

    return jax.jit(jax.vmap(one))


def _row_keys(root_data: np.ndarray, words: np.ndarray, impl: Any) -> np.ndarray:
    """Key data of every row: :func:`point_key`, computed for all rows in one vmapped call."""
    import jax

    keys = _fold_words()(jax.random.wrap_key_data(root_data, impl=impl), words)
    return np.asarray(jax.random.key_data(keys))


def row_inputs(module: Any, plan_: SweepPlan, rows: list[tuple[Point, int]]):
    """``module.inputs(cfg, seed, key)`` of every row (host-built data: populations, strategy
    batches), at the row's key (:func:`point_key`), stacked along the run axis."""
    return _stack_trees(
        [module.inputs(p.cfg, s, point_key(plan_.experiment, s, p.cfg)) for p, s in rows],
        lambda i: f"{plan_.experiment}.inputs() returned data of another structure at point "
                  f"{rows[i][0].index} ({_describe(rows[i][0].values)}), seed {rows[i][1]}, than "
                  f"at point {rows[0][0].index}; a field that changes shapes must not be listed "
                  "in DYNAMIC")


def _keyed(fn: Callable[..., Any], impl: Any) -> Callable[..., Any]:
    """The row function of a sweep and of :func:`point_row`: ``fn(dynamic, key, *host)`` with
    the row's key passed as key data (so that both share one compiled program)."""
    import jax

    def row_fn(dyn, key_data, *host):
        return fn(dyn, jax.random.wrap_key_data(key_data, impl=impl), *host)

    return row_fn


def evaluate_group(module: Any, plan_: SweepPlan, group: Group, *, batch: int = 0,
                   devices: list[Any] | None = None, info: EvalInfo | None = None):
    """Rows ``[(point, seed)]`` and their metrics (dict of ``[rows]`` arrays) for one group, in
    one compiled program over every device (a :class:`ChunkedFn`: its init, chunk and finish
    programs, each compiled once)."""
    fn, impl, inputs, rows = group_inputs(module, plan_, group)
    if isinstance(fn, ChunkedFn):
        progs = ChunkedPrograms(module, group.points[0].cfg, fn, impl, devices=devices, info=info)
        return rows, progs.evaluate(*inputs, batch=batch)
    metrics = evaluate(_keyed(fn, impl), inputs, len(rows), devices=devices, batch=batch,
                       info=info, cache_key=_program_key(module, group.points[0].cfg, impl),
                       compiler_options=compile_options(module, devices))
    return rows, metrics


def point_row(module: Any, cfg: Any, key: Any, seed: int, *, devices: list[Any] | None = None,
              info: EvalInfo | None = None, extras: bool = False) -> Any:
    """The metrics of ``module.point(cfg)`` at ``key`` (a run's ``ctx.key``; ``seed`` for the
    experiment's ``inputs``): the one-point case of a sweep, through the same compiled program
    as a sweep group of ``cfg``'s static fields evaluated one row per call (``sweep.batch: 1``).
    So a run after such a sweep in one process compiles nothing, and a run's numbers come from
    the code path of a sweep row. Returns plain Python scalars; with ``extras=True`` (for a fn
    that returns ``(metrics, extras)``), ``(those scalars, the row's extras as numpy)``."""
    import jax

    dynamic, fn = module.point(cfg)
    impl = jax.random.key_impl(key)
    if isinstance(fn, ChunkedFn):
        progs = ChunkedPrograms(module, cfg, fn, impl, devices=devices, info=info)
        metrics = progs.evaluate(jax.tree.map(lambda a: _canonical(a)[None], dynamic),
                                 np.asarray(jax.random.key_data(key))[None])
        return {k: v[0].item() for k, v in metrics.items()}
    one = jax.tree.map(lambda a: _canonical(a)[None], dynamic)
    inputs = (one, np.asarray(jax.random.key_data(key))[None])
    if callable(getattr(module, "inputs", None)):
        host = module.inputs(cfg, seed, key)
        inputs += (jax.tree.map(lambda a: _canonical(a)[None], host),)
    out = evaluate(_keyed(fn, impl), inputs, 1, devices=devices, info=info,
                   cache_key=_program_key(module, cfg, impl),
                   compiler_options=compile_options(module, devices), extras=extras)
    metrics, more = out if extras else (out, None)
    row = {k: v[0].item() for k, v in metrics.items()}
    return (row, jax.tree.map(lambda a: a[0], more)) if extras else row


# ----------------------------------------------------------------------------- chunked points


@dataclasses.dataclass(frozen=True)
class ChunkedFn:
    """A point's ``fn`` that trains chunk by chunk: ``point(cfg) -> (dynamic, ChunkedFn)``, for
    an experiment whose run must stop between chunks (to log and to checkpoint).

    ``init(dynamic, key) -> state``; ``chunk(dynamic, state, spec) -> (state, monitors)`` for each
    static ``spec`` of ``chunks``, in order (equal specs share one compiled program);
    ``finish(dynamic, state, monitors) -> dict of scalar metrics``, ``monitors`` being the
    chunks' monitors concatenated along ``axis`` (the time axis of one row's monitors). All pure
    JAX, reading ``cfg`` only for its static fields. A sweep group and :func:`point_row` run them
    as compiled programs over the run axis (:class:`ChunkedPrograms`); :func:`train_point` is a
    run's training of the same rows through the same programs, chunk by chunk through the lab's
    chunked driver (checkpoints, resume, logging)."""

    init: Callable[[Any, Any], Any]
    chunk: Callable[[Any, Any, Any], tuple[Any, Any]]
    chunks: tuple
    finish: Callable[[Any, Any, Any], dict[str, Any]]
    axis: int = 0


class ChunkedPrograms:
    """The compiled programs of a :class:`ChunkedFn` for ``cfg``'s static fields: init, one
    chunk per distinct spec and finish, each ``jit(vmap(...))`` over the run axis sharded over
    ``devices``, cached like a sweep group's program (a sweep and a run share them)."""

    def __init__(self, module: Any, cfg: Any, fn: ChunkedFn, impl: Any, *,
                 devices: list[Any] | None = None, info: EvalInfo | None = None):
        from jax.sharding import NamedSharding, PartitionSpec

        from dedebate.lab.devices import AXIS, run_mesh

        if callable(getattr(module, "inputs", None)):
            raise SweepError(f"{getattr(module, 'NAME', module.__name__)}: a chunked point "
                             "takes no host inputs (inputs())")
        self.fn, self.impl, self.info = fn, impl, info if info is not None else EvalInfo()
        mesh = run_mesh(devices)
        self.sharding = NamedSharding(mesh, PartitionSpec(AXIS))
        self.n_dev = mesh.size
        self.key = _program_key(module, cfg, impl)
        self.options = compile_options(module, devices)

    def _program(self, part: Any, row_fn: Callable[..., Any], size: int) -> Any:
        """The compiled program of ``row_fn`` over ``size`` rows: ``jit(vmap(row_fn))``, or
        at one row ``row_fn`` on that row unbatched (what a run computes on its own, with
        scalar hyperparameters: batching them can round float32 training differently)."""
        import jax

        from dedebate.lab import devices

        if size > 1:
            return devices._program(row_fn, self.sharding, self.info, (self.key, part),
                                    self.options)
        key = ("one row", self.key, part, tuple(sorted((self.options or {}).items())))
        if key in devices._PROGRAMS:  # the sweep programs' cache (clear_program_cache)
            program, holder = devices._PROGRAMS[key]
            devices._PROGRAMS.move_to_end(key)
            holder["info"] = self.info
            return program
        holder = {"info": self.info}

        def one(*rows):
            holder["info"].traces += 1  # at trace time only
            out = row_fn(*jax.tree.map(lambda a: a[0], rows))
            return jax.tree.map(lambda a: a[None], out)

        program = jax.jit(one, compiler_options=self.options or None)
        devices._PROGRAMS[key] = (program, holder)
        while len(devices._PROGRAMS) > devices.MAX_PROGRAMS:
            devices._PROGRAMS.popitem(last=False)
        return program

    def place(self, tree: Any, size: int) -> Any:
        """Host rows placed on the run axis.

        Args:
            tree: a pytree of host arrays with the rows on the leading axis.
            size: rows per call (the last row is repeated up to it).

        Returns:
            The pytree of device arrays ``[size, ...]``.
        """
        import jax

        def one(a):
            a = np.asarray(a)
            if a.shape[0] < size:
                a = np.concatenate([a, np.repeat(a[-1:], size - a.shape[0], axis=0)])
            if size == 1:  # the one-row program: uncommitted, like a restored checkpoint's
                return jax.numpy.asarray(a)
            return jax.make_array_from_callback(a.shape, self.sharding, lambda idx: a[idx])

        return jax.tree.map(one, tree)

    def size(self, n: int, batch: int = 0) -> int:
        """Rows per compiled call.

        Args:
            n: the rows to evaluate.
            batch: rows per call asked for (0: all).

        Returns:
            ``batch`` (or ``n``) rounded up to a multiple of the devices.
        """
        from dedebate.lab.devices import padded_batch

        return padded_batch(n, self.n_dev, batch)

    def init(self, dynamic: Any, key_data: Any, size: int) -> Any:
        """The initial states of rows, through the init program.

        Args:
            dynamic: host rows of the dynamic pytree.
            key_data: host rows of key data (the rows' keys).
            size: rows per call.

        Returns:
            The states ``[size, ...]`` (device arrays).
        """
        import jax

        impl = self.impl

        def row(dyn, kd):
            return self.fn.init(dyn, jax.random.wrap_key_data(kd, impl=impl))

        return self._program("init", row, size)(*self.place((dynamic, key_data), size))

    def chunk(self, dynamic: Any, state: Any, spec: Any) -> tuple[Any, Any]:
        """One chunk of rows, through the chunk program of ``spec``.

        Args:
            dynamic: the rows' dynamic pytree, placed (:meth:`place`).
            state: the rows' states.
            spec: the chunk's static spec (one of ``fn.chunks``).

        Returns:
            ``(state, monitors)`` after the chunk (device arrays with the run axis first).
        """
        return self._chunk_program(dynamic, spec)(dynamic, state)

    def _chunk_program(self, dynamic: Any, spec: Any) -> Any:
        size = _n_rows(dynamic)
        return self._program(("chunk", spec), lambda d, s: self.fn.chunk(d, s, spec), size)

    def chunk_shapes(self, dynamic: Any, state: Any, spec: Any) -> Any:
        """The shapes of a chunk's monitors, from the chunk program's own trace (no second
        trace once the program has run).

        Args:
            dynamic: the rows' dynamic pytree, placed.
            state: the rows' states.
            spec: the chunk's static spec.

        Returns:
            A pytree of ``jax.ShapeDtypeStruct`` (the run axis first).
        """
        return self._chunk_program(dynamic, spec).eval_shape(dynamic, state)[1]

    def finish(self, dynamic: Any, state: Any, monitors: Any) -> dict[str, Any]:
        """The rows' metrics, through the finish program.

        Args:
            dynamic: the rows' dynamic pytree, placed.
            state: the rows' final states.
            monitors: the rows' monitors, every chunk's along the time axis.

        Returns:
            ``{metric: device array [size]}``.
        """
        return self._program("finish", self.fn.finish, _n_rows(dynamic))(dynamic, state,
                                                                         monitors)

    def evaluate(self, dynamic: Any, key_data: Any, *, batch: int = 0) -> dict[str, np.ndarray]:
        """The metrics of rows: per batch of rows, init, every chunk in order and finish (the
        monitors concatenated on the device).

        Args:
            dynamic: host rows of the dynamic pytree (``n`` rows).
            key_data: host rows of key data.
            batch: rows per call (0: all).

        Returns:
            ``{metric: numpy array [n]}``.
        """
        import jax

        from dedebate.lab.devices import _to_host

        n = int(np.shape(key_data)[0])
        size = self.size(n, batch)
        pieces, local = [], []
        for lo in range(0, n, size):
            dyn = jax.tree.map(lambda a, lo=lo: np.asarray(a)[lo:lo + size], dynamic)
            state = self.init(dyn, np.asarray(key_data)[lo:lo + size], size)
            dyn = self.place(dyn, size)
            mons = []
            for spec in self.fn.chunks:
                state, mon = self.chunk(dyn, state, spec)
                mons.append(mon)
            mon = jax.tree.map(lambda *m: jax.numpy.concatenate(m, axis=self.fn.axis + 1),
                               *mons)
            out = self.finish(dyn, state, mon)
            for shard in getattr(next(iter(out.values())), "addressable_shards", ()):
                s = shard.index[0] if shard.index else slice(None)
                local.extend(range(lo + (s.start or 0), lo + (size if s.stop is None else s.stop)))
            pieces.append({k: _to_host(v) for k, v in out.items()})
            self.info.calls += 1
        self.info.rows += n
        self.info.padded_rows += size * len(pieces) - n
        self.info.batch, self.info.devices = size, self.n_dev
        self.info.local_rows = sorted({r for r in local if r < n})
        return {k: np.concatenate([p[k] for p in pieces])[:n] for k in pieces[0]}


def _n_rows(tree: Any) -> int:
    """The length of the run axis of a pytree of rows (its first leaf's leading axis)."""
    import jax

    return int(jax.tree.leaves(tree)[0].shape[0])


def train_point(module: Any, cfg: Any, ctx: Any, rows: Mapping[str, Any] | None = None, *,
                desc: str = "training", every: int = 1, keep: int = 2,
                log_rows: Callable[[str, int, Any], Any] | None = None,
                finish: bool = False, devices: list[Any] | None = None,
                info: EvalInfo | None = None) -> tuple[Any, dict[str, Any]]:
    """A run's training of ``module.point(cfg)`` (a :class:`ChunkedFn`) at ``ctx.key`` through
    the compiled programs of a sweep group of ``cfg``'s static fields run one row per call
    (``sweep.batch: 1``), chunk by chunk through :func:`~dedebate.lab.driver.run_chunks`.

    Args:
        module: the experiment module.
        cfg: its Config.
        ctx: the run's context (``ctx.key`` is every row's key; checkpoints, resume, logging).
        rows: ``{name: dynamic}``, the rows to train one after the other, each as a batch of
            one (default ``{"main": point(cfg)[0]}``: the sweep's row); other rows train other
            dynamic numbers (ablations, schedules) through the same programs.
        desc: the progress bar's name.
        every: checkpoint after every ``every``-th chunk (counted over all rows) and the last.
        keep: checkpoints kept.
        log_rows: ``log_rows(name, c, monitors) -> [(step, row)]``: the log rows of chunk ``c``
            of row ``name`` from its monitors (one row's, numpy); steps never go back.
        finish: also compute each row's metrics through the ``finish`` program (a sweep row).
        devices: the devices of the run axis (default: all).
        info: counts the programs' traces and calls.

    Returns:
        ``(chunked, metrics)``: the driver's :class:`~dedebate.lab.driver.Chunked` with
        ``state`` and ``monitors`` by row name, one row's each (no leading axis), and ``{name:
        {metric: float}}`` when ``finish`` (else ``{}``).
    """
    import jax

    from dedebate.lab.driver import run_chunks

    dynamic, fn = module.point(cfg)
    if not isinstance(fn, ChunkedFn):
        raise TypeError(f"{module.__name__}.point() returns a plain fn; train_point needs a "
                        "ChunkedFn")
    rows = {"main": dynamic} if rows is None else dict(rows)
    names = list(rows)
    progs = ChunkedPrograms(module, cfg, fn, jax.random.key_impl(ctx.key), devices=devices,
                            info=info)
    size = progs.size(1)
    kd = np.asarray(jax.random.key_data(ctx.key))[None]
    host = {k: jax.tree.map(lambda a: _canonical(a)[None], d) for k, d in rows.items()}
    placed = {k: progs.place(d, size) for k, d in host.items()}
    init = {k: progs.init(host[k], kd, size) for k in names}
    first = names[0]
    by_spec = {spec: progs.chunk_shapes(placed[first], init[first], spec)
               for spec in dict.fromkeys(fn.chunks)}
    shapes = [by_spec[spec] for spec in fn.chunks]
    ax = fn.axis
    template = jax.tree.map(  # one row's monitors, every chunk's along the time axis
        lambda *s: np.zeros(s[0].shape[1:ax + 1] + (sum(x.shape[ax + 1] for x in s),)
                            + s[0].shape[ax + 2:], s[0].dtype), *shapes)
    n_c = len(fn.chunks)

    def chunk(state, g):
        name, c = names[g // n_c], g % n_c
        new, mon = progs.chunk(placed[name], state[name], fn.chunks[c])
        return {**state, name: new}, {name: jax.tree.map(lambda a: np.asarray(a)[0], mon)}

    def rows_of(g, _state, mons):
        name = names[g // n_c]
        return log_rows(name, g % n_c, mons[name]) if log_rows is not None else ()

    done = run_chunks(ctx, desc, init, chunk, n_c * len(names),
                      monitors={k: template for k in names}, axis=ax, every=every, keep=keep,
                      log_rows=rows_of)
    metrics = {}
    if finish:
        for k in names:
            mon = jax.tree.map(lambda a: np.asarray(a)[None], done.monitors[k])
            out = progs.finish(placed[k], done.state[k], progs.place(mon, size))
            metrics[k] = {m: np.asarray(v)[0].item() for m, v in out.items()}
    done.state = {k: jax.tree.map(_first_row, v) for k, v in done.state.items()}
    return done, metrics


def _first_row(a: Any) -> Any:
    """Row 0 of a state leaf, as a device array (through the host: no compiled program)."""
    import jax

    if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(jax.device_put(np.asarray(jax.random.key_data(a))[0]),
                                        impl=jax.random.key_impl(a))
    return jax.device_put(np.asarray(a)[0])


def compile_options(module: Any, devices: list[Any] | None = None) -> dict[str, Any] | None:
    """The experiment's ``COMPILE_OPTIONS`` for the platform of ``devices`` (default: JAX's
    default backend): a dict used as is, or a function of the platform name (``"cpu"``,
    ``"gpu"``, ...) returning a dict or None (options that pay off on one backend only)."""
    import jax

    options = getattr(module, "COMPILE_OPTIONS", None)
    if not callable(options):
        return options
    platform = devices[0].platform if devices else jax.default_backend()
    return options(platform)


def _program_key(module: Any, cfg: Any, impl: Any) -> tuple:
    """What the compiled program of a group depends on: the experiment module and the static
    part of its Config (by the contract, ``fn`` reads only static fields). Dynamic fields are
    dropped, so every group with equal static fields shares one program."""
    dynamic = set(getattr(module, "DYNAMIC", ()) or ())
    static = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in dynamic}
    return (module.__name__, id(module), json.dumps(jsonable(static), sort_keys=True),
            str(impl))


def _row(p: Point, seed: int, group: int) -> dict[str, Any]:
    return {"point": p.index, "seed": seed, "group": group, **jsonable(p.values)}


# ----------------------------------------------------------------------------- statistics, plots


def t_interval(values: Any, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval over seeds: ``(mean, lo, hi)``; ``lo = hi = mean`` for one."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    m = float(x.mean())
    if x.size < 2:
        return (m, m, m)
    from scipy.special import stdtrit  # Student-t quantile (lighter to import than stats)

    half = float(stdtrit(x.size - 1, 0.5 + level / 2)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return (m, m - half, m + half)


def metric_names(rows: list[dict[str, Any]], axes: Mapping[str, Any]) -> list[str]:
    """Columns holding numbers that are not the index columns or axes."""
    out: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k in RESERVED or k in axes or k in out:
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(k)
    return out


def per_point(rows: list[dict[str, Any]], plan_: SweepPlan) -> list[dict[str, Any]]:
    """For each point: its axis values and, per metric, mean and t-interval over seeds."""
    metrics = metric_names(rows, plan_.axes)
    by_point: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_point.setdefault(int(r["point"]), []).append(r)
    out = []
    for p in plan_.points:
        rs = by_point.get(p.index, [])
        entry: dict[str, Any] = {"point": p.index, "values": jsonable(p.values),
                                 "seeds": len(rs)}
        for m in metrics:
            vals = [r[m] for r in rs if isinstance(r.get(m), (int, float))]
            mean, lo, hi = t_interval(vals)
            entry[m] = {"mean": mean, "lo": lo, "hi": hi, "n": len(vals)}
        out.append(entry)
    return out


def _numeric_axis(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


MAX_LINES = 8
MAX_METRICS = 24


def plot_sweep(rows: list[dict[str, Any]], plan_: SweepPlan, plots_dir: Path,
               only: list[str] | None = None) -> list[str]:
    """One PNG per (metric, axis): the metric's mean over seeds against the axis, one line per
    combination of the other axes (at most ``MAX_LINES``), with a 95% t-interval band. Metrics:
    ``only`` if given, else every metric (the first ``MAX_METRICS``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir.mkdir(parents=True, exist_ok=True)
    stats = per_point(rows, plan_)
    metrics = metric_names(rows, plan_.axes)
    if only:
        unknown = [m for m in only if m not in metrics]
        if unknown:
            eprint(f"dedebate: warning: sweep.metrics names {', '.join(unknown)}, which the "
                   f"sweep did not produce (metrics: {', '.join(metrics)})")
        metrics = [m for m in only if m in metrics]
    elif len(metrics) > MAX_METRICS:
        eprint(f"dedebate: warning: plotting the first {MAX_METRICS} of {len(metrics)} metrics; "
               "choose others with sweep.metrics")
        metrics = metrics[:MAX_METRICS]
    saved = []
    axes = [a for a in plan_.axes if len(plan_.axes[a]) > 1] or list(plan_.axes)
    for axis in axes:
        others = [a for a in plan_.axes if a != axis]
        lines: dict[str, list[dict[str, Any]]] = {}
        for e in stats:
            label = ", ".join(f"{a}={e['values'][a]}" for a in others) or "all"
            lines.setdefault(label, []).append(e)
        numeric = _numeric_axis(plan_.axes[axis])
        for m in metrics:
            fig, ax = plt.subplots(figsize=(6, 4))
            for label, es in list(lines.items())[:MAX_LINES]:
                if numeric:
                    es = sorted(es, key=lambda e: e["values"][axis])
                xs = [e["values"][axis] for e in es]
                xpos = xs if numeric else list(range(len(xs)))
                mean = [e[m]["mean"] for e in es]
                lo = [e[m]["lo"] for e in es]
                hi = [e[m]["hi"] for e in es]
                (line,) = ax.plot(xpos, mean, marker="o", label=label)
                ax.fill_between(xpos, lo, hi, alpha=0.2, color=line.get_color())
                if not numeric:
                    ax.set_xticks(xpos, [str(x) for x in xs])
            ax.set_xlabel(axis)
            ax.set_ylabel(m)
            note = f"{len(plan_.seeds)} seeds, 95% t-interval"
            if len(lines) > MAX_LINES:
                note += f"; first {MAX_LINES} of {len(lines)} lines"
            ax.set_title(f"{plan_.experiment}: {m} vs {axis} ({note})", fontsize=9)
            if len(lines) > 1:
                ax.legend(fontsize=7)
            fig.tight_layout()
            fname = _safe(f"{m}-vs-{axis}") + ".png"
            fig.savefig(plots_dir / fname, dpi=100)
            plt.close(fig)
            saved.append(fname)
    return saved


def experiment_figures(module: Any, rows: list[dict[str, Any]], plots_dir: Path) -> list[str]:
    """The experiment's own figures of a sweep: ``module.sweep_figures(rows)`` (optional; rows
    as in ``sweep.csv``) -> ``{name: matplotlib Figure}``, saved as ``plots/NAME.png``. A hook
    that fails costs its figures and a warning, not the sweep."""
    hook = getattr(module, "sweep_figures", None)
    if not callable(hook):
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        figs = hook(rows)
    except Exception as err:  # noqa: BLE001 - the sweep's rows are on disk already
        eprint(f"dedebate: warning: {getattr(module, 'NAME', module.__name__)}.sweep_figures "
               f"failed ({type(err).__name__}: {err}); no experiment figures")
        return []
    plots_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, fig in (figs or {}).items():
        fname = _safe(name) + ".png"
        fig.savefig(plots_dir / fname, dpi=100)
        plt.close(fig)
        saved.append(fname)
    return saved


def _safe(text: str) -> str:
    return "".join(c if (c.isalnum() or c in "-_.") else "_" for c in text)


# ----------------------------------------------------------------------------- CSV round trip


def _parse_cell(text: str) -> Any:
    if text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def read_rows(path: Path) -> list[dict[str, Any]]:
    import csv

    with open(path, newline="") as fh:
        return [{k: _parse_cell(v) for k, v in r.items()} for r in csv.DictReader(fh)]


def _sorted(rows: list[dict[str, Any]], seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    order = {s: i for i, s in enumerate(seeds)}
    return sorted(rows, key=lambda r: (int(r["point"]), order.get(int(r["seed"]), 0)))


# ----------------------------------------------------------------------------- the sweep


@dataclasses.dataclass
class SweepRecord:
    cfg: RunConfig
    sweep_dir: Path
    plan: SweepPlan
    rows: list[dict[str, Any]]
    results: dict[str, Any]
    wall_time_s: float
    error: str | None = None


def find_sweep_dir(cfg: RunConfig) -> Path | None:
    """The newest ``<output_dir>/<experiment>-sweep-*`` whose config.yaml has this sweep hash."""
    from dedebate.lab.rundir import newest_matching_dir

    want = cfg.sweep_hash()
    return newest_matching_dir(cfg.output_dir, f"{cfg.experiment}-sweep-*",
                               lambda old: sweep_hash_of(old) == want)


def run_sweep(module: Any, cfg: RunConfig, *, sweep_dir: str | os.PathLike | None = None,
              resume: bool | None = None, show_progress: bool = True,
              devices: list[Any] | None = None) -> SweepRecord:
    """Run the sweep of ``cfg`` (its ``sweep`` block) and write the sweep directory.

    With several JAX processes (``dedebate/lab/distributed.py``) every process calls this with
    the same config: process 0 creates the directory (its name is broadcast), every process
    computes the rows of its devices and writes them to ``shards/``, and process 0 merges,
    plots and tracks. ``resume`` (default ``cfg.resume``) reuses ``sweep_dir`` (or the newest
    directory of this sweep) and skips the static groups already on disk whose rows check out.
    Process 0 holds the sweep directory's lock while it runs (another process on it:
    :class:`~dedebate.lab.rundir.RunDirError` "run in use by PID N").
    """
    held: list[Any] = []
    try:
        return _run_sweep(module, cfg, sweep_dir=sweep_dir, resume=resume,
                          show_progress=show_progress, devices=devices, held=held)
    finally:
        for lock in held:
            lock.release()


def _run_sweep(module: Any, cfg: RunConfig, *, sweep_dir: str | os.PathLike | None,
               resume: bool | None, show_progress: bool, devices: list[Any] | None,
               held: list[Any]) -> SweepRecord:
    from dedebate.lab import distributed as dist

    t0 = time.monotonic()
    started = utc_iso()
    plan_ = plan(module, cfg)
    pid, nproc = dist.process_index(), dist.process_count()
    lead = pid == 0
    resume = cfg.resume if resume is None else resume

    # -- the directory (process 0 decides, everyone uses it)
    path = ""
    if lead:
        if sweep_dir is None and resume:
            found = find_sweep_dir(cfg)
            sweep_dir = found if found is not None else None
        if sweep_dir is None:
            sweep_dir = new_run_dir(cfg.output_dir, f"{cfg.experiment}-sweep")
            resume = False
        path = str(Path(sweep_dir).resolve())
        Path(path).mkdir(parents=True, exist_ok=True)
        held.append(lock_run_dir(path))  # another process on this sweep stops here
        _check_same_sweep(Path(path), cfg)
        write_text(Path(path) / "config.yaml", dump_yaml(cfg))
    path = dist.broadcast_text(path)
    out = Path(path)
    groups_dir, plots_dir = out / "groups", out / "plots"
    if lead:
        groups_dir.mkdir(exist_ok=True)

    # -- which groups are already done (process 0 reads and checks, everyone agrees)
    done = [bool(resume) and _group_done(groups_dir / f"group-{g.index:03d}.csv", plan_, g)
            for g in plan_.groups] if lead else [False] * len(plan_.groups)
    done = dist.broadcast_flags(done)

    mode = cfg.tracking.effective_mode() if lead else "disabled"
    group_name = cfg.tracking.group or out.name
    tracker = Tracker.start(mode=mode, run_dir=out, project=cfg.tracking.project,
                            entity=cfg.tracking.entity, group=group_name, job_type="sweep",
                            name=out.name, config={**cfg.to_dict(), "sweep_dir": str(out)})
    mode = tracker.mode if tracker.active else mode  # online falls back to offline off-network

    info = EvalInfo()
    rows: list[dict[str, Any]] = []
    computed_rows = 0
    compute_s = 0.0
    from tqdm.auto import tqdm

    bar = tqdm(total=plan_.rows, desc=f"sweep {cfg.experiment}", unit="run",
               disable=not (show_progress and lead), dynamic_ncols=True, mininterval=0.5)
    try:
        for g, is_done in zip(plan_.groups, done):
            gfile = groups_dir / f"group-{g.index:03d}.csv"
            if is_done:
                grows = read_rows(gfile)
            else:
                tg = time.monotonic()
                if plan_.vmapped:
                    grows = _vmapped_group(module, plan_, g, cfg, out, info, devices, pid, nproc)
                else:
                    grows = _full_run_group(module, plan_, g, cfg, out, group_name, pid, nproc)
                compute_s += time.monotonic() - tg
                computed_rows += len(grows)
                if lead:
                    write_csv(gfile, grows)  # this group is on disk before the next starts
            rows.extend(grows)
            if lead:
                rows = _sorted(rows, plan_.seeds)
                write_csv(out / "sweep.csv", rows)
                tracker.log({"group": g.index, "rows_done": len(rows),
                             "wall_s": time.monotonic() - t0})
                if plan_.vmapped and not is_done and cfg.sweep.tracking == "points":
                    _track_points(cfg, plan_, g, grows, out, group_name, mode)
            bar.update(len(plan_.seeds) * len(g.points))
    finally:
        bar.close()
    dist.barrier("dedebate-sweep-end")

    wall = time.monotonic() - t0
    results: dict[str, Any] = {}
    if lead:
        plots = (plot_sweep(rows, plan_, plots_dir, list(cfg.sweep.metrics))
                 if cfg.sweep.plots and rows else [])
        if cfg.sweep.plots and rows:
            plots += experiment_figures(module, rows, plots_dir)
        points = per_point(rows, plan_)
        results = {
            "experiment": cfg.experiment,
            "title": getattr(module, "TITLE", ""),
            "kind": "sweep",
            "status": "ok",
            "schema_version": SWEEP_SCHEMA_VERSION,
            "vmapped": plan_.vmapped,
            "axes": jsonable(plan_.axes),
            "dynamic_axes": list(plan_.dynamic_axes),
            "static_axes": list(plan_.static_axes),
            "seeds": list(plan_.seeds),
            "points": len(plan_.points),
            "groups": len(plan_.groups),
            "rows": len(rows),
            "groups_resumed": sum(done),
            "compilations": info.traces,
            "compiled_calls": info.calls,
            "padded_rows": info.padded_rows,
            "devices": info.devices if info.calls else None,
            "processes": nproc,
            "rows_computed": computed_rows,
            "compute_s": round(compute_s, 4),
            "rows_per_s": round(computed_rows / compute_s, 3) if compute_s > 0 else None,
            "table": "sweep.csv",
            "plots": [f"plots/{p}" for p in plots],
            "per_point": points,
            "provenance": {
                "config_hash": cfg.config_hash(), "sweep_hash": cfg.sweep_hash(),
                "seed": cfg.seed, "size": cfg.size, **environment_provenance(),
                "started_utc": started, "wall_time_s": round(wall, 3), "resumed": bool(resume),
                "tracking": {"mode": mode, "wandb_run_id": tracker.run_id,
                             "wandb_dir": tracker.run_path, "failure": tracker.failed},
            },
        }
        write_json(out / "results.json", results)
        tracker.log_table("sweep", rows)
        for p in plots:
            tracker.log_image(Path(p).stem, plots_dir / p)
        tracker.set_summary({"points": len(plan_.points), "rows": len(rows),
                             "compilations": info.traces, "wall_time_s": wall})
        tracker.log_artifact(f"sweep-{out.name}", "sweep",
                             [out / "sweep.csv", out / "results.json", out / "config.yaml",
                              *(plots_dir / p for p in plots)])
        tracker.finish(0)
    return SweepRecord(cfg, out, plan_, rows, results, wall)


def check_group_file(path: Path, plan_: SweepPlan, group: Group) -> str | None:
    """None if ``path`` holds exactly the rows of ``group``: the index and axis columns, one row
    per (point, seed) of the group, each with its point's axis values as the sweep writes them;
    else what is wrong, in words (a file cut short, edited, or from another plan)."""
    import csv

    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        return f"unreadable ({type(err).__name__}: {err})"
    missing = [c for c in (*RESERVED, *plan_.axes) if c not in header]
    if missing:
        return f"no {missing[0]!r} column"
    want = len(group.points) * len(plan_.seeds)
    if len(rows) != want:
        return f"{len(rows)} rows, expected {want} ({len(group.points)} points x " \
               f"{len(plan_.seeds)} seeds)"
    points = {p.index: p for p in group.points}
    expected = {(p.index, s) for p in group.points for s in plan_.seeds}
    seen: set[tuple[int, int]] = set()
    for i, r in enumerate(rows, start=2):  # line numbers: the header is line 1
        if None in r or None in r.values():
            return f"line {i} has {'more' if None in r else 'fewer'} cells than the header"
        try:
            key, g = (int(r["point"]), int(r["seed"])), int(r["group"])
        except ValueError:
            return f"line {i}: point, seed and group must be integers"
        if key not in expected or key in seen or g != group.index:
            return f"line {i}: point {key[0]}, seed {key[1]}, group {g} is not a (new) row " \
                   f"of group {group.index}"
        seen.add(key)
        for a in plan_.axes:
            cell = _cell(points[key[0]].values[a])
            if r[a] != ("" if cell is None else str(cell)):
                return f"line {i}: {a}={r[a]!r} is not point {key[0]}'s value {cell!r}"
    return None


def _group_done(path: Path, plan_: SweepPlan, group: Group) -> bool:
    """A resumed sweep skips a group whose file checks out; a damaged one is recomputed."""
    if not path.is_file():
        return False
    problem = check_group_file(path, plan_, group)
    if problem is not None:
        eprint(f"dedebate: warning: {path}: {problem}; recomputing group {group.index}")
    return problem is None


def _check_same_sweep(path: Path, cfg: RunConfig) -> None:
    f = path / "config.yaml"
    if not f.is_file():
        return
    try:
        old = read_yaml(f)  # the config loader's limits: no alias bomb, bounded nesting
    except Exception:  # noqa: BLE001 - an unreadable config is replaced
        return
    if isinstance(old, dict) and old.get("sweep") and sweep_hash_of(old) != cfg.sweep_hash():
        raise SweepError(f"{path} holds a different sweep (its config.yaml has another sweep "
                         "hash); start a new sweep directory instead")


def _vmapped_group(module, plan_, g, cfg, out, info, devices, pid, nproc):
    batch = cfg.sweep.batch
    rows, metrics = evaluate_group(module, plan_, g, batch=batch, devices=devices, info=info)
    grows = []
    for i, (p, s) in enumerate(rows):
        r = _row(p, s, g.index)
        for k, v in metrics.items():
            if k in r:
                raise SweepError(f"{plan_.experiment}: metric {k!r} has the name of a "
                                 "sweep.csv column (point, seed, group or an axis)")
            r[k] = v[i].item()
        grows.append(r)
    if nproc > 1:  # each process writes the rows its devices computed
        shard_dir = out / "shards"
        shard_dir.mkdir(exist_ok=True)
        mine = [grows[i] for i in info.local_rows]
        write_csv(shard_dir / f"group-{g.index:03d}-process-{pid}.csv", mine)
    return grows


def _full_run_group(module, plan_, g, cfg, out, group_name, pid, nproc):
    """Experiments without ``point``: each (point, seed) is a full run in ``points/``; process
    ``i`` of ``n`` runs every n-th row, process 0 merges the shard files."""
    from dedebate.lab import distributed as dist

    shard_dir = out / "shards"
    shard_dir.mkdir(exist_ok=True)
    todo = [(p, s) for p in g.points for s in plan_.seeds]
    mine = []
    tracking = cfg.tracking if cfg.sweep.tracking == "points" else dataclasses.replace(
        cfg.tracking, mode="disabled")
    tracking = dataclasses.replace(tracking, group=group_name)
    for i, (p, s) in enumerate(todo):
        if i % nproc != pid:
            continue
        pcfg = dataclasses.replace(cfg, seed=s, params=p.cfg, sweep=None, resume=False,
                                   output_dir=str(out / "points"), tracking=tracking)
        run_dir = out / "points" / f"p{p.index:04d}-s{s}"
        rec = run_experiment(module, pcfg, run_dir=run_dir, show_progress=False, nested=True,
                             key=point_key(cfg.experiment, s, p.cfg),
                             tracking_name=f"{out.name}-p{p.index}-s{s}")
        r = _row(p, s, g.index)
        r["status"] = "ok" if rec.error is None else "error"
        r["passed"] = int(rec.passed)
        for k, v in flatten_numbers(rec.results.get("metrics", {})).items():
            if k not in r and not isinstance(v, str):
                r[k] = v
        r["run_dir"] = str(run_dir.relative_to(out))
        mine.append(r)
    if nproc == 1:
        return mine
    write_csv(shard_dir / f"group-{g.index:03d}-process-{pid}.csv", mine)
    dist.barrier(f"dedebate-sweep-group-{g.index}")
    grows: list[dict[str, Any]] = []
    if pid == 0:
        for q in range(nproc):
            f = shard_dir / f"group-{g.index:03d}-process-{q}.csv"
            if f.is_file() and f.stat().st_size:
                grows.extend(read_rows(f))
        missing = len(todo) - len(grows)
        if missing:
            eprint(f"dedebate: warning: {missing} rows of group {g.index} are missing from "
                   f"{shard_dir} (the processes do not share a file system?)")
    return _sorted(grows, plan_.seeds) if pid == 0 else grows


def _track_points(cfg, plan_, g, grows, out, group_name, mode):
    """One W&B run per point of a finished group: its resolved config, and per-seed values
    under their own keys (``seed/S/METRIC``) beside the mean and interval over seeds."""
    if mode == "disabled":
        return
    by_point: dict[int, list[dict[str, Any]]] = {}
    for r in grows:
        by_point.setdefault(int(r["point"]), []).append(r)
    metrics = metric_names(grows, plan_.axes)
    for p in g.points:
        rs = by_point.get(p.index, [])
        pcfg = dataclasses.replace(cfg, params=p.cfg, sweep=None)
        t = Tracker.start(mode=mode, run_dir=out, project=cfg.tracking.project,
                          entity=cfg.tracking.entity, group=group_name,
                          job_type=cfg.experiment, name=f"{out.name}-p{p.index}",
                          config={**pcfg.to_dict(), "point": p.index,
                                  "values": jsonable(p.values), "seeds": list(plan_.seeds)})
        summary: dict[str, Any] = {}
        for r in rs:
            for m in metrics:
                summary[f"seed/{r['seed']}/{m}"] = r.get(m)
        for m in metrics:
            mean, lo, hi = t_interval([r[m] for r in rs if isinstance(r.get(m), (int, float))])
            summary[f"{m}/mean"], summary[f"{m}/lo"], summary[f"{m}/hi"] = mean, lo, hi
        t.set_summary(summary)
        t.finish(0)
        if t.failed:
            return  # one warning is enough; the sweep's local files are complete
