"""Shared fixtures. Nothing here is autouse: each test asks for what it needs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import dedebate  # noqa: F401  (sets the XLA CPU work-around before any test starts JAX)

REPO = Path(__file__).resolve().parents[1]
FAKE_EXPERIMENTS = "tests.fake_experiments"
FAKE_BENCH = "tests.fake_experiments.fakebench"


@pytest.fixture
def fake_env(monkeypatch):
    """Point the lab at the fake experiments and benchmarks; W&B quiet, WANDB_MODE unset."""
    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", FAKE_EXPERIMENTS)
    monkeypatch.setenv("DEDEBATE_BENCH", FAKE_BENCH)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("DEDEBATE_JOBS", "1")  # reproduce in the test process, no worker processes
    return monkeypatch


@pytest.fixture
def fake_registry():
    from dedebate.lab.registry import discover_experiments

    return discover_experiments([FAKE_EXPERIMENTS])


@pytest.fixture
def cli_env():
    """Environment for ``python -m dedebate.cli`` subprocesses that use the fakes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["DEDEBATE_EXPERIMENTS"] = FAKE_EXPERIMENTS
    env["DEDEBATE_BENCH"] = FAKE_BENCH
    env["WANDB_SILENT"] = "true"
    env.pop("WANDB_MODE", None)
    env["DEDEBATE_JOBS"] = "1"  # reproduce in the CLI process, no worker processes
    env["PYTHON"] = sys.executable
    # The CLI's persistent compilation cache stays out of the user's cache directory in tests
    # (tests/test_lab_compile_cache.py turns it on explicitly, in a tmp directory).
    env["DEDEBATE_COMPILE_CACHE"] = "off"
    return env
