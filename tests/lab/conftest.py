"""Fixtures shared by the lab's tests."""

from __future__ import annotations

import sys

import pytest

from tests.fakes import FakeWandb


@pytest.fixture
def fake_wandb(monkeypatch):
    """A recording stand-in for the ``wandb`` module (:class:`FakeWandb`), offline by default."""
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    return fake
