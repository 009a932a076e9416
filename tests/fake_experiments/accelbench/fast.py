"""A fake benchmark with a measured ratio: a numpy sum against a Python loop."""

import time

import numpy as np


def run(full: bool = False) -> dict:
    n = 100_000 if full else 20_000
    x = np.arange(n, dtype=np.float64)
    t0 = time.perf_counter()
    a = float(np.sum(x))
    t1 = time.perf_counter()
    b = 0.0
    for v in x.tolist():
        b += v
    t2 = time.perf_counter()
    return {
        "name": "fast",
        "full": full,
        "n": n,
        "equal": a == b,
        "numpy_per_s": n / max(t1 - t0, 1e-9),
        "ratio": (t2 - t1) / max(t1 - t0, 1e-9),
        "ratio_range": [1.0, 2.0],
        "nested": {"ignored": 1},
    }
