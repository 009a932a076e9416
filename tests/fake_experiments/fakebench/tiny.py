"""A fake benchmark: returns numbers that depend on ``full`` so the test can tell them apart."""

import numpy as np


def run(full: bool = False) -> dict:
    n = 1000 if full else 10
    return {"name": "tiny", "full": full, "n": n, "sum": np.int64(n * (n - 1) // 2)}
