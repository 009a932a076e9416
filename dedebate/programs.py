"""Execution policy: the one home of ``jit``, XLA option sets and compiled-program caches.

Library modules export pure functions and their ``XStatic``/``XParams``; where one needs a
compiled program (a host loop calling a step, a cached program builder), it takes ``jit``,
an option set and ``program_cache`` from here, so how dedebate compiles is decided in this file
(docs/architecture.md, "Who owns jit"). Any layer and the lab may import it; it imports nothing
of dedebate but :mod:`dedebate._xla_flags`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax

from dedebate._xla_flags import OPT_LEVEL, capped_options

FAST_COMPILE = capped_options({OPT_LEVEL: 1})
"""Compile-bound programs (small scans, debates): LLVM level 1 compiles them much faster than
XLA's default 3 and runs them as fast; capped by the process's level (level 0 in quick runs)."""

TRAINING = {OPT_LEVEL: 1}
"""Long training chunks: level 1 whatever the process asks for (level 0 costs them more run time
than it saves compile time; docs/lab.md, "Fast compilation")."""

FASTEST_COMPILE = {OPT_LEVEL: 0}
"""Tiny integer programs compiled once per shape (cross-examination grids on CPU): level 0, the
shortest compile for a slower (still millisecond) run; integer counts never depend on it."""


def cpu_only(options: dict[str, Any]) -> Callable[[str], dict[str, Any] | None]:
    """``options`` on the ``"cpu"`` platform, None elsewhere (options that pay off on CPU only)."""
    return lambda platform: options if platform == "cpu" else None


MATMUL_PRECISION = "highest"
"""Every float32 product of a program is a true float32 product: an accelerator's default may
round its inputs (TF32 on recent NVIDIA GPUs, bfloat16 passes on TPUs), which moves exact payoffs
and the identities the reports check by far more than float32 rounding (docs/architecture.md)."""


def jit(
    fn: Callable | None = None, /, *, options: dict[str, Any] | None = None, **kwargs: Any
) -> Any:
    """``jax.jit(fn, compiler_options=options, **kwargs)``, traced with float32 products at
    :data:`MATMUL_PRECISION`; without ``fn``, a decorator."""
    if fn is None:
        return functools.partial(jit, options=options, **kwargs)
    module_level = inspect.isfunction(fn) and "<" not in fn.__qualname__
    exact = _exact_shared(fn) if module_level else _exact(fn)
    return jax.jit(exact, compiler_options=options or None, **kwargs)


def _exact(fn: Callable) -> Callable:
    """``fn`` traced with its float32 products at :data:`MATMUL_PRECISION`."""

    @functools.wraps(fn)
    def exact(*args: Any, **kw: Any) -> Any:
        with jax.default_matmul_precision(MATMUL_PRECISION):
            return fn(*args, **kw)

    return exact


_exact_shared = functools.cache(_exact)
"""One wrapper per module-level function (they live as long as the process): JAX caches a
program's trace and compilation by the function jitted, so jitting ``f`` twice compiles once."""


program_cache = functools.cache
"""The cache of a compiled-program builder, keyed by its (hashable, static) arguments; also of
what such builders share from tracing alone (``eval_shape`` layouts, vmap axes)."""
