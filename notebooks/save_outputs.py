"""Execute every notebook here and store it with its outputs (plots inline), as committed.

Run from the repository root with the project's interpreter:
``.venv/bin/python notebooks/save_outputs.py [NAME.ipynb ...]``. Each notebook runs in a fresh
kernel in a temporary working directory (nothing is written into the repository); W&B stays
offline and quiet. ``tests/conventions/test_notebooks.py`` executes them again and checks that
they carry outputs and that each cell's stored text is what it prints now (timings and other
run-dependent text masked): store a notebook again whenever its code, or what it calls, changes
its output.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbclient
import nbformat

HERE = Path(__file__).resolve().parent


def save(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        client = nbclient.NotebookClient(
            nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": tmp}}
        )
        client.execute()
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
    print(f"{path.name}: saved with outputs", flush=True)


def main(names: list[str]) -> int:
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.pop("WANDB_MODE", None)
    os.environ.pop("MPLBACKEND", None)  # the notebook's inline backend: plots become outputs
    paths = [HERE / n for n in names] if names else sorted(HERE.glob("*.ipynb"))
    for path in paths:
        save(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
