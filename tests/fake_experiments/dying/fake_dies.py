"""A fake experiment whose process is killed (SIGKILL) in the middle of its run: the lab's chunked
driver logs a row per chunk, and the chunk after step ``at`` kills the process."""

from __future__ import annotations

import dataclasses
import os
import signal

from dedebate.lab.experiment import Chunks

NAME = "fake_dies"
TITLE = "Fake experiment: its process is killed"


@dataclasses.dataclass(frozen=True)
class Config:
    at: int = dataclasses.field(default=1, metadata={"doc": "the step at which it dies"})


SIZES = {"quick": {}, "full": {}}


def chunks(cfg: Config, key) -> Chunks:
    """Chunks ``0 .. at`` log ``{"i": c}``; the next one kills the process."""

    def chunk(state, c):
        if c > cfg.at:
            os.kill(os.getpid(), signal.SIGKILL)
        return state, None

    return Chunks(
        init_state={},
        chunk=chunk,
        n_chunks=cfg.at + 2,
        every=cfg.at + 3,
        log_rows=lambda c, state, _: [(c, {"i": c})],
    )


def report(cfg: Config, measured, host):
    """Never reached: the process died."""
    raise AssertionError("fake_dies' process dies before its report")
