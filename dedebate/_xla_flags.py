"""XLA CPU work-around applied when dedebate is imported (before JAX starts its backend).

jaxlib 0.10.2's CPU "YNN" reduce fusion miscomputes some fused reductions: a matrix product whose
operand is a broadcast constant, summed inside a fused reduction, returns wrong values or NaN under
``jit`` while the same expression is right eagerly (related upstream report: jax-ml/jax#39103;
reproduced in ``tests/test_xla_workaround.py``). Correctness comes first, so dedebate turns that
fusion off with ``--xla_cpu_experimental_ynn_fusion_type=-reduce`` unless the user already set the
flag in ``XLA_FLAGS`` or opts out with ``DEDEBATE_KEEP_XLA_FLAGS=1``. The flag only affects the CPU
backend, and only takes effect if no JAX computation ran before ``import dedebate``.
"""

import os

YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"


def apply_cpu_workaround() -> None:
    """Add :data:`YNN_FLAG` to ``XLA_FLAGS`` unless the user set that flag or opted out.

    Reads ``DEDEBATE_KEEP_XLA_FLAGS`` and ``XLA_FLAGS`` and may set ``XLA_FLAGS``; nothing else.
    """
    if os.environ.get("DEDEBATE_KEEP_XLA_FLAGS") == "1":
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_experimental_ynn_fusion_type" in flags:
        return
    os.environ["XLA_FLAGS"] = (flags + " " + YNN_FLAG).strip()
