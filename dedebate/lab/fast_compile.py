"""XLA options that trade run speed for compile speed, for the compile-bound quick runs on a CPU.

At ``--quick`` sizes nearly all of a reproduce's time is XLA compiling (docs/lab.md, "Fast
compilation"). There, on an installation where JAX can only use the CPU, the command line
compiles every program with :data:`FLAGS`: LLVM's backend optimisation level 0 (XLA's default is
3) and XLA:CPU's older fusion emitters, except where a program sets its own options. Debate counts
stay bit-identical; float training may round differently. ``DEDEBATE_FAST_COMPILE=1`` asks for
them in any compiling command (on any platform), ``=0`` never. They go into ``XLA_FLAGS`` before
JAX starts, so worker processes inherit them; a flag already in ``XLA_FLAGS`` keeps its value;
``DEDEBATE_KEEP_XLA_FLAGS=1`` (or true, yes, on) leaves it alone; another word is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

ENV = "DEDEBATE_FAST_COMPILE"
FLAGS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
"""The XLA options, as ``Lowered.compile`` takes them; ``XLA_FLAGS`` gets ``--name=value`` with the
value in lower case."""
ON_VALUES = frozenset({"1", "true", "yes", "on"})
OFF_VALUES = frozenset({"0", "false", "no", "off"})
KEEP_ENV = "DEDEBATE_KEEP_XLA_FLAGS"
"""Leaves ``XLA_FLAGS`` as the user set it; the same words, read at import by
``dedebate._xla_flags.keep_requested`` (which the lab may not import)."""


def requested(environ: MutableMapping[str, str] | None = None) -> bool | None:
    """What ``$DEDEBATE_FAST_COMPILE`` asks for.

    Returns True (on), False (off) or None (unset or empty: the default applies).

    Raises:
        ValueError: any other value, named with what is allowed.
    """
    env = os.environ if environ is None else environ
    value = env.get(ENV, "").strip().lower()
    if not value:
        return None
    if value in ON_VALUES | OFF_VALUES:
        return value in ON_VALUES
    raise ValueError(
        f"{ENV}={env[ENV]!r}: must be 1 (on) or 0 (off), or unset (on for "
        "`reproduce --quick` where JAX has only its CPU)"
    )


def keep_flags(environ: MutableMapping[str, str] | None = None) -> bool:
    """Whether ``$DEDEBATE_KEEP_XLA_FLAGS`` asks to leave ``XLA_FLAGS`` alone (False when unset or
    empty).

    Raises:
        ValueError: a value other than those of ``$DEDEBATE_FAST_COMPILE``, named with them.
    """
    env = os.environ if environ is None else environ
    value = env.get(KEEP_ENV, "").strip().lower()
    if not value or value in ON_VALUES | OFF_VALUES:
        return value in ON_VALUES
    raise ValueError(
        f"{KEEP_ENV}={env[KEEP_ENV]!r}: must be 1 (leave XLA_FLAGS as it is) or 0 (dedebate "
        "adds its flags), or unset (0); true/yes/on and false/no/off work too"
    )


def wanted(
    size: str | None, cpu_only: bool, environ: MutableMapping[str, str] | None = None
) -> bool:
    """Whether a compiling command compiles for speed of compilation.

    Args:
        size: ``"quick"`` for ``reproduce --quick``; anything else for other runs.
        cpu_only: JAX can only use the CPU (``lab.parallel.accelerator_plugins_installed`` is
            False).
        environ: the environment; None = ``os.environ``.

    Returns ``$DEDEBATE_FAST_COMPILE`` if set, else ``size == "quick" and cpu_only``.

    Raises:
        ValueError: ``$DEDEBATE_FAST_COMPILE`` or ``$DEDEBATE_KEEP_XLA_FLAGS`` (checked here, as
            every compiling command calls this before JAX starts) has a value other than those
            allowed.
    """
    keep_flags(environ)
    asked = requested(environ)
    return asked if asked is not None else (size == "quick" and cpu_only)


def apply(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Add :data:`FLAGS` to ``XLA_FLAGS``, each unless ``XLA_FLAGS`` already names it; nothing
    with ``DEDEBATE_KEEP_XLA_FLAGS=1`` (:func:`keep_flags`). Call it before JAX starts a backend.

    Args:
        environ: the environment to change; None = ``os.environ``.

    Returns the flags added, as written into ``XLA_FLAGS``.

    Raises:
        ValueError: ``$DEDEBATE_KEEP_XLA_FLAGS`` has a value other than those allowed.
    """
    env = os.environ if environ is None else environ
    if keep_flags(env):
        return []
    return add_flags(FLAGS, env)


def add_flags(
    options: Mapping[str, Any], environ: MutableMapping[str, str] | None = None
) -> list[str]:
    """Append ``--name=value`` (the value in lower case) to ``XLA_FLAGS`` for each option whose
    name ``XLA_FLAGS`` does not already mention (the tests' options use it too).

    Args:
        options: XLA option names and values.
        environ: the environment to change; None = ``os.environ``.
    """
    env = os.environ if environ is None else environ
    flags = env.get("XLA_FLAGS", "")
    added = [
        f"--{name}={str(value).lower()}" for name, value in options.items() if name not in flags
    ]
    if added:
        env["XLA_FLAGS"] = " ".join([flags, *added]).strip()
    return added
