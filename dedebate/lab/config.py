"""Run configuration: YAML + command-line overrides -> a typed, frozen, validated ``RunConfig``.

A config file (``configs/NAME.yaml``) has the top-level keys of :class:`RunConfig`; its ``params``
section holds fields of the experiment's own ``Config`` dataclass. :func:`resolve` applies the
``key.sub=value`` overrides, then builds ``params`` from, each overriding the ones before: the
``Config`` defaults, the size preset ``SIZES[size]``, the file's ``params``, the command line
(docs/lab.md, "Configs"). Ranges are checked field by field before anything is allocated, and
every bad input raises :class:`ConfigError` with one line naming the full key, the value and what
is allowed. The config classes live in :mod:`.config_schema`, value checking in
:mod:`.config_types`, the safe YAML loader in :mod:`.config_yaml` (all re-exported here), the
rendered documentation in :mod:`.config_docs`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import yaml

from dedebate.lab.config_schema import (  # noqa: F401  (re-exported)
    KEY_SEGMENT,
    SIZES,
    SWEEP_TRACKING,
    TRACKING_MODES,
    RunConfig,
    SweepConfig,
    TrackingConfig,
    TrackingMode,
    config_hash_of,
    plain,
    sweep_hash_of,
)
from dedebate.lab.config_types import (  # noqa: F401  (re-exported)
    ConfigError,
    build_dataclass,
    coerce,
    describe_type,
    did_you_mean,
    init_fields,
    show_value,
)
from dedebate.lab.config_yaml import (  # noqa: F401  (re-exported)
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    dump_yaml_text,
    load_yaml_text,
    parse_yaml,
    read_yaml,
)

# ----------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """Split a command-line override ``key.sub=value`` into its key path and parsed value.

    The value is parsed as YAML (``params.n=10`` -> 10, ``params.xs=[1,2]`` -> a list; an empty
    value is None). ``"params.n=10"`` -> ``(("params", "n"), 10)``.

    Returns ``(key parts, value)``.

    Raises:
        ConfigError: no ``=``, a key that is not dotted names, or a value that is not YAML.
    """
    if "=" not in text:
        raise ConfigError(
            f"malformed override {text!r}: expected key.sub=value (for example params.n=10)"
        )
    key, _, raw_value = text.partition("=")
    key = key.strip()
    parts = tuple(key.split("."))
    if not key or not all(KEY_SEGMENT.match(p) for p in parts):
        raise ConfigError(
            f"malformed override {text!r}: the key must be dotted names such as params.n"
        )
    try:
        value = parse_yaml(raw_value) if raw_value.strip() else None
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(
            f"malformed override {show_value(text)}: value is not valid YAML ({problem})"
        ) from None
    return parts, value


def apply_override(raw: dict[str, Any], parts: tuple[str, ...], value: Any) -> None:
    """Set ``raw[p0][p1]...[pn] = value`` in place, creating missing sections.

    Raises:
        ConfigError: a key that descends into a value that is not a section.
    """
    node = raw
    for i, p in enumerate(parts[:-1]):
        child = node.get(p)
        if child is None:
            child = node[p] = {}
        elif not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(
                f"unknown key '{'.'.join(parts)}': '{where}' is a value, not a section"
            )
        node = child
    node[parts[-1]] = value


def resolve(
    raw: Mapping[str, Any],
    experiments: Mapping[str, Any],
    overrides: list[str] | tuple[str, ...] = (),
) -> RunConfig:
    """Validate a raw config mapping (plus overrides) against the registered experiments.

    The overrides are applied first; ``params`` is then built from the ``Config`` defaults, the
    size preset, the file's ``params`` and the overrides, each overriding the ones before. A
    ``sweep`` block's axes are checked value by value (``sweep.axes.FIELD[i]`` in errors).

    Args:
        raw: the config as read from YAML (not changed).
        experiments: registry name -> experiment module.
        overrides: ``key.sub=value`` strings from the command line.

    Returns the frozen, validated :class:`RunConfig` with ``params`` the experiment's ``Config``.

    Raises:
        ConfigError: the first bad key or value, in one line.
    """
    data: dict[str, Any] = _deepcopy_dict(raw)
    for text in overrides:
        parts, value = parse_override(text)
        apply_override(data, parts, value)

    allowed = [f.name for f in init_fields(RunConfig)]
    for k in data:
        if k not in allowed:
            cls = getattr(experiments.get(str(data.get("experiment"))), "Config", None)
            fields: set[str] = set()
            if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                fields = {f.name for f in init_fields(cls)}
            hint = (
                f" (a parameter: write params.{k}=...)" if k in fields else did_you_mean(k, allowed)
            )
            raise ConfigError(
                f"unknown key '{k}'{hint}; allowed top-level keys: {', '.join(allowed)}"
            )

    names = sorted(experiments)
    available = ", ".join(names) if names else "(none registered)"
    if "experiment" not in data or data["experiment"] in (None, ""):
        raise ConfigError(f"missing key 'experiment': expected one of {available}")
    name = data["experiment"]
    if not isinstance(name, str) or name not in experiments:
        raise ConfigError(
            f"experiment={show_value(name)}: unknown experiment; registered: {available}"
        )
    module = experiments[name]

    top = {k: v for k, v in data.items() if k != "params"}
    top.setdefault("tracking", {})
    base = build_dataclass(RunConfig, top, "")

    params_raw = data.get("params")
    if params_raw is None:
        params_raw = {}
    if not isinstance(params_raw, dict):
        raise ConfigError(
            f"params={show_value(params_raw)}: expected a mapping of {name} Config fields"
        )
    sizes = getattr(module, "SIZES", {}) or {}
    size_over = sizes.get(base.size, {}) or {}
    # Config defaults < the size preset < the file < the command line (already applied to data).
    merged = {**size_over, **params_raw}
    cfg_cls = getattr(module, "Config", None)
    if not (isinstance(cfg_cls, type) and dataclasses.is_dataclass(cfg_cls)):
        raise ConfigError(
            f"experiment {name!r} has no Config dataclass (see dedebate/lab/experiment.py)"
        )
    params = build_dataclass(cfg_cls, merged, "params")
    if base.sweep is not None:
        vmapped = callable(getattr(module, "point", None))  # rows of a group share one call
        dynamic = tuple(getattr(module, "DYNAMIC", ()) or ()) if vmapped else ()
        _check_sweep_axes(base.sweep, cfg_cls, merged, name, dynamic)
        base.sweep.seed_list(base.seed)
    return dataclasses.replace(base, params=params)


def _check_sweep_axes(
    sweep: SweepConfig, cfg_cls: type, merged: Mapping[str, Any], name: str, dynamic=()
) -> None:
    """Check each axis: a params field, valid values, one list length on a ``dynamic`` axis."""
    # Each axis names a params field, and each of its values makes a valid Config on its own (errors
    # name the value as ``sweep.axes.FIELD[i]``). Combinations are checked when the sweep is planned
    # (``dedebate.lab.sweep.plan``).
    fields = [f.name for f in init_fields(cfg_cls)]
    for axis, values in sweep.axes.items():
        if axis not in fields:
            raise ConfigError(
                f"unknown key 'sweep.axes.{axis}': not a params field of {name}"
                f"{did_you_mean(axis, fields)}; "
                f"allowed: {', '.join(fields) or '(none)'}"
            )
        if not values:
            raise ConfigError(f"sweep.axes.{axis}=[]: must list at least one value")
        seen: list = []  # the values as the Config holds them (6 and 6.0 are one value)
        for i, value in enumerate(values):
            try:
                built = getattr(build_dataclass(cfg_cls, {**merged, axis: value}, "params"), axis)
            except ConfigError as err:
                msg = str(err)
                where = f"params.{axis}"
                if msg.startswith(where):
                    msg = f"sweep.axes.{axis}[{i}]" + msg[len(where) :]
                else:
                    msg = f"sweep.axes.{axis}[{i}]={show_value(value)}: {msg}"
                raise ConfigError(msg) from None
            if built in seen:
                raise ConfigError(
                    f"sweep.axes.{axis}[{i}]={show_value(value)}: repeats "
                    f"sweep.axes.{axis}[{seen.index(built)}]; an axis lists distinct values"
                )
            seen.append(built)
            if axis in dynamic and isinstance(built, tuple) and len(built) != len(seen[0]):
                raise ConfigError(
                    f"sweep.axes.{axis}[{i}]={show_value(value)}: {len(built)} items, but "
                    f"sweep.axes.{axis}[0] has {len(seen[0])}; the values of a dynamic axis "
                    "(one compiled call for all) must have one length"
                )


def load_config(
    path: str | os.PathLike,
    experiments: Mapping[str, Any],
    overrides: list[str] | tuple[str, ...] = (),
) -> RunConfig:
    """``configs/NAME.yaml`` + ``key.sub=value`` overrides -> a validated :class:`RunConfig`.

    Args:
        path: the config file.
        experiments: registry name -> experiment module.
        overrides: ``key.sub=value`` strings from the command line.

    Returns the resolved config (:func:`resolve`).
    """
    return resolve(read_yaml(path), experiments, overrides)


def default_config(module: Any, size: str = "default", seed: int = 0, **top: Any) -> RunConfig:
    """The embedded default config of an experiment module at ``size`` (used by reproduce).

    Args:
        module: the experiment module.
        size: ``"quick"``, ``"default"`` or ``"full"``.
        seed: the root seed.
        **top: further top-level keys (``output_dir``, ``tracking``, ...).

    Returns the resolved config with the ``Config`` defaults and the size preset.
    """
    raw = {"experiment": module.NAME, "seed": seed, "size": size, **top}
    return resolve(raw, {module.NAME: module})


def _deepcopy_dict(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {k: _deepcopy_dict(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_deepcopy_dict(v) for v in x]
    return x


def dump_yaml(cfg: RunConfig) -> str:
    """The resolved config as YAML (``load_config`` of this text gives back ``cfg``)."""
    return dump_yaml_text(cfg.to_dict(), sort_keys=False, default_flow_style=False)


def as_stored(cfg: RunConfig, folder: str | os.PathLike) -> RunConfig:
    """``cfg`` for a folder it resumes, with ``resume`` as the folder's config.yaml had it: the
    config.yaml and W&B config it records. ``--resume`` is the command's, so running that file
    again starts a new run as before (with ``resume: true`` it printed the finished run's claims).
    """
    from dedebate.lab.rundir import read_config

    try:
        was = read_config(os.path.join(folder, "config.yaml")).get("resume", cfg.resume)
    except ConfigError:
        was = cfg.resume
    return dataclasses.replace(cfg, resume=was if isinstance(was, bool) else cfg.resume)
