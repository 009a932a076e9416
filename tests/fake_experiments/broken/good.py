"""A fine experiment next to a broken one."""

from tests.fake_experiments.fake_fail import SIZES, Config, run  # noqa: F401

NAME = "broken_good"
TITLE = "Fake experiment beside a broken module"
