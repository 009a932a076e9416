"""``dedebate compare A B``: two results side by side, claim by claim.

A and B are each a reproduce directory (its ``report.json``), a run directory (its
``results.json``) or one of those files. Claims are matched by experiment, claim text and
occurrence. For each matched row the table shows both measurements with their intervals, both
verdicts, and the evidence of a change (:func:`change_evidence`): the p-value of "the two runs
measure the same quantity" from the stored counts (Fisher's exact test for proportion rows,
Welch's t-test for mean rows), whether exact values are equal, or for rows written before rows
stored their counts, whether the intervals overlap.
The comparison *changes* when a gating row present in both has a different verdict; rows found on
one side only are listed but are not a change (quick and default sizes check different rows).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from dedebate.lab.experiment import gating
from dedebate.lab.report_render import fmt, measured
from dedebate.lab.rerender import claims_problem, json_kind
from dedebate.lab.rundir import read_json


class CompareError(ValueError):
    """A path that holds no readable result; the message names it."""


def load_claims(path: str | Path) -> tuple[str, dict[tuple[str, str, int], dict[str, Any]]]:
    """The claim rows of a report or run result, keyed for matching.

    Args:
        path: a reproduce or run directory, or its ``report.json`` / ``results.json``.

    Returns:
        ``(label, {(experiment, claim, occurrence): row})``; the label is the file's directory.

    Raises:
        CompareError: no such path, no result file, unreadable JSON or not a result.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        for name in ("report.json", "results.json"):
            if (p / name).is_file():
                p = p / name
                break
        else:
            raise CompareError(f"{path}: no report.json or results.json in this directory")
    if not p.is_file():
        raise CompareError(f"{path}: no such file or directory")
    try:
        data = read_json(p)
    except (OSError, ValueError) as err:
        raise CompareError(f"{p}: not a readable JSON result ({err})") from None
    if isinstance(data, dict) and isinstance(data.get("experiments"), list):
        groups = [(e, f"experiments[{i}]") for i, e in enumerate(data["experiments"])]
    elif isinstance(data, dict) and isinstance(data.get("claims"), list):
        groups = [({"name": data.get("experiment", "?"), "claims": data["claims"]}, "")]
    else:
        raise CompareError(f"{p}: neither a report.json nor a results.json")
    for e, where in groups:
        problem = (f"{where} is {json_kind(e)}, not an experiment (an object)"
                   if not isinstance(e, dict) else
                   claims_problem(e.get("claims") or [], f"{where}.claims".lstrip(".")))
        if problem:
            raise CompareError(f"{p}: not a readable result ({problem})")
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for e, _ in groups:
        experiment, seen = str(e.get("name", "?")), Counter[str]()
        for c in e.get("claims") or []:
            text = str(c.get("claim", ""))
            rows[(experiment, text, seen[text])] = c
            seen[text] += 1
    return str(p.parent), rows


def _interval(c: dict[str, Any]) -> tuple[float, float]:
    lo, hi = c.get("lo"), c.get("hi")
    try:
        return float(lo), float(hi)
    except (TypeError, ValueError):
        return math.nan, math.nan


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the two rows' intervals share a point (exact rows: equal values).

    Args:
        a: a claim row (dict with ``lo`` and ``hi``).
        b: another claim row.

    Returns:
        True when ``max(lo) <= min(hi)``; non-finite bounds never overlap.
    """
    (alo, ahi), (blo, bhi) = _interval(a), _interval(b)
    if not all(math.isfinite(x) for x in (alo, ahi, blo, bhi)):
        return False
    return max(alo, blo) <= min(ahi, bhi)


def _count(c: dict[str, Any], name: str) -> int | None:
    x = c.get(name)
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None


def change_p_value(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Two-sided p-value that two Monte-Carlo rows measure the same quantity, from their counts.

    Proportion rows (``k`` of ``n``): Fisher's exact test on the 2x2 table
    ``[[k_a, n_a - k_a], [k_b, n_b - k_b]]``. Mean rows (``n`` samples, standard deviation
    ``sd``): Welch's t-test. Otherwise (exact rows, rows without counts) None.

    Args:
        a: a claim row (dict).
        b: the same claim in the other result.

    Returns:
        The p-value, or None when the rows do not store what the test needs.
    """
    from scipy import stats

    (ka, na), (kb, nb) = ((_count(c, "k"), _count(c, "n")) for c in (a, b))
    if None not in (ka, na, kb, nb) and na >= ka and nb >= kb and na and nb:
        return float(stats.fisher_exact([[ka, na - ka], [kb, nb - kb]]).pvalue)
    sds = [c.get("sd") for c in (a, b)]
    if None in (na, nb) or min(na, nb) < 2 or not all(
            isinstance(x, (int, float)) and math.isfinite(x) for x in sds):
        return None
    try:
        p = stats.ttest_ind_from_stats(float(a["value"]), sds[0], na, float(b["value"]), sds[1],
                                       nb, equal_var=False).pvalue
    except (TypeError, ValueError, KeyError):
        return None
    return float(p) if math.isfinite(p) else None


