"""A benchmark's measurement in a fresh Python process (e.g. with a different number of JAX
devices, which is fixed when JAX starts): ``python -m <module> <args>``, whose last line of
output is the JSON result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_worker(module: str, args: list[str], env: dict[str, str], timeout: float = 1800) -> dict:
    """Run ``python -m module *args`` with ``env`` and return the JSON of its last output line.

    The benchmark package's parent folder goes first on ``PYTHONPATH``, so the worker imports
    the same package (``bench`` in a checkout, ``dedebate_bench`` installed) from any folder.

    Args:
        module: the worker's module name (the benchmark's ``__spec__.name``).
        args: its command-line arguments.
        env: its environment.
        timeout: seconds before it is stopped.

    Returns:
        The parsed JSON result.

    Raises:
        RuntimeError: the worker exited with an error (the end of its stderr is in the message).
    """
    env = dict(env)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    p = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if p.returncode != 0:
        raise RuntimeError(f"benchmark worker {module} {' '.join(args)} failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])
