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

Exit codes: 0 success (every claim passed); 1 a claim failed or an experiment raised; 2 a bad
command line or config, a run over its memory_limit, or an output directory that cannot be used
(not writable, a file in the way, a full disk, a run in use): one line on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
# OSErrors that mean "this path cannot be used" (the user's to fix), reported in one line
_PATH_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT,
                          errno.ENOTDIR, errno.EISDIR})


class UsageError(Exception):
    """A bad command line: exit 2 with one line."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command stands so that its clean-up runs as for Ctrl-C."""


def _raise_terminated(signum, frame):
    raise Terminated


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (and exit code 2)."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dedebate", description="Simulate, measure and train AI-safety debate "
                "protocols (doubly-efficient and prover-estimator debate).")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    r = sub.add_parser("run", help="run one experiment from a config file")
    r.add_argument("config", nargs="?", help="configs/NAME.yaml, or a shipped config's NAME")
    r.add_argument("overrides", nargs="*", metavar="key.sub=value",
                   help="override config keys, e.g. params.n=10 seed=3 tracking.mode=disabled")
    r.add_argument("--resume", metavar="RUN_DIR",
                   help="continue RUN_DIR (its config.yaml) from its latest checkpoint")
    r.add_argument("--no-progress", action="store_true", help="hide progress bars")
    r.add_argument("--traceback", action="store_true",
                   help="re-raise an experiment's exception (full traceback)")

    sw = sub.add_parser("sweep", help="run a sweep: the config's sweep block (seeds x axes)")
    sw.add_argument("config", nargs="?", help="configs/NAME.yaml with a sweep: block")
    sw.add_argument("overrides", nargs="*", metavar="key.sub=value",
                    help="override config keys, e.g. sweep.seeds=8 'sweep.axes.p=[0.1,0.9]'")
    sw.add_argument("--processes", type=int, metavar="N",
                    help="run as N local processes of one JAX job (jax.distributed on "
                         "127.0.0.1)")
    sw.add_argument("--distributed", action="store_true",
                    help="this process is one of a cluster launch (srun, or JAX_COORDINATOR_"
                         "ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID set)")
    sw.add_argument("--resume", metavar="SWEEP_DIR",
                    help="continue SWEEP_DIR: static groups already on disk are skipped")
    sw.add_argument("--sweep-dir", metavar="DIR", help=argparse.SUPPRESS)
    sw.add_argument("--no-progress", action="store_true", help="hide progress bars")

    rep = sub.add_parser("reproduce", help="run every experiment and write report.md")
    g = rep.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="size", action="store_const", const="quick",
                   help="tiny sizes (what the tests use)")
    g.add_argument("--full", dest="size", action="store_const", const="full",
                   help="paper-scale sizes (for an accelerator)")
    rep.set_defaults(size=None)
    rep.add_argument("--only", nargs="+", metavar="NAME", help="only these experiments")
    rep.add_argument("--seed", type=int, default=None, help="root seed (default 0)")
    rep.add_argument("--resume", metavar="REPRODUCE_DIR",
                     help="continue REPRODUCE_DIR (its size and seed): experiments that "
                          "finished there are not run again")
    rep.add_argument("--output-dir", default="runs", help="where reproduce-<timestamp>/ goes")
    rep.add_argument("--jobs", default=None, metavar="N|auto",
                     help="experiments run at once, each in its own process; auto: one per CPU "
                          "core where JAX runs on the CPU, else 1 (default: $DEDEBATE_JOBS, "
                          "else auto; 1: one after another in this process, with progress bars)")
    rep.add_argument("--tracking", default="auto",
                     choices=("auto", "offline", "online", "disabled"),
                     help="W&B mode (auto: WANDB_MODE if set, else offline)")
    rep.add_argument("--memory-limit", default="auto", metavar="BYTES",
                     help="every experiment's memory_limit (auto: this machine's available "
                          "memory; or e.g. 64GiB): one estimated over it is a failing row, not "
                          "run (docs/lab.md, \"Memory budget\")")
    rep.add_argument("--no-progress", action="store_true", help="hide progress bars")

    b = sub.add_parser("bench", help="run a benchmark from bench/ and print JSON")
    b.add_argument("name", nargs="?", help="benchmark name (module bench/NAME.py)")
    b.add_argument("--full", action="store_true", help="the large configuration")
    b.add_argument("--out", metavar="FILE", help="also write the JSON to FILE")
    b.add_argument("--list", action="store_true", help="list the benchmarks")

    c = sub.add_parser("config", help="print an experiment's documented config keys")
    c.add_argument("name", help="experiment name")
    c.add_argument("--yaml", action="store_true",
                   help="print the body of configs/NAME.yaml instead (every params field as a "
                        "commented line)")

    sub.add_parser("list", help="list registered experiments")

    d = sub.add_parser("doctor", help="what runs will use: backend, devices, memory, x64, "
                       "compile cache, package versions")
    d.add_argument("--json", action="store_true", help="print it as JSON")

    cmp_ = sub.add_parser("compare", help="two results claim by claim (exit 1 if a verdict "
                          "changed)")
    cmp_.add_argument("a", metavar="A", help="a reproduce or run directory, or its JSON file")
    cmp_.add_argument("b", metavar="B", help="the same for the other result")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON (per "
                      "claim both verdicts, values, intervals, the p-value, changed)")

    rp = sub.add_parser("report", help="render a reproduce directory's report again from its "
                        "report.json")
    rp.add_argument("dir", metavar="DIR", help="a reproduce directory")
    rp.add_argument("--html", metavar="FILE", help="write one self-contained HTML page (plots "
                    "inline) instead of printing the markdown")

    ls = sub.add_parser("ls", help="the run, sweep and reproduce directories under a folder, "
                        "one line each")
    ls.add_argument("dir", nargs="?", default="runs", metavar="DIR",
                    help="the folder to look in (default: runs)")
    ls.add_argument("--json", action="store_true", help="print them as a JSON list")

    sy = sub.add_parser("sync", help="upload every offline W&B run under a directory")
    sy.add_argument("paths", nargs="+", metavar="PATH", help="run, sweep or reproduce directories")
    sy.add_argument("--dry-run", action="store_true", help="only list the offline runs")
    sy.add_argument("--jobs", type=int, default=4, metavar="N", help="runs synced at once (4)")
    sy.add_argument("--timeout", type=float, default=300.0, metavar="S",
                    help="seconds one run's upload may take before it is stopped (300)")
    return p


