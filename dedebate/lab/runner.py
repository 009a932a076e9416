"""Run one experiment: run directory, context, local results first, then W&B.

Layout of a run directory::

    <run_dir>/config.yaml      the resolved config (load_config of it gives the same RunConfig)
    <run_dir>/results.json     claims, metrics and provenance (config hash, seed, versions, ...)
    <run_dir>/metrics.jsonl    one JSON line per ctx.log call
    <run_dir>/plots/*.png      figures saved with ctx.save_figure
    <run_dir>/tables/*.csv     ExperimentResult.tables
    <run_dir>/checkpoints/     Orbax checkpoints (ctx.checkpoint_dir)
    <run_dir>/error.txt        the traceback, if the experiment raised
    <run_dir>/results.failed.json  the error record of a failed attempt after a finished one
                               (whose results.json is kept)
    <run_dir>/wandb/           the W&B run (offline by default)

Resuming a finished run (``resume``: results.json says "ok", was computed from this config hash,
and every table and plot it lists is on disk) is a no-op: one line ("run already finished: DIR;
nothing to do") and the stored record, without writing, locking or starting anything. A run that
ended in error, died ("running"), or lost a listed file is run again.

metrics.jsonl holds each logged row once, also after a resume. Every row carries its step
(``ctx.log(row, step=...)``; without one, one more than the previous row's). A fresh (not
resumed) run starts an empty file. A resumed run reads the rows already there (a line torn by a
kill is dropped with a warning) and keeps them: a row it logs at a step the file already holds is
the earlier attempt's row logged again (the computation is deterministic), so it is not written
twice. What a resumed attempt computes anew is cut off first: the chunked training driver
(``dedebate/lab/driver.py``) calls ``ctx.truncate_metrics(step)`` with the first step after its
restored chunks, which drops every row from that step on. So steps are one clock over the whole
run (the driver's steps never go back); rows logged at the same step form one group. W&B needs
nothing: each attempt is its own W&B run, with that attempt's rows only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
import time
import traceback
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dedebate.lab.config import RunConfig, config_hash_of, dump_yaml
from dedebate.lab.experiment import (
    Claim,
    ExperimentResult,
    gating,
    stopwatch,
    with_family_decisions,
)
from dedebate.lab.rundir import (
    LOCK_NAME,
    RunDirError,
    environment_provenance,
    eprint,
    jsonable,
    lock_run_dir,
    new_run_dir,
    newest_matching_dir,
    utc_iso,
    write_csv,
    write_json,
    write_text,
)
from dedebate.lab.tracking import Tracker

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def experiment_key(seed: int, name: str):
    """``fold_in(key(seed), crc32(name))``: a typed key per (seed, experiment)."""
    import jax

    return jax.random.fold_in(jax.random.key(seed), zlib.crc32(name.encode()) & 0x7FFFFFFF)


class LabContext:
    """The lab's implementation of ``RunContext`` (see ``dedebate/lab/experiment.py``)."""

    def __init__(self, cfg: RunConfig, run_dir: Path, tracker: Tracker, *,
                 show_progress: bool = True, nested: bool = False, resume: bool = False,
                 key: Any = None):
        self.cfg = cfg
        self.seed = cfg.seed
        self.size = cfg.size
        self.key = experiment_key(cfg.seed, cfg.experiment) if key is None else key
        self.run_dir = Path(run_dir)
        self.plots_dir = self.run_dir / "plots"
        self.tables_dir = self.run_dir / "tables"
        self.checkpoint_dir = self.run_dir / "checkpoints"
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.config_hash = cfg.config_hash()
        self.resume = resume
        self.tracker = tracker
        self.saved_plots: list[str] = []
        self._show_progress = show_progress
        self._nested = nested
        self._t0 = time.monotonic()
        self._auto_step = 0
        self.timings: dict[str, float] = {}  # ctx.stopwatch: wall_<name>_s
        for d in (self.plots_dir, self.checkpoint_dir):
            d.mkdir(parents=True, exist_ok=True)
        # metrics.jsonl (see the module docstring): on resume, the steps the file already holds
        self._old_steps: set[int] = set()
        if not resume:
            self.metrics_path.unlink(missing_ok=True)
        else:
            self._load_metrics()

    def _read_rows(self) -> tuple[list[dict[str, Any]], int, bool]:
        """The rows of metrics.jsonl, the count of unreadable lines, whether the file ends
        without a newline."""
        if not self.metrics_path.is_file():
            return [], 0, False
        text = self.metrics_path.read_text()
        rows, bad = [], 0
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = None
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
            else:
                bad += bool(line.strip())
        return rows, bad, bool(text) and not text.endswith("\n")

    def _write_rows(self, rows: list[dict[str, Any]]) -> None:
        write_text(self.metrics_path, "".join(json.dumps(r) + "\n" for r in rows))
        self._old_steps = {r["step"] for r in rows}

    def _load_metrics(self) -> None:
        """Read the steps an earlier attempt logged (resume); drop a torn last line."""
        rows, bad, torn = self._read_rows()
        self._old_steps = {r["step"] for r in rows}
        if bad:
            eprint(f"dedebate: warning: {self.metrics_path}: dropped {bad} unreadable line(s) "
                   "(a write cut short by the interrupted attempt)")
        if bad or torn:  # clean before the next append
            self._write_rows(rows)

    def truncate_metrics(self, step: int) -> None:
        """Drop the rows of metrics.jsonl from ``step`` on (what a resumed attempt logs again;
        one atomic rewrite, only if a row goes)."""
        rows, _, _ = self._read_rows()
        kept = [r for r in rows if r["step"] < step]
        if len(kept) < len(rows):
            self._write_rows(kept)

    def flush_metrics(self) -> None:
        """Nothing is buffered (rows are written as they are logged); kept for callers."""

    @contextlib.contextmanager
    def progress(self, total: int, desc: str) -> Iterator[Any]:
        """A tqdm bar on stderr; call ``update`` between jitted chunks (host side)."""
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=desc, file=sys.stderr, disable=not self._show_progress,
                   leave=not self._nested, dynamic_ncols=True, mininterval=0.5)
        try:
            yield bar
        finally:
            bar.close()

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Append ``{"step", "wall_s", **metrics}`` to metrics.jsonl (on resume, not if an
        earlier attempt logged that step, see the module docstring), then send it to W&B.
        ``step`` defaults to one more than the previous row's."""
        if step is None:
            step = self._auto_step
        self._auto_step = int(step) + 1
        row = {"step": int(step), "wall_s": round(time.monotonic() - self._t0, 4)}
        row.update(jsonable(metrics))
        if int(step) not in self._old_steps:
            with open(self.metrics_path, "a") as fh:
                fh.write(json.dumps(row) + "\n")
        self.tracker.log(jsonable(metrics), step=int(step))

    def checkpointer(self, every: int = 1, keep: int = 3):
        """An Orbax :class:`~dedebate.lab.checkpoint.Checkpointer` on ``checkpoint_dir``, guarded
        by this run's config hash (use it as a context manager so saves finish before exit)."""
        from dedebate.lab.checkpoint import Checkpointer

        return Checkpointer(self.checkpoint_dir, self.config_hash, every=every, keep=keep)

    def stopwatch(self, name: str):
        """Time a block into ``timings["wall_<name>_s"]`` (results.json ``metrics``); see
        :func:`dedebate.lab.experiment.stopwatch`."""
        return stopwatch(name, self.timings)

    def save_figure(self, fig: Any, name: str) -> str:
        """Save ``fig`` as ``plots/NAME.png``, close it, log it to W&B, return the file name."""
        stem = name.removesuffix(".png")
        if not _SAFE_NAME.match(stem):
            raise ValueError(f"figure name={name!r}: use letters, digits, '_', '-', '.' only")
        filename = f"{stem}.png"
        path = self.plots_dir / filename
        try:
            fig.savefig(path, dpi=110, bbox_inches="tight")
        finally:
            with contextlib.suppress(Exception):
                import matplotlib.pyplot as plt

                plt.close(fig)
        if filename not in self.saved_plots:
            self.saved_plots.append(filename)
        self.tracker.log_image(stem, path)
        return filename


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
        return self.error is None and self.result is not None and bool(self.result.claims) \
            and self.result.passed


