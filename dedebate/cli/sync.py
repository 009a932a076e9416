"""``dedebate sync``: upload the offline W&B runs under some directories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dedebate.cli.common import EXIT_FAIL, EXIT_OK, die_usage


def cmd_sync(args: argparse.Namespace) -> int:
    """``dedebate sync PATH ...``: upload every offline W&B run under the paths.

    Args:
        args: the parsed command line.

    Returns:
        0 if every run synced (or there was none); 1 if one failed or ran past ``--timeout``,
        or the W&B server did not answer a first probe (nothing synced);
        2 for a bad path, ``--jobs`` or ``--timeout``, or a ``wandb/`` folder holding a link
        (nothing synced).
    """
    from dedebate.lab.report_render import printable
    from dedebate.lab.sync import by_run_id, find_offline_runs, sync_all

    if args.jobs < 1:
        return die_usage(f"--jobs={args.jobs}: must be at least 1")
    if not 0 < args.timeout < float("inf"):
        return die_usage(f"--timeout={args.timeout}: must be a positive number of seconds")
    runs = []
    for path in args.paths:
        if not Path(path).expanduser().is_dir():
            return die_usage(f"{path}: not a directory")
        runs += find_offline_runs(path)
    runs = sorted({r.resolve(): r for r in runs}.values())  # overlapping paths: each run once
    if not runs:
        print(f"no offline W&B runs under {', '.join(args.paths)}", file=sys.stderr)
        return EXIT_OK
    if args.dry_run:
        print("\n".join(printable(r) for r in runs))
        print(f"{len(runs)} offline run(s); run without --dry-run to sync them", file=sys.stderr)
        return EXIT_OK
    if not args.no_probe:  # one quick question, not an upload per run waiting out --timeout
        from dedebate.lab.tracking import base_url, probe

        url = base_url()
        why = probe(url)
        if why is not None:
            print(
                f"dedebate: error: the W&B server {printable(url)} did not answer "
                f"({printable(why)}); nothing synced, the {len(runs)} offline run(s) are kept: "
                "sync again when it answers (--no-probe uploads without asking first)",
                file=sys.stderr,
            )
            return EXIT_FAIL
    failed = sync_all(
        runs, jobs=args.jobs, timeout=args.timeout, report=lambda line: print(line, flush=True)
    )
    n = len(by_run_id(runs))
    print(f"{n - failed}/{n} W&B run(s) synced", file=sys.stderr)
    return EXIT_FAIL if failed else EXIT_OK
