"""What the wheel installs and requires, how an installed dedebate finds experiments and
configs, and the changelog's layout."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import tomllib
from datetime import date
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

import dedebate
from dedebate.lab import registry
from dedebate.lab.registry import config_path, discover_experiments, experiment_packages
from tests.conftest import REPO
from tests.source_tree import parse

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _floors_module():
    """``.ci/floors.py``, which writes the lowest-versions CI job's constraints."""
    spec = importlib.util.spec_from_file_location("floors", REPO / ".ci" / "floors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def _imported_distributions(*folders: str) -> set[str]:
    """The installed distributions (canonical names, dedebate's own left out) whose top-level
    modules the Python files under ``folders`` import."""
    providers = importlib.metadata.packages_distributions()
    tops = set()
    for folder in folders:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    tops.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    tops.add(node.module.split(".")[0])
    dists = {canonicalize_name(d) for top in tops for d in providers.get(top, ())}
    return {d for d in dists if not d.startswith("dedebate")}


def test_every_package_is_listed_and_installed_under_dedebate_names():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "dedebate").rglob("__init__.py")
    }
    exp = REPO / "experiments"
    on_disk |= {
        ".".join(("dedebate_experiments", *p.parent.relative_to(exp).parts))
        for p in exp.rglob("__init__.py")
    }
    assert on_disk <= listed, f"packages missing from pyproject.toml: {on_disk - listed}"
    assert all(n == "dedebate" or n.startswith(("dedebate.", "dedebate_")) for n in listed)
    assert setuptools["package-dir"] == {
        "dedebate_experiments": "experiments",
        "dedebate_bench": "bench",
        "dedebate_configs": "configs",
    }


def test_entry_point_group_adds_experiments(monkeypatch):
    monkeypatch.delenv("DEDEBATE_EXPERIMENTS", raising=False)
    ep = importlib.metadata.EntryPoint(
        name="fakes", value="tests.fake_experiments.fake_pass", group=registry.ENTRY_POINT_GROUP
    )
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda group=None: [ep] if group == registry.ENTRY_POINT_GROUP else [],
    )
    packages = experiment_packages()
    assert packages[-1] == "tests.fake_experiments.fake_pass"
    reg = discover_experiments(packages)
    assert "fake_pass" in reg.names() and "machines" in reg.names(), reg.errors
    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments")
    assert experiment_packages() == ("tests.fake_experiments",)  # the variable replaces all


def test_shipped_configs_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the checkout: no configs/ folder here
    shipped = registry.shipped_configs_dir()
    assert shipped is not None and (shipped / "machines.yaml").is_file()
    assert config_path("machines") == shipped / "machines.yaml"
    assert config_path("configs/machines.yaml") == shipped / "machines.yaml"
    assert config_path("sweeps/stochastic_scale") == shipped / "sweeps" / "stochastic_scale.yaml"
    (tmp_path / "machines").mkdir()  # a path that exists wins (reading it reports a directory)
    assert config_path("machines") == Path("machines")
    assert config_path("no_such_experiment") == Path("no_such_experiment")


def test_each_runtime_dependency_is_imported_by_the_code_that_runs():
    runtime = _names(PROJECT["dependencies"])
    used = _imported_distributions("dedebate", "experiments", "bench")
    assert runtime - used == set(), "runtime dependencies no code imports (a test extra?)"
    # the one exception: dedebate.lab.schema validates a record for the tests with jsonschema (and
    # its dependency referencing), imported there only when called
    assert used - runtime == {"jsonschema", "referencing"}
    tests = _names(PROJECT["optional-dependencies"]["tests"])
    notebooks = _names(PROJECT["optional-dependencies"]["notebooks"])
    assert _imported_distributions("tests") - runtime <= tests | notebooks
    assert "chex" in tests and "chex" not in runtime  # only the tests use it


def test_requirements_have_floors_and_no_caps():
    """Floors are what the lowest-versions CI job installs; caps chosen for speed live in
    constraints.txt, which ./dev.sh and CI install with."""
    extras = PROJECT["optional-dependencies"]
    for text in PROJECT["dependencies"] + extras["tests"] + extras["notebooks"] + extras["lint"]:
        ops = {s.operator for s in Requirement(text).specifier}
        assert ops == {">="}, f"{text}: one floor, no cap"
    assert extras["test"] == ["dedebate[tests,notebooks,lint]"]
    caps = [
        line
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert caps == ["ml_dtypes<0.7"]
    assert "-c constraints.txt -e '.[test]'" in (REPO / "dev.sh").read_text()


def test_floors_pin_each_requirement_at_its_floor():
    floors = _floors_module()
    project = {
        "name": "pkg",
        "dependencies": ["A_b>=1.2", "c", "d>=2,<3", "e>=1; python_version<'3'"],
        "optional-dependencies": {"t": ["f>=0.5"], "u": ["g>=4"], "all": ["pkg[t]"]},
    }
    assert floors.floors(floors.requirements(project, ["all"])) == ["a-b==1.2", "d==2", "f==0.5"]
    both = [str(r) for r in floors.requirements(project, ["all", "u", "t"])]
    assert len(both) == 6 and {"f>=0.5", "g>=4"} <= set(both)  # each extra once
    with pytest.raises(SystemExit, match="excludes the floor 1"):
        floors.floors(floors.requirements({**project, "dependencies": ["h>=1,!=1"]}, []))
    with pytest.raises(SystemExit, match="no extra 'x'"):
        floors.requirements(project, ["x"])
    lines = floors.floors(floors.requirements(PROJECT, ["test"]))
    everything = [Requirement(r) for r in PROJECT["dependencies"]] + [
        Requirement(r)
        for e in ("tests", "notebooks", "lint")
        for r in PROJECT["optional-dependencies"][e]
    ]
    assert sorted(lines) == sorted(
        f"{canonicalize_name(r.name)}=={next(iter(r.specifier)).version}" for r in everything
    )


def test_version_is_single_sourced():
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dedebate.__version__"}
    assert Version(dedebate.__version__) >= Version("0.2.0")


KEEP_A_CHANGELOG = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def test_changelog_keeps_a_changelog():
    """``## [Unreleased]`` (optional), then ``## [X.Y.Z] - YYYY-MM-DD`` newest first, the newest
    being the package's version; under each, ``### Added`` etc. in Keep a Changelog's order."""
    text = (REPO / "CHANGELOG.md").read_text()
    releases = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    headings = [r.splitlines()[0] for r in releases]
    if headings[0] == "[Unreleased]":
        releases, headings = releases[1:], headings[1:]
    dated = [re.fullmatch(r"\[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})", h) for h in headings]
    assert all(dated), headings
    versions = [Version(m[1]) for m in dated]
    days = [date.fromisoformat(m[2]) for m in dated]
    assert versions[0] == Version(dedebate.__version__), (versions[0], dedebate.__version__)
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert days == sorted(days, reverse=True)
    for heading, body in zip(headings, releases, strict=True):
        sections = re.findall(r"^### (.*)$", body, flags=re.MULTILINE)
        assert sections and set(sections) <= set(KEEP_A_CHANGELOG), (heading, sections)
        assert sections == sorted(sections, key=KEEP_A_CHANGELOG.index), (heading, sections)
