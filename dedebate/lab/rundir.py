"""Run directories, provenance and JSON-safe conversion.

A run directory is ``<output_dir>/<experiment>-<UTC timestamp>[-n]/``; it is created atomically
(``mkdir`` fails if it exists, then ``-1``, ``-2``, ... are tried), so two runs started in the same
second never share a directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import dedebate

RESULT_SCHEMA_VERSION = 1


def utc_stamp(now: _dt.datetime | None = None) -> str:
    """``20250101T120000Z``: sortable, filesystem-safe UTC time."""
    now = now or _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y%m%dT%H%M%SZ")


def utc_iso(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.UTC)
    return now.isoformat(timespec="seconds").replace("+00:00", "Z")


def new_run_dir(output_dir: str | os.PathLike, prefix: str) -> Path:
    """Create and return ``output_dir/prefix-<stamp>[-n]`` (never an existing directory)."""
    root = Path(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    base = f"{prefix}-{utc_stamp()}"
    for n in range(10_000):
        path = root / (base if n == 0 else f"{base}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path.resolve()
    raise RuntimeError(f"could not create a run directory under {root}")


def newest_matching_dir(output_dir: str | os.PathLike, pattern: str, matches) -> Path | None:
    """The newest directory ``<output_dir>/<pattern>`` (names sort by their UTC stamp) whose
    ``config.yaml`` parses to a dict for which ``matches(config)`` is true; unreadable or
    foreign directories are skipped (they are simply not resumable)."""
    import yaml

    root = Path(output_dir)
    if not root.is_dir():
        return None
    for d in sorted(root.glob(pattern), reverse=True):
        with contextlib.suppress(Exception):
            old = yaml.safe_load((d / "config.yaml").read_text())
            if isinstance(old, dict) and matches(old):
                return d.resolve()
    return None


def git_commit(path: str | os.PathLike | None = None) -> str | None:
    """``git rev-parse HEAD`` of the repository holding ``path`` (the dedebate sources), or None."""
    where = Path(path) if path else Path(dedebate.__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) >= 40 else None


def environment_provenance() -> dict[str, Any]:
    """Versions and devices: what every result records besides its config hash and seed."""
    prov: dict[str, Any] = {
        "dedebate_version": dedebate.__version__,
        "git_commit": git_commit(),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "result_schema_version": RESULT_SCHEMA_VERSION,
    }
    with contextlib.suppress(Exception):  # versions and git state (lab/doctor)
        from dedebate.lab.doctor import git_dirty, package_versions

        prov.update(git_dirty=git_dirty(), packages=package_versions())
    try:
        import jax

        prov.update(jax_version=jax.__version__, backend=jax.default_backend(),
                    device_count=jax.device_count(),
                    devices=sorted({d.device_kind for d in jax.devices()}))
    except Exception as err:  # noqa: BLE001 - provenance must never stop a run
        prov.update(jax_version=None, backend=None, device_count=None,
                    jax_error=f"{type(err).__name__}: {err}")
    with contextlib.suppress(Exception):  # the persistent compilation cache (lab/compile_cache)
        from dedebate.lab.compile_cache import provenance as compile_cache_provenance

        prov["compile_cache"] = compile_cache_provenance()
    return prov


def jsonable(x: Any) -> Any:
    """Numbers, strings, lists and dicts only: numpy/jax scalars and arrays become Python values."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return jsonable(dataclasses.asdict(x))
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    for method in ("tolist", "item"):  # numpy / jax arrays and scalars
        if hasattr(x, method):
            with contextlib.suppress(Exception):
                return jsonable(getattr(x, method)())
    return str(x)


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write JSON atomically (temp file + rename), so a crash never leaves half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(data), indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_csv(path: str | os.PathLike, rows: list[dict[str, Any]]) -> None:
    """Rows of dicts -> CSV; the header is the union of keys in order of first appearance."""
    import csv

    header: list[str] = []
    for row in rows:
        for k in row:
            if k not in header:
                header.append(k)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header, restval="")
        w.writeheader()
        for row in rows:
            w.writerow({k: _cell(v) for k, v in row.items()})
    os.replace(tmp, path)


def _cell(v: Any) -> Any:
    v = jsonable(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return v


def flatten_numbers(d: dict[str, Any], prefix: str = "") -> dict[str, float | int | bool | str]:
    """Nested dict -> ``a/b`` keys holding only scalars (for W&B summaries and logs)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        v = jsonable(v)
        if isinstance(v, dict):
            out.update(flatten_numbers(v, key + "/"))
        elif isinstance(v, (bool, int, str)):
            out[key] = v
        elif isinstance(v, float):
            out[key] = v if math.isfinite(v) else str(v)
    return out


def eprint(*args: Any) -> None:
    print(*args, file=sys.stderr, flush=True)
