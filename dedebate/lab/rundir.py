"""Run directories: where they are, their locks, and how files are written into them.

A run directory is ``<output_dir>/<experiment>-<UTC timestamp>[-n]/``; it is created atomically
(``mkdir`` fails if it exists, then ``-1``, ``-2``, ... are tried), so two runs started in the same
second never share a directory. ``~`` in ``output_dir`` is the user's home directory.

A directory that cannot be created or written (no permission, a path under a regular file, a
full disk) raises :class:`RunDirError`, one line naming the path (the CLI exits 2); a writer that
fails leaves no temporary file behind. A run directory in use by a process is locked
(:func:`lock_run_dir`). A run directory may come from someone else, so one that reaches outside
itself or holds a FIFO or device is refused before anything is written (:func:`check_run_dir`).
Files are written atomically as JSON (:func:`jsonable` converts numpy/jax values), text or CSV,
and read back with :func:`read_json` / :func:`read_bytes`: never through a link, never from a
FIFO or device, never more than a cap (``MAX_*_BYTES``). What a result records about its
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
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

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


class TooLargeError(RunDirError):
    """A file over the cap of its reader (:func:`read_bytes`)."""


def os_reason(err: OSError) -> str:
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
            f"output_dir {str(output_dir)!r}: cannot create a run directory there: {os_reason(err)}"
        ) from None
    raise RunDirError(
        f"output_dir {str(output_dir)!r}: could not create a run directory {base}[-n] there"
    )


def newest_matching_dir(output_dir: str | os.PathLike, pattern: str, matches) -> Path | None:
    """The newest directory ``<output_dir>/<pattern>`` whose ``config.yaml`` matches.

    Names sort by their UTC stamp. ``config.yaml`` is read with the config loader's limits (no
    alias bomb, bounded nesting); unreadable or foreign directories are skipped (they are simply
    not resumable), and so are links (a run directory is never resumed through a link).

    Args:
        output_dir: where run directories are.
        pattern: a glob such as ``machines-*``.
        matches: called with the loaded config dict; True accepts the directory.
    """
    root = output_root(output_dir)
    if not root.is_dir():
        return None
    for d in sorted(root.glob(pattern), reverse=True):
        if d.is_symlink():
            continue
        with contextlib.suppress(Exception):
            old = read_config(d / "config.yaml")
            if matches(old):
                return d.resolve()
    return None


def non_finite(x: Any, path: str = "") -> tuple[Any, list[str]]:
    """``x`` with each NaN or infinity as None, and the paths where one was (JSON has neither)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None, [path or "."]
    if isinstance(x, dict):
        pairs = [(k, non_finite(v, f"{path}.{k}")) for k, v in x.items()]
        return {k: v for k, (v, _) in pairs}, [p for _, (_, ps) in pairs for p in ps]
    if isinstance(x, list):
        items = [non_finite(v, f"{path}[{i}]") for i, v in enumerate(x)]
        return [v for v, _ in items], [p for _, ps in items for p in ps]
    return x, []


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


