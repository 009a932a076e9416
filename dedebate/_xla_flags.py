"""XLA CPU work-around applied when dedebate is imported (before JAX starts its backend).

jaxlib 0.10.2's CPU "YNN" reduce fusion miscomputes some fused reductions: a matrix product whose
operand is a broadcast constant, summed inside a fused reduction, returns wrong values or NaN under
``jit`` while the same expression is right eagerly (related upstream report: jax-ml/jax#39103;
reproduced in ``tests/test_xla_workaround.py``). Correctness comes first, so dedebate turns that
fusion off with ``--xla_cpu_experimental_ynn_fusion_type=-reduce`` unless the user already set the
flag in ``XLA_FLAGS`` or opts out with ``DEDEBATE_KEEP_XLA_FLAGS=1``. The flag only affects the CPU
backend, and only takes effect if no JAX computation ran before ``import dedebate``.

Only jaxlib 0.8.1 and later know the flag; older ones abort at their first computation on an
unknown flag in ``XLA_FLAGS`` (checked: 0.4.35, 0.5.3, 0.7.2 and 0.8.0 abort; 0.8.1 to 0.10.2
accept it), so it is added for those versions only. The same test computes correctly without the
flag on 0.8.2, 0.8.3 and 0.9.2 and wrongly on 0.10.2.
"""

import importlib.metadata
import os
import re

YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"
FIRST_JAXLIB_WITH_FLAG = (0, 8, 1)


def jaxlib_version() -> tuple[int, ...] | None:
    """The installed jaxlib's version as integers (``"0.10.2"`` -> ``(0, 10, 2)``), read from
    the package metadata without importing it; None if jaxlib is not installed.

    Returns:
        tuple of ints, or None.
    """
    try:
        text = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0]))


def apply_cpu_workaround(version: tuple[int, ...] | None = None) -> None:
    """Add :data:`YNN_FLAG` to ``XLA_FLAGS`` unless the user set that flag or opted out, or
    jaxlib is older than :data:`FIRST_JAXLIB_WITH_FLAG` (or missing).

    Reads ``DEDEBATE_KEEP_XLA_FLAGS``, ``XLA_FLAGS`` and jaxlib's version and may set
    ``XLA_FLAGS``; nothing else.

    Args:
        version: jaxlib's version; None reads it (:func:`jaxlib_version`).
    """
    if os.environ.get("DEDEBATE_KEEP_XLA_FLAGS") == "1":
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_experimental_ynn_fusion_type" in flags:
        return
    version = version if version is not None else jaxlib_version()
    if version is None or version < FIRST_JAXLIB_WITH_FLAG:
        return
    os.environ["XLA_FLAGS"] = (flags + " " + YNN_FLAG).strip()
