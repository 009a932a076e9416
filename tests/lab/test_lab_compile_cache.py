"""The persistent compilation cache of the command line (dedebate/lab/compile_cache.py).

Cold and warm runs of an experiment's jitted program give the same claims and metrics, the warm
run compiles nothing new, ``DEDEBATE_COMPILE_CACHE=off`` writes nothing, and an unusable directory is one
warning, not a failure.
"""  # noqa: E501

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from dedebate.lab import compile_cache
from tests.conftest import FAKE_EXPERIMENTS, REPO, SUITE_CACHE_VARIABLES

# The fake sweepable experiment: one tiny jitted program (a PRNG draw, float means), no plots.
SWEEPABLE = f"{FAKE_EXPERIMENTS}.sweepable"


def _run(env, *args, timeout=180):
    """``dedebate run`` in a subprocess, without the suite's own JAX cache (tests/conftest.py)."""
    return subprocess.run(
        [sys.executable, "-m", "dedebate.cli", "run", "--no-progress", *args],
        env={k: v for k, v in env.items() if k not in SUITE_CACHE_VARIABLES},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _results(out_dir: Path) -> dict:
    (run_dir,) = [d for d in out_dir.iterdir() if d.is_dir()]
    return json.loads((run_dir / "results.json").read_text())


def _entries(cache: Path) -> set[str]:
    return {p.name for p in cache.glob("*-cache")}


def _hits(stderr: str) -> set[str]:
    return set(
        re.findall(r"Persistent compilation cache hit for '[^']*' with key '([^']+)'", stderr)
    )


def test_requested_dir_from_environment(tmp_path):
    home_cache = Path.home() / ".cache" / "dedebate" / "jax"
    assert compile_cache.requested_dir({}) == home_cache
    assert compile_cache.requested_dir({"XDG_CACHE_HOME": ""}) == home_cache
    xdg = str(tmp_path / "xdg")
    assert compile_cache.requested_dir({"XDG_CACHE_HOME": xdg}) == Path(xdg) / "dedebate" / "jax"
    mine = str(tmp_path / "mine")
    assert compile_cache.requested_dir(
        {"DEDEBATE_COMPILE_CACHE": mine, "XDG_CACHE_HOME": xdg}
    ) == Path(mine)
    for off in ("off", "OFF", "", " ", "0", "false", "none", "no", "disabled", "Disabled"):
        assert compile_cache.requested_dir({"DEDEBATE_COMPILE_CACHE": off}) is None, off
    assert compile_cache.requested_dir({"DEDEBATE_COMPILE_CACHE": "~/x"}) == Path.home() / "x"


def test_a_folder_that_cannot_take_a_file_is_unusable(tmp_path, monkeypatch):
    """The write probe (tests run as root, so a read-only folder cannot be made with chmod)."""

    def refuse(**kw):
        raise PermissionError(13, "Permission denied", kw["dir"])

    assert compile_cache._writable_dir(tmp_path) is None
    monkeypatch.setattr(compile_cache.tempfile, "NamedTemporaryFile", refuse)
    assert compile_cache._writable_dir(tmp_path).startswith("PermissionError: ")


def test_an_asked_for_folder_wins_over_jaxs_and_is_made_absolute(tmp_path, monkeypatch):
    """``DEDEBATE_COMPILE_CACHE`` is used even where JAX already has a folder (this suite's), and
    a relative one is handed to JAX resolved; JAX's own configuration is not touched here."""
    import jax

    assert jax.config.jax_compilation_cache_dir  # the suite's cache (tests/conftest.py)
    updates = []
    monkeypatch.setattr(jax.config, "update", lambda name, value: updates.append((name, value)))
    monkeypatch.setattr(compile_cache, "_state", dict(compile_cache._state))
    monkeypatch.chdir(tmp_path)
    got = compile_cache.enable({"DEDEBATE_COMPILE_CACHE": "rel"})
    where = str(tmp_path.resolve() / "rel")
    assert got == {"enabled": True, "dir": where, "source": "DEDEBATE_COMPILE_CACHE"}
    assert ("jax_compilation_cache_dir", where) in updates
    assert compile_cache.enable({})["source"] == "JAX configuration (JAX_COMPILATION_CACHE_DIR)"


def test_provenance_reads_jaxs_configuration(monkeypatch):
    """This suite's cache was set through JAX, not by dedebate; switched off in JAX, it is off."""
    import jax

    monkeypatch.setattr(compile_cache, "_state", dict(compile_cache._state))
    where, was_on = jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache
    assert was_on and compile_cache.provenance() == {
        "enabled": True,
        "dir": str(where),
        "source": "JAX configuration",
    }
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        got = compile_cache.provenance()
    finally:
        jax.config.update("jax_enable_compilation_cache", was_on)
    assert got == {"enabled": False, "dir": None, "source": "disabled in JAX configuration"}


def test_the_tests_leave_the_users_cache_alone():
    """Every command line a test starts (subprocesses inherit this environment) finds the cache
    off, so no test writes into the user's cache directory; JAX's own cache is the suite's, a
    fresh temporary folder (tests/conftest.py)."""
    import jax

    assert compile_cache.requested_dir(dict(os.environ)) is None
    suite_cache = Path(os.environ[SUITE_CACHE_VARIABLES[0]])
    assert suite_cache.parent == Path(tempfile.gettempdir()) and suite_cache.is_dir()
    assert jax.config.jax_compilation_cache_dir == str(suite_cache)  # type: ignore[attr-defined]


def test_cold_and_warm_runs_are_bit_identical(cli_env, tmp_path):
    """An experiment with a jitted program (the fake sweepable one: a PRNG draw and float means)
    twice through the CLI with a fresh cache directory: the cold run uses the default directory
    (``DEDEBATE_COMPILE_CACHE`` unset, under ``XDG_CACHE_HOME``), the warm run names that same
    directory in ``DEDEBATE_COMPILE_CACHE``. The cache is the lab's plumbing, the same for every
    experiment; a real experiment's numbers are checked by its own tests."""
    xdg = tmp_path / "xdg"
    cache = (xdg / "dedebate" / "jax").resolve()
    # JAX_LOG_COMPILES makes JAX log each persistent-cache hit with its key (a WARNING line).
    env = {
        **cli_env,
        "XDG_CACHE_HOME": str(xdg),
        "JAX_LOG_COMPILES": "1",
        "DEDEBATE_EXPERIMENTS": SWEEPABLE,
    }
    env.pop("DEDEBATE_COMPILE_CACHE")  # unset: the default directory under XDG_CACHE_HOME
    cfg = tmp_path / "c.yaml"
    cfg.write_text("experiment: fake_sweep\ntracking: {mode: disabled}\n")
    args = [str(cfg), "size=quick", "params.p=0.3"]
    cold = _run(env, *args, f"output_dir={tmp_path / 'cold'}")
    assert cold.returncode == 0, cold.stderr
    written = _entries(cache)
    assert written, "the cold run wrote no compiled programs"
    warm = _run(
        {**env, "DEDEBATE_COMPILE_CACHE": str(cache)}, *args, f"output_dir={tmp_path / 'warm'}"
    )
    assert warm.returncode == 0, warm.stderr
    # Every program the warm run needed was in the cache: a miss would have written a new entry.
    assert _entries(cache) == written
    # JAX *loaded* the entries, the experiment's own program among them (its log's hit lines):
    # the lab's compiled point, ``counted`` in dedebate/lab/devices.py, wrapping its ``fn``.
    hits = _hits(warm.stderr)
    assert any(k.startswith("jit_counted-") for k in hits), warm.stderr
    assert {f"{k}-cache" for k in hits} <= written
    a, b = _results(tmp_path / "cold"), _results(tmp_path / "warm")
    measured = [{k: v for k, v in r["metrics"].items() if k != "wall_point_s"} for r in (a, b)]
    assert a["claims"] == b["claims"] and measured[0] == measured[1]
    assert measured[0]["point"]["heads"] == a["metrics"]["heads"]  # the lab's row, reported
    assert a["provenance"]["compile_cache"] == {
        "enabled": True,
        "dir": str(cache),
        "source": "default",
    }
    assert b["provenance"]["compile_cache"] == {
        "enabled": True,
        "dir": str(cache),
        "source": "DEDEBATE_COMPILE_CACHE",
    }


def test_off_switch_writes_nothing(cli_env, tmp_path):
    """``DEDEBATE_COMPILE_CACHE=off`` (the default directory is exercised by the cold run above)."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("experiment: fake_sweep\ntracking: {mode: disabled}\n")
    xdg = tmp_path / "xdg"
    env = {
        **cli_env,
        "XDG_CACHE_HOME": str(xdg),
        "DEDEBATE_COMPILE_CACHE": "off",
        "DEDEBATE_EXPERIMENTS": SWEEPABLE,
    }
    p = _run(env, str(cfg), f"output_dir={tmp_path / 'off'}")
    assert p.returncode == 0, p.stderr
    assert _results(tmp_path / "off")["provenance"]["compile_cache"]["enabled"] is False
    assert not (xdg / "dedebate").exists()


def test_unusable_directory_warns_once_and_runs(cli_env, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("experiment: fake_sweep\ntracking: {mode: disabled}\n")
    env = {
        **cli_env,
        "DEDEBATE_COMPILE_CACHE": str(blocker / "cache"),
        "DEDEBATE_EXPERIMENTS": SWEEPABLE,
    }
    p = _run(env, str(cfg), f"output_dir={tmp_path / 'runs'}")
    assert p.returncode == 0, p.stderr
    warnings = [ln for ln in p.stderr.splitlines() if "compilation cache off" in ln]
    assert len(warnings) == 1 and str(blocker / "cache") in warnings[0], p.stderr
    assert _results(tmp_path / "runs")["provenance"]["compile_cache"]["enabled"] is False
