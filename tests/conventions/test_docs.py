"""The protocol documentation in ``docs/``: every ``spec DED x.y`` / ``spec PED x.y`` citation
names a numbered heading of the matching page, and nothing in the repository points outside it.

Pure text scanning (no imports of dedebate), well under a second.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bench import code_stats
from tests.source_tree import parse

ROOT = Path(__file__).resolve().parents[2]
DOCS = {
    "DED": ROOT / "docs" / "doubly-efficient-debate.md",
    "PED": ROOT / "docs" / "prover-estimator-debate.md",
}
# where citations live, and where nothing may point outside the repository
CITING = ("dedebate", "experiments", "bench", "notebooks", "configs", "tests", "README.md")
SELF_CONTAINED = CITING + ("docs",)
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".ipynb", ".toml", ".txt", ".cfg", ".sh"}

_NUM = r"\d+(?:\.\d+)*"
# "spec DED 5.3", "spec PED 3.3, 3.4, 9.4", "spec DED 6-7", "spec DED 5.1/5.5", "spec DED 3 and 9"
# (matched from the literal "pec ", which the regex engine finds fast; the "S"/"s" before it is
# checked in :func:`citations`)
CITATION = re.compile(rf"pec (DED|PED) ({_NUM}(?:(?:, |/| / |-| and ){_NUM})*)")
# The prover-estimator modules also cite the short form "spec 6.3" (every one of them is about
# that protocol): those are checked against the PED page.
BARE = re.compile(rf"pec ()({_NUM}(?:(?:, |/| / |-| and ){_NUM})*)")
HEADING = re.compile(rf"^#{{1,6}} ({_NUM}) \S", re.M)
# built so that this file's own source does not match them
OUTSIDE = re.compile(r"\.\./shared|shared[/]spec|[Ii]ssue #?[0-9]")
OUTSIDE_HINTS = ("shared", "ssue")  # a file without either cannot match (a fast pre-filter)


def numbered_headings(text: str) -> list[str]:
    """The section numbers of a page's headings, in order (``## 5.3 Guarantees`` -> ``5.3``)."""
    return HEADING.findall(text)


def citations(text: str) -> list[tuple[str, str, int]]:
    """``(page, number, line)`` for every section a text cites; a range cites both ends."""
    out = []
    for m in [*CITATION.finditer(text), *BARE.finditer(text)]:
        i = m.start()
        if i == 0 or text[i - 1] not in "Ss" or (i >= 2 and text[i - 2].isalnum()):
            continue  # only the word "spec" / "Spec"
        line = text.count("\n", 0, m.start()) + 1
        for num in re.findall(_NUM, m.group(2)):
            out.append((m.group(1) or "PED", num, line))
    return sorted(out, key=lambda c: c[2])


def unresolved(texts: dict[str, str], sections: dict[str, set[str]]) -> list[str]:
    """``path:line: spec PAGE x.y`` for every citation whose number is not a heading of PAGE."""
    return [
        f"{path}:{line}: spec {page} {num}"
        for path, text in texts.items()
        for page, num, line in citations(text)
        if num not in sections[page]
    ]


def outside_pointers(texts: dict[str, str]) -> list[str]:
    """``path:line: match`` for every pointer outside the repository (issue numbers, spec files)."""
    return [
        f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for path, text in texts.items()
        if any(h in text for h in OUTSIDE_HINTS)
        for m in OUTSIDE.finditer(text)
    ]


def _texts(roots) -> dict[str, str]:
    files = []
    for name in roots:
        p = ROOT / name
        files += (
            [p]
            if p.is_file()
            else sorted(
                f for f in p.rglob("*") if f.suffix in SUFFIXES and "__pycache__" not in f.parts
            )
        )
    return {str(f.relative_to(ROOT)): f.read_text(encoding="utf-8") for f in files}


def _sections() -> dict[str, set[str]]:
    return {
        page: set(numbered_headings(path.read_text(encoding="utf-8")))
        for page, path in DOCS.items()
    }


