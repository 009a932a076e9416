"""Checking configuration values against dataclass annotations, with one-line errors.

:func:`coerce` checks one value against a field's annotation (bool, int, float, str, Literal,
unions, lists, tuples, dicts, nested dataclasses) and returns it in the field's own type;
:func:`build_dataclass` builds a frozen dataclass from a mapping, rejecting unknown keys, checking
each field's declared range (:func:`dedebate.lab.params.param`) as it is read and turning a
``__post_init__`` ``ValueError`` into a :class:`ConfigError`. Every error is one line that names
the full key, the value and what is allowed (``params.n=0: must be >= 1``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from dedebate.lab.params import check_field, field_range

FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32: a config float beyond it overflows the computations to inf and NaN."""
FLOAT32_TINY = 1.1754943508222875e-38
"""float32's smallest normal number: a config float nearer 0 computes as 0 (or a denormal that
accelerators flush to 0), so it is refused rather than silently run as 0."""
CORE_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
"""A float as YAML 1.2's core schema writes one (ASCII digits only)."""


class ConfigError(ValueError):
    """A bad configuration: one line naming the key, the value and what is allowed."""


class _NumberError(ConfigError):
    """A number of the right type that float32 cannot hold (reported even inside a union)."""


def did_you_mean(name: Any, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name nearest a misspelt ``name``, else ``""``."""
    near = difflib.get_close_matches(str(name), list(known), n=1)
    return f" (did you mean '{near[0]}'?)" if near else ""


def describe_type(tp: Any) -> str:
    """What a value of annotation ``tp`` looks like, in words, for error messages.

    Args:
        tp: a type annotation (``int``, ``float | None``, ``Literal["a", "b"]``, a dataclass, ...).

    Returns a phrase such as ``"an integer"``, ``"a number or null"``, ``"one of 'a', 'b'"``.
    """
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return "any value"
    if tp is type(None):
        return "null"
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [describe_type(a) for a in args if a is not type(None)]
        text = " or ".join(parts)
        return text + " or null" if type(None) in args else text
    if origin in (tuple, list):
        if origin is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
            return (
                f"a list of {len(args)} items [" + ", ".join(describe_type(a) for a in args) + "]"
            )
        inner = describe_type(args[0]) if args else "any value"
        return f"a list (each {inner})"
    if origin is dict:
        return "a mapping"
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return f"a mapping of {tp.__name__} fields"
    return getattr(tp, "__name__", str(tp))


def _fail(key: str, value: Any, tp: Any) -> ConfigError:
    """The error for a value that does not fit annotation ``tp``: ``key=value: expected ...``."""
    return ConfigError(f"{key}={show_value(value)}: expected {describe_type(tp)}")


def show_value(value: Any) -> str:
    """A value as an error message shows it: its ``repr``, cut to 80 characters.

    Returns ``repr(value)``, or its first 77 characters followed by ``...``.
    """
    if isinstance(value, int) and value.bit_length() > 256:  # repr fails past 4,300 digits
        return f"<an integer of about {value.bit_length() * 30103 // 100000 + 1} digits>"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against annotation ``tp``; return it in the field's own type.

    Ints are accepted for floats (and numeric strings such as ``"1e-3"``); a float must be
    finite, at most ``FLOAT32_MAX`` in magnitude and 0 or at least ``FLOAT32_TINY`` (float32's
    smallest normal number) in magnitude; lists are accepted for tuples. Bools are never ints. A
    mapping for a dataclass annotation is built with :func:`build_dataclass`; an annotation it
    cannot check passes the value through unchanged.

    Args:
        value: the value as read from YAML or the command line.
        tp: the field's annotation.
        key: the full dotted key, for the error message (``params.xs[2]``).

    Returns the value converted to the annotation's type (floats, tuples, dataclasses).

    Raises:
        ConfigError: ``key=value: expected <describe_type(tp)>`` when the value does not fit.
    """
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any or tp is object:
        return value
    if tp is type(None):
        if value is None:
            return None
        raise _fail(key, value, tp)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _fail(key, value, tp)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _fail(key, value, tp)
    if tp is float:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value) if abs(value) <= FLOAT32_MAX else math.inf
        elif isinstance(value, str) and CORE_FLOAT.match(value):
            with contextlib.suppress(ValueError):  # .inf and .nan are not Python's spelling
                number = float(value)
        if number is None:
            raise _fail(key, value, tp)
        if not abs(number) <= FLOAT32_MAX:
            raise _NumberError(
                f"{key}={show_value(value)}: expected a finite number of at most "
                f"{FLOAT32_MAX:.7g} in magnitude (computations are float32)"
            )
        if 0 < abs(number) < FLOAT32_TINY:
            raise _NumberError(
                f"{key}={show_value(value)}: below float32's smallest normal number "
                f"({FLOAT32_TINY:.2g}), so it computes as 0"
            )
        return number
    if tp is str:
        if isinstance(value, str):
            return value
        raise _fail(key, value, tp)
    if origin is Literal:
        for a in args:
            if type(a) is type(value) and a == value:
                return a
        raise _fail(key, value, tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise _fail(key, value, tp)
        number_error = None  # a number float32 cannot hold says so, not "expected ... or ..."
        for a in args:
            if a is type(None):
                continue
            if isinstance(value, Mapping) and isinstance(a, type) and dataclasses.is_dataclass(a):
                return coerce(value, a, key)  # a section (e.g. sweep): its own errors name keys
            try:
                return coerce(value, a, key)
            except _NumberError as err:
                number_error = number_error or err
            except ConfigError:
                continue
        raise number_error or _fail(key, value, tp)
    if origin in (tuple, list) or tp in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise _fail(key, value, tp)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise _fail(key, value, tp)
            items = [coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args))]
        else:
            inner = args[0] if args else Any
            items = [coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise _fail(key, value, tp)
        vt = args[1] if len(args) == 2 else Any
        return {k: coerce(v, vt, f"{key}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise _fail(key, value, tp)
        return build_dataclass(tp, value, key)
    # An annotation we do not know how to check: accept the value as given.
    return value


def field_types(cls: type) -> dict[str, Any]:
    """The resolved annotations of a dataclass's fields (``Any`` for all if they cannot resolve)."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable forward references: no checking
        return {f.name: Any for f in dataclasses.fields(cls)}


def init_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a dataclass that its ``__init__`` takes (the keys a config may set).

    Returns its ``init=True`` fields, in declaration order.
    """
    return [f for f in dataclasses.fields(cls) if f.init]


def build_dataclass(cls: type, raw: Mapping[str, Any], prefix: str) -> Any:
    """Build the frozen dataclass ``cls`` from a mapping, rejecting unknown keys and bad types.

    ``ValueError`` raised by the class's ``__post_init__`` (``"name=value: what is allowed"``)
    becomes a :class:`ConfigError` naming the full key ``prefix.name``.

    Args:
        cls: the dataclass to build.
        raw: field name -> value (None means no fields given).
        prefix: the dotted key of this section (``""`` at the top level, ``"params"``).

    Returns an instance of ``cls``.

    Raises:
        ConfigError: an unknown or missing key, a bad type, a value outside its range, or a
            failed check between fields.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{prefix}={show_value(raw)}: expected a mapping of {cls.__name__} fields"
        )
    fields = {f.name: f for f in init_fields(cls)}
    hints = field_types(cls)
    values = {}
    for name, value in raw.items():
        key = f"{prefix}.{name}" if prefix else str(name)
        if name not in fields:
            allowed = ", ".join(fields) or "(none)"
            raise ConfigError(
                f"unknown key '{key}'{did_you_mean(name, fields)}; allowed keys here: {allowed}"
            )
        values[name] = coerce(value, hints.get(name, Any), key)
        rng = field_range(fields[name])
        if rng is not None:
            try:
                check_field(name, rng, hints.get(name, Any), values[name], key)
            except ValueError as err:
                raise ConfigError(str(err)) from None
    missing = [
        n
        for n, f in fields.items()
        if n not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        key = f"{prefix}.{missing[0]}" if prefix else missing[0]
        raise ConfigError(f"missing key '{key}': expected {describe_type(hints.get(missing[0]))}")
    try:
        return cls(**values)
    except ValueError as err:
        raise _range_error(err, prefix, fields) from None
    except TypeError as err:
        raise ConfigError(f"{prefix or cls.__name__}: {err}") from None


def _range_error(err: ValueError, prefix: str, fields: Mapping[str, Any]) -> ConfigError:
    """A ``__post_init__`` ValueError as a ConfigError whose key is prefixed by ``prefix``."""
    msg = " ".join(str(err).split()) or type(err).__name__
    m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", msg)
    if m and m.group(1) in fields:
        return ConfigError(f"{prefix}.{msg}" if prefix else msg)
    return ConfigError(f"{prefix}: {msg}" if prefix else msg)
