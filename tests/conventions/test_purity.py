"""Pure core, impure shell: no I/O, clocks, printing, global RNG state or ``global`` statements in
``dedebate/`` outside ``dedebate/lab/`` and ``dedebate/cli/`` (the brief's convention)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dedebate
from tests.source_tree import parse

ROOT = Path(dedebate.__file__).resolve().parent
SHELL = {"lab", "cli"}
# The one deliberate import-time side effect: the XLA flag work-around for a jaxlib CPU
# miscompilation (dedebate/_xla_flags.py, tested in tests/lab/test_xla_workaround.py).
ALLOWED_FILES = {"_xla_flags.py"}

FORBIDDEN_CALLS = {"open", "print", "input", "breakpoint"}
FORBIDDEN_MODULES = {
    "time",
    "datetime",
    "subprocess",
    "socket",
    "shutil",
    "tempfile",
    "wandb",
    "orbax",
    "tqdm",
    "logging",
    "requests",
    "urllib",
}
# numpy's global RNG (np.random.seed / rand / ...) is hidden state; np.random.default_rng(seed)
# with an explicit seed is allowed.
NUMPY_GLOBAL_RNG = {
    "seed",
    "rand",
    "randn",
    "randint",
    "random",
    "choice",
    "shuffle",
    "permutation",
    "normal",
    "uniform",
    "binomial",
}


def core_files() -> list[Path]:
    out = []
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT)
        if rel.parts[0] in SHELL or rel.name in ALLOWED_FILES:
            continue
        out.append(p)
    return out


def violations(path: Path) -> list[str]:
    tree = parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Global):
            found.append(f"{where}: global statement")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"{where}: imports {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"{where}: imports from {node.module}")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in FORBIDDEN_CALLS:
                found.append(f"{where}: calls {f.id}()")
            elif (
                isinstance(f, ast.Attribute)
                and f.attr in NUMPY_GLOBAL_RNG
                and isinstance(f.value, ast.Attribute)
                and f.value.attr == "random"
                and isinstance(f.value.value, ast.Name)
                and f.value.value.id in {"np", "numpy"}
            ):
                found.append(f"{where}: numpy global RNG np.random.{f.attr}()")
            elif (
                isinstance(f, ast.Attribute)
                and f.attr in {"putenv", "system", "remove"}
                and isinstance(f.value, ast.Name)
                and f.value.id == "os"
            ):
                found.append(f"{where}: calls os.{f.attr}()")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            v = node.value
            if (
                isinstance(v, ast.Attribute)
                and v.attr == "environ"
                and isinstance(v.value, ast.Name)
                and v.value.id == "os"
            ):
                found.append(f"{where}: writes os.environ")
    return found


def test_core_files_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in core_files()}
    assert "protocols/stochastic.py" in names and "core/binomial.py" in names
    assert not any(n.startswith(("lab/", "cli/")) for n in names)


@pytest.mark.parametrize("path", core_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_core_module_is_pure(path):
    assert violations(path) == []


def test_the_checker_catches_impurity(tmp_path, monkeypatch):
    src = (
        "import time\nimport numpy as np\nglobal_x = 0\n"
        "def f():\n    global global_x\n    print(time.time())\n    np.random.seed(0)\n"
        "    open('x')\n    import os\n    os.environ['A'] = '1'\n"
    )
    monkeypatch.setattr("tests.conventions.test_purity.ROOT", tmp_path)
    bad = tmp_path / "probe.py"
    bad.write_text(src)
    kinds = " ".join(violations(bad))
    for what in (
        "imports time",
        "global statement",
        "calls print()",
        "np.random.seed",
        "calls open()",
        "writes os.environ",
    ):
        assert what in kinds, (what, kinds)
