"""Experiment parameters declared once: type, default, doc and allowed range in one line.

An experiment's ``Config`` declares each field as ``T: int = param(16, "steps", ge=4, le=18)``:
the annotation is the type, :func:`param` holds the default, the doc line and the range (for a
tuple field the bounds apply to each item, ``min_len`` / ``max_len`` to its length). The lab
checks the range when a config is resolved (one line naming the key, the value and what is
allowed) and ``dedebate config NAME`` prints it. Every integer field states a finite maximum, so
a huge count fails in one line instead of allocating. :func:`config_dataclass` makes the class a
frozen dataclass whose ``__init__`` checks the ranges too, then runs the class's own
``__post_init__`` (checks between fields). Details: docs/lab.md, "Experiment parameters".
"""

from __future__ import annotations

import dataclasses
import fractions
import functools
import math
from collections.abc import Sequence
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
RANGE_KEY = "range"


@dataclasses.dataclass(frozen=True)
class Range:
    """The allowed values of a field (of each item, for a tuple field) and a tuple's length."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[Any, ...] | None = None
    multiple_of: int | None = None
    min_len: int | None = None
    max_len: int | None = None
    distinct: bool = False

    @property
    def upper(self) -> float:
        """The largest allowed value (``inf`` when unbounded above).

        Returns the smallest of ``le``, ``lt`` and the largest numeric choice.
        """
        bounds = [b for b in (self.le, self.lt) if b is not None]
        if self.choices is not None:
            nums = [c for c in self.choices if _is_number(c)]
            if nums:
                bounds.append(max(nums))
        return min(bounds) if bounds else math.inf

    def describe_value(self, kind: str) -> str:
        """One allowed value in words: ``"an integer in [4, 18]"``, ``"one of 'a'"``, ...

        Args:
            kind: ``"int"``, ``"float"`` or another kind (``"str"``, ``"bool"``, ``"other"``).
        """
        if self.choices is not None:
            return "one of " + ", ".join(_fmt(c) for c in self.choices)
        kinds = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a text"}
        what = kinds.get(kind, "a value")
        if self.multiple_of == 2 and kind == "int":
            what = "an even integer"
        elif self.multiple_of and kind == "int":
            what = f"an integer multiple of {self.multiple_of}"
        lo = (
            (self.ge, "[")
            if self.ge is not None
            else (self.gt, "(")
            if self.gt is not None
            else None
        )
        hi = (
            (self.le, "]")
            if self.le is not None
            else (self.lt, ")")
            if self.lt is not None
            else None
        )
        if lo and hi:
            return f"{what} in {lo[1]}{_fmt(lo[0])}, {_fmt(hi[0])}{hi[1]}"
        if kind == "float":
            what = "a finite number" if what == "a number" else what
        if lo:
            return f"{what} {'>=' if lo[1] == '[' else '>'} {_fmt(lo[0])}"
        if hi:
            return f"{what} {'<=' if hi[1] == ']' else '<'} {_fmt(hi[0])}"
        return what

    def describe_len(self) -> str:
        """A tuple's allowed length in words (``"1 to 16 items"``).

        Returns the phrase, or ``""`` when the length is free.
        """
        lo, hi = self.min_len or 0, self.max_len
        if hi is None:
            text = f"at least {lo} item{'s' * (lo != 1)}" if lo else ""
        elif lo == hi:
            text = f"exactly {lo} item{'s' * (lo != 1)}"
        else:
            text = f"{lo} to {hi} items"
        return f"{text}, distinct" if self.distinct and text else text

    def value_ok(self, value: Any, kind: str) -> bool:
        """Whether one value (one item, for a tuple field) is allowed.

        Args:
            value: the value.
            kind: ``"int"``, ``"float"`` or another kind (only ``choices`` is checked then).

        Returns True when the value has the kind, is a listed choice and lies within the bounds.
        """
        if kind == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
            return False
        if kind == "float":
            if not _is_number(value) or not math.isfinite(value):
                return False
        if self.choices is not None:
            return any(type(c) is type(value) and c == value for c in self.choices) or (
                kind == "float" and value in self.choices
            )
        if kind not in ("int", "float"):
            return True
        if self.ge is not None and not value >= self.ge:
            return False
        if self.gt is not None and not value > self.gt:
            return False
        if self.le is not None and not value <= self.le:
            return False
        if self.lt is not None and not value < self.lt:
            return False
        return not (self.multiple_of and value % self.multiple_of)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _fmt(x: Any) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    if isinstance(x, float) and math.isfinite(x) and len(repr(x)) > 8:
        fr = fractions.Fraction(x).limit_denominator(12)
        if float(fr) == x:  # 2 / 3 reads as 2/3
            return f"{fr.numerator}/{fr.denominator}"
    return repr(x)


def param(
    default: Any,
    doc: str,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: Sequence[Any] | None = None,
    multiple_of: int | None = None,
    min_len: int | None = None,
    max_len: int | None = None,
    distinct: bool = True,
) -> Any:
    """A documented, range-checked ``Config`` field (a ``dataclasses.field``).

    On a tuple field the bounds, ``choices`` and ``multiple_of`` apply to every item, and
    ``min_len``/``max_len`` bound its length.

    Args:
        default: the default value, immutable (tuples, not lists).
        doc: what the field is, one line.
        ge: inclusive lower bound.
        gt: exclusive lower bound.
        le: inclusive upper bound.
        lt: exclusive upper bound.
        choices: the allowed values.
        multiple_of: e.g. 2 for an even count.
        min_len: a tuple's fewest items.
        max_len: a tuple's most items.
        distinct: a tuple's items must differ (default: a repeated value would repeat its
            rows, and repeated Monte-Carlo rows shrink the family's Bonferroni level); False for
            a list whose items may repeat (layer widths).

    Returns the ``dataclasses.field`` with the doc and the :class:`Range` in its metadata.
    """
    rng = Range(
        ge,
        gt,
        le,
        lt,
        tuple(choices) if choices is not None else None,
        multiple_of,
        min_len,
        max_len,
        distinct,
    )
    return dataclasses.field(default=default, metadata={"doc": doc, RANGE_KEY: rng})


def field_range(f: dataclasses.Field) -> Range | None:
    """The :class:`Range` a field was declared with."""
    return f.metadata.get(RANGE_KEY) if f.metadata else None


def _kind(tp: Any) -> str:
    return {int: "int", float: "float", str: "str", bool: "bool"}.get(tp, "other")


def item_type(tp: Any) -> tuple[bool, Any]:
    """Whether an annotation is a sequence, and the annotation of one value or item.

    Args:
        tp: a field annotation such as ``tuple[int, ...]``.

    Returns ``(is_sequence, item annotation)``.
    """
    import typing

    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        args = typing.get_args(tp)
        return True, (args[0] if args else Any)
    return False, tp


def describe_range(rng: Range, tp: Any) -> str:
    """The allowed values in words, as ``dedebate config`` prints them.

    Returns ``"an integer in [4, 18]"``, or ``"each ...; LENGTH"`` for a tuple.
    """
    seq, inner = item_type(tp)
    value = rng.describe_value(_kind(inner))
    if not seq:
        return value
    length = rng.describe_len()
    return f"each {value}" + (f"; {length}" if length else "")


def check_field(name: str, rng: Range, tp: Any, value: Any, key: str | None = None) -> None:
    """Check one field's value against its range.

    Args:
        name: the field's name.
        rng: its range.
        tp: its annotation.
        value: the value.
        key: the name the message uses (default ``name``, e.g. ``params.T``).

    Raises:
        ValueError: ``"KEY=VALUE: must be ..."``; for a tuple the message shows the whole list
            and names the first bad item.
    """
    key = key or name
    seq, inner = item_type(tp)
    kind = _kind(inner)
    if not seq:
        if not rng.value_ok(value, kind):
            raise ValueError(f"{key}={_show(value)}: must be {rng.describe_value(kind)}")
        return
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"{key}={_show(value)}: must be a list")
    n = len(value)
    if (rng.min_len is not None and n < rng.min_len) or (
        rng.max_len is not None and n > rng.max_len
    ):
        raise ValueError(f"{key}={_show(list(value))}: must list {rng.describe_len()}")
    for i, v in enumerate(value):
        if not rng.value_ok(v, kind):
            raise ValueError(
                f"{key}={_show(list(value))}: each item must be "
                f"{rng.describe_value(kind)} (item {i} is {_show(v)})"
            )
        if rng.distinct and v in value[:i]:
            raise ValueError(
                f"{key}={_show(list(value))}: the items must be distinct (item {i} repeats "
                f"item {list(value).index(v)})"
            )


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@functools.cache
def ranged_fields(cls: type) -> tuple[tuple[str, Range, Any], ...]:
    """Every :func:`param` field of a dataclass (cached per class).

    Returns ``(name, range, annotation)`` per ranged field, in declaration order.
    """
    import typing

    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, rng, hints.get(f.name, Any))
        for f in dataclasses.fields(cls)
        if (rng := field_range(f)) is not None
    )


def check_ranges(obj: Any) -> None:
    """Check every :func:`param` field of a dataclass instance.

    Raises:
        ValueError: the first field outside its range.
    """
    cls: type = type(obj)  # mypy: a type[Any] is not Hashable for the cache
    for name, rng, tp in ranged_fields(cls):
        check_field(name, rng, tp, getattr(obj, name))


@dataclass_transform(frozen_default=True)
def config_dataclass(cls: type[T]) -> type[T]:
    """``@dataclasses.dataclass(frozen=True)`` whose ``__init__`` also checks every range.

    The :func:`param` ranges are checked before the class's own ``__post_init__``
    (relational checks) runs.
    """
    own = cls.__dict__.get("__post_init__")

    def __post_init__(self):
        check_ranges(self)
        if own is not None:
            own(self)

    __post_init__.__doc__ = own.__doc__ if own is not None else None
    setattr(cls, "__post_init__", __post_init__)  # noqa: B010 - a class mypy sees as ``type``
    return dataclasses.dataclass(frozen=True)(cls)
