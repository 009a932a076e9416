"""The ``dedebate`` command line's argparse parser: every command, its options and help."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from dedebate.cli.common import UsageError


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (and exit code 2)."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``dedebate``'s arguments; errors raise :class:`UsageError`."""
    p = _Parser(
        prog="dedebate",
        description="Simulate, measure and train AI-safety debate "
        "protocols (doubly-efficient and prover-estimator debate).",
    )
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    r = sub.add_parser("run", help="run one experiment from a config file")
    r.add_argument("config", nargs="?", help="configs/NAME.yaml, or a shipped config's NAME")
    r.add_argument(
        "overrides",
        nargs="*",
        metavar="key.sub=value",
        help="override config keys, e.g. params.n=10 seed=3 tracking.mode=disabled",
    )
    r.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue RUN_DIR (its config.yaml) from its latest checkpoint",
    )
    r.add_argument("--no-progress", action="store_true", help="hide progress bars")
    r.add_argument(
        "--traceback",
        action="store_true",
        help="re-raise an experiment's exception (full traceback)",
    )

    sw = sub.add_parser("sweep", help="run a sweep: the config's sweep block (seeds x axes)")
    sw.add_argument("config", nargs="?", help="configs/NAME.yaml with a sweep: block")
    sw.add_argument(
        "overrides",
        nargs="*",
        metavar="key.sub=value",
        help="override config keys, e.g. sweep.seeds=8 'sweep.axes.p=[0.1,0.9]'",
    )
    sw.add_argument(
        "--processes",
        type=int,
        metavar="N",
        help="run as N local processes of one JAX job (jax.distributed on 127.0.0.1)",
    )
    sw.add_argument(
        "--distributed",
        action="store_true",
        help="this process is one of a cluster launch (srun, or JAX_COORDINATOR_"
        "ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID set)",
    )
    sw.add_argument(
        "--resume",
        metavar="SWEEP_DIR",
        help="continue SWEEP_DIR: static groups already on disk are skipped",
    )
    sw.add_argument("--sweep-dir", metavar="DIR", help=argparse.SUPPRESS)
    sw.add_argument("--no-progress", action="store_true", help="hide progress bars")

    rep = sub.add_parser("reproduce", help="run every experiment and write report.md")
    g = rep.add_mutually_exclusive_group()
    g.add_argument(
        "--quick",
        dest="size",
        action="store_const",
        const="quick",
        help="tiny sizes (what the tests use)",
    )
    g.add_argument(
        "--full",
        dest="size",
        action="store_const",
        const="full",
        help="paper-scale sizes (for an accelerator)",
    )
    rep.set_defaults(size=None)
    rep.add_argument("--only", nargs="+", metavar="NAME", help="only these experiments")
    rep.add_argument("--seed", type=int, default=None, help="root seed (default 0)")
    rep.add_argument(
        "--resume",
        metavar="REPRODUCE_DIR",
        help="continue REPRODUCE_DIR (its size and seed): experiments that "
        "finished there are not run again",
    )
    rep.add_argument("--output-dir", default="runs", help="where reproduce-<timestamp>/ goes")
    rep.add_argument(
        "--jobs",
        default=None,
        metavar="N|auto",
        help="experiments run at once, each in its own process; auto: one per CPU "
        "core where JAX runs on the CPU, else 1 (default: $DEDEBATE_JOBS, "
        "else auto; 1: one after another in this process, with progress bars)",
    )
    rep.add_argument(
        "--tracking",
        default="auto",
        choices=("auto", "offline", "online", "disabled"),
        help="W&B mode (auto: WANDB_MODE if set, else offline)",
    )
    rep.add_argument(
        "--memory-limit",
        default="auto",
        metavar="BYTES",
        help="every experiment's memory_limit (auto: this machine's available "
        "memory; or e.g. 64GiB): one estimated over it is a failing row, not "
        'run (docs/lab.md, "Memory budget")',
    )
    rep.add_argument("--no-progress", action="store_true", help="hide progress bars")

    b = sub.add_parser("bench", help="run a benchmark from bench/ and print JSON")
    b.add_argument("name", nargs="?", help="benchmark name (module bench/NAME.py)")
    b.add_argument("--full", action="store_true", help="the large configuration")
    b.add_argument("--out", metavar="FILE", help="also write the JSON to FILE")
    b.add_argument("--list", action="store_true", help="list the benchmarks")

    c = sub.add_parser("config", help="print an experiment's documented config keys")
    c.add_argument("name", help="experiment name")
    c.add_argument(
        "--yaml",
        action="store_true",
        help="print the body of configs/NAME.yaml instead (every params field as a commented line)",
    )

    sub.add_parser("list", help="list registered experiments")

    d = sub.add_parser(
        "doctor",
        help="what runs will use: backend, devices, memory, x64, compile cache, package versions",
    )
    d.add_argument("--json", action="store_true", help="print it as JSON")

    cmp_ = sub.add_parser(
        "compare", help="two results claim by claim (exit 1 if a verdict changed)"
    )
    cmp_.add_argument("a", metavar="A", help="a reproduce or run directory, or its JSON file")
    cmp_.add_argument("b", metavar="B", help="the same for the other result")
    cmp_.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as JSON (per "
        "claim both verdicts, values, intervals, the p-value, changed)",
    )

    rp = sub.add_parser(
        "report", help="render a reproduce directory's report again from its report.json"
    )
    rp.add_argument("dir", metavar="DIR", help="a reproduce directory")
    rp.add_argument(
        "--html",
        metavar="FILE",
        help="write one self-contained HTML page (plots inline) instead of printing the markdown",
    )

    ls = sub.add_parser(
        "ls", help="the run, sweep and reproduce directories under a folder, one line each"
    )
    ls.add_argument(
        "dir",
        nargs="?",
        default=None,
        metavar="DIR",
        help="the folder to look in (default: runs)",
    )
    ls.add_argument("--json", action="store_true", help="print them as a JSON list")

    sy = sub.add_parser("sync", help="upload every offline W&B run under a directory")
    sy.add_argument("paths", nargs="+", metavar="PATH", help="run, sweep or reproduce directories")
    sy.add_argument("--dry-run", action="store_true", help="only list the offline runs")
    sy.add_argument("--jobs", type=int, default=4, metavar="N", help="runs synced at once (4)")
    sy.add_argument(
        "--no-probe",
        action="store_true",
        help="upload without first asking the W&B server whether it answers (3 s)",
    )
    sy.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds one run's upload may take before it is stopped (300)",
    )
    return p


