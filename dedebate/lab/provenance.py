"""Provenance: what every result records about the code and machine that computed it.

:func:`environment_provenance` gathers which dedebate code ran (:func:`code_provenance`: its
version, how it was installed, and the git commit only where that commit is the code's), the
versions of the distributions that decide a result (:data:`PACKAGES`), Python, the platform and
host, the command line and the batch scheduler's job id, JAX's backend, devices, x64 flag and
requested platforms, the persistent compile cache, ``XLA_FLAGS`` and the result schema version.
``results.json``, ``report.json``, the W&B config and ``dedebate doctor`` show it. Nothing here
ever stops a run: a piece that cannot be read is recorded as None.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import dedebate

RESULT_SCHEMA_VERSION = 1

SCHEDULER_JOB_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID")
"""The environment variables that name a batch job: Slurm, PBS/Torque, LSF, Grid Engine."""


def _git(where: Path, *args: str) -> subprocess.CompletedProcess | None:
    """``git ARGS`` in ``where``; None without git."""
    try:
        return subprocess.run(
            ["git", *args], cwd=where, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _package_dir() -> Path:
    """The imported ``dedebate`` package's folder."""
    return Path(dedebate.__file__).resolve().parent


def git_commit(path: str | os.PathLike | None = None) -> str | None:
    """``git rev-parse HEAD`` of the repository holding ``path``.

    Args:
        path: a file or folder; None = the dedebate sources.

    Returns the commit hash, or None outside a git checkout or without git.
    """
    out = _git(Path(path) if path else _package_dir(), "rev-parse", "HEAD")
    commit = out.stdout.strip() if out else ""
    return commit if out and out.returncode == 0 and len(commit) >= 40 else None


def git_dirty(path: str | os.PathLike | None = None) -> bool | None:
    """Whether the git checkout holding ``path`` differs from its commit: a tracked file changed,
    or a file that is neither tracked nor ignored.

    Args:
        path: a file or folder; None = the dedebate sources.

    Returns the flag, or None outside a git checkout or when git is missing.
    """
    out = _git(Path(path) if path else _package_dir(), "status", "--porcelain")
    return bool(out.stdout.strip()) if out and out.returncode == 0 else None


def _tracked(package_dir: Path) -> bool:
    """Whether the package's ``__init__.py`` is a tracked file of the git checkout around it."""
    # Whether the package's ``__init__.py`` is a tracked file of the git checkout around it (a wheel
    # in a virtual environment inside some other repository is not).
    out = _git(package_dir, "ls-files", "--error-unmatch", "__init__.py")
    return out is not None and out.returncode == 0


def _file_url_path(url: Any) -> Path | None:
    """The local path of a ``file://`` URL, else None."""
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(parts.path)).resolve()


def _direct_url(
    dist: importlib.metadata.Distribution | None, package_dir: Path
) -> dict[str, Any] | None:
    """PEP 610 ``direct_url.json`` of ``dist`` ({} from an index); None if it is not what runs."""
    # PEP 610 ``direct_url.json`` of ``dist`` ({} for an install from an index or a plain wheel), or
    # None when ``dist`` is not what runs (not installed; or it is shadowed, e.g. by a checkout on
    # ``PYTHONPATH``).
    if dist is None:
        return None
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except (OSError, ValueError):
        direct = {}
    if not isinstance(direct, dict):
        direct = {}
    if (direct.get("dir_info") or {}).get("editable"):
        root = _file_url_path(direct.get("url"))
        return direct if root is not None and package_dir.is_relative_to(root) else None
    init = Path(str(dist.locate_file("dedebate/__init__.py"))).resolve()
    return direct if init == package_dir / "__init__.py" else None


def _dedebate_distribution() -> importlib.metadata.Distribution | None:
    """The first ``dedebate`` distribution on the path, if any."""
    try:
        return importlib.metadata.distribution("dedebate")
    except importlib.metadata.PackageNotFoundError:
        return None


