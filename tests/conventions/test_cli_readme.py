"""The README's Python example runs and prints what it says (keeps the README honest)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_readme_python_example_runs():
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    example = next(b for b in blocks if "hoeffding_samples" in b)
    assert len(example.strip().splitlines()) <= 12
    p = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    m = re.fullmatch(
        r"F2: K=2\.0, exact P_M\(1\)=([\d.]+), Monte Carlo ([\d.]+) "
        r"\[([\d.]+), ([\d.]+)\]\n",
        p.stdout,
    )
    assert m, p.stdout
    exact, p_hat, lo, hi = map(float, m.groups())
    assert exact == 0.75  # F2's closed form: the mean of its oracle probabilities
    assert lo <= exact <= hi and lo <= p_hat <= hi
    shown = re.search(r"It prints.*?```text\n(.*?)```", text, flags=re.DOTALL)
    assert shown and shown.group(1) == p.stdout  # the README shows what it prints


def test_readme_sequence_puts_dedebate_at_hand(tmp_path):
    """The README's set-up: after `./dev.sh setup`, activating .venv puts `dedebate` on the PATH,
    and `./dev.sh COMMAND` forwards any dedebate command (here `list`)."""
    venv = Path(sys.prefix)
    stamp = venv / ".dedebate-pyproject.sha256"
    want = hashlib.sha256(
        b"".join((REPO / f).read_bytes() for f in ("pyproject.toml", "constraints.txt"))
    ).hexdigest()
    if not stamp.exists() or stamp.read_text().strip() != want:
        pytest.skip("this environment was not made by ./dev.sh setup (it would reinstall)")
    script = 'source "$V/bin/activate" && command -v dedebate && ./dev.sh list'
    env = {**os.environ, "V": str(venv), "DEDEBATE_VENV": str(venv)}
    p = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert Path(lines[0]) == venv / "bin" / "dedebate"
    assert any(line.startswith("machines\t") for line in lines[1:]), p.stdout
    p = subprocess.run(["bash", "dev.sh"], capture_output=True, text=True, cwd=REPO, check=False)
    assert p.returncode == 2 and "./dev.sh COMMAND ARGS" in p.stderr
    # called from another folder, a command reads its relative paths from there
    (tmp_path / "here").mkdir()
    p = subprocess.run(
        ["bash", str(REPO / "dev.sh"), "ls", "here"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert p.returncode == 0 and "no run, sweep or reproduce directories under here" in p.stderr
