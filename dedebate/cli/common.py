"""What the commands share: the exit codes, the one-line usage error and the experiment registry."""

from __future__ import annotations

import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad command line: exit 2 with one line."""


def die_usage(msg: str) -> int:
    """Print ``dedebate: error: MSG`` on stderr (:func:`say_usage`); returns the usage exit code."""
    return say_usage(f"dedebate: error: {msg}")


def say_usage(msg: object) -> int:
    """Print ``msg`` on stderr, each line :func:`printable` (a message may quote a shared folder's
    text or a command line's); returns the usage exit code."""
    from dedebate.lab.report_render import printable

    print("\n".join(printable(line) for line in str(msg).split("\n")), file=sys.stderr, flush=True)
    return EXIT_USAGE


def load_registry():
    """The registered experiments (:func:`dedebate.lab.registry.discover_experiments`)."""
    from dedebate.lab.registry import discover_experiments

    return discover_experiments()


def warn_import_errors(reg) -> None:
    """One warning line on stderr per experiment module that failed to import."""
    for mod, err in sorted(reg.errors.items()):
        print(f"dedebate: warning: could not import {mod}: {err}", file=sys.stderr)