def test_pages_number_their_sections_in_order():
    for page, path in DOCS.items():
        nums = numbered_headings(path.read_text(encoding="utf-8"))
        assert len(nums) >= 15, (page, nums)
        assert len(set(nums)) == len(nums), f"{page}: duplicate section numbers {nums}"
        keys = [tuple(int(p) for p in n.split(".")) for n in nums]
        assert keys == sorted(keys), f"{page}: sections out of order {nums}"
        # every subsection sits under its parent section
        assert all(n.rpartition(".")[0] in nums for n in nums if "." in n), (page, nums)


def test_readme_and_index_link_the_pages():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"(docs/{name})" in readme for name in README_LINKS)
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert {"architecture.md", "performance.md"} <= set(pages)
    assert [name for name in pages if f"({name})" not in index] == []


# -- the README: a five-minute read that names every experiment; links that resolve ----------------
README_MAX_LINES = 200
README_LINKS = ("README.md", "architecture.md", "performance.md", "lab.md", "accelerators.md")
EXPERIMENTS_HEADING = "## The experiments"
LINKED = ("README.md", "docs", "configs/README.md", "notebooks/README.md")  # markdown checked
LINK = re.compile(r"\]\(([^)\s]+)\)")


def experiment_names() -> set[str]:
    """The ``NAME`` of every module (or package ``__init__``) of ``experiments/``, read from source."""  # noqa: E501
    names = set()
    for path in (ROOT / "experiments").rglob("*.py"):
        for node in parse(path.read_text(encoding="utf-8"), str(path)).body:
            if (
                isinstance(node, ast.Assign)
                and [getattr(x, "id", None) for x in node.targets] == ["NAME"]
                and isinstance(node.value, ast.Constant)
            ):
                names.add(node.value.value)
    return names


def listed_experiments(readme: str) -> list[str]:
    """The names of the ``- `NAME`: ...`` items under the README's experiments heading."""
    _, _, section = readme.partition(f"\n{EXPERIMENTS_HEADING}\n")
    section = section.split("\n## ")[0]
    return re.findall(r"^- `(\w+)`: \S", section, flags=re.M)


def test_readme_is_short_and_lists_every_experiment_once():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    n = len(readme.splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES})"
    assert "./dev.sh reproduce" in readme and "./dev.sh test" in readme
    names = experiment_names()
    assert {"machines", "ped_digits"} <= names  # the scan sees them
    listed = listed_experiments(readme)
    assert sorted(listed) == sorted(names), "one '- `NAME`: what it checks' line per experiment"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it (lower case, punctuation dropped, spaces -> '-')."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(texts: dict[str, str], root: Path) -> list[str]:
    """``path:line: target`` for every relative link whose file, or heading anchor, is missing."""
    out = []
    for path, text in texts.items():
        prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for m in LINK.finditer(prose):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (root / path).parent / file
            ok = not file or dest.exists()
            if ok and anchor:
                body = text if not file else dest.read_text(encoding="utf-8")
                ok = anchor in {_slug(h) for h in re.findall(r"^#+ (.+)$", body, flags=re.M)}
            if not ok:
                out.append(f"{path}:{prose.count(chr(10), 0, m.start()) + 1}: {target}")
    return out


def test_every_link_in_the_markdown_resolves():
    texts = {p: t for p, t in _texts(LINKED).items() if p.endswith(".md")}
    assert len(texts) >= 10 and sum(len(LINK.findall(t)) for t in texts.values()) > 30
    assert broken_links(texts, ROOT) == []
    bad = {
        "docs/a.md": "# Top\n## The two commands\n[ok](#the-two-commands) [x](#nope)\n"
        "[up](../README.md) [gone](missing.md) [web](https://example.org)\n"
        "```\n[code](not-checked.md)\n```\n[r](../README.md#no-such-heading)\n"
    }
    assert broken_links(bad, ROOT) == [
        "docs/a.md:3: #nope",
        "docs/a.md:4: missing.md",
        "docs/a.md:8: ../README.md#no-such-heading",
    ]


def test_every_spec_citation_resolves_to_a_heading():
    texts = _texts(CITING)
    found = [c for text in texts.values() for c in citations(text)]
    assert len(found) > 150 and {p for p, _, _ in found} == {"DED", "PED"}  # the scan sees them
    assert unresolved(texts, _sections()) == []


