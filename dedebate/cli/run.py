"""``dedebate run`` and ``dedebate sweep``: one experiment, or a grid of runs, and their summaries
(``--resume`` continues either from its directory)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dedebate.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    die_usage,
    load_registry,
    warn_import_errors,
)


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
    from dedebate.lab.config import ConfigError, load_config, resolve
    from dedebate.lab.folder_guard import check_run_dir
    from dedebate.lab.registry import config_path
    from dedebate.lab.rundir import read_config
    from dedebate.lab.runner import run_experiment

    overrides = list(args.overrides)
    if args.resume:
        if args.config is not None:  # with --resume every positional is an override
            overrides.insert(0, args.config)
        run_dir = Path(args.resume)
        check_run_dir(run_dir)  # before config.yaml is read: no link out, no FIFO (exit 2)
        if not (run_dir / "config.yaml").is_file():
            return die_usage(f"--resume {args.resume}: {_not_a_folder(run_dir, 'run')}")
    elif args.config is None:
        return die_usage(
            "run needs a config file: dedebate run configs/NAME.yaml [key.sub=value ...]"
        )
    reg = load_registry()
    try:
        if args.resume:
            raw = offline_unless_asked(read_config(run_dir / "config.yaml"), overrides, args.resume)
            old = _resolve_stored(raw, run_dir, reg)
            cfg = resolve({**raw, "resume": True}, reg.experiments, overrides)
            _check_resume_kept(cfg, args.resume)
            if cfg.config_hash() != old.config_hash():
                raise ConfigError(
                    f"these overrides change the results of {args.resume} "
                    "(config hash differs); start a new run instead"
                )
            if (cfg.sweep is None) != (old.sweep is None):
                was, now = ("run", "sweep") if old.sweep is None else ("sweep", "run")
                raise ConfigError(
                    f"{args.resume} holds a {was}, and these overrides make it a {now}; "
                    f"start a new {now} instead"
                )
        else:
            cfg = load_config(config_path(args.config), reg.experiments, overrides)
    except ConfigError as err:
        if reg.errors and "unknown experiment" in str(err):
            warn_import_errors(reg)
        return die_usage(f"config error: {err}{_not_found_hint(err, args.config)}")
    module = reg.experiments[cfg.experiment]
    if cfg.sweep is not None:  # a sweep block makes the run a sweep (one process)
        return _sweep(
            module,
            cfg,
            sweep_dir=Path(args.resume).resolve() if args.resume else None,
            show_progress=not args.no_progress,
        )
    rec = run_experiment(
        module,
        cfg,
        run_dir=Path(args.resume).resolve() if args.resume else None,
        show_progress=not args.no_progress,
        raise_errors=args.traceback,
    )
    _print_run_summary(rec)
    if rec.error is not None:
        from dedebate.lab.report_render import one_line  # an error may quote a folder's text

        print(
            f"dedebate: {cfg.experiment} failed: {one_line(rec.error)} (traceback in "
            f"{rec.run_dir / 'error.txt'})",
            file=sys.stderr,
        )
        return EXIT_FAIL
    return EXIT_OK if rec.passed else EXIT_FAIL


def _p_text(d) -> str:
    """`` p=..`` for a Monte-Carlo row (decided family-wise, see dedebate/lab/claims.py)."""
    from dedebate.lab.report_render import unresolved

    if d.get("p_value") is None:
        return ""
    if d.get("family_level") is None:  # a finding or unchecked row: decided outside the family
        return f"; p={d['p_value']:.3g}"
    text = f"; p={d['p_value']:.3g} vs level {d['family_level']:.3g} (family of {d['family_size']})"
    return text + ("; not resolved: the interval reaches past the bound" if unresolved(d) else "")


def _print_run_summary(rec) -> None:
    from dedebate.lab.experiment import gating
    from dedebate.lab.report_render import measured, one_line, printable

    print(f"run directory: {printable(rec.run_dir)}")
    if rec.result is not None:
        for d in rec.results.get("claims", []):
            verdict = (
                ("PASS" if d["passed"] else "FAIL")
                if gating(d)
                else ("FINDING, criterion met" if d["passed"] else "FINDING, criterion not met")
            )
            text = f"{d['claim']} ({d['source']}): bound {d['bound']}; measured {measured(d)}"
            print(f"  {verdict}  {one_line(text + _p_text(d))}")
        if not rec.result.claims:
            print("  (no claims)")
        gate = [d for d in rec.results.get("claims", []) if gating(d)]
        n_pass = sum(bool(d["passed"]) for d in gate)
        print(f"{'PASS' if rec.passed else 'FAIL'}: {n_pass}/{len(gate)} claims pass")
    wb = rec.results.get("provenance", {}).get("tracking", {})
    if wb.get("mode") == "offline" and wb.get("wandb_dir"):
        where = Path(rec.run_dir) / "wandb"  # a shared record's own path names its machine's
        if Path(str(wb["wandb_dir"])).is_relative_to(Path(rec.run_dir).resolve()):
            where = Path(str(wb["wandb_dir"]))
        print(
            f"W&B offline run: {printable(where)} (upload with: dedebate sync "
            f"{printable(rec.run_dir)})"
        )


MAX_LOCAL_PROCESSES = 64
"""The most processes ``sweep --processes N`` starts on one machine (each holds a JAX runtime)."""


def offline_unless_asked(raw, overrides: list[str], where) -> dict:
    """A resumed folder's own ``tracking.mode: online`` tracks offline unless the command line
    sets ``tracking.mode``: a shared folder must not send its run, under the reader's W&B login,
    to an entity the folder names (``dedebate sync`` uploads it later, with its checks)."""
    from dedebate.lab.config_types import show_value

    tracking = raw.get("tracking") if isinstance(raw, dict) else None
    if not isinstance(tracking, dict) or tracking.get("mode") != "online":
        return raw
    if any(o.split("=", 1)[0].strip() in ("tracking", "tracking.mode") for o in overrides):
        return raw
    print(
        f"dedebate: {where}'s config.yaml asks for online W&B tracking "
        f"(entity {show_value(tracking.get('entity'))}, project "
        f"{show_value(tracking.get('project'))}); resuming offline: add tracking.mode=online to "
        "track online",
        file=sys.stderr,
    )
    return {**raw, "tracking": {**tracking, "mode": "offline"}}


def _not_a_folder(path: Path, kind: str) -> str:
    """Why ``path`` is not a run's or sweep's folder, in words."""
    if not path.exists():
        return "no such directory"
    if not path.is_dir():
        return f"not a directory (--resume takes the {kind}'s folder)"
    return f"no config.yaml there (not a {kind} directory)"


def _not_found_hint(err: Exception, given: str | None) -> str:
    """For a config file not found: an override given in its place, or the shipped configs."""
    from dedebate.lab.registry import shipped_configs_dir

    shipped = shipped_configs_dir()
    if not str(err).startswith("config file not found") or shipped is None:
        return ""
    if given and "=" in given and not given.endswith((".yaml", ".yml")):
        return f" ({given!r} is an override: name the config before it, NAME {given})"
    names = ", ".join(sorted(p.stem for p in shipped.glob("*.yaml")))
    sweeps = ", ".join(sorted(f"sweeps/{p.stem}" for p in shipped.glob("sweeps/*.yaml")))
    return f"; a shipped config by name: {names}; a shipped sweep: {sweeps} (or a YAML file's path)"


def _check_resume_kept(cfg, where: str) -> None:
    """Refuse ``resume=false`` with ``--resume``: it recomputed the folder in place."""
    from dedebate.lab.config import ConfigError

    if not cfg.resume:
        raise ConfigError(
            f"resume=false contradicts --resume {where} (it would recompute that folder in "
            "place); drop the override, or start a new run without --resume"
        )


def _resolve_stored(raw: dict, folder, reg):
    """The config a run or sweep folder's config.yaml holds, resolved; an error names the file."""
    from dedebate.lab.config import ConfigError, resolve

    try:
        return resolve(raw, reg.experiments)
    except ConfigError as err:
        raise ConfigError(f"{Path(folder) / 'config.yaml'}: {err}") from None


