"""Benchmark: honest-vs-honest stochastic-oracle debates (spec DED 5) in dedebate vs numpy.

Problem: fixture F2 with K = 2, Lean defaults (N_A, N_B, N_V from spec DED 5.2),
T = 256 steps, 4096 trials, P_M(1) = 2/3. Reported, in trial-steps per second after compilation
(``bench/_timing.py``: every contender repeats its call until one repeat lasts at least
``min_seconds``, then ``repeats`` interleaved rounds time one repeat of each; figures are medians,
each mode also gives min/median/max, and ratios are ratios of medians with the range of the
per-round ratios):

1. dedebate: :func:`dedebate.protocols.stochastic_batch.run_trials` (exact in distribution), in
   three modes: the default ``bob_draw="count"`` (Alice's and Bob's counts drawn, BTRS),
   ``bob_draw="decision"`` (Alice's count drawn, honest Bob's continue/abort decision drawn directly
   from its exact probability) and ``bob_draw="lazy"`` (the coin first, from one 32-bit word per
   step; Alice's count and Bob's decision only on a certified 2^-24 share of steps,
   :mod:`dedebate.protocols.stochastic_lazy`). The headline figure (``ratio_vs_numpy``) is the
   fastest mode against the numpy reference below, whatever the algorithm: on a CPU that is
   ``lazy`` (one word a step) against numpy's two binomial draws a step, a different algorithm
   (``ratio_vs_numpy_compares`` says which, ``ratio_vs_numpy_like_for_like`` whether the two run
   the same algorithm). The like-for-like ratios sit beside it:
   ``ratio_count_vs_numpy_count_path`` (both draw the counts) and
   ``ratio_lazy_vs_numpy_one_word_path`` (both take the one-word path);
2. numpy: ``bench/stochastic_numpy.py`` (``rng.binomial`` counts, vectorised over trials);
3. the RNG limit: the raw throughput of the modes' own generator,
   :func:`dedebate.core.binomial_stream.block_bits` (both 32-bit words of each threefry2x32 block,
   half the hashing of ``jax.random.bits``/``uniform``; the modes' uniforms are these words,
   converted by ``block_uniforms``), the faster of one flat draw and one draw per trial key
   (vmapped, as the modes draw) of one word per trial-step, divided by the words one step needs:
   count mode 5 (two per BTRS candidate for Alice and Bob, one for the coin; ~5.6 on average as
   ~12% of candidates are rejected), decision mode 4 (Alice's candidate, 32 bits for Bob's
   decision, the coin), lazy mode 1. Each mode is compared with its own limit: the rate at which
   its own generator makes the words it needs (the mode draws those very words, and does more).

Over the cores (``count_over_cores``, CPU only, two or more cores): the count mode again in a
subprocess whose JAX has one CPU device per core (``--xla_force_host_platform_device_count``),
``run_trials`` spreading the lanes over them, timed in interleaved rounds with the same mode on
one of those devices and the numpy reference. numpy uses one core; the headline ratios above are
JAX on one device (whose large fusions XLA already splits over the cores).

Batch scaling (``batch_scaling``): the count mode at n/4 and 4n trials (16x apart), timed in
interleaved rounds; its trial-steps per second must not fall as the batch grows (a CPU proxy for
host work that grows with the lanes, which an accelerator would feel first).

``numpy_one_word_path`` ports the lazy mode's algorithm to numpy (one word a step compared with a
per-position threshold computed once, the rest of the step's law drawn exactly on the rare steps,
``numpy_one_word_path_rare_steps`` of them), so ``ratio_lazy_vs_numpy_one_word_path`` compares the
same algorithm: the lazy mode's gain over the straightforward numpy is mostly algorithmic, and the
ratios show how much. Both numpy references are careful ports, not bounds: a faster numpy port may
exist.

All are exact in distribution. ``agreement`` compares the acceptance rate of every contender
(the three modes, both numpy references) with P_M(1) by a binomial z-score and flags a
disagreement: ``acceptance_agrees_with_P_M`` is false when some |z| exceeds ``z_max``, the
two-sided normal quantile that keeps the chance of a false alarm over all the comparisons at
``AGREEMENT_FALSE_ALARM`` (Bonferroni; about 4.3 for five comparisons). The check sees only the
verdicts' rate, not the counts drawn on the way (a reference that skipped the binomial draws
would pass it too); it does not stop the run. ``run(full=True)`` uses more trials. The numpy goal
is judged against the RNG limit too: ``numpy_goal_within_rng_limit`` says whether 2x numpy is
below what raw generation of the mode's words allows at all. ``dedebate_first_call_s`` (and each
mode's ``first_call_s``) is the first call's wall time: compilation and one run.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time

import jax
import numpy as np

from dedebate.agents.stochastic_players import honest_alice, honest_bob
from dedebate.core.binomial_stream import block_bits
from dedebate.lab.parallel import usable_cores
from dedebate.machines.fixtures import f2_target
from dedebate.programs import jit
from dedebate.protocols.stochastic import (
    debate_static,
    lean_defaults,
    make_vera,
    trial_keys,
)
from dedebate.protocols.stochastic_batch import run_trials

from ._timing import MIN_SECONDS, REPEATS, ratio, summary, time_contenders
from ._worker import run_worker
from .stochastic_numpy import one_word_path_f2_numpy, play_f2_numpy

K, T, P1, SEED = 2, 256, 2 / 3, 0
TRIALS = {"default": 4096, "full": 16384}
MODES = {"count": 5, "decision": 4, "lazy": 1}  # bob_draw mode -> 32-bit words one step needs
GOAL_NUMPY, GOAL_RNG = 2.0, 0.25
AGREEMENT_FALSE_ALARM = 1e-4  # chance that ``agreement`` flags exact samplers, over all its tests


def rng_kernels(keys: jax.Array, steps: int) -> dict:
    """The RNG limit's contenders: ``steps`` words per trial key from the modes' generator
    (:func:`block_bits`), ``"rng"`` in one flat draw, ``"rng_per_trial"`` one draw per key (vmapped,
    as the modes draw); each call returns the words, ready."""
    flat = jit(lambda k: block_bits(k, keys.shape[0] * steps))
    lanes = jit(jax.vmap(lambda k: block_bits(k, steps)))
    return {
        "rng": lambda: jax.block_until_ready(flat(jax.random.key(1))),
        "rng_per_trial": lambda: jax.block_until_ready(lanes(keys)),
    }


def agreement(acceptances: dict[str, float], p1: float, n: int) -> dict:
    """Binomial z-scores of acceptance rates (each from ``n`` trials) against ``p1``, the
    threshold ``z_max`` for ``AGREEMENT_FALSE_ALARM`` over ``len(acceptances)`` two-sided tests
    (Bonferroni), and ``agrees``: every ``|z| <= z_max``."""
    se = math.sqrt(p1 * (1 - p1) / n)
    z = {name: (acc - p1) / se for name, acc in acceptances.items()}
    z_max = statistics.NormalDist().inv_cdf(1 - AGREEMENT_FALSE_ALARM / (2 * len(z)))
    return {
        "z_vs_P_M": z,
        "comparisons": len(z),
        "false_alarm_probability": AGREEMENT_FALSE_ALARM,
        "z_max": z_max,
        "agrees": all(abs(v) <= z_max for v in z.values()),
    }


def _problem(n: int):
    """The benchmark's debates: ``(fixture, constants, alice, bob, vera, keys of n trials, numpy
    runner)``, the numpy runner playing the same n debates (its own generator, seeded SEED)."""
    fx = f2_target(T, P1)
    consts = lean_defaults(K, T).constants(K, T)
    pi = np.asarray(fx.machine.pi, np.float64)
    rng = np.random.default_rng(SEED)

    def numpy_runner():
        return play_f2_numpy(
            pi, consts.n_alice, consts.n_bob, consts.n_vera, consts.tau_bob, consts.tau_vera, n, rng
        )

    return (
        fx,
        consts,
        honest_alice(consts),
        honest_bob(consts),
        make_vera(consts),
        trial_keys(jax.random.key(SEED), n),
        numpy_runner,
    )


def run(
    full: bool = False,
    trials: int | None = None,
    min_seconds: float = MIN_SECONDS,
    repeats: int = REPEATS,
) -> dict:
    """Time the three figures and return them (with ratios and sanity checks) as a dict."""
    n = int(trials if trials is not None else TRIALS["full" if full else "default"])
    fx, consts, alice, bob, vera, keys, numpy_runner = _problem(n)
    steps = n * T
    p1 = fx.p1()
    se = math.sqrt(p1 * (1 - p1) / n)

    # Compile (first call) each dedebate mode, then time every contender in interleaved rounds
    # (the warm-up compiles the RNG kernels), so that a busy machine slows all of them alike.
    runners, modes, outs = {}, {}, {}
    for mode in MODES:
        spec = debate_static(T, bob_draw=mode)

        def dedebate(spec=spec):
            out = run_trials(spec, fx.machine, alice, bob, vera, keys)
            return jax.block_until_ready(out)

        t0 = time.perf_counter()
        outs[mode] = dedebate()
        modes[mode] = {"first_call_s": time.perf_counter() - t0}  # compilation and one run
        runners[mode] = dedebate

    pi = np.asarray(fx.machine.pi, np.float64)
    runners["numpy"] = numpy_runner
    rng_ow = np.random.default_rng(SEED + 1)
    runners["numpy_one_word_path"] = lambda: one_word_path_f2_numpy(
        pi, consts.n_alice, consts.n_bob, consts.n_vera, consts.tau_bob, consts.tau_vera, n, rng_ow
    )
    m = n * T  # words the limit's kernels draw: one per trial-step
    runners |= rng_kernels(keys, T)
    outs["numpy"] = runners["numpy"]()
    outs["numpy_one_word_path"] = runners["numpy_one_word_path"]()
    timing = time_contenders(runners, min_seconds=min_seconds, repeats=repeats)
    best = {name: statistics.median(t["seconds_per_call"]) for name, t in timing.items()}
    for mode in MODES:
        acc = float(np.mean(np.asarray(outs[mode].alice_wins)))
        modes[mode].update(
            {
                "trial_steps_per_s": steps / best[mode],
                "seconds": best[mode],
                "acceptance": acc,
                "z_vs_P_M": (acc - p1) / se,
                "timing": summary(timing[mode], steps, "trial_steps"),
            }
        )
    numpy_s, ref = best["numpy"], outs["numpy"]
    numpy_rate = steps / numpy_s
    words_per_s = m / min(best["rng"], best["rng_per_trial"])

    for mode, per_step in MODES.items():
        r = modes[mode]
        r["words_per_step_counted"] = per_step
        r["rng_limit_trial_steps_per_s"] = words_per_s / per_step
        rat = ratio(timing["numpy"], timing[mode])
        r["ratio_vs_numpy"] = rat["median"]
        r["ratio_vs_numpy_range"] = [rat["min"], rat["max"]]
        r["fraction_of_rng_limit"] = r["trial_steps_per_s"] / r["rng_limit_trial_steps_per_s"]
        r["meets_goal_numpy"] = r["ratio_vs_numpy"] >= GOAL_NUMPY
        r["meets_goal_rng"] = r["fraction_of_rng_limit"] >= GOAL_RNG
        r["numpy_goal_within_rng_limit"] = (
            GOAL_NUMPY * numpy_rate <= r["rng_limit_trial_steps_per_s"]
        )
    head = max(modes, key=lambda k: modes[k]["trial_steps_per_s"])
    h = modes[head]
    acc_np = float(np.mean(ref["verdict"]))
    like = {  # (the numpy contender, the mode) running the same algorithm
        "ratio_count_vs_numpy_count_path": ("numpy", "count"),
        "ratio_lazy_vs_numpy_one_word_path": ("numpy_one_word_path", "lazy"),
    }
    like_for_like = {}
    for field, (slow, fast) in like.items():
        rat = ratio(timing[slow], timing[fast])
        like_for_like[field] = rat["median"]
        like_for_like[f"{field}_range"] = [rat["min"], rat["max"]]
    modes["lazy"]["ratio_vs_numpy_one_word_path"] = like_for_like[
        "ratio_lazy_vs_numpy_one_word_path"
    ]
    agree = agreement(
        {
            **{mode: modes[mode]["acceptance"] for mode in MODES},
            "numpy": acc_np,
            "numpy_one_word_path": float(np.mean(outs["numpy_one_word_path"]["verdict"])),
        },
        p1,
        n,
    )
    cores = over_cores(n, min_seconds, repeats)
    failed = [  # a figure of wrong results is no figure: the CLI exits 1 (docs/performance.md)
        name
        for name, ok in (
            ("acceptance_agrees_with_P_M", agree["agrees"]),
            (
                "count_over_cores.identical_to_one_device",
                (cores or {}).get("identical_to_one_device", True),
            ),
        )
        if not ok
    ]
    return {
        "benchmark": "stochastic",
        "failed_checks": failed,
        "problem": {
            "fixture": "F2",
            "K": K,
            "T": T,
            "trials": n,
            "P_M(1)": p1,
            "n_alice": consts.n_alice,
            "n_bob": consts.n_bob,
            "n_vera": consts.n_vera,
        },
        "dedebate_mode": f"bob_draw={head}",
        "dedebate_trial_steps_per_s": h["trial_steps_per_s"],
        "numpy_trial_steps_per_s": numpy_rate,
        "rng_limit_trial_steps_per_s": h["rng_limit_trial_steps_per_s"],
        "rng_generator": "dedebate.core.binomial_stream.block_bits",
        "rng_words_per_s": words_per_s,
        "rng_words_per_s_flat": m / best["rng"],
        "rng_words_per_s_per_trial": m / best["rng_per_trial"],
        "numpy_one_word_path_trial_steps_per_s": steps / best["numpy_one_word_path"],
        "numpy_one_word_path_rare_steps": outs["numpy_one_word_path"]["rare_steps"],
        "words_per_step_counted": h["words_per_step_counted"],
        "ratio_vs_numpy": h["ratio_vs_numpy"],
        "ratio_vs_numpy_range": h["ratio_vs_numpy_range"],
        "ratio_vs_numpy_compares": (
            f"bob_draw={head} against numpy's count path (rng.binomial counts)"
            + ("" if head == "count" else ": different algorithms")
        ),
        "ratio_vs_numpy_like_for_like": head == "count",
        **like_for_like,
        "timing": {
            "min_seconds_per_repeat": min_seconds,
            "repeats": repeats,
            "figures": "medians over the repeats; *_range over the rounds",
        },
        "numpy": summary(timing["numpy"], steps, "trial_steps"),
        "fraction_of_rng_limit": h["fraction_of_rng_limit"],
        "goal_ratio_vs_numpy": GOAL_NUMPY,
        "goal_fraction_of_rng_limit": GOAL_RNG,
        "meets_goal_numpy": h["meets_goal_numpy"] and not failed,
        "meets_goal_rng": h["meets_goal_rng"] and not failed,
        "numpy_goal_within_rng_limit": h["numpy_goal_within_rng_limit"],
        "dedebate_first_call_s": h["first_call_s"],
        "dedebate_s": h["seconds"],
        "numpy_s": numpy_s,
        "acceptance_dedebate": h["acceptance"],
        "acceptance_numpy": acc_np,
        "z_dedebate_vs_P_M": h["z_vs_P_M"],
        "z_numpy_vs_P_M": (acc_np - p1) / se,
        "acceptance_agrees_with_P_M": agree["agrees"],
        "agreement": agree,
        "modes": modes,
        "batch_scaling": batch_scaling(n, min_seconds, repeats),
        "count_over_cores": cores,
        "cpu_count": os.cpu_count(),
        "backend": jax.default_backend(),
    }


SCALING_GOAL = 0.9  # the larger batch's rate over the smaller's, at least


def batch_scaling(n: int, min_seconds: float, repeats: int) -> dict:
    """Count-mode trial-steps per second at ``n // 4`` and ``4 n`` trials, and their ratio."""
    fx, consts, alice, bob, vera, _, _ = _problem(n)
    spec = debate_static(T, bob_draw="count")
    sizes = {"small": max(1, n // 4), "large": 4 * n}
    runners = {}
    for name, m in sizes.items():
        keys = trial_keys(jax.random.key(SEED + 2), m)
        runners[name] = lambda keys=keys: jax.block_until_ready(
            run_trials(spec, fx.machine, alice, bob, vera, keys)
        )
    timing = time_contenders(runners, min_seconds=min_seconds, repeats=repeats)
    rates = {
        name: summary(timing[name], sizes[name] * T, "trial_steps")["trial_steps_per_s"]
        for name in sizes
    }
    rat = ratio(timing["small"], timing["large"], work=(sizes["small"], sizes["large"]))
    return {
        "trials": sizes,
        "trial_steps_per_s": {k: r["median"] for k, r in rates.items()},
        "large_over_small": rat["median"],
        "large_over_small_range": [rat["min"], rat["max"]],
        "goal": SCALING_GOAL,
        "meets_goal": rat["median"] >= SCALING_GOAL,
    }


def _over_cores_worker(n: int, min_seconds: float, repeats: int) -> dict:
    """In a process with one CPU device per core: count mode over all devices vs one vs numpy."""
    fx, _, alice, bob, vera, keys, numpy_runner = _problem(n)
    spec = debate_static(T, bob_draw="count")
    devices = jax.devices()
    outs = {}

    def play_on(devs, name):
        def call():
            outs[name] = jax.block_until_ready(
                run_trials(spec, fx.machine, alice, bob, vera, keys, devices=devs)
            )

        return call

    runners = {
        "all_devices": play_on(devices, "all_devices"),
        "one_device": play_on(devices[:1], "one_device"),
        "numpy": numpy_runner,
    }
    timing = time_contenders(runners, min_seconds=min_seconds, repeats=repeats)
    same = all(
        np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(jax.tree.leaves(outs["all_devices"]), jax.tree.leaves(outs["one_device"]))
    )
    steps = n * T
    over_np, over_one = (
        ratio(timing["numpy"], timing["all_devices"]),
        ratio(timing["one_device"], timing["all_devices"]),
    )
    one_np = ratio(timing["numpy"], timing["one_device"])
    return {
        "devices": len(devices),
        "trials": n,
        "identical_to_one_device": same,
        "all_devices": summary(timing["all_devices"], steps, "trial_steps"),
        "one_device": summary(timing["one_device"], steps, "trial_steps"),
        "numpy": summary(timing["numpy"], steps, "trial_steps"),
        "ratio_vs_numpy": over_np["median"],
        "ratio_vs_numpy_range": [over_np["min"], over_np["max"]],
        "one_device_ratio_vs_numpy": one_np["median"],
        "one_device_ratio_vs_numpy_range": [one_np["min"], one_np["max"]],
        "speedup_over_one_device": over_one["median"],
        "speedup_over_one_device_range": [over_one["min"], over_one["max"]],
        "meets_goal_numpy_1x": over_np["median"] >= 1.0,
    }


def over_cores(n: int, min_seconds: float = MIN_SECONDS, repeats: int = REPEATS) -> dict | None:
    """Count mode with the lanes over one CPU device per core (a subprocess, since the device
    count is fixed when JAX starts); None on an accelerator or a single core."""
    cores = len(usable_cores())
    if jax.default_backend() != "cpu" or cores < 2:
        return None
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={cores}"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    return run_worker(
        __spec__.name, ["--over-cores-worker", str(n), str(min_seconds), str(repeats)], env
    )


if __name__ == "__main__":  # pragma: no cover - manual use
    if sys.argv[1:2] == ["--over-cores-worker"]:
        print(
            json.dumps(_over_cores_worker(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])))
        )
    else:
        print(json.dumps(run(full="--full" in sys.argv), indent=2))
