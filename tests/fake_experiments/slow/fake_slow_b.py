"""A second slow fake experiment, beside fake_slow_a (the same run under another name)."""

from __future__ import annotations

from tests.fake_experiments.slow.fake_slow_a import SIZES, Config, sleep_and_mark  # noqa: F401

NAME = "fake_slow_b"
TITLE = "Fake experiment: slow (b)"


def run(cfg: Config, ctx):
    return sleep_and_mark(NAME, cfg)
