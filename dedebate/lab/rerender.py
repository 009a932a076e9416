"""``dedebate report DIR``: the report of a reproduce directory, rendered again from its
``report.json`` (as ``report.md``, or as one self-contained HTML page with the plots inline).

Nothing is recomputed: the claims, verdicts and provenance are those ``dedebate reproduce``
recorded, so a report can be re-rendered after a newer dedebate changes the layout, or shared as
one file. A report.json may come from someone else, so the page is inert whatever it holds:
every text is escaped (quotes too) before any markup is built, a content security policy allows
no script, and only PNG files inside the report directory are embedded (no absolute path, ``..``
or link out of it). One whose fields have other types than reproduce writes is refused in one
line (:func:`report_problem`).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import os
import re
import sys
from pathlib import Path
from typing import Any

from dedebate.lab.report_render import ExperimentEntry, render_markdown
from dedebate.lab.rundir import UTC_STAMP, MiB, RunDirError, TooLargeError, read_bytes, read_json


class ReportError(ValueError):
    """A directory without a readable report.json; the message names it."""


def load_report(directory: str | Path) -> tuple[Path, dict[str, Any]]:
    """Read a reproduce directory's ``report.json``.

    Args:
        directory: the reproduce directory, or its ``report.json``.

    Returns ``(the report directory, the loaded report)``.

    Raises:
        ReportError: no report.json, unreadable JSON, or not a report (:func:`report_problem`).
    """
    path = Path(directory).expanduser()
    if path.name == "report.json" and not path.is_dir() and os.path.lexists(path):
        path = path.parent
    file = path / "report.json"
    if not os.path.lexists(file):
        raise ReportError(f"{directory}: no report.json there (not a reproduce directory)")
    try:
        data = read_json(file)  # never through a link, never a FIFO, at most MAX_RECORD_BYTES
    except RunDirError as err:
        raise ReportError(str(err)) from None
    except (OSError, ValueError) as err:
        raise ReportError(f"{file}: not readable JSON ({err})") from None
    problem = report_problem(data)
    if problem:
        raise ReportError(f"{file}: not a dedebate report ({problem})")
    return path, data


_JSON_KINDS = (
    (bool, "true/false"),
    ((int, float), "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
    (type(None), "null"),
)


def earlier_attempts(directory: str | Path) -> tuple[str | None, float]:
    """A resumed reproduce directory's first start and its earlier attempts' wall seconds, from its
    report.json; ``(None, 0.0)`` where it has none that reads as a report."""
    try:
        _, data = load_report(directory)
    except ReportError:
        return None, 0.0
    prov = data.get("provenance")
    started = prov.get("started_utc") if isinstance(prov, dict) else None
    if not (isinstance(started, str) and UTC_STAMP.fullmatch(started)):
        started = None
    wall = data.get("wall_time_s")
    if not (isinstance(wall, (int, float)) and not isinstance(wall, bool) and 0 <= wall < 1e12):
        wall = 0.0
    return started, float(wall)


def json_kind(x: Any) -> str:
    """What a loaded JSON value is, in words.

    Returns ``"an object"``, ``"an array"``, ``"a string"``, ``"a number"``, ``"true/false"`` or
    ``"null"``.
    """
    return next(name for kind, name in _JSON_KINDS if isinstance(x, kind))


def _wrong(x: Any, kind: type | tuple[type, ...]) -> bool:
    """Whether ``x`` is not of ``kind`` (true/false is not a number here)."""
    return not isinstance(x, kind) or (
        isinstance(x, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
    )


def _expect(where: str, x: Any, kind: type | tuple[type, ...], what: str) -> str | None:
    return f"{where} is {json_kind(x)}, not {what}" if _wrong(x, kind) else None


MAX_CLAIM_ROWS = 10_000
"""The most claim rows one experiment's record holds (dedebate's hold under 100): each row read
costs memory; a shared file of 20 MB of ``{}`` rows took 9.7 GB to compare."""
MAX_EXPERIMENTS = 1_000
"""The most experiments one report holds (dedebate reproduces 8)."""


def too_many(rows: Any, where: str, cap: int, what: str) -> str | None:
    """Why the list ``rows`` is longer than ``cap``; None if it is not (or is no list)."""
    if isinstance(rows, list) and len(rows) > cap:
        return f"{where} holds {len(rows)} {what}, over the {cap} a dedebate record may hold"
    return None


def claims_problem(claims: Any, where: str, keys: tuple[str, ...] = ()) -> str | None:
    """Why ``claims`` is not a list of claim rows, each an object holding ``keys``; None if it is.

    Args:
        claims: the loaded value.
        where: its place in the file, for the message (``experiments[0].claims``).
        keys: the fields every row must have.
    """
    if problem := _expect(where, claims, list, "an array of claim rows") or too_many(
        claims, where, MAX_CLAIM_ROWS, "claim rows"
    ):
        return problem
    for i, c in enumerate(claims):
        if problem := _expect(f"{where}[{i}]", c, dict, "a claim row (an object)"):
            return problem
        if missing := [k for k in keys if k not in c]:
            return f"{where}[{i}] has no {', '.join(missing)}"
        for key in (k for k in (*_FLOATS, *_COUNTS) if c.get(k) is not None):
            if problem := _field_problem(f"{where}[{i}].{key}", c[key], key in _COUNTS):
                return problem
    return None


_FLOATS = ("value", "lo", "hi", "sd", "p_value", "family_level")
_COUNTS = ("k", "n", "family_size")


def _field_problem(where: str, x: Any, count: bool) -> str | None:
    """Why a row's number ``x`` is not what the report and compare compute with; None if it is."""
    if count and (_wrong(x, int) or not 0 <= x < 2**63):
        return f"{where} is {_shown(x)}, not a count (an integer in [0, 2^63)) or null"
    if _wrong(x, (int, float)) or (isinstance(x, int) and abs(x) > sys.float_info.max):
        return f"{where} is {_shown(x)}, not a number within float range or null"
    return None


