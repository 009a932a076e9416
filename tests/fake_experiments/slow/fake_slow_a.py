"""A fake experiment that sleeps in its host step, marking its start and its end (its results) in
a folder."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from dedebate.lab.experiment import Claim, ExperimentResult

NAME = "fake_slow_a"
TITLE = "Fake experiment: slow (a)"


@dataclasses.dataclass(frozen=True)
class Config:
    seconds: float = dataclasses.field(default=4.0, metadata={"doc": "how long it sleeps"})


SIZES = {"quick": {}, "full": {}}


def host(cfg: Config, seed: int, key, measured) -> None:
    """Sleep, marking the start and the end under this experiment's name."""
    sleep_and_mark(NAME, cfg)


def sleep_and_mark(name: str, cfg: Config) -> None:
    """Mark the start, sleep, mark the end (these experiments' results)."""
    marks = Path(os.environ["DEDEBATE_TEST_MARK_DIR"])
    (marks / f"started-{name}").write_text(str(os.getpid()))
    time.sleep(float(os.environ.get("DEDEBATE_TEST_SLEEP_S", cfg.seconds)))
    (marks / f"finished-{name}").write_text(str(os.getpid()))


def report(cfg: Config, measured, host) -> ExperimentResult:
    """One passing row: it slept."""
    return ExperimentResult(claims=[Claim.exact("slept", "fake lemma", "== 1", 1, passed=True)])
