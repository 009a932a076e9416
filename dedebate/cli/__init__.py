"""The ``dedebate`` command line.

    dedebate run configs/NAME.yaml [key.sub=value ...]   run one experiment
    dedebate run --resume RUN_DIR [key.sub=value ...]     continue a run from its checkpoints
    dedebate sweep CONFIG [key.sub=value ...] [--processes N | --distributed] [--resume DIR]
                                                          a grid of runs (the config's sweep block)
    dedebate reproduce [--quick|--full] [--only NAME ...] [--jobs N]   every claim, one report
    dedebate reproduce --resume DIR [--only NAME ...]     continue one (finished runs are kept)
    dedebate bench NAME [--full] [--out FILE] | --list    a benchmark from bench/, as JSON
    dedebate config NAME [--yaml]                         the documented config keys
    dedebate list                                         registered experiments

Exit codes: 0 every claim passed; 1 a claim failed or an experiment raised; 2 a bad command line
or config, a run over its memory_limit, or a folder that cannot be used (not writable, full, a run
in use, a resume under other numerics), in one line on stderr; 130 Ctrl-C, 143 SIGTERM.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence

from dedebate.cli.bench import cmd_bench
from dedebate.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, UsageError, die_usage, say_usage
from dedebate.cli.info import cmd_config, cmd_doctor, cmd_list
from dedebate.cli.parser import build_parser, parse_args
from dedebate.cli.reproduce import cmd_reproduce
from dedebate.cli.results import cmd_compare, cmd_ls, cmd_report
from dedebate.cli.run import cmd_run, cmd_sweep
from dedebate.cli.startup import Terminated, prepare_process
from dedebate.cli.sync import cmd_sync

__all__ = ["EXIT_FAIL", "EXIT_OK", "EXIT_USAGE", "UsageError", "main"]

# OSErrors that mean "this path cannot be used" (the user's to fix), reported in one line
_PATH_ERRNOS = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.ENOTDIR,
        errno.EISDIR,
    }
)

COMMANDS = {
    "run": cmd_run,
    "sweep": cmd_sweep,
    "reproduce": cmd_reproduce,
    "bench": cmd_bench,
    "config": cmd_config,
    "list": cmd_list,
    "doctor": cmd_doctor,
    "compare": cmd_compare,
    "sync": cmd_sync,
    "report": cmd_report,
    "ls": cmd_ls,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dedebate`` console script.

    Args:
        argv: the arguments after the program name; None = ``sys.argv[1:]`` (and the process is
            set up for the command, :mod:`dedebate.cli.startup`).

    Returns:
        The exit code (0, 1 or 2, see the module docstring).
    """
    parser = build_parser()
    try:
        args = parse_args(parser, argv)
    except UsageError as err:
        return say_usage(err)
    if args.version:
        import dedebate

        print(dedebate.__version__)
        return EXIT_OK
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if argv is None:
        problem = prepare_process(args)
        if problem:
            return die_usage(problem)
    from dedebate.lab.memory import MemoryBudgetError
    from dedebate.lab.rundir import RunDirError

    try:
        return COMMANDS[args.command](args)
    except UsageError as err:
        return say_usage(err)
    except (RunDirError, MemoryBudgetError) as err:
        return die_usage(str(err))
    except BrokenPipeError:  # `dedebate compare A B | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141  # as a shell reports a process ended by SIGPIPE
    except OSError as err:
        if err.errno not in _PATH_ERRNOS or not err.filename:
            raise
        where = err.filename if not err.filename2 else f"{err.filename} -> {err.filename2}"
        return die_usage(f"{where}: {err.strerror or err}")
    except KeyboardInterrupt as err:
        if isinstance(err, Terminated):
            print("dedebate: terminated", file=sys.stderr)
            return 143
        print("dedebate: interrupted", file=sys.stderr)
        return 130
