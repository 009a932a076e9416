"""``dedebate bench``: a benchmark from ``bench/``, printed as JSON."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from dedebate.cli.common import EXIT_FAIL, EXIT_OK, die_usage


def out_problem(out: str) -> str | None:
    """Why ``--out OUT`` cannot be written (checked before the benchmark runs), or None."""
    path = Path(out).expanduser()
    rule = "give a file path whose folder exists or can be created"
    if path.is_symlink():
        return f"--out {out}: a symbolic link; {rule} (never a link)"
    if path.is_dir():
        return f"--out {out}: a directory; {rule} (e.g. {Path(out) / 'result.json'})"
    if os.path.lexists(path) and not path.is_file():
        return f"--out {out}: not a regular file; {rule}"
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent  # the nearest part of the path that exists
    if not folder.is_dir():
        return f"--out {out}: {folder} is a file, not a directory; {rule}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--out {out}: {folder} is not writable; {rule}"
    return None


def _write_out(out: str, text: str) -> None:
    """Write ``text`` to ``--out``'s file atomically, its folder made first; RunDirError if not."""
    from dedebate.lab.rundir import RunDirError, os_reason, write_text

    path = Path(out).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunDirError(f"--out {out}: cannot make {path.parent}: {os_reason(err)}") from None
    write_text(path, text)


def cmd_bench(args: argparse.Namespace) -> int:
    """``dedebate bench NAME``: run a benchmark from ``bench/`` and print its JSON (``--list``).

    Args:
        args: the parsed command line.

    Returns:
        0; 1 where the result holds a NaN or infinity (printed as null, its paths under
        ``non_finite``); 2 for an unknown benchmark or an ``--out`` that cannot be written
        (checked before the benchmark runs; the file is written atomically).
    """
    from dedebate.lab.registry import bench_package, describe_benchmarks
    from dedebate.lab.rundir import jsonable, non_finite

    described = describe_benchmarks()
    names = list(described)
    if args.list:  # one line per benchmark: its name, a tab, the first line of its docstring
        print("\n".join(f"{n}\t{d}" for n, d in described.items()) if names else "(no benchmarks)")
        return EXIT_OK
    available = ", ".join(names) if names else "(none)"
    if not args.name:
        return die_usage(f"bench needs a NAME; available: {available}")
    if args.name not in names:
        return die_usage(f"unknown benchmark {args.name!r}; available: {available}")
    module = importlib.import_module(f"{bench_package()}.{args.name}")
    if not callable(getattr(module, "run", None)):
        return die_usage(f"benchmark {args.name!r} defines no run(full: bool = False)")
    if args.out and (problem := out_problem(args.out)):  # before a run that may take minutes
        return die_usage(problem)
    from dedebate.lab.provenance import environment_provenance
    from dedebate.lab.rundir import utc_iso

    load_before, started = os.getloadavg(), utc_iso()
    result, bad = non_finite(jsonable(module.run(full=args.full)))
    if isinstance(result, dict):  # where and on what it ran: figures need their load and date
        result["environment"] = environment_provenance() | {
            "started": started,
            "load_avg_before": list(load_before),
            "load_avg_after": list(os.getloadavg()),
        }
        result |= {"non_finite": bad} if bad else {}
    text = json.dumps(result, indent=2, allow_nan=False)
    print(text)
    if args.out:
        _write_out(args.out, text + "\n")
    if bad:  # a non-finite figure is a failure, not a number
        print(f"dedebate: {args.name}: non-finite numbers at {', '.join(bad[:5])}", file=sys.stderr)
        return EXIT_FAIL
    failed = result.get("failed_checks") if isinstance(result, dict) else None
    if failed:  # the timed code computed something wrong: its figures say nothing
        print(
            f"dedebate: {args.name}: checks failed: {', '.join(map(str, failed))}", file=sys.stderr
        )
        return EXIT_FAIL
    return EXIT_OK
