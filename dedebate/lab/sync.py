"""``dedebate sync PATH``: upload every offline W&B run under a run, sweep or reproduce directory.

Runs are offline by default (``<run dir>/wandb/offline-run-*``); a reproduce or sweep directory
holds one per experiment or point. This finds them all and runs ``wandb sync`` on several at once
(W&B's own command syncs one run after another). ``DEDEBATE_WANDB`` names another ``wandb``
executable (the tests use a stand-in).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dedebate.lab.folder_guard import check_wandb_dir
from dedebate.lab.report_render import printable
from dedebate.lab.rundir import RunDirError
from dedebate.lab.wandb_records import RecordError, outside_files


def find_offline_runs(path: str | os.PathLike) -> list[Path]:
    """Every ``.../wandb/offline-run-*`` directory under ``path``.

    Links are not followed, each ``wandb/`` found must hold no link but W&B's own log links
    (:func:`~dedebate.lab.folder_guard.check_wandb_dir`), and no run's records may name a file
    outside its run directory, a TensorBoard directory or a request
    (:func:`~dedebate.lab.wandb_records.outside_files`): a shared folder cannot make a sync upload
    another folder or file.

    Raises:
        RunDirError: a ``wandb/`` under ``path`` holds a link or special file, or a run's records
            name a file outside its run directory or do not read (nothing synced).
    """
    root = Path(path).expanduser()
    found: list[Path] = []

    def runs_in(wandb_dir: Path) -> None:
        check_wandb_dir(wandb_dir)
        for run in (p for p in wandb_dir.glob("offline-run-*") if p.is_dir()):
            try:
                named = outside_files(run)
            except RecordError as err:
                raise RunDirError(f"{err}: it cannot be checked; nothing synced") from None
            if named:
                raise RunDirError(
                    f"{printable(run)}: its W&B records name {len(named)} file(s) or request(s) "
                    f"outside its run directory (e.g. {printable(named[0])}), which a sync would "
                    "read, upload or fetch; nothing synced"
                )
            found.append(run)

    if root.name == "wandb":
        runs_in(root)
    elif root.name.startswith("offline-run-") and root.parent.name == "wandb":  # one run
        runs_in(root.parent)
        found[:] = [r for r in found if r.name == root.name]
    else:
        for where, dirs, _ in os.walk(root):  # links to folders are listed, never entered
            if "wandb" in dirs:
                dirs.remove("wandb")
                runs_in(Path(where, "wandb"))
    return sorted(found)


_OFFLINE_RUN = re.compile(r"offline-run-\d{8}_\d{6}-(.+?)(?:-\d+)?")


def run_id(run: Path) -> str:
    """The W&B run id of an offline run folder: ``offline-run-TIME-ID``, where W&B adds ``-N``
    to a name already taken in the same second (a resume right after the first attempt).

    Returns the id (the whole name where it does not have that form).
    """
    m = _OFFLINE_RUN.fullmatch(run.name)
    return m.group(1) if m else run.name


def by_run_id(runs: list[Path]) -> list[list[Path]]:
    """``runs`` grouped by W&B run (``offline-run-TIME-ID``: a resumed run leaves one folder per
    attempt, which one ``wandb sync`` must upload together), in order of first appearance.
    """
    groups: dict[tuple[Path, str], list[Path]] = {}
    for r in runs:
        groups.setdefault((r.parent, run_id(r)), []).append(r)
    return list(groups.values())


def wandb_command() -> list[str]:
    """How to run wandb: ``$DEDEBATE_WANDB``, the one beside this Python, or ``python -m wandb``."""
    if os.environ.get("DEDEBATE_WANDB"):
        return [os.environ["DEDEBATE_WANDB"]]
    beside = Path(sys.executable).parent / "wandb"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("wandb")
    return [found] if found else [sys.executable, "-m", "wandb"]


SYNC_TIMEOUT_S = 300.0
"""Seconds one ``wandb sync`` may take before it is stopped (``dedebate sync --timeout``)."""


class _Children:
    """The ``wandb sync`` processes running now, each in its own process group."""

    def __init__(self):
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def start(self, argv: list[str], cwd: str | None = None) -> subprocess.Popen:
        with self._lock:
            if self._stopped:
                raise OSError("sync was stopped")
            p = subprocess.Popen(
                argv,
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
            self._procs.add(p)
            return p

    def finish(self, p: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(p)

    def kill(self, p: subprocess.Popen | None = None) -> None:
        """Kill ``p``'s process group, or every running one's (and start no more)."""
        with self._lock:
            self._stopped = self._stopped or p is None
            targets = [p] if p is not None else list(self._procs)
        for q in targets:
            try:
                os.killpg(q.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def sync_one(
    run: list[Path],
    extra: list[str],
    timeout: float = SYNC_TIMEOUT_S,
    children: _Children | None = None,
) -> tuple[list[Path], int, str]:
    """Run ``wandb sync RUN...`` on the folders of one W&B run, stopped (with its children)
    after ``timeout`` seconds.

    Args:
        run: the offline run directories of one W&B run (:func:`by_run_id`).
        extra: further arguments of ``wandb sync``.
        timeout: seconds before it is stopped.
        children: where the running process is registered (so Ctrl-C can stop it).

    Returns ``(run, exit code, last line of its output)``; exit code 127 if ``wandb`` cannot start,
    124 if it ran past ``timeout``.
    """
    children = children or _Children()
    try:
        # its wandb/debug-sync log goes to the run's own wandb/, not the caller's folder
        where = os.path.dirname(os.path.dirname(os.path.abspath(run[0])))
        p = children.start([*wandb_command(), "sync", *extra, *map(os.path.abspath, run)], where)
    except OSError as err:
        return run, 127, f"{type(err).__name__}: {err}"
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        children.kill(p)
        p.communicate()
        return run, 124, f"no answer within {timeout:g} s (stopped; is the W&B server reachable?)"
    finally:
        children.finish(p)
    lines = [line for line in (out or "").splitlines() if line.strip()]
    return run, p.returncode, lines[-1].strip() if lines else ""


def sync_all(
    runs: list[Path],
    *,
    jobs: int = 4,
    extra: list[str] | None = None,
    timeout: float = SYNC_TIMEOUT_S,
    report=print,
) -> int:
    """Sync ``runs``, one ``wandb sync`` per W&B run (:func:`by_run_id`), ``jobs`` at a time,
    one line per run as each starts and ends; Ctrl-C (KeyboardInterrupt) kills every running
    ``wandb sync`` and re-raises.

    Args:
        runs: offline run directories.
        jobs: how many ``wandb sync`` processes run at once.
        extra: further arguments of ``wandb sync``.
        timeout: seconds one upload may take.
        report: called with each line.
    """
    groups = by_run_id(runs)
    children, failed, n = _Children(), 0, len(groups)

    def name(run: list[Path]) -> str:
        more = f" (and {len(run) - 1} earlier attempt(s))" if len(run) > 1 else ""
        return printable(run[-1]) + more

    def one(i_run):
        i, run = i_run
        report(f"[{i + 1}/{n}] syncing {name(run)}")
        return sync_one(run, list(extra or []), timeout, children)

    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        for run, code, last in pool.map(one, enumerate(groups)):
            if code == 0:
                report(f"synced {name(run)}")
            else:
                failed += 1
                report(f"FAILED {name(run)} (exit {code}): {printable(last)}")
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        children.kill()
        raise
    pool.shutdown()
    return failed
