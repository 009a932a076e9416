"""The plan of a sweep: its grid of points, their static groups, seeds and point ids.

A ``sweep:`` block lists ``seeds`` and ``axes`` (params field -> values); every combination of
axis values is a :class:`Point`, and every point runs once per seed. The points are split into
static :class:`Group` s, one per combination of values of the axes not in the experiment's
``DYNAMIC``: each group is one compiled program. A point's id is two 31-bit words of the sha256
of its resolved params, so a row's key (:func:`point_key`) depends only on the experiment, the
seed and the point's own params. The plan is lazy: it counts its points and groups from the
axes' lengths, and a point's Config is built when it is read (a group's, when the group runs), so
a plan of 10^6 rows costs nothing up front. More: docs/lab.md, "Sweeps".
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dedebate.lab.config import ConfigError, RunConfig, build_dataclass
from dedebate.lab.context import experiment_key
from dedebate.lab.rundir import jsonable

RESERVED = ("point", "seed", "group")


class SweepError(ValueError):
    """A sweep that cannot run as declared (one line naming the experiment and what is wrong)."""


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
    """A planned sweep: its axes (dynamic and static), seeds, points and static groups (lazy
    sequences from :func:`plan`); ``vmapped`` when the experiment is sweepable (defines
    ``point``)."""

    experiment: str
    axes: dict[str, list[Any]]
    dynamic_axes: tuple[str, ...]
    static_axes: tuple[str, ...]
    seeds: tuple[int, ...]
    points: Sequence[Point]
    groups: Sequence[Group]
    vmapped: bool

    @property
    def rows(self) -> int:
        """The number of rows of the sweep."""
        return len(self.points) * len(self.seeds)


def point_words(params: Any) -> tuple[int, int]:
    """The point id: two 31-bit words of sha256(canonical JSON of the resolved params).

    Returns ``(w0, w1)``, each in ``[0, 2**31)``.
    """
    text = json.dumps(
        jsonable(dataclasses.asdict(params)), sort_keys=True, separators=(",", ":"), allow_nan=True
    )
    h = hashlib.sha256(text.encode()).digest()
    return (
        int.from_bytes(h[:4], "little") & 0x7FFFFFFF,
        int.from_bytes(h[4:8], "little") & 0x7FFFFFFF,
    )


def point_key(experiment: str, seed: int, params: Any):
    """The key of a (point, seed) row, computed alone (equal to the key inside any sweep).

    Returns ``fold_in(fold_in(root(seed), w0), w1)``, a typed PRNG key.
    """
    import jax

    w0, w1 = point_words(params)
    return jax.random.fold_in(jax.random.fold_in(experiment_key(seed, experiment), w0), w1)


def is_sweepable(module: Any) -> bool:
    """Whether an experiment's rows are vmapped (it defines ``point``).

    Returns True if ``module.point`` is callable.
    """
    return callable(getattr(module, "point", None))


class _Grid:
    """The points of a sweep's axes, built on demand: point ``i`` is the ``i``-th combination of
    the axis values (the last axis fastest), its Config built and validated when it is read."""

    def __init__(self, cls: type, base: dict[str, Any], axes: dict[str, list[Any]]):
        self.cls, self.base, self.axes = cls, base, axes
        self.sizes = [len(v) for v in axes.values()]

    def __len__(self) -> int:
        return math.prod(self.sizes)

    def point(self, i: int) -> Point:
        """Point ``i`` with its Config (:class:`SweepError` where the combination is invalid)."""
        values, rest = {}, i
        for (a, vs), n, stride in zip(self.axes.items(), self.sizes, self._strides()):
            values[a] = vs[(rest // stride) % n]
        try:
            pcfg = build_dataclass(self.cls, {**self.base, **values}, "params")
        except ConfigError as err:
            raise SweepError(f"sweep point {i} ({describe_values(values)}): {err}") from None
        values = {a: getattr(pcfg, a) for a in values}  # coerced (lists -> tuples, ints -> floats)
        return Point(i, values, pcfg, point_words(pcfg))

    def _strides(self) -> list[int]:
        return [math.prod(self.sizes[k + 1 :]) for k in range(len(self.sizes))]

    def index(self, picks: Mapping[str, int]) -> int:
        """The index of the point with value number ``picks[a]`` of every axis ``a``."""
        return sum(picks[a] * st for a, st in zip(self.axes, self._strides()))


class LazyPoints(Sequence):
    """Every point of a sweep, each built when read (a Sequence: ``len`` costs nothing)."""

    def __init__(self, grid: _Grid):
        self._grid = grid

    def __len__(self) -> int:
        return len(self._grid)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(f"point {i}: the sweep has {len(self)}")
        return self._grid.point(i % len(self))


class LazyGroups(Sequence):
    """The static groups of a sweep, one per combination of the static axes' values (in the
    order of their first point); a group's points are built when the group is read."""

    def __init__(self, grid: _Grid, static_axes: tuple[str, ...]):
        self._grid, self._static = grid, static_axes
        self._dynamic = [a for a in grid.axes if a not in static_axes]
        self._sizes = [len(grid.axes[a]) for a in static_axes]

    def __len__(self) -> int:
        return math.prod(self._sizes)

    def __getitem__(self, g):
        if isinstance(g, slice):
            return [self[k] for k in range(*g.indices(len(self)))]
        if not -len(self) <= g < len(self):
            raise IndexError(f"group {g}: the sweep has {len(self)}")
        g %= len(self)
        picks, rest = {}, g
        for a, n in zip(reversed(self._static), reversed(self._sizes)):
            picks[a], rest = rest % n, rest // n
        dyn = [range(len(self._grid.axes[a])) for a in self._dynamic]
        points = tuple(
            self._grid.point(self._grid.index({**picks, **dict(zip(self._dynamic, c))}))
            for c in itertools.product(*dyn)
        )
        return Group(g, {a: points[0].values[a] for a in self._static}, points)


