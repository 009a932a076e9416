"""``RunContext.stopwatch``: experiments time blocks through the lab (no clock of their own)."""

from __future__ import annotations

import pytest

from dedebate.lab.experiment import stopwatch
from tests.fakes import FakeContext


def test_stopwatch_adds_up_per_name_also_when_the_block_raises(tmp_path):
    ctx = FakeContext(tmp_path)
    with ctx.stopwatch("fit") as first:
        sum(range(10_000))
    assert first.seconds > 0 and ctx.timings == {"wall_fit_s": first.seconds}
    with pytest.raises(KeyError), ctx.stopwatch("fit") as second:
        raise KeyError("boom")
    assert second.seconds > 0
    assert ctx.timings == {"wall_fit_s": first.seconds + second.seconds}
    with stopwatch("alone") as lap:  # the helper without a run: only the lap
        pass
    assert lap.name == "alone" and lap.seconds >= 0
    with pytest.raises(ValueError, match=r"stopwatch name='a b': use letters, digits and '_'"):
        with ctx.stopwatch("a b"):
            pass
