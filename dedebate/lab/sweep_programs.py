"""The compiled programs of a sweep group, shared by a sweep and a run.

A group's program is cached under :func:`program_key` (the experiment and its static Config
fields), compiled with the experiment's :func:`compile_options`. A *chunked point*
(:class:`ChunkedFn`: ``init``, ``chunk`` per static spec, ``finish``) is evaluated as several such
programs (:class:`ChunkedPrograms`); a run trains its rows through the same programs, chunk by
chunk with checkpoints (:func:`train_point`). A program of one row runs the row unbatched.
More: docs/lab.md, "Sweeps".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dedebate.lab.checkpoint import uncommitted
from dedebate.lab.devices import EvalInfo, to_host
from dedebate.lab.experiment import ChunkedFn
from dedebate.lab.rundir import jsonable
from dedebate.lab.sweep_plan import SweepError


class ChunkedPrograms:
    """The compiled programs of a :class:`ChunkedFn` for ``cfg``'s static fields: init, one
    chunk per distinct spec and finish, each ``jit(vmap(...))`` over the run axis sharded over
    ``devices``, cached like a sweep group's program (a sweep and a run share them)."""

    def __init__(
        self,
        module: Any,
        cfg: Any,
        fn: ChunkedFn,
        impl: Any,
        *,
        devices: list[Any] | None = None,
        info: EvalInfo | None = None,
    ):
        from jax.sharding import NamedSharding, PartitionSpec

        from dedebate.lab.devices import AXIS, run_mesh

        if callable(getattr(module, "inputs", None)):
            raise SweepError(
                f"{getattr(module, 'NAME', module.__name__)}: a chunked point "
                "takes no host inputs (inputs())"
            )
        self.fn, self.impl, self.info = fn, impl, info if info is not None else EvalInfo()
        mesh = run_mesh(devices)
        self.sharding = NamedSharding(mesh, PartitionSpec(AXIS))
        self.n_dev = mesh.size
        self.key = program_key(module, cfg, impl)
        self.options = compile_options(module, devices)

    def _program(self, part: Any, row_fn: Callable[..., Any], size: int) -> Any:
        """The compiled program of ``row_fn`` over ``size`` rows."""
        # The compiled program of ``row_fn`` over ``size`` rows: ``jit(vmap(row_fn))``, or at one
        # row ``row_fn`` on that row unbatched (what a run computes on its own, with scalar
        # hyperparameters: batching them can round float32 training differently).
        import jax

        from dedebate.lab import devices
        from dedebate.programs import jit

        if size > 1:
            return devices._program(
                row_fn, self.sharding, self.info, (self.key, part), self.options
            )
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

        program = jit(one, options=self.options)
        devices._PROGRAMS[key] = (program, holder)
        while len(devices._PROGRAMS) > devices.MAX_PROGRAMS:
            devices._PROGRAMS.popitem(last=False)
        return program

    def place(self, tree: Any, size: int) -> Any:
        """Host rows placed on the run axis.

        Args:
            tree: a pytree of host arrays with the rows on the leading axis.
            size: rows per call (the last row is repeated up to it).

        Returns the pytree of device arrays ``[size, ...]``.
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

        Returns ``batch`` (0: all ``n``) rounded up to a multiple of the devices.
        """
        from dedebate.lab.devices import padded_batch

        return padded_batch(n, self.n_dev, batch)

    def init(self, dynamic: Any, key_data: Any, size: int) -> Any:
        """The initial states of rows, through the init program.

        Returns the states ``[size, ...]`` (device arrays).
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

        Returns ``(state, monitors)`` after the chunk (device arrays with the run axis first).
        """
        return self._chunk_program(dynamic, spec)(dynamic, state)

    def _chunk_program(self, dynamic: Any, spec: Any) -> Any:
        size = _n_rows(dynamic)
        return self._program(("chunk", spec), lambda d, s: self.fn.chunk(d, s, spec), size)

    def chunk_shapes(self, dynamic: Any, state: Any, spec: Any) -> Any:
        """The shapes of a chunk's monitors, from the chunk program's own trace (no second
        trace once the program has run).

        Returns a pytree of ``jax.ShapeDtypeStruct`` (the run axis first).
        """
        return self._chunk_program(dynamic, spec).eval_shape(dynamic, state)[1]

    def finish(self, dynamic: Any, state: Any, monitors: Any) -> dict[str, Any]:
        """The rows' metrics, through the finish program.

        Args:
            dynamic: the rows' dynamic pytree, placed.
            state: the rows' final states.
            monitors: the rows' monitors, every chunk's along the time axis.

        Returns ``{metric: device array [size]}``.
        """
        return self._program("finish", self.fn.finish, _n_rows(dynamic))(dynamic, state, monitors)

    def measured(self, dynamic: Any, finished: Any, rows: int) -> dict[str, np.ndarray]:
        """The metrics of the first ``rows`` rows of a finish program's host output: itself, or
        through the fn's host ``measure`` one row at a time (numpy rows of both)."""
        import jax

        if self.fn.measure is None:
            return finished
        one = [
            self.fn.measure(*jax.tree.map(lambda a, r=r: np.asarray(a)[r], (dynamic, finished)))
            for r in range(rows)
        ]
        return {m: np.array([row[m] for row in one]) for m in one[0]}

    def evaluate(self, dynamic: Any, key_data: Any, *, batch: int = 0) -> dict[str, np.ndarray]:
        """The metrics of rows: per batch of rows, init, every chunk in order and finish (the
        monitors concatenated on the device).

        Args:
            dynamic: host rows of the dynamic pytree (``n`` rows).
            key_data: host rows of key data.
            batch: rows per call (0: all).

        Returns ``{metric: numpy array [n]}``.
        """
        import jax

        n = int(np.shape(key_data)[0])
        size = self.size(n, batch)
        pieces: list[dict[str, np.ndarray]] = []
        local: list[int] = []
        for lo in range(0, n, size):
            host = jax.tree.map(lambda a, lo=lo: np.asarray(a)[lo : lo + size], dynamic)
            state = self.init(host, np.asarray(key_data)[lo : lo + size], size)
            dyn = self.place(host, size)
            mons = []
            for spec in self.fn.chunks:
                state, mon = self.chunk(dyn, state, spec)
                mons.append(mon)
            mon = jax.tree.map(lambda *m: jax.numpy.concatenate(m, axis=self.fn.axis + 1), *mons)
            out = self.finish(dyn, state, mon)
            for shard in getattr(jax.tree.leaves(out)[0], "addressable_shards", ()):
                s = shard.index[0] if shard.index else slice(None)
                local.extend(range(lo + (s.start or 0), lo + (size if s.stop is None else s.stop)))
            pieces.append(self.measured(host, to_host(out), min(size, n - lo)))
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


