"""Reading config YAML safely: a ``yaml.SafeLoader`` with limits, and one-line errors.

The loader checks each document while it is composed, before any value is built or an alias
expanded: nesting depth, the number of nodes once aliases are expanded (an alias bomb never
expands), recursive aliases and duplicate keys. :func:`read_yaml` reads a config file (refusing
a directory, a missing, unreadable, non-UTF-8 or oversized file) and :func:`load_yaml_text` a
string; each problem is one :class:`~dedebate.lab.config_types.ConfigError` line naming the
source and, where known, the line and column.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from dedebate.lab.config_types import ConfigError

# Limits on a YAML document, checked while it is composed (before any value is built or an alias
# expanded): a config is a few hundred nodes, so these only stop hostile or broken files.
MAX_YAML_BYTES = 16 * 2**20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 1_000_000  # after alias expansion (what a deep copy of the value would hold)
MAX_INT_DIGITS = 100  # Python refuses to parse over 4,300; no config value needs 100


class _LimitError(yaml.MarkedYAMLError):
    """A YAML document over a limit, or with a duplicate key (reported like a syntax error)."""


def _children(node: yaml.Node) -> list[yaml.Node]:
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


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with compose-level checks: nesting at most ``MAX_YAML_DEPTH`` levels,
    at most ``MAX_YAML_NODES`` nodes once aliases are expanded, no recursive alias, no duplicate
    key in a mapping, integers of at most ``MAX_INT_DIGITS`` digits. Each failure is a
    ``yaml.MarkedYAMLError`` with the line of the problem."""

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
        digits = sum(c.isdigit() for c in node.value)
        if digits > MAX_INT_DIGITS:
            raise _LimitError(
                None,
                None,
                f"an integer of {digits} digits (at most {MAX_INT_DIGITS})",
                node.start_mark,
            )
        return super().construct_yaml_int(node)

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
    """Read a config file with the checked safe loader.

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
    data = load_yaml_text(text, str(path))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a config file must be a mapping of keys, got {type(data).__name__}"
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


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _ConfigLoader.construct_yaml_int)
