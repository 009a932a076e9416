"""``dedebate reproduce``: run every registered experiment and write the claims report.

Output: ``<output_dir>/reproduce-<UTC timestamp>/`` with one run directory per experiment
(``<experiment>/``, same contents as a ``dedebate run`` directory), ``report.md`` (provenance
header, one table row per Claim, the plots) and ``report.json``. The report is rewritten after
each experiment, so results of finished experiments are on disk before later ones start. An
experiment that raises (or fails to import, or returns no claims, or whose worker process dies)
is a failing row; the others still run. The job passes iff every claim of every experiment
passes. The Monte-Carlo rows are decided once, over the whole report, and that decision is
written back into each experiment's ``results.json`` (:func:`write_back_decisions`). With
``jobs`` > 1 the experiments run side by side in worker processes (:mod:`dedebate.lab.parallel`);
the rows keep the registry's order. ``--resume DIR --only NAME`` runs only the experiments named
and keeps every other row the directory holds (their stored records), so the report and its
family stay whole. The report's content and its markdown:
:mod:`dedebate.lab.report_render` (re-exported here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dedebate.lab.claims import FAMILY_ALPHA, awaits_family, gating
from dedebate.lab.config import ConfigError, TrackingMode, default_config
from dedebate.lab.folder_guard import check_run_dir
from dedebate.lab.memory import MemoryBudgetError, check_run, run_bytes, workers_that_fit
from dedebate.lab.registry import Registry
from dedebate.lab.report_render import (  # noqa: F401  (re-exported)
    ExperimentEntry,
    apply_report_family,
    claim_totals,
    fmt,
    job_passed,
    measured,
    render_markdown,
)
from dedebate.lab.rerender import earlier_attempts
from dedebate.lab.rundir import (
    RESULT_SCHEMA_VERSION,
    RunDirError,
    environment_provenance,
    eprint,
    new_run_dir,
    read_json,
    utc_iso,
    write_json,
    write_text,
)
from dedebate.lab.runner import finished_record, run_experiment, stored_results
from dedebate.lab.tracking import Tracker


@dataclasses.dataclass
class ReproduceOutcome:
    """What :func:`reproduce` returns: the report directory and one entry per experiment."""

    report_dir: Path
    entries: list[ExperimentEntry]

    @property
    def passed(self) -> bool:
        """Whether the reproduce job passes: some experiment passes and none fails.

        Returns the verdict (measurement-only experiments neither pass nor fail it).
        """
        return job_passed(self.entries)


def reproduce(
    registry: Registry,
    *,
    size: str = "default",
    seed: int = 0,
    output_dir: str = "runs",
    only: list[str] | None = None,
    tracking_mode: TrackingMode = "auto",
    project: str = "dedebate",
    show_progress: bool = True,
    resume_dir: str | os.PathLike | None = None,
    jobs: int = 1,
    memory_limit: int | str = "auto",
) -> ReproduceOutcome:
    """Run the selected experiments at ``size`` and write ``report.md`` / ``report.json``.

    The report is rewritten after each experiment. An experiment that raises, fails to import
    or returns no claims is a failing row; the others still run.

    Args:
        registry: the discovered experiments (and import errors, reported as failing rows).
        size: ``"quick"``, ``"default"`` or ``"full"``.
        seed: the root seed of every run.
        output_dir: where the reproduce directory is created.
        only: the experiment names to run; None = all. A resume keeps the directory's other
            rows (:func:`_keep`), so the report and its family are those of a full resume.
        tracking_mode: W&B mode of every run (``auto``, ``offline``, ``online``, ``disabled``).
        project: the W&B project.
        show_progress: show progress bars.
        resume_dir: continue that reproduce directory instead of a new one; every experiment is
            run with ``resume``, so one that finished there is not run again (its stored record
            is reported) and one that failed or died is run again, from its checkpoints.
        jobs: worker processes that run the experiments side by side
            (:mod:`dedebate.lab.parallel`); 1 runs them one after another in this process. The
            report is the same either way (rows in the registry's order).
        memory_limit: every run's ``memory_limit``; an experiment estimated over it is a
            failing row of one line (:mod:`dedebate.lab.memory`), before it starts.

    Returns the :class:`ReproduceOutcome`.

    Raises:
        ValueError: nothing is selected (no experiment and no import error to report).
        RunDirError: a resumed directory that reaches outside itself or holds what is not a
            file, or an experiment's results.json there that is not a record dedebate writes
            (:func:`~dedebate.lab.runner.stored_results`); nothing is written.
    """
    names = registry.names()
    import_errors: Mapping[str, str] = registry.errors
    if only:
        names = [n for n in names if n in only]
        import_errors = {}
    if not names and not import_errors:
        raise ValueError(
            "no experiments found to reproduce (the experiments package has no "
            "module defining NAME and run)"
        )
    report_dir = (
        new_run_dir(output_dir, "reproduce") if resume_dir is None else Path(resume_dir).resolve()
    )
    check_run_dir(report_dir)  # a resumed one from someone else: no link out of it
    kept: set[str] = set()  # resume --only: the rows the report keeps without running them
    if only and resume_dir is not None:  # what the folder holds stays (and so does its family)
        held = _held_experiments(report_dir, registry)
        kept = {n for n in held if n in registry.experiments and n not in only}
        import_errors = {m: e for m, e in registry.errors.items() if m in held}
        names = [n for n in registry.names() if n in only or n in kept]
    if resume_dir is not None:  # its records are checked before the report is rewritten
        for name in names:
            stored_results(report_dir / name)  # a hostile results.json: RunDirError (exit 2)
    group = report_dir.name
    started = utc_iso()
    began, wall_before = earlier_attempts(report_dir) if resume_dir is not None else (None, 0.0)
    t_start = time.monotonic() - wall_before  # the wall time of every attempt
    header = {"size": size, "seed": seed, "started_utc": began or started}
    header |= environment_provenance()
    if resume_dir is not None:
        header |= {"resumed": True, "resumed_utc": started}
    first = [
        ExperimentEntry(name=mod_name, status="error", error=f"import failed: {err}")
        for mod_name, err in sorted(import_errors.items())
    ]
    done: dict[str, ExperimentEntry] = {}

    def ordered() -> list[ExperimentEntry]:  # the registry's order, whatever finished first
        return [*first, *(done[n] for n in names if n in done)]

    # on disk before W&B starts (an online start can take a minute): a reproduce killed then is
    # still a reproduce directory that --resume takes
    _write_report(report_dir, header, ordered(), time.monotonic() - t_start, final=False)
    job = Tracker.start(
        mode=_effective(tracking_mode),
        run_dir=report_dir,
        project=project,
        job_type="reproduce",
        name=group,
        group=group,
        config={"size": size, "seed": seed, "experiments": names},
        resume=resume_dir is not None,
    )  # a resume continues this W&B run

    def finish(entry: ExperimentEntry, ran: bool = True) -> None:
        done[entry.name] = entry
        if ran:  # progress only: a verdict is the report's, decided at the end
            job.log({"experiments_done": len(first) + len(done)})
        _write_report(report_dir, header, ordered(), time.monotonic() - t_start, final=False)

    pending = []
    for name in names:
        module = registry.experiments[name]
        entry = ExperimentEntry(
            name=name,
            title=getattr(module, "TITLE", ""),
            measurement_only=bool(getattr(module, "MEASUREMENT_ONLY", False)),
        )
        try:
            cfg = default_config(
                module,
                size=size,
                seed=seed,
                output_dir=str(report_dir),
                resume=resume_dir is not None,
                memory_limit=memory_limit,
                tracking={"mode": tracking_mode, "project": project, "group": group},
            )
        except ConfigError as err:
            entry.status, entry.error = "error", f"bad embedded config: {err}"
            finish(entry, ran=False)
            continue
        if name in kept:  # not named by --only: its stored record, as a resume reads it
            _keep(entry, module, cfg, report_dir)
            finish(entry, ran=False)
            continue
        run_dir = report_dir / name
        try:  # what cannot fit is a row of its own, before any work; what finished is reused
            if not (resume_dir and run_dir.is_dir() and finished_record(module, cfg, run_dir)):
                check_run(module, cfg)
        except MemoryBudgetError as err:
            entry.status, entry.error = "error", str(err)
            finish(entry, ran=False)
            continue
        pending.append((entry, module, cfg))
    needs = [run_bytes(module, cfg) for _, module, cfg in pending]
    jobs, why = workers_that_fit(needs, min(jobs, len(pending)), memory_limit)
    if why:
        eprint(f"dedebate: warning: {why}")
    if jobs > 1 and len(pending) > 1:
        _run_parallel(pending, report_dir, jobs, finish, show_progress)
    else:
        _run_sequential(pending, report_dir, finish, show_progress)

    entries = ordered()
    outcome = ReproduceOutcome(report_dir, entries)
    _write_report(report_dir, header, entries, time.monotonic() - t_start, final=True)
    n_pass, n_claims = claim_totals(entries)
    job.set_summary(
        {
            "passed": outcome.passed,
            "claims_total": n_claims,
            "claims_passed": n_pass,
            "experiments": len(entries),
            "experiments_failed": sum(e.verdict == "FAIL" for e in entries),
            **{f"experiment_passed/{e.name}": int(e.passed) for e in entries},
        }
    )
    job.log_artifact(
        f"report-{group}", "report", [report_dir / "report.md", report_dir / "report.json"]
    )
    job.finish(0 if outcome.passed else 1)
    return outcome


def _held_experiments(report_dir: Path, registry: Registry) -> set[str]:
    """The rows report.json lists and the registered experiments with a folder in the directory."""
    listed: Any = None
    with contextlib.suppress(OSError, ValueError, AttributeError, RunDirError):  # read by the CLI
        listed = read_json(report_dir / "report.json").get("experiments")
    rows = listed if isinstance(listed, list) else []
    held = {r["name"] for r in rows if isinstance(r, dict) and isinstance(r.get("name"), str)}
    return held | {n for n in registry.experiments if (report_dir / n).is_dir()}


def _keep(entry: ExperimentEntry, module, cfg, report_dir: Path) -> None:
    """A row ``--only`` leaves out: its finished record as a resume reads it, else a failing row."""
    run_dir = report_dir / entry.name
    rec = finished_record(module, cfg, run_dir) if run_dir.is_dir() else None
    if rec is not None:
        _fill(entry, rec.wall_time_s, None, rec.results["claims"], rec.results.get("plots", []))
        return
    stored = (stored_results(run_dir) if run_dir.is_dir() else None) or {}
    last = " ".join(str(stored.get("error") or stored.get("status") or "none").split())[:300]
    entry.status, entry.run_dir = "error", entry.name if run_dir.is_dir() else None
    entry.error = (
        f"not finished with this config (last record: {last}); not run, as --only leaves it "
        f"out: reproduce --resume with --only {entry.name} (or without --only) runs it"
    )


def _fill(
    entry: ExperimentEntry,
    wall: float,
    run_error: str | None,
    claims: list[dict[str, Any]],
    plots: list[str],
) -> None:
    """An experiment's row from its run record (in this process or a worker's)."""
    entry.run_dir = entry.name
    entry.wall_time_s = wall
    entry.plots = [f"{entry.name}/{p}" for p in plots]
    if run_error is not None:
        entry.status, entry.error = "error", run_error
    else:
        entry.claims = claims
        if not entry.claims:
            entry.status, entry.error = "error", "the experiment returned no claims"


def _run_sequential(pending, report_dir: Path, finish, show_progress: bool) -> None:
    """One experiment after another, in this process, under one tqdm bar."""
    from tqdm.auto import tqdm

    outer = tqdm(
        pending,
        desc="reproduce",
        unit="exp",
        file=sys.stderr,
        disable=not show_progress,
        dynamic_ncols=True,
    )
    for entry, module, cfg in outer:
        outer.set_postfix_str(entry.name)
        try:
            rec = run_experiment(
                module,
                cfg,
                run_dir=report_dir / entry.name,
                show_progress=show_progress,
                nested=True,
            )
        except Exception as err:  # noqa: BLE001 - the lab itself failed; still a row
            entry.status, entry.error = "error", f"{type(err).__name__}: {err}"
            finish(entry, ran=False)
            continue
        _fill(
            entry,
            rec.wall_time_s,
            rec.error,
            rec.results.get("claims", []),
            rec.results.get("plots", []),
        )
        finish(entry)
    outer.close()


def _typical_seconds(module) -> float:
    """An experiment's ``TYPICAL_SECONDS`` (a scheduling hint), 0 when absent or invalid."""
    # An experiment's ``TYPICAL_SECONDS`` (a scheduling hint, docs/lab.md), 0 when it has none or it
    # is not a finite number >= 0.
    value = getattr(module, "TYPICAL_SECONDS", 0.0)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if number and math.isfinite(value) and value >= 0 else 0.0


