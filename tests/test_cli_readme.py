"""The README's Python example runs and prints what it says (keeps the README honest)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO


def test_readme_python_example_runs():
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    example = next(b for b in blocks if "hoeffding_samples" in b)
    assert len(example.strip().splitlines()) <= 12
    p = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True,
                       timeout=300, cwd=REPO, check=False)
    assert p.returncode == 0, p.stderr
    m = re.fullmatch(r"F2: K=2\.0, exact P_M\(1\)=([\d.]+), Monte Carlo ([\d.]+) "
                     r"\[([\d.]+), ([\d.]+)\]\n", p.stdout)
    assert m, p.stdout
    exact, p_hat, lo, hi = map(float, m.groups())
    assert exact == 0.75  # F2's closed form: the mean of its oracle probabilities
    assert lo <= exact <= hi and lo <= p_hat <= hi
