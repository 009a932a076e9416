"""Run configuration: YAML + command-line overrides -> a typed, frozen, validated ``RunConfig``.

A config file (``configs/NAME.yaml``) has the top-level keys of :class:`RunConfig`; its ``params``
section holds fields of the experiment's own ``Config`` dataclass (see
``dedebate/lab/experiment.py``). Resolution order for ``params``, each source overriding the
ones before it: the ``Config`` defaults, the experiment's size preset ``SIZES[size]``, the file's
``params``, then ``key.sub=value`` overrides from the command line (values parsed with
``yaml.safe_load``, so ``params.n=10``, ``params.flag=true``, ``params.xs=[1,2]``). A value
written in the file is therefore never replaced by the preset; the shipped ``configs/NAME.yaml``
write their ``params`` as comments (:func:`render_config_file`), so they set nothing and
``size=quick`` shrinks them.

Ranges declared with :func:`dedebate.lab.params.param` are checked field by field as each value
is read, before the ``Config`` is built and before anything is allocated.

Every bad input raises :class:`ConfigError` with one line that names the full key, the value and
what is allowed. Nothing runs before the whole config is valid.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from dedebate.lab.experiment import doc as _doc
from dedebate.lab.params import check_field, describe_range, field_range

SIZES = ("quick", "default", "full")
TRACKING_MODES = ("auto", "offline", "online", "disabled")
# Values of the WANDB_MODE environment variable and the tracking mode each one means.
_WANDB_ENV_MODES = {"online": "online", "run": "online", "offline": "offline",
                    "dryrun": "offline", "disabled": "disabled"}
_KEY_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(ValueError):
    """A bad configuration: one line naming the key, the value and what is allowed."""


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    """W&B tracking. Offline by default: nothing needs an account or a network."""

    mode: Literal["auto", "offline", "online", "disabled"] = dataclasses.field(
        default="auto",
        metadata=_doc("auto = the WANDB_MODE environment variable if set, else offline; "
                      "offline | online | disabled force that mode"))
    project: str = dataclasses.field(default="dedebate", metadata=_doc("W&B project name"))
    entity: str | None = dataclasses.field(
        default=None, metadata=_doc("W&B entity (user or team); null = the account default"))
    group: str | None = dataclasses.field(
        default=None, metadata=_doc("W&B group (e.g. one sweep or one reproduce job)"))

    def __post_init__(self):
        if self.mode not in TRACKING_MODES:
            raise ValueError(f"mode={self.mode!r}: must be one of {', '.join(TRACKING_MODES)}")
        if not self.project:
            raise ValueError("project='': must be a non-empty string")

    def effective_mode(self, environ: Mapping[str, str] | None = None) -> str:
        """The mode W&B runs in: ``offline``, ``online`` or ``disabled``.

        ``auto`` follows ``WANDB_MODE`` when it is set to a value W&B knows, else ``offline``.
        An explicit mode in the config wins over the environment.
        """
        if self.mode != "auto":
            return self.mode
        env = os.environ if environ is None else environ
        value = env.get("WANDB_MODE", "").strip().lower()
        return _WANDB_ENV_MODES.get(value, "offline")


SWEEP_TRACKING = ("points", "sweep")


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A grid of runs of one experiment (``dedebate sweep``; see ``dedebate/lab/sweep.py``).

    Every combination of ``axes`` values is one point; every point runs once per seed. Axes over
    fields the experiment lists in ``DYNAMIC`` run inside one compiled, vmapped program; axes
    over other (static) fields compile once per value.
    """

    seeds: int | list[int] = dataclasses.field(
        default=1,
        metadata=_doc("N (the N seeds seed, seed+1, ..., seed+N-1) or an explicit list of seeds"))
    axes: dict[str, list[Any]] = dataclasses.field(
        default_factory=dict,
        metadata=_doc("params field -> list of values; the grid is their Cartesian product"))
    batch: int = dataclasses.field(
        default=0,
        metadata=_doc("most rows (point x seed) per compiled call; 0 = a whole static group"))
    tracking: Literal["points", "sweep"] = dataclasses.field(
        default="points",
        metadata=_doc("points = one W&B run per point (plus one for the sweep); "
                      "sweep = only the sweep's W&B run"))
    plots: bool = dataclasses.field(
        default=True, metadata=_doc("plot metrics against every axis (bands over seeds)"))
    metrics: list[str] = dataclasses.field(
        default_factory=list,
        metadata=_doc("metrics to plot; [] = every metric, the first 24 if there are more"))

    def __post_init__(self):
        if isinstance(self.seeds, int):
            if not 1 <= self.seeds <= 100_000:
                raise ValueError(f"seeds={self.seeds}: must be a count in [1, 100000] "
                                 "or a list of seeds")
        else:
            if not self.seeds:
                raise ValueError("seeds=[]: must list at least one seed")
            bad = [s for s in self.seeds if not 0 <= s < 2**32]
            if bad:
                raise ValueError(f"seeds={bad[0]}: each seed must be an integer in [0, 2^32)")
            if len(set(self.seeds)) != len(self.seeds):
                raise ValueError(f"seeds={list(self.seeds)}: seeds must be distinct")
        for name in self.axes:
            if not _KEY_SEGMENT.match(str(name)):
                raise ValueError(f"axes={name!r}: an axis is the name of a params field")
        if self.batch < 0:
            raise ValueError(f"batch={self.batch}: must be >= 0 (0 = a whole static group)")
        if self.tracking not in SWEEP_TRACKING:
            raise ValueError(f"tracking={self.tracking!r}: must be one of "
                             f"{', '.join(SWEEP_TRACKING)}")

    def seed_list(self, base_seed: int) -> list[int]:
        """The seeds of the sweep: ``seeds`` if a list, else ``base_seed + i`` for i < seeds."""
        if isinstance(self.seeds, int):
            out = [base_seed + i for i in range(self.seeds)]
            if out[-1] >= 2**32:
                raise ConfigError(f"sweep.seeds={self.seeds}: seed {base_seed} + {self.seeds - 1} "
                                  "is beyond 2^32 - 1")
            return out
        return list(self.seeds)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One run of one experiment, fully resolved. ``params`` is the experiment's ``Config``."""

    experiment: str = dataclasses.field(
        default="",
        metadata=_doc("required: registry name of the experiment (experiments/NAME.py)"))
    seed: int = dataclasses.field(
        default=0, metadata=_doc("root PRNG seed, an integer in [0, 2^32)"))
    size: Literal["quick", "default", "full"] = dataclasses.field(
        default="default",
        metadata=_doc("quick (tiny, for tests) | default | full (paper scale, accelerator)"))
    output_dir: str = dataclasses.field(
        default="runs", metadata=_doc("where run directories are created"))
    resume: bool = dataclasses.field(
        default=False,
        metadata=_doc("continue the latest run of this exact config from its checkpoints"))
    tracking: TrackingConfig = dataclasses.field(
        default_factory=TrackingConfig, metadata=_doc("W&B tracking"))
    params: Any = dataclasses.field(
        default=None, metadata=_doc("the experiment's own Config fields"))
    sweep: SweepConfig | None = dataclasses.field(
        default=None,
        metadata=_doc("a grid of runs: seeds and values of params fields (dedebate sweep)"))

    def __post_init__(self):
        if not (0 <= self.seed < 2**32):
            raise ValueError(f"seed={self.seed}: must be an integer in [0, 2^32)")
        if self.size not in SIZES:
            raise ValueError(f"size={self.size!r}: must be one of {', '.join(SIZES)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), the form written to ``config.yaml``."""
        return {
            "experiment": self.experiment,
            "seed": self.seed,
            "size": self.size,
            "output_dir": self.output_dir,
            "resume": self.resume,
            "tracking": _plain(dataclasses.asdict(self.tracking)),
            "params": _plain(dataclasses.asdict(self.params)) if self.params is not None else {},
            **({"sweep": _plain(dataclasses.asdict(self.sweep))} if self.sweep is not None
               else {}),
        }

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of the result-determining part of the config.

        Covers ``experiment``, ``seed``, ``size`` and ``params``; not ``output_dir``, ``resume``
        or ``tracking``, which change where results go, never what they are (so a resumed run
        keeps its hash).
        """
        return config_hash_of(self.to_dict())

    def sweep_hash(self) -> str:
        """:meth:`config_hash` extended by the ``sweep`` block: what a sweep directory's results
        depend on (checked when a sweep is resumed)."""
        return sweep_hash_of(self.to_dict())


def sweep_hash_of(d: Mapping[str, Any]) -> str:
    """:meth:`RunConfig.sweep_hash` of a plain config dict (e.g. a loaded ``config.yaml``)."""
    sweep = _plain(d.get("sweep")) or {}
    sweep = {k: v for k, v in sweep.items() if k in ("seeds", "axes")}  # what sets the numbers
    core = {"config": config_hash_of(d), "sweep": sweep}
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def config_hash_of(d: Mapping[str, Any]) -> str:
    """:meth:`RunConfig.config_hash` of a plain config dict (e.g. a loaded ``config.yaml``)."""
    core = {k: _plain(d.get(k)) for k in ("experiment", "seed", "size", "params")}
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


# ----------------------------------------------------------------------------- type checking


def describe_type(tp: Any) -> str:
    """What a value of annotation ``tp`` looks like, in words, for error messages."""
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
            return (f"a list of {len(args)} items ["
                    + ", ".join(describe_type(a) for a in args) + "]")
        inner = describe_type(args[0]) if args else "any value"
        return f"a list (each {inner})"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return f"a mapping of {tp.__name__} fields"
    return getattr(tp, "__name__", str(tp))


def _fail(key: str, value: Any, tp: Any) -> ConfigError:
    return ConfigError(f"{key}={_show(value)}: expected {describe_type(tp)}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against annotation ``tp``; return it in the field's own type.

    Ints are accepted for floats (and numeric strings such as ``1e-3``, which YAML 1.1 reads as
    a string); lists are accepted for tuples. Bools are never ints.
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
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise _fail(key, value, tp)
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
        for a in args:
            if a is type(None):
                continue
            if isinstance(value, Mapping) and isinstance(a, type) and dataclasses.is_dataclass(a):
                return coerce(value, a, key)  # a section (e.g. sweep): its own errors name keys
            try:
                return coerce(value, a, key)
            except ConfigError:
                continue
        raise _fail(key, value, tp)
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


def _field_types(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable forward references: no checking
        return {f.name: Any for f in dataclasses.fields(cls)}


def _fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.init]


def build_dataclass(cls: type, raw: Mapping[str, Any], prefix: str) -> Any:
    """Build the frozen dataclass ``cls`` from a mapping, rejecting unknown keys and bad types.

    ``ValueError`` raised by the class's ``__post_init__`` (``"name=value: what is allowed"``)
    becomes a :class:`ConfigError` naming the full key ``prefix.name``.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{prefix}={_show(raw)}: expected a mapping of {cls.__name__} fields")
    fields = {f.name: f for f in _fields(cls)}
    hints = _field_types(cls)
    values = {}
    for name, value in raw.items():
        key = f"{prefix}.{name}" if prefix else str(name)
        if name not in fields:
            allowed = ", ".join(fields) or "(none)"
            raise ConfigError(f"unknown key '{key}'; allowed keys here: {allowed}")
        values[name] = coerce(value, hints.get(name, Any), key)
        rng = field_range(fields[name])
        if rng is not None:
            try:
                check_field(name, rng, hints.get(name, Any), values[name], key)
            except ValueError as err:
                raise ConfigError(str(err)) from None
    missing = [n for n, f in fields.items()
               if n not in values and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
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
    msg = " ".join(str(err).split()) or type(err).__name__
    m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", msg)
    if m and m.group(1) in fields:
        return ConfigError(f"{prefix}.{msg}" if prefix else msg)
    return ConfigError(f"{prefix}: {msg}" if prefix else msg)


# ----------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """``"params.n=10"`` -> ``(("params", "n"), 10)``; the value is parsed by ``yaml.safe_load``.
    """
    if "=" not in text:
        raise ConfigError(f"malformed override {text!r}: expected key.sub=value "
                          "(for example params.n=10)")
    key, _, raw_value = text.partition("=")
    key = key.strip()
    parts = tuple(key.split("."))
    if not key or not all(_KEY_SEGMENT.match(p) for p in parts):
        raise ConfigError(f"malformed override {text!r}: the key must be dotted names such as "
                          "params.n")
    try:
        value = yaml.load(raw_value, Loader=_ConfigLoader) if raw_value.strip() else None
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"malformed override {text!r}: value is not valid YAML ({problem})"
                          ) from None
    return parts, value


def apply_override(raw: dict[str, Any], parts: tuple[str, ...], value: Any) -> None:
    """Set ``raw[p0][p1]...[pn] = value``, creating sections; refuses to descend into a value."""
    node = raw
    for i, p in enumerate(parts[:-1]):
        child = node.get(p)
        if child is None:
            child = node[p] = {}
        elif not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(f"unknown key '{'.'.join(parts)}': '{where}' is a value, "
                              "not a section")
        node = child
    node[parts[-1]] = value


# ----------------------------------------------------------------------------- loading


# Limits on a YAML document, checked while it is composed (before any value is built or an alias
# expanded): a config is a few hundred nodes, so these only stop hostile or broken files.
MAX_YAML_BYTES = 16 * 2**20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 1_000_000  # after alias expansion (what a deep copy of the value would hold)


class _LimitError(yaml.MarkedYAMLError):
    """A YAML document over a limit, or with a duplicate key (reported like a syntax error)."""


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_expanded(root: yaml.Node) -> None:
    """Nodes and depth of the document with every alias expanded, counted on the node graph
    (each shared node once, iteratively): an alias bomb or a recursive alias never expands."""
    sizes: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        nid = id(node)
        if closing:
            kids = [sizes[id(k)] for k in _children(node)]
            n = 1 + sum(k[0] for k in kids)
            d = 1 + max((k[1] for k in kids), default=0)
            open_.discard(nid)
            sizes[nid] = (n, d)
            if n > MAX_YAML_NODES:
                raise _LimitError(None, None, f"this value holds more than {MAX_YAML_NODES} "
                                  "nodes once its aliases are expanded (the limit)",
                                  node.start_mark)
            if d > MAX_YAML_DEPTH:
                raise _LimitError(None, None, f"aliases nest this value deeper than "
                                  f"{MAX_YAML_DEPTH} levels (the limit)", node.start_mark)
            continue
        if nid in sizes:
            continue
        if nid in open_:
            raise _LimitError(None, None, "an alias refers to the value that contains it "
                              "(a recursive alias)", node.start_mark)
        open_.add(nid)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in sizes)


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with compose-level checks: nesting at most ``MAX_YAML_DEPTH`` levels,
    at most ``MAX_YAML_NODES`` nodes once aliases are expanded, no recursive alias, no duplicate
    key in a mapping. Each failure is a ``yaml.MarkedYAMLError`` with the line of the problem."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self._depth >= MAX_YAML_DEPTH:
            raise _LimitError(None, None, f"nested deeper than {MAX_YAML_DEPTH} levels "
                              "(the limit)", self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        first: dict[tuple[str, str], int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            ident = (key.tag, key.value)
            if ident in first:
                raise _LimitError(None, None, f"duplicate key {key.value!r} (first at line "
                                  f"{first[ident]})", key.start_mark)
            first[ident] = key.start_mark.line + 1
        return node

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            _check_expanded(node)
        return node


def load_yaml_text(text: str, source: str) -> Any:
    """Parse ``text`` with the checked loader; every problem is one ConfigError line naming
    ``source`` (and the line and column where it is known)."""
    try:
        return yaml.load(text, Loader=_ConfigLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{source}: invalid YAML: nested too deeply") from None


def read_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """Read a config file with the checked safe loader; errors become one-line ConfigErrors
    (a directory, a missing, unreadable or oversized file, bad YAML, a limit)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {str(path)!r}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    if p.is_dir():
        raise ConfigError(f"{path}: is a directory, not a config file")
    if not p.is_file():
        raise ConfigError(f"{path}: not a regular file (a config is a YAML file)")
    if st.st_size > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: {st.st_size} bytes; a config file is at most "
                          f"{MAX_YAML_BYTES} bytes")
    try:
        text = p.read_text()
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: cannot read config file: not UTF-8 text") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    data = load_yaml_text(text, str(path))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of keys, "
                          f"got {type(data).__name__}")
    return data