def _run_parallel(pending, report_dir: Path, jobs: int, finish, show_progress: bool) -> None:
    """Run the experiments in ``jobs`` worker processes, the longest first."""
    # The experiments in ``jobs`` worker processes, the longest (``TYPICAL_SECONDS``) first; one
    # progress line per start and end.
    from dedebate.lab.parallel import Task, run_tasks

    entries = {entry.name: entry for entry, _, _ in pending}
    longest_first = sorted(pending, key=lambda p: -_typical_seconds(p[1]))  # stable: else in order
    tasks = [
        Task(entry.name, module.__name__, cfg, report_dir / entry.name)
        for entry, module, cfg in longest_first
    ]
    say = eprint if show_progress else (lambda _text: None)
    say(f"reproduce: {len(tasks)} experiments in {min(jobs, len(tasks))} processes")
    finished, undecided = 0, []
    for out in run_tasks(tasks, jobs, on_start=lambda t: say(f"reproduce: started {t.name}")):
        entry = entries[out.name]
        if out.error is not None:
            entry.status, entry.error = "error", out.error
            if (report_dir / entry.name).is_dir():
                entry.run_dir = entry.name
            finish(entry, ran=False)
        else:
            _fill(entry, out.wall_time_s, out.run_error, out.claims, out.plots)
            finish(entry)
        finished += 1
        if pending_rows(entry, finished, len(tasks)):
            undecided.append(entry)
        say(progress_line(entry, finished, len(tasks)))
    for entry in undecided:  # every experiment has finished: the report's family decided them
        n_ok, n_all = entry.counts()
        m = max((c.get("family_size", 0) for c in entry.claims), default=0)
        say(
            f"reproduce: {entry.name}: {entry.verdict} {n_ok}/{n_all} (decided over the "
            f"report's family of {m} Monte-Carlo rows; results.json records it)"
        )


