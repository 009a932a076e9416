"""dedebate's XLA flags: a CPU work-around applied at import, and programs' options under XLA_FLAGS.

Importing dedebate adds :data:`YNN_FLAG` to ``XLA_FLAGS`` for the jaxlib releases whose CPU "YNN"
reduce fusion miscomputes fused reductions (docs/lab.md, "Fast compilation";
``tests/lab/test_xla_workaround.py``); :func:`capped_options` keeps a program's own LLVM
optimisation level at most the one ``XLA_FLAGS`` asks for.
"""

# jaxlib 0.10.2's CPU "YNN" reduce fusion miscomputes some fused reductions (a matrix product of a
# broadcast constant, summed in a fused reduction, gives wrong values or NaN under ``jit``;
# upstream: jax-ml/jax#39103). The flag is added before JAX starts its backend, unless the user
# set it or opts out with DEDEBATE_KEEP_XLA_FLAGS=1 (or true, yes, on), and only for jaxlib
# releases from the first that needs it to the last known to accept it: XLA aborts on an unknown
# flag, so a newer jaxlib gets none (where accepted, the flag only turns one fusion off). Checked
# (accepted / the test's sum wrong without it): 0.4.35-0.8.0 no (abort); 0.8.2-0.10.1 yes / no;
# 0.10.2 yes / yes; 0.11.2 yes (the H200 run of 2026-12-04 ran with it) / not checked.

import importlib.metadata
import os
import re
from collections.abc import Mapping

YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"
FIRST_JAXLIB_NEEDING_FLAG = (0, 10, 2)
LAST_JAXLIB_NEEDING_FLAG = (0, 11, 2)
"""The jaxlib releases (major, minor, patch) that get :data:`YNN_FLAG`, both ends included: check
that a newer one accepts the flag (the comment above) before raising the last."""


def jaxlib_version() -> tuple[int, ...] | None:
    """The installed jaxlib's version as integers (``(0, 10, 2)``), None if not installed."""
    try:
        text = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0]))


def needs_cpu_workaround(version: tuple[int, ...] | None) -> bool:
    """Whether jaxlib ``version`` (None: not installed) gets :data:`YNN_FLAG`."""
    return version is not None and (
        FIRST_JAXLIB_NEEDING_FLAG <= tuple(version[:3]) <= LAST_JAXLIB_NEEDING_FLAG
    )


KEEP_ENV = "DEDEBATE_KEEP_XLA_FLAGS"
ON_VALUES = frozenset({"1", "true", "yes", "on"})
OFF_VALUES = frozenset({"0", "false", "no", "off"})
"""The words ``$DEDEBATE_KEEP_XLA_FLAGS`` takes (any case), as ``$DEDEBATE_FAST_COMPILE`` does."""


def keep_requested(environ: Mapping[str, str] | None = None) -> bool | None:
    """Whether ``$DEDEBATE_KEEP_XLA_FLAGS`` asks to leave ``XLA_FLAGS`` alone: False when unset,
    empty or off, None for a word it does not take (the command line refuses it, exit 2)."""
    value = (os.environ if environ is None else environ).get(KEEP_ENV, "").strip().lower()
    return None if value and value not in ON_VALUES | OFF_VALUES else value in ON_VALUES


def apply_cpu_workaround(version: tuple[int, ...] | None = None) -> None:
    """Add :data:`YNN_FLAG` to ``XLA_FLAGS`` where jaxlib needs it, unless set or opted out."""
    # At import, so never raises: a value it does not take counts as not opted out (the flag only
    # keeps results right), and dedebate.lab.fast_compile refuses it before a command compiles.
    if keep_requested():
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_experimental_ynn_fusion_type" in flags:
        return
    if not needs_cpu_workaround(version if version is not None else jaxlib_version()):
        return
    os.environ["XLA_FLAGS"] = (flags + " " + YNN_FLAG).strip()


OPT_LEVEL = "xla_backend_optimization_level"
"""LLVM's optimisation level of XLA's CPU backend (XLA's default 3): the option most programs'
compile time depends on."""


def requested_opt_level(environ: dict[str, str] | None = None) -> int | None:
    """The last ``--xla_backend_optimization_level=N`` of ``XLA_FLAGS``, None if none."""
    env = os.environ if environ is None else environ
    found = re.findall(rf"--{OPT_LEVEL}=(\d+)", env.get("XLA_FLAGS", ""))
    return int(found[-1]) if found else None


def capped_options(options: dict, environ: dict[str, str] | None = None) -> dict:
    """A compile-bound program's XLA options, at most the process's optimisation level."""
    # Such a program asks for a level below XLA's default to compile faster at no cost in run
    # time; where XLA_FLAGS asks for a lower one still (the command line's fast compilation of
    # quick runs, docs/lab.md "Fast compilation"), the lower one applies, since options passed to
    # jit override XLA_FLAGS. Read when the program is defined, so set XLA_FLAGS before importing
    # dedebate's modules (the command line does). environ: None = os.environ.
    level = requested_opt_level(environ)
    if level is None or OPT_LEVEL not in options or options[OPT_LEVEL] <= level:
        return options
    return {**options, OPT_LEVEL: level}
