"""Benchmark: Algorithm 1 (tabular OGD, spec PED 5.3) in dedebate vs a numpy reference.

Problem: |X| = 10^5 contexts, |Z| = 16 outcomes, 64 random prediction-dependent tanh
tests, delta = 0.02, uniform mu and a point-mass truth g. Both implementations start from the same
uniform h_1 with the same tests and take the same fixed number of updates (the problem is chosen so
that Algorithm 1 has not exited by then; the run checks it), then must agree on the chosen tests and
on the final h. Reported: steps per second of each (dedebate timed after compilation), the ratio,
and the agreement. dedebate's ahead-of-time compilation is timed on its own. Timing
(``bench/_timing.py``): each contender repeats its run until one repeat lasts at least
``min_seconds`` (calibrated, the calibration doubling as warm-up), then ``repeats`` rounds time
one repeat of each in turn; the figures are medians (``dedebate`` / ``numpy``: min/median/max),
``ratio`` is the ratio of the medians and ``ratio_range`` the smallest and largest ratio of a
round. Wall-clock rates are the headline; the process-CPU-time ratio (medians) is reported beside
them because a shared machine makes wall time noisy (both figures count all threads).

``run(full=False)`` times ``STEPS["default"]`` updates of each; ``run(full=True)`` times
``STEPS["full"]`` of dedebate's and the first ``NUMPY_STEPS["full"]`` of numpy's (rates per
update compared). The CLI ``dedebate bench ogd`` prints the returned dict as JSON.
"""

from __future__ import annotations

import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.estimators.advantage import random_oi_problem
from dedebate.estimators.families import random_tanh_family
from dedebate.estimators.ogd import OGDStatic, ogd_init, ogd_run_steps
from dedebate.programs import jit

from ._timing import MIN_SECONDS, REPEATS, ratio, summary, time_contenders
from .ogd_numpy import NumpyTanhOGD

N_X, N_Z, N_TESTS, DELTA = 100_000, 16, 64, 0.02
N_FEATURES, TEST_SCALE, SEED = 8, 4.0, 0
STEPS = {"default": 30, "full": 150}  # Algorithm 1 needs 154 updates on this problem
NUMPY_STEPS = {"default": 30, "full": 8}
"""Updates the numpy reference takes and is timed on: all of dedebate's at the default size, a
prefix at ``--full``. An update costs the same whatever its index (every test evaluated on all
|X| contexts, about 1 s on one core), so the rates compare; the 150 updates of ``--full`` took
numpy about 5 minutes a call on two cores and far past the accelerator run's budget."""
GOAL_RATIO = 5.0


def build(n_x: int = N_X, n_z: int = N_Z, n_tests: int = N_TESTS, seed: int = SEED):
    """The benchmark problem and test family (deterministic in ``seed``)."""
    key = jax.random.key(seed)
    problem, features = random_oi_problem(
        jax.random.fold_in(key, 0), n_x, n_z, n_features=N_FEATURES, truth="point"
    )
    family = random_tanh_family(
        jax.random.fold_in(key, 1), features, n_z, n_tests, scale=TEST_SCALE
    )
    return problem, family