def pending_rows(entry: ExperimentEntry, finished: int, total: int) -> list[dict[str, Any]]:
    """The rows that leave an experiment ``UNDECIDED`` when the ``finished``-th of ``total``
    ends: while some experiments still run, if every failing gating row of a finished
    experiment may pass in the whole family (:func:`dedebate.lab.claims.awaits_family`), those
    rows; else none (the verdict is final).

    Args:
        entry: the experiment's entry, its rows decided over the family so far.
        finished: how many experiments have finished, this one included.
        total: how many run.

    Returns the pending rows (empty when the experiment's verdict is final).
    """
    rows = [c for c in entry.claims if gating(c) and not c["passed"]]
    if finished < total and entry.status == "ok" and rows and all(map(awaits_family, rows)):
        return rows
    return []


def progress_line(entry: ExperimentEntry, finished: int, total: int) -> str:
    """The line printed when the ``finished``-th of ``total`` experiments ends.

    Its Monte-Carlo rows are decided family-wise over the rows of the experiments finished so
    far. While some are still running, an experiment whose only failing rows may pass in the
    whole family (:func:`pending_rows`) is ``UNDECIDED``, not ``FAIL``, and the line names those
    rows: the report decides them when every experiment has finished and writes that verdict
    into the experiment's ``results.json``.

    Args:
        entry: the experiment's entry, its rows decided over the family so far.
        finished: how many experiments have finished, this one included.
        total: how many run.
    """
    n_ok, n_all = entry.counts()
    pending = pending_rows(entry, finished, total)
    verdict = "UNDECIDED" if pending else entry.verdict
    line = (
        f"reproduce: [{finished}/{total}] {entry.name}: {verdict} {n_ok}/{n_all}"
        f" in {entry.wall_time_s:.1f} s"
    )
    if pending:
        m = pending[0]["family_size"]
        named = "; ".join(f"'{c['claim']}' p={fmt(c['p_value'])}" for c in pending[:3])
        more = f"; {len(pending) - 3} more" if len(pending) > 3 else ""
        line += (
            f" (pending: {len(pending)} Monte-Carlo row(s) below {FAMILY_ALPHA:g}/{m}, the "
            f"level of the {m} rows finished so far: {named}{more}; the report decides "
            f"them over every experiment's rows when all {total} have finished)"
        )
    return line + (f" ({entry.error})" if entry.error else "")


