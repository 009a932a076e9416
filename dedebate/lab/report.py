"""``dedebate reproduce``: run every registered experiment and write the claims report.

Output: ``<output_dir>/reproduce-<UTC timestamp>/`` with one run directory per experiment
(``<experiment>/``, same contents as a ``dedebate run`` directory), ``report.md`` (provenance
header, one table row per Claim, the plots) and ``report.json``. The report is rewritten after
each experiment, so results of finished experiments are on disk before later ones start. An
experiment that raises (or fails to import, or returns no claims, or whose worker process dies)
is a failing row; the others still run. The job passes iff every claim of every experiment
passes. With ``jobs`` > 1 the experiments run side by side in worker processes
(``dedebate/lab/parallel.py``); the rows keep the registry's order.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dedebate.lab.config import ConfigError, default_config
from dedebate.lab.experiment import FAMILY_ALPHA, gating, with_family_decisions
from dedebate.lab.registry import Registry
from dedebate.lab.rundir import (
    RESULT_SCHEMA_VERSION,
    environment_provenance,
    eprint,
    new_run_dir,
    utc_iso,
    write_json,
    write_text,
)
from dedebate.lab.runner import run_experiment
from dedebate.lab.tracking import Tracker


@dataclasses.dataclass
class ExperimentEntry:
    """One experiment's part of the report."""

    name: str
    title: str = ""
    status: str = "ok"  # ok | error
    error: str | None = None
    run_dir: str | None = None  # relative to the report directory
    wall_time_s: float = 0.0
    claims: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    plots: list[str] = dataclasses.field(default_factory=list)  # relative to the report directory
    measurement_only: bool = False  # the module declares MEASUREMENT_ONLY = True

    @property
    def passed(self) -> bool:
        """Ran, has at least one gating claim, and every gating claim passes (an experiment
        whose rows are all findings has shown nothing, so it does not pass)."""
        gate = [c for c in self.claims if gating(c)]
        return self.status == "ok" and bool(gate) and all(c["passed"] for c in gate)

    @property
    def verdict(self) -> str:
        """``PASS``, ``FAIL``, or ``MEASURED`` for an experiment declared measurement-only that
        ran and has no gating claim (it neither passes nor fails the report)."""
        if self.passed:
            return "PASS"
        if self.measurement_only and self.status == "ok" and self.claims and not any(
                gating(c) for c in self.claims):
            return "MEASURED"
        return "FAIL"

    def counts(self) -> tuple[int, int]:
        """(claims passing, claims) over the gating rows (findings excluded)."""
        rows = [c for c in self.claims if gating(c)]
        return sum(bool(c["passed"]) for c in rows), len(rows)

    def findings(self) -> list[dict[str, Any]]:
        return [c for c in self.claims if not gating(c)]


@dataclasses.dataclass
class ReproduceOutcome:
    report_dir: Path
    entries: list[ExperimentEntry]

    @property
    def passed(self) -> bool:
        return _job_passed(self.entries)


def _job_passed(entries: list[ExperimentEntry]) -> bool:
    """Some experiment passes and none fails (measurement-only experiments do neither)."""
    verdicts = [e.verdict for e in entries]
    return "PASS" in verdicts and "FAIL" not in verdicts