def test_a_bad_citation_is_reported():
    ded, ped = "spec " + "DED", "spec " + "PED"  # not citations in this file's own source
    bare = "spec"
    texts = {
        "good.py": f"ok ({ded} 5.3; {ped} 2.4.1, 9.3-9.5, 8.5 / 10; {bare} 6.3)\n",
        "bad.py": f"x\n({ded} 5.3, 5.99)\n{ped} 6.3 and 11\n{ped} 7.1-7.8\n# {ded} 12\n"
        f"{bare} 6.9, {bare.title()} 2.4.7; in{bare} 99\n",
    }
    assert unresolved(texts, _sections()) == [
        f"bad.py:2: {ded} 5.99",
        f"bad.py:3: {ped} 11",
        f"bad.py:4: {ped} 7.8",
        f"bad.py:5: {ded} 12",
        f"bad.py:6: {ped} 6.9",
        f"bad.py:6: {ped} 2.4.7",
    ]


def test_nothing_points_outside_the_repository():
    assert outside_pointers(_texts(SELF_CONTAINED)) == []
    bad = {
        "a.py": "see "
        + "issue"
        + " 8, "
        + "Issue"
        + " #3\nread ../"
        + "shared/x.md, shared"
        + "/spec/y.md\n"
    }
    assert outside_pointers(bad) == [
        "a.py:1: " + "issue" + " 8",
        "a.py:1: " + "Issue" + " #3",
        "a.py:2: ../" + "shared",
        "a.py:2: shared" + "/spec",
    ]


# a measured speed-up in code ("2.3x faster", "~20x slower", "about 24x"): figures go stale the
# day they are written; they belong in bench/ output
SPEEDUP = re.compile(
    r"(?<![\w.])~?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x (?:faster|slower|the)\b"
    r"|[Aa]bout \d+(?:\.\d+)?x\b"
)
SPEEDUP_HINTS = ("x faster", "x slower", "x the", "bout ")  # lines without these cannot match


def speedups(text: str) -> list[str]:
    """Every measured speed-up figure in ``text``."""
    return [
        m.group(0)
        for line in text.splitlines()
        if any(h in line for h in SPEEDUP_HINTS)
        for m in SPEEDUP.finditer(line)
    ]


def test_no_measured_speedups_in_code():
    texts = _texts(("dedebate", "experiments"))
    assert [f"{p}: {s}" for p, t in texts.items() for s in speedups(t)] == []
    bad = "ran 2.3x faster; ~20x slower;\n2-3x faster; About 24x the default; 0x1f; 8x8 grid"
    assert speedups(bad) == ["2.3x faster", "~20x slower", "2-3x faster", "About 24x"]


