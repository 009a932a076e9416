"""Imports go one way: core <- {machines, trees} <- protocols <- agents <- {estimators, exact,
training} <- experiments (outside ``dedebate/``). Inside the top layer, training may use
estimators and exact, never the reverse. The lab is the impure shell beside them: no debate
package imports ``dedebate.lab``, and the lab imports no debate package (only ``dedebate`` itself,
for ``__version__``); the command line (``dedebate/cli/``) may import anything, and nothing of
dedebate imports it. Any layer and the lab may import ``dedebate.programs``, the one home of
execution policy (``jit``, XLA option sets, compiled-program caches); it imports only
``dedebate._xla_flags`` (the one reader of ``XLA_FLAGS``, imported by it and ``dedebate/__init__``
only). No other module of ``dedebate/`` or ``experiments/`` uses ``jax.jit``, passes
``compiler_options=`` or caches with ``functools``. Function-level imports count. No module of
``dedebate/`` takes part in an import cycle, at import time or through a function-level import."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import dedebate
from tests.source_tree import parse

ROOT = Path(dedebate.__file__).resolve().parent
LAYERS = (
    ("core",),
    ("machines", "trees"),
    ("protocols",),
    ("agents",),
    ("estimators", "exact", "training"),
)
RANK = {pkg: rank for rank, layer in enumerate(LAYERS) for pkg in layer}
PEER_IMPORTS = {("training", "estimators"), ("training", "exact")}  # within a layer, one way
SHELL = "lab"
CLI = "cli"  # the command line: may import any unit; nothing of dedebate imports it
ANY_LAYER = {"programs"}  # what every debate package and the lab may import besides lower layers
# Top-level modules of dedebate/ and the units they may import ("" = the package itself).
TOP_LEVEL = {"__init__": {"", "_xla_flags"}, "_xla_flags": set(), "programs": {"_xla_flags"}}
OUTSIDE = {
    "experiments",
    "dedebate_experiments",
    "bench",
    "dedebate_bench",
    "dedebate_configs",
    "tests",
    "notebooks",
}


def module_name(rel: Path) -> str:
    """``protocols/stochastic.py`` -> ``dedebate.protocols.stochastic`` (a package: its name)."""
    parts = ("dedebate",) + rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(name: str) -> str | None:
    """The layering unit of a dotted module name: a package or top-level module of dedebate/
    (``""`` for ``dedebate`` itself or a name it defines), ``"outside"`` for the experiments,
    benchmarks and tests, None for a third-party module."""
    parts = name.split(".")
    if parts[0] in OUTSIDE:
        return "outside"
    if parts[0] != "dedebate":
        return None
    if len(parts) > 1 and (parts[1] in RANK or parts[1] in {*TOP_LEVEL, SHELL, CLI}):
        return parts[1]
    return ""


def _nodes(tree: ast.AST, top_level: bool):
    """Every node, or (``top_level``) those not inside a function body (run at import time)."""
    if not top_level:
        yield from ast.walk(tree)
        return
    for node in ast.iter_child_nodes(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield node
            yield from _nodes(node, True)


def imports(source: str, rel: Path, top_level: bool = False) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every import in a module, function-level ones included unless
    ``top_level``; a ``from M import x`` gives M and ``M.x`` (x may be a submodule). Relative
    imports are resolved."""
    name = module_name(rel)
    package = name.split(".") if rel.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in _nodes(parse(source, str(rel)), top_level):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            if node.module:
                found.append((node.lineno, mod))
            found += [(node.lineno, f"{mod}.{a.name}") for a in node.names if a.name != "*"]
    return found


def allowed(src: str, dst: str) -> bool:
    if dst == src:
        return True
    if dst == "outside":
        return False
    if src in RANK:
        return dst in ANY_LAYER or (
            dst in RANK and (RANK[dst] < RANK[src] or (src, dst) in PEER_IMPORTS)
        )
    if src == SHELL:
        return dst == "" or dst in ANY_LAYER
    return src == CLI or dst in TOP_LEVEL[src]


def violations(source: str, rel: Path) -> list[str]:
    """The imports of the module at ``rel`` (relative to dedebate/) that break the layering."""
    src = unit_of(module_name(rel)) if rel.parts[0] != "__init__.py" else "__init__"
    out = {}
    for line, name in imports(source, rel):
        dst = unit_of(name)
        if dst is not None and not allowed(src, dst):
            out.setdefault((line, dst), f"dedebate/{rel.as_posix()}:{line}: {src} imports {name}")
    return sorted(out.values())