def _shown(x: Any) -> str:
    """A JSON value in a message: a number as itself (long ones by their digits), else its kind."""
    if isinstance(x, int) and not isinstance(x, bool):
        return repr(x) if abs(x) < 10**12 else f"an integer of {len(str(abs(x)))} digits"
    return repr(x) if isinstance(x, float) else json_kind(x)


_ENTRY: dict[str, tuple[type | tuple[type, ...], str]] = {
    "name": (str, "a string"),
    "title": (str, "a string"),
    "status": (str, "a string"),
    "error": ((str, type(None)), "a string or null"),
    "run_dir": ((str, type(None)), "a string or null"),
    "plots": (list, "an array of paths"),
    "measurement_only": (bool, "true/false"),
}


def report_problem(data: Any) -> str | None:
    """Why a loaded ``report.json`` cannot be rendered (the first problem, in words); None when
    it can: the fields the report reads have the types ``dedebate reproduce`` writes.
    """
    if not isinstance(data, dict) or not isinstance(data.get("experiments"), list):
        return "no experiments list"
    if problem := too_many(data["experiments"], "experiments", MAX_EXPERIMENTS, "experiments"):
        return problem
    prov = data.get("provenance", {})
    if problem := (
        _expect("provenance", prov, dict, "an object")
        or _expect("provenance.packages", prov.get("packages") or {}, dict, "an object")
        or _field_problem("wall_time_s", data.get("wall_time_s", 0.0), False)
    ):
        return problem
    for i, e in enumerate(data["experiments"]):
        where = f"experiments[{i}]"
        if problem := _expect(where, e, dict, "an experiment (an object)"):
            return problem
        if "name" not in e:
            return f"{where} has no name"
        for key in (k for k in _ENTRY if k in e):
            if problem := _expect(f"{where}.{key}", e[key], *_ENTRY[key]):
                return problem
        if problem := _field_problem(f"{where}.wall_time_s", e.get("wall_time_s", 0.0), False):
            return problem
        if bad := [p for p in e.get("plots", []) if not isinstance(p, str)]:
            return f"{where}.plots holds {json_kind(bad[0])}, not a path"
        if problem := claims_problem(
            e.get("claims", []), f"{where}.claims", ("claim", "source", "bound", "passed")
        ):
            return problem
    return None


_RESULTS: dict[str, tuple[type, str]] = {
    "metrics": (dict, "an object"),
    "tables": (dict, "an object"),
    "plots": (list, "an array of paths"),
    "provenance": (dict, "an object"),
}


def results_problem(results: dict[str, Any]) -> str | None:
    """Why a finished run's loaded ``results.json`` cannot be reused (the first problem, in
    words); None when its claims, metrics, tables, plots and provenance have the types the
    runner writes."""
    keys = ("claim", "source", "bound", "value", "lo", "hi", "passed")
    if problem := claims_problem(results.get("claims"), "claims", keys):
        return problem
    for key, (kind, what) in _RESULTS.items():
        if results.get(key) is not None and (problem := _expect(key, results[key], kind, what)):
            return problem
    files = [*(results.get("tables") or {}).values(), *(results.get("plots") or [])]
    if bad := [f for f in files if not isinstance(f, str)]:
        return f"a table or plot is {json_kind(bad[0])}, not a path"
    return None


def markdown(data: dict[str, Any]) -> str:
    """``report.md`` of a loaded report.json, rendered by the current dedebate (a row whose
    numbers are not finite fails, whatever the file says, as ``reproduce`` decides it)."""
    from dedebate.lab.claims import row_finite

    fields = {f.name for f in dataclasses.fields(ExperimentEntry)}
    entries = [
        ExperimentEntry(**{k: v for k, v in e.items() if k in fields}) for e in data["experiments"]
    ]
    for e in entries:
        e.claims = [c if row_finite(c) else {**c, "passed": False} for c in e.claims]
    return render_markdown(
        data.get("provenance", {}),
        entries,
        float(data.get("wall_time_s", 0.0)),
        bool(data.get("complete", True)),
    )


