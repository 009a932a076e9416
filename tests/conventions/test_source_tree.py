"""``tests.source_tree.parse`` survives a collection whose finalizer parses, which ``ast.parse``
on CPython 3.11 does not (``SystemError: AST constructor recursion depth mismatch``)."""

from __future__ import annotations

import ast
import gc

from tests.conftest import REPO
from tests.source_tree import parse

# a large module: the command line's files, one after another
SOURCE = "\n".join(p.read_text() for p in sorted((REPO / "dedebate" / "cli").glob("*.py")))


class _ParsesWhenCollected:
    """A reference cycle whose finalizer parses, as asyncio's 'exception never retrieved' log does
    when it formats a traceback."""

    def __init__(self):
        self.me = self

    def __del__(self):
        ast.parse("x = (1 + 2) * 3")


def _failures(parser, tries: int = 20) -> int:
    """How many of ``tries`` parses of a large module, each with garbage cycles pending and the
    collector set to run at almost every allocation, raise SystemError."""
    thresholds = gc.get_threshold()
    failures = 0
    for _ in range(tries):
        for _ in range(200):
            _ParsesWhenCollected()
        gc.set_threshold(5)
        try:
            parser(SOURCE)
        except SystemError:
            failures += 1
        finally:
            gc.set_threshold(*thresholds)
    gc.collect()
    return failures


def test_parse_is_immune_to_a_collection_that_parses():
    plain = _failures(ast.parse)
    assert _failures(parse) == 0, f"the helper failed; plain ast.parse failed {plain}/20 times"
    print(f"plain ast.parse failed {plain}/20 times under the same conditions")
