"""``ast.parse`` for the tests that read source, safe from a collection in the middle of it.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state. If the garbage
collector runs while ``ast.parse`` builds its tree and a finalizer parses too (asyncio logs "Task
exception was never retrieved" for the checkpoint tests' damaged files, and 3.11's traceback module
parses the failing line to place its carets), the outer parse fails with ``SystemError: AST
constructor recursion depth mismatch``. Parsing with the collector paused rules that out.
"""

from __future__ import annotations

import ast
import gc


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """The module's syntax tree, parsed with the garbage collector paused.

    Args:
        source: Python source text.
        filename: shown in a syntax error.

    Returns:
        The tree ``ast.parse`` gives.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename)
    finally:
        if was_enabled:
            gc.enable()
