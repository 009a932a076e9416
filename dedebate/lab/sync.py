"""``dedebate sync PATH``: upload every offline W&B run under a run, sweep or reproduce directory.

Runs are offline by default (``<run dir>/wandb/offline-run-*``); a reproduce or sweep directory
holds one per experiment or point. This finds them all and runs ``wandb sync`` on several at once
(W&B's own command syncs one run after another). ``DEDEBATE_WANDB`` names another ``wandb``
executable (the tests use a stand-in).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def find_offline_runs(path: str | os.PathLike) -> list[Path]:
    """Every ``.../wandb/offline-run-*`` directory under ``path``.

    Args:
        path: a run, sweep or reproduce directory.

    Returns:
        The run directories, sorted.
    """
    root = Path(path).expanduser()
    return sorted(p for p in root.rglob("offline-run-*") if p.is_dir() and p.parent.name == "wandb")


def wandb_command() -> list[str]:
    """How to call ``wandb``: ``$DEDEBATE_WANDB``, the one beside this Python, or ``python -m wandb``.

    Returns:
        The command's argv prefix.
    """
    if os.environ.get("DEDEBATE_WANDB"):
        return [os.environ["DEDEBATE_WANDB"]]
    beside = Path(sys.executable).parent / "wandb"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("wandb")
    return [found] if found else [sys.executable, "-m", "wandb"]


def sync_one(run: Path, extra: list[str]) -> tuple[Path, int, str]:
    """Run ``wandb sync RUN``.

    Args:
        run: an offline run directory.
        extra: further arguments of ``wandb sync``.

    Returns:
        ``(run, exit code, last line of its output)``; exit code 127 if ``wandb`` cannot start.
    """
    try:
        p = subprocess.run([*wandb_command(), "sync", *extra, str(run)], capture_output=True,
                           text=True, check=False)
    except OSError as err:
        return run, 127, f"{type(err).__name__}: {err}"
    lines = [line for line in (p.stderr + p.stdout).splitlines() if line.strip()]
    return run, p.returncode, lines[-1].strip() if lines else ""


def sync_all(runs: list[Path], *, jobs: int = 4, extra: list[str] | None = None,
             report=print) -> int:
    """Sync ``runs``, ``jobs`` at a time, reporting one line per run.

    Args:
        runs: offline run directories.
        jobs: how many ``wandb sync`` processes run at once.
        extra: further arguments of ``wandb sync``.
        report: called with each line (``synced RUN`` or ``FAILED RUN (exit N): ...``).

    Returns:
        The number of runs that failed.
    """
    failed = 0
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for run, code, last in pool.map(lambda r: sync_one(r, list(extra or [])), runs):
            if code == 0:
                report(f"synced {run}")
            else:
                failed += 1
                report(f"FAILED {run} (exit {code}): {last}")
    return failed
