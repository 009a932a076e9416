"""Benchmark: sweep throughput on 1, 2 and 4 devices (``dedebate bench sweep``).

The workload is a vmapped sweep as ``dedebate/lab/sweep.py`` runs it: a grid of Bernoulli
threshold tests (dynamic ``p`` and ``threshold``, static ``trials`` x ``n`` coins per run), every
run keyed by ``fold_in``, evaluated by ``dedebate.lab.devices.evaluate`` with the run axis sharded
over a ``Mesh`` of the devices. Each device count D runs in its own subprocess, because the number
of CPU devices is fixed when JAX starts (``XLA_FLAGS=--xla_force_host_platform_device_count=D``).

On D devices each device gets rows/D rows per call, and on one device smaller calls alone run
faster (they fit the caches), so comparing D devices with one device taking all the rows in one
call would credit the devices with the batch-size effect. In each D-device process three
contenders are therefore timed in interleaved rounds (``bench/_timing.py``: medians over
``repeats`` repeats, each calling until it lasts at least 0.5 s): ``all_devices`` (the D devices,
all rows per call), ``one_device_same_batch`` (one of those devices, the rows in calls of rows/D,
so it does the same per-device work per call) and ``one_device_one_call`` (one device, all rows in
one call). Reported per device count: ``ratio_vs_1_same_batch``, the device ratio (D devices over
one device at the same per-call batch; the figure that isolates the devices),
``batch_effect_on_1_device`` (one device at rows/D per call over one device at all rows) and
``ratio_vs_1_one_call`` (D devices over one device in one call: the two effects together, the
figure this bench reported as ``ratio_vs_1`` before 2026-12-05), each with the range of its
per-round ratios; compile seconds (first call), runs and coin flips per second of ``all_devices``.

On CPU these devices are *fake*: D devices share the machine's cores, so a device ratio measures
how well XLA's per-device threads use those cores, not a multi-chip speed-up; it cannot honestly
exceed the core count (reported beside it). When JAX's default backend is an accelerator, the run
is also timed on the real devices (``real``); a cheap probe decides that, so a CPU-only machine
runs no fourth timed process. Every contender of every device count must give bit-identical
metrics: ``identical`` is checked, and a mismatch raises an error.

There is no numpy reference: the bench measures how ``evaluate`` spreads one sweep over devices
(a property of the sharding, compared with the same program on one device), for which numpy has
no counterpart; the per-run kernels' speed against numpy is what the other benchmarks measure.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from dedebate.lab.parallel import usable_cores

from ._worker import run_worker

SIZES = {
    "default": {"points": 64, "seeds": 4, "trials": 256, "n": 64, "repeats": 5},
    "full": {"points": 256, "seeds": 8, "trials": 1024, "n": 128, "repeats": 5},
}
DEVICE_COUNTS = (1, 2, 4)
NO_NUMPY = (
    "no numpy reference: the bench compares the same JAX sweep on D devices and on one device "
    "(a property of evaluate's sharding, which numpy has no counterpart of); the kernels' speed "
    "against numpy is measured by the other benchmarks"
)


def _row_fn(trials: int, n: int):
    import jax
    import jax.numpy as jnp

    def fn(dyn, root, words):
        key = jax.random.wrap_key_data(root)
        key = jax.random.fold_in(jax.random.fold_in(key, words[0]), words[1])
        heads = jnp.sum(jax.random.bernoulli(key, dyn["p"], (trials, n)), axis=1, dtype=jnp.int32)
        accept = heads.astype(jnp.float32) >= dyn["threshold"] * n
        return {"heads": jnp.sum(heads), "accept": jnp.mean(accept.astype(jnp.float32))}

    return fn


def _digest(out: dict) -> str:
    """The first 16 hex digits of the SHA-256 of a sweep's metrics (keys sorted)."""
    import numpy as np

    blob = b"".join(np.ascontiguousarray(out[k]).tobytes() for k in sorted(out))
    return hashlib.sha256(blob).hexdigest()[:16]