def resolve(raw: Mapping[str, Any], experiments: Mapping[str, Any],
            overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Validate a raw config mapping (plus overrides) against the registered experiments."""
    raw = _deepcopy_dict(raw)
    for text in overrides:
        parts, value = parse_override(text)
        apply_override(raw, parts, value)

    allowed = [f.name for f in _fields(RunConfig)]
    for k in raw:
        if k not in allowed:
            raise ConfigError(f"unknown key '{k}'; allowed top-level keys: {', '.join(allowed)}")

    names = sorted(experiments)
    available = ", ".join(names) if names else "(none registered)"
    if "experiment" not in raw or raw["experiment"] in (None, ""):
        raise ConfigError(f"missing key 'experiment': expected one of {available}")
    name = raw["experiment"]
    if not isinstance(name, str) or name not in experiments:
        raise ConfigError(f"experiment={_show(name)}: unknown experiment; registered: {available}")
    module = experiments[name]

    top = {k: v for k, v in raw.items() if k != "params"}
    top.setdefault("tracking", {})
    base = build_dataclass(RunConfig, top, "")

    params_raw = raw.get("params")
    if params_raw is None:
        params_raw = {}
    if not isinstance(params_raw, dict):
        raise ConfigError(f"params={_show(params_raw)}: expected a mapping of "
                          f"{name} Config fields")
    sizes = getattr(module, "SIZES", {}) or {}
    size_over = sizes.get(base.size, {}) or {}
    # Config defaults < the size preset < the file < the command line (already applied to raw).
    merged = {**size_over, **params_raw}
    cfg_cls = getattr(module, "Config", None)
    if cfg_cls is None or not dataclasses.is_dataclass(cfg_cls):
        raise ConfigError(f"experiment {name!r} has no Config dataclass (see "
                          "dedebate/lab/experiment.py)")
    params = build_dataclass(cfg_cls, merged, "params")
    if base.sweep is not None:
        _check_sweep_axes(base.sweep, cfg_cls, merged, name)
        base.sweep.seed_list(base.seed)
    return dataclasses.replace(base, params=params)


def _check_sweep_axes(sweep: SweepConfig, cfg_cls: type, merged: Mapping[str, Any],
                      name: str) -> None:
    """Each axis names a params field, and each of its values makes a valid Config on its own
    (errors name the value as ``sweep.axes.FIELD[i]``). Combinations are checked when the sweep
    is planned (``dedebate.lab.sweep.plan``)."""
    fields = [f.name for f in _fields(cfg_cls)]
    for axis, values in sweep.axes.items():
        if axis not in fields:
            raise ConfigError(f"unknown key 'sweep.axes.{axis}': not a params field of {name}; "
                              f"allowed: {', '.join(fields) or '(none)'}")
        if not values:
            raise ConfigError(f"sweep.axes.{axis}=[]: must list at least one value")
        for i, value in enumerate(values):
            try:
                build_dataclass(cfg_cls, {**merged, axis: value}, "params")
            except ConfigError as err:
                msg = str(err)
                where = f"params.{axis}"
                if msg.startswith(where):
                    msg = f"sweep.axes.{axis}[{i}]" + msg[len(where):]
                else:
                    msg = f"sweep.axes.{axis}[{i}]={_show(value)}: {msg}"
                raise ConfigError(msg) from None


def load_config(path: str | os.PathLike, experiments: Mapping[str, Any],
                overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """``configs/NAME.yaml`` + ``key.sub=value`` overrides -> a validated :class:`RunConfig`."""
    return resolve(read_yaml(path), experiments, overrides)


def default_config(module: Any, size: str = "default", seed: int = 0, **top: Any) -> RunConfig:
    """The embedded default config of an experiment module at ``size`` (used by reproduce)."""
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
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=False)


# ----------------------------------------------------------------------------- documentation


def render_config_docs(module: Any) -> str:
    """Every documented config key of an experiment: name, type, default, doc, size overrides."""
    lines = [f"{module.NAME}: {getattr(module, 'TITLE', '')}".rstrip(": "), ""]
    lines.append("Top-level keys:")
    lines += _field_lines(RunConfig, "", skip=("params", "tracking", "sweep"))
    lines += _field_lines(TrackingConfig, "tracking.")
    lines += _field_lines(SweepConfig, "sweep.")
    dynamic = tuple(getattr(module, "DYNAMIC", ()) or ())
    if callable(getattr(module, "point", None)):
        lines.append("  (sweep axes over " + (", ".join(dynamic) or "no field")
                     + " run vmapped in one compiled program; other axes compile per value)")
    else:
        lines.append("  (this experiment defines no point(): a sweep runs each point as a full run)")
    lines.append("")
    lines.append("params (experiment Config):")
    cfg_cls = getattr(module, "Config", None)
    if cfg_cls is not None and dataclasses.is_dataclass(cfg_cls):
        lines += _field_lines(cfg_cls, "params.")
    sizes = getattr(module, "SIZES", {}) or {}
    for size in SIZES:
        if sizes.get(size):
            over = ", ".join(f"{k}={v!r}" for k, v in sizes[size].items())
            lines.append(f"size {size}: {over}")
    return "\n".join(lines)


def _field_lines(cls: type, prefix: str, skip: tuple[str, ...] = ()) -> list[str]:
    hints = _field_types(cls)
    out = []
    for f in _fields(cls):
        if f.name in skip:
            continue
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        doc = f.metadata.get("doc", "") if f.metadata else ""
        out.append(f"  {prefix}{f.name}: {_allowed(f, hints.get(f.name, Any))} "
                   f"= {default}" + (f"  -- {doc}" if doc else ""))
    return out


def _allowed(f: dataclasses.Field, tp: Any) -> str:
    """What a field accepts: its range (:func:`dedebate.lab.params.param`) or else its type."""
    rng = field_range(f)
    if rng is None or rng == type(rng)():  # no range stated (e.g. a flag)
        return describe_type(tp)
    text = describe_range(rng, tp)
    return f"a list ({text})" if text.startswith("each ") else text


CONFIG_FILE_NOTE = (
    "Every params line below is a comment: the Config defaults and the size preset "
    "(size: quick | default | full; SIZES in experiments/{name}.py) apply. Uncomment a line "
    "to set that value at every size; a command-line override (params.FIELD=VALUE) wins over "
    "this file. Generated by `dedebate config {name} --yaml` (a test checks it is in sync).")


def render_config_file(module: Any) -> str:
    """The body of ``configs/NAME.yaml``: the top-level keys, then every params field as a
    commented line (doc, ``FIELD: default``, allowed range and size presets).

    Commented out, the params set nothing, so size presets apply (the file's params would win
    over them, see :func:`resolve`); uncommented unchanged, each line gives the default-size
    value. A shipped config file is free-form comments followed by exactly this text.
    """
    import textwrap

    name = module.NAME
    lines = [f"experiment: {name}", "seed: 0", "size: default", "params:"]
    lines += textwrap.wrap(CONFIG_FILE_NOTE.format(name=name), 97, initial_indent="  # ",
                           subsequent_indent="  # ", break_on_hyphens=False)
    cfg_cls = module.Config
    hints = _field_types(cfg_cls)
    sizes = getattr(module, "SIZES", {}) or {}
    for f in _fields(cfg_cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        doc = f.metadata.get("doc", "") if f.metadata else ""
        lines.append("  #")
        lines += textwrap.wrap(doc, 97, initial_indent="  # ", subsequent_indent="  # ",
                               break_on_hyphens=False)
        notes = []
        if field_range(f) is not None:
            notes.append(_allowed(f, hints.get(f.name, Any)))
        presets = [f"{size}: {_yaml_value(sizes[size][f.name])}" for size in SIZES
                   if f.name in (sizes.get(size) or {})]
        if presets:
            notes.append("size " + ", ".join(presets))
        value = f"  # {f.name}: {_yaml_value(default)}"
        lines.append(value + (" " * max(1, 30 - len(value)) + "# " + "; ".join(notes)
                              if notes else ""))
    return "\n".join(lines) + "\n"


def _yaml_value(x: Any) -> str:
    text = yaml.safe_dump({"v": _plain(x)}, default_flow_style=True, width=10**9,
                          sort_keys=False).strip()
    return text[len("{v: "):-1]