# -- docstrings: short module docstrings; an interface documents its methods once ---------------
# A ``typing.Protocol`` of the library documents each method in full (Args:/Returns:); a method
# implementing it, and a private helper, carries a one-line summary (longer notes on how it works
# are comments, longer explanations docs/ pages). Public functions need a docstring, no
# Args:/Returns: blocks that repeat the signature. Each library package, the lab (whose
# interface is the Protocols of dedebate/lab/experiment.py) and the top level keep their docstring
# lines at most half their code lines, as bench/code_stats.py counts them.
# The modules held to the docstring standard (paths relative to the repository root).
DOCUMENTED = (
    "experiments/stackelberg/runs.py",
    "experiments/deterministic_debate/population.py",
    "experiments/ogd_estimator/algorithm1.py",
    "dedebate/agents/stochastic_zoo.py",
    "experiments/stochastic_debate/budget.py",
    "experiments/stochastic_debate/__init__.py",
    "dedebate/agents/selfplay_players.py",
    "dedebate/exact/selfplay.py",
    "dedebate/training/stochastic_selfplay.py",
    "experiments/stochastic_selfplay/__init__.py",
    "dedebate/core/bits.py",
    "dedebate/core/samples.py",
    "dedebate/core/simplex.py",
    "dedebate/core/stats.py",
    "dedebate/core/binomial.py",
    "dedebate/core/dyadic.py",
    "dedebate/core/binomial_btrs.py",
    "dedebate/core/binomial_decision.py",
    "dedebate/core/binomial_fast.py",
    "dedebate/core/binomial_pmf.py",
    "dedebate/core/binomial_stream.py",
    "dedebate/core/binomial_window.py",
    "dedebate/protocols/stochastic.py",
    "dedebate/machines/__init__.py",
    "dedebate/machines/configurations.py",
    "dedebate/machines/fixtures.py",
    "dedebate/machines/fixture_base.py",
    "dedebate/machines/fixtures_cascade.py",
    "dedebate/machines/fixtures_mean.py",
    "dedebate/machines/fixtures_threshold.py",
    "dedebate/machines/lean.py",
    "dedebate/machines/lipschitz.py",
    "dedebate/machines/oracles.py",
    "dedebate/machines/program.py",
    "dedebate/trees/__init__.py",
    "dedebate/trees/library.py",
    "dedebate/trees/stability.py",
    "dedebate/trees/tree.py",
    "dedebate/exact/__init__.py",
    "dedebate/exact/acceptance.py",
    "dedebate/protocols/binary_search.py",
    "dedebate/protocols/costs.py",
    "dedebate/protocols/cross_exam.py",
    "dedebate/protocols/det_witness.py",
    "dedebate/protocols/deterministic_players.py",
    "dedebate/protocols/naive_recursive.py",
    "dedebate/protocols/prover_estimator.py",
    "dedebate/protocols/prover_estimator_interface.py",
    "dedebate/protocols/stochastic_scan.py",
    "dedebate/protocols/witness.py",
    "dedebate/agents/learned.py",
    "dedebate/agents/ped_strategies.py",
    "dedebate/agents/stochastic_players.py",
    "dedebate/training/__init__.py",
    "dedebate/training/stackelberg.py",
    "dedebate/cli/__init__.py",
    "dedebate/cli/__main__.py",
    "dedebate/cli/bench.py",
    "dedebate/cli/common.py",
    "dedebate/cli/info.py",
    "dedebate/cli/parser.py",
    "dedebate/cli/reproduce.py",
    "dedebate/cli/results.py",
    "dedebate/cli/run.py",
    "dedebate/cli/startup.py",
    "dedebate/cli/sync.py",
    "dedebate/lab/__init__.py",
    "dedebate/lab/aot.py",
    "dedebate/lab/checkpoint.py",
    "dedebate/lab/claims.py",
    "dedebate/lab/claim_stats.py",
    "dedebate/lab/compare.py",
    "dedebate/lab/compile_cache.py",
    "dedebate/lab/config.py",
    "dedebate/lab/config_docs.py",
    "dedebate/lab/config_schema.py",
    "dedebate/lab/config_types.py",
    "dedebate/lab/config_yaml.py",
    "dedebate/lab/context.py",
    "dedebate/lab/devices.py",
    "dedebate/lab/distributed.py",
    "dedebate/lab/doctor.py",
    "dedebate/lab/experiment.py",
    "dedebate/lab/params.py",
    "dedebate/lab/provenance.py",
    "dedebate/lab/registry.py",
    "dedebate/lab/report.py",
    "dedebate/lab/report_render.py",
    "dedebate/lab/records.py",
    "dedebate/lab/rerender.py",
    "dedebate/lab/rundir.py",
    "dedebate/lab/folder_guard.py",
    "dedebate/lab/runner.py",
    "dedebate/lab/schema.py",
    "dedebate/lab/sync.py",
    "dedebate/lab/tracking.py",
    "dedebate/__init__.py",
    "dedebate/_xla_flags.py",
    "dedebate/agents/__init__.py",
    "dedebate/agents/deterministic_grids.py",
    "dedebate/agents/deterministic_players.py",
    "experiments/prover_estimator/zoo.py",
    "dedebate/core/__init__.py",
    "dedebate/core/pytrees.py",
    "dedebate/core/lazy.py",
    "dedebate/estimators/__init__.py",
    "dedebate/estimators/advantage.py",
    "dedebate/estimators/families.py",
    "dedebate/estimators/network.py",
    "dedebate/estimators/ogd.py",
    "dedebate/estimators/soundness.py",
    "dedebate/estimators/train.py",
    "dedebate/protocols/__init__.py",
    "dedebate/protocols/stochastic_batch.py",
    "dedebate/protocols/stochastic_constants.py",
    "dedebate/protocols/stochastic_interface.py",
    "dedebate/protocols/stochastic_lazy.py",
    "dedebate/lab/parallel.py",
    "dedebate/lab/driver.py",
    "dedebate/lab/sweep.py",
    "dedebate/lab/sweep_eval.py",
    "dedebate/lab/sweep_output.py",
    "dedebate/lab/sweep_plan.py",
    "dedebate/lab/sweep_programs.py",
    "dedebate/lab/sweep_rows.py",
)
MAX_MODULE_DOCSTRING_LINES = 15
LIBRARY = ("core", "protocols", "agents", "estimators", "training", "exact", "machines", "trees")
HELD = (*LIBRARY, "lab", code_stats.TOP_LEVEL)  # the units held to the one-line rules and ratio
MAX_DOC_PER_CODE = 0.5  # docstring lines per code line, per unit of HELD


