"""``dedebate compare A B``: two results side by side, claim by claim.

A and B are each a reproduce directory (its ``report.json``), a run directory (its
``results.json``) or one of those files. Claims are matched by experiment, claim text and
occurrence. For each matched row the table shows both measurements with their intervals, both
verdicts, and whether the two intervals overlap (for exact rows: whether the values are equal).
The comparison *changes* when a gating row present in both has a different verdict; rows found on
one side only are listed but are not a change (quick and default sizes check different rows).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from dedebate.lab.experiment import gating
from dedebate.lab.report_render import measured


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
        data = json.loads(p.read_text())
    except (OSError, ValueError) as err:
        raise CompareError(f"{p}: not a readable JSON result ({err})") from None
    if isinstance(data, dict) and isinstance(data.get("experiments"), list):
        groups = [(e.get("name", "?"), e.get("claims") or []) for e in data["experiments"]]
    elif isinstance(data, dict) and isinstance(data.get("claims"), list):
        groups = [(data.get("experiment", "?"), data["claims"])]
    else:
        raise CompareError(f"{p}: neither a report.json nor a results.json")
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for experiment, claims in groups:
        seen: Counter[str] = Counter()
        for c in claims:
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
             "| experiment | claim | A | B | verdict A -> B | intervals overlap |",
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
                     f"{'yes' if overlap(ra, rb) else 'no'} |")
    both = sum(k in rows_b for k in rows_a)
    lines += ["", f"{both} claim(s) in both, {len(rows_a) - both} only in A, "
              f"{len(rows_b) - both} only in B; {len(changed)} verdict(s) changed"
              + (": " + "; ".join(changed) if changed else ".")]
    return "\n".join(lines), bool(changed)

