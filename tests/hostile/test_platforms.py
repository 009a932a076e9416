"""A platform JAX cannot start (``JAX_PLATFORMS=cuda`` on a machine without a GPU) is one line
and exit 2 before any run directory exists, in every command that starts JAX."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize(
    "argv",
    [
        ["doctor"],
        ["run", "fake_pass", "size=quick", "output_dir={out}", "tracking.mode=disabled"],
        ["reproduce", "--quick", "--only", "fake_pass", "--output-dir", "{out}"],
        ["bench", "tiny", "--out", "{out}/tiny.json"],
    ],
)
def test_a_platform_jax_cannot_start_is_one_line(tmp_path, cli_env, argv):
    env = {**cli_env, "JAX_PLATFORMS": "nosuchplatform"}
    p = subprocess.run(
        [sys.executable, "-m", "dedebate.cli", *(a.format(out=tmp_path) for a in argv)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert (
        p.stderr.startswith(
            "dedebate: error: JAX_PLATFORMS='nosuchplatform': JAX cannot start it here ("
        )
        and len(p.stderr.splitlines()) == 1
    ), p.stderr
    assert list(tmp_path.iterdir()) == []
