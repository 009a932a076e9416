"""A fake experiment whose process is killed (SIGKILL) in the middle of its run."""

from __future__ import annotations

import dataclasses
import os
import signal

NAME = "fake_dies"
TITLE = "Fake experiment: its process is killed"


@dataclasses.dataclass(frozen=True)
class Config:
    at: int = dataclasses.field(default=1, metadata={"doc": "the step at which it dies"})


SIZES = {"quick": {}, "full": {}}


def run(cfg: Config, ctx):
    for i in range(cfg.at + 1):
        ctx.log({"i": i}, step=i)
    os.kill(os.getpid(), signal.SIGKILL)