def code_provenance(
    package_dir: str | os.PathLike | None = None,
    dist: importlib.metadata.Distribution | None = None,
) -> dict[str, Any]:
    """Which dedebate code runs: ``git_commit``, ``git_dirty`` and ``install``.

    The commit and dirty flag are a checkout's only when the package's own files are tracked in
    it (a source tree, or ``pip install -e``), never those of a repository that merely holds the
    virtual environment. Otherwise the version names the code, and ``install`` comes from the
    distribution's PEP 610 ``direct_url.json``: ``vcs`` (with the commit pip installed),
    ``directory``, ``archive`` or ``package`` (from an index, or a plain wheel).

    Args:
        package_dir: the imported ``dedebate`` package's folder; None = this one.
        dist: its distribution; None = the installed ``dedebate`` one, if any.

    Returns ``{"git_commit", "git_dirty", "install": {"kind", "url"}}``.
    """
    here = Path(package_dir).resolve() if package_dir else _package_dir()
    direct = _direct_url(dist if dist is not None else _dedebate_distribution(), here)
    info = direct or {}
    vcs = info.get("vcs_info") or {}
    if direct is None:
        kind = "source tree"  # not an installed distribution's files
    elif (info.get("dir_info") or {}).get("editable"):
        kind = "editable"
    else:
        kind = (
            "vcs"
            if vcs
            else "archive"
            if "archive_info" in info
            else "directory"
            if "dir_info" in info
            else "package"
        )
    if _tracked(here):  # a checkout's own files (an egg-info beside them is no install)
        return {
            "git_commit": git_commit(here),
            "git_dirty": git_dirty(here),
            "install": {
                "kind": "editable" if kind == "editable" else "source tree",
                "url": info.get("url"),
            },
        }
    return {
        "git_commit": vcs.get("commit_id") if vcs.get("vcs") == "git" else None,
        "git_dirty": None,
        "install": {"kind": kind, "url": info.get("url")},
    }


# The distributions whose versions decide a result (numbers, compiled programs, checkpoints).
PACKAGES = (
    "jax",
    "jaxlib",
    "ml_dtypes",
    "flax",
    "optax",
    "chex",
    "orbax-checkpoint",
    "wandb",
    "numpy",
    "scipy",
    "matplotlib",
    "PyYAML",
)
# JAX's accelerator plugins (CUDA, ROCm, TPU): named where installed
PLUGIN_PREFIXES = ("jax-cuda", "jax_cuda", "jax-rocm", "jax_rocm", "libtpu")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution, then of every JAX accelerator plugin installed.

    Returns ``{name: version}``, None for one of ``names`` that is not installed.
    """
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith(PLUGIN_PREFIXES) and name not in out:
            out[name] = dist.version
    return dict(sorted(out.items(), key=lambda kv: kv[0] not in names))


def process_provenance() -> dict[str, Any]:
    """The command line, host and batch job of this process.

    Returns ``{"argv", "host", "scheduler_job_ids"}``; the last maps each of
    :data:`SCHEDULER_JOB_VARS` that is set to its value.
    """
    return {
        "argv": list(sys.argv),
        "host": platform.node(),
        "scheduler_job_ids": {k: os.environ[k] for k in SCHEDULER_JOB_VARS if os.environ.get(k)},
    }


def warn_if_other_version(run_dir: Path, prov: dict[str, Any]) -> None:
    """One stderr line where a reused result was computed by another dedebate version."""
    from dedebate.lab.report_render import one_line  # the record is someone else's text

    if (old := prov.get("dedebate_version")) != dedebate.__version__:
        print(
            f"dedebate: warning: {run_dir}: computed by dedebate {one_line(old)[:40]}, this is "
            f"{dedebate.__version__}; its stored results are kept (a new run recomputes them)",
            file=sys.stderr,
        )


def environment_provenance() -> dict[str, Any]:
    """Versions and devices: what every result records besides its config hash and seed."""
    prov: dict[str, Any] = {
        "dedebate_version": dedebate.__version__,
        **code_provenance(),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "result_schema_version": RESULT_SCHEMA_VERSION,
        **process_provenance(),
    }
    # XLA's flags can change float rounding (dedebate/lab/fast_compile.py)
    prov.update(packages=package_versions(), xla_flags=os.environ.get("XLA_FLAGS", ""))
    try:
        import jax

        prov.update(
            jax_version=jax.__version__,
            backend=jax.default_backend(),
            device_count=jax.device_count(),
            devices=sorted({d.device_kind for d in jax.devices()}),
            x64=bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]
            jax_platforms=jax.config.jax_platforms or None,  # type: ignore[attr-defined]
        )
    except Exception as err:  # noqa: BLE001 - provenance must never stop a run
        prov.update(
            jax_version=None,
            backend=None,
            device_count=None,
            x64=None,
            jax_platforms=os.environ.get("JAX_PLATFORMS") or None,
            jax_error=f"{type(err).__name__}: {err}",
        )
    with contextlib.suppress(Exception):  # the persistent compilation cache (lab/compile_cache)
        from dedebate.lab.compile_cache import provenance as compile_cache_provenance

        prov["compile_cache"] = compile_cache_provenance()
    return prov
