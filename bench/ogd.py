"""Benchmark: Algorithm 1 (tabular OGD, spec PED 5.3) in dedebate vs a numpy reference.

Problem: |X| = 10^5 contexts, |Z| = 16 outcomes, 64 random prediction-dependent tanh
tests, delta = 0.02, uniform mu and a point-mass truth g. Both implementations start from the same
uniform h_1 with the same tests and take the same fixed number of updates (the problem is chosen so
that Algorithm 1 has not exited by then; the run checks it), then must agree on the chosen tests and
on the final h. Reported: steps per second of each (dedebate timed after compilation), the ratio,
and the agreement. dedebate's ahead-of-time compilation is timed on its own and followed by one
untimed warm-up run. Wall-clock rates are the headline; the process-CPU-time ratio is reported
beside them because a shared machine makes wall time noisy (both figures count all threads).

``run(full=False)`` times ``STEPS["default"]`` updates; ``run(full=True)`` times
``STEPS["full"]``. The CLI ``dedebate bench ogd`` prints the returned dict as JSON.
"""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.estimators.advantage import random_oi_problem
from dedebate.estimators.families import random_tanh_family
from dedebate.estimators.ogd import OGDStatic, ogd_init, ogd_run_steps

from .ogd_numpy import NumpyTanhOGD

N_X, N_Z, N_TESTS, DELTA = 100_000, 16, 64, 0.02
N_FEATURES, TEST_SCALE, SEED = 8, 4.0, 0
STEPS = {"default": 30, "full": 150}  # Algorithm 1 needs 154 updates on this problem
GOAL_RATIO = 5.0


def build(n_x: int = N_X, n_z: int = N_Z, n_tests: int = N_TESTS, seed: int = SEED):
    """The benchmark problem and test family (deterministic in ``seed``)."""
    key = jax.random.key(seed)
    problem, features = random_oi_problem(jax.random.fold_in(key, 0), n_x, n_z,
                                          n_features=N_FEATURES, truth="point")
    family = random_tanh_family(jax.random.fold_in(key, 1), features, n_z, n_tests,
                                scale=TEST_SCALE)
    return problem, family


def run(full: bool = False, n_x: int = N_X, steps: int | None = None) -> dict:
    """Time both implementations for the same number of updates; return figures as a dict."""
    n_steps = int(steps if steps is not None else STEPS["full" if full else "default"])
    problem, family = build(n_x=n_x)
    static = OGDStatic(trace_len=n_steps + 1)

    delta = jnp.float32(DELTA)

    # Ahead-of-time compilation (timed on its own), then one untimed warm-up run.
    t0 = time.perf_counter()
    init = jax.jit(ogd_init, static_argnums=0).lower(static, family, problem).compile()
    state_shape = jax.eval_shape(lambda f, p: ogd_init(static, f, p), family, problem)
    solve = (jax.jit(ogd_run_steps, static_argnums=(0, 5))
             .lower(static, family, problem, state_shape, delta, n_steps).compile())
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(solve(family, problem, init(family, problem), delta))

    t0, c0 = time.perf_counter(), time.process_time()
    state0 = jax.block_until_ready(init(family, problem))
    state = jax.block_until_ready(solve(family, problem, state0, delta))
    jax_s, jax_cpu = time.perf_counter() - t0, time.process_time() - c0

    ref = NumpyTanhOGD(np.asarray(family.features), np.asarray(family.weights),
                       np.asarray(problem.mu), np.asarray(problem.g))
    t0, c0 = time.perf_counter(), time.process_time()
    h_np, steps_np, chosen_np, trace_np = ref.run(n_steps, DELTA)
    numpy_s, numpy_cpu = time.perf_counter() - t0, time.process_time() - c0

    steps_jax = int(state.steps)
    chosen_jax = np.asarray(state.chosen[:steps_jax])
    h_jax = np.asarray(state.h)
    same_tests = steps_np == steps_jax and bool(np.array_equal(chosen_np, chosen_jax))
    max_h_diff = float(np.max(np.abs(h_np - h_jax)))
    if steps_jax != n_steps or steps_np != n_steps:
        raise RuntimeError(
            f"Algorithm 1 exited early (dedebate {steps_jax}, numpy {steps_np} of {n_steps} "
            "steps): the benchmark problem must keep max|Adv| >= delta for the timed steps"
        )
    if not same_tests:
        first = int(np.argmax(chosen_np[: len(chosen_jax)] != chosen_jax[: len(chosen_np)]))
        raise AssertionError(f"dedebate and numpy chose different tests from update {first + 1}")
    if not np.allclose(h_np, h_jax, atol=1e-4):
        raise AssertionError(f"final h differs: max |h_numpy - h_dedebate| = {max_h_diff:.3g}")

    jax_rate = n_steps / jax_s
    numpy_rate = n_steps / numpy_s
    return {
        "benchmark": "ogd",
        "problem": {"n_x": n_x, "n_z": N_Z, "n_tests": N_TESTS, "delta": DELTA,
                    "test_scale": TEST_SCALE, "truth": "point", "seed": SEED},
        "steps": n_steps,
        "dedebate_steps_per_s": jax_rate,
        "numpy_steps_per_s": numpy_rate,
        "ratio": jax_rate / numpy_rate,
        "goal_ratio": GOAL_RATIO,
        "meets_goal": jax_rate / numpy_rate >= GOAL_RATIO,
        "dedebate_compile_s": compile_s,
        "dedebate_s": jax_s,
        "numpy_s": numpy_s,
        "dedebate_cpu_s": jax_cpu,
        "numpy_cpu_s": numpy_cpu,
        "dedebate_cpu_ms_per_step": 1e3 * jax_cpu / n_steps,
        "numpy_cpu_ms_per_step": 1e3 * numpy_cpu / n_steps,
        "ratio_cpu_time": numpy_cpu / jax_cpu,
        "cpu_count": os.cpu_count(),
        "max_abs_h_diff": max_h_diff,
        "same_test_sequence": same_tests,
        "max_abs_adv_final": float(np.max(np.abs(np.asarray(state.adv)))),
        "max_abs_adv_final_numpy": float(trace_np[-1]),
        "backend": jax.default_backend(),
    }


if __name__ == "__main__":  # pragma: no cover - manual use
    import json
    import sys

    print(json.dumps(run(full="--full" in sys.argv), indent=2))
