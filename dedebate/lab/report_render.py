"""What the reproduce report says: its entries, verdicts and family-wise decisions, as markdown.

An :class:`ExperimentEntry` is one experiment's part of the report (its status, claim rows and
plots); its verdict is ``PASS``, ``FAIL`` or ``MEASURED`` (a measurement-only experiment with no
gating claim). :func:`apply_report_family` decides the report's Monte-Carlo rows together
(Bonferroni over all of them), and the job passes when some experiment passes and none fails
(:func:`job_passed`). :func:`render_markdown` writes ``report.md``: provenance header, verdict,
one table row per claim (:func:`measured`), findings and plots. Running the job:
:mod:`dedebate.lab.report`; rendering a stored report again: :mod:`dedebate.lab.rerender`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dedebate.lab.claims import FAMILY_ALPHA, family_size, gating, with_family_decisions


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
        """Whether the experiment ran and every one of its (at least one) gating claims passes.

        An experiment whose rows are all findings has shown nothing, so it does not pass.
        """
        gate = [c for c in self.claims if gating(c)]
        return self.status == "ok" and bool(gate) and all(c["passed"] for c in gate)

    @property
    def verdict(self) -> str:
        """The experiment's verdict in the report.

        Returns ``PASS``, ``FAIL``, or ``MEASURED`` for an experiment declared measurement-only that
        ran and has no gating claim (it neither passes nor fails the report).
        """
        if self.passed:
            return "PASS"
        if (
            self.measurement_only
            and self.status == "ok"
            and self.claims
            and not any(gating(c) for c in self.claims)
        ):
            return "MEASURED"
        return "FAIL"

    def counts(self) -> tuple[int, int]:
        """Claims passing and claims, over the gating rows (findings excluded).

        Returns ``(passing, total)``.
        """
        rows = [c for c in self.claims if gating(c)]
        return sum(bool(c["passed"]) for c in rows), len(rows)

    def findings(self) -> list[dict[str, Any]]:
        """The experiment's findings (rows that do not gate)."""
        return [c for c in self.claims if not gating(c)]


def job_passed(entries: list[ExperimentEntry]) -> bool:
    """Whether a reproduce job passes: some experiment passes and none fails.

    Args:
        entries: the report's entries (measurement-only experiments neither pass nor fail).
    """
    verdicts = [e.verdict for e in entries]
    return "PASS" in verdicts and "FAIL" not in verdicts


def fmt(x: Any) -> str:
    """Compact number formatting for the report.

    Args:
        x: a number (or anything else, printed with ``str``).

    Returns an integral value as an integer (105967, not 1.06e+05), another float with 4 significant
    digits, ``nan`` / ``inf`` / ``-inf``.
    """
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
_HOLDS = {
    "==": lambda v, t: v == t,
    "<=": lambda v, t: v <= t,
    ">=": lambda v, t: v >= t,
    "<": lambda v, t: v < t,
    ">": lambda v, t: v > t,
}


def measured(c: Mapping[str, Any]) -> str:
    """A claim's measurement as the report prints it.

    ``value [lo, hi]``, or the value and ``(exact)`` when the number is not sampled (lo ==
    value == hi). An exact row that passes although its value does not meet the number in its
    bound strictly (``== 1`` for 1.000000000000111) shows the full value and says that it
    passes only within the stated tolerance.
    """
    v, lo, hi = c.get("value"), c.get("lo"), c.get("hi")
    if not (lo == v and hi == v):
        return f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"
    m = _BOUND.match(str(c.get("bound", "")))
    if not (isinstance(v, (int, float)) and not isinstance(v, bool) and m):
        return f"{fmt(v)} (exact)"
    holds = functools.partial(_HOLDS[m.group(1)], t=float(m.group(2)))
    shown = fmt(v)
    if holds(float(shown)) != holds(float(v)):  # rounded, it would meet the bound otherwise
        shown = repr(float(v))
    if c.get("passed") and not holds(float(v)):  # the whole number: how near it is
        shown = fmt(v) if float(fmt(v)) == float(v) else repr(float(v))
        return f"{shown} (exact; meets {m.group(1)} {m.group(2)} only within tolerance)"
    return f"{shown} (exact)"


def _cell(text: Any) -> str:
    return _inert(one_line(text)).replace("|", "\\|")


# A shared record's text in report.md: a viewer must show it as text. Its backslashes are
# doubled (so none can undo an escape below), a tag's "<" (before a letter, "/", "!" or "?")
# becomes "&lt;" and a link's or image's "](" becomes "\](", so nothing loads or links; "<="
# and "[lo, hi]" are left alone.
_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_PLOT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]*\.png")  # dedebate's plots: relative paths
# inside the report's folder; any other text (a scheme's ":", a ")" or space) is not linked


