"""Stable timings for the benchmarks: long repeats, several of them, contenders interleaved.

Each contender is a zero-argument callable doing a fixed amount of work (it must block until its
result is ready). :func:`time_contenders`

1. calibrates each contender on its own: the number of calls per repeat doubles (or jumps to the
   estimate) until one repeat lasts at least ``min_seconds`` (the calibration calls double as the
   warm-up);
2. runs ``repeats`` rounds, each timing one repeat of every contender in turn, so that a load
   change on a shared machine hits all of them alike and the rounds pair them.

:func:`summary` reports seconds per call (min/median/max over the repeats) and a rate for a given
amount of work; :func:`ratio` compares two contenders by their medians, with the range of the
per-round ratios.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping

MIN_SECONDS = 0.5  # one repeat lasts at least this long
REPEATS = 5  # repeats per contender (the median of at least 5)
MAX_CALLS = 1 << 20


def calls_per_repeat(fn: Callable[[], object], min_seconds: float = MIN_SECONDS) -> int:
    """The number of calls of ``fn`` that lasts at least ``min_seconds`` (found by timing)."""
    if not min_seconds > 0:
        raise ValueError(f"min_seconds={min_seconds!r}: must be > 0")
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        secs = time.perf_counter() - t0
        if secs >= min_seconds or n >= MAX_CALLS:
            return n
        guess = math.ceil(n * 1.2 * min_seconds / secs) if secs > 0 else 2 * n
        n = min(MAX_CALLS, max(2 * n, guess))


def time_contenders(contenders: Mapping[str, Callable[[], object]], *,
                    min_seconds: float = MIN_SECONDS, repeats: int = REPEATS) -> dict[str, dict]:
    """``{name: {"calls_per_repeat": n, "seconds_per_call": [...], "cpu_seconds_per_call":
    [...]}}`` (one entry per repeat; wall clock and this process's CPU time, all threads) for every
    contender, timed in ``repeats`` interleaved rounds of repeats lasting ``>= min_seconds``."""
    if not (isinstance(repeats, int) and repeats >= 1):
        raise ValueError(f"repeats={repeats!r}: must be an integer >= 1")
    calls = {name: calls_per_repeat(fn, min_seconds) for name, fn in contenders.items()}
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls[name]):
                fn()
            wall[name].append((time.perf_counter() - t0) / calls[name])
            cpu[name].append((time.process_time() - c0) / calls[name])
    return {name: {"calls_per_repeat": calls[name], "seconds_per_call": wall[name],
                   "cpu_seconds_per_call": cpu[name]} for name in contenders}


def summary(timing: Mapping[str, object], work: float, unit: str) -> dict:
    """Seconds per call and ``work / seconds`` (``{unit}_per_s``) at the min/median/max repeat.

    ``timing`` is one entry of :func:`time_contenders`."""
    secs = sorted(timing["seconds_per_call"])
    med = statistics.median(secs)
    return {
        "repeats": len(secs),
        "calls_per_repeat": timing["calls_per_repeat"],
        "repeat_s_min": secs[0] * timing["calls_per_repeat"],
        "seconds_per_call": {"min": secs[0], "median": med, "max": secs[-1]},
        f"{unit}_per_s": {"min": work / secs[-1], "median": work / med, "max": work / secs[0]},
    }


def ratio(slow: Mapping[str, object], fast: Mapping[str, object]) -> dict:
    """How many times faster ``fast`` is than ``slow`` (two entries of :func:`time_contenders`
    doing the same work): the ratio of their median seconds per call, and the smallest and
    largest ratio of a round (the rounds pair the two repeats)."""
    s, f = slow["seconds_per_call"], fast["seconds_per_call"]
    rounds = [a / b for a, b in zip(s, f)]
    return {"median": statistics.median(s) / statistics.median(f),
            "min": min(rounds), "max": max(rounds)}