def reproduce(registry: Registry, *, size: str = "default", seed: int = 0,
              output_dir: str = "runs", only: list[str] | None = None,
              tracking_mode: str = "auto", project: str = "dedebate",
              show_progress: bool = True,
              resume_dir: str | os.PathLike | None = None, jobs: int = 1) -> ReproduceOutcome:
    """Run the selected experiments at ``size`` and write ``report.md`` / ``report.json``.

    ``resume_dir``: continue that reproduce directory instead of a new one; every experiment is
    run with ``resume``, so one that finished there is not run again (its stored record is
    reported, see ``dedebate/lab/runner.py``) and one that failed or died is run again, from its
    checkpoints. ``jobs``: worker processes that run the experiments side by side
    (``dedebate/lab/parallel.py``); 1 runs them one after another in this process. The report
    is the same either way (rows in the registry's order, not the order experiments finish in).
    Raises ``ValueError`` if nothing is selected (no experiment and no import error to report).
    """
    names = registry.names()
    import_errors: Mapping[str, str] = registry.errors
    if only:
        names = [n for n in names if n in only]
        import_errors = {}
    if not names and not import_errors:
        raise ValueError("no experiments found to reproduce (the experiments package has no "
                         "module defining NAME and run)")
    report_dir = new_run_dir(output_dir, "reproduce") if resume_dir is None \
        else Path(resume_dir).resolve()
    group = report_dir.name
    started = utc_iso()
    t_start = time.monotonic()
    header = {
        "size": size,
        "seed": seed,
        "started_utc": started,
        **environment_provenance(),
    }
    if resume_dir is not None:
        header["resumed"] = True
    first = [ExperimentEntry(name=mod_name, status="error", error=f"import failed: {err}")
             for mod_name, err in sorted(import_errors.items())]
    done: dict[str, ExperimentEntry] = {}

    def ordered() -> list[ExperimentEntry]:  # the registry's order, whatever finished first
        return [*first, *(done[n] for n in names if n in done)]

    job = Tracker.start(mode=_effective(tracking_mode), run_dir=report_dir, project=project,
                        job_type="reproduce", name=group, group=group,
                        config={"size": size, "seed": seed, "experiments": names})

    def finish(entry: ExperimentEntry, ran: bool = True) -> None:
        done[entry.name] = entry
        if ran:
            job.log({"experiment_passed": int(entry.passed),
                     "experiments_done": len(first) + len(done)})
        _write_report(report_dir, header, ordered(), time.monotonic() - t_start, final=False)

    _write_report(report_dir, header, ordered(), time.monotonic() - t_start, final=False)
    pending = []
    for name in names:
        module = registry.experiments[name]
        entry = ExperimentEntry(name=name, title=getattr(module, "TITLE", ""),
                                measurement_only=bool(getattr(module, "MEASUREMENT_ONLY", False)))
        try:
            cfg = default_config(module, size=size, seed=seed, output_dir=str(report_dir),
                                 resume=resume_dir is not None,
                                 tracking={"mode": tracking_mode, "project": project,
                                           "group": group})
        except ConfigError as err:
            entry.status, entry.error = "error", f"bad embedded config: {err}"
            finish(entry, ran=False)
            continue
        pending.append((entry, module, cfg))
    if jobs > 1 and len(pending) > 1:
        _run_parallel(pending, report_dir, jobs, finish, show_progress)
    else:
        _run_sequential(pending, report_dir, finish, show_progress)

    entries = ordered()
    outcome = ReproduceOutcome(report_dir, entries)
    _write_report(report_dir, header, entries, time.monotonic() - t_start, final=True)
    n_pass, n_claims = _totals(entries)
    job.set_summary({"passed": outcome.passed, "claims_total": n_claims,
                     "claims_passed": n_pass, "experiments": len(entries),
                     "experiments_failed": sum(e.verdict == "FAIL" for e in entries)})
    job.log_artifact(f"report-{group}", "report",
                     [report_dir / "report.md", report_dir / "report.json"])
    job.finish(0 if outcome.passed else 1)
    return outcome


def _fill(entry: ExperimentEntry, wall: float, run_error: str | None,
          claims: list[dict[str, Any]], plots: list[str]) -> None:
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

    outer = tqdm(pending, desc="reproduce", unit="exp", file=sys.stderr,
                 disable=not show_progress, dynamic_ncols=True)
    for entry, module, cfg in outer:
        outer.set_postfix_str(entry.name)
        try:
            rec = run_experiment(module, cfg, run_dir=report_dir / entry.name,
                                 show_progress=show_progress, nested=True)
        except Exception as err:  # noqa: BLE001 - the lab itself failed; still a row
            entry.status, entry.error = "error", f"{type(err).__name__}: {err}"
            finish(entry, ran=False)
            continue
        _fill(entry, rec.wall_time_s, rec.error, rec.results.get("claims", []),
              rec.results.get("plots", []))
        finish(entry)
    outer.close()


def _run_parallel(pending, report_dir: Path, jobs: int, finish, show_progress: bool) -> None:
    """The experiments in ``jobs`` worker processes; one progress line per start and end."""
    from dedebate.lab.parallel import Task, run_tasks

    entries = {entry.name: entry for entry, _, _ in pending}
    tasks = [Task(entry.name, module.__name__, cfg, report_dir / entry.name)
             for entry, module, cfg in pending]
    say = eprint if show_progress else (lambda _text: None)
    say(f"reproduce: {len(tasks)} experiments in {min(jobs, len(tasks))} processes")
    finished = 0
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
        n_ok, n_all = entry.counts()
        say(f"reproduce: [{finished}/{len(tasks)}] {entry.name}: {entry.verdict} {n_ok}/{n_all}"
            f" in {entry.wall_time_s:.1f} s" + (f" ({entry.error})" if entry.error else ""))


