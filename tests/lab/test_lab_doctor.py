"""`dedebate doctor`: what a run will use; the git state and versions recorded in provenance."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess

import jax

from dedebate import cli
from dedebate.lab import memory
from dedebate.lab.rundir import git_dirty, package_versions


def test_doctor_reports_this_process(capsys):
    assert cli.main(["doctor", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == jax.default_backend()
    assert info["device_count"] == jax.device_count() == len(info["devices"])
    assert info["x64"] is bool(jax.config.jax_enable_x64)
    assert info["packages"]["jaxlib"] == importlib.metadata.version("jaxlib")
    auto = info["memory_limit_auto_bytes"]  # README: memory (the host's varies from call to call)
    assert isinstance(auto, int) and 0 < auto <= 2 * memory.available_bytes()
    assert cli.main(["doctor"]) == 0
    text = capsys.readouterr().out
    assert f"backend: {jax.default_backend()}" in text and "compile cache" in text
    assert "memory for a run (memory_limit=auto: " in text


def test_package_versions_names_missing_ones():
    got = package_versions(("numpy", "no-such-distribution-xyz"))
    assert got == {"numpy": importlib.metadata.version("numpy"), "no-such-distribution-xyz": None}
    assert package_versions()["ml_dtypes"] == importlib.metadata.version("ml_dtypes")


def test_package_versions_name_the_accelerator_plugins_installed(monkeypatch):
    class Dist:
        def __init__(self, name, version):
            self.metadata, self.version = {"Name": name}, version

    fakes = [
        Dist("jax-cuda13-plugin", "0.11.2"),
        Dist("jax-cuda13-pjrt", "0.11.2"),
        Dist("numpy", "9"),
        Dist("requests", "2"),
    ]
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: fakes)
    got = package_versions(("numpy",))
    assert list(got) == ["numpy", "jax-cuda13-plugin", "jax-cuda13-pjrt"]
    assert got["jax-cuda13-plugin"] == "0.11.2"


def test_git_dirty_tracks_uncommitted_changes(tmp_path):
    assert git_dirty(tmp_path) is None  # not a checkout

    def git(*args):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("runs/\n")
    git("add", "a.py", ".gitignore")
    git("commit", "-qm", "a")
    assert git_dirty(tmp_path) is False
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "out.txt").write_text("run output\n")
    assert git_dirty(tmp_path) is False  # ignored files (run outputs) do not count
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_dirty(tmp_path) is True
    git("checkout", "-q", "a.py")
    (tmp_path / "b.py").write_text("y = 1\n")
    assert git_dirty(tmp_path) is True  # an untracked file counts (it may be code that ran)