def train_point(
    module: Any,
    cfg: Any,
    ctx: Any,
    rows: Mapping[str, Any] | None = None,
    *,
    starts: Mapping[str, Any] | None = None,
    desc: str = "training",
    every: int = 1,
    keep: int = 2,
    log_rows: Callable[[str, int, Any], Any] | None = None,
    finish: bool = False,
    devices: list[Any] | None = None,
    info: EvalInfo | None = None,
) -> tuple[Any, dict[str, Any]]:
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
        starts: ``{name: state}``, one row's state (no leading axis) a row starts from instead
            of the init program's at ``ctx.key`` (other initial players, trees, warm starts).
        desc: the progress bar's name.
        every: checkpoint after every ``every``-th chunk (counted over all rows) and the last.
        keep: checkpoints kept.
        log_rows: ``log_rows(name, c, monitors) -> [(step, row)]``: the log rows of chunk ``c``
            of row ``name`` from its monitors (one row's, numpy); steps never go back.
        finish: also compute each row's metrics through the ``finish`` program (a sweep row).
        devices: the devices of the run axis (default: all).
        info: counts the programs' traces and calls.

    Returns ``(chunked, metrics)``: the driver's :class:`~dedebate.lab.driver.Chunked` with
    ``state`` and ``monitors`` by row name, one row's each (no leading axis), and ``{name: {metric:
    float}}`` when ``finish`` (else ``{}``).
    """
    import jax

    from dedebate.lab.driver import run_chunks

    dynamic, fn = module.point(cfg)
    if not isinstance(fn, ChunkedFn):
        raise TypeError(
            f"{module.__name__}.point() returns a plain fn; train_point needs a ChunkedFn"
        )
    rows = {"main": dynamic} if rows is None else dict(rows)
    names = list(rows)
    progs = ChunkedPrograms(
        module, cfg, fn, jax.random.key_impl(ctx.key), devices=devices, info=info
    )
    size = progs.size(1)
    kd = np.asarray(jax.random.key_data(ctx.key))[None]
    host = {k: jax.tree.map(lambda a: canonical(a)[None], d) for k, d in rows.items()}
    placed = {k: progs.place(d, size) for k, d in host.items()}
    starts = dict(starts or {})
    if set(starts) - set(names):
        raise ValueError(
            f"starts of rows {sorted(set(starts) - set(names))}: not among the rows {names}"
        )
    init = {
        k: progs.place(jax.tree.map(lambda a: np.asarray(a)[None], starts[k]), size)
        if k in starts
        else progs.init(host[k], kd, size)
        for k in names
    }
    ax = fn.axis

    def template(name):  # one row's monitors, every chunk's along the time axis
        by_spec = {
            spec: progs.chunk_shapes(placed[name], init[name], spec)
            for spec in dict.fromkeys(fn.chunks)
        }
        return jax.tree.map(
            lambda *s: np.zeros(
                s[0].shape[1 : ax + 1] + (sum(x.shape[ax + 1] for x in s),) + s[0].shape[ax + 2 :],
                s[0].dtype,
            ),
            *[by_spec[spec] for spec in fn.chunks],
        )

    n_c = len(fn.chunks)

    def chunk(state, g):
        name, c = names[g // n_c], g % n_c
        new, mon = progs.chunk(placed[name], state[name], fn.chunks[c])
        return {**state, name: new}, {name: jax.tree.map(lambda a: np.asarray(a)[0], mon)}

    def rows_of(g, _state, mons):
        name = names[g // n_c]
        return log_rows(name, g % n_c, mons[name]) if log_rows is not None else ()

    done = run_chunks(
        ctx,
        desc,
        init,
        chunk,
        n_c * len(names),
        monitors={k: template(k) for k in names},
        axis=ax,
        every=every,
        keep=keep,
        log_rows=rows_of,
    )
    metrics = {}
    if finish:
        for k in names:
            mon = jax.tree.map(lambda a: np.asarray(a)[None], done.monitors[k])
            out = progs.finish(placed[k], done.state[k], progs.place(mon, size))
            out = progs.measured(host[k], to_host(out), 1)
            metrics[k] = {m: np.asarray(v)[0].item() for m, v in out.items()}
    done.state = {
        k: jax.tree.map(lambda a: uncommitted(a, lambda h: h[0]), v)  # row 0
        for k, v in done.state.items()
    }
    return done, metrics


def compile_options(module: Any, devices: list[Any] | None = None) -> dict[str, Any] | None:
    """The experiment's ``COMPILE_OPTIONS`` for the platform of ``devices`` (default: JAX's
    default backend): a dict used as is, or a function of the platform name (``"cpu"``,
    ``"gpu"``, ...) returning a dict or None (options that pay off on one backend only).

    Args:
        module: the experiment module.
        devices: the devices the program runs on (default: JAX's default backend).
    """
    import jax

    options = getattr(module, "COMPILE_OPTIONS", None)
    if not callable(options):
        return options
    platform = devices[0].platform if devices else jax.default_backend()
    return options(platform)


def program_key(module: Any, cfg: Any, impl: Any) -> tuple:
    """What the compiled program of a group depends on: the experiment module and the static
    part of its Config (by the contract, ``fn`` reads only static fields). Dynamic fields are
    dropped, so every group with equal static fields shares one program.

    Args:
        module: the experiment module.
        cfg: a point's Config.
        impl: the PRNG key implementation of the rows' keys.
    """
    dynamic = set(getattr(module, "DYNAMIC", ()) or ())
    static = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in dynamic}
    return (_Same(module), json.dumps(jsonable(static), sort_keys=True), str(impl))


class _Same:
    """An object in a cache key, equal only to itself and kept alive by the key (so no later
    object can take its id, and with it its program, as a bare ``id`` would let one)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


def canonical(x: Any) -> np.ndarray:
    """An array with JAX's canonical dtype (float64 -> float32 unless x64 is enabled).

    Returns the numpy array, converted to the dtype a JAX program would see.
    """
    import jax

    a = np.asarray(x)
    return a.astype(jax.dtypes.canonicalize_dtype(a.dtype))
