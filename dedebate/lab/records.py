"""Records on disk, to browse (``dedebate ls``) and to load from Python.

A *record* is a run directory (``results.json``), a sweep directory (a ``results.json`` of kind
``sweep``) or a reproduce directory (``report.json``). :func:`find` looks for them under a folder
(no symbolic link is followed, at most :data:`MAX_DEPTH` levels down, and a record's own
sub-directories are part of it); :func:`summary` is one record's ``ls`` entry. :func:`load` reads
a record in the current layout (:func:`upgrade` fills in what an older dedebate did not write);
:func:`claims` and :func:`metrics` give its claim rows (all of the same keys) and logged metrics
as flat dicts, ready for ``pandas.DataFrame``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from pathlib import Path
from typing import Any

from dedebate.lab.claims import Claim, gating
from dedebate.lab.folder_guard import held
from dedebate.lab.provenance import RESULT_SCHEMA_VERSION
from dedebate.lab.report_render import printable
from dedebate.lab.rundir import (
    MAX_METRICS_BYTES,
    MAX_ROWS_BYTES,
    RunDirError,
    read_json,
    read_text,
)
from dedebate.lab.schema import SCHEMA_DIR
from dedebate.lab.sweep_rows import parse_cell

MAX_DEPTH = 4
"""How many folders below the given one :func:`find` looks for records."""
KINDS = ("run", "sweep", "reproduce")
CLAIM_COLUMNS = (
    "experiment",
    *json.loads((SCHEMA_DIR / "claim.schema.json").read_text())["properties"],
)
"""The keys of every row :func:`claims` returns: the experiment, then claim.schema.json's fields."""
LS_KEYS = (
    "kind",
    "name",
    "status",
    "verdict",
    "claims_passed",
    "claims_total",
    "started_utc",
    "size",
    "bytes",
    "path",
    "error",
)
"""The keys of every :func:`summary` (``dedebate ls --json``)."""


class RecordError(ValueError):
    """A path that holds no readable record; the message names it."""


@dataclasses.dataclass(frozen=True)
class Record:
    """One record: its kind (one of :data:`KINDS`), directory, and JSON in the current layout."""

    kind: str
    path: Path
    data: dict[str, Any]


def _record_file(directory: Path) -> Path | None:
    """The directory's report.json, else its results.json; a symbolic link is not a record."""
    for name in ("report.json", "results.json"):
        f = directory / name
        if f.is_file() and not f.is_symlink():
            return f
    return None


def _version(data: dict[str, Any], kind: str) -> Any:
    if kind == "run":
        if data.get("status") == "running" and "provenance" not in data:
            return RESULT_SCHEMA_VERSION  # the runner's placeholder while the run goes on
        return (data.get("provenance") or {}).get("result_schema_version")
    return data.get("schema_version")


def upgrade(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """A record in the current layout: the fields an older dedebate did not write, filled in.

    Records of schema version 1 written before a field existed lack it: claim rows before
    findings, p-values and stored counts (``finding`` false, ``checks`` true, ``p_value``, ``k``,
    ``n``, ``sd`` null: nothing was recorded), and a report before findings and per-experiment
    verdicts (``findings_total`` / ``findings_met`` counted from its rows, each experiment's
    ``verdict`` from its ``passed``: none was measurement-only). A current record is unchanged.

    Args:
        data: a loaded ``results.json`` (``kind`` ``"run"`` or ``"sweep"``) or ``report.json``
            (``"reproduce"``); not modified.
        kind: one of :data:`KINDS`.

    Raises:
        RecordError: a schema version that is not an integer >= 1, or one newer than this
            dedebate reads.
    """
    if kind not in KINDS:
        raise RecordError(f"kind={kind!r}: must be one of {KINDS}")
    if kind == "sweep":
        from dedebate.lab.sweep import SWEEP_SCHEMA_VERSION as newest
    else:
        newest = RESULT_SCHEMA_VERSION
    version = _version(data, kind)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RecordError(
            f"schema version {version!r}: not a dedebate {kind} record (want an integer >= 1)"
        )
    if version > newest:
        raise RecordError(
            f"schema version {version}: written by a newer dedebate (this one "
            f"reads up to {newest}); upgrade dedebate to read it"
        )
    if kind == "sweep":
        return dict(data)
    if kind == "run":
        return {**data, "claims": [_claim_row(c) for c in _rows(data.get("claims"), "claims")]}
    experiments = [_experiment(e) for e in _rows(data.get("experiments"), "experiments")]
    findings = [c for e in experiments for c in e["claims"] if not gating(c)]
    out = {**data, "experiments": experiments}
    out.setdefault("findings_total", len(findings))
    out.setdefault("findings_met", sum(bool(c.get("passed")) for c in findings))
    return out


_CLAIM_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(Claim) if f.default is not dataclasses.MISSING
}