def _jobs_value(text: str) -> int | str | None:
    """``--jobs``'s value: an integer >= 1, ``"auto"``, or None when it is neither."""
    if text == "auto":
        return text
    return int(text) if text.isdigit() and int(text) >= 1 else None


def _jobs_text(args: argparse.Namespace) -> tuple[str, bool]:
    """``reproduce``'s number of workers as given: ``--jobs``, else a non-empty
    ``$DEDEBATE_JOBS``, else ``auto``; and whether it came from the environment."""
    if args.jobs is None and os.environ.get("DEDEBATE_JOBS", "").strip():
        return os.environ["DEDEBATE_JOBS"].strip(), True
    return ("auto" if args.jobs is None else args.jobs.strip()), False


def _workers_likely(args: argparse.Namespace) -> bool:
    """Whether ``reproduce`` will run worker processes, judged before JAX is imported: ``--jobs``
    (else ``$DEDEBATE_JOBS``) asks for more than one, or it is ``auto`` on a machine with more
    than one usable core where JAX has only its CPU backend (:mod:`dedebate.lab.parallel`). Only
    decides whether to start the fork server early; the number of workers is decided later."""
    from dedebate.lab.parallel import accelerator_plugins_installed, usable_cores

    jobs = _jobs_value(_jobs_text(args)[0])
    if jobs == "auto":
        return len(usable_cores()) > 1 and not accelerator_plugins_installed()
    return jobs is not None and jobs > 1


