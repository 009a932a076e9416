"""Execute every notebook in ``notebooks/``: a notebook that raises, or whose stored outputs are
not what it prints now, fails.

Every cell of every notebook runs, in order, in ONE ``python3`` kernel started from this
interpreter (jupyter_client replaces the kernelspec's ``python`` with ``sys.executable``; the
first injected cell asserts the kernel runs in this test's environment), with ``MPLBACKEND=Agg``
and W&B quiet: one kernel start and one import of JAX instead of one per notebook. Before each
notebook an injected cell empties the user namespace (``%reset -f``), closes the figures and
enters a fresh temporary working directory, so a notebook sees none of the previous one's
names and nothing is written into the repository. The notebooks assert their own numbers (exact
values, proven bounds); this test also checks that they are stored with the outputs of a run
(plots included), that each intro links the protocol docs, and that each code cell's stored
text (stdout and results, run-dependent parts masked: :data:`MASKS`) is what it prints now, so
stored outputs cannot go stale (``notebooks/save_outputs.py`` stores them again).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import time

import pytest

from tests.conftest import REPO

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow

NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
TIMEOUT_S = 240  # per cell; a notebook takes ~10-30 s on two busy cores

MASKS = (
    (r"\d+\.\d+ s\b", "<seconds> s"),  # wall-clock times
    (r"\d{8}T\d{6}Z|\d{8}_\d{6}", "<time>"),  # time-stamped folder names
    (r"(run id: |offline-run-<time>-)[a-z0-9]{8}\b", r"\1<id>"),  # W&B run ids
    (r"(?<![0-9a-f])[0-9a-f]{20,}(?![0-9a-f])", "<hash>"),  # content hashes, commits
    (r"\b0x[0-9a-f]+\b", "0x<address>"),  # object addresses
)
"""Run-dependent text: ``(pattern, replacement)``, applied to the stored and the fresh outputs
before they are compared."""

KERNEL_CHECK = f"""
import os, sys
assert sys.prefix == {sys.prefix!r}, (sys.executable, sys.prefix)
assert os.environ.get("MPLBACKEND") == "Agg"
"""

# With Agg, plt.show() displays nothing and keeps the figures open: render each one to a file.
SAVE_FIGURES = """
import matplotlib.pyplot as plt
for _n in plt.get_fignums():
    plt.figure(_n).savefig(f"figure-{_n}.png", bbox_inches="tight")
print(len(plt.get_fignums()), "figures")
"""

# Before each notebook: an empty user namespace, no open figure, a fresh working directory.
FRESH_START = """
get_ipython().run_line_magic("reset", "-f")
import os as _os, matplotlib.pyplot as _plt
_plt.close("all")
_os.chdir({cwd!r})
del _os, _plt
assert not [n for n in get_ipython().user_ns if not n.startswith("_")
            and n not in ("In", "Out", "get_ipython", "exit", "quit", "open")], "names left over"