def plan(module: Any, cfg: RunConfig) -> SweepPlan:
    """The grid of ``cfg.sweep`` (axes in the order written, the last varying fastest), its
    static groups and seeds. Lazy: points and groups are counted from the axes' lengths and a
    point's Config is built and validated when it is read (a group's points, when the group is;
    each axis value alone was checked when the config was resolved).

    Args:
        module: the experiment module.
        cfg: the resolved run config with a ``sweep`` block.

    Returns the :class:`SweepPlan` (its ``points`` and ``groups`` lazy sequences). Raises
    :class:`SweepError` for an axis that clashes with an index column or a ``DYNAMIC`` name that is
    no Config field; reading an invalid point raises it too.
    """
    if cfg.sweep is None:
        raise SweepError(f"{cfg.experiment}: the config has no sweep block")
    name = cfg.experiment
    sweep = cfg.sweep
    axes = {k: list(v) for k, v in sweep.axes.items()}
    fields = [f.name for f in dataclasses.fields(type(cfg.params))]
    clash = [a for a in axes if a in RESERVED]
    if clash:
        raise SweepError(
            f"sweep.axes.{clash[0]}: the name is a sweep.csv column "
            f"({', '.join(RESERVED)}); rename the params field"
        )
    vmapped = is_sweepable(module)
    dynamic = tuple(getattr(module, "DYNAMIC", ()) or ()) if vmapped else ()
    unknown = [d for d in dynamic if d not in fields]
    if unknown:
        raise SweepError(
            f"{name}.DYNAMIC names {unknown[0]!r}, which is not a Config field "
            f"(fields: {', '.join(fields)})"
        )
    dyn_axes = tuple(a for a in axes if a in dynamic)
    static_axes = tuple(a for a in axes if a not in dynamic)
    grid = _Grid(type(cfg.params), dataclasses.asdict(cfg.params), axes)
    return SweepPlan(
        name,
        axes,
        dyn_axes,
        static_axes,
        tuple(sweep.seed_list(cfg.seed)),
        LazyPoints(grid),
        LazyGroups(grid, static_axes),
        vmapped,
    )


def describe_values(values: Mapping[str, Any]) -> str:
    """A point's axis values in words, for error messages.

    Returns ``"a=1, b='x'"``, or ``"no axes"``.
    """
    return ", ".join(f"{k}={v!r}" for k, v in values.items()) or "no axes"
