"""Sweeps: a grid of runs of one experiment, vmapped where it can be, with no loop to write.

:func:`run_sweep` runs the sweep of a config's ``sweep:`` block: it plans the grid
(``sweep_plan.py``), evaluates each static group's rows through one compiled program
(``sweep_eval.py``, ``sweep_programs.py``) or, for an experiment without ``point``, as full runs
in ``points/``, writes each group's rows before the next starts (``sweep_rows.py``), resumes
from the groups already on disk, splits the rows over JAX processes, and writes the statistics,
plots (``sweep_output.py``), ``results.json`` and the W&B runs. The names of those modules
are re-exported here. The contract, keys and output: docs/lab.md, "Sweeps".
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from dedebate.lab import numerics
from dedebate.lab.config import RunConfig, as_stored, dump_yaml, sweep_hash_of
from dedebate.lab.devices import EvalInfo
from dedebate.lab.folder_guard import lock_run_dir
from dedebate.lab.memory import check_sweep
from dedebate.lab.rundir import (
    environment_provenance,
    eprint,
    flatten_numbers,
    jsonable,
    new_run_dir,
    record_status,
    utc_iso,
    write_csv,
    write_json,
    write_text,
)
from dedebate.lab.runner import run_experiment
from dedebate.lab.sweep_eval import (  # noqa: F401  (re-exported)
    _stack_trees,
    evaluate_group,
    group_inputs,
    point_row,
    row_inputs,
)
from dedebate.lab.sweep_output import (  # noqa: F401  (re-exported)
    MAX_LINES,
    MAX_METRICS,
    experiment_figures,
    metric_names,
    per_point,
    plot_sweep,
    t_interval,
)
from dedebate.lab.sweep_plan import (  # noqa: F401  (re-exported)
    RESERVED,
    Group,
    Point,
    SweepError,
    SweepPlan,
    is_sweepable,
    plan,
    point_key,
    point_words,
)
from dedebate.lab.sweep_programs import (  # noqa: F401  (re-exported)
    ChunkedFn,
    ChunkedPrograms,
    compile_options,
    train_point,
)
from dedebate.lab.sweep_rows import (
    check_same_sweep,
    group_done,
    read_rows,
    sort_rows,
    write_group_file,
)
from dedebate.lab.tracking import Tracker

SWEEP_SCHEMA_VERSION = 1


def _row(p: Point, seed: int, group: int) -> dict[str, Any]:
    return {"point": p.index, "seed": seed, "group": group, **jsonable(p.values)}


@dataclasses.dataclass
class SweepRecord:
    """What a finished sweep left behind: its config, directory, plan, rows (as in
    ``sweep.csv``), ``results.json`` contents (empty on processes other than 0) and wall time."""

    cfg: RunConfig
    sweep_dir: Path
    plan: SweepPlan
    rows: list[dict[str, Any]]
    results: dict[str, Any]
    wall_time_s: float
    error: str | None = None


def find_sweep_dir(cfg: RunConfig) -> Path | None:
    """The newest ``<output_dir>/<experiment>-sweep-*`` whose config.yaml has this sweep hash."""
    from dedebate.lab.rundir import newest_matching_dir

    want = cfg.sweep_hash()
    return newest_matching_dir(
        cfg.output_dir, f"{cfg.experiment}-sweep-*", lambda old: sweep_hash_of(old) == want
    )


def run_sweep(
    module: Any,
    cfg: RunConfig,
    *,
    sweep_dir: str | os.PathLike | None = None,
    resume: bool | None = None,
    show_progress: bool = True,
    devices: list[Any] | None = None,
) -> SweepRecord:
    """Run the sweep of ``cfg`` (its ``sweep`` block) and write the sweep directory.

    With several JAX processes (``dedebate/lab/distributed.py``) every process calls this with
    the same config: process 0 creates the directory (its name is broadcast), every process
    computes the rows of its devices and writes them to ``shards/``, and process 0 merges,
    plots and tracks. ``resume`` (default ``cfg.resume``) reuses ``sweep_dir`` (or the newest
    directory of this sweep) and skips the static groups already on disk whose rows check out.
    Process 0 holds the sweep directory's lock while it runs (another process on it:
    :class:`~dedebate.lab.rundir.RunDirError` "run in use by PID N").

    Args:
        module: the experiment module.
        cfg: the resolved config with a ``sweep`` block.
        sweep_dir: the sweep directory (default: a new one, or on resume the newest of this
            sweep).
        resume: skip the groups on disk whose rows check out (default ``cfg.resume``).
        show_progress: show a progress bar (process 0).
        devices: the devices of the run axis (default: all).

    Returns the :class:`SweepRecord` (a resume of a finished sweep changes nothing: its
    ``results`` are then ``{}``, the folder's results.json stays as it was).
    """
    held: list[Any] = []
    try:
        return _run_sweep(
            module,
            cfg,
            sweep_dir=sweep_dir,
            resume=resume,
            show_progress=show_progress,
            devices=devices,
            held=held,
        )
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: name the folder to resume (its lock's)
        if held:
            eprint(
                f"dedebate: resume the sweep with: dedebate sweep --resume {held[0].path.parent}"
            )
        raise
    finally:
        for lock in held:
            lock.release()


def _run_sweep(
    module: Any,
    cfg: RunConfig,
    *,
    sweep_dir: str | os.PathLike | None,
    resume: bool | None,
    show_progress: bool,
    devices: list[Any] | None,
    held: list[Any],
) -> SweepRecord:
    from dedebate.lab import distributed as dist

    t0 = time.monotonic()
    started = utc_iso()
    resume = cfg.resume if resume is None else resume
    checked = not resume  # a resume checks once it knows the groups on disk (below)
    if checked:
        check_sweep(module, cfg)  # before planning: a group that cannot fit stops here
    plan_ = plan(module, cfg)
    assert cfg.sweep is not None  # plan() refuses a config without a sweep block
    pid, nproc = dist.process_index(), dist.process_count()
    lead = pid == 0
    if not dist.same_everywhere(f"{cfg.config_hash()} {cfg.sweep_hash()}"):
        raise SweepError(
            f"the {nproc} processes were given different sweeps (configs, overrides or sweep "
            "blocks): each would label its rows with another's points; give all the same one"
        )

    # -- the directory (process 0 decides, everyone uses it)
    path, same = "", False
    if lead:
        if sweep_dir is None and resume:
            found = find_sweep_dir(cfg)
            sweep_dir = found if found is not None else None
        if sweep_dir is None:
            sweep_dir = new_run_dir(cfg.output_dir, f"{cfg.experiment}-sweep")
            resume = False
        path = str(Path(sweep_dir).resolve())
        Path(path).mkdir(parents=True, exist_ok=True)
        held.append(lock_run_dir(path))  # another process on this sweep stops here
        same = check_same_sweep(Path(path), cfg)
        numerics.guard_sweep(Path(path) / "groups", resume)
        write_text(Path(path) / "config.yaml", dump_yaml(as_stored(cfg, path) if resume else cfg))
    path = dist.broadcast_text(path)
    out = Path(path)
    groups_dir, plots_dir = out / "groups", out / "plots"
    if lead:
        groups_dir.mkdir(exist_ok=True)

    # -- which groups are already done (process 0 reads and checks, everyone agrees)
    done = (
        [group_done(groups_dir / f"group-{g.index:03d}.csv", plan_, g) for g in plan_.groups]
        if lead and resume
        else [False] * len(plan_.groups)
    )
    done = dist.broadcast_flags(done)
    finished = lead and same and all(done) and record_status(out / "results.json") == "ok"
    if dist.broadcast_flags([finished])[0]:  # its record is kept as it is
        eprint(f"dedebate: sweep already finished: {out}; nothing to do")
        kept = [r for g in plan_.groups for r in read_rows(groups_dir / f"group-{g.index:03d}.csv")]
        return SweepRecord(cfg, out, plan_, sort_rows(kept, plan_.seeds), {}, 0.0)
    if not checked:  # the groups on disk are read, not computed: only the others must fit
        check_sweep(module, cfg, [g.static for g, d in zip(plan_.groups, done) if d])

    mode = cfg.tracking.effective_mode() if lead else "disabled"
    group_name = cfg.tracking.group or out.name
    tracker = Tracker.start(
        mode=mode,
        run_dir=out,
        project=cfg.tracking.project,
        entity=cfg.tracking.entity,
        group=group_name,
        job_type="sweep",
        name=out.name,
        config={**cfg.to_dict(), "sweep_dir": str(out)},
        resume=resume,  # a resumed sweep continues its W&B run
    )
    mode = tracker.mode if tracker.active else mode  # online falls back to offline off-network

    info = EvalInfo()
    rows: list[dict[str, Any]] = []
    computed_rows = 0
    compute_s = 0.0
    from tqdm.auto import tqdm

    bar = tqdm(
        total=plan_.rows,
        desc=f"sweep {cfg.experiment}",
        unit="run",
        disable=not (show_progress and lead),
        dynamic_ncols=True,
        mininterval=0.5,
    )
    try:
        points_runs = plan_.vmapped and cfg.sweep.tracking == "points"
        for g, is_done in zip(plan_.groups, done):
            gfile = groups_dir / f"group-{g.index:03d}.csv"
            untracked = gfile.with_suffix(".untracked")  # its points' W&B runs are still to come
            if is_done:
                grows = read_rows(gfile)
            else:
                tg = time.monotonic()
                if plan_.vmapped:
                    grows = _vmapped_group(module, plan_, g, cfg, out, info, devices, pid, nproc)
                else:
                    grows = _full_run_group(module, plan_, g, cfg, out, group_name, resume)
                compute_s += time.monotonic() - tg
                computed_rows += len(grows)
                if lead:
                    if points_runs:  # a kill between the group file and its runs: resume sends them
                        write_text(untracked, "")
                    write_group_file(gfile, grows)  # on disk before the next group starts
            rows.extend(grows)
            if lead:
                rows = sort_rows(rows, plan_.seeds)
                write_csv(out / "sweep.csv", rows)
                tracker.log(
                    {"group": g.index, "rows_done": len(rows), "wall_s": time.monotonic() - t0}
                )
                if points_runs and (not is_done or untracked.exists()):
                    _track_points(cfg, plan_, g, grows, out, group_name, mode)
                    untracked.unlink(missing_ok=True)
            bar.update(len(plan_.seeds) * len(g.points))
    finally:
        bar.close()
    dist.barrier("dedebate-sweep-end")

    wall = time.monotonic() - t0
    results: dict[str, Any] = {}
    if lead:
        plots = (
            plot_sweep(rows, plan_, plots_dir, list(cfg.sweep.metrics))
            if cfg.sweep.plots and rows
            else []
        )
        if cfg.sweep.plots and rows:
            plots += experiment_figures(module, rows, plots_dir)
        points = per_point(rows, plan_)
        results = {
            "experiment": cfg.experiment,
            "title": getattr(module, "TITLE", ""),
            "kind": "sweep",
            "status": "ok",
            "schema_version": SWEEP_SCHEMA_VERSION,
            "vmapped": plan_.vmapped,
            "axes": jsonable(plan_.axes),
            "dynamic_axes": list(plan_.dynamic_axes),
            "static_axes": list(plan_.static_axes),
            "seeds": list(plan_.seeds),
            "points": len(plan_.points),
            "groups": len(plan_.groups),
            "rows": len(rows),
            "groups_resumed": sum(done),
            "compilations": info.traces,
            "compiled_calls": info.calls,
            "padded_rows": info.padded_rows,
            "devices": info.devices if info.calls else None,
            "processes": nproc,
            "rows_computed": computed_rows,
            "compute_s": round(compute_s, 4),
            "rows_per_s": round(computed_rows / compute_s, 3) if compute_s > 0 else None,
            "table": "sweep.csv",
            "plots": [f"plots/{p}" for p in plots],
            "per_point": points,
            "provenance": {
                "config_hash": cfg.config_hash(),
                "sweep_hash": cfg.sweep_hash(),
                "seed": cfg.seed,
                "size": cfg.size,
                **environment_provenance(),
                "started_utc": started,
                "wall_time_s": round(wall, 3),
                "resumed": bool(resume),
                "tracking": {
                    "mode": mode,
                    "wandb_run_id": tracker.run_id,
                    "wandb_dir": tracker.run_path,
                    "failure": tracker.failed,
                },
            },
        }
        write_json(out / "results.json", results)
        tracker.log_table("sweep", rows)
        for p in plots:
            tracker.log_image(Path(p).stem, plots_dir / p)
        tracker.set_summary(
            {
                "points": len(plan_.points),
                "rows": len(rows),
                "compilations": info.traces,
                "wall_time_s": wall,
            }
        )
        tracker.log_artifact(
            f"sweep-{out.name}",
            "sweep",
            [
                out / "sweep.csv",
                out / "results.json",
                out / "config.yaml",
                *(plots_dir / p for p in plots),
            ],
        )
        tracker.finish(0)
    return SweepRecord(cfg, out, plan_, rows, results, wall)


def _vmapped_group(module, plan_, g, cfg, out, info, devices, pid, nproc):
    batch = cfg.sweep.batch
    rows, metrics = evaluate_group(module, plan_, g, batch=batch, devices=devices, info=info)
    grows = []
    for i, (p, s) in enumerate(rows):
        r = _row(p, s, g.index)
        for k, v in metrics.items():
            if k in r:
                raise SweepError(
                    f"{plan_.experiment}: metric {k!r} has the name of a "
                    "sweep.csv column (point, seed, group or an axis)"
                )
            r[k] = v[i].item()
        grows.append(r)
    if nproc > 1:  # each process writes the rows its devices computed
        shard_dir = out / "shards"
        shard_dir.mkdir(exist_ok=True)
        mine = [grows[i] for i in info.local_rows]
        write_csv(shard_dir / f"group-{g.index:03d}-process-{pid}.csv", mine)
    return grows


def _full_run_group(module, plan_, g, cfg, out, group_name, resume):
    """Run a group of an experiment without ``point``: each (point, seed) is a full run."""
    # Experiments without ``point``: each (point, seed) is a full run in ``points/`` (on resume,
    # a finished one is read back and an unfinished one resumed); process ``i`` of ``n`` runs
    # every n-th row, process 0 merges the shard files.
    from dedebate.lab import distributed as dist

    pid, nproc = dist.process_index(), dist.process_count()

    shard_dir = out / "shards"
    shard_dir.mkdir(exist_ok=True)
    todo = [(p, s) for p in g.points for s in plan_.seeds]
    mine = []
    tracking = (
        cfg.tracking
        if cfg.sweep.tracking == "points"
        else dataclasses.replace(cfg.tracking, mode="disabled")
    )
    tracking = dataclasses.replace(tracking, group=group_name)
    for i, (p, s) in enumerate(todo):
        if i % nproc != pid:
            continue
        pcfg = dataclasses.replace(
            cfg,
            seed=s,
            params=p.cfg,
            sweep=None,
            resume=resume,
            output_dir=str(out / "points"),
            tracking=tracking,
        )
        run_dir = out / "points" / f"p{p.index:04d}-s{s}"
        rec = run_experiment(
            module,
            pcfg,
            run_dir=run_dir,
            show_progress=False,
            nested=True,
            key=point_key(cfg.experiment, s, p.cfg),
            tracking_name=f"{out.name}-p{p.index}-s{s}",
        )
        r = _row(p, s, g.index)
        r["status"] = "ok" if rec.error is None else "error"
        r["passed"] = int(rec.passed)
        for k, v in flatten_numbers(rec.results.get("metrics", {})).items():
            if k not in r and not isinstance(v, str):
                r[k] = v
        r["run_dir"] = str(run_dir.relative_to(out))
        mine.append(r)
    if nproc == 1:
        return mine
    write_csv(shard_dir / f"group-{g.index:03d}-process-{pid}.csv", mine)
    dist.barrier(f"dedebate-sweep-group-{g.index}")
    grows: list[dict[str, Any]] = []
    if pid == 0:
        for q in range(nproc):
            f = shard_dir / f"group-{g.index:03d}-process-{q}.csv"
            if f.is_file() and f.stat().st_size:
                grows.extend(read_rows(f))
        missing = len(todo) - len(grows)
        if missing:  # the runs are in points/: a resume on a shared file system reads them back
            raise SweepError(
                f"{missing} rows of group {g.index} are missing from {shard_dir} (do the "
                "processes share a file system?); the finished runs are kept in points/"
            )
    return sort_rows(grows, plan_.seeds) if pid == 0 else grows


def _track_points(cfg, plan_, g, grows, out, group_name, mode):
    """One W&B run per point of a finished group, with per-seed values and the mean."""
    # One W&B run per point of a finished group: its resolved config, and per-seed values under
    # their own keys (``seed/S/METRIC``) beside the mean and interval over seeds.
    if mode == "disabled":
        return
    by_point: dict[int, list[dict[str, Any]]] = {}
    for r in grows:
        by_point.setdefault(int(r["point"]), []).append(r)
    metrics = metric_names(grows, plan_.axes)
    for p in g.points:
        rs = by_point.get(p.index, [])
        pcfg = dataclasses.replace(cfg, params=p.cfg, sweep=None)
        t = Tracker.start(
            mode=mode,
            run_dir=out,
            project=cfg.tracking.project,
            entity=cfg.tracking.entity,
            group=group_name,
            job_type=cfg.experiment,
            name=f"{out.name}-p{p.index}",
            wandb_checked=True,  # at the sweep's start (its own tracker): not walked per point
            config={
                **pcfg.to_dict(),
                "point": p.index,
                "values": jsonable(p.values),
                "seeds": list(plan_.seeds),
            },
        )
        summary: dict[str, Any] = {}
        for r in rs:
            for m in metrics:
                summary[f"seed/{r['seed']}/{m}"] = r.get(m)
        for m in metrics:
            mean, lo, hi = t_interval([r[m] for r in rs if isinstance(r.get(m), (int, float))])
            summary[f"{m}/mean"], summary[f"{m}/lo"], summary[f"{m}/hi"] = mean, lo, hi
        t.set_summary(summary)
        t.finish(0)
        if t.failed:
            return  # one warning is enough; the sweep's local files are complete