def find_resumable(cfg: RunConfig) -> Path | None:
    """The newest ``<output_dir>/<experiment>-*`` whose config.yaml has this config's hash."""
    want = cfg.config_hash()
    return newest_matching_dir(
        cfg.output_dir, f"{cfg.experiment}-*",
        lambda old: not old.get("sweep") and config_hash_of(old) == want)


def run_experiment(module: Any, cfg: RunConfig, *, run_dir: str | os.PathLike | None = None,
                   show_progress: bool = True, nested: bool = False,
                   raise_errors: bool = False, key: Any = None,
                   tracking_name: str | None = None) -> RunRecord:
    """Run ``module.run(cfg.params, ctx)`` and write the run directory.

    Order: config.yaml, then the experiment (metrics.jsonl and plots as it goes), then tables and
    results.json, and only then the W&B summary and artifact (results.json, config.yaml, tables
    and plots). An exception from the experiment is recorded in results.json (``status:
    "error"``) and error.txt; it is re-raised only if ``raise_errors``. ``key`` replaces the
    context's key (a sweep point's key, see ``dedebate/lab/sweep.py``); ``tracking_name`` the
    W&B run name (default: the run directory's name).

    Before config.yaml the run directory is locked (another process on it: :class:`RunDirError`
    "run in use by PID N"); after it, a results.json saying "running" marks the run until it
    ends (unless a finished run is resumed).
    """
    resume = False
    if run_dir is None:
        existing = find_resumable(cfg) if cfg.resume else None
        if existing is not None:
            run_dir, resume = existing, True
        else:
            run_dir = new_run_dir(cfg.output_dir, cfg.experiment)
    run_dir = Path(run_dir).resolve()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunDirError(f"{run_dir}: cannot create the run directory: {err.strerror or err}"
                          ) from None
    resume = resume or (cfg.resume and (run_dir / "checkpoints").is_dir())
    if cfg.resume:
        done = finished_record(module, cfg, run_dir)
        if done is not None:
            eprint(f"dedebate: run already finished: {run_dir}; nothing to do")
            return done
    with lock_run_dir(run_dir):  # a second process on this run stops here ("run in use")
        return _run_in(module, cfg, run_dir, resume, show_progress=show_progress, nested=nested,
                       raise_errors=raise_errors, key=key, tracking_name=tracking_name)


