"""A fake experiment with one failing claim (a claim that is false by construction)."""

from __future__ import annotations

import dataclasses

from dedebate.lab.experiment import Claim, ExperimentResult

NAME = "fake_fail"
TITLE = "Fake experiment: one claim fails"


@dataclasses.dataclass(frozen=True)
class Config:
    value: float = dataclasses.field(default=0.25, metadata={"doc": "the measured value"})


SIZES = {"quick": {}, "full": {}}


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The value against two bounds, and a one-row table (the lab logs it)."""
    return ExperimentResult(
        claims=[
            Claim.exact(
                "value at least one half",
                "fake theorem 9",
                ">= 0.5",
                cfg.value,
                passed=cfg.value >= 0.5,
                note="fails | by design",
            ),
            Claim.exact(
                "value positive", "fake theorem 10", "> 0", cfg.value, passed=cfg.value > 0
            ),
        ],
        tables={"value": [{"value": cfg.value}]},
    )