def _sweep_config(args: argparse.Namespace, reg):
    """The sweep's RunConfig from CONFIG or from ``--resume SWEEP_DIR``'s config.yaml."""
    from dedebate.lab.config import ConfigError, load_config, resolve
    from dedebate.lab.folder_guard import check_run_dir
    from dedebate.lab.registry import config_path
    from dedebate.lab.rundir import read_config

    overrides = list(args.overrides)
    if args.resume:
        if args.config is not None:
            overrides.insert(0, args.config)
        check_run_dir(args.resume)  # before config.yaml is read: no link out, no FIFO (exit 2)
        raw = offline_unless_asked(
            read_config(Path(args.resume) / "config.yaml"), overrides, args.resume
        )
        old = _resolve_stored(raw, args.resume, reg)
        cfg = resolve({**raw, "resume": True}, reg.experiments, overrides)
        _check_resume_kept(cfg, args.resume)
        if old.sweep is None:
            raise ConfigError(
                f"--resume {args.resume}: not a sweep directory (its config.yaml "
                "has no sweep block)"
            )
        if cfg.sweep_hash() != old.sweep_hash():
            raise ConfigError(
                f"these overrides change the results of {args.resume} "
                "(sweep hash differs); start a new sweep instead"
            )
    else:
        cfg = load_config(config_path(args.config), reg.experiments, overrides)
    if cfg.sweep is None:
        raise ConfigError(
            "the config has no sweep block; add one (sweep: {seeds: 4, axes: "
            "{FIELD: [v1, v2]}}) or override it (sweep.seeds=4 "
            "'sweep.axes.FIELD=[v1,v2]')"
        )
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

    if args.config is None and not args.resume:
        return die_usage(
            "sweep needs a config file: dedebate sweep configs/NAME.yaml [key.sub=value ...]"
        )
    if args.resume and not (Path(args.resume) / "config.yaml").is_file():
        return die_usage(f"--resume {args.resume}: {_not_a_folder(Path(args.resume), 'sweep')}")
    if args.processes is not None and not 1 <= args.processes <= MAX_LOCAL_PROCESSES:
        return die_usage(
            f"--processes {args.processes}: must lie in [1, {MAX_LOCAL_PROCESSES}] (processes "
            "on this machine; for more, launch them with srun or JAX_NUM_PROCESSES)"
        )
    try:
        penv = dist.process_env(args.distributed)
    except dist.DistributedError as err:
        return die_usage(str(err))
    if args.processes and args.processes > 1:
        if penv.multi:
            return die_usage(
                "--processes starts its own processes; it cannot be used inside "
                "a multi-process launch (JAX_NUM_PROCESSES / srun)"
            )
        return _launch_sweep(args)
    if not penv.multi and (dist.slurm_tasks() or 1) > 1:
        print(
            "dedebate: warning: SLURM_NTASKS > 1 but --distributed is not given: this process "
            "runs the whole sweep on its own",
            file=sys.stderr,
        )
    try:
        dist.initialize(penv)  # before any experiment module can touch a JAX backend
    except dist.DistributedError as err:
        return die_usage(str(err))
    # shut down only after a clean end: after an error or a stop, its barrier would wait for
    # peers that may have gone
    code = _sweep_job(args)
    dist.shutdown(penv)
    return code


