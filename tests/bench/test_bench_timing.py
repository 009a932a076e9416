"""The benchmarks' timing (bench/_timing.py) and listing, by structure only: no speed is asserted
(the machine running the tests is shared), only what each figure is made of."""

from __future__ import annotations

import ast
import os

import pytest

import bench._timing as timing_mod
from bench._timing import ratio, summary, time_contenders, time_repeat
from dedebate.lab.registry import describe_benchmarks
from tests.conftest import REPO
from tests.source_tree import parse


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


MS = 2.0**-10  # a "millisecond" that adds up exactly in binary floating point


def test_a_repeat_lasts_at_least_the_minimum_duration(clock):
    assert time_repeat(clock.work("a", MS), 20 * MS) == (20, 20 * MS, 40 * MS)
    assert time_repeat(clock.work("b", 0.5), 20 * MS) == (1, 0.5, 1.0)  # one call is enough
    assert clock.order == ["a"] * 20 + ["b"]
    with pytest.raises(ValueError, match="min_seconds=0"):
        time_repeat(clock.work("c", MS), 0)


def test_time_contenders_interleaves_repeats_and_summarises_them(clock):
    timing = time_contenders(
        {"slow": clock.work("slow", 4 * MS), "fast": clock.work("fast", MS)},
        min_seconds=20 * MS,
        repeats=5,
    )
    for name, secs, calls in (("slow", 4 * MS, 5), ("fast", MS, 20)):
        t = timing[name]
        assert t["calls"] == [calls] * 5 and t["repeat_s"] == [20 * MS] * 5
        assert t["seconds_per_call"] == [secs] * 5
        assert t["cpu_seconds_per_call"] == [2 * secs] * 5
    # one warm-up call each, then the rounds interleave, each round starting one contender later
    # (a fixed order favoured one side on 2 cores; an audit of the benchmarks)
    slow, fast = ["slow"] * 5, ["fast"] * 20
    assert clock.order == ["slow", "fast"] + (slow + fast + fast + slow) * 2 + slow + fast
    s = summary(timing["fast"], 100.0, "steps")
    assert s == {
        "repeats": 5,
        "calls_per_repeat": [20] * 5,
        "repeat_s_min": 20 * MS,
        "seconds_per_call": {"min": MS, "median": MS, "max": MS},
        "steps_per_s": {"min": 100 / MS, "median": 100 / MS, "max": 100 / MS},
    }
    assert ratio(timing["slow"], timing["fast"]) == {"median": 4.0, "min": 4.0, "max": 4.0}
    with pytest.raises(ValueError, match="repeats=0"):
        time_contenders({"fast": clock.work("fast", MS)}, min_seconds=0.01, repeats=0)


def test_summary_reports_min_median_max_over_uneven_repeats():
    t = {"calls": [1, 2, 4], "repeat_s": [0.6, 0.5, 0.8], "seconds_per_call": [0.6, 0.25, 0.2]}
    s = summary(t, 3.0, "steps")
    assert s["seconds_per_call"] == {"min": 0.2, "median": 0.25, "max": 0.6}
    assert s["steps_per_s"] == {"min": 5.0, "median": 12.0, "max": 15.0}
    assert s["repeat_s_min"] == 0.5 and s["calls_per_repeat"] == [1, 2, 4]


def test_ratio_range_comes_from_the_paired_rounds():
    slow = {"seconds_per_call": [4.0, 8.0, 6.0], "calls_per_repeat": 1}
    fast = {"seconds_per_call": [1.0, 1.0, 3.0], "calls_per_repeat": 1}
    assert ratio(slow, fast) == {"median": 6.0, "min": 2.0, "max": 8.0}
    # per unit of work where the two do different amounts (slow 2 units a call, fast 4)
    assert ratio(slow, fast, work=(2, 4)) == {"median": 12.0, "min": 4.0, "max": 16.0}


def test_the_ogd_bench_times_numpy_on_a_prefix_of_dedebates_updates():
    from bench import ogd

    out = ogd.run(n_x=2000, steps=6, numpy_steps=3, min_seconds=0.01, repeats=1)
    assert (out["steps"], out["numpy_steps"]) == (6, 3) and out["same_test_sequence"]
    assert out["ratio"] == pytest.approx(out["dedebate_steps_per_s"] / out["numpy_steps_per_s"])
    assert out["timed_steps"] == {"dedebate": 3, "numpy": 3}
    assert out["dedebate_max_abs_adv_after_numpy_steps"] == pytest.approx(
        out["numpy_max_abs_adv_after_numpy_steps"], rel=1e-4
    )


def test_the_ogd_bench_times_both_sides_on_calls_of_the_same_structure(monkeypatch):
    """Each call pays a fixed cost (the initial advantages): the timed calls of both sides take
    the same number of updates, or the side with more updates per call looks faster."""
    from bench import ogd

    taken = {}

    def fake_time_contenders(contenders, **kw):
        for name, fn in contenders.items():
            out = fn()
            taken[name] = int(out.steps) if name == "dedebate" else int(out[1])
        return {
            name: {
                "calls": [1],
                "repeat_s": [1.0],
                "seconds_per_call": [1.0],
                "cpu_seconds_per_call": [1.0],
            }
            for name in contenders
        }

    monkeypatch.setattr(ogd, "time_contenders", fake_time_contenders)
    out = ogd.run(n_x=2000, steps=6, numpy_steps=3, min_seconds=0.01, repeats=1)
    assert taken == {"dedebate": 3, "numpy": 3}
    assert out["ratio"] == 1.0 and out["ratio_cpu_time"] == 1.0  # equal times, equal work


def test_benchmarks_are_listed_with_the_first_line_of_their_docstring():
    fake = describe_benchmarks("tests.fake_experiments.fakebench")
    # helper.py defines no run(), so it is not a benchmark
    assert fake == {
        "tiny": "A fake benchmark: returns numbers that depend on ``full`` so the "
        "test can tell them apart."
    }
    # the real benchmarks (read without importing them: a cheap test): each module that defines
    # run() opens its docstring with a one-line description
    for path in sorted((REPO / "bench").glob("[!_]*.py")):
        tree = parse(path.read_text(), str(path))
        if any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
            first = (ast.get_docstring(tree) or "").splitlines()[0]
            assert first.startswith("Benchmark: ") and first.endswith("."), (path.name, first)


def test_a_worker_runs_in_a_fresh_process_from_any_folder(tmp_path, monkeypatch):
    """``run_worker`` finds the package from outside the checkout (PYTHONPATH), passes the
    environment and arguments, and returns the last line's JSON; a failing worker raises."""
    from bench._worker import run_worker

    monkeypatch.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["DEDEBATE_TEST_MARK"] = "seen"
    out = run_worker("tests.echo_worker", ["8", "0.5"], env, timeout=60)
    assert out == {"args": ["8", "0.5"], "mark": "seen"}
    with pytest.raises(RuntimeError, match="failed on purpose"):
        run_worker("tests.echo_worker", ["--fail"], env, timeout=60)