def _inert(text: str) -> str:
    """``text`` as Markdown a viewer shows as text (no tag, link or image: see ``_TAG``)."""
    return _TAG.sub("&lt;", text.replace("\\", "\\\\")).replace("](", "\\](")


def one_line(text: Any) -> str:
    """``text`` on one line, safe to print: runs of whitespace (newlines too) become one space,
    other unprintable characters :func:`printable`'s escapes."""
    return printable(" ".join(str(text).split()))


def printable(text: Any) -> str:
    """``text`` with every unprintable character (a newline, a terminal escape, a bidi control)
    as its Python escape (``\\x1b``): shared records' text cannot drive a terminal."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _heading(e: ExperimentEntry) -> str:
    """The text of the entry's ``## name — title`` heading, on one line."""
    return _inert(one_line(f"{e.name} — {e.title}" if e.title else e.name))


def _anchor(e: ExperimentEntry) -> str:
    """GitHub's anchor for the entry's heading."""
    text = "".join(c for c in _heading(e).lower() if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def claim_totals(entries: list[ExperimentEntry]) -> tuple[int, int]:
    """Claims passing and claims over every experiment's gating rows.

    Returns ``(passing, total)``.
    """
    counts = [e.counts() for e in entries]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def _findings_text(entries: list[ExperimentEntry]) -> str:
    rows = [c for e in entries for c in e.findings()]
    if not rows:
        return ""
    held = sum(bool(c["passed"]) for c in rows)
    return (
        f" {len(rows)} measured finding(s), which are not paper claims and do not gate the "
        f"verdict: {held} meet their stated criterion, {len(rows) - held} do not."
    )


def render_markdown(
    header: Mapping[str, Any],
    entries: list[ExperimentEntry],
    wall_time_s: float,
    final: bool = True,
) -> str:
    """``report.md``: provenance header, verdict, one table row per claim, findings and plots.

    Args:
        header: the report's provenance (versions, seed, size, ...).
        entries: one entry per experiment.
        wall_time_s: the job's wall time so far.
        final: the job has ended (else the verdict reads ``IN PROGRESS``).
    """
    n_pass, n_claims = claim_totals(entries)
    n_err = sum(e.status == "error" for e in entries)
    ok = job_passed(entries)
    verdict = ("PASS" if ok else "FAIL") if final else "IN PROGRESS"
    lines = [
        "# dedebate reproduce report",
        "",
        f"**{verdict}**: {n_pass}/{n_claims} claims pass"
        + (f"; {n_err} experiment(s) failed to run" if n_err else "")
        + "."
        + _findings_text(entries),
        "",
        "| provenance | |",
        "|---|---|",
    ]
    for k in (
        "size",
        "seed",
        "started_utc",
        "resumed_utc",
        "dedebate_version",
        "git_commit",
        "git_dirty",
        "jax_version",
        "backend",
        "device_count",
        "python_version",
        "platform",
        "result_schema_version",
    ):
        lines.append(f"| {k} | {_cell(header.get(k))} |")
    packages = header.get("packages") or {}
    if packages:
        lines.append(
            "| packages | "
            + _cell(", ".join(f"{k} {v or '-'}" for k, v in packages.items()))
            + " |"
        )
    lines.append(f"| wall_time_s | {wall_time_s:.1f} |")
    lines += ["", _policy_line(entries)]
    lines += ["", "| experiment | claims passed | result |", "|---|---|---|"]
    for e in entries:
        n_ok, n_all = e.counts()
        lines.append(f"| [{_cell(e.name)}](#{_anchor(e)}) | {n_ok}/{n_all} | {e.verdict} |")
    lines.append("")
    for e in entries:
        lines += [f"## {_heading(e)}", ""]
        where = f"run directory {_cell(e.run_dir)}/, " if e.run_dir else ""
        lines += [f"{e.verdict}; {where}{e.wall_time_s:.1f} s.", ""]
        lines += [
            "| claim | source | bound | measured (95% interval) | result | note |",
            "|---|---|---|---|---|---|",
        ]
        for c in e.claims:
            if gating(c):
                lines.append(_row(c))
        if e.status == "error":
            lines.append(
                f"| experiment did not complete | {_cell(e.name)} | — | — | FAIL | "
                f"{_cell(e.error)} |"
            )
        elif e.verdict == "FAIL" and not any(gating(c) for c in e.claims):
            lines.append(
                f"| experiment has no gating claim | {_cell(e.name)} | — | — | FAIL | "
                "only findings, and the experiment is not declared measurement-only |"
            )
        elif e.verdict == "MEASURED":
            lines.append(
                f"| measurement-only experiment | {_cell(e.name)} | — | — | no verdict "
                "| declared MEASUREMENT_ONLY: its findings below neither pass nor fail "
                "the report |"
            )
        lines.append("")
        if e.findings():
            lines += [
                "Measured findings (not paper claims; they do not gate the verdict):",
                "",
                "| finding | source | criterion | measured (95% interval) | outcome | note |",
                "|---|---|---|---|---|---|",
            ]
            lines += [_row(c) for c in e.findings()]
            lines.append("")
        for p in e.plots:
            if not _PLOT.fullmatch(p) or ".." in Path(p).parts:  # remote, or not only a path
                lines += [
                    f"(plot {_cell(p)} not shown: not a file inside the report directory)",
                    "",
                ]
            else:
                lines += [f"![{_inert(one_line(Path(p).stem))}]({one_line(p)})", ""]
    return "\n".join(lines).rstrip() + "\n"


def apply_report_family(entries: list[ExperimentEntry]) -> None:
    """Decide every Monte-Carlo row of the report family-wise, in place.

    Bonferroni over all of them (:func:`dedebate.lab.claims.family_decisions`): a report whose
    claims all hold fails with probability at most ``FAMILY_ALPHA``. Each row's own 95%
    decision is kept as ``passed_95``.

    Args:
        entries: the report's entries (their ``claims`` are replaced).
    """
    flat = [c for e in entries for c in e.claims]
    decided = iter(with_family_decisions(flat, family="report"))
    for e in entries:
        e.claims = [next(decided) for _ in e.claims]


def _p_text(p: float, level: Any) -> str:
    """A p-value in three digits, or as many as put it on its own side of the family level."""
    level = level if isinstance(level, (int, float)) and math.isfinite(level) else None
    for digits in range(3, 18):
        text = f"{p:.{digits}g}"
        if level is None or not math.isfinite(p) or (float(text) >= level) == (p >= level):
            return text
    return repr(float(p))


def _policy_line(entries: list[ExperimentEntry]) -> str:
    rows = [c for e in entries for c in e.claims if c.get("p_value") is not None and gating(c)]
    if not rows:
        return "Every row is exact (no Monte-Carlo rows)."
    m, closed = family_size(rows), ""
    if m < len(rows):
        closed = f" ({len(rows) - m} more failed closed, outside the family)"
    misses = sum(not c.get("passed_95", c["passed"]) for c in rows)
    loose = sum(unresolved(c) for c in rows)
    return (
        f"Multiple comparisons: the {m} Monte-Carlo rows{closed} are decided family-wise "
        f"(Bonferroni): a row passes iff its p-value >= {FAMILY_ALPHA:g}/{m} = "
        f"{FAMILY_ALPHA / max(m, 1):.6g}, so a report whose claims all hold fails with probability "
        f"at most {FAMILY_ALPHA:g}. Intervals shown are each row's own 95% interval; "
        f"{misses} row(s) miss their bound at 95% alone (marked '95%: miss'). A row fails only on "
        f"evidence against its claim: {loose} passing row(s) have an interval that reaches past "
        "their one-sided bound (marked 'not resolved'), which a larger size would narrow. Exact "
        "rows compare exactly."
    )


def _row(c: Mapping[str, Any]) -> str:
    return (
        f"| {_cell(c['claim'])} | {_cell(c['source'])} | {_cell(c['bound'])} | "
        f"{_cell(measured(c))} | {_result_cell(c)} | {_cell(c.get('note', ''))} |"
    )


def _result_cell(c: Mapping[str, Any]) -> str:
    if not gating(c):
        return "criterion met" if c["passed"] else "criterion NOT met"
    text = "PASS" if c["passed"] else "FAIL"
    if c.get("p_value") is not None:
        own = "" if c.get("passed_95", c["passed"]) else "; 95%: miss"
        own += "; not resolved" if unresolved(c) else ""
        text += f" (p={_p_text(c['p_value'], c.get('family_level'))}{own})"
    return text


def unresolved(c: Mapping[str, Any]) -> bool:
    """Whether a passing Monte-Carlo row's interval reaches past its one-sided bound (``<= t``
    whose ``hi > t``, ``>= t`` whose ``lo < t``): nothing contradicts the claim, but the sample
    is too small to show it."""
    m = _BOUND.fullmatch(str(c.get("bound", "")).strip())
    lo, hi = c.get("lo"), c.get("hi")
    if not (c.get("passed") and c.get("p_value") is not None and m and m.group(1) != "=="):
        return False
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float))):
        return False
    t = float(m.group(2))
    return hi > t if m.group(1) in ("<=", "<") else lo < t
