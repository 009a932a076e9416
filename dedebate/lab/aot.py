"""Ahead-of-time compilation on worker threads, at most once per process.

At dedebate's default and quick sizes compilation dominates a run's wall time. :func:`compiled`
lowers and compiles a jitted function for the types of its arguments and caches the executable
(as a future) per ``(function, argument structure, argument types)``, so a resumed or repeated
run in the same process reuses it; given a thread pool it compiles there (XLA compiles without
the GIL) while the caller goes on with other work. Same executables, same numbers, less wall
time. Impure (threads, a process-wide cache, a clock): lab only.
"""

from __future__ import annotations

import concurrent.futures
import threading

from dedebate.lab.experiment import stopwatch

_COMPILED: dict = {}
_COMPILED_LOCK = threading.Lock()


def compiled(fn, *args, pool=None) -> concurrent.futures.Future:
    """``fn`` (jitted) compiled ahead of time for the types of ``args``, at most once per process.

    Compiles on ``pool`` if given, else now in this thread. The future is cached per
    ``(fn, argument structure, argument types)``; a failed compilation is not cached (the next
    call tries again).

    Args:
        fn: a jitted function.
        *args: example arguments (only their structure, shapes and dtypes matter).
        pool: a thread pool to compile on; None = compile now.

    Returns a future of ``(executable, seconds compiling)``.
    """
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    sig = (fn, tree, tuple(str(jax.typeof(x)) for x in leaves))

    def compile_now():
        try:
            with stopwatch("compile") as lap:
                exe = fn.lower(*args).compile()
        except BaseException:
            with _COMPILED_LOCK:
                _COMPILED.pop(sig, None)
            raise
        return exe, lap.seconds

    with _COMPILED_LOCK:
        fut = _COMPILED.get(sig)
        if fut is not None:
            return fut
        if pool is not None:
            fut = _COMPILED[sig] = pool.submit(compile_now)
            return fut
        fut = _COMPILED[sig] = concurrent.futures.Future()
    try:
        fut.set_result(compile_now())
    except BaseException as err:  # noqa: BLE001 - handed to whoever waits on the future
        fut.set_exception(err)
    return fut
