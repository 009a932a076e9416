"""A fake experiment that raises in the middle of its run: the lab's chunked driver logs a row per
chunk, and the chunk after step ``at`` raises."""

from __future__ import annotations

import dataclasses

from dedebate.lab.experiment import Chunks, ExperimentResult

NAME = "fake_raise"
TITLE = "Fake experiment: raises"
TYPICAL_SECONDS = 5.0  # the longest of the fakes: reproduce with workers starts it first


@dataclasses.dataclass(frozen=True)
class Config:
    at: int = dataclasses.field(default=1, metadata={"doc": "the step that raises"})


SIZES = {"quick": {}, "full": {}}


def chunks(cfg: Config, key) -> Chunks:
    """Chunks ``0 .. at`` log ``{"i": c}``; the next one raises (no checkpoint before it)."""

    def chunk(state, c):
        if c > cfg.at:
            raise RuntimeError(f"boom at step {cfg.at}")
        return state, None

    return Chunks(
        init_state={},
        chunk=chunk,
        n_chunks=cfg.at + 2,
        every=cfg.at + 3,
        log_rows=lambda c, state, _: [(c, {"i": c})],
    )


def report(cfg: Config, measured, host) -> ExperimentResult:
    """Never reached: the run raised."""
    raise AssertionError("fake_raise's run raises before its report")