# Top-level config keys (dedebate.lab.config_schema.RunConfig), written as flags by mistake.
_CONFIG_KEYS = ("experiment", "seed", "size", "output_dir", "resume", "tracking", "params")
_SIZE_FLAGS = ("--quick", "--default", "--full")


def _flag_hint(command: str | None, extra: Sequence[str]) -> str:
    """What ``run``/``sweep`` take instead of an unknown flag that looks like a config key."""
    if command not in ("run", "sweep"):
        return ""
    for arg in extra:
        if arg in _SIZE_FLAGS:
            return f"; the size is a config key: write size={arg[2:]}"
        if arg.split("=")[0] in ("--set", "--override"):
            return "; overrides take no flag: write key.sub=value (e.g. params.n=10 seed=3)"
        name = arg.lstrip("-").split("=")[0]
        if arg.startswith("--") and name.replace("-", "_").split(".")[0] in _CONFIG_KEYS:
            key, value = name.replace("-", "_"), arg.partition("=")[2] or "VALUE"
            return f"; config keys take no dashes: write {key}={value}"
    return ""


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed (None: ``sys.argv[1:]``); UsageError for a bad command line."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        # `run` takes overrides before or after its options (argparse's subcommands cannot
        # intermix positionals and options by themselves).
        if args.command in ("run", "sweep") and not any(e.startswith("-") for e in extra):
            args.overrides = [*args.overrides, *extra]
        else:
            raise UsageError(
                f"dedebate: unrecognized arguments: {' '.join(extra)} (see dedebate "
                f"{args.command + ' ' if args.command else ''}--help)"
                + _flag_hint(args.command, extra)
            )
    return args