def _finished_results(cfg: RunConfig, run_dir: Path) -> dict[str, Any] | None:
    """results.json of ``run_dir`` if the run finished there with ``cfg``'s config hash and every
    table and plot it lists is on disk, else None."""
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(results, dict) or results.get("status") != "ok":
        return None
    prov = results.get("provenance")
    if not isinstance(prov, dict) or prov.get("config_hash") != cfg.config_hash():
        return None
    listed = [*(results.get("tables") or {}).values(), *(results.get("plots") or [])]
    if not all(isinstance(f, str) and (run_dir / f).is_file() for f in listed):
        return None
    if not isinstance(results.get("claims"), list):
        return None
    return results


def finished_record(module: Any, cfg: RunConfig, run_dir: str | os.PathLike) -> RunRecord | None:
    """The stored record of a run that finished in ``run_dir`` with ``cfg`` (see the module
    docstring), or None (run it). Reads only: no file is written, not even the lock file. A run
    another process holds (it is computing again) is not finished."""
    run_dir = Path(run_dir)
    fd = None
    try:
        import fcntl

        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
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
        claims = [Claim(**{**{k: v for k, v in c.items() if k in names},
                           "passed": bool(c.get("passed_95", c["passed"]))})
                  for c in results["claims"]]
    except (TypeError, KeyError, AttributeError):
        return None
    result = ExperimentResult(claims=claims, metrics=dict(results.get("metrics") or {}),
                              plots=[p.removeprefix("plots/") for p in results.get("plots", [])])
    wall = results["provenance"].get("wall_time_s")
    return RunRecord(cfg, run_dir.resolve(), result, None,
                     float(wall) if isinstance(wall, (int, float)) else 0.0, results,
                     reused=True)


def _write_running_record(module: Any, cfg: RunConfig, run_dir: Path) -> None:
    """``results.json`` saying "running" before the experiment starts, so a run whose process
    dies (killed, out of memory, aborted) is visible as such. A finished run's results.json
    (status "ok") is kept: a resume of it must never lose it."""
    path = run_dir / "results.json"
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if json.loads(path.read_text()).get("status") == "ok":
            return
    write_json(path, {
        "experiment": cfg.experiment,
        "title": getattr(module, "TITLE", ""),
        "status": "running",
        "passed": False,
        "claims": [],
        "started_utc": utc_iso(),
        "pid": os.getpid(),
        "note": "written when the run started and replaced when it ends; if process pid is "
                "gone and this is still here, the run died before finishing (killed, out of "
                "memory or aborted): resume it with dedebate run --resume RUN_DIR",
    })