def _effective(mode: str) -> str:
    from dedebate.lab.config import TrackingConfig

    return TrackingConfig(mode=mode).effective_mode()


# ----------------------------------------------------------------------------- rendering


def fmt(x: Any) -> str:
    """Compact number formatting for the report: an integral value prints as an integer
    (105967, not 1.06e+05), anything else with 4 significant digits."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if x.is_integer() and abs(x) < 2.0**53:
            return str(int(x))
        return f"{x:.4g}"
    return str(x)


_BOUND = re.compile(r"\s*(==|<=|>=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_HOLDS = {"==": lambda v, t: v == t, "<=": lambda v, t: v <= t, ">=": lambda v, t: v >= t,
          "<": lambda v, t: v < t, ">": lambda v, t: v > t}


def measured(c: Mapping[str, Any]) -> str:
    """``value [lo, hi]``, or the value and ``(exact)`` when the number is not sampled
    (lo == value == hi). An exact row that passes although its value does not meet the number
    in its bound strictly (``== 1`` for 1.000000000000111) shows the full value and says that
    it passes only within the stated tolerance."""
    v, lo, hi = c.get("value"), c.get("lo"), c.get("hi")
    if not (lo == v and hi == v):
        return f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"
    m = _BOUND.match(str(c.get("bound", "")))
    if isinstance(v, (int, float)) and m and c.get("passed"):
        target = float(m.group(2))
        if not _HOLDS[m.group(1)](float(v), target):
            shown = fmt(v) if float(fmt(v)) == float(v) else repr(float(v))
            return f"{shown} (exact; meets {m.group(1)} {m.group(2)} only within tolerance)"
    return f"{fmt(v)} (exact)"


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _anchor(e: ExperimentEntry) -> str:
    """GitHub's anchor for the ``## name — title`` heading."""
    text = f"{e.name} — {e.title}" if e.title else e.name
    text = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def _totals(entries: list[ExperimentEntry]) -> tuple[int, int]:
    """(claims passing, claims) over every experiment's gating rows."""
    counts = [e.counts() for e in entries]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def _findings_text(entries: list[ExperimentEntry]) -> str:
    rows = [c for e in entries for c in e.findings()]
    if not rows:
        return ""
    held = sum(bool(c["passed"]) for c in rows)
    return (f" {len(rows)} measured finding(s), which are not paper claims and do not gate the "
            f"verdict: {held} meet their stated criterion, {len(rows) - held} do not.")


def render_markdown(header: Mapping[str, Any], entries: list[ExperimentEntry],
                    wall_time_s: float, final: bool = True) -> str:
    n_pass, n_claims = _totals(entries)
    n_err = sum(e.status == "error" for e in entries)
    ok = _job_passed(entries)
    verdict = ("PASS" if ok else "FAIL") if final else "IN PROGRESS"
    lines = [
        "# dedebate reproduce report",
        "",
        f"**{verdict}**: {n_pass}/{n_claims} claims pass"
        + (f"; {n_err} experiment(s) failed to run" if n_err else "") + "."
        + _findings_text(entries),
        "",
        "| provenance | |",
        "|---|---|",
    ]
    for k in ("size", "seed", "started_utc", "dedebate_version", "git_commit", "git_dirty",
              "jax_version", "backend", "device_count", "python_version", "platform",
              "result_schema_version"):
        lines.append(f"| {k} | {_cell(header.get(k))} |")
    packages = header.get("packages") or {}
    if packages:
        lines.append("| packages | " + _cell(", ".join(f"{k} {v or '-'}"
                                                    for k, v in packages.items())) + " |")
    lines.append(f"| wall_time_s | {wall_time_s:.1f} |")
    lines += ["", _policy_line(entries)]
    lines += ["", "| experiment | claims passed | result |", "|---|---|---|"]
    for e in entries:
        n_ok, n_all = e.counts()
        lines.append(f"| [{_cell(e.name)}](#{_anchor(e)}) | {n_ok}/{n_all} | {e.verdict} |")
    lines.append("")
    for e in entries:
        status = e.verdict
        title = f" — {e.title}" if e.title else ""
        lines += [f"## {e.name}{title}", ""]
        where = f"run directory `{e.run_dir}/`, " if e.run_dir else ""
        lines += [f"{status}; {where}{e.wall_time_s:.1f} s.", ""]
        lines += ["| claim | source | bound | measured (95% interval) | result | note |",
                  "|---|---|---|---|---|---|"]
        for c in e.claims:
            if gating(c):
                lines.append(_row(c))
        if e.status == "error":
            lines.append(f"| experiment did not complete | {_cell(e.name)} | — | — | FAIL | "
                         f"{_cell(e.error)} |")
        elif e.verdict == "FAIL" and not any(gating(c) for c in e.claims):
            lines.append(f"| experiment has no gating claim | {_cell(e.name)} | — | — | FAIL | "
                         "only findings, and the experiment is not declared measurement-only |")
        elif e.verdict == "MEASURED":
            lines.append(f"| measurement-only experiment | {_cell(e.name)} | — | — | no verdict "
                         "| declared MEASUREMENT_ONLY: its findings below neither pass nor fail "
                         "the report |")
        lines.append("")
        if e.findings():
            lines += ["Measured findings (not paper claims; they do not gate the verdict):", "",
                      "| finding | source | criterion | measured (95% interval) | outcome | note |",
                      "|---|---|---|---|---|---|"]
            lines += [_row(c) for c in e.findings()]
            lines.append("")
        for p in e.plots:
            lines += [f"![{Path(p).stem}]({p})", ""]
    return "\n".join(lines).rstrip() + "\n"