def worker(size: str, real: bool = False, min_seconds: float | None = None) -> dict:
    """Time the sweep on this process's devices (``jax.devices()``); returns a JSON-able dict.

    With more than one device, one of them is timed too, at the same per-call batch (rows/D) and
    with all rows in one call (the module docstring). ``real``: only if the backend is not a CPU
    (otherwise returns ``{"backend": "cpu", "timed": False}`` without timing anything).
    """
    import jax
    import numpy as np

    from dedebate.lab.devices import EvalInfo, evaluate

    from ._timing import MIN_SECONDS, ratio, summary, time_contenders

    if real and jax.default_backend() == "cpu":
        return {"backend": "cpu", "timed": False}
    s = SIZES[size]
    rows = s["points"] * s["seeds"]
    grid = np.linspace(0.05, 0.95, s["points"], dtype=np.float32)
    dyn = {"p": np.repeat(grid, s["seeds"]), "threshold": np.repeat(grid[::-1].copy(), s["seeds"])}
    roots = np.stack(
        [np.asarray(jax.random.key_data(jax.random.key(i % s["seeds"]))) for i in range(rows)]
    )
    words = np.stack(
        [np.arange(rows, dtype=np.uint32) // s["seeds"], np.zeros(rows, np.uint32)], axis=1
    )
    fn = _row_fn(s["trials"], s["n"])
    devices = jax.devices()
    d = len(devices)
    per_device = -(-rows // d)  # rows per device per call on all the devices
    setups = {"all_devices": (devices, 0)}
    if d > 1:
        setups["one_device_same_batch"] = (devices[:1], per_device)
        setups["one_device_one_call"] = (devices[:1], 0)
    runners, digests, compile_s, infos = {}, {}, {}, {}
    for name, (devs, batch) in setups.items():
        info = infos[name] = EvalInfo()

        def call(devs=devs, batch=batch, info=info, name=name):
            return evaluate(
                fn,
                (dyn, roots, words),
                rows,
                devices=devs,
                batch=batch,
                info=info,
                cache_key=("bench-sweep", size, name, len(devs)),
            )

        t0 = time.perf_counter()
        digests[name] = _digest(call())
        compile_s[name] = round(time.perf_counter() - t0, 3)
        runners[name] = call
    timing = time_contenders(
        runners,
        min_seconds=min_seconds if min_seconds is not None else MIN_SECONDS,
        repeats=s["repeats"],
    )
    stats = summary(timing["all_devices"], rows, "runs")
    med = stats["seconds_per_call"]["median"]
    out = {
        "backend": jax.default_backend(),
        "devices": d,
        "device_kind": devices[0].device_kind,
        "rows": rows,
        "rows_per_device_per_call": per_device,
        "compile_s": compile_s["all_devices"],
        "traces": infos["all_devices"].traces,
        "best_s": round(min(timing["all_devices"]["seconds_per_call"]), 4),
        "median_s": round(med, 4),
        "repeats": stats["repeats"],
        "calls_per_repeat": stats["calls_per_repeat"],
        "runs_per_s": round(rows / med, 1),
        "runs_per_s_range": [
            round(stats["runs_per_s"]["min"], 1),
            round(stats["runs_per_s"]["max"], 1),
        ],
        "flips_per_s": float(f"{rows * s['trials'] * s['n'] / med:.4g}"),
        "metrics_sha256": digests["all_devices"],
        "metrics_sha256_by_contender": digests,
    }
    if d > 1:
        pairs = {
            "ratio_vs_1_same_batch": ("one_device_same_batch", "all_devices"),
            "batch_effect_on_1_device": ("one_device_one_call", "one_device_same_batch"),
            "ratio_vs_1_one_call": ("one_device_one_call", "all_devices"),
        }
        for field, (slow, fast) in pairs.items():
            r = ratio(timing[slow], timing[fast])
            out[field] = round(r["median"], 3)
            out[f"{field}_range"] = [round(r["min"], 3), round(r["max"], 3)]
        out["one_device_same_batch_runs_per_s"] = round(
            rows
            / summary(timing["one_device_same_batch"], rows, "runs")["seconds_per_call"]["median"],
            1,
        )
    return out


def _subprocess(size: str, n_devices: int | None) -> dict:
    """The worker in a fresh process: ``n_devices`` fake CPU devices, or (None) the default
    backend's real devices, timed only if they are not a CPU."""
    env = dict(os.environ)
    for k in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        env.pop(k, None)
    if n_devices is not None:  # fake CPU devices, CPU backend only
        env["XLA_FLAGS"] = (
            env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={n_devices}"
        ).strip()
        env["JAX_PLATFORMS"] = "cpu"
        return run_worker(__spec__.name, ["--worker", size], env)
    return run_worker(__spec__.name, ["--worker", size, "--real"], env)


class SweepMismatch(RuntimeError):
    """Two device counts (or contenders) of the sweep bench gave different metrics."""


def run(full: bool = False) -> dict:
    """Throughput of one sweep on 1, 2 and 4 (fake CPU) devices, plus real accelerators if any."""
    size = "full" if full else "default"
    cpu = {d: _subprocess(size, d) for d in DEVICE_COUNTS}
    cores = len(usable_cores())
    digests = {
        f"{d}/{name}": h
        for d, r in cpu.items()
        for name, h in r["metrics_sha256_by_contender"].items()
    }
    identical = len(set(digests.values())) == 1
    if not identical:
        raise SweepMismatch(f"the sweep's metrics differ across device counts: {digests}")
    fake = {
        str(d): {**r, **({"ratio_vs_1_same_batch": 1.0} if d == 1 else {})} for d, r in cpu.items()
    }
    result = {
        "name": "sweep",
        "size": size,
        "workload": SIZES[size],
        "cpu_cores": cores,
        "cpu_fake_devices": fake,
        "identical": identical,
        "device_ratios_within_cores": all(
            r["ratio_vs_1_same_batch"] <= cores for r in fake.values()
        ),
        "numpy_reference": None,
        "note": (
            "CPU devices are fake (--xla_force_host_platform_device_count): they share "
            f"{cores} cores, so the device ratios (ratio_vs_1_same_batch: D devices over one "
            "device at the same rows per call) show XLA's use of those cores, not a multi-chip "
            "speed-up; batch_effect_on_1_device is the gain of smaller calls alone and "
            "ratio_vs_1_one_call both together. " + NO_NUMPY
        ),
    }
    real = _subprocess(size, None)
    if real.get("timed", True) and real["backend"] != "cpu":
        real_digests = real["metrics_sha256_by_contender"]
        if len(set(real_digests.values())) != 1:
            raise SweepMismatch(f"the sweep's metrics differ on the real devices: {real_digests}")
        real["ratio_vs_1_cpu_device"] = round(real["runs_per_s"] / cpu[1]["runs_per_s"], 1)
        result["real"] = real
        result["identical_real_vs_cpu"] = real["metrics_sha256"] == cpu[1]["metrics_sha256"]
    return result


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], real="--real" in sys.argv[3:])))
    else:
        print(json.dumps(run(full="--full" in sys.argv), indent=2))
