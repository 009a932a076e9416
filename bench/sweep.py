"""Benchmark: sweep throughput on 1, 2 and 4 devices (``dedebate bench sweep``).

The workload is a vmapped sweep as ``dedebate/lab/sweep.py`` runs it: a grid of Bernoulli
threshold tests (dynamic ``p`` and ``threshold``, static ``trials`` x ``n`` coins per run), every
run keyed by ``fold_in``, evaluated by ``dedebate.lab.devices.evaluate`` with the run axis sharded
over a ``Mesh`` of the devices. Each device count runs in its own subprocess, because the number
of CPU devices is fixed when JAX starts (``XLA_FLAGS=--xla_force_host_platform_device_count=D``).

On CPU these devices are *fake*: D devices share the machine's cores, so the ratios measure how well
XLA's per-device threads use those cores, not a real multi-chip speed-up; the core count is reported
next to them. When JAX's default backend is an accelerator, the run is also timed on the real
devices (``real``). Reported per device count: compile seconds (first call), runs per second and
coin flips per second after compilation (medians over ``repeats`` repeats, each calling the sweep
until it lasts at least 0.5 s, ``bench/_timing.py``; ``runs_per_s_range`` gives the slowest and
fastest repeat), and the ratio of median runs per second to one device. Every device count must give
bit-identical metrics (``identical``).
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


def worker(size: str, use_all: bool = False) -> dict:
    """Time the sweep on this process's devices (``jax.devices()``); returns a JSON-able dict."""
    import jax
    import numpy as np

    from dedebate.lab.devices import EvalInfo, evaluate

    from ._timing import summary, time_contenders

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
    info = EvalInfo()
    t0 = time.perf_counter()
    out = evaluate(
        fn, (dyn, roots, words), rows, devices=devices, info=info, cache_key=("bench-sweep", size)
    )
    compile_s = time.perf_counter() - t0
    timing = time_contenders(
        {
            "sweep": lambda: evaluate(
                fn,
                (dyn, roots, words),
                rows,
                devices=devices,
                info=info,
                cache_key=("bench-sweep", size),
            )
        },
        repeats=s["repeats"],
    )["sweep"]
    stats = summary(timing, rows, "runs")
    best = min(timing["seconds_per_call"])
    med = stats["seconds_per_call"]["median"]
    digest = hashlib.sha256(
        b"".join(np.ascontiguousarray(out[k]).tobytes() for k in sorted(out))
    ).hexdigest()[:16]
    return {
        "backend": jax.default_backend(),
        "devices": len(devices),
        "device_kind": devices[0].device_kind,
        "rows": rows,
        "compile_s": round(compile_s, 3),
        "traces": info.traces,
        "best_s": round(best, 4),
        "median_s": round(med, 4),
        "repeats": stats["repeats"],
        "calls_per_repeat": stats["calls_per_repeat"],
        "runs_per_s": round(rows / med, 1),
        "runs_per_s_range": [
            round(stats["runs_per_s"]["min"], 1),
            round(stats["runs_per_s"]["max"], 1),
        ],
        "flips_per_s": float(f"{rows * s['trials'] * s['n'] / med:.4g}"),
        "metrics_sha256": digest,
    }


def _subprocess(size: str, n_devices: int | None) -> dict:
    env = dict(os.environ)
    for k in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        env.pop(k, None)
    if n_devices is not None:  # fake CPU devices, CPU backend only
        env["XLA_FLAGS"] = (
            env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={n_devices}"
        ).strip()
        env["JAX_PLATFORMS"] = "cpu"
    return run_worker(__spec__.name, ["--worker", size], env)


def run(full: bool = False) -> dict:
    """Throughput of one sweep on 1, 2 and 4 (fake CPU) devices, plus real accelerators if any."""
    size = "full" if full else "default"
    cpu = {d: _subprocess(size, d) for d in DEVICE_COUNTS}
    base = cpu[1]["runs_per_s"]
    cores = len(usable_cores())
    result = {
        "name": "sweep",
        "size": size,
        "workload": SIZES[size],
        "cpu_cores": cores,
        "cpu_fake_devices": {
            str(d): {**r, "ratio_vs_1": round(r["runs_per_s"] / base, 3)} for d, r in cpu.items()
        },
        "identical": len({r["metrics_sha256"] for r in cpu.values()}) == 1,
        "note": (
            "CPU devices are fake (--xla_force_host_platform_device_count): they share "
            f"{cores} cores, so the ratios show XLA's use of those cores, not a multi-chip "
            "speed-up"
        ),
    }
    real = _subprocess(size, None)
    if real["backend"] != "cpu":
        real["ratio_vs_1_cpu_device"] = round(real["runs_per_s"] / base, 1)
        result["real"] = real
        result["identical_real_vs_cpu"] = real["metrics_sha256"] == cpu[1]["metrics_sha256"]
    return result


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2])))
    else:
        print(json.dumps(run(full="--full" in sys.argv), indent=2))