_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")
_INLINE = [
    (re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
]


def _inline(text: str) -> str:
    out = html.escape(text)  # quotes too: nothing in the text can close an attribute
    for pattern, repl in _INLINE:
        out = pattern.sub(repl, out)
    # no bracket inside a link's text: each "[" then scans to the next one (linear; with "[^\]]"
    # a line of n "["s took n^2 steps: 38 s at 80,000)
    return re.sub(r"\[([^\[\]]+)\]\(#([^()]+)\)", r'<a href="#\2">\1</a>', out)


_VERDICTS = (
    (re.compile(r"(PASS|criterion met)\b"), "pass"),
    (re.compile(r"(FAIL|criterion NOT met)\b"), "fail"),
    (re.compile(r"UNDECIDED\b"), "open"),
)


def _verdict_class(cell: str) -> str:
    """`` class="pass"`` (or fail, open) for a cell that starts with a verdict, else ``""``."""
    text = cell.strip().strip("*")
    return next((f' class="{name}"' for pattern, name in _VERDICTS if pattern.match(text)), "")


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [c.strip().replace("\\|", "|") for c in cells]


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


MAX_PLOT_BYTES = 16 * MiB
"""The largest plot embedded in an HTML report (dedebate's plots are well under 1 MiB)."""
MAX_EMBEDDED_BYTES = 128 * MiB
"""The most plot bytes one HTML report embeds; the plots after are not shown."""


def _png(base: Path, rel: str, room: int = MAX_PLOT_BYTES) -> bytes | str:
    """The bytes of the PNG ``rel`` inside ``base`` (of at most ``room`` bytes), else why not."""
    # Links are followed, and the file must lie inside ``base``: a regular file of at most
    # MAX_PLOT_BYTES and ``room`` (what the page may still embed).
    where = "is not a PNG file inside the report directory"
    try:
        root = base.resolve()
        path = (root / rel).resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop (RuntimeError before 3.13), a NUL
        return where
    if not path.is_relative_to(root):
        return where
    try:
        data = read_bytes(path, MAX_PLOT_BYTES)
    except TooLargeError:
        return f"is over rerender.MAX_PLOT_BYTES, the {MAX_PLOT_BYTES / MiB:g} MiB a plot may be"
    except (OSError, RunDirError):
        return where
    if not data.startswith(PNG_SIGNATURE):
        return where
    if len(data) > room:
        return (
            "would take the page over rerender.MAX_EMBEDDED_BYTES, the "
            f"{MAX_EMBEDDED_BYTES / MiB:g} MiB of plots it embeds"
        )
    return data


def _image(base: Path, rel: str, alt: str, budget: list[int] | None = None) -> str:
    budget = [MAX_EMBEDDED_BYTES] if budget is None else budget  # bytes the page may still embed
    data = _png(base, rel, budget[0])
    if isinstance(data, str):
        return f"<p>(plot {html.escape(alt)} not shown: {html.escape(rel)} {html.escape(data)})</p>"
    budget[0] -= len(data)
    uri = "data:image/png;base64," + base64.b64encode(data).decode()
    return f'<p><img alt="{html.escape(alt)}" src="{uri}"></p>'


_POLICY = (
    '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
    "img-src data:; style-src 'unsafe-inline'\">"
)


def to_html(md: str, base: Path) -> str:
    """One self-contained HTML page from the report's markdown.

    Headings, paragraphs and tables become HTML; plots are embedded as data URIs, only PNG
    files inside ``base`` (the module docstring).

    Args:
        md: the report's markdown (:func:`markdown`).
        base: the report directory the plot paths are relative to.
    """
    body: list[str] = []
    budget = [MAX_EMBEDDED_BYTES]  # plot bytes the page may still embed
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            head, rest = rows[0], [r for r in rows[1:] if not all(set(c) <= {"-", ":"} for c in r)]
            body.append(
                "<table><thead><tr>"
                + "".join(f"<th>{_inline(c)}</th>" for c in head)
                + "</tr></thead><tbody>"
                + "".join(
                    "<tr>"
                    + "".join(f"<td{_verdict_class(c)}>{_inline(c)}</td>" for c in r)
                    + "</tr>"
                    for r in rest
                )
                + "</tbody></table>"
            )
            continue
        if m := re.match(r"^(#{1,6}) (.*)$", line):
            level, text = len(m.group(1)), m.group(2)
            anchor = "".join(c for c in text.lower() if c.isalnum() or c in " -_").replace(" ", "-")
            body.append(f'<h{level} id="{html.escape(anchor)}">{_inline(text)}</h{level}>')
        elif m := _IMAGE.match(line):
            body.append(_image(base, m.group(2), m.group(1), budget))
        elif line.strip():
            body.append(f"<p>{_inline(line)}</p>")
        i += 1
    style = (
        "body{font-family:sans-serif;max-width:80em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
        "padding:.2em .5em;text-align:left;vertical-align:top}img{max-width:100%}"
        ".pass{background:#e6f4ea}.fail{background:#fce8e6}.open{background:#fff4e0}"
    )
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        + _POLICY
        + f"<title>dedebate reproduce report</title><style>{style}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
