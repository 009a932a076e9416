"""Run directories: where they are, their locks, and how files are written into them.

A run directory is ``<output_dir>/<experiment>-<UTC timestamp>[-n]/``; it is created atomically
(``mkdir`` fails if it exists, then ``-1``, ``-2``, ... are tried), so two runs started in the same
second never share a directory. ``~`` in ``output_dir`` is the user's home directory.

A directory that cannot be created or written (no permission, a path under a regular file, a
full disk) raises :class:`RunDirError`, one line naming the path (the CLI exits 2); a writer that
fails leaves no temporary file behind. A run directory in use by a process is locked
(:func:`lock_run_dir`), so a second process resuming the same run stops at once. A run directory
may come from someone else (a colleague, an archive), so one that reaches outside itself through
a symbolic link is refused before anything is written (:func:`check_run_dir`). Files are
written atomically as JSON (:func:`jsonable` converts numpy/jax values), text or CSV, and read
back with :func:`read_json` (bad JSON is a ValueError in words). What a result records about its
environment: :mod:`dedebate.lab.provenance` (re-exported here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import errno
import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

from dedebate.lab.provenance import (  # noqa: F401  (re-exported)
    PACKAGES,
    RESULT_SCHEMA_VERSION,
    environment_provenance,
    git_commit,
    git_dirty,
    package_versions,
)


def utc_stamp(now: _dt.datetime | None = None) -> str:
    """A sortable, filesystem-safe UTC time: ``20250101T120000Z``."""
    now = now or _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y%m%dT%H%M%SZ")


def utc_iso(now: _dt.datetime | None = None) -> str:
    """An ISO 8601 UTC time to the second: ``2025-01-01T12:00:00Z``."""
    now = now or _dt.datetime.now(_dt.UTC)
    return now.isoformat(timespec="seconds").replace("+00:00", "Z")


class RunDirError(Exception):
    """A run or output directory that cannot be used: one line naming the path (exit 2)."""


def _reason(err: OSError) -> str:
    """What went wrong with a path, in words (``strerror`` without the errno noise)."""
    if isinstance(err, FileExistsError):
        return "a file is in the way (not a directory)"
    if isinstance(err, NotADirectoryError):
        return "a part of the path is a file, not a directory"
    return (err.strerror or str(err) or type(err).__name__).rstrip(".")


def output_root(output_dir: str | os.PathLike) -> Path:
    """``output_dir`` with ``~`` expanded (the user's home directory)."""
    return Path(os.path.expanduser(os.fspath(output_dir)))


def new_run_dir(output_dir: str | os.PathLike, prefix: str) -> Path:
    """Create ``output_dir/prefix-<stamp>[-n]``, never an existing directory.

    Args:
        output_dir: where run directories are created (made if missing).
        prefix: the experiment name, or ``reproduce`` / ``sweep-NAME``.

    Raises:
        RunDirError: the directory cannot be created.
    """
    root = output_root(output_dir)
    base = f"{prefix}-{utc_stamp()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        for n in range(10_000):
            path = root / (base if n == 0 else f"{base}-{n}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return path.resolve()
    except OSError as err:
        raise RunDirError(
            f"output_dir {str(output_dir)!r}: cannot create a run directory there: {_reason(err)}"
        ) from None
    raise RunDirError(
        f"output_dir {str(output_dir)!r}: could not create a run directory {base}[-n] there"
    )


def newest_matching_dir(output_dir: str | os.PathLike, pattern: str, matches) -> Path | None:
    """The newest directory ``<output_dir>/<pattern>`` whose ``config.yaml`` matches.

    Names sort by their UTC stamp. ``config.yaml`` is read with the config loader's limits (no
    alias bomb, bounded nesting); unreadable or foreign directories are skipped (they are simply
    not resumable).

    Args:
        output_dir: where run directories are.
        pattern: a glob such as ``machines-*``.
        matches: called with the loaded config dict; True accepts the directory.
    """
    from dedebate.lab.config_yaml import read_yaml

    root = output_root(output_dir)
    if not root.is_dir():
        return None
    for d in sorted(root.glob(pattern), reverse=True):
        with contextlib.suppress(Exception):
            old = read_yaml(d / "config.yaml")
            if matches(old):
                return d.resolve()
    return None


LOCK_NAME = ".lock"
RUN_FOLDERS = ("plots", "tables", "checkpoints", "groups")
"""The folders the lab writes into, directly under a run directory: never symbolic links."""


def check_run_dir(run_dir: str | os.PathLike) -> None:
    """Refuse a run directory that reaches outside itself.

    Every symbolic link under it must lead inside it, and none may stand for one of
    :data:`RUN_FOLDERS`; links are not followed while looking. W&B's folders (``wandb/``, here
    or in a sub-run) must not be links out, but are not looked into: W&B links its logs to its
    cache in the user's home, and an attempt writes only a new run folder there.

    Raises:
        RunDirError: one line naming the first offending link and where it leads.
    """
    root = Path(os.path.realpath(run_dir))
    for where, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(where, name)
            if not path.is_symlink():
                continue
            target = Path(os.path.realpath(path))
            if not target.is_relative_to(root) or (Path(where) == root and name in RUN_FOLDERS):
                raise RunDirError(
                    f"{path}: a symbolic link (to {target}); a run directory must "
                    "not reach outside itself: replace the link by the files"
                )
        dirs[:] = [d for d in dirs if d != "wandb"]


class RunLock:
    """An exclusive ``flock`` on ``<run_dir>/.lock`` (which holds the owner's PID). The kernel
    drops it when its process ends however it ends, so a dead process's lock is simply taken
    over. :meth:`release` (or leaving the ``with`` block) unlocks."""

    def __init__(self, fd: int | None, path: Path):
        self._fd = fd
        self.path = path

    def release(self) -> None:
        """Unlock the run directory (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def lock_run_dir(run_dir: str | os.PathLike) -> RunLock:
    """Lock ``run_dir`` for this process.

    The directory is checked first (:func:`check_run_dir`), and the lock file is opened without
    following a link and without truncating it.

    Returns the held :class:`RunLock`.

    Raises:
        RunDirError: another process holds it ("run in use by PID N"), at once; the directory
            reaches outside itself, or its lock file is a link or not a regular file.
    """
    check_run_dir(run_dir)
    path = Path(run_dir) / LOCK_NAME
    try:
        import fcntl
    except ImportError:  # no flock on this platform: no lock
        return RunLock(None, path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        why = "a symbolic link" if err.errno == errno.ELOOP else _reason(err)
        raise RunDirError(f"{path}: cannot create the run's lock file: {why}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise RunDirError(
            f"{path}: the run's lock file is not a regular file of its own (a "
            "device, pipe or hard link); remove it"
        )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return RunLock(fd, path)  # a file system without locks (ENOLCK): run unlocked
        owner = ""
        with contextlib.suppress(OSError):
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        who = f"PID {owner}" if owner.isdigit() else "another process"
        raise RunDirError(
            f"run in use by {who}: {Path(run_dir)} is locked ({path}); wait for "
            "that process to finish or stop it"
        ) from None
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return RunLock(fd, path)


def jsonable(x: Any) -> Any:
    """A value with numbers, strings, lists and dicts only.

    Args:
        x: a value; numpy/jax scalars and arrays, tuples and dataclasses are converted.
    """
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


@contextlib.contextmanager
def _atomic(path: str | os.PathLike):
    """Yield ``PATH.tmp`` to write, then rename it to ``path`` (RunDirError on an OSError)."""
    # Yield ``PATH.tmp`` to write, then rename it to ``path``; on any failure the temporary file is
    # removed, and an OSError (a full disk, no permission) becomes one RunDirError line.
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise RunDirError(f"cannot write {path}: {_reason(err)}") from None
        raise


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write JSON atomically (temp file + rename), so a crash never leaves half a file.

    Args:
        path: the file.
        data: a JSON-able value (converted with :func:`jsonable`).

    Raises:
        RunDirError: the file cannot be written.
    """
    text = json.dumps(jsonable(data), indent=2, sort_keys=False) + "\n"
    with _atomic(path) as tmp:
        tmp.write_text(text)


def _json_int(digits: str) -> int:
    """An integer of a JSON file; ValueError naming its length when Python will not read it."""
    limit, n = sys.get_int_max_str_digits(), len(digits.lstrip("-"))
    if limit and n > limit:
        raise ValueError(f"an integer of {n} digits (at most {limit})")
    return int(digits)


def read_json(path: str | os.PathLike) -> Any:
    """The JSON value in ``path`` (a file that may come from someone else).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON: not UTF-8, malformed, nested too deeply for Python's parser,
            or an integer of more digits than Python converts; the message says which.
    """
    text = Path(path).read_text()
    try:
        return json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write text atomically (temp file + rename).

    Raises:
        RunDirError: the file cannot be written.
    """
    with _atomic(path) as tmp:
        tmp.write_text(text)


def write_csv(path: str | os.PathLike, rows: list[dict[str, Any]]) -> None:
    """Write rows of dicts as CSV, atomically.

    The header is the union of keys in order of first appearance; lists and dicts are written
    as JSON.

    Raises:
        RunDirError: the file cannot be written.
    """
    import csv

    header: list[str] = []
    for row in rows:
        for k in row:
            if k not in header:
                header.append(k)
    with _atomic(path) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header, restval="")
        w.writeheader()
        for row in rows:
            w.writerow({k: _cell(v) for k, v in row.items()})


def _cell(v: Any) -> Any:
    v = jsonable(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return v


def flatten_numbers(d: dict[str, Any], prefix: str = "") -> dict[str, float | int | bool | str]:
    """Nested dict -> ``a/b`` keys holding only scalars (for W&B summaries and logs).

    Returns the flat dict; non-finite floats become strings, other values are dropped.
    """
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
    """Print to stderr and flush."""
    print(*args, file=sys.stderr, flush=True)
