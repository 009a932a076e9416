"""What the wheel installs, and how an installed dedebate finds experiments and configs."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from dedebate.lab import registry
from dedebate.lab.registry import config_path, discover_experiments, experiment_packages
from tests.conftest import REPO


def test_every_package_is_listed_and_installed_under_dedebate_names():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts)
               for p in (REPO / "dedebate").rglob("__init__.py")}
    assert on_disk <= listed, f"packages missing from pyproject.toml: {on_disk - listed}"
    assert all(n == "dedebate" or n.startswith(("dedebate.", "dedebate_")) for n in listed)
    assert setuptools["package-dir"] == {"dedebate_experiments": "experiments",
                                         "dedebate_bench": "bench", "dedebate_configs": "configs"}


def test_entry_point_group_adds_experiments(monkeypatch):
    monkeypatch.delenv("DEDEBATE_EXPERIMENTS", raising=False)
    ep = importlib.metadata.EntryPoint(name="fakes", value="tests.fake_experiments.fake_pass",
                                       group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == registry.ENTRY_POINT_GROUP else [])
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
