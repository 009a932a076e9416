"""``dedebate compare A B``: two results side by side, claim by claim.

A and B are each a reproduce directory (its ``report.json``), a run directory (its
``results.json``) or one of those files. Claims are matched by experiment, claim text and
occurrence. For each matched row the table shows both measurements with their intervals, both
verdicts, and the evidence of a change (:func:`change_evidence`): that the two rows' bounds
differ (then they state different claims and nothing is tested), else the p-value of "the two
runs measure the same quantity" from the stored counts (Fisher's exact test for proportion rows,
Welch's t-test for mean rows), whether exact values are equal, or for rows written before rows
stored their counts, whether the intervals overlap. Where an experiment's config differs between
A and B (its ``config_hash``, else its size or seed), the table opens with one warning line.
The comparison *changes* when a gating row present in both has a different verdict; rows found on
one side only are listed but are not a change (quick and default sizes check different rows).
:func:`comparison` gives the same as data (``dedebate compare --json``), :func:`render` the table.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

from dedebate.lab.claims import row_finite
from dedebate.lab.experiment import gating
from dedebate.lab.report_render import fmt, measured, one_line
from dedebate.lab.rerender import MAX_EXPERIMENTS, claims_problem, json_kind, too_many
from dedebate.lab.rundir import RunDirError, read_config, read_json


class CompareError(ValueError):
    """A path that holds no readable result; the message names it."""


def load_claims(
    path: str | Path,
) -> tuple[str, dict[tuple[str, str, int], dict[str, Any]], dict[str, dict[str, Any]]]:
    """The claim rows of a report or run result, keyed for matching, and its configs.

    Args:
        path: a reproduce or run directory, or its ``report.json`` / ``results.json``.

    Returns ``(label, {(experiment, claim, occurrence): row}, {experiment: config})``; the label
    is the file's directory, a config is :func:`_configs`'.

    Raises:
        CompareError: no such path, no result file, unreadable JSON or not a result.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        for name in ("report.json", "results.json"):
            if os.path.lexists(p / name):  # a link is found, and refused by read_json
                p = p / name
                break
        else:
            raise CompareError(f"{path}: no report.json or results.json in this directory")
    if not os.path.lexists(p):
        raise CompareError(f"{path}: no such file or directory")
    try:
        data = read_json(p)  # never through a link, never a FIFO, at most MAX_RECORD_BYTES
    except RunDirError as err:
        raise CompareError(str(err)) from None
    except (OSError, ValueError) as err:
        raise CompareError(f"{p}: not a readable JSON result ({err})") from None
    if isinstance(data, dict) and (
        problem := too_many(data.get("experiments"), "experiments", MAX_EXPERIMENTS, "experiments")
    ):
        raise CompareError(f"{p}: not a readable result ({problem})")
    if isinstance(data, dict) and isinstance(data.get("experiments"), list):
        groups = [(e, f"experiments[{i}]") for i, e in enumerate(data["experiments"])]
    elif isinstance(data, dict) and isinstance(data.get("claims"), list):
        groups = [({**data, "name": data.get("experiment", "?")}, "")]
    elif isinstance(data, dict) and data.get("kind") == "sweep":
        raise CompareError(
            f"{p}: a sweep's record (its rows are in sweep.csv), which has no claims to "
            "compare; compare takes run directories (results.json) and reproduce directories "
            "(report.json), or those files"
        )
    else:
        raise CompareError(f"{p}: neither a report.json nor a results.json")
    for e, where in groups:
        problem = (
            f"{where} is {json_kind(e)}, not an experiment (an object)"
            if not isinstance(e, dict)
            else claims_problem(e.get("claims") or [], f"{where}.claims".lstrip("."))
        )
        if problem:
            raise CompareError(f"{p}: not a readable result ({problem})")
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for e, _ in groups:
        experiment, seen = str(e.get("name", "?")), Counter[str]()
        for c in e.get("claims") or []:
            text = str(c.get("claim", ""))
            rows[(experiment, text, seen[text])] = c
            seen[text] += 1
        if e.get("status") in ("error", "running"):  # no verdict of its own: it fails the report
            why = one_line(e.get("error") or "it stopped before its end")[:200]
            rows[(experiment, COMPLETED, 0)] = _completed(False, why)
    return str(p.parent), rows, _configs(p, data, groups)


