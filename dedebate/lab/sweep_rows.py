"""The rows files of a sweep (``sweep.csv``, ``groups/group-NNN.csv``): read, order, check.

Cells are read back as numbers, JSON lists and dicts, or text (an empty cell is None). A group
file is checked against the plan and against the hash recorded when it was written
(``groups.sha256`` in the sweep directory, ``sha256sum -c`` format) before a resumed sweep reuses
it (:func:`check_group_file`), and whether a folder holds this sweep (:func:`check_same_sweep`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from dedebate.lab.config import RunConfig, sweep_hash_of
from dedebate.lab.rundir import (
    MAX_HASHES_BYTES,
    MAX_ROWS_BYTES,
    _cell,
    eprint,
    read_bytes,
    read_config,
    read_text,
    uncell,
    write_csv,
    write_text,
)
from dedebate.lab.sweep_plan import RESERVED, Group, SweepError, SweepPlan

_BOOLS = {"True": True, "False": False}


def parse_cell(text: str) -> Any:
    """A CSV cell as the value ``write_csv`` wrote: None (empty), a bool, an int, a float (nan
    and inf included), a JSON list or dict, else its text (the ``'`` guard taken off)."""
    if text == "":
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            pass
    return uncell(text)


def _rows_bytes(path: Path) -> bytes:
    """A rows file's bytes: no link, a regular file, at most :data:`MAX_ROWS_BYTES`."""
    return read_bytes(path, MAX_ROWS_BYTES, "rundir.MAX_ROWS_BYTES")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a CSV file, each cell parsed back (:func:`parse_cell`).

    Raises:
        RunDirError: a link, not a regular file, or over ``rundir.MAX_ROWS_BYTES``.
    """
    text = io.StringIO(_rows_bytes(path).decode("utf-8"), newline="")
    return [{k: parse_cell(v) for k, v in r.items()} for r in csv.DictReader(text)]


def sort_rows(rows: list[dict[str, Any]], seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    """Rows in the order of ``sweep.csv``: by point, then by the seed's place in ``seeds``."""
    order = {s: i for i, s in enumerate(seeds)}
    return sorted(rows, key=lambda r: (int(r["point"]), order.get(int(r["seed"]), 0)))


HASHES = "groups.sha256"
"""The sweep directory's record of each group file's sha256, written with the file."""


def _recorded_hashes(sweep_dir: Path) -> dict[str, str]:
    try:  # a link, a FIFO or a file over MAX_HASHES_BYTES: RunDirError
        text = read_text(sweep_dir / HASHES, MAX_HASHES_BYTES, "rundir.MAX_HASHES_BYTES")
    except (OSError, UnicodeDecodeError):
        return {}
    lines = text.splitlines()
    return {name: digest for digest, _, name in (line.partition("  ") for line in lines)}


def write_group_file(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write a group file (``SWEEP_DIR/groups/group-NNN.csv``) and record its hash."""
    write_csv(path, rows)
    sweep_dir = path.parent.parent
    hashes = {
        **_recorded_hashes(sweep_dir),
        f"{path.parent.name}/{path.name}": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    write_text(sweep_dir / HASHES, "".join(f"{d}  {n}\n" for n, d in sorted(hashes.items())))


def check_group_file(path: Path, plan_: SweepPlan, group: Group) -> str | None:
    """None if ``path`` holds exactly the rows of ``group``: the index and axis columns, one row
    per (point, seed) of the group, each with its point's axis values as the sweep writes them,
    and the bytes whose hash was recorded when it was written; else what is wrong, in words (a
    file cut short, edited, or from another plan).

    Raises:
        RunDirError: the file or ``groups.sha256`` is a link, not a regular file, or over its
            cap (``rundir.MAX_ROWS_BYTES``, ``MAX_HASHES_BYTES``).
    """
    try:
        data = _rows_bytes(path)
        reader = csv.DictReader(io.StringIO(data.decode("utf-8"), newline=""))
        header = list(reader.fieldnames or [])
        rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        return f"unreadable ({type(err).__name__}: {err})"
    missing = [c for c in (*RESERVED, *plan_.axes) if c not in header]
    if missing:
        return f"no {missing[0]!r} column"
    want = len(group.points) * len(plan_.seeds)
    if len(rows) != want:
        return (
            f"{len(rows)} rows, expected {want} ({len(group.points)} points x "
            f"{len(plan_.seeds)} seeds)"
        )
    points = {p.index: p for p in group.points}
    expected = {(p.index, s) for p in group.points for s in plan_.seeds}
    seen: set[tuple[int, int]] = set()
    for i, r in enumerate(rows, start=2):  # line numbers: the header is line 1
        if None in r or None in r.values():
            return f"line {i} has {'more' if None in r else 'fewer'} cells than the header"
        try:
            key, g = (int(r["point"]), int(r["seed"])), int(r["group"])
        except ValueError:
            return f"line {i}: point, seed and group must be integers"
        if key not in expected or key in seen or g != group.index:
            return (
                f"line {i}: point {key[0]}, seed {key[1]}, group {g} is not a (new) row "
                f"of group {group.index}"
            )
        seen.add(key)
        for a in plan_.axes:
            cell = _cell(points[key[0]].values[a])
            if r[a] != ("" if cell is None else str(cell)):
                return f"line {i}: {a}={r[a]!r} is not point {key[0]}'s value {cell!r}"
    recorded = _recorded_hashes(path.parent.parent).get(f"{path.parent.name}/{path.name}")
    if recorded is None:
        return f"no hash of it in {HASHES} (not written by this sweep)"
    if recorded != hashlib.sha256(data).hexdigest():
        return f"its bytes differ from those hashed in {HASHES} when it was written (edited?)"
    return None


def group_done(path: Path, plan_: SweepPlan, group: Group) -> bool:
    """Whether a resumed sweep reads ``group`` back from ``path``: its file checks out
    (:func:`check_group_file`; a damaged one is recomputed) and none of its full runs ended in
    error (those are run again; the finished ones are read back from their folders)."""
    if not path.is_file():
        return False
    problem = check_group_file(path, plan_, group)
    if problem is None:
        failed = sum(r.get("status") == "error" for r in read_rows(path))
        problem = f"{failed} of its runs ended in error" if failed else None
    if problem is not None:
        eprint(f"dedebate: warning: {path}: {problem}; recomputing group {group.index}")
    return problem is None


def check_same_sweep(path: Path, cfg: RunConfig) -> bool:
    """Refuse a folder that holds a run or another sweep (SweepError); warn of another batch.

    Returns whether the folder's config.yaml has the same sweep block, every key alike (a resume
    that changes plots, metrics or batch is not a no-op)."""
    f = path / "config.yaml"
    if not f.is_file():
        return False
    try:
        old = read_config(f)  # never through a link; no alias bomb, bounded nesting
    except Exception:  # noqa: BLE001 - an unreadable config is replaced
        return False
    if isinstance(old, dict) and not old.get("sweep"):
        raise SweepError(
            f"{path} holds a run, not a sweep (its config.yaml has no sweep block); start a new "
            "sweep directory instead"
        )
    if isinstance(old, dict) and sweep_hash_of(old) != cfg.sweep_hash():
        raise SweepError(
            f"{path} holds a different sweep (its config.yaml has another sweep "
            "hash); start a new sweep directory instead"
        )
    was = old.get("sweep") if isinstance(old, dict) else None
    was, now = was.get("batch") if isinstance(was, dict) else None, cfg.sweep and cfg.sweep.batch
    if was is not None and was != now and any(path.glob("groups/group-*.csv")):
        eprint(  # a smaller batch can rescue a sweep that ran out of memory: warned, not refused
            f"dedebate: warning: {path}: sweep.batch {was!r} -> {now}: rows computed "
            "now may differ in the last bits from its groups' on disk (docs/lab.md, Sweeps)"
        )
    return isinstance(old, dict) and old.get("sweep") == cfg.to_dict()["sweep"]