def modules() -> dict[str, Path]:
    return {module_name(p.relative_to(ROOT)): p for p in sorted(ROOT.rglob("*.py"))}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of a directed graph (``[a, b, ..., a]``), or [] if it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(u):
        state[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return path[path.index(v) :] + [v]
            if v not in state and (cycle := visit(v)):
                return cycle
        state[u] = 2
        path.pop()
        return []

    for u in sorted(graph):
        if u not in state and (cycle := visit(u)):
            return cycle
    return []


def import_graph(top_level: bool) -> dict[str, set[str]]:
    """Module -> the modules of dedebate/ it imports (at import time only, if ``top_level``)."""
    mods = modules()
    return {
        m: {n for _, n in _file_imports(p, top_level) if n in mods and n != m}
        for m, p in mods.items()
    }


@functools.cache
def _file_imports(path: Path, top_level: bool) -> list[tuple[int, str]]:
    return imports(path.read_text(), path.relative_to(ROOT), top_level)


def test_every_package_has_a_layer():
    units = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert units == set(RANK) | {SHELL, CLI}, "place a new package in LAYERS (or the lab)"
    assert {p.stem for p in ROOT.glob("*.py")} == set(TOP_LEVEL)


@pytest.mark.parametrize(
    "path", sorted(ROOT.rglob("*.py")), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_module_imports_follow_the_layers(path):
    assert violations(path.read_text(), path.relative_to(ROOT)) == []


def test_no_module_level_import_cycle():
    graph = import_graph(top_level=True)
    assert "dedebate.protocols.stochastic_lazy" in graph["dedebate.protocols.stochastic"]
    assert find_cycle(graph) == []


def test_no_import_cycle_in_the_debate_packages():
    """Function-level imports included, so no circle hides inside a function."""
    graph = import_graph(top_level=False)
    debate = {
        m: {n for n in deps if unit_of(n) in RANK}
        for m, deps in graph.items()
        if unit_of(m) in RANK
    }
    assert "dedebate.exact.selfplay" in debate["dedebate.training.stochastic_selfplay"]
    assert find_cycle(debate) == []
    assert find_cycle(graph) == []  # the lab and the command line too


def test_top_level_imports_skip_function_bodies():
    source = "import a\nclass C:\n    import b\ndef f():\n    import c\n"
    assert [n for _, n in imports(source, Path("core/fake.py"), top_level=True)] == ["a", "b"]
    assert [n for _, n in imports(source, Path("core/fake.py"))] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "rel, source",
    [
        ("protocols/fake.py", "def f():\n    from dedebate.lab.experiment import Claim\n"),
        ("protocols/fake.py", "from dedebate.agents.stochastic_players import HonestBob\n"),
        ("protocols/fake.py", "from ..agents import stochastic_players\n"),
        ("core/fake.py", "import dedebate.machines.program\n"),
        ("machines/fake.py", "from dedebate.trees import tree\n"),
        ("estimators/fake.py", "from dedebate.training.stackelberg import solve\n"),
        ("exact/fake.py", "import dedebate.cli\n"),
        ("lab/fake.py", "def f():\n    from dedebate.cli.common import UsageError\n"),
        ("agents/fake.py", "import dedebate_experiments.machines\n"),
        ("lab/fake.py", "from dedebate.protocols.stochastic import play\n"),
        ("lab/fake.py", "def f():\n    from dedebate import protocols\n"),
        ("lab/fake.py", "from ..exact import acceptance_exact\n"),
        ("_xla_flags.py", "import dedebate.lab\n"),
        ("programs.py", "from dedebate.core.bits import bit_table\n"),
        ("agents/fake.py", "from dedebate._xla_flags import OPT_LEVEL\n"),
        ("lab/fake.py", "def f():\n    from dedebate._xla_flags import capped_options\n"),
    ],
)
def test_a_forbidden_import_is_reported(rel, source):
    found = violations(source, Path(rel))
    assert len(found) == 1 and found[0].startswith(f"dedebate/{rel}:"), found


@pytest.mark.parametrize(
    "rel, source",
    [
        (
            "agents/fake.py",
            "from dedebate.protocols.stochastic import StepView\n"
            "from .stochastic_players import HonestBob\nimport jax\n",
        ),
        ("training/fake.py", "def f():\n    from dedebate.exact import checker_prob\n"),
        (
            "lab/fake.py",
            "import dedebate\nfrom dedebate import __version__\nfrom . import rundir\n",
        ),
        (
            "cli/run.py",
            "def f():\n    from dedebate.lab.runner import run_experiment\n"
            "from dedebate.protocols import stochastic\nfrom . import common\n",
        ),
        ("core/fake.py", "from dedebate.programs import FAST_COMPILE, jit\n"),
        ("lab/fake.py", "def f():\n    from dedebate.programs import jit\n"),
        ("programs.py", "from dedebate._xla_flags import OPT_LEVEL, capped_options\n"),
    ],
)
def test_an_allowed_import_passes(rel, source):
    assert violations(source, Path(rel)) == []


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


# ---- execution policy: how dedebate compiles is decided in dedebate/programs.py alone ----------
REPO = ROOT.parent
POLICY_HOME = "dedebate/programs.py"
XLA_FLAGS_IMPORTERS = {POLICY_HOME, "dedebate/__init__.py"}  # __init__: apply_cpu_workaround
# Caches of something other than a compiled program, kept on purpose (their functools cache is
# allowed; nothing else is).
OTHER_CACHES = {
    "dedebate/lab/params.py",  # a Config class's ranged fields, read by reflection
    "dedebate/lab/schema.py",  # the JSON Schema registry, read from disk once
    "experiments/stochastic_debate/budget.py",  # the adversary search, shared by point() and host()
}


def policy_violations(source: str, path: str) -> list[str]:
    """Where a module decides how dedebate compiles, which only dedebate/programs.py may: it uses
    ``jax.jit`` (or imports ``jit`` from jax), passes ``compiler_options=``, imports
    ``dedebate._xla_flags`` or caches with ``functools.cache`` / ``lru_cache``."""
    found = set()
    for node in ast.walk(parse(source, path)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) == ("jax", "jit"):
                found.add((line, "uses jax.jit"))
            elif node.value.id == "functools" and node.attr in {"cache", "lru_cache"}:
                found.add((line, f"uses functools.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = {a.name for a in node.names}
            if node.module.split(".")[0] == "jax" and "jit" in names:
                found.add((line, "imports jit from jax"))
            elif node.module == "functools" and names & {"cache", "lru_cache"}:
                found.add((line, "uses functools.cache"))
        elif isinstance(node, ast.keyword) and node.arg == "compiler_options":
            found.add((line, "passes compiler_options="))
    rel = Path(path).relative_to("dedebate") if path.startswith("dedebate/") else Path(path)
    if path not in XLA_FLAGS_IMPORTERS:
        found |= {
            (line, "imports dedebate._xla_flags")
            for line, name in imports(source, rel)
            if name == "dedebate._xla_flags" or name.startswith("dedebate._xla_flags.")
        }
    return [f"{path}:{line}: {what}" for line, what in sorted(found)]


def _allowed_policy(path: str, found: list[str]) -> list[str]:
    if path in OTHER_CACHES:
        return [f for f in found if not f.endswith(("functools.cache", "functools.lru_cache"))]
    return found


POLICY_FILES = sorted(
    p
    for p in [*ROOT.rglob("*.py"), *(REPO / "experiments").rglob("*.py")]
    if p != REPO / POLICY_HOME
)


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_only_programs_decides_how_dedebate_compiles(path):
    rel = path.relative_to(REPO).as_posix()
    assert _allowed_policy(rel, policy_violations(path.read_text(), rel)) == []


def test_every_other_cache_is_still_there():
    for rel in sorted(OTHER_CACHES):
        assert policy_violations((REPO / rel).read_text(), rel), f"{rel}: clean, drop its entry"


@pytest.mark.parametrize(
    "path, source, problem",
    [
        (
            "dedebate/agents/fake.py",
            "import jax\nf = jax.jit(g, static_argnums=0)\n",
            "uses jax.jit",
        ),
        (
            "experiments/fake.py",
            "import functools\nimport jax\n"
            "@functools.partial(jax.jit, static_argnums=0)\ndef f(n): ...\n",
            "uses jax.jit",
        ),
        ("dedebate/lab/fake.py", "from jax import jit\n", "imports jit from jax"),
        (
            "dedebate/trees/fake.py",
            "from dedebate.programs import jit\nf = jit(g, compiler_options={})\n",
            "passes compiler_options=",
        ),
        (
            "dedebate/protocols/fake.py",
            "from dedebate._xla_flags import OPT_LEVEL, capped_options\n",
            "imports dedebate._xla_flags",
        ),
        (
            "dedebate/estimators/fake.py",
            "def f():\n    from .._xla_flags import OPT_LEVEL\n",
            "imports dedebate._xla_flags",
        ),
        ("experiments/fake.py", "from dedebate import _xla_flags\n", "imports dedebate._xla_flags"),
        (
            "dedebate/training/fake.py",
            "import functools\n@functools.cache\ndef grid(s): ...\n",
            "uses functools.cache",
        ),
        (
            "experiments/fake.py",
            "import functools\n@functools.lru_cache(maxsize=8)\ndef f(s): ...\n",
            "uses functools.lru_cache",
        ),
        ("dedebate/lab/fake.py", "from functools import cache\n", "uses functools.cache"),
        ("dedebate/lab/params.py", "import jax\nf = jax.jit(g)\n", "uses jax.jit"),  # not a cache
    ],
)
def test_execution_policy_outside_programs_is_reported(path, source, problem):
    found = _allowed_policy(path, policy_violations(source, path))
    assert len(found) == 1 and found[0].startswith(f"{path}:") and found[0].endswith(problem), found


def test_compiling_through_programs_passes():
    source = (
        "import functools\nimport jax\nfrom dedebate._xla_flags import OPT_LEVEL\n"
        "from dedebate.programs import FAST_COMPILE, jit, program_cache\n"
        "@program_cache\ndef grid(s):\n    return jit(f, options=FAST_COMPILE)\n"
        "g = functools.partial(jax.vmap, in_axes=0)\n"
    )
    assert policy_violations(source, "dedebate/agents/fake.py") == [
        "dedebate/agents/fake.py:3: imports dedebate._xla_flags"
    ]
    assert policy_violations(source, POLICY_HOME) == []
    assert (
        _allowed_policy(
            "dedebate/lab/schema.py",
            policy_violations("from functools import cache\n", "dedebate/lab/schema.py"),
        )
        == []
    )