def _provenance(data: Any, folder: Path | None = None) -> dict[str, Any]:
    """A record's ``config_hash``, ``size``, ``seed`` (None: absent), ``folder``'s config params."""
    prov = data.get("provenance") if isinstance(data, dict) else None
    out = (
        {k: prov.get(k) for k in ("config_hash", "size", "seed")} if isinstance(prov, dict) else {}
    )
    try:  # the config loader's limits: never through a link, no alias bomb
        params = read_config(folder / "config.yaml").get("params") if folder else None
    except Exception:  # noqa: BLE001 - no readable config: the hash alone
        params = None
    return out | ({"params": params} if isinstance(params, dict) else {})


def _run_provenance(report_dir: Path, run_dir: Any) -> dict[str, Any]:
    """:func:`_provenance` of a report's run folder (a plain name, not a link; else nothing)."""
    if not isinstance(run_dir, str) or run_dir in ("", ".", "..") or Path(run_dir).name != run_dir:
        return {}
    try:
        if (report_dir / run_dir).is_symlink():
            return {}
        return _provenance(read_json(report_dir / run_dir / "results.json"), report_dir / run_dir)
    except (RunDirError, OSError, ValueError):
        return {}


def _configs(p: Path, data: Any, groups: list[tuple[Any, str]]) -> dict[str, dict[str, Any]]:
    """Each experiment's recorded config (a report's: its provenance, then its run folder's)."""
    top, out = _provenance(data, p.parent), {}
    for e, where in groups:
        run = _run_provenance(p.parent, e.get("run_dir")) if where else {}
        out[str(e.get("name", "?"))] = {**top, **{k: v for k, v in run.items() if v is not None}}
    return out


def config_differences(
    a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]
) -> list[dict[str, str]]:
    """The experiments of both whose recorded configs differ.

    Returns ``[{"experiment", "field", "a", "b", "what"}]``: the config hash where both record
    it, else the first of size and seed that both record and that differs; ``what`` names the
    size, seed and params that differ, as far as both record them.
    """
    out = []
    for name in (n for n in a if n in b):
        for field in ("config_hash", "size", "seed"):
            va, vb = a[name].get(field), b[name].get(field)
            if va is None or vb is None:
                continue
            if str(va) != str(vb):
                what = _what_differs(a[name], b[name])
                out.append(
                    {"experiment": name, "field": field, "a": str(va), "b": str(vb), "what": what}
                )
            if field == "config_hash" or str(va) != str(vb):
                break  # one hash covers size and seed
    return out


def _what_differs(a: dict[str, Any], b: dict[str, Any]) -> str:
    """``"seed 0 vs 1; params.T 8 vs 10"``: what two recorded configs differ in ("" if unknown)."""
    pa, pb = a.get("params") or {}, b.get("params") or {}
    pairs = [(k, a.get(k), b.get(k)) for k in ("size", "seed")]
    pairs += [(f"params.{k}", pa.get(k), pb.get(k)) for k in sorted(set(pa) | set(pb), key=str)]
    return "; ".join(
        f"{k} {x} vs {y}"
        for k, x, y in pairs
        if x is not None and y is not None and str(x) != str(y)
    )


def _interval(c: dict[str, Any]) -> tuple[float, float]:
    lo: Any = c.get("lo")  # any JSON value: float() refuses what is not a number
    hi: Any = c.get("hi")
    try:
        return float(lo), float(hi)
    except (TypeError, ValueError):
        return math.nan, math.nan


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the two rows' intervals share a point (exact rows: equal values).

    Returns True when ``max(lo) <= min(hi)``; non-finite bounds never overlap.
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

    Returns the p-value, or None when the rows do not store what the test needs.
    """
    from scipy import stats

    ka, na, kb, nb = _count(a, "k"), _count(a, "n"), _count(b, "k"), _count(b, "n")
    if ka is not None and kb is not None and na and nb and na >= ka and nb >= kb:
        return float(stats.fisher_exact([[ka, na - ka], [kb, nb - kb]]).pvalue)
    sds = [c.get("sd") for c in (a, b)]
    if (
        na is None
        or nb is None
        or min(na, nb) < 2
        or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in sds)
    ):
        return None
    try:
        p = stats.ttest_ind_from_stats(
            float(a["value"]), sds[0], na, float(b["value"]), sds[1], nb, equal_var=False
        ).pvalue
    except (TypeError, ValueError, KeyError):
        return None
    return float(p) if math.isfinite(p) else None


def bound_differs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether both rows state a bound and the two differ (then they are different claims)."""
    ba, bb = a.get("bound"), b.get("bound")
    return ba is not None and bb is not None and str(ba) != str(bb)


