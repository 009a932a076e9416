"""A second slow fake experiment, beside fake_slow_a (the same run under another name)."""

from __future__ import annotations

from tests.fake_experiments.slow.fake_slow_a import (  # noqa: F401
    SIZES,
    Config,
    report,
    sleep_and_mark,
)

NAME = "fake_slow_b"
TITLE = "Fake experiment: slow (b)"


def host(cfg: Config, seed: int, key, measured) -> None:
    """Sleep, marking the start and the end under this experiment's name."""
    sleep_and_mark(NAME, cfg)
