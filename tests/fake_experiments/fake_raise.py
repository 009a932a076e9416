"""A fake experiment that raises in the middle of its run."""

from __future__ import annotations

import dataclasses

NAME = "fake_raise"
TITLE = "Fake experiment: raises"
TYPICAL_SECONDS = 5.0  # the longest of the fakes: reproduce with workers starts it first


@dataclasses.dataclass(frozen=True)
class Config:
    at: int = dataclasses.field(default=1, metadata={"doc": "the step that raises"})


SIZES = {"quick": {}, "full": {}}


def run(cfg: Config, ctx):
    for i in range(cfg.at + 1):
        ctx.log({"i": i}, step=i)
    raise RuntimeError(f"boom at step {cfg.at}")
