"""What a run will use, before it starts: backend, devices, memory, x64, caches, versions.

``dedebate doctor`` prints this; every ``results.json`` records the same versions and git state
in its provenance (``dedebate.lab.provenance.package_versions`` and ``code_provenance``).
"""

from __future__ import annotations

import os
from typing import Any

import dedebate
from dedebate.lab.provenance import code_provenance, package_versions


def _gib(n: Any) -> str:
    return f"{n / 2**30:.1f} GiB" if isinstance(n, (int, float)) else "unknown"


def device_report() -> dict[str, Any]:
    """Backend, devices (kind, memory where the backend reports it) and the x64 flag.

    Returns a JSON-able dict: ``backend``, ``process_count``, ``device_count``, ``devices``,
    ``x64``.
    """
    import jax

    devices = []
    for d in jax.devices():
        entry: dict[str, Any] = {"id": d.id, "kind": d.device_kind, "platform": d.platform}
        try:
            stats = d.memory_stats() or {}
        except Exception:  # noqa: BLE001 - CPU devices report no memory statistics
            stats = {}
        if "bytes_limit" in stats:
            entry["memory_bytes"] = int(stats["bytes_limit"])
        devices.append(entry)
    return {
        "backend": jax.default_backend(),
        "process_count": jax.process_count(),
        "device_count": jax.device_count(),
        "devices": devices,
        "x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]
    }


def report() -> dict[str, Any]:
    """Everything ``dedebate doctor`` prints.

    Returns a JSON-able dict: version, git state, :func:`device_report`, the memory a run may use
    (``memory_limit_auto_bytes``), compile cache, packages, ``XLA_FLAGS``.
    """
    from dedebate.lab.compile_cache import provenance as compile_cache_provenance
    from dedebate.lab.compile_cache import requested_dir

    cache = compile_cache_provenance()
    if not cache.get("enabled"):
        where = requested_dir()
        cache = {**cache, "cli_dir": str(where) if where else None}
    from dedebate.lab.memory import available_bytes

    return {
        "dedebate": dedebate.__version__,
        **code_provenance(),
        **device_report(),
        "memory_limit_auto_bytes": available_bytes(),  # what memory_limit=auto allows a run
        "compile_cache": cache,
        "packages": package_versions(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def render(info: dict[str, Any]) -> str:
    """The human-readable form of :func:`report`."""
    lines = [
        f"dedebate {info['dedebate']}  (git {info['git_commit'] or 'unknown'}"
        + (", uncommitted changes" if info["git_dirty"] else "")
        + ")",
        f"backend: {info['backend']}   processes: {info['process_count']}   "
        f"devices: {info['device_count']}   x64: {info['x64']}",
    ]
    for d in info["devices"]:
        mem = f", memory {_gib(d['memory_bytes'])}" if "memory_bytes" in d else ""
        lines.append(f"  device {d['id']}: {d['kind']} ({d['platform']}{mem})")
    if info["backend"] == "cpu":
        lines.append(
            "  no accelerator visible: --full sizes are meant for a GPU (README: Running on a GPU)"
        )
    auto = info.get("memory_limit_auto_bytes")
    where = "one device's" if info["backend"] != "cpu" else "the host's available"
    lines.append(f"memory for a run (memory_limit=auto: {where}): {_gib(auto)}")
    cache = info["compile_cache"]
    where = cache.get("dir") or cache.get("cli_dir")
    lines.append(f"compile cache (dedebate run/sweep/reproduce/bench): {where or 'off'}")
    lines.append(
        f"XLA_FLAGS: {info.get('xla_flags') or '(none)'}  (reproduce --quick on a CPU "
        "adds the fast-compile flags, docs/lab.md)"
    )
    lines.append("packages: " + ", ".join(f"{k} {v or '-'}" for k, v in info["packages"].items()))
    return "\n".join(lines)
