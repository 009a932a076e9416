"""The commands that read results back: ``dedebate report``, ``compare`` and ``ls``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from dedebate.cli.common import EXIT_FAIL, EXIT_OK, die_usage


def cmd_compare(args: argparse.Namespace) -> int:
    """``dedebate compare A B [--json]``: two results side by side, claim by claim.

    Args:
        args: the parsed command line.

    Returns:
        0 if no gating verdict changed; 1 if one did; 2 for a path without a readable
        result, or when the comparison itself fails (one line, never exit 1).
    """
    from dedebate.lab.compare import CompareError, comparison, render
    from dedebate.lab.rundir import non_finite

    try:
        cmp = comparison(args.a, args.b)
        # a record's NaN or infinity (JSON has neither) is null, as dedebate writes them
        text = (
            json.dumps(non_finite(cmp)[0], indent=2, allow_nan=False) if args.json else render(cmp)
        )
    except CompareError as err:
        return die_usage(str(err))
    except Exception as err:  # noqa: BLE001 - exit 1 means "a verdict changed", never a crash
        return die_usage(
            f"compare {args.a} {args.b} failed: {type(err).__name__}: "
            f"{' '.join(str(err).split())} (a bug in dedebate: please report it)"
        )
    print(text)
    return EXIT_FAIL if cmp["changed"] else EXIT_OK


def html_problem(html: str, report_dir: Path) -> str | None:
    """Why ``--html HTML`` may not be written for the report in ``report_dir``, or None: inside
    the reproduce folder only an ``*.html`` file (new, or a regular file) may be written, so its
    records (report.json, results.json, config.yaml, ...) are never replaced."""
    target = Path(html).expanduser()
    try:
        inside = target.resolve().is_relative_to(report_dir.resolve())
    except (OSError, RuntimeError):  # a loop of links: not a path to write to
        return f"--html {html}: cannot be resolved (a loop of symbolic links?)"
    rule = (
        f"inside the reproduce folder {report_dir} only a new or existing *.html file may be "
        "written (its records are left alone); or give a path outside it"
    )
    if inside and target.suffix.lower() != ".html":
        return f"--html {html}: not an .html file; {rule}"
    if inside and os.path.lexists(target) and (target.is_symlink() or not target.is_file()):
        return f"--html {html}: not a regular file; {rule}"
    return None


def cmd_report(args: argparse.Namespace) -> int:
    """``dedebate report DIR [--html FILE]``: a reproduce report rendered again.

    Args:
        args: the parsed command line.

    Returns:
        0, or 2 for a directory without a readable report.json, or an ``--html`` file that
        would replace one of the folder's records (:func:`html_problem`).
    """
    from dedebate.lab.rerender import ReportError, load_report, markdown, to_html
    from dedebate.lab.rundir import write_text

    try:
        where, data = load_report(args.dir)
    except ReportError as err:
        return die_usage(str(err))
    md = markdown(data)
    if not args.html:
        print(md, end="")
        return EXIT_OK
    if problem := html_problem(args.html, where):
        return die_usage(problem)
    write_text(args.html, to_html(md, where))
    print(f"wrote {args.html}")
    return EXIT_OK


def cmd_ls(args: argparse.Namespace) -> int:
    """``dedebate ls [DIR] [--json]``: the records under DIR, oldest first.

    Args:
        args: the parsed command line.

    Returns:
        0, or 2 for a DIR that is not a directory.
    """
    from dedebate.lab.records import RecordError, listing, render

    where = args.dir or "runs"
    try:  # the default folder before any run: nothing to list yet, not an error
        entries = [] if args.dir is None and not os.path.lexists(where) else listing(where)
    except RecordError as err:
        return die_usage(str(err))
    if args.json:
        print(json.dumps(entries, indent=2))
    elif entries:
        print(render(entries), end="")
    else:
        print(f"no run, sweep or reproduce directories under {where}", file=sys.stderr)
    return EXIT_OK