def apply_report_family(entries: list[ExperimentEntry]) -> None:
    """Decide every Monte-Carlo row of the report family-wise (Bonferroni over all of them,
    :func:`dedebate.lab.experiment.family_decisions`): a report whose claims all hold fails with
    probability at most ``FAMILY_ALPHA``. Each row's own 95% decision is kept as ``passed_95``."""
    flat = [c for e in entries for c in e.claims]
    decided = iter(with_family_decisions(flat))
    for e in entries:
        e.claims = [next(decided) for _ in e.claims]


def _policy_line(entries: list[ExperimentEntry]) -> str:
    rows = [c for e in entries for c in e.claims if c.get("p_value") is not None and gating(c)]
    if not rows:
        return "Every row is exact (no Monte-Carlo rows)."
    m = len(rows)
    misses = sum(not c.get("passed_95", c["passed"]) for c in rows)
    return (f"Multiple comparisons: the {m} Monte-Carlo rows are decided family-wise "
            f"(Bonferroni): a row passes iff its p-value >= {FAMILY_ALPHA:g}/{m} = "
            f"{FAMILY_ALPHA / m:.3g}, so a report whose claims all hold fails with probability "
            f"at most {FAMILY_ALPHA:g}. Intervals shown are each row's own 95% interval; "
            f"{misses} row(s) miss their bound at 95% alone (marked '95%: miss'). Exact rows "
            "compare exactly.")


def _row(c: Mapping[str, Any]) -> str:
    return (f"| {_cell(c['claim'])} | {_cell(c['source'])} | {_cell(c['bound'])} | "
            f"{_cell(measured(c))} | {_result_cell(c)} | {_cell(c.get('note', ''))} |")


def _result_cell(c: Mapping[str, Any]) -> str:
    if not gating(c):
        return "criterion met" if c["passed"] else "criterion NOT met"
    text = "PASS" if c["passed"] else "FAIL"
    if c.get("p_value") is not None:
        own = "" if c.get("passed_95", c["passed"]) else "; 95%: miss"
        text += f" (p={c['p_value']:.3g}{own})"
    return text


def _write_report(report_dir: Path, header: Mapping[str, Any], entries: list[ExperimentEntry],
                  wall_time_s: float, final: bool) -> None:
    apply_report_family(entries)
    write_text(report_dir / "report.md", render_markdown(header, entries, wall_time_s, final))
    n_pass, n_claims = _totals(entries)
    findings = [c for e in entries for c in e.findings()]
    write_json(report_dir / "report.json", {
        "schema_version": RESULT_SCHEMA_VERSION,
        "complete": final,
        "passed": _job_passed(entries),
        "claims_total": n_claims,
        "claims_passed": n_pass,
        "findings_total": len(findings),
        "findings_met": sum(bool(c["passed"]) for c in findings),
        "wall_time_s": round(wall_time_s, 3),
        "provenance": dict(header),
        "experiments": [{**dataclasses.asdict(e), "passed": e.passed, "verdict": e.verdict}
                        for e in entries],
    })
