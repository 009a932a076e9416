"""A fine experiment next to a broken one."""

from tests.fake_experiments.fake_fail import SIZES, Config, report  # noqa: F401

NAME = "broken_good"
TITLE = "Fake experiment beside a broken module"
