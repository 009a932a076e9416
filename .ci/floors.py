"""Print pip constraints that pin each requirement of pyproject.toml to its floor (``name==floor``).

Usage: ``python .ci/floors.py [--installed] [EXTRA ...]``: the runtime dependencies and those of
the named extras (a self-reference such as ``dedebate[tests]`` is followed). A requirement without
a ``>=`` floor is left out (pip resolves it freely); a floor its own specifier excludes is an
error. ``--installed`` prints the version of each requirement installed here instead.
"""

import importlib.metadata
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(project: dict, extras: list[str]) -> list[Requirement]:
    """The runtime requirements and those of ``extras``, self-references followed, in order."""
    own = canonicalize_name(project["name"])
    optional = project.get("optional-dependencies", {})
    out, todo, seen = [Requirement(r) for r in project["dependencies"]], list(extras), set()
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(
                f"floors.py: no extra {extra!r} in pyproject.toml "
                f"(there are: {', '.join(sorted(optional))})"
            )
        seen.add(extra)
        for text in optional[extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == own:
                todo.extend(sorted(req.extras))
            else:
                out.append(req)
    return out


def floors(reqs: list[Requirement]) -> list[str]:
    """``name==floor`` for each requirement with a ``>=`` floor whose marker holds here."""
    lines = {}
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate():
            continue
        lows = [s.version for s in req.specifier if s.operator == ">="]
        if not lows:
            continue
        (low,) = lows
        if not req.specifier.contains(low, prereleases=True):
            raise SystemExit(f"floors.py: {req}: its own specifier excludes the floor {low}")
        lines[canonicalize_name(req.name)] = f"{canonicalize_name(req.name)}=={low}"
    return list(lines.values())


def installed(reqs: list[Requirement]) -> list[str]:
    """``name==version`` of each requirement as installed in this interpreter's environment."""
    names = dict.fromkeys(canonicalize_name(r.name) for r in reqs)
    return [f"{n}=={importlib.metadata.version(n)}" for n in names]


if __name__ == "__main__":
    args = sys.argv[1:]
    as_installed = args[:1] == ["--installed"]
    extras = args[1:] if as_installed else args
    reqs = requirements(tomllib.loads(PYPROJECT.read_text())["project"], extras)
    print("\n".join(installed(reqs) if as_installed else floors(reqs)))