def _run_in(module: Any, cfg: RunConfig, run_dir: Path, resume: bool, *, show_progress: bool,
            nested: bool, raise_errors: bool, key: Any,
            tracking_name: str | None) -> RunRecord:
    """The body of :func:`run_experiment`, in a locked run directory."""
    write_text(run_dir / "config.yaml", dump_yaml(cfg))
    _write_running_record(module, cfg, run_dir)

    tcfg = cfg.tracking
    mode = tcfg.effective_mode()
    tracker = Tracker.start(mode=mode, run_dir=run_dir, project=tcfg.project,
                            entity=tcfg.entity, group=tcfg.group, job_type=cfg.experiment,
                            name=tracking_name or run_dir.name, config=cfg.to_dict())
    mode = tracker.mode if tracker.active else mode  # online falls back to offline off-network
    ctx = LabContext(cfg, run_dir, tracker, show_progress=show_progress, nested=nested,
                     resume=resume, key=key)

    started = utc_iso()
    t0 = time.monotonic()
    result: ExperimentResult | None = None
    error: str | None = None
    tb_text = None
    try:
        try:
            result = module.run(cfg.params, ctx)
        finally:
            ctx.flush_metrics()
        if not isinstance(result, ExperimentResult):
            raise TypeError(f"{cfg.experiment}.run returned {type(result).__name__}, "
                            "expected ExperimentResult")
        bad = [c for c in result.claims if not isinstance(c, Claim)]
        if bad:
            raise TypeError(f"{cfg.experiment}.run returned claims that are not Claim rows")
    except Exception as err:
        error = f"{type(err).__name__}: {' '.join(str(err).split())}"
        tb_text = traceback.format_exc()
        result = None
        if raise_errors:
            _finish_failed(module, cfg, run_dir, ctx, tracker, mode, started, t0, error, tb_text)
            raise
    wall = time.monotonic() - t0

    if error is not None:
        results = _finish_failed(module, cfg, run_dir, ctx, tracker, mode, started, t0, error,
                                 tb_text)
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
        "metrics": jsonable({**{k: round(v, 4) for k, v in ctx.timings.items()},
                             **result.metrics}),
        "tables": tables,
        "plots": [f"plots/{p}" for p in plots],
        "provenance": _provenance(cfg, ctx, tracker, mode, started, wall),
    }
    write_json(run_dir / "results.json", results)

    # Local results are complete; now W&B.
    gate = [c for c in results["claims"] if gating(c)]
    tracker.set_summary({**results["metrics"], "claims_passed": sum(c["passed"] for c in gate),
                         "claims_total": len(gate), "passed": results["passed"],
                         "wall_time_s": wall})
    tracker.log_artifact(f"results-{run_dir.name}", "results",
                         [run_dir / "results.json", run_dir / "config.yaml",
                          *(run_dir / p for p in tables.values()),
                          *(run_dir / p for p in results["plots"])])
    tracker.finish(0)
    return RunRecord(cfg, run_dir, result, None, wall, results)


def _provenance(cfg: RunConfig, ctx: LabContext, tracker: Tracker, mode: str, started: str,
                wall: float) -> dict[str, Any]:
    prov = {
        "config_hash": ctx.config_hash,
        "seed": cfg.seed,
        "size": cfg.size,
        **environment_provenance(),
        "started_utc": started,
        "wall_time_s": round(wall, 3),
        "resumed": ctx.resume,
        "tracking": {"mode": mode, "wandb_run_id": tracker.run_id,
                     "wandb_dir": tracker.run_path, "failure": tracker.failed},
    }
    return prov


def _status(results_path: Path) -> str | None:
    """``status`` of a results.json (None if absent or unreadable)."""
    try:
        status = json.loads(results_path.read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return status if isinstance(status, str) else None


def _finish_failed(module, cfg, run_dir, ctx, tracker, mode, started, t0, error, tb_text):
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
        "provenance": _provenance(cfg, ctx, tracker, mode, started, wall),
    }
    # a finished run's results are never replaced by a worse record: a failure after them (a
    # later resume that went wrong) is recorded beside them
    target = run_dir / "results.json"
    if _status(target) == "ok":
        target = run_dir / "results.failed.json"
        eprint(f"dedebate: warning: {run_dir}: the run had finished before; results.json is "
               f"kept, this attempt's error record is {target.name} (and error.txt)")
    write_json(target, results)
    tracker.set_summary({"passed": False, "error": error})
    tracker.finish(1)
    return results
