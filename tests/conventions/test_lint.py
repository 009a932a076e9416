"""The tree is lint-clean under ruff (configured in pyproject.toml), so CI catches it; the
suite's file order (``conftest.HEAVY_FIRST``) names real files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_ruff_check_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.fail(
            "ruff is not installed: it is part of the test extras (pip install -e '.[test]')"
        )
    proc = subprocess.run(
        [ruff, "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_heavy_first_names_existing_test_files():
    """``conftest.HEAVY_FIRST`` orders the run by folder and name: a moved, renamed or removed file
    would silently fall back to collection order, so every entry must be a test file here."""
    from tests.conftest import HEAVY_FIRST

    assert len(set(HEAVY_FIRST)) == len(HEAVY_FIRST)
    assert [n for n in HEAVY_FIRST if not (REPO / "tests" / n).is_file()] == []