def change_evidence(a: dict[str, Any], b: dict[str, Any]) -> str:
    """The compare table's evidence of a change between two rows of the same claim.

    Args:
        a: a claim row (dict).
        b: the same claim in the other result.

    Returns:
        ``"p=..."`` (:func:`change_p_value`), ``"equal"`` / ``"differ"`` for two exact values
        (``lo == value == hi``), else ``"intervals overlap"`` / ``"intervals disjoint"``.
    """
    p = change_p_value(a, b)
    if p is not None:
        return f"p={fmt(p)}"
    if all(c.get("lo") == c.get("value") == c.get("hi") for c in (a, b)):
        return "equal" if overlap(a, b) else "differ"
    return "intervals overlap" if overlap(a, b) else "intervals disjoint"


def _verdict(c: dict[str, Any]) -> str:
    if not gating(c):
        return "met" if c.get("passed") else "not met"
    return "PASS" if c.get("passed") else "FAIL"


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def compare(a: str | Path, b: str | Path) -> tuple[str, bool]:
    """The markdown table comparing ``a`` with ``b``, claim by claim.

    Args:
        a: a reproduce or run directory, or its result file.
        b: another.

    Returns:
        ``(table text, whether a gating row present in both changed its verdict)``.
    """
    label_a, rows_a = load_claims(a)
    label_b, rows_b = load_claims(b)
    lines = [f"A: {label_a}", f"B: {label_b}", "",
             "| experiment | claim | A | B | verdict A -> B | change (p: same quantity) |",
             "|---|---|---|---|---|---|"]
    changed = []
    for key in [*rows_a, *(k for k in rows_b if k not in rows_a)]:
        experiment, claim, n = key
        name = claim + (f" (#{n + 1})" if n else "")
        ra, rb = rows_a.get(key), rows_b.get(key)
        if ra is None or rb is None:
            side = "B" if ra is None else "A"
            row = rb if ra is None else ra
            lines.append(f"| {_cell(experiment)} | {_cell(name)} | "
                         f"{_cell(measured(ra)) if ra else '—'} | "
                         f"{_cell(measured(rb)) if rb else '—'} | only in {side} "
                         f"({_verdict(row)}) | — |")
            continue
        va, vb = _verdict(ra), _verdict(rb)
        flip = va != vb and (gating(ra) or gating(rb))
        if flip:
            changed.append(f"{experiment}: {name}")
        lines.append(f"| {_cell(experiment)} | {_cell(name)} | {_cell(measured(ra))} | "
                     f"{_cell(measured(rb))} | {va} -> {vb}{' **CHANGED**' if flip else ''} | "
                     f"{change_evidence(ra, rb)} |")
    both = sum(k in rows_b for k in rows_a)
    lines += ["", f"{both} claim(s) in both, {len(rows_a) - both} only in A, "
              f"{len(rows_b) - both} only in B; {len(changed)} verdict(s) changed"
              + (": " + "; ".join(changed) if changed else ".")]
    return "\n".join(lines), bool(changed)

