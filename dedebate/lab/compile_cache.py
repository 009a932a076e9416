"""The persistent JAX compilation cache that the command line turns on.

JAX keeps each compiled executable on disk (``jax_compilation_cache_dir``) and loads it in a later
process instead of compiling again. An entry's key hashes the lowered program, compile options,
devices, ``XLA_FLAGS`` and the jax/jaxlib versions, so a hit loads the executable the same
compilation would have produced: results are bit-identical with the cache cold or warm. Where:
``$DEDEBATE_COMPILE_CACHE`` if set, else ``$XDG_CACHE_HOME/dedebate/jax`` (default
``~/.cache/dedebate/jax``); ``off`` (or ``0``, ``false``, ``no``, ``none``, ``disabled``, empty)
turns it off. An unusable directory turns it off with one warning; it never fails a run. A cache
the user set up through JAX (``JAX_COMPILATION_CACHE_DIR``) is left alone. Only the command line
calls :func:`enable` (docs/lab.md, "The compile cache").
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV = "DEDEBATE_COMPILE_CACHE"
OFF_VALUES = frozenset({"", "off", "0", "false", "no", "none", "disabled"})
# Write every program, however fast it compiled (JAX's default skips those under 1 s): dedebate's
# quick programs are many and small, and loading them beats compiling them again.
MIN_COMPILE_SECS = 0.0

_state: dict[str, Any] = {"enabled": False, "dir": None, "source": "not requested"}


def default_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The default cache directory.

    Returns ``$XDG_CACHE_HOME/dedebate/jax``, or ``~/.cache/dedebate/jax`` when XDG_CACHE_HOME is
    unset or empty.
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "dedebate" / "jax"


def requested_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The directory ``$DEDEBATE_COMPILE_CACHE`` asks for (:func:`default_dir` when it is unset)."""
    env = os.environ if environ is None else environ
    if ENV not in env:
        return default_dir(env)
    value = env[ENV].strip()
    if value.lower() in OFF_VALUES:
        return None
    return Path(value).expanduser()


def _writable_dir(path: Path) -> str | None:
    """Create ``path`` and check a file can be written there; the reason it cannot, or None."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as err:
        return f"{type(err).__name__}: {err}"
    return None


def enable(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Turn JAX's persistent compilation cache on as the environment asks.

    Call it once, early: programs compiled before the call are not written, and JAX opens the
    directory at the first compilation after it (a later change of directory does not take effect
    in this process). Never raises for a bad directory: it warns once on stderr and leaves the
    cache off. A cache configured through JAX itself is left as it is.

    Returns ``{"enabled", "dir", "source"}`` (also remembered for :func:`provenance`).
    """
    import jax

    env = os.environ if environ is None else environ
    if ENV not in env and jax.config.jax_compilation_cache_dir:  # type: ignore[attr-defined]
        _state.update(
            enabled=bool(jax.config.jax_enable_compilation_cache),  # type: ignore[attr-defined]
            dir=str(jax.config.jax_compilation_cache_dir),  # type: ignore[attr-defined]
            source="JAX configuration (JAX_COMPILATION_CACHE_DIR)",
        )
        return dict(_state)
    path = requested_dir(env)
    if path is None:
        _state.update(enabled=False, dir=None, source=f"{ENV}={env.get(ENV, '')!r}")
        return dict(_state)
    path = path.resolve()
    problem = _writable_dir(path)
    if problem is not None:
        print(
            f"dedebate: warning: compilation cache off: cannot use {path} ({problem}); set "
            f"{ENV} to a writable directory, or to 'off'",
            file=sys.stderr,
            flush=True,
        )
        _state.update(enabled=False, dir=None, source=f"unusable directory {path}")
        return dict(_state)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS)
    _state.update(
        enabled=bool(jax.config.jax_enable_compilation_cache),  # type: ignore[attr-defined]
        dir=str(path),
        source=ENV if ENV in env else "default",
    )
    return dict(_state)


def provenance() -> dict[str, Any]:
    """What a run records about the persistent cache in this process.

    Read from JAX's configuration, so a cache set up by other means shows too.

    Returns ``{"enabled", "dir", "source"}``: whether it is on, where, and who turned it on.
    """
    import jax

    where = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]
    on = bool(where) and bool(jax.config.jax_enable_compilation_cache)  # type: ignore[attr-defined]
    source = _state["source"] if _state["dir"] == where else "JAX configuration"
    return {
        "enabled": on,
        "dir": str(where) if on else None,
        "source": source if on or not where else "disabled in JAX configuration",
    }
