"""Resume and per-seed curves of the Stackelberg experiment (experiments/stackelberg.py).

A tiny run (2 seeds, 8 A updates in 4 chunks, n_B = 2 and simultaneous play) is interrupted after
its second chunk, then resumed from the Orbax checkpoint in the same directory: every final
number and every logged per-seed curve equals the uninterrupted run's, bit for bit.
"""

from __future__ import annotations

import pytest

import experiments.stackelberg as E
from tests.fakes import Crash, CrashingContext, FakeContext

CFG = E.Config(seeds=2, steps=8, chunks=4, n_b_values=(2,), main_n_b=2, n_trees=2,
               unstable_part=False, warm_seeds=0)


def _numbers(result):
    return ([(c.value, c.lo, c.hi, c.passed) for c in result.claims], result.tables)


@pytest.mark.slow
def test_resumed_run_equals_uninterrupted(tmp_path):
    ref_ctx = FakeContext(tmp_path / "ref", seed=0, name="stackelberg")
    ref = E.run(CFG, ref_ctx)

    root = tmp_path / "crashed"
    with pytest.raises(Crash):
        E.run(CFG, CrashingContext(root, seed=0, name="stackelberg", after=2))
    resumed_ctx = FakeContext(root, seed=0, name="stackelberg", resume=True)
    resumed = E.run(CFG, resumed_ctx)
    assert resumed_ctx.bars[0].n == CFG.chunks  # 2 chunks restored + 2 trained
    assert _numbers(resumed) == _numbers(ref)

    # per-seed curves: one row per A update, keys PART/RUN/seedS/NAME; the resumed run logs only
    # the A updates it trained, with the uninterrupted run's values
    curves = {step: row for step, row in ref_ctx.logged if "part" not in row}
    assert sorted(curves) == list(range(CFG.steps))
    for s in range(CFG.seeds):
        for run in ("nB2", "simultaneous"):
            assert f"stable/{run}/seed{s}/max_adv" in curves[0]
    final = {(r["schedule"], r["seed"]): r["final_u_a"] for r in ref.tables["stable"]}
    for s in range(CFG.seeds):
        assert curves[CFG.steps - 1][f"stable/nB2/seed{s}/payoff"] == final[("n_B = 2", s)]
    half = CFG.steps // 2
    again = {step: row for step, row in resumed_ctx.logged if "part" not in row}
    assert sorted(again) == list(range(half, CFG.steps))
    assert all(again[t] == curves[t] for t in again)
    # the summary rows after training go at explicit steps after the curves', in both runs
    summary = [(step, row["schedule"]) for step, row in resumed_ctx.logged if "part" in row]
    assert summary == [(CFG.steps, "n_B = 2"), (CFG.steps + 1, "simultaneous")]
    assert summary == [(step, row["schedule"]) for step, row in ref_ctx.logged if "part" in row]
