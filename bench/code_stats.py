"""Code and docstring lines per package, and the files over 500 lines.

``python -m bench.code_stats [ROOT] [--json]`` (ROOT: the repository, by default this checkout).
A docstring is the string-expression first statement of a module, class or function; a line of it
is a docstring line. A line holding any other token is a code line; comment-only and blank lines
are neither. Not a benchmark (no ``run``): it reads source and times nothing.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import io
import json
import sys
import tokenize
from pathlib import Path

PACKAGES = (
    "core",
    "protocols",
    "agents",
    "estimators",
    "training",
    "exact",
    "machines",
    "trees",
    "lab",
    "cli",
)
TOP_LEVEL = "dedebate (top level)"  # dedebate/__init__.py, _xla_flags.py, programs.py
SCANNED = ("dedebate", "experiments", "bench")  # where a long file is looked for
MAX_FILE_LINES = 500
NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


@dataclasses.dataclass
class Counts:
    """Lines of a file or a package: all, code, docstring."""

    files: int = 0
    lines: int = 0
    code: int = 0
    doc: int = 0

    def add(self, other: Counts) -> None:
        """Add another file's or package's counts to these."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def ratio(self) -> float:
        """Docstring lines per code line (0 without code)."""
        return self.doc / self.code if self.code else 0.0


def docstring_lines(tree: ast.Module) -> set[int]:
    """The line numbers spanned by the docstrings of a module and its classes and functions."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.update(range(first.lineno, first.end_lineno + 1))
    return out


def file_counts(source: str) -> Counts:
    """The counts of one module's source; a line with code and a docstring counts as code."""
    doc = docstring_lines(ast.parse(source))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in NOT_CODE or (tok.type == tokenize.STRING and tok.start[0] in doc):
            continue
        code.update(range(tok.start[0], tok.end[0] + 1))
    return Counts(files=1, lines=len(source.splitlines()), code=len(code), doc=len(doc - code))


def unit_of(rel: Path) -> str:
    """The row a file of ``dedebate/`` or ``experiments/`` counts in (path relative to ROOT)."""
    if rel.parts[0] == "experiments":
        return "experiments"
    name = rel.parts[1].removesuffix(".py")
    return name if name in PACKAGES else TOP_LEVEL


def python_files(root: Path, top: str) -> list[Path]:
    """Every ``.py`` file under ``root/top``, sorted, caches left out."""
    return sorted(p for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts)


def stats(root: Path) -> dict:
    """Per-unit counts, the files over :data:`MAX_FILE_LINES` lines and the experiments' lines."""
    units = {name: Counts() for name in (*PACKAGES, TOP_LEVEL, "experiments")}
    long_files = {}
    for top in SCANNED:
        for path in python_files(root, top):
            rel = path.relative_to(root)
            counts = file_counts(path.read_text(encoding="utf-8"))
            if top != "bench":
                units[unit_of(rel)].add(counts)
            if counts.lines > MAX_FILE_LINES:
                long_files[rel.as_posix()] = counts.lines
    library = Counts()
    for name in (*PACKAGES, TOP_LEVEL):
        library.add(units[name])
    return {
        "units": units,
        "dedebate": library,
        "long_files": long_files,
        "experiments_lines": units["experiments"].lines,
    }


def render(s: dict) -> str:
    """The figures of :func:`stats` as a plain-text table."""
    head = f"{'package':<22}{'files':>6}{'lines':>8}{'code':>8}{'doc':>8}{'doc/code':>10}"
    rows = [head, "-" * len(head)]
    for name, c in [*s["units"].items(), ("dedebate (all)", s["dedebate"])]:
        mark = "" if c.doc <= c.code / 2 else "  over half"
        rows.append(
            f"{name:<22}{c.files:>6}{c.lines:>8}{c.code:>8}{c.doc:>8}{c.ratio:>10.2f}" + mark
        )
    rows.append(
        f"\nfiles over {MAX_FILE_LINES} lines ({', '.join(SCANNED)}): {len(s['long_files'])}"
    )
    rows += [f"  {n:>5}  {p}" for p, n in sorted(s["long_files"].items(), key=lambda x: -x[1])]
    rows.append(f"\nexperiments/: {s['experiments_lines']} lines (docstrings included)")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the figures of the repository at ROOT."""
    p = argparse.ArgumentParser(prog="python -m bench.code_stats", description=__doc__)
    p.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    root = Path(args.root)
    if not (root / "dedebate").is_dir():
        p.error(f"root={args.root}: not a checkout (want a folder holding dedebate/)")
    s = stats(root)
    if args.json:
        s = {
            **s,
            "units": {k: dataclasses.asdict(v) for k, v in s["units"].items()},
            "dedebate": dataclasses.asdict(s["dedebate"]),
        }
        print(json.dumps(s, indent=1))
    else:
        print(render(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