def _object(x: Any, what: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise RecordError(f"{what} {json.dumps(x)[:40]} is not a JSON object")
    return x


def _rows(rows: Any, what: str) -> list:
    """A record's list of claims or experiments ([] for none), within its cap."""
    from dedebate.lab.rerender import MAX_CLAIM_ROWS, MAX_EXPERIMENTS, too_many

    rows = rows or []
    if not isinstance(rows, list):
        raise RecordError(f"{what} is a {type(rows).__name__}, not a JSON list")
    cap = MAX_EXPERIMENTS if what == "experiments" else MAX_CLAIM_ROWS
    if problem := too_many(rows, what, cap, "rows"):
        raise RecordError(problem)
    return rows


def _claim_row(c: Any) -> dict[str, Any]:
    return {**_CLAIM_DEFAULTS, **_object(c, "a claim row")}


def _experiment(e: Any) -> dict[str, Any]:
    e = _object(e, "an experiment")
    e = {**e, "claims": [_claim_row(c) for c in _rows(e.get("claims"), "an experiment's claims")]}
    e.setdefault("measurement_only", False)
    e.setdefault("verdict", "PASS" if e.get("passed") else "FAIL")
    return e


def load(path: str | os.PathLike) -> Record:
    """Read a record, in the current layout (:func:`upgrade`).

    Args:
        path: a run, sweep or reproduce directory, or its ``results.json`` / ``report.json``.

    Returns the :class:`Record`.

    Raises:
        RecordError: no such path, no record file there, unreadable JSON, not a dedebate record,
            or a schema version this dedebate cannot read.
    """
    p = Path(path).expanduser()
    if p.is_file() and p.name in ("report.json", "results.json"):
        file = p
    elif p.is_dir():
        found = _record_file(p)
        if found is None:
            raise RecordError(
                f"{path}: no report.json or results.json here (not a run, sweep "
                "or reproduce directory)"
            )
        file = found
    else:
        raise RecordError(f"{path}: no such directory, report.json or results.json")
    try:
        data = read_json(file)  # never through a link, never a FIFO, at most MAX_RECORD_BYTES
    except RunDirError as err:
        raise RecordError(str(err)) from None
    except (OSError, ValueError) as err:
        raise RecordError(f"{file}: not readable JSON ({err})") from None
    if (
        file.name == "report.json"
        and isinstance(data, dict)
        and isinstance(data.get("experiments"), list)
    ):
        kind = "reproduce"
    elif file.name == "results.json" and isinstance(data, dict) and data.get("kind") == "sweep":
        kind = "sweep"
    elif (
        file.name == "results.json"
        and isinstance(data, dict)
        and isinstance(data.get("claims"), list)
    ):
        kind = "run"
    else:
        raise RecordError(f"{file}: not a dedebate record (no experiments, claims or sweep)")
    try:
        return Record(kind, file.parent, upgrade(data, kind))
    except RecordError as err:
        raise RecordError(f"{file}: {err}") from None


def _as_record(what: Record | str | os.PathLike) -> Record:
    return what if isinstance(what, Record) else load(what)


def claims(what: Record | str | os.PathLike) -> list[dict[str, Any]]:
    """Every claim row of a record, flat, each with the keys :data:`CLAIM_COLUMNS`.

    Args:
        what: a :class:`Record`, or a path :func:`load` reads.

    Returns the rows in the record's order (a reproduce's experiments in turn; a sweep has none); a
    field the row does not hold is None.

    Raises:
        RecordError: as :func:`load`.
    """
    rec = _as_record(what)
    if rec.kind == "run":
        groups = [(rec.data.get("experiment"), rec.data["claims"])]
    elif rec.kind == "reproduce":
        groups = [(e.get("name"), e["claims"]) for e in rec.data["experiments"]]
    else:
        groups = []
    return [
        {k: c.get(k) for k in CLAIM_COLUMNS} | {"experiment": name}
        for name, rows in groups
        for c in rows
    ]


def _inside(base: Path, path: Path) -> bool:
    """Whether ``path`` lies inside ``base`` once every link is followed."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(base))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl``; a line cut short by a kill is skipped."""
    rows = []
    for line in _read(path, MAX_METRICS_BYTES, "rundir.MAX_METRICS_BYTES").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _read(path: Path, limit: int, cap: str) -> str:
    """A record's file (``rundir.read_text``); RecordError if it is not regular or too large."""
    try:
        return read_text(path, limit, cap)
    except RunDirError as err:
        raise RecordError(str(err)) from None


def metrics(what: Record | str | os.PathLike) -> list[dict[str, Any]]:
    """The logged metrics of a record as rows, each led by its ``experiment``.

    A run gives the rows of its ``metrics.jsonl``; a reproduce, those of each experiment's run
    directory in turn (only directories inside it); a sweep, the rows of its ``sweep.csv``.

    Args:
        what: a :class:`Record`, or a path :func:`load` reads.

    Raises:
        RecordError: as :func:`load`; or a ``metrics.jsonl`` / ``sweep.csv`` that is not a
            regular file or is over its cap (``rundir.MAX_METRICS_BYTES`` / ``MAX_ROWS_BYTES``).
    """
    rec = _as_record(what)
    if rec.kind == "sweep":
        table = rec.path / str(rec.data.get("table") or "sweep.csv")
        if not (table.is_file() and _inside(rec.path, table)):
            return []
        text = _read(table.resolve(), MAX_ROWS_BYTES, "rundir.MAX_ROWS_BYTES")
        experiment = rec.data.get("experiment")
        return [
            {"experiment": experiment, **{k: parse_cell(v) for k, v in row.items()}}
            for row in csv.DictReader(io.StringIO(text, newline=""))
        ]
    if rec.kind == "run":
        runs = [(rec.data.get("experiment"), rec.path)]
    else:
        runs = [
            (e.get("name"), rec.path / e["run_dir"])
            for e in rec.data["experiments"]
            if isinstance(e.get("run_dir"), str)
        ]
    out = []
    for name, run_dir in runs:
        file = run_dir / "metrics.jsonl"
        if file.is_file() and _inside(rec.path, file):
            out += [{"experiment": name, **row} for row in _jsonl(file.resolve())]
    return out


def find(root: str | os.PathLike, max_depth: int = MAX_DEPTH) -> list[Path]:
    """The record directories under ``root`` (``root`` itself, if it is one).

    No symbolic link is followed, hidden folders and ``wandb/`` are skipped, and a record's
    sub-directories are not searched (a reproduce's runs and a sweep's points belong to it).

    Raises:
        RecordError: ``root`` is not a directory.
    """
    top = Path(root).expanduser()
    if not top.is_dir():
        raise RecordError(f"{root}: {'not a directory' if top.exists() else 'no such directory'}")
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        if _record_file(d) is not None or _unfinished_sweep(d):  # a sweep's points/: its own
            found.append(d)
            return
        if depth >= max_depth:
            return
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and e.name != "wandb":
                walk(Path(e.path), depth + 1)

    walk(top, 0)
    return found


def _unfinished_sweep(d: Path) -> bool:
    """A sweep's folder before its results.json: its config.yaml beside its groups/."""
    return (d / "groups").is_dir() and (d / "config.yaml").is_file()


def disk_bytes(directory: str | os.PathLike[str]) -> int:
    """The bytes of the files under a directory, links neither followed nor counted."""
    total = 0
    for where, _dirs, files in os.walk(directory):
        for name in files:
            try:
                st = os.lstat(os.path.join(where, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(where, name)):
                total += st.st_size
    return total


def summary(directory: str | os.PathLike) -> dict[str, Any]:
    """One record's ``dedebate ls`` entry, with the keys :data:`LS_KEYS`.

    Returns ``kind``, ``name`` (the experiment; a reproduce's experiments joined by commas),
    ``status`` (a run's or sweep's, ``stopped`` for "running" when no process holds its lock;
    a sweep before its results.json ``running`` or ``stopped``; a reproduce's ``complete`` /
    ``incomplete``; ``unreadable``),
    ``verdict`` (``PASS`` / ``FAIL`` for a finished run or reproduce, else None), gating
    ``claims_passed`` / ``claims_total`` (None for a sweep), ``started_utc``, ``size`` (quick,
    default, full), ``bytes`` on disk, ``path``, and ``error`` (a run's error or why the record is
    unreadable, else None).
    """
    path = Path(directory)
    out: dict[str, Any] = dict.fromkeys(LS_KEYS)
    out.update(path=str(path), bytes=disk_bytes(path))
    if _record_file(path) is None and _unfinished_sweep(path):  # no results.json before its end
        name = path.name.rsplit("-sweep-", 1)[0] if "-sweep-" in path.name else None
        return out | {"kind": "sweep", "name": name, "status": _running(path, "running")}
    try:
        rec = load(path)
    except RecordError as err:
        f = _record_file(path)
        out.update(
            kind="reproduce" if f and f.name == "report.json" else "run",
            status="unreadable",
            error=str(err),
        )
        return out
    d, prov = rec.data, rec.data.get("provenance") or {}
    out.update(
        kind=rec.kind,
        started_utc=prov.get("started_utc") or d.get("started_utc"),
        size=prov.get("size"),
    )
    if rec.kind == "reproduce":
        done = bool(d.get("complete"))
        out.update(
            name=",".join(str(e.get("name")) for e in d["experiments"]),
            status="complete" if done else "incomplete",
            verdict=("PASS" if d.get("passed") else "FAIL") if done else None,
            claims_passed=d.get("claims_passed"),
            claims_total=d.get("claims_total"),
        )
    else:
        out.update(name=d.get("experiment"), status=_running(path, d.get("status")))
        out.update(error=d.get("error"))
    if rec.kind == "run":
        gate = [c for c in d["claims"] if gating(c)]
        out.update(
            verdict=("PASS" if d.get("passed") else "FAIL") if d.get("status") == "ok" else None,
            claims_passed=sum(bool(c.get("passed")) for c in gate),
            claims_total=len(gate),
        )
    return out


def _running(path: Path, status: Any) -> Any:
    """A "running" status as "stopped" when no process holds the folder's lock (killed, say)."""
    return "stopped" if status == "running" and held(path) is False else status


def listing(root: str | os.PathLike) -> list[dict[str, Any]]:
    """The :func:`summary` of every record under ``root`` (:func:`find`), oldest first.

    Returns the summaries, by start time (a record without one first), then path.

    Raises:
        RecordError: ``root`` is not a directory.
    """
    entries = [summary(d) for d in find(root)]
    return sorted(entries, key=lambda e: (str(e["started_utc"] or ""), e["path"]))  # any JSON


def _human(n: int) -> str:
    """Bytes as ``ls -h`` shows them: 512B, 4.0K, 92K, 1.2M."""
    size, unit = float(n), "B"
    for unit in ("B", "K", "M", "G", "T"):
        if size < 1024 or unit == "T":
            break
        size /= 1024
    return f"{size:.0f}{unit}" if unit == "B" or size >= 10 else f"{size:.1f}{unit}"


def _short(names: str | None) -> str:
    """A reproduce's experiments in the table: two by name, more as their number."""
    many = (names or "").split(",")
    return f"{len(many)} experiments" if len(many) > 2 else names or "-"


def render(entries: list[dict[str, Any]]) -> str:
    """``dedebate ls``'s text: a header, then one aligned line per :func:`summary`."""
    rows = [("KIND", "STATUS", "CLAIMS", "STARTED", "SIZE", "DISK", "NAME", "PATH")]
    for e in entries:
        claims_text = (
            "-" if e["claims_total"] is None else f"{e['claims_passed']}/{e['claims_total']}"
        )
        rows.append(
            (
                e["kind"],
                e["verdict"] or e["status"] or "-",
                claims_text,
                e["started_utc"] or "-",
                e["size"] or "-",
                _human(e["bytes"]),
                _short(e["name"]) if e["kind"] == "reproduce" else e["name"] or "-",
                e["path"],
            )
        )
    cells = [[printable(c) for c in r] for r in rows]  # names and paths come from the folders
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]) - 1)]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + f"  {r[-1]}\n"
        for r in cells
    )
