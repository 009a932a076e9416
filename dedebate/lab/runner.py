"""Run one experiment: run directory, context, local results first, then W&B.

:func:`run_experiment` writes ``config.yaml``, runs the experiment
(:func:`~dedebate.lab.evaluate.run_module`) with a :class:`~dedebate.lab.context.LabContext`,
writes tables and ``results.json`` and only then the W&B summary and artifact. A run directory
is locked while a process runs in it; a failure is recorded (``status: "error"``,
``error.txt``) without replacing a finished run's results.
Resuming a finished run (same config hash, every listed file on disk) is a no-op that returns
the stored :class:`RunRecord`. An unfinished run resumed under another config (its config.yaml
has another hash) is not mixed with the new one: its files are moved to ``stale-<UTC time>/``
first (:func:`set_aside_stale`) and the run starts fresh. The layout of a run directory:
docs/lab.md, "Run directories".
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import time
import traceback
from pathlib import Path
from typing import Any

from dedebate.lab.config import RunConfig, as_stored, config_hash_of, dump_yaml
from dedebate.lab.context import (  # noqa: F401  (experiment_key: re-exported)
    LabContext,
    experiment_key,
    set_aside_stale,
)
from dedebate.lab.devices import peak_device_bytes
from dedebate.lab.evaluate import run_module
from dedebate.lab.experiment import (
    Claim,
    ExperimentModule,
    ExperimentResult,
    gating,
    with_family_decisions,
)
from dedebate.lab.folder_guard import LOCK_NAME, check_run_dir, lock_run_dir
from dedebate.lab.memory import check_run
from dedebate.lab.provenance import warn_if_other_version
from dedebate.lab.rerender import results_problem
from dedebate.lab.rundir import (
    ONLY_FILES,
    RunDirError,
    environment_provenance,
    eprint,
    jsonable,
    new_run_dir,
    newest_matching_dir,
    read_json,
    record_status,
    utc_iso,
    write_csv,
    write_json,
    write_running_record,
    write_text,
)
from dedebate.lab.tracking import Tracker


@dataclasses.dataclass
class RunRecord:
    """What a finished (or failed) run left behind."""

    cfg: RunConfig
    run_dir: Path
    result: ExperimentResult | None
    error: str | None
    wall_time_s: float
    results: dict[str, Any]
    reused: bool = False  # a finished run's stored record (resume was a no-op)

    @property
    def passed(self) -> bool:
        """Whether the run finished without error and its claims pass.

        Returns False for an error, no result or no claims, else ``ExperimentResult.passed``.
        """
        return (
            self.error is None
            and self.result is not None
            and bool(self.result.claims)
            and self.result.passed
        )


def find_resumable(cfg: RunConfig) -> Path | None:
    """The newest ``<output_dir>/<experiment>-*`` whose config.yaml has this config's hash.

    Args:
        cfg: the resolved config (sweep directories never match).
    """
    want = cfg.config_hash()
    return newest_matching_dir(
        cfg.output_dir,
        f"{cfg.experiment}-*",
        lambda old: not old.get("sweep") and config_hash_of(old) == want,
    )


def run_experiment(
    module: ExperimentModule,
    cfg: RunConfig,
    *,
    run_dir: str | os.PathLike | None = None,
    show_progress: bool = True,
    nested: bool = False,
    raise_errors: bool = False,
    key: Any = None,
    tracking_name: str | None = None,
) -> RunRecord:
    """Run the experiment (:func:`~dedebate.lab.evaluate.run_module`), write the run directory.

    Order: config.yaml, then the experiment (metrics.jsonl and plots as it goes), then tables and
    results.json, and only then the W&B summary and artifact (results.json, config.yaml, tables
    and plots). An exception from the experiment is recorded in results.json (``status:
    "error"``) and error.txt. Before config.yaml the run directory is locked (another process on
    it: :class:`RunDirError` "run in use by PID N"); after it, a results.json saying "running"
    marks the run until it ends (a finished run resumed is a no-op, whatever its memory
    estimate); Ctrl-C names the folder to resume. A run directory with a link out of it is refused
    first (:func:`check_run_dir`), before that a run over ``cfg.memory_limit``.

    Args:
        module: the experiment module.
        cfg: the resolved config (``cfg.resume``: continue the newest matching run; a run
            directory whose config.yaml has another config hash is set aside first,
            :func:`set_aside_stale`, and the run starts fresh).
        run_dir: the run directory; None = the resumable one or a new one under ``output_dir``.
        show_progress: show progress bars.
        nested: the run is one of many (a sweep point, a reproduce job): bars do not stay.
        raise_errors: re-raise the experiment's exception after recording it.
        key: replaces the context's key (a sweep point's key, see ``dedebate/lab/sweep.py``).
        tracking_name: the W&B run name; None = the run directory's name.

    Returns the :class:`RunRecord`.
    """
    resume = False
    if run_dir is None and cfg.resume and (existing := find_resumable(cfg)) is not None:
        run_dir, resume = existing, True
    if run_dir is not None and cfg.resume and Path(run_dir).is_dir():  # reused, whatever fits
        check_run_dir(run_dir)
        done = finished_record(module, cfg, run_dir)
        if done is not None:
            eprint(f"dedebate: run already finished: {Path(run_dir).resolve()}; nothing to do")
            return done
    check_run(module, cfg)  # a run that cannot fit stops here, before its run directory
    run_dir = Path(run_dir or new_run_dir(cfg.output_dir, cfg.experiment)).resolve()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunDirError(
            f"{run_dir}: cannot create the run directory: {err.strerror or err}"
        ) from None
    check_run_dir(run_dir)
    resume = resume or (cfg.resume and (run_dir / "checkpoints").is_dir())
    opts = {"show_progress": show_progress, "nested": nested, "raise_errors": raise_errors}
    with lock_run_dir(run_dir):  # a second process on this run stops here ("run in use")
        try:
            return _run_in(
                module, cfg, run_dir, resume, key=key, tracking_name=tracking_name, **opts
            )
        except KeyboardInterrupt:
            if not nested:  # the folder to resume, which only a finished run prints
                eprint(f"dedebate: resume the run with: dedebate run --resume {run_dir}")
            raise


def stored_results(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """``run_dir``'s results.json as a resume may reuse it, or None when there is no readable
    record (none, not JSON: the run runs again and writes one).

    Raises:
        RunDirError: results.json is a link, not a regular file or over
            :data:`~dedebate.lab.rundir.MAX_RECORD_BYTES`; or it records a finished run
            (``status: "ok"``) whose fields have other types than the runner writes
            (:func:`~dedebate.lab.rerender.results_problem`). Nothing is written.
    """
    path = Path(run_dir) / "results.json"
    try:
        results = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(results, dict):
        return None
    if results.get("status") == "ok" and (problem := results_problem(results)):
        raise RunDirError(
            f"{path}: not a record dedebate writes ({problem}); it is left as it is: remove "
            "it (or the run folder) to run the experiment again"
        )
    return results


def _finished_results(cfg: RunConfig, run_dir: Path) -> dict[str, Any] | None:
    """results.json of ``run_dir`` if the run finished there with ``cfg``, else None."""
    # results.json of ``run_dir`` if the run finished there with ``cfg``'s config hash and every
    # table and plot it lists is on disk (inside it), else None. A hostile one: RunDirError.
    results = stored_results(run_dir)
    if results is None or results.get("status") != "ok":
        return None
    prov = results.get("provenance")
    if not isinstance(prov, dict) or prov.get("config_hash") != cfg.config_hash():
        return None
    listed = [*(results.get("tables") or {}).values(), *(results.get("plots") or [])]
    root = run_dir.resolve()
    if not all((root / f).is_file() and (root / f).resolve().is_relative_to(root) for f in listed):
        return None
    warn_if_other_version(run_dir, prov)
    return results


def finished_record(
    module: ExperimentModule, cfg: RunConfig, run_dir: str | os.PathLike
) -> RunRecord | None:
    """The stored record of a run that finished in ``run_dir`` with ``cfg``, or None (run it).

    Finished means: results.json says "ok", has ``cfg``'s config hash and every table and plot
    it lists is on disk. Reads only: no file is written, not even the lock file. A run another
    process holds (it is computing again) is not finished.

    Returns the record with ``reused=True``, or None.
    """
    run_dir = Path(run_dir)
    fd = None
    try:
        import fcntl

        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(run_dir / LOCK_NAME, flags)  # a FIFO: no wait for a writer
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise RunDirError(f"{run_dir / LOCK_NAME}: not a regular file; {ONLY_FILES}")
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # fails while a process holds the run
    except ImportError:
        pass
    except FileNotFoundError:  # never locked (every lab process creates the lock file)
        pass
    except OSError:
        if fd is not None:
            os.close(fd)
        return None
    try:
        results = _finished_results(cfg, run_dir)
    finally:
        if fd is not None:
            os.close(fd)  # releases the shared lock
    if results is None:
        return None
    try:
        names = {f.name for f in dataclasses.fields(Claim)}
        claims = [
            Claim(
                **{
                    **{k: v for k, v in c.items() if k in names},
                    "passed": bool(c.get("passed_95", c["passed"])),
                }
            )
            for c in results["claims"]
        ]
    except (TypeError, KeyError, AttributeError):
        return None
    result = ExperimentResult(
        claims=claims,
        metrics=dict(results.get("metrics") or {}),
        plots=[p.removeprefix("plots/") for p in results.get("plots") or []],
    )
    wall = results["provenance"].get("wall_time_s")
    return RunRecord(
        cfg,
        run_dir.resolve(),
        result,
        None,
        float(wall) if isinstance(wall, (int, float)) else 0.0,
        results,
        reused=True,
    )


def _run_in(
    module: ExperimentModule,
    cfg: RunConfig,
    run_dir: Path,
    resume: bool,
    *,
    show_progress: bool,
    nested: bool,
    raise_errors: bool,
    key: Any,
    tracking_name: str | None,
) -> RunRecord:
    """The body of :func:`run_experiment`, in a locked run directory."""
    stale = resume and set_aside_stale(run_dir, cfg.config_hash())  # another config's attempt
    resume = resume and not stale
    stored = as_stored(cfg, run_dir) if resume else cfg  # resume as the folder's file has it
    write_text(run_dir / "config.yaml", dump_yaml(stored))
    first = write_running_record(run_dir, cfg.experiment, getattr(module, "TITLE", ""), resume)

    tcfg = cfg.tracking
    mode = tcfg.effective_mode()
    env = environment_provenance()  # before the run: what W&B and results.json record
    tracker = Tracker.start(
        mode=mode,
        run_dir=run_dir,
        project=tcfg.project,
        entity=tcfg.entity,
        group=tcfg.group,
        job_type=cfg.experiment,
        name=tracking_name or run_dir.name,
        config=stored.to_dict(),
        resume=cfg.resume and not stale,  # a fresh start is a new W&B run (the old one stays)
        provenance={**env, "config_hash": cfg.config_hash()},
    )
    mode = tracker.mode if tracker.active else mode  # online falls back to offline off-network
    ctx = LabContext(
        cfg, run_dir, tracker, show_progress=show_progress, nested=nested, resume=resume, key=key
    )

    started = utc_iso()
    t0 = time.monotonic()
    result: ExperimentResult | None = None
    error: str | None = None
    tb_text = None
    try:
        try:
            result = run_module(module, cfg.params, ctx)
        finally:
            ctx.flush_metrics()
    except Exception as err:
        error = f"{type(err).__name__}: {' '.join(str(err).split())}"
        tb_text = traceback.format_exc()
        result = None
        if raise_errors or isinstance(err, RunDirError):  # a full disk: one line, exit 2
            with contextlib.suppress(RunDirError):  # the disk may not hold the record either
                _finish_failed(
                    module,
                    cfg,
                    run_dir,
                    ctx,
                    tracker,
                    mode,
                    env,
                    (first, started),
                    t0,
                    error,
                    tb_text,
                )
            raise
    wall = time.monotonic() - t0

    if error is not None:
        results = _finish_failed(
            module, cfg, run_dir, ctx, tracker, mode, env, (first, started), t0, error, tb_text
        )
        return RunRecord(cfg, run_dir, None, error, wall, results)

    assert result is not None
    tables = {}
    if result.tables:
        ctx.tables_dir.mkdir(exist_ok=True)
        for tname, rows in result.tables.items():
            safe = "".join(c if (c.isalnum() or c in "-_.") else "_" for c in tname)
            write_csv(ctx.tables_dir / f"{safe}.csv", list(rows))
            tables[tname] = f"tables/{safe}.csv"
    plots = list(dict.fromkeys([*result.plots, *ctx.saved_plots]))
    results = {
        "experiment": cfg.experiment,
        "title": getattr(module, "TITLE", ""),
        "status": "ok",
        "passed": bool(result.claims) and result.passed,
        "claims": with_family_decisions(result.claims),
        "metrics": jsonable({**{k: round(v, 4) for k, v in ctx.timings.items()}, **result.metrics}),
        "tables": tables,
        "plots": [f"plots/{p}" for p in plots],
        "provenance": _provenance(cfg, ctx, tracker, mode, env, (first, started), wall),
    }
    write_json(run_dir / "results.json", results)
    for superseded in ("error.txt", "results.failed.json"):  # an earlier attempt's
        with contextlib.suppress(OSError):  # one that cannot go is harmless
            (run_dir / superseded).unlink(missing_ok=True)

    # Local results are complete; now W&B.
    gate = [c for c in results["claims"] if gating(c)]
    tracker.set_summary(
        {
            **results["metrics"],
            "claims_passed": sum(c["passed"] for c in gate),
            "claims_total": len(gate),
            "passed": results["passed"],
            **({"error": ""} if tracker.continued else {}),  # an earlier attempt's: no more
            "wall_time_s": wall,
        }
    )
    tracker.log_artifact(
        f"results-{run_dir.name}",
        "results",
        [
            run_dir / "results.json",
            run_dir / "config.yaml",
            *(run_dir / p for p in tables.values()),
            *(run_dir / p for p in results["plots"]),
        ],
    )
    tracker.finish(0)
    return RunRecord(cfg, run_dir, result, None, wall, results)


def _provenance(
    cfg: RunConfig,
    ctx: LabContext,
    tracker: Tracker,
    mode: str,
    env: dict[str, Any],
    starts: tuple[str, str],
    wall: float,
) -> dict[str, Any]:
    first, started = starts  # the first attempt's start and this one's (a resume's)
    prov = {
        "config_hash": ctx.config_hash,
        "seed": cfg.seed,
        "size": cfg.size,
        **env,
        "started_utc": first,
        **({"resumed_utc": started} if ctx.resume else {}),
        "wall_time_s": round(wall, 3),
        "peak_device_bytes": peak_device_bytes(),
        "resumed": ctx.resume,
        "tracking": {
            "mode": mode,
            "wandb_run_id": tracker.run_id,
            "wandb_dir": tracker.run_path,
            "failure": tracker.failed,
        },
    }
    return prov


def _finish_failed(
    module: ExperimentModule,
    cfg: RunConfig,
    run_dir: Path,
    ctx: LabContext,
    tracker: Tracker,
    mode: str,
    env: dict[str, Any],
    starts: tuple[str, str],
    t0: float,
    error: str,
    tb_text: str | None,
) -> dict[str, Any]:
    wall = time.monotonic() - t0
    write_text(run_dir / "error.txt", tb_text or error)
    results = {
        "experiment": cfg.experiment,
        "title": getattr(module, "TITLE", ""),
        "status": "error",
        "passed": False,
        "error": error,
        "claims": [],
        "metrics": {},
        "tables": {},
        "plots": [f"plots/{p}" for p in ctx.saved_plots],
        "provenance": _provenance(cfg, ctx, tracker, mode, env, starts, wall),
    }
    # a finished run's results are never replaced by a worse record: a failure after them (a
    # later resume that went wrong) is recorded beside them
    target = run_dir / "results.json"
    if kept := record_status(target) == "ok":
        target = run_dir / "results.failed.json"
        eprint(
            f"dedebate: warning: {run_dir}: the run had finished before; results.json is "
            f"kept, this attempt's error record is {target.name} (and error.txt)"
        )
    write_json(target, results)  # a kept finished run stays passed in W&B too
    tracker.set_summary({"error": error} | ({} if kept else {"passed": False}))
    saved = [target, run_dir / "error.txt", run_dir / "config.yaml"]  # what the failure left
    saved += [run_dir / "plots" / p for p in ctx.saved_plots]
    tracker.log_artifact(f"results-{run_dir.name}", "results", saved)
    tracker.finish(1)
    return results
