"""A fake experiment with one exact passing claim, run beside one whose process dies."""

from __future__ import annotations

import dataclasses
import os

from dedebate.lab.experiment import Claim, ExperimentResult

NAME = "fake_survives"
TITLE = "Fake experiment: passes beside a killed one"


@dataclasses.dataclass(frozen=True)
class Config:
    value: int = dataclasses.field(default=3, metadata={"doc": "the measured value"})


SIZES = {"quick": {}, "full": {}}


def run(cfg: Config, ctx) -> ExperimentResult:
    ctx.log({"value": cfg.value})
    return ExperimentResult(claims=[
        Claim.exact("value is three", "fake lemma 3", "== 3", cfg.value,
                    passed=cfg.value == 3)],
        # who started its process (spawned or forked), and an environment variable the tests set
        metrics={"parent_pid": os.getppid(), "mark": os.environ.get("DEDEBATE_TEST_MARK", "")})