def _digits(a: dict[str, Any], b: dict[str, Any]) -> int | None:
    """The most significant digits to which two different exact values round alike (else None)."""
    (x, _), (y, _) = _interval(a), _interval(b)
    if not (math.isfinite(x) and math.isfinite(y)) or x == y:
        return None
    return next((n for n in range(17, 0, -1) if f"{x:.{n}g}" == f"{y:.{n}g}"), None)


def change_evidence(a: dict[str, Any], b: dict[str, Any]) -> str:
    """The compare table's evidence of a change between two rows of the same claim text.

    Returns ``"bound differs: X vs Y"`` (:func:`bound_differs`; nothing is tested), ``"p=..."``
    (:func:`change_p_value`), for two exact values (``lo == value == hi``) ``"equal"``, ``"equal
    to N digits"`` when they differ but print the same, or ``"differ"``, else ``"intervals
    overlap"`` / ``"intervals disjoint"``.
    """
    if bound_differs(a, b):
        return f"bound differs: {a['bound']} vs {b['bound']}"
    p = change_p_value(a, b)
    if p is not None:
        return f"p={fmt(p)}"
    if all(c.get("lo") == c.get("value") == c.get("hi") for c in (a, b)):
        if overlap(a, b):
            return "equal"
        digits = _digits(a, b) if measured(a) == measured(b) else None
        return "differ" if digits is None else f"equal to {digits} digits"
    return "intervals overlap" if overlap(a, b) else "intervals disjoint"


COMPLETED = "the experiment ran to its end"
"""The row compare adds for an experiment that errored or stopped on one side (its claims are
missing or partial), so that the report's verdict change shows."""


def _completed(done: bool, note: str = "") -> dict[str, Any]:
    v = float(done)
    return {"claim": COMPLETED, "passed": done, "value": v, "lo": v, "hi": v, "bound": "== 1"} | (
        {"note": note} if note else {}
    )


def _passes(c: dict[str, Any]) -> bool:
    """A row passes: it says so and its numbers are finite (a record may come from anyone)."""
    return bool(c.get("passed")) and row_finite(c)


def _verdict(c: dict[str, Any]) -> str:
    if not gating(c):
        return "met" if _passes(c) else "not met"
    return "PASS" if _passes(c) else "FAIL"


def _fails_gate(c: dict[str, Any]) -> bool:
    return gating(c) and not _passes(c)


def _cell(text: Any) -> str:
    return one_line(text).replace("|", "\\|")


def _side(c: dict[str, Any] | None) -> dict[str, Any] | None:
    """One result's row as compare reports it (a non-finite number: None)."""
    if c is None:
        return None
    out = {
        "verdict": _verdict(c),
        "gating": gating(c),
        "passed": bool(c.get("passed")),
        **{k: c.get(k) for k in ("value", "lo", "hi", "bound")},
        "measured": measured(c),
    }
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()}


