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


def host(cfg: Config, seed: int, key, measured) -> dict:
    """Who started this process (spawned or forked), the cores it may use, a compile cache
    setting, and a variable the tests set."""
    import jax

    return {
        "parent_pid": os.getppid(),
        "cores": sorted(os.sched_getaffinity(0)),
        "cache_min_secs": jax.config.jax_persistent_cache_min_compile_time_secs,
        "mark": os.environ.get("DEDEBATE_TEST_MARK", ""),
    }


def report(cfg: Config, measured, host: dict) -> ExperimentResult:
    """The value is three; the host's facts as metrics; the value as a logged table row."""
    return ExperimentResult(
        claims=[
            Claim.exact("value is three", "fake lemma 3", "== 3", cfg.value, passed=cfg.value == 3)
        ],
        metrics=host,
        tables={"value": [{"value": cfg.value}]},
    )