def _sweep_job(args: argparse.Namespace) -> int:
    """The sweep of ``args`` in this process (one of the job's, where there are several)."""
    from dedebate.lab.config import ConfigError

    reg = load_registry()
    try:
        cfg = _sweep_config(args, reg)
    except ConfigError as err:
        if reg.errors and "unknown experiment" in str(err):
            warn_import_errors(reg)
        return die_usage(f"config error: {err}{_not_found_hint(err, args.config)}")
    sweep_dir = args.sweep_dir or args.resume
    return _sweep(
        reg.experiments[cfg.experiment],
        cfg,
        sweep_dir=Path(sweep_dir).resolve() if sweep_dir else None,
        show_progress=not args.no_progress,
    )


def _launch_sweep(args: argparse.Namespace) -> int:
    """``--processes N``: validate the config, create the sweep directory, start N processes."""
    from dedebate.lab import distributed as dist
    from dedebate.lab.config import ConfigError
    from dedebate.lab.folder_guard import held
    from dedebate.lab.rundir import eprint, new_run_dir, record_status
    from dedebate.lab.sweep import find_sweep_dir

    reg = load_registry()
    try:
        cfg = _sweep_config(args, reg)
    except ConfigError as err:
        return die_usage(f"config error: {err}")
    if args.resume:
        sweep_dir = Path(args.resume).resolve()
        argv = [
            "sweep",
            "--resume",
            str(sweep_dir),
            *([args.config] if args.config is not None else []),
            *args.overrides,
        ]
    else:  # resume=true resumes the newest matching sweep, as one process does (run_sweep)
        found = find_sweep_dir(cfg) if cfg.resume and not args.sweep_dir else None
        sweep_dir = (
            Path(args.sweep_dir).resolve()
            if args.sweep_dir
            else found or new_run_dir(cfg.output_dir, f"{cfg.experiment}-sweep")
        )
        argv = ["sweep", args.config, *args.overrides, "--sweep-dir", str(sweep_dir)]
    if args.no_progress:
        argv.append("--no-progress")
    if held(sweep_dir):  # refused at once, not after the processes have started
        return die_usage(f"run in use by another process: {sweep_dir} is locked; wait or stop it")
    print(
        f"dedebate: {args.processes} processes on 127.0.0.1 (jax.distributed)",
        file=sys.stderr,
        flush=True,
    )
    code = dist.launch_local(argv, args.processes)
    if code not in (EXIT_OK, EXIT_USAGE) and record_status(sweep_dir / "results.json") != "ok":
        # its processes printed theirs without --processes, or died unable to print
        eprint(
            f"dedebate: resume the sweep with: dedebate sweep --resume {sweep_dir} --processes "
            f"{args.processes}"
        )
    return code