def _is_protocol(cls: ast.ClassDef) -> bool:
    return any(getattr(b, "id", getattr(b, "attr", None)) == "Protocol" for b in cls.bases)


def _methods(cls: ast.ClassDef):
    return [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]


def interface_methods(sources: dict[str, str]) -> set[str]:
    """The names of the methods that the ``typing.Protocol`` classes of ``sources`` document."""
    return {
        f.name
        for path, src in sources.items()
        for node in ast.walk(parse(src, path))
        if isinstance(node, ast.ClassDef) and _is_protocol(node)
        for f in _methods(node)
        if ast.get_docstring(f)
    }


def _public_functions(tree: ast.Module):
    """``(qualified name, node)`` of every public module-level function and public method."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name[0] != "_":
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and node.name[0] != "_":
            for sub in _methods(node):
                if sub.name[0] != "_":
                    yield f"{node.name}.{sub.name}", sub


def _one_line_functions(tree: ast.Module, interface: set[str]):
    """``(qualified name, node, why)`` of the functions whose docstring must be one line: private
    module-level helpers and methods, and methods implementing an interface method."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name[0] == "_":
            yield node.name, node, "a private helper"
        elif isinstance(node, ast.ClassDef) and not _is_protocol(node):
            for sub in _methods(node):
                if sub.name.startswith("_") and not sub.name.endswith("__"):
                    yield f"{node.name}.{sub.name}", sub, "a private helper"
                elif sub.name in interface:
                    yield f"{node.name}.{sub.name}", sub, "it implements an interface method"


def docstring_problems(source: str, path: str, interface: set[str] | None = None) -> list[str]:
    """``path[:line]: problem`` for a module docstring over the limit, every public function
    without a docstring and, where ``interface`` is given (the library's interface methods), every
    private helper or interface implementation whose docstring is more than one line."""
    tree = parse(source, path)
    out = []
    doc = ast.get_docstring(tree, clean=False)
    n = len(doc.splitlines()) if doc else 0
    if not doc or n > MAX_MODULE_DOCSTRING_LINES:
        out.append(f"{path}: module docstring of {n} lines (want 1..{MAX_MODULE_DOCSTRING_LINES})")
    for name, fn in _public_functions(tree):
        if not ast.get_docstring(fn):
            out.append(f"{path}:{fn.lineno}: {name} has no docstring")
    for name, fn, why in _one_line_functions(tree, interface) if interface is not None else ():
        n = len((ast.get_docstring(fn) or "").splitlines())
        if n > 1:
            out.append(f"{path}:{fn.lineno}: {name} has a docstring of {n} lines ({why}: want 1)")
    return sorted(out, key=lambda p: int(p.split(":")[1]) if p.count(":") > 1 else 0)


def _sources(packages) -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for pkg in packages
        for p in sorted((ROOT / "dedebate" / pkg).glob("*.py"))
    }


def _unit(path: str) -> str:
    """The code_stats unit of a module of ``dedebate/`` (``dedebate/lab/x.py`` -> ``lab``)."""
    name = path.split("/")[1].removesuffix(".py")
    return name if name in code_stats.PACKAGES else code_stats.TOP_LEVEL