def comparison(a: str | Path, b: str | Path) -> dict[str, Any]:
    """``a`` and ``b`` claim by claim, as data (``dedebate compare --json``).

    Args:
        a: a reproduce or run directory, or its result file.
        b: another.

    Returns ``{"a": label, "b": label, "rows": [...], "both", "only_a", "only_b",
    "bound_differs": counts, "changed": ["experiment: claim", ...], "config_differs":
    [...]}`` (:func:`config_differences`); a row has ``experiment``, ``claim``, ``occurrence`` (0
    for the first row of that text), ``a`` and ``b`` (``verdict``, ``gating``, ``passed``,
    ``value``, ``lo``, ``hi``, ``bound``, ``measured``; None on the side that lacks the row),
    ``bound_differs`` (:func:`bound_differs`), ``p_value`` (:func:`change_p_value`; None where the
    bounds differ), ``evidence`` (:func:`change_evidence`; None for a one-sided row) and
    ``changed`` (a gating verdict differs).
    """
    label_a, rows_a, configs_a = load_claims(a)
    label_b, rows_b, configs_b = load_claims(b)
    for mine, theirs, names in ((rows_a, rows_b, configs_a), (rows_b, rows_a, configs_b)):
        for experiment, claim, n in [k for k in theirs if k[1] == COMPLETED]:  # ran to its end
            if experiment in names and (experiment, claim, n) not in mine:
                mine[(experiment, claim, n)] = _completed(True)
    rows, changed = [], []
    for key in [*rows_a, *(k for k in rows_b if k not in rows_a)]:
        experiment, claim, n = key
        ra, rb = rows_a.get(key), rows_b.get(key)
        flip, p_value, evidence, other_bound = False, None, None, False
        if ra is not None and rb is not None:
            flip = _fails_gate(ra) != _fails_gate(rb)  # a finding's verdict gates nothing
            other_bound = bound_differs(ra, rb)
            p_value = None if other_bound else change_p_value(ra, rb)
            evidence = change_evidence(ra, rb)
        if flip:
            changed.append(one_line(f"{experiment}: {claim}") + (f" (#{n + 1})" if n else ""))
        rows.append(
            {
                "experiment": experiment,
                "claim": claim,
                "occurrence": n,
                "a": _side(ra),
                "b": _side(rb),
                "bound_differs": other_bound,
                "p_value": p_value,
                "evidence": evidence,
                "changed": flip,
            }
        )
    n_both = sum(k in rows_b for k in rows_a)
    return {
        "a": label_a,
        "b": label_b,
        "rows": rows,
        "both": n_both,
        "only_a": len(rows_a) - n_both,
        "only_b": len(rows_b) - n_both,
        "bound_differs": sum(r["bound_differs"] for r in rows),
        "changed": changed,
        "config_differs": config_differences(configs_a, configs_b),
    }


def _config_warning(diffs: list[dict[str, str]]) -> str:
    """One line naming the experiments whose configs differ (at most three in full)."""
    hashes = [f"{d['field']} {d['a'][:12]} vs {d['b'][:12]}" for d in diffs[:3]]
    shown = [f"{d['experiment']} ({d.get('what') or h})" for d, h in zip(diffs, hashes)]
    more = f" and {len(diffs) - 3} more" if len(diffs) > 3 else ""
    return one_line(
        f"warning: A and B ran different configs: {', '.join(shown)}{more}; rows are paired by "
        "claim text, and a row whose bound differs is not compared"
    )


def _disjoint_warning(rows: list[dict[str, Any]]) -> list[str]:
    """One line when A and B hold rows of no experiment in common (nothing is paired)."""
    a, b = ({r["experiment"] for r in rows if r[side]} for side in ("a", "b"))
    if not a or not b or a & b:
        return []
    names = [", ".join(sorted(map(str, x))[:3]) + (", ..." if len(x) > 3 else "") for x in (a, b)]
    return [one_line(f"warning: A and B share no experiment (A: {names[0]}; B: {names[1]})")]


def render(cmp: dict[str, Any]) -> str:
    """The markdown table of a :func:`comparison`.

    Returns the table with a header naming A and B (and a warning line where their configs
    differ) and a closing count of the changes and of the rows whose bound differs.
    """
    lines = [
        f"A: {cmp['a']}",
        f"B: {cmp['b']}",
        *([_config_warning(cmp["config_differs"])] if cmp["config_differs"] else []),
        *_disjoint_warning(cmp["rows"]),
        "",
        "| experiment | claim | A | B | verdict A -> B | change (p: same quantity) |",
        "|---|---|---|---|---|---|",
    ]
    for r in cmp["rows"]:
        name = r["claim"] + (f" (#{r['occurrence'] + 1})" if r["occurrence"] else "")
        ra, rb = r["a"], r["b"]
        cells = [
            r["experiment"],
            name,
            ra["measured"] if ra else "—",
            rb["measured"] if rb else "—",
        ]
        if ra is None or rb is None:
            side, row = ("B", rb) if ra is None else ("A", ra)
            cells += [f"only in {side} ({row['verdict']})", "—"]
        else:
            cells += [
                f"{ra['verdict']} -> {rb['verdict']}" + (" **CHANGED**" if r["changed"] else ""),
                r["evidence"],
            ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    changed, n_bound = cmp["changed"], cmp["bound_differs"]
    lines += [
        "",
        f"{cmp['both']} claim(s) in both"
        + (f" ({n_bound} with a different bound, not compared)" if n_bound else "")
        + f", {cmp['only_a']} only in A, "
        f"{cmp['only_b']} only in B; {len(changed)} verdict(s) changed"
        + (": " + "; ".join(changed) if changed else "."),
    ]
    return "\n".join(lines)
