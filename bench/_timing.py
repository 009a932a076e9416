"""Stable timings for the benchmarks: long repeats, several of them, contenders interleaved.

Each contender is a zero-argument callable doing a fixed amount of work (it must block until its
result is ready). :func:`time_contenders` calls each once (warm-up), then runs ``repeats``
rounds; a round times one repeat of every contender in turn, and a repeat calls its contender
again and again until at least ``min_seconds`` have passed, so every repeat is long enough
whatever the load. A load change on a shared machine hits all contenders alike and the rounds
pair them.

:func:`summary` reports seconds per call (min/median/max over the repeats) and a rate for a given
amount of work; :func:`ratio` compares two contenders by their medians, with the range of the
per-round ratios.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

MIN_SECONDS = 0.5  # one repeat lasts at least this long
REPEATS = 5  # repeats per contender (the median of at least 5)


def time_repeat(fn: Callable[[], object], min_seconds: float) -> tuple[int, float, float]:
    """Call ``fn`` until at least ``min_seconds`` have passed: ``(calls, wall s, CPU s)`` (CPU
    time of this process, all threads)."""
    if not min_seconds > 0:
        raise ValueError(f"min_seconds={min_seconds!r}: must be > 0")
    calls, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        calls += 1
        wall = time.perf_counter() - t0
        if wall >= min_seconds:
            return calls, wall, time.process_time() - c0


def time_contenders(
    contenders: Mapping[str, Callable[[], object]],
    *,
    min_seconds: float = MIN_SECONDS,
    repeats: int = REPEATS,
) -> dict[str, dict]:
    """``{name: {"calls": [...], "repeat_s": [...], "seconds_per_call": [...],
    "cpu_seconds_per_call": [...]}}`` (one entry per repeat) for every contender, timed in
    ``repeats`` interleaved rounds of repeats lasting ``>= min_seconds`` each, round r in the
    contenders' order rotated by r (2 cores may favour whoever runs first or last)."""
    if not (isinstance(repeats, int) and repeats >= 1):
        raise ValueError(f"repeats={repeats!r}: must be an integer >= 1")
    if not min_seconds > 0:
        raise ValueError(f"min_seconds={min_seconds!r}: must be > 0")
    for fn in contenders.values():
        fn()  # warm-up
    out = {
        name: {"calls": [], "repeat_s": [], "seconds_per_call": [], "cpu_seconds_per_call": []}
        for name in contenders
    }
    names = list(contenders)
    for r in range(repeats):  # each round starts one contender later: no fixed order effect
        for name in names[r % len(names) :] + names[: r % len(names)]:
            calls, wall, cpu = time_repeat(contenders[name], min_seconds)
            rec = out[name]
            rec["calls"].append(calls)
            rec["repeat_s"].append(wall)
            rec["seconds_per_call"].append(wall / calls)
            rec["cpu_seconds_per_call"].append(cpu / calls)
    return out


def summary(timing: Mapping[str, list], work: float, unit: str) -> dict:
    """Seconds per call and ``work / seconds`` (``{unit}_per_s``) at the min/median/max repeat,
    the number of repeats, the calls of each and the shortest repeat. ``timing`` is one entry of
    :func:`time_contenders`."""
    secs = sorted(timing["seconds_per_call"])
    med = statistics.median(secs)
    return {
        "repeats": len(secs),
        "calls_per_repeat": list(timing["calls"]),
        "repeat_s_min": min(timing["repeat_s"]),
        "seconds_per_call": {"min": secs[0], "median": med, "max": secs[-1]},
        f"{unit}_per_s": {"min": work / secs[-1], "median": work / med, "max": work / secs[0]},
    }


def ratio(
    slow: Mapping[str, list], fast: Mapping[str, list], work: tuple[float, float] = (1.0, 1.0)
) -> dict:
    """How many times faster ``fast`` is than ``slow`` (two entries of :func:`time_contenders`
    doing ``work = (slow's, fast's)`` per call): the ratio of their median seconds per unit of
    work, and the smallest and largest ratio of a round (the rounds pair the two repeats)."""
    (s, f), (ws, wf) = (slow["seconds_per_call"], fast["seconds_per_call"]), work
    rounds = [(a / ws) / (b / wf) for a, b in zip(s, f)]
    return {
        "median": (statistics.median(s) / ws) / (statistics.median(f) / wf),
        "min": min(rounds),
        "max": max(rounds),
    }
