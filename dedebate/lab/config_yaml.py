"""Reading config YAML safely: a ``yaml.SafeLoader`` with limits, and one-line errors.

The loader checks each document while it is composed, before any value is built or an alias
expanded: nesting depth, the number of nodes once aliases are expanded (an alias bomb never
expands), recursive aliases and duplicate keys. Plain scalars resolve as in YAML 1.2's core
schema, not PyYAML's YAML 1.1: ``010`` is the integer 10 (``0o10`` is 8, ``0x10`` is 16),
``1:30`` and ``2024-01-01`` are strings (no sexagesimal numbers, no timestamps), only
``true``/``false`` (also ``True``, ``TRUE``, ...) are booleans (``yes``, ``no``, ``on``, ``off``
are strings), and ``1e3`` is a float; :func:`dump_yaml_text` quotes every string that either
YAML version would read as something else. :func:`read_yaml` reads a config file (refusing
a directory, a missing, unreadable, non-UTF-8 or oversized file) and :func:`load_yaml_text` a
string; each problem is one :class:`~dedebate.lab.config_types.ConfigError` line naming the
source and, where known, the line and column.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from dedebate.lab.config_types import CORE_FLOAT, ConfigError

# Limits on a YAML document, checked while it is composed (before any value is built or an alias
# expanded): a config is a few hundred nodes, so these only stop hostile or broken files.
MAX_YAML_BYTES = 16 * 2**20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 1_000_000  # after alias expansion (what a deep copy of the value would hold)
MAX_INT_DIGITS = 100  # Python refuses to parse over 4,300; no config value needs 100

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution): the plain scalars that
# are booleans, integers and floats; every other plain scalar except null is a string.
_BOOL_TAG = "tag:yaml.org,2002:bool"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
# YAML 1.1 resolutions that YAML 1.2 has not: dropped from the loader.
_DROPPED_TAGS = {
    _BOOL_TAG,
    _INT_TAG,
    _FLOAT_TAG,
    "tag:yaml.org,2002:timestamp",
    "tag:yaml.org,2002:value",
}
_CORE_RESOLVERS = (  # in order: an integer is checked before a float (1 is an int)
    (_BOOL_TAG, CORE_BOOL, "tTfF"),
    (_INT_TAG, CORE_INT, "-+0123456789"),
    (_FLOAT_TAG, CORE_FLOAT, "-+0123456789."),
)


class _LimitError(yaml.MarkedYAMLError):
    """A YAML document over a limit, or with a duplicate key (reported like a syntax error)."""


def _children(node: yaml.Node) -> list[yaml.Node]:
    """The child nodes of a sequence or mapping node (keys and values); none for a scalar."""
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_expanded(root: yaml.Node) -> None:
    """Bound the nodes and depth of the document with every alias expanded."""
    # Nodes and depth of the document with every alias expanded, counted on the node graph (each
    # shared node once, iteratively): an alias bomb or a recursive alias never expands.
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
                raise _LimitError(
                    None,
                    None,
                    f"this value holds more than {MAX_YAML_NODES} "
                    "nodes once its aliases are expanded (the limit)",
                    node.start_mark,
                )
            if d > MAX_YAML_DEPTH:
                raise _LimitError(
                    None,
                    None,
                    f"aliases nest this value deeper than {MAX_YAML_DEPTH} levels (the limit)",
                    node.start_mark,
                )
            continue
        if nid in sizes:
            continue
        if nid in open_:
            raise _LimitError(
                None,
                None,
                "an alias refers to the value that contains it (a recursive alias)",
                node.start_mark,
            )
        open_.add(nid)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in sizes)


def _not_core(value: str, what: str, node: yaml.Node) -> yaml.MarkedYAMLError:
    """The error for an explicitly tagged scalar that is not a YAML 1.2 core-schema value."""
    return yaml.constructor.ConstructorError(
        None, None, f"{value!r} is not {what}", node.start_mark
    )


def _core_resolvers(base: dict[Any, list]) -> dict[Any, list]:
    """``base``'s implicit resolvers with bool, int and float as in the YAML 1.2 core schema."""
    table = {ch: [r for r in rs if r[0] not in _DROPPED_TAGS] for ch, rs in base.items()}
    for tag, regexp, first in _CORE_RESOLVERS:
        for ch in first:
            table.setdefault(ch, []).append((tag, regexp))
    return {ch: rs for ch, rs in table.items() if rs}


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with compose-level checks: nesting at most ``MAX_YAML_DEPTH`` levels,
    at most ``MAX_YAML_NODES`` nodes once aliases are expanded, no recursive alias, no duplicate
    key in a mapping, integers of at most ``MAX_INT_DIGITS`` digits; plain scalars resolved as in
    the YAML 1.2 core schema. Each failure is a ``yaml.MarkedYAMLError`` with the line of the
    problem."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self._depth >= MAX_YAML_DEPTH:
            raise _LimitError(
                None,
                None,
                f"nested deeper than {MAX_YAML_DEPTH} levels (the limit)",
                self.peek_event().start_mark,
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = self.construct_scalar(node)
        digits = sum(c.isdigit() for c in value)
        if digits > MAX_INT_DIGITS:
            raise _LimitError(
                None,
                None,
                f"an integer of {digits} digits (at most {MAX_INT_DIGITS})",
                node.start_mark,
            )
        if not CORE_INT.match(value):
            raise _not_core(value, "an integer (such as 10, -3, 0o17 or 0x1F)", node)
        if value.startswith(("0o", "0x")):
            return int(value[2:], 8 if value[1] == "o" else 16)
        return int(value, 10)  # a leading zero is decimal: 010 is 10

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = self.construct_scalar(node)
        if not CORE_FLOAT.match(value):
            raise _not_core(value, "a float (such as 1.5, 1e-3, .inf or .nan)", node)
        if value.lower().endswith((".inf", ".nan")):
            value = value.replace(".", "", 1)  # -.inf -> -inf, which Python's float reads
        return float(value)

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        value = self.construct_scalar(node)
        if not CORE_BOOL.match(value):
            raise _not_core(value, "a boolean (true or false)", node)
        return value.lower() == "true"

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        first: dict[tuple[str, str], int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            ident = (key.tag, key.value)
            if ident in first:
                raise _LimitError(
                    None,
                    None,
                    f"duplicate key {key.value!r} (first at line {first[ident]})",
                    key.start_mark,
                )
            first[ident] = key.start_mark.line + 1
        return node

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            _check_expanded(node)
        return node


def load_yaml_text(text: str, source: str) -> Any:
    """Parse ``text`` with the checked loader; every problem is one ConfigError line.

    Args:
        text: the YAML text.
        source: what the text is (a path), named first in every error.

    Raises:
        ConfigError: ``SOURCE: invalid YAML at line L, column C: PROBLEM``.
    """
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
    """Read a config file with the checked safe loader (a run folder's, which may come from
    someone else: :func:`dedebate.lab.rundir.read_config`).

    Returns its top-level mapping (``{}`` for an empty file).

    Raises:
        ConfigError: one line for a directory, a missing, unreadable, non-UTF-8 or oversized
            file, bad YAML, a limit, or a document that is not a mapping.
    """
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
        raise ConfigError(
            f"{path}: {st.st_size} bytes; a config file is at most {MAX_YAML_BYTES} bytes"
        )
    try:
        text = p.read_text()
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: cannot read config file: not UTF-8 text") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    return parse_config(text, str(path))


def parse_config(text: str, source: str) -> dict[str, Any]:
    """A config document's top-level mapping (``{}`` for an empty one), by the checked loader.

    Raises:
        ConfigError: bad YAML, a limit, or a document that is not a mapping.
    """
    data = load_yaml_text(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: a config file must be a mapping of keys, got {type(data).__name__}"
        )
    return data


def parse_yaml(text: str) -> Any:
    """Parse YAML text with the checked loader (the limits above, no duplicate keys).

    Args:
        text: a YAML document, or one value (``"[1, 2]"``, ``"true"``).

    Raises:
        yaml.YAMLError: bad YAML or a limit, with the mark of the problem.
    """
    return yaml.load(text, Loader=_ConfigLoader)  # noqa: S506 - a SafeLoader subclass


_ConfigLoader.yaml_implicit_resolvers = _core_resolvers(yaml.SafeLoader.yaml_implicit_resolvers)
_ConfigLoader.add_constructor(_INT_TAG, _ConfigLoader.construct_yaml_int)
_ConfigLoader.add_constructor(_FLOAT_TAG, _ConfigLoader.construct_yaml_float)
_ConfigLoader.add_constructor(_BOOL_TAG, _ConfigLoader.construct_yaml_bool)


class _ConfigDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that also quotes the strings YAML 1.2 reads as a bool, int or float."""


for _tag, _regexp, _first in _CORE_RESOLVERS:
    _ConfigDumper.add_implicit_resolver(_tag, _regexp, list(_first))


def dump_yaml_text(data: Any, **kwargs: Any) -> str:
    """``yaml.safe_dump(data, **kwargs)``, quoting every string that YAML 1.1 or 1.2 would read
    as another type (``"1e3"``, ``"0o17"``, ``"08"``, ``"off"``), so :func:`parse_yaml` and
    ``yaml.safe_load`` both read the text back as ``data``."""
    return yaml.dump(data, Dumper=_ConfigDumper, **kwargs)