def run(
    full: bool = False,
    n_x: int = N_X,
    steps: int | None = None,
    min_seconds: float = MIN_SECONDS,
    repeats: int = REPEATS,
    numpy_steps: int | None = None,
) -> dict:
    """Time both implementations' updates (numpy's the first ``numpy_steps`` of dedebate's);
    return figures as a dict."""
    size = "full" if full else "default"
    n_steps = int(steps if steps is not None else STEPS[size])
    n_ref = min(n_steps, int(numpy_steps if numpy_steps is not None else NUMPY_STEPS[size]))
    problem, family = build(n_x=n_x)
    static = OGDStatic(trace_len=n_steps + 1)

    delta = jnp.float32(DELTA)

    # Ahead-of-time compilation (timed on its own); the timing's calibration warms up.
    t0 = time.perf_counter()
    init = jit(ogd_init, static_argnums=0).lower(static, family, problem).compile()
    state_shape = jax.eval_shape(lambda f, p: ogd_init(static, f, p), family, problem)
    solve = (
        jit(ogd_run_steps, static_argnums=(0, 5))
        .lower(static, family, problem, state_shape, delta, n_steps)
        .compile()
    )
    compile_s = time.perf_counter() - t0
    solve_ref = (
        solve
        if n_ref == n_steps
        else (
            jit(ogd_run_steps, static_argnums=(0, 5))
            .lower(static, family, problem, state_shape, delta, n_ref)
            .compile()
        )
    )

    def dedebate():
        return jax.block_until_ready(solve(family, problem, init(family, problem), delta))

    ref = NumpyTanhOGD(
        np.asarray(family.features),
        np.asarray(family.weights),
        np.asarray(problem.mu),
        np.asarray(problem.g),
    )
    state = dedebate()
    state_ref = solve_ref(family, problem, init(family, problem), delta)
    h_np, steps_np, chosen_np, trace_np = ref.run(n_ref, DELTA)

    steps_jax = int(state.steps)
    chosen_jax = np.asarray(state.chosen[:n_ref])
    h_jax = np.asarray(state_ref.h)
    same_tests = steps_np == int(state_ref.steps) and bool(np.array_equal(chosen_np, chosen_jax))
    max_h_diff = float(np.max(np.abs(h_np - h_jax)))
    if steps_jax != n_steps or steps_np != n_ref:
        raise RuntimeError(
            f"Algorithm 1 exited early (dedebate {steps_jax} of {n_steps}, numpy {steps_np} of "
            f"{n_ref} steps): the benchmark problem must keep max|Adv| >= delta for the timed "
            "steps"
        )
    if not same_tests:
        first = int(np.argmax(chosen_np[: len(chosen_jax)] != chosen_jax[: len(chosen_np)]))
        raise AssertionError(f"dedebate and numpy chose different tests from update {first + 1}")
    if not np.allclose(h_np, h_jax, atol=1e-4):
        raise AssertionError(f"final h differs: max |h_numpy - h_dedebate| = {max_h_diff:.3g}")

    timing = time_contenders(
        {"dedebate": dedebate, "numpy": lambda: ref.run(n_ref, DELTA)},
        min_seconds=min_seconds,
        repeats=repeats,
    )
    jax_sum = summary(timing["dedebate"], n_steps, "steps")
    numpy_sum = summary(timing["numpy"], n_ref, "steps")
    jax_s = jax_sum["seconds_per_call"]["median"]
    numpy_s = numpy_sum["seconds_per_call"]["median"]
    jax_cpu = statistics.median(timing["dedebate"]["cpu_seconds_per_call"])
    numpy_cpu = statistics.median(timing["numpy"]["cpu_seconds_per_call"])
    jax_rate = n_steps / jax_s
    numpy_rate = n_ref / numpy_s
    rat = ratio(timing["numpy"], timing["dedebate"], work=(n_ref, n_steps))
    return {
        "benchmark": "ogd",
        "problem": {
            "n_x": n_x,
            "n_z": N_Z,
            "n_tests": N_TESTS,
            "delta": DELTA,
            "test_scale": TEST_SCALE,
            "truth": "point",
            "seed": SEED,
        },
        "steps": n_steps,
        "numpy_steps": n_ref,
        "dedebate_steps_per_s": jax_rate,
        "numpy_steps_per_s": numpy_rate,
        "ratio": rat["median"],
        "ratio_range": [rat["min"], rat["max"]],
        "goal_ratio": GOAL_RATIO,
        "meets_goal": rat["median"] >= GOAL_RATIO,
        "timing": {
            "min_seconds_per_repeat": min_seconds,
            "repeats": repeats,
            "figures": "medians over the repeats; ratio_range over the rounds",
        },
        "dedebate": jax_sum,
        "numpy": numpy_sum,
        "dedebate_compile_s": compile_s,
        "dedebate_s": jax_s,
        "numpy_s": numpy_s,
        "dedebate_cpu_s": jax_cpu,
        "numpy_cpu_s": numpy_cpu,
        "dedebate_cpu_ms_per_step": 1e3 * jax_cpu / n_steps,
        "numpy_cpu_ms_per_step": 1e3 * numpy_cpu / n_ref,
        "ratio_cpu_time": (numpy_cpu / n_ref) / (jax_cpu / n_steps),
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
