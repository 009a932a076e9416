"""``dedebate bench``: a benchmark from ``bench/``, printed as JSON."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

from dedebate.cli.common import EXIT_OK, die_usage


def cmd_bench(args: argparse.Namespace) -> int:
    """``dedebate bench NAME``: run a benchmark from ``bench/`` and print its JSON (``--list``).

    Args:
        args: the parsed command line.

    Returns:
        0, or 2 for an unknown benchmark.
    """
    from dedebate.lab.registry import bench_package, describe_benchmarks
    from dedebate.lab.rundir import jsonable

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
    result = module.run(full=args.full)
    text = json.dumps(jsonable(result), indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return EXIT_OK