"""


def test_notebooks_exist():
    names = {p.name for p in NOTEBOOKS}
    for want in (
        "00_oracle_machines.ipynb",
        "01_stochastic_debate.ipynb",
        "02_deterministic_debate.ipynb",
        "03_prover_estimator.ipynb",
        "04_ogd_estimator.ipynb",
        "05_sweeps_and_wandb.ipynb",
    ):
        assert want in names


def _repo_files() -> set[str]:
    """Every path under notebooks/, plus the repo-root folders a stray run would create (the
    rest of the tree is left alone: other tests and tools may write there meanwhile)."""
    return {str(p) for p in NOTEBOOK_DIR.rglob("*")} | {
        str(REPO / d) for d in ("runs", "wandb") if (REPO / d).exists()
    }


def _mask(text: str) -> str:
    """``text`` with :data:`MASKS` applied."""
    for pattern, repl in MASKS:
        text = re.sub(pattern, repl, text)
    return text


def _text(cell) -> str:
    """A code cell's stdout and results as one text, run-dependent parts masked (stderr, plots
    and other displays are left out: warnings, progress bars and the backend vary by run)."""
    return _mask(
        "".join(
            o.text if o.output_type == "stream" else o.data.get("text/plain", "")
            for o in cell.outputs
            if (o.output_type == "stream" and o.name == "stdout")
            or o.output_type == "execute_result"
        )
    )


def _stale(name: str, stored: list[str], fresh: list[str]) -> list[str]:
    """The code cells (numbered from 1) whose stored text differs from the fresh one, as diffs."""
    return [
        f"{name}, code cell {i}:\n"
        + "".join(
            difflib.unified_diff(old.splitlines(True), new.splitlines(True), "stored", "fresh")
        )
        for i, (old, new) in enumerate(zip(stored, fresh), 1)
        if old != new
    ]


def test_masks_hide_run_dependent_text_only():
    assert (
        _mask("ran in 15.7 s; p = 0.312 [0.212, 0.434] in 64 debates, 4 seeds at 0x7f3f")
        == "ran in <seconds> s; p = 0.312 [0.212, 0.434] in 64 debates, 4 seeds at 0x<address>"
    )
    assert (
        _mask("plots/a_2_b221afe7c0fde337c78e.png, run id: fbbjkput, run-sequence")
        == "plots/a_2_<hash>.png, run id: <id>, run-sequence"
    )
    line = "offline run: runs/s-sweep-20261201T163043Z/wandb/offline-run-20261201_163044-fbbjkput"
    cell = nbformat.v4.new_code_cell(
        outputs=[nbformat.v4.new_output("stream", name="stdout", text=line)]
    )
    assert _text(cell) == "offline run: runs/s-sweep-<time>/wandb/offline-run-<time>-<id>"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_with_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name}: no code cells"
    # stored with the outputs of a run (notebooks/save_outputs.py), so it reads on a code host
    assert all(c.execution_count is not None for c in code), (
        f"{path.name}: stored without outputs (run notebooks/save_outputs.py)"
    )
    assert any(
        o.output_type == "display_data" and "image/png" in o.get("data", {})
        for c in code
        for o in c.outputs
    ), f"{path.name}: no stored plot"
    assert any(c.cell_type == "markdown" for c in nb.cells[:1]), f"{path.name}: no intro"
    assert "docs/" in nb.cells[0].source, f"{path.name}: the intro links no protocol docs"


def test_every_notebook_executes(tmp_path, monkeypatch):
    """All notebooks, each from a clean copy, one after the other in one kernel."""
    cells = [nbformat.v4.new_code_cell(KERNEL_CHECK)]
    stored, at = {}, {}  # per notebook: its code cells' stored texts, their places in `cells`
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        (tmp_path / path.stem).mkdir()
        cells.append(nbformat.v4.new_code_cell(FRESH_START.format(cwd=str(tmp_path / path.stem))))
        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        stored[path.name] = [_text(nb.cells[i]) for i in code]
        at[path.name] = [len(cells) + i for i in code]
        for i in code:  # execute from a clean copy
            nb.cells[i].outputs, nb.cells[i].execution_count = [], None
        cells += nb.cells + [nbformat.v4.new_code_cell(SAVE_FIGURES)]
        for c in cells:
            c.metadata.setdefault("notebook", path.name)
    for i, c in enumerate(cells):
        c.id = f"cell-{i}"  # unique across the notebooks
    combined = nbformat.v4.new_notebook(cells=cells)

    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.chdir(tmp_path)

    before = _repo_files()
    t0 = time.perf_counter()
    client = nbclient.NotebookClient(
        combined,
        kernel_name="python3",
        timeout=TIMEOUT_S,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    try:
        client.execute()
    finally:
        failed = {
            c.metadata.get("notebook")
            for c in combined.cells
            if c.cell_type == "code"
            for o in c.outputs
            if o.output_type == "error"
        }
        print(f"{len(NOTEBOOKS)} notebooks: {time.perf_counter() - t0:.1f} s; failed: {failed}")
    assert not failed, failed

    for path in NOTEBOOKS:
        figures = sorted((tmp_path / path.stem).glob("figure-*.png"))
        assert figures and all(f.stat().st_size > 1000 for f in figures), (
            f"{path.name}: no plot was produced"
        )
    assert _repo_files() == before, "a notebook wrote into the repository"
    assert os.getcwd() == str(tmp_path)
    stale = [
        d
        for name, idx in at.items()
        for d in _stale(name, stored[name], [_text(combined.cells[i]) for i in idx])
    ]
    assert not stale, (
        "stored outputs differ from a fresh run (store them again: .venv/bin/python "
        "notebooks/save_outputs.py NAME.ipynb):\n" + "\n".join(stale)
    )
