"""The benchmarks' timing (bench/_timing.py) and listing, by structure only: no speed is asserted
(the machine running the tests is shared), only what each figure is made of."""

from __future__ import annotations

import statistics

import pytest

import bench._timing as timing_mod
from bench._timing import calls_per_repeat, ratio, summary, time_contenders
from dedebate.lab.registry import describe_benchmarks, list_benchmarks


class FakeClock:
    """Stands in for the ``time`` module of bench/_timing.py: a call of a contender made by
    :meth:`work` advances both clocks by exactly its cost, so the timings are exact."""

    def __init__(self):
        self.now = 0.0
        self.order = []

    def perf_counter(self):
        return self.now

    def process_time(self):
        return 2.0 * self.now  # "two busy threads"

    def work(self, name, secs):
        def fn():
            self.order.append(name)
            self.now += secs
        return fn


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(timing_mod, "time", fake)
    return fake


def test_calls_per_repeat_reaches_the_minimum_duration(clock):
    # 1 call lasts 1 ms < 20 ms; the estimate, with a 20% margin, is 24 calls (24 ms >= 20 ms)
    assert calls_per_repeat(clock.work("a", 0.001), 0.02) == 24
    assert clock.order == ["a"] * 25
    assert calls_per_repeat(clock.work("b", 0.5), 0.02) == 1  # one call is long enough
    with pytest.raises(ValueError, match="min_seconds=0"):
        calls_per_repeat(clock.work("c", 0.001), 0)


def test_time_contenders_interleaves_repeats_and_summarises_them(clock):
    timing = time_contenders({"slow": clock.work("slow", 0.004),
                              "fast": clock.work("fast", 0.001)}, min_seconds=0.02, repeats=5)
    assert timing["slow"]["calls_per_repeat"] == 6 and timing["fast"]["calls_per_repeat"] == 24
    for name, secs in (("slow", 0.004), ("fast", 0.001)):
        assert timing[name]["seconds_per_call"] == pytest.approx([secs] * 5)
        assert timing[name]["cpu_seconds_per_call"] == pytest.approx([2 * secs] * 5)
    # after the calibration, the rounds alternate: a repeat of slow, then one of fast, 5 times
    assert clock.order[-5 * 30:] == (["slow"] * 6 + ["fast"] * 24) * 5
    s = summary(timing["fast"], 100.0, "steps")
    secs = s["seconds_per_call"]
    assert s["repeats"] == 5 and s["calls_per_repeat"] == 24
    assert secs["median"] == statistics.median(timing["fast"]["seconds_per_call"])
    assert secs["min"] <= secs["median"] <= secs["max"]
    assert s["steps_per_s"] == {"min": 100.0 / secs["max"], "median": 100.0 / secs["median"],
                                "max": 100.0 / secs["min"]}
    assert s["repeat_s_min"] == pytest.approx(0.024)
    r = ratio(timing["slow"], timing["fast"])
    assert r["median"] == pytest.approx(4.0) and r["min"] <= r["median"] <= r["max"]
    assert r["max"] - r["min"] < 1e-9
    with pytest.raises(ValueError, match="repeats=0"):
        time_contenders({"fast": clock.work("fast", 0.001)}, min_seconds=0.01, repeats=0)


def test_ratio_range_comes_from_the_paired_rounds():
    slow = {"seconds_per_call": [4.0, 8.0, 6.0], "calls_per_repeat": 1}
    fast = {"seconds_per_call": [1.0, 1.0, 3.0], "calls_per_repeat": 1}
    assert ratio(slow, fast) == {"median": 6.0, "min": 2.0, "max": 8.0}


def test_benchmarks_are_listed_with_the_first_line_of_their_docstring():
    fake = describe_benchmarks("tests.fake_experiments.fakebench")
    # helper.py defines no run(), so it is not a benchmark
    assert fake == {"tiny": "A fake benchmark: returns numbers that depend on ``full`` so the "
                            "test can tell them apart."}
    real = describe_benchmarks("bench")
    assert list(real) == list_benchmarks("bench") == ["ogd", "stochastic", "sweep"]
    assert all(d.startswith("Benchmark: ") and "\n" not in d for d in real.values()), real