def _sync_folder(folder: Path) -> None:
    """Flush a folder's entries to disk (a rename is durable once its folder is); best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _atomic(path: str | os.PathLike, binary: bool = False) -> Iterator[IO[Any]]:
    """Yield a new ``PATH.tmp`` to write (text, or bytes if ``binary``), then sync and rename it."""
    # The temporary file is made afresh (O_EXCL, O_NOFOLLOW): a link planted at its name after
    # check_run_dir looked is removed, never written through; os.replace renames, never follows.
    # On any failure it is removed, and an OSError becomes one RunDirError line.
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.unlink(missing_ok=True)  # a crashed run's (a link is removed, not followed)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o666)
        fh: IO[Any] = (
            os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
        )
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())  # on disk before the name points at it
        os.replace(tmp, path)
        _sync_folder(path.parent)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise RunDirError(f"cannot write {path}: {os_reason(err)}") from None
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
    with _atomic(path) as fh:
        fh.write(text)


def _json_int(digits: str) -> int:
    """An integer of a JSON file; ValueError naming its length when Python will not read it."""
    limit, n = sys.get_int_max_str_digits(), len(digits.lstrip("-"))
    if limit and n > limit:
        raise ValueError(f"an integer of {n} digits (at most {limit})")
    return int(digits)


MiB = 2**20


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (``a FIFO``, ``a socket``, ...)."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((name for test, name in kinds if test(mode)), "not a plain file")


ONLY_FILES = "a shared run folder may hold only regular files and folders"


MAX_RECORD_BYTES = 128 * MiB
"""The largest ``results.json`` / ``report.json`` read (a run's record is well under 1 MiB; a
sweep's grows with its points, about 50 KiB each: some 2,500 points fit)."""
MAX_METRICS_BYTES = 512 * MiB
"""The largest ``metrics.jsonl`` read (a --full stackelberg run logs some tens of MiB)."""
MAX_ROWS_BYTES = 512 * MiB
"""The largest sweep rows file read (``sweep.csv``, a group or shard file: about 2 KiB a row)."""
MAX_HASHES_BYTES = 16 * MiB
"""The largest ``groups.sha256`` read (about 90 bytes a group)."""


def _open_regular(path: Path, flags: int) -> tuple[int, os.stat_result]:
    """``os.open`` without following a link or blocking; RunDirError unless a regular file."""
    flags |= os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP and path.is_symlink():
            raise RunDirError(f"{path}: a symbolic link, not followed; {ONLY_FILES}") from None
        if err.errno == errno.ENXIO:  # a FIFO nobody reads, opened to write
            raise RunDirError(f"{path}: not a regular file (a FIFO); {ONLY_FILES}") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise RunDirError(f"{path}: not a regular file ({file_kind(info.st_mode)}); {ONLY_FILES}")
    return fd, info


def read_bytes(path: str | os.PathLike, limit: int, cap: str = "") -> bytes:
    """The bytes of the regular file ``path`` (a file that may come from someone else): opened
    without following a link or blocking (a FIFO does not hang it), read only if ``fstat`` says
    it is a regular file of at most ``limit`` bytes.

    Args:
        path: the file.
        limit: the most bytes read.
        cap: the name of ``limit`` for the message (``"rundir.MAX_RECORD_BYTES"``).

    Raises:
        FileNotFoundError: no such file (another OSError: it cannot be opened or read).
        RunDirError: a symbolic link, not a regular file, or over ``limit`` bytes
            (:class:`TooLargeError`); one line naming the file and what is allowed.
    """
    fd, info = _open_regular(Path(path), os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1) if info.st_size <= limit else b""
    if info.st_size > limit or len(data) > limit:
        raise TooLargeError(
            f"{path}: {max(info.st_size, len(data))} bytes, over the {limit / MiB:g} MiB a "
            f"dedebate reader accepts{f' ({cap})' if cap else ''}; dedebate writes none so large"
        )
    return data


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """A run folder's ``config.yaml`` (a folder may come from someone else), by the config
    loader's rules and read as :func:`read_bytes` reads records: never through a link or a FIFO.

    Raises:
        ConfigError: one line: missing, a link, not a regular file, over its cap, not UTF-8,
            bad YAML, a limit, or not a mapping.
    """
    from dedebate.lab.config_types import ConfigError
    from dedebate.lab.config_yaml import MAX_YAML_BYTES, parse_config

    try:
        text = read_bytes(path, MAX_YAML_BYTES, "config_yaml.MAX_YAML_BYTES").decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {str(path)!r}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: cannot read config file: not UTF-8 text") from None
    except RunDirError as err:
        raise ConfigError(str(err)) from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    return parse_config(text, str(path))


def read_text(path: str | os.PathLike, limit: int, cap: str = "") -> str:
    """:func:`read_bytes` decoded as UTF-8 (UnicodeDecodeError, a ValueError, if it is not)."""
    return read_bytes(path, limit, cap).decode("utf-8")


def open_append(path: str | os.PathLike):
    """``path`` opened to append text (created if missing); RunDirError for a link, a FIFO or
    another file that is not regular (:func:`read_bytes`), or a hard link (a file with another
    name, perhaps outside the run folder, that the appended rows would change too)."""
    fd, info = _open_regular(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    if info.st_nlink != 1:
        os.close(fd)
        raise RunDirError(
            f"{path}: a hard link ({info.st_nlink} names), not appended to; {ONLY_FILES}"
        )
    return os.fdopen(fd, "a")


def read_json(path: str | os.PathLike) -> Any:
    """The JSON value in ``path`` (a file that may come from someone else), read with
    :func:`read_bytes` (no link, a regular file, at most :data:`MAX_RECORD_BYTES`).

    Raises:
        OSError: the file cannot be read (FileNotFoundError: there is none).
        RunDirError: a link, not a regular file, or over :data:`MAX_RECORD_BYTES`.
        ValueError: it is not JSON: not UTF-8, malformed, nested too deeply for Python's parser,
            or an integer of more digits than Python converts; the message says which.
    """
    text = read_text(path, MAX_RECORD_BYTES, "rundir.MAX_RECORD_BYTES")
    try:
        return json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write text atomically (temp file + rename).

    Raises:
        RunDirError: the file cannot be written.
    """
    with _atomic(path) as fh:
        fh.write(text)


def write_figure(path: str | os.PathLike, fig: Any, **savefig: Any) -> None:
    """Save a matplotlib figure as a PNG atomically (``savefig``'s options passed on).

    Raises:
        RunDirError: the file cannot be written.
    """
    with _atomic(path, binary=True) as fh:
        fig.savefig(fh, format="png", **savefig)


def write_csv(path: str | os.PathLike, rows: list[dict[str, Any]]) -> None:
    """Write rows of dicts as CSV, atomically.

    The header is the union of keys in order of first appearance; lists and dicts are written
    as JSON; text that a spreadsheet would read as a formula gets a ``'`` in front
    (:data:`FORMULA_START`).

    Raises:
        RunDirError: the file cannot be written.
    """
    import csv

    header: list[str] = []
    for row in rows:
        for k in row:
            if k not in header:
                header.append(k)
    with _atomic(path) as fh:
        w = csv.DictWriter(fh, fieldnames=header, restval="")
        w.writeheader()
        for row in rows:
            w.writerow({k: _cell(v) for k, v in row.items()})


FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")
"""First characters that make a spreadsheet read a text cell as a formula (and the quote that
marks text): a text cell starting with one gets a ``'`` in front, which :func:`uncell` takes
off again, so a shared folder's text cannot run as a formula in a spreadsheet."""


def _cell(v: Any) -> Any:
    v = jsonable(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    if isinstance(v, str) and v.startswith(FORMULA_START):
        return "'" + v
    return v


def uncell(text: str) -> str:
    """A CSV cell's text as written by :func:`write_csv`'s caller (its ``'`` guard taken off)."""
    return text[1:] if text[:1] == "'" else text


def flatten_numbers(
    d: dict[str, Any], prefix: str = "", finite_only: bool = True
) -> dict[str, float | int | bool | str]:
    """Nested dict -> ``a/b`` keys holding only scalars (for W&B summaries and logs).

    Returns the flat dict; non-finite floats become strings where ``finite_only`` (else they
    stay floats: W&B's history takes them), other values are dropped.
    """
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        v = jsonable(v)
        if isinstance(v, dict):
            out.update(flatten_numbers(v, key + "/", finite_only))
        elif isinstance(v, (bool, int, str)):
            out[key] = v
        elif isinstance(v, float):
            out[key] = v if math.isfinite(v) or not finite_only else str(v)
    return out


def eprint(*args: Any) -> None:
    """Print to stderr and flush, each line :func:`printable` (a shared record's text in a
    message cannot drive the terminal)."""
    from dedebate.lab.report_render import printable

    text = " ".join(map(str, args))
    print("\n".join(printable(line) for line in text.split("\n")), file=sys.stderr, flush=True)


UTC_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
"""The form of :func:`utc_iso`'s stamps (a start time read from someone's record must match it)."""


def record_status(path: str | os.PathLike) -> str | None:
    """``status`` of a results.json (None if absent, unreadable or not a record)."""
    try:
        status = read_json(path).get("status")
    except (OSError, ValueError, AttributeError, RunDirError):
        return None
    return status if isinstance(status, str) else None


def write_running_record(run_dir: Path, experiment: str, title: str, resume: bool) -> str:
    """Write a "running" ``results.json`` before a run starts; return the first attempt's start.

    A run whose process dies (killed, out of memory) is then visible as such. A finished run's
    results.json (status "ok") is kept: a resume must never lose it. A resume keeps an earlier
    attempt's start (the record's, or its provenance's).
    """
    path, old, first = Path(run_dir) / "results.json", None, utc_iso()
    with contextlib.suppress(OSError, ValueError, RunDirError):
        old = read_json(path)
    if isinstance(old, dict):
        prov = old.get("provenance")
        was = old.get("started_utc") or (prov.get("started_utc") if isinstance(prov, dict) else 0)
        first = was if resume and isinstance(was, str) and UTC_STAMP.fullmatch(was) else first
        if old.get("status") == "ok":
            return first
    note = (
        "written when the run started and replaced when it ends; if process pid is gone and this "
        "is still here, the run died before finishing (killed, out of memory or aborted): resume "
        "it with dedebate run --resume RUN_DIR"
    )
    record = {"experiment": experiment, "title": title, "status": "running", "passed": False}
    write_json(
        path, record | {"claims": [], "started_utc": first, "pid": os.getpid(), "note": note}
    )
    return first
