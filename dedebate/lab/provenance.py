"""Provenance: what every result records about the code and machine that computed it.

:func:`environment_provenance` gathers the dedebate version and git commit (and whether the
checkout has uncommitted changes), the versions of the distributions that decide a result
(:data:`PACKAGES`), Python and the platform, JAX's backend and devices, the persistent compile
cache, ``XLA_FLAGS`` and the result schema version. ``results.json``, ``report.json`` and
``dedebate doctor`` show it. Nothing here ever stops a run: a piece that cannot be read is
recorded as None.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import dedebate

RESULT_SCHEMA_VERSION = 1


def git_commit(path: str | os.PathLike | None = None) -> str | None:
    """``git rev-parse HEAD`` of the repository holding ``path``.

    Args:
        path: a file or folder; None = the dedebate sources.

    Returns:
        The commit hash, or None outside a git checkout or without git.
    """
    where = Path(path) if path else Path(dedebate.__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) >= 40 else None


# The distributions whose versions decide a result (numbers, compiled programs, checkpoints).
PACKAGES = ("jax", "jaxlib", "flax", "optax", "chex", "orbax-checkpoint", "wandb", "numpy",
            "scipy", "matplotlib", "PyYAML")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution.

    Args:
        names: distribution names.

    Returns:
        ``{name: version}``, None for one that is not installed.
    """
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_dirty(path: str | os.PathLike | None = None) -> bool | None:
    """Whether the git checkout holding ``path`` has uncommitted changes to tracked files.

    Args:
        path: a file or folder; None = the dedebate sources.

    Returns:
        The flag, or None outside a git checkout or when git is missing.
    """
    where = Path(path) if path else Path(dedebate.__file__).resolve().parent
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def environment_provenance() -> dict[str, Any]:
    """Versions and devices: what every result records besides its config hash and seed.

    Returns:
        A JSON-able dict.
    """
    prov: dict[str, Any] = {
        "dedebate_version": dedebate.__version__,
        "git_commit": git_commit(),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "result_schema_version": RESULT_SCHEMA_VERSION,
    }
    # XLA's flags can change float rounding (dedebate/lab/fast_compile.py)
    prov.update(git_dirty=git_dirty(), packages=package_versions(),
                xla_flags=os.environ.get("XLA_FLAGS", ""))
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
