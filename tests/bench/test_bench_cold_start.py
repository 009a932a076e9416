"""``dedebate bench cold_start``: cold quick reproduces in subprocesses, each with an empty compile
cache and its own output directory (removed afterwards), reported run by run and as median, min
and max. The subprocess runs here use the fake experiments, so a run takes seconds."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest

from bench import cold_start


def _leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("dedebate-cold-start-*")}


def test_a_run_is_the_command_with_a_fresh_cache_and_leaves_nothing(fake_env):
    before = _leftovers()
    out = cold_start.run(runs=1, only=["fake_pass", "fake_fail"])
    assert out["command"] == "dedebate reproduce --quick --only fake_pass fake_fail"
    (rec,) = out["runs"]
    # fake_fail fails a claim: exit 1, and the report's counts say which
    assert rec["exit_code"] == 1 and rec["passed"] is False
    assert rec["claims_total"] > rec["claims_passed"] >= 1
    assert rec["wall_s"] > 0 and math.isfinite(rec["load_before"])
    assert rec["busy_cpu_s"] is None or rec["busy_cpu_s"] > 0
    assert out["wall_s"] == {"median": rec["wall_s"], "min": rec["wall_s"], "max": rec["wall_s"]}
    assert out["all_passed"] is False
    assert _leftovers() == before  # the cache and the output are gone


def test_runs_are_summarised_by_median_min_max_against_the_goal(monkeypatch):
    walls = iter([70.0, 50.0, 58.0, 30.0, 61.0, 90.0, 3.0, 4.0])
    codes = iter([0, 0, 0, 0, None, 0, 2, 2])

    def fake_run(only):
        code = next(codes)
        done = code in (0, 1)  # a report written (its claims counted)
        return {
            "wall_s": next(walls),
            "exit_code": code,
            "busy_cpu_s": 100.0,
            "passed": code == 0,
            "claims_total": 20 if done else None,
        }

    monkeypatch.setattr(cold_start, "one_run", fake_run)
    out = cold_start.run()  # three runs
    assert out["wall_s"] == {"median": 58.0, "min": 50.0, "max": 70.0}
    assert out["median_meets_goal"] is True and out["all_passed"] is True
    # a run that timed out is left out of the walls, and then the goal is not met, although the
    # median of the others (60 s) is within it
    out = cold_start.run(runs=3)
    assert out["wall_s"] == {"median": 60.0, "min": 30.0, "max": 90.0}
    assert out["median_meets_goal"] is False and out["all_passed"] is False
    # runs that crashed (exit 2, no report) are not cold starts: no figure, goal not met (their
    # 3 and 4 s made a median "within the goal")
    out = cold_start.run(runs=2)
    assert out["wall_s"] == {"median": None, "min": None, "max": None}
    assert (out["timed_runs"], out["median_meets_goal"], out["all_passed"]) == (0, False, False)


def test_a_run_past_its_timeout_is_killed_with_everything_it_started(fake_env):
    before = _leftovers()
    rec = cold_start.one_run(["fake_pass"], timeout_s=0.5)
    assert rec["exit_code"] is None and rec["passed"] is None and rec["wall_s"] < 30
    assert _leftovers() == before


def test_a_bad_number_of_runs_is_refused():
    with pytest.raises(ValueError, match=r"runs=0: need an integer >= 1"):
        cold_start.run(runs=0)