def test_documented_modules_have_short_docstrings_and_one_line_implementations():
    interface = interface_methods(_sources(LIBRARY))
    assert {"answer", "joint", "prob", "claim", "pointwise", "init_state"} <= interface
    lab = interface_methods(_sources(("lab",)))
    assert {"report", "log", "save_figure", "stopwatch"} <= lab
    interfaces = {unit: interface for unit in LIBRARY} | {"lab": lab, code_stats.TOP_LEVEL: set()}
    problems = [
        p
        for path in DOCUMENTED
        for p in docstring_problems(
            (ROOT / path).read_text(encoding="utf-8"), path, interfaces.get(_unit(path))
        )
    ]
    assert problems == []
    assert all(
        p.startswith(("dedebate/", "experiments/")) and (ROOT / p).is_file() for p in DOCUMENTED
    )


def test_docstring_check_reports_a_bad_module():
    q = '"' * 3
    long_doc = q + "Summary.\n" + "line\n" * 15 + q + "\n"
    bad = long_doc + (
        "class I(Protocol):\n"
        f"    def m(self, x) -> int:\n        {q}The interface.\n\n"
        f"        Args:\n            x: a.{q}\n"
        "class C:\n"
        f"    def m(self, x) -> int:\n        {q}Summary.\n\n        Args:\n            x: a.{q}\n"
        f"    def n(self, x):\n        {q}Summary.\n\n        Two lines, not interface.{q}\n"
        f"    def _private(self, y):\n        {q}Summary.\n        Continued.{q}\n"
        f"    def __init__(self):\n        {q}A dunder.\n\n        Free.{q}\n"
        "def f(x):\n"
        f"    {q}Summary only: no Args: needed.{q}\n"
        "    return x\n"
        "def g():\n"
        "    pass\n"
        f"def _h(y):\n    {q}Summary.\n\n    More.\n    {q}\n"
        f"def _k(y):\n    {q}One line.{q}\n"
    )
    interface = interface_methods({"bad.py": bad})
    assert interface == {"m"}
    assert docstring_problems(bad, "bad.py", interface) == [
        "bad.py: module docstring of 16 lines (want 1..15)",
        "bad.py:25: C.m has a docstring of 4 lines (it implements an interface method: want 1)",
        "bad.py:34: C._private has a docstring of 2 lines (a private helper: want 1)",
        "bad.py:44: g has no docstring",
        "bad.py:46: _h has a docstring of 3 lines (a private helper: want 1)",
    ]
    # without the library's interface (the lab, the command line) only the first two rules apply
    assert docstring_problems(bad, "bad.py") == [
        "bad.py: module docstring of 16 lines (want 1..15)",
        "bad.py:44: g has no docstring",
    ]
    good = q + "Summary.\n" + q + f"\ndef f(x):\n    {q}Summary.{q}\n    return x\n"
    assert docstring_problems(good, "good.py", interface) == []


def over_half(units: dict) -> dict[str, float]:
    """``{unit: docstring lines per code line}`` of the units of :data:`HELD` over the limit."""
    return {
        name: round(units[name].ratio, 2)
        for name in HELD
        if units[name].doc > MAX_DOC_PER_CODE * units[name].code
    }


def test_library_packages_keep_docstrings_at_most_half_their_code():
    units = code_stats.stats(ROOT)["units"]
    assert all(units[name].code > 100 for name in LIBRARY + ("lab",))  # the counts see them
    assert units[code_stats.TOP_LEVEL].files == 3 and units[code_stats.TOP_LEVEL].code > 30
    assert over_half(units) == {}
    bad = {name: code_stats.Counts(files=1, lines=30, code=10, doc=5) for name in HELD}
    bad["agents"] = code_stats.Counts(files=1, lines=30, code=10, doc=6)
    bad[code_stats.TOP_LEVEL] = code_stats.Counts(files=2, lines=30, code=10, doc=16)
    assert over_half(bad) == {"agents": 0.6, code_stats.TOP_LEVEL: 1.6}


def test_no_source_file_over_500_lines():
    """Files of one idea: no module of dedebate/, experiments/ or bench/ over 500 lines (the
    counting itself is checked on a tiny tree in tests/bench/test_code_stats.py)."""
    assert code_stats.stats(ROOT)["long_files"] == {}