def _fast_compile(args: argparse.Namespace) -> list[str]:
    """Add the fast-compile XLA flags where :func:`dedebate.lab.fast_compile.wanted` says so:
    ``reproduce --quick`` (or ``--resume`` of a quick one) on a CPU-only installation, or any
    compiling command with ``DEDEBATE_FAST_COMPILE=1``. Returns the flags added; ValueError for
    a bad ``DEDEBATE_FAST_COMPILE``."""
    from dedebate.lab import fast_compile
    from dedebate.lab.parallel import accelerator_plugins_installed

    size = args.size if args.command == "reproduce" else None
    if args.command == "reproduce" and args.resume and size is None:
        with contextlib.suppress(ValueError):  # cmd_reproduce reports a bad directory
            size = _reproduce_header(Path(args.resume))[0]
    if not fast_compile.wanted(size, cpu_only=not accelerator_plugins_installed()):
        return []
    return fast_compile.apply()


def _unavailable_platforms() -> str | None:
    """Why JAX cannot start the platforms ``JAX_PLATFORMS`` asks for, before any run directory
    exists (JAX fails with a bare AssertionError at the first computation); None if it can or
    none is asked for."""
    asked = os.environ.get("JAX_PLATFORMS", "").strip()
    if asked in ("", "cpu"):
        return None
    try:
        import jax

        jax.devices()
    except Exception as err:  # noqa: BLE001 - whatever the plugin raises, one line
        why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        return (f"JAX_PLATFORMS={asked!r}: JAX cannot start it here ({why}); unset "
                "JAX_PLATFORMS, or install JAX's plugin for it (README: Running on a GPU)")
    return None