def _sweep(module, cfg, *, sweep_dir, show_progress: bool) -> int:
    from dedebate.lab.sweep import SweepError, run_sweep

    try:
        rec = run_sweep(module, cfg, sweep_dir=sweep_dir, show_progress=show_progress)
    except SweepError as err:
        return die_usage(f"sweep error: {err}")
    res = rec.results
    if not res:  # not process 0: it prints
        return EXIT_OK
    p = rec.plan
    print(f"sweep directory: {rec.sweep_dir}")
    rate = f"; {res['rows_per_s']:.4g} runs/s" if res.get("rows_per_s") else ""
    how = (
        f"{res['compilations']} compilation(s), {res['devices']} device(s), "
        f"{res['processes']} process(es)"
        if p.vmapped
        else "each point a full run"
    )
    print(
        f"  {len(p.points)} points x {len(p.seeds)} seeds = {res['rows']} runs in "
        f"{len(p.groups)} static group(s) ({res['groups_resumed']} resumed); {how}{rate}"
    )
    print(
        f"  table: {rec.sweep_dir / 'sweep.csv'}; plots: {len(res['plots'])} in "
        f"{rec.sweep_dir / 'plots'}"
    )
    wb = res["provenance"]["tracking"]
    if wb.get("mode") == "offline" and wb.get("wandb_dir"):
        print(
            f"W&B offline runs: {rec.sweep_dir / 'wandb'} (upload with: dedebate sync "
            f"{rec.sweep_dir})"
        )
    failed = [r for r in rec.rows if r.get("status") == "error"]
    if failed:
        print(
            f"dedebate: {len(failed)} sweep run(s) raised; see their run directories under "
            f"{rec.sweep_dir / 'points'}",
            file=sys.stderr,
        )
        return EXIT_FAIL
    return EXIT_OK
