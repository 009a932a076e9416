"""``dedebate reproduce``: every experiment, one report (``--resume DIR`` continues one), and
its number of worker processes."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from dedebate.cli.common import EXIT_FAIL, EXIT_OK, die_usage, load_registry, warn_import_errors


def jobs_value(text: str) -> int | str | None:
    """``--jobs``'s value: an integer >= 1, ``"auto"``, or None when it is neither."""
    from dedebate.lab.distributed import decimal_int

    if text == "auto":
        return text
    jobs = decimal_int(text)
    return jobs if jobs is not None and jobs >= 1 else None


def jobs_text(args: argparse.Namespace) -> tuple[str, bool]:
    """``reproduce``'s number of workers as given: ``--jobs``, else a non-empty
    ``$DEDEBATE_JOBS``, else ``auto``; and whether it came from the environment."""
    if args.jobs is None and os.environ.get("DEDEBATE_JOBS", "").strip():
        return os.environ["DEDEBATE_JOBS"].strip(), True
    return ("auto" if args.jobs is None else args.jobs.strip()), False


def reproduce_header(report_dir: Path) -> tuple[str, int]:
    """The size and seed a reproduce directory was made with (its report.json), or ValueError
    with the reason in words; read only, so a bad report is refused before it is rewritten."""
    from dedebate.lab.config_schema import SIZES
    from dedebate.lab.rundir import RunDirError, read_json

    path = report_dir / "report.json"
    try:
        data = read_json(path)  # no link, no FIFO, at most MAX_RECORD_BYTES
    except FileNotFoundError:
        raise ValueError("no report.json there (not a reproduce directory)") from None
    except RunDirError as err:
        raise ValueError(str(err)) from None
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read {path}: {err}") from None
    prov = data.get("provenance") if isinstance(data, dict) else None
    size, seed = (prov.get("size"), prov.get("seed")) if isinstance(prov, dict) else (None, None)
    if size is None or isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{path} names no size and seed (not a reproduce report)")
    if size not in SIZES:
        raise ValueError(
            f"{path}: its provenance.size {size!r} is not one of "
            f"{', '.join(SIZES)}; the report is left as it is"
        )
    return size, seed


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``dedebate reproduce``: every experiment, one report (or ``--resume DIR``).

    Args:
        args: the parsed command line.

    Returns:
        0 if the report passes; 1 if it fails; 2 for a bad command line (a resumed
        directory's size and seed cannot change).
    """
    from dedebate.lab.report import reproduce

    if args.resume:
        from dedebate.lab.folder_guard import check_run_dir

        check_run_dir(args.resume)  # before report.json is read: no link out, no FIFO (exit 2)
        try:
            size, seed = reproduce_header(Path(args.resume))
        except ValueError as err:
            return die_usage(f"--resume {args.resume}: {err}")
        for flag, given, stored in (("size", args.size, size), ("--seed", args.seed, seed)):
            if given is not None and given != stored:
                return die_usage(
                    f"--resume {args.resume}: it was reproduced with {flag} "
                    f"{stored!r}, not {given!r}; leave the option out or start a "
                    "new reproduce"
                )
        args.size, args.seed = size, seed
    args.size = "default" if args.size is None else args.size
    args.seed = 0 if args.seed is None else args.seed
    if args.seed < 0 or args.seed >= 2**32:
        return die_usage(f"--seed {args.seed}: must be an integer in [0, 2^32)")
    from dedebate.lab.config_schema import parse_limit

    try:
        parse_limit(args.memory_limit)
    except ValueError as err:
        return die_usage(f"--memory-limit: {err}")
    text, from_env = jobs_text(args)
    jobs = jobs_value(text)
    if jobs is None and from_env:
        return die_usage(
            f"DEDEBATE_JOBS={text!r}: must be an integer >= 1 or auto (the default of --jobs)"
        )
    if jobs is None:
        return die_usage(f"--jobs {args.jobs}: must be an integer >= 1 or auto")
    reg = load_registry()
    if args.only:
        unknown = [n for n in args.only if n not in reg.experiments]
        if unknown:
            warn_import_errors(reg)
            return die_usage(
                f"--only: unknown experiment(s) {', '.join(unknown)}; registered: "
                f"{', '.join(reg.names()) or '(none)'}"
            )
    warn_import_errors(reg)
    if jobs == "auto":
        from dedebate.lab.parallel import auto_jobs

        jobs = auto_jobs()
    assert isinstance(jobs, int)  # checked above: an integer >= 1 or auto
    from dedebate.lab.folder_guard import lock_run_dir

    # a second reproduce --resume of the folder stops here (exit 2); two at once each ran what the
    # other was not running, and the last report written failed their rows "run in use"
    held = lock_run_dir(args.resume) if args.resume else contextlib.nullcontext()
    with held:
        try:
            outcome = reproduce(
                reg,
                size=args.size,
                seed=args.seed,
                output_dir=args.output_dir,
                only=args.only,
                tracking_mode=args.tracking,
                show_progress=not args.no_progress,
                resume_dir=args.resume,
                jobs=jobs,
                memory_limit=args.memory_limit,
            )
        except ValueError as err:
            print(f"dedebate: error: {err}", file=sys.stderr)
            return EXIT_FAIL
    n_pass = sum(e.counts()[0] for e in outcome.entries)
    n_claims = sum(e.counts()[1] for e in outcome.entries)
    failed = [e.name for e in outcome.entries if e.verdict == "FAIL"]
    print(f"report: {outcome.report_dir / 'report.md'}")
    print(
        f"{'PASS' if outcome.passed else 'FAIL'}: {n_pass}/{n_claims} claims pass"
        + (f"; failing experiments: {', '.join(failed)}" if failed else "")
    )
    return EXIT_OK if outcome.passed else EXIT_FAIL
