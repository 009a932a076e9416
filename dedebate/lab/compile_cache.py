"""The persistent JAX compilation cache that the command line turns on.

At ``--quick`` sizes on a CPU most of a run's wall time is XLA compiling dedebate's programs. JAX
can keep each compiled executable on disk (``jax_compilation_cache_dir``) and load it in a later
process instead of compiling again. The key of an entry hashes the lowered program, the compile
options, the devices, ``XLA_FLAGS`` (so dedebate's CPU work-around flag is part of it) and the
jax/jaxlib versions, so a hit loads the executable the same compilation would have produced:
results are bit-identical with the cache cold or warm (tests/test_lab_compile_cache.py checks
this on a real experiment). Cache read/write errors are warnings in JAX (the program is then
compiled as usual), and in a multi-process job only process 0 writes.

Where: ``$DEDEBATE_COMPILE_CACHE`` if set, else ``$XDG_CACHE_HOME/dedebate/jax`` (default
``~/.cache/dedebate/jax``). ``DEDEBATE_COMPILE_CACHE=off`` (or ``0``, ``false``, ``no``,
``none``, ``disabled``, or empty) turns it off. A directory that cannot be created or written
turns it off with one warning on stderr; it never fails a run. If the user already configured
JAX's own cache (``JAX_COMPILATION_CACHE_DIR``) and ``DEDEBATE_COMPILE_CACHE`` is unset, that
setting is left alone.

Only the impure shell calls this (``dedebate/cli.py``); the pure core never touches it.
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
# Write every program, however fast it compiled (JAX's default skips those under 1 s). dedebate's
# quick programs are many and small: on a 2-core CPU, reproduce --quick --only machines
# prover_estimator ran warm in 12.8 s with 0 (50 entries, 0.9 MB), 14.9 s with 0.1 and 20.7 s
# with 1.0 (cold: 31-44 s, noisy).
MIN_COMPILE_SECS = 0.0

_state: dict[str, Any] = {"enabled": False, "dir": None, "source": "not requested"}


def default_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/dedebate/jax``, or ``~/.cache/dedebate/jax`` when XDG_CACHE_HOME is unset
    or empty."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "dedebate" / "jax"


def requested_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The directory ``$DEDEBATE_COMPILE_CACHE`` asks for (None when it says off)."""
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
    """Turn JAX's persistent compilation cache on as the environment asks (see the module doc).

    Call it once, early: programs compiled before the call are not written, and JAX opens the
    directory at the first compilation after it (a later change of directory does not take effect
    in this process). Returns (and remembers, for ``provenance()``) ``{"enabled", "dir",
    "source"}``. Never raises for a bad directory: it warns once on stderr and leaves the cache
    off. No size cap: JAX's LRU eviction (``jax_compilation_cache_max_size``) needs the
    ``filelock`` package, which dedebate does not depend on; the quick sizes write a few MB.
    """
    import jax

    env = os.environ if environ is None else environ
    if ENV not in env and jax.config.jax_compilation_cache_dir:
        _state.update(enabled=bool(jax.config.jax_enable_compilation_cache),
                      dir=str(jax.config.jax_compilation_cache_dir),
                      source="JAX configuration (JAX_COMPILATION_CACHE_DIR)")
        return dict(_state)
    path = requested_dir(env)
    if path is None:
        _state.update(enabled=False, dir=None, source=f"{ENV}={env.get(ENV, '')!r}")
        return dict(_state)
    path = path.resolve()
    problem = _writable_dir(path)
    if problem is not None:
        print(f"dedebate: warning: compilation cache off: cannot use {path} ({problem}); set "
              f"{ENV} to a writable directory, or to 'off'", file=sys.stderr, flush=True)
        _state.update(enabled=False, dir=None, source=f"unusable directory {path}")
        return dict(_state)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS)
    _state.update(enabled=bool(jax.config.jax_enable_compilation_cache), dir=str(path),
                  source=ENV if ENV in env else "default")
    return dict(_state)


def provenance() -> dict[str, Any]:
    """What a run records: whether JAX's persistent cache is on in this process, where, and who
    turned it on (read from JAX's configuration, so a cache set up by other means shows too)."""
    import jax

    where = jax.config.jax_compilation_cache_dir
    on = bool(where) and bool(jax.config.jax_enable_compilation_cache)
    source = _state["source"] if _state["dir"] == where else "JAX configuration"
    return {"enabled": on, "dir": str(where) if on else None,
            "source": source if on or not where else "disabled in JAX configuration"}