def write_back_decisions(report_dir: Path, entries: list[ExperimentEntry]) -> None:
    """Write the report's decisions into every experiment's ``results.json``, so that a row has
    one verdict everywhere: its claims become the report's rows (``family: "report"``, with the
    report's family size), ``passed`` the report's verdict, and ``decided_by`` names the report.

    Args:
        report_dir: the reproduce directory.
        entries: the report's entries, decided by :func:`apply_report_family`.
    """
    for e in entries:
        if e.status != "ok" or not e.run_dir:
            continue  # a failed run: nothing decided to write
        path = report_dir / e.run_dir / "results.json"
        try:
            results = read_json(path)  # no link, no FIFO, at most MAX_RECORD_BYTES
        except (OSError, ValueError, RunDirError):
            continue
        if not (
            isinstance(results, dict)
            and results.get("status") == "ok"
            and len(results.get("claims") or []) == len(e.claims)
        ):
            continue  # not this entry's record
        decided = {
            **results,
            "passed": e.passed,
            "claims": e.claims,
            "decided_by": "../report.json",
        }
        if decided != results:  # a resumed report leaves a record it already decided alone
            write_json(path, decided)


def _effective(mode: TrackingMode) -> str:
    from dedebate.lab.config import TrackingConfig

    return TrackingConfig(mode=mode).effective_mode()


def _write_report(
    report_dir: Path,
    header: Mapping[str, Any],
    entries: list[ExperimentEntry],
    wall_time_s: float,
    final: bool,
) -> None:
    # report.json keeps the job's wall time to the millisecond; report.md shows that same value,
    # so rendering report.json again (dedebate report) gives report.md byte for byte
    wall_time_s = round(wall_time_s, 3)
    apply_report_family(entries)
    write_text(report_dir / "report.md", render_markdown(header, entries, wall_time_s, final))
    n_pass, n_claims = claim_totals(entries)
    findings = [c for e in entries for c in e.findings()]
    write_json(
        report_dir / "report.json",
        {
            "schema_version": RESULT_SCHEMA_VERSION,
            "complete": final,
            "passed": job_passed(entries),
            "claims_total": n_claims,
            "claims_passed": n_pass,
            "findings_total": len(findings),
            "findings_met": sum(bool(c["passed"]) for c in findings),
            "wall_time_s": wall_time_s,
            "provenance": dict(header),
            "experiments": [
                {**dataclasses.asdict(e), "passed": e.passed, "verdict": e.verdict} for e in entries
            ],
        },
    )
    if final:
        write_back_decisions(report_dir, entries)