def _die_usage(msg: str) -> int:
    print(f"dedebate: error: {msg}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def _registry():
    from dedebate.lab.registry import discover_experiments

    return discover_experiments()


def _warn_import_errors(reg) -> None:
    for mod, err in sorted(reg.errors.items()):
        print(f"dedebate: warning: could not import {mod}: {err}", file=sys.stderr)


# ----------------------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    """``dedebate run CONFIG [key.sub=value ...]``: one experiment (or ``--resume RUN_DIR``).

    A config with a ``sweep`` block runs as a sweep in this process. On resume, overrides
    that change the config hash are refused.

    Args:
        args: the parsed command line.

    Returns:
        0 if every claim passed; 1 if a claim failed or the experiment raised; 2 for a bad
        command line or config.
    """
    from dedebate.lab.config import ConfigError, load_config, read_yaml, resolve
    from dedebate.lab.registry import config_path
    from dedebate.lab.runner import run_experiment

    overrides = list(args.overrides)
    if args.resume:
        if args.config is not None:  # with --resume every positional is an override
            overrides.insert(0, args.config)
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").is_file():
            return _die_usage(f"--resume {args.resume}: no config.yaml there (not a run "
                              "directory)")
    elif args.config is None:
        return _die_usage("run needs a config file: dedebate run configs/NAME.yaml "
                          "[key.sub=value ...]")
    reg = _registry()
    try:
        if args.resume:
            raw = read_yaml(run_dir / "config.yaml")
            old = resolve(raw, reg.experiments)
            cfg = resolve({**raw, "resume": True}, reg.experiments, overrides)
            if cfg.config_hash() != old.config_hash():
                raise ConfigError(f"these overrides change the results of {args.resume} "
                                  "(config hash differs); start a new run instead")
        else:
            cfg = load_config(config_path(args.config), reg.experiments, overrides)
    except ConfigError as err:
        if reg.errors and "unknown experiment" in str(err):
            _warn_import_errors(reg)
        return _die_usage(f"config error: {err}")
    module = reg.experiments[cfg.experiment]
    if cfg.sweep is not None:  # a sweep block makes the run a sweep (one process)
        return _sweep(module, cfg, sweep_dir=Path(args.resume).resolve() if args.resume
                      else None, show_progress=not args.no_progress)
    rec = run_experiment(module, cfg, run_dir=Path(args.resume).resolve() if args.resume
                         else None, show_progress=not args.no_progress,
                         raise_errors=args.traceback)
    _print_run_summary(rec)
    if rec.error is not None:
        print(f"dedebate: {cfg.experiment} failed: {rec.error} (traceback in "
              f"{rec.run_dir / 'error.txt'})", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK if rec.passed else EXIT_FAIL


def _p_text(d) -> str:
    """`` p=..`` for a Monte-Carlo row (decided family-wise, see dedebate/lab/claims.py)."""
    if d.get("p_value") is None:
        return ""
    if d.get("family_level") is None:  # a finding or unchecked row: decided outside the family
        return f"; p={d['p_value']:.3g}"
    return f"; p={d['p_value']:.3g} vs level {d['family_level']:.3g} (family of {d['family_size']})"


def _print_run_summary(rec) -> None:
    from dedebate.lab.experiment import gating
    from dedebate.lab.report_render import measured

    print(f"run directory: {rec.run_dir}")
    if rec.result is not None:
        for d in rec.results.get("claims", []):
            verdict = ("PASS" if d["passed"] else "FAIL") if gating(d) else \
                ("FINDING, criterion met" if d["passed"] else "FINDING, criterion not met")
            print(f"  {verdict}  {d['claim']} ({d['source']}): bound "
                  f"{d['bound']}; measured {measured(d)}{_p_text(d)}")
        if not rec.result.claims:
            print("  (no claims)")
    wb = rec.results.get("provenance", {}).get("tracking", {})
    if wb.get("mode") == "offline" and wb.get("wandb_dir"):
        print(f"W&B offline run: {wb['wandb_dir']} (upload with: dedebate sync {rec.run_dir})")


def _sweep_config(args: argparse.Namespace, reg):
    """The sweep's RunConfig from CONFIG or from ``--resume SWEEP_DIR``'s config.yaml."""
    from dedebate.lab.config import ConfigError, load_config, read_yaml, resolve
    from dedebate.lab.registry import config_path

    overrides = list(args.overrides)
    if args.resume:
        if args.config is not None:
            overrides.insert(0, args.config)
        raw = read_yaml(Path(args.resume) / "config.yaml")
        old = resolve(raw, reg.experiments)
        cfg = resolve({**raw, "resume": True}, reg.experiments, overrides)
        if old.sweep is None:
            raise ConfigError(f"--resume {args.resume}: not a sweep directory (its config.yaml "
                              "has no sweep block)")
        if cfg.sweep_hash() != old.sweep_hash():
            raise ConfigError(f"these overrides change the results of {args.resume} "
                              "(sweep hash differs); start a new sweep instead")
    else:
        cfg = load_config(config_path(args.config), reg.experiments, overrides)
    if cfg.sweep is None:
        raise ConfigError("the config has no sweep block; add one (sweep: {seeds: 4, axes: "
                          "{FIELD: [v1, v2]}}) or override it (sweep.seeds=4 "
                          "'sweep.axes.FIELD=[v1,v2]')")
    return cfg


def cmd_sweep(args: argparse.Namespace) -> int:
    """``dedebate sweep CONFIG``: a grid of runs, on one or several processes.

    Args:
        args: the parsed command line.

    Returns:
        0 if the sweep finished; 1 if a point failed; 2 for a bad command line, config or
        multi-process environment.
    """
    from dedebate.lab import distributed as dist
    from dedebate.lab.config import ConfigError

    if args.config is None and not args.resume:
        return _die_usage("sweep needs a config file: dedebate sweep configs/NAME.yaml "
                          "[key.sub=value ...]")
    if args.resume and not (Path(args.resume) / "config.yaml").is_file():
        return _die_usage(f"--resume {args.resume}: no config.yaml there (not a sweep "
                          "directory)")
    if args.processes is not None and args.processes < 1:
        return _die_usage(f"--processes {args.processes}: must be >= 1")
    try:
        penv = dist.process_env(args.distributed)
    except dist.DistributedError as err:
        return _die_usage(str(err))
    if args.processes and args.processes > 1:
        if penv.multi:
            return _die_usage("--processes starts its own processes; it cannot be used inside "
                              "a multi-process launch (JAX_NUM_PROCESSES / srun)")
        return _launch_sweep(args)
    if not penv.multi and int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1:
        print("dedebate: warning: SLURM_NTASKS > 1 but --distributed is not given: this process "
              "runs the whole sweep on its own", file=sys.stderr)
    dist.initialize(penv)  # before any experiment module can touch a JAX backend
    try:
        reg = _registry()
        try:
            cfg = _sweep_config(args, reg)
        except ConfigError as err:
            if reg.errors and "unknown experiment" in str(err):
                _warn_import_errors(reg)
            return _die_usage(f"config error: {err}")
        sweep_dir = args.sweep_dir or args.resume
        return _sweep(reg.experiments[cfg.experiment], cfg,
                      sweep_dir=Path(sweep_dir).resolve() if sweep_dir else None,
                      show_progress=not args.no_progress)
    finally:
        dist.shutdown(penv)


def _launch_sweep(args: argparse.Namespace) -> int:
    """``--processes N``: validate the config, create the sweep directory, start N processes."""
    from dedebate.lab import distributed as dist
    from dedebate.lab.config import ConfigError
    from dedebate.lab.rundir import new_run_dir

    reg = _registry()
    try:
        cfg = _sweep_config(args, reg)
    except ConfigError as err:
        return _die_usage(f"config error: {err}")
    if args.resume:
        sweep_dir = Path(args.resume).resolve()
        argv = ["sweep", "--resume", str(sweep_dir),
                *([args.config] if args.config is not None else []), *args.overrides]
    else:
        sweep_dir = Path(args.sweep_dir).resolve() if args.sweep_dir else \
            new_run_dir(cfg.output_dir, f"{cfg.experiment}-sweep")
        argv = ["sweep", args.config, *args.overrides, "--sweep-dir", str(sweep_dir)]
    if args.no_progress:
        argv.append("--no-progress")
    print(f"dedebate: {args.processes} processes on 127.0.0.1 (jax.distributed)",
          file=sys.stderr, flush=True)
    return dist.launch_local(argv, args.processes)


def _sweep(module, cfg, *, sweep_dir, show_progress: bool) -> int:
    from dedebate.lab.sweep import SweepError, run_sweep

    try:
        rec = run_sweep(module, cfg, sweep_dir=sweep_dir, show_progress=show_progress)
    except SweepError as err:
        return _die_usage(f"sweep error: {err}")
    res = rec.results
    if not res:  # not process 0: it prints
        return EXIT_OK
    p = rec.plan
    print(f"sweep directory: {rec.sweep_dir}")
    rate = f"; {res['rows_per_s']:.4g} runs/s" if res.get("rows_per_s") else ""
    how = (f"{res['compilations']} compilation(s), {res['devices']} device(s), "
           f"{res['processes']} process(es)" if p.vmapped else "each point a full run")
    print(f"  {len(p.points)} points x {len(p.seeds)} seeds = {res['rows']} runs in "
          f"{len(p.groups)} static group(s) ({res['groups_resumed']} resumed); {how}{rate}")
    print(f"  table: {rec.sweep_dir / 'sweep.csv'}; plots: {len(res['plots'])} in "
          f"{rec.sweep_dir / 'plots'}")
    wb = res["provenance"]["tracking"]
    if wb.get("mode") == "offline" and wb.get("wandb_dir"):
        print(f"W&B offline runs: {rec.sweep_dir / 'wandb'} (upload with: dedebate sync "
              f"{rec.sweep_dir})")
    failed = [r for r in rec.rows if r.get("status") == "error"]
    if failed:
        print(f"dedebate: {len(failed)} sweep run(s) raised; see their run directories under "
              f"{rec.sweep_dir / 'points'}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _reproduce_header(report_dir: Path) -> tuple[str, int]:
    """The size and seed a reproduce directory was made with (its report.json), or ValueError
    with the reason in words; read only, so a bad report is refused before it is rewritten."""
    from dedebate.lab.config_schema import SIZES
    from dedebate.lab.rundir import read_json

    path = report_dir / "report.json"
    try:
        data = read_json(path)
    except FileNotFoundError:
        raise ValueError("no report.json there (not a reproduce directory)") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read {path}: {err}") from None
    prov = data.get("provenance") if isinstance(data, dict) else None
    size, seed = (prov.get("size"), prov.get("seed")) if isinstance(prov, dict) else (None, None)
    if size is None or isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{path} names no size and seed (not a reproduce report)")
    if size not in SIZES:
        raise ValueError(f"{path}: its provenance.size {size!r} is not one of "
                         f"{', '.join(SIZES)}; the report is left as it is")
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
        try:
            size, seed = _reproduce_header(Path(args.resume))
        except ValueError as err:
            return _die_usage(f"--resume {args.resume}: {err}")
        for flag, given, stored in (("size", args.size, size), ("--seed", args.seed, seed)):
            if given is not None and given != stored:
                return _die_usage(f"--resume {args.resume}: it was reproduced with {flag} "
                                  f"{stored!r}, not {given!r}; leave the option out or start a "
                                  "new reproduce")
        args.size, args.seed = size, seed
    args.size = "default" if args.size is None else args.size
    args.seed = 0 if args.seed is None else args.seed
    if args.seed < 0 or args.seed >= 2**32:
        return _die_usage(f"--seed {args.seed}: must be an integer in [0, 2^32)")
    from dedebate.lab.config_schema import parse_limit

    try:
        parse_limit(args.memory_limit)
    except ValueError as err:
        return _die_usage(f"--memory-limit: {err}")
    text, from_env = _jobs_text(args)
    jobs = _jobs_value(text)
    if jobs is None and from_env:
        return _die_usage(f"DEDEBATE_JOBS={text!r}: must be an integer >= 1 or auto (the "
                          "default of --jobs)")
    if jobs is None:
        return _die_usage(f"--jobs {args.jobs}: must be an integer >= 1 or auto")
    reg = _registry()
    if args.only:
        unknown = [n for n in args.only if n not in reg.experiments]
        if unknown:
            _warn_import_errors(reg)
            return _die_usage(f"--only: unknown experiment(s) {', '.join(unknown)}; registered: "
                              f"{', '.join(reg.names()) or '(none)'}")
    _warn_import_errors(reg)
    if jobs == "auto":
        from dedebate.lab.parallel import auto_jobs

        jobs = auto_jobs()
    try:
        outcome = reproduce(reg, size=args.size, seed=args.seed, output_dir=args.output_dir,
                            only=args.only, tracking_mode=args.tracking,
                            show_progress=not args.no_progress, resume_dir=args.resume,
                            jobs=jobs, memory_limit=args.memory_limit)
    except ValueError as err:
        print(f"dedebate: error: {err}", file=sys.stderr)
        return EXIT_FAIL
    n_pass = sum(e.counts()[0] for e in outcome.entries)
    n_claims = sum(e.counts()[1] for e in outcome.entries)
    failed = [e.name for e in outcome.entries if e.verdict == "FAIL"]
    print(f"report: {outcome.report_dir / 'report.md'}")
    print(f"{'PASS' if outcome.passed else 'FAIL'}: {n_pass}/{n_claims} claims pass"
          + (f"; failing experiments: {', '.join(failed)}" if failed else ""))
    return EXIT_OK if outcome.passed else EXIT_FAIL


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
        print("\n".join(f"{n}\t{d}" for n, d in described.items()) if names
              else "(no benchmarks)")
        return EXIT_OK
    available = ", ".join(names) if names else "(none)"
    if not args.name:
        return _die_usage(f"bench needs a NAME; available: {available}")
    if args.name not in names:
        return _die_usage(f"unknown benchmark {args.name!r}; available: {available}")
    module = importlib.import_module(f"{bench_package()}.{args.name}")
    if not callable(getattr(module, "run", None)):
        return _die_usage(f"benchmark {args.name!r} defines no run(full: bool = False)")
    result = module.run(full=args.full)
    text = json.dumps(jsonable(result), indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    """``dedebate config NAME [--yaml]``: the documented config keys, or the config file.

    Args:
        args: the parsed command line.

    Returns:
        0, or 2 for an unknown experiment.
    """
    from dedebate.lab.config_docs import render_config_docs, render_config_file

    reg = _registry()
    if args.name not in reg.experiments:
        _warn_import_errors(reg)
        return _die_usage(f"unknown experiment {args.name!r}; registered: "
                          f"{', '.join(reg.names()) or '(none)'}")
    module = reg.experiments[args.name]
    sys.stdout.write(render_config_file(module) if args.yaml
                     else render_config_docs(module) + "\n")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    """``dedebate list``: the registered experiments, one ``NAME<TAB>TITLE`` line each.

    Args:
        args: the parsed command line.

    Returns:
        0.
    """
    reg = _registry()
    _warn_import_errors(reg)
    for name in reg.names():
        print(f"{name}\t{getattr(reg.experiments[name], 'TITLE', '')}")
    if not reg.experiments:
        print("(no experiments registered)", file=sys.stderr)
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    """``dedebate doctor [--json]``: backend, devices, caches and versions.

    Args:
        args: the parsed command line.

    Returns:
        0.
    """
    from dedebate.lab import doctor

    info = doctor.report()
    print(json.dumps(info, indent=2) if args.json else doctor.render(info))
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    """``dedebate compare A B [--json]``: two results side by side, claim by claim.

    Args:
        args: the parsed command line.

    Returns:
        0 if no gating verdict changed; 1 if one did; 2 for a path without a readable
        result, or when the comparison itself fails (one line, never exit 1).
    """
    from dedebate.lab.compare import CompareError, comparison, render

    try:
        cmp = comparison(args.a, args.b)
        text = json.dumps(cmp, indent=2, allow_nan=False) if args.json else render(cmp)
    except CompareError as err:
        return _die_usage(str(err))
    except Exception as err:  # noqa: BLE001 - exit 1 means "a verdict changed", never a crash
        return _die_usage(f"compare {args.a} {args.b} failed: {type(err).__name__}: "
                          f"{' '.join(str(err).split())} (a bug in dedebate: please report it)")
    print(text)
    return EXIT_FAIL if cmp["changed"] else EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """``dedebate report DIR [--html FILE]``: a reproduce report rendered again.

    Args:
        args: the parsed command line.

    Returns:
        0, or 2 for a directory without a readable report.json.
    """
    from dedebate.lab.rerender import ReportError, load_report, markdown, to_html
    from dedebate.lab.rundir import write_text

    try:
        where, data = load_report(args.dir)
    except ReportError as err:
        return _die_usage(str(err))
    md = markdown(data)
    if not args.html:
        print(md, end="")
        return EXIT_OK
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

    try:
        entries = listing(args.dir)
    except RecordError as err:
        return _die_usage(str(err))
    if args.json:
        print(json.dumps(entries, indent=2))
    elif entries:
        print(render(entries), end="")
    else:
        print(f"no run, sweep or reproduce directories under {args.dir}", file=sys.stderr)
    return EXIT_OK


def cmd_sync(args: argparse.Namespace) -> int:
    """``dedebate sync PATH ...``: upload every offline W&B run under the paths.

    Args:
        args: the parsed command line.

    Returns:
        0 if every run synced (or there was none); 1 if one failed or ran past ``--timeout``;
        2 for a bad path, ``--jobs`` or ``--timeout``.
    """
    from dedebate.lab.sync import by_run_id, find_offline_runs, sync_all

    if args.jobs < 1:
        return _die_usage(f"--jobs={args.jobs}: must be at least 1")
    if not 0 < args.timeout < float("inf"):
        return _die_usage(f"--timeout={args.timeout}: must be a positive number of seconds")
    runs = []
    for path in args.paths:
        if not Path(path).expanduser().is_dir():
            return _die_usage(f"{path}: not a directory")
        runs += find_offline_runs(path)
    if not runs:
        print(f"no offline W&B runs under {', '.join(args.paths)}", file=sys.stderr)
        return EXIT_OK
    if args.dry_run:
        print("\n".join(str(r) for r in runs))
        print(f"{len(runs)} offline run(s); run without --dry-run to sync them", file=sys.stderr)
        return EXIT_OK
    failed = sync_all(runs, jobs=args.jobs, timeout=args.timeout,
                      report=lambda line: print(line, flush=True))
    n = len(by_run_id(runs))
    print(f"{n - failed}/{n} W&B run(s) synced", file=sys.stderr)
    return EXIT_FAIL if failed else EXIT_OK


COMMANDS = {"run": cmd_run, "sweep": cmd_sweep, "reproduce": cmd_reproduce, "bench": cmd_bench,
            "config": cmd_config, "list": cmd_list, "doctor": cmd_doctor,
            "compare": cmd_compare, "sync": cmd_sync, "report": cmd_report, "ls": cmd_ls}


# Commands that compile JAX programs: the ones the persistent compilation cache speeds up.
COMPILING = frozenset({"run", "sweep", "reproduce", "bench"})


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dedebate`` console script.

    Args:
        argv: the arguments after the program name; None = ``sys.argv[1:]``.

    Returns:
        The exit code (0, 1 or 2, see the module docstring).
    """
    parser = _parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            # `run` takes overrides before or after its options (argparse's subcommands cannot
            # intermix positionals and options by themselves).
            if args.command in ("run", "sweep") and not any(e.startswith("-") for e in extra):
                args.overrides = [*args.overrides, *extra]
            else:
                raise UsageError(f"dedebate: unrecognized arguments: {' '.join(extra)} "
                                 "(see dedebate --help)")
    except UsageError as err:
        print(str(err), file=sys.stderr)
        return EXIT_USAGE
    if args.version:
        import dedebate

        print(dedebate.__version__)
        return EXIT_OK
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if argv is None:
        # SIGTERM stops the command as Ctrl-C does: its clean-up runs (reproduce stops its
        # workers) and it exits 143, instead of dying where it stands.
        signal.signal(signal.SIGTERM, _raise_terminated)
        # A process killed by a fatal signal (SIGABRT from a native library, SIGSEGV) prints
        # the Python stack it died in as its last lines, instead of nothing.
        import faulthandler

        faulthandler.enable()
        # Figures are only ever saved to files here: the non-interactive backend, set by the lab
        # (experiments do not choose one, so in a notebook their plots stay inline). An
        # MPLBACKEND the user set wins.
        os.environ.setdefault("MPLBACKEND", "Agg")
    if argv is None and args.command in COMPILING:
        # Before JAX starts (here and in reproduce's workers): the quick sizes compile for
        # speed of compilation (dedebate/lab/fast_compile.py).
        try:
            _fast_compile(args)
        except ValueError as err:
            return _die_usage(str(err))
    if argv is None and args.command in COMPILING | {"doctor"}:
        problem = _unavailable_platforms()
        if problem:
            return _die_usage(problem)
    if argv is None and args.command == "reproduce" and _workers_likely(args):
        # Its worker processes import JAX and the lab in a fork server that starts now, beside
        # this process's own imports and W&B start-up (dedebate/lab/parallel.py).
        from dedebate.lab.parallel import prestart

        prestart()
    if argv is None and args.command in COMPILING:
        # The process entry point (console script, python -m dedebate.cli) turns on JAX's
        # persistent compilation cache (dedebate/lab/compile_cache.py); main([...]) called from
        # Python, as the tests do, leaves the caller's JAX configuration alone.
        from dedebate.lab.compile_cache import enable

        enable()
    from dedebate.lab.memory import MemoryBudgetError
    from dedebate.lab.rundir import RunDirError

    try:
        return COMMANDS[args.command](args)
    except UsageError as err:
        print(str(err), file=sys.stderr)
        return EXIT_USAGE
    except (RunDirError, MemoryBudgetError) as err:
        return _die_usage(str(err))
    except OSError as err:
        if err.errno not in _PATH_ERRNOS or not err.filename:
            raise
        where = err.filename if not err.filename2 else f"{err.filename} -> {err.filename2}"
        return _die_usage(f"{where}: {err.strerror or err}")
    except KeyboardInterrupt as err:
        if isinstance(err, Terminated):
            print("dedebate: terminated", file=sys.stderr)
            return 143
        print("dedebate: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
