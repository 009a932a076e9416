"""The library is general: what serves one experiment lives in it (``experiments/NAME/``). A module of ``dedebate/`` outside the lab and the command line takes explicit typed arguments,
never an experiment's ``Config`` (no parameter ``spec``, ``cfg`` or ``config`` that is unannotated
or annotated with a ``...Config``), and builds no report: no function named ``*_rows``,
``*_table`` or ``*_claims`` and no ``Claim`` (imported or constructed)."""  # noqa: E501

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conventions.test_layers import ROOT, imports
from tests.source_tree import parse

SHELLS = ("lab", "cli")  # the impure shell and the command line build reports
CONFIG_PARAMS = {"spec", "cfg", "config"}
REPORT_SUFFIXES = ("_rows", "_table", "_claims")
# Functions whose name reads like a report's but that are general: truth tables of Boolean
# functions and rows of a matrix, no report rows.
GENERAL = {
    "core/binomial_fast.py:_lane_rows": "the rows of a lane matrix",
    "core/binomial_fast.py:_gathered_rows": "the rows of a lane matrix",
    "core/bits.py:bit_table": "the bits of 0..2^n - 1, a truth table's inputs",
    "core/simplex.py:project_rows": "every row of a matrix onto the simplex",
    "trees/library.py:threshold_table": "an aggregation's truth table",
    "trees/library.py:and_table": "an aggregation's truth table",
    "trees/library.py:or_table": "an aggregation's truth table",
    "trees/library.py:majority_table": "an aggregation's truth table",
    "trees/library.py:parity_table": "an aggregation's truth table",
    "trees/library.py:dictator_table": "an aggregation's truth table",
    "trees/stability.py:error_shifting_table": "the error-shifting LP's table of every child code",
    "trees/tree.py:md_table": "M_D(z) of every truth pattern z, a truth table",
}


def _config_typed(annotation: ast.expr | None) -> bool:
    """No annotation, or one that names a ``...Config`` (``Config``, ``lab.Config``, a string)."""
    if annotation is None:
        return True
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    return any(
        (isinstance(n, ast.Name) and n.id.endswith("Config"))
        or (isinstance(n, ast.Attribute) and n.attr.endswith("Config"))
        for n in ast.walk(annotation)
    )


def problems(source: str, rel: Path) -> list[str]:
    """Where the module at ``rel`` (relative to dedebate/) serves an experiment rather than the
    library: a Config-like parameter, a report-row builder, ``Claim``."""
    where, found = f"dedebate/{rel.as_posix()}", set()
    for node in ast.walk(parse(source, where)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = node.name
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                if arg.arg in CONFIG_PARAMS and _config_typed(arg.annotation):
                    found.add(
                        (
                            node.lineno,
                            f"{name} takes {arg.arg} (an experiment's Config?): "
                            "take explicit typed arguments",
                        )
                    )
            if name.endswith(REPORT_SUFFIXES) and f"{rel.as_posix()}:{name}" not in GENERAL:
                found.add((node.lineno, f"{name} builds report rows: move it to its experiment"))
        elif (
            isinstance(node, ast.Name)
            and node.id == "Claim"
            or isinstance(node, ast.Attribute)
            and node.attr == "Claim"
        ):
            found.add((node.lineno, "uses Claim: report rows belong to an experiment"))
    found |= {
        (line, "imports Claim: report rows belong to an experiment")
        for line, name in imports(source, rel)
        if name.rsplit(".", 1)[-1] == "Claim"
    }
    return [f"{where}:{line}: {what}" for line, what in sorted(found)]


LIBRARY_FILES = sorted(p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] not in SHELLS)


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_library_module_serves_no_single_experiment(path):
    assert problems(path.read_text(), path.relative_to(ROOT)) == []


def test_every_general_name_is_still_there():
    for key in sorted(GENERAL):
        rel, name = key.split(":")
        tree = parse((ROOT / rel).read_text(), rel)
        assert name in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, (
            f"{key}: gone, drop its entry"
        )


@pytest.mark.parametrize(
    "rel, source, problem",
    [
        ("training/fake.py", "def setup(cfg):\n    return cfg.seeds\n", "setup takes cfg"),
        ("agents/fake.py", "def zoo(spec, d):\n    return spec.T\n", "zoo takes spec"),
        ("exact/fake.py", "def f(config: Config) -> int: ...\n", "f takes config"),
        ("exact/fake.py", "def f(*, cfg: 'exp.Config'): ...\n", "f takes cfg"),
        (
            "core/fake.py",
            "class C:\n    def of(self, cfg):\n        return cfg.n\n",
            "of takes cfg",
        ),
        (
            "trees/fake.py",
            "def fbs_rows(qs):\n    return [{'q': q} for q in qs]\n",
            "fbs_rows builds report rows",
        ),
        ("agents/fake.py", "def cost_table(m): ...\n", "cost_table builds report rows"),
        ("protocols/fake.py", "def _claims(a): ...\n", "_claims builds report rows"),
        (
            "estimators/fake.py",
            "def f():\n    from dedebate.lab.claims import Claim\n",
            "imports Claim",
        ),
        (
            "training/fake.py",
            "import lab\nc = lab.Claim.exact('x', 's', '>= 0', 1.0, True)\n",
            "uses Claim",
        ),
        ("machines/fake.py", "def f(rows):\n    return [Claim(r) for r in rows]\n", "uses Claim"),
    ],
)
def test_a_module_that_serves_an_experiment_is_reported(rel, source, problem):
    found = problems(source, Path(rel))
    assert len(found) == 1 and found[0].startswith(f"dedebate/{rel}:"), found
    assert problem in found[0], found


def test_a_general_module_passes():
    source = (
        "from dedebate.protocols.stochastic import DebateStatic\n"
        "def play(spec: DebateStatic, cfg: jax.Array, config: 'Settings'): ...\n"
        "def table(rows): ...\n"
    )
    assert problems(source, Path("protocols/fake.py")) == []
    assert problems("def and_table(q): ...\n", Path("trees/library.py")) == []
