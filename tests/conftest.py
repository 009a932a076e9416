"""Shared fixtures. Nothing here is autouse: each test asks for what it needs."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

TEST_COMPILE_OPTIONS = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}
"""XLA options for every program the tests compile, instead of XLA's defaults (level 3, the new
fusion emitters).

Most of the suite's CPU time is XLA compiling a few hundred large programs on the CPU. LLVM's
backend optimisation level 1 (default 3) cuts that by about a third, and XLA:CPU's older
elemental fusion emitters compile a further quarter faster than its new ones. XLA's own (HLO)
passes are the same either way. Only for the tests: the older emitters run the binomial
sampler about three times slower, which the compile-bound tests barely feel and users would.
``tests/lab/test_opt_level.py`` checks that the values the tests check do not depend on these
options: the stochastic debate is bit-identical, float training agrees to float32 rounding.
Set in ``XLA_FLAGS`` before JAX starts, so subprocesses (CLI runs, notebooks) inherit them; an
option already named in ``XLA_FLAGS`` keeps its value there.
"""
XLA_DEFAULTS = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}
"""XLA's defaults for the same options: what users' programs compile with. A test of the users'
compiled code passes them to ``Lowered.compile``."""

SUITE_CACHE = "DEDEBATE_TEST_JAX_CACHE"
"""Names the folder of the suite's own persistent JAX compilation cache: one fresh temporary folder
per pytest run, made by the first process that loads this file (pytest-xdist's controller; its
workers and every subprocess a test starts inherit the name) and removed when that process ends.

Many tests compile the same program (the same experiment point, the same protocol round at the
same shapes) from a fresh closure, so JAX's in-memory caches miss where its persistent cache,
keyed on the lowered program, its compile options, the devices, ``XLA_FLAGS`` and the versions,
hits: a hit loads the executable that compiling would have produced. The whole suite on the
two-core machine: median 468 s without (466-473, three runs), 359 s with (354-366, five runs,
2026-12-07; docs/performance.md). It starts empty each run: every program compiles once a run.
``tests/lab/test_lab_compile_cache.py`` tests the command line's own cache without these
variables."""
_OWNS_SUITE_CACHE = SUITE_CACHE not in os.environ
if _OWNS_SUITE_CACHE:
    os.environ[SUITE_CACHE] = tempfile.mkdtemp(prefix="dedebate-tests-jax-cache-")
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ[SUITE_CACHE]
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # JAX skips under 1 s by default
SUITE_CACHE_VARIABLES = (
    SUITE_CACHE,
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
)

# Both before any test starts JAX: the tests' options, and (importing dedebate) its CPU work-around
from dedebate.lab.fast_compile import add_flags  # noqa: E402

add_flags(TEST_COMPILE_OPTIONS)

# The command line's persistent compile cache stays out of the user's cache directory: every CLI
# subprocess a test starts inherits this (tests/lab/test_lab_compile_cache.py sets its own, in tmp).
os.environ["DEDEBATE_COMPILE_CACHE"] = "off"

REPO = Path(__file__).resolve().parents[1]
FAKE_EXPERIMENTS = "tests.fake_experiments"
FAKE_BENCH = "tests.fake_experiments.fakebench"

HEAVY_FIRST = (
    "lab/test_lab_memory.py",
    "training/test_stackelberg.py",
    "experiments/test_ped_digits.py",
    "conventions/test_notebooks.py",
    "core/test_stochastic_binomial.py",
    "protocols/test_stochastic.py",
    "protocols/test_stochastic_lazy.py",
    "experiments/test_stackelberg_resume.py",
    "training/test_stochastic_selfplay.py",
    "lab/test_lab_signals.py",
    "experiments/test_ogd_resume.py",
    "protocols/test_stochastic_decision.py",
    "experiments/test_stochastic_experiment.py",
    "protocols/test_stochastic_devices.py",
    "lab/test_lab_parallel.py",
    "protocols/test_stochastic_on_device.py",
    "lab/test_opt_level.py",
    "experiments/test_prover_estimator_experiment.py",
    "experiments/test_stochastic_selfplay_resume.py",
    "lab/test_lab_distributed.py",
    "estimators/test_estimator_soundness.py",
    "protocols/test_prover_estimator.py",
    "lab/test_reliability.py",
    "lab/test_lab_resume.py",
    "protocols/test_binary_search.py",
    "estimators/test_ogd.py",
    "experiments/test_deterministic_debate.py",
    "estimators/test_estimator_network.py",
    "bench/test_bench_stochastic.py",
    "experiments/test_machines_experiment.py",
    "machines/test_machines.py",
    "machines/test_fixtures.py",
    "lab/test_fast_compile.py",
    "lab/test_lab_metrics_resume.py",
    "estimators/test_estimator_families.py",
    "bench/test_accelerator_script.py",
    "lab/test_lab_sweep.py",
    "cli/test_cli.py",
    "protocols/test_witness_stochastic.py",
)
"""The test files of at least ~4.5 CPU seconds, most expensive first (their tests' durations summed
over a full two-worker run with the suite's compile cache, fixtures included: 39 files, ~580 of
~670 CPU-s, 2026-12-07), named by their folder in ``tests/``. They are collected first and, with
``--no-loadscope-reorder`` (as ``./dev.sh test`` and CI run; xdist otherwise orders files by their
count of tests), ``--dist loadfile`` hands them out longest first, so the two workers finish
together instead of one waiting on a long file at the end. A stale list costs balance, never a
result."""


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (``./dev.sh test``, CI): pytest-xdist's count (a worker per physical core) plus
    one, to fill the cores while tests wait on subprocesses (docs/performance.md: faster on two
    cores, where four workers were slower). ``$PYTEST_XDIST_AUTO_NUM_WORKERS`` sets the count."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    from xdist.plugin import pytest_xdist_auto_num_workers as per_core

    return per_core(config) + 1


def pytest_configure(config):
    """Import W&B and Hypothesis once, in the main thread, before any test starts threads.

    Their first import in the middle of a run failed with "SystemError: AST constructor
    recursion depth mismatch" (CPython 3.11 keeps one AST depth counter for all threads; related
    upstream report: python/cpython#106905) while an earlier test's background threads still
    ran. That left a half-imported ``wandb``, so W&B was off for the rest of the worker and
    ``test_real_offline_wandb_files`` failed; and Hypothesis's plugin, which imports it for its
    terminal summary, ended a run without workers (``-n 0``) whose tests had all passed.
    """
    import hypothesis  # noqa: F401
    import wandb  # noqa: F401


def pytest_unconfigure(config):
    """The process that made the suite's compile cache (:data:`SUITE_CACHE`) removes it."""
    if _OWNS_SUITE_CACHE:
        shutil.rmtree(os.environ[SUITE_CACHE], ignore_errors=True)


def pytest_collection_modifyitems(session, config, items):
    """Order the files: :data:`HEAVY_FIRST` in its order, then the rest as collected (a stable
    sort, so tests inside a file keep their order)."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda i: rank.get(f"{i.path.parent.name}/{i.path.name}", len(HEAVY_FIRST)))


@pytest.fixture
def fake_env(monkeypatch):
    """Point the lab at the fake experiments and benchmarks; W&B quiet, WANDB_MODE unset."""
    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", FAKE_EXPERIMENTS)
    monkeypatch.setenv("DEDEBATE_BENCH", FAKE_BENCH)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("DEDEBATE_JOBS", "1")  # reproduce in the test process, no worker processes
    return monkeypatch


@pytest.fixture
def wandb_server(monkeypatch):
    """A local HTTP server that answers every request, as ``WANDB_BASE_URL`` (for subprocesses
    too): what ``dedebate sync`` probes before it uploads."""
    import http.server
    import threading

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def fake_registry():
    from dedebate.lab.registry import discover_experiments

    return discover_experiments([FAKE_EXPERIMENTS])


@pytest.fixture
def cli_env():
    """Environment for ``python -m dedebate.cli`` subprocesses that use the fakes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["DEDEBATE_EXPERIMENTS"] = FAKE_EXPERIMENTS
    env["DEDEBATE_BENCH"] = FAKE_BENCH
    env["WANDB_SILENT"] = "true"
    env.pop("WANDB_MODE", None)
    env["DEDEBATE_JOBS"] = "1"  # reproduce in the CLI process, no worker processes
    env["PYTHON"] = sys.executable
    return env  # DEDEBATE_COMPILE_CACHE=off comes from os.environ (set above, for every test)


def assert_shipped_sweeps_plot(experiment: str, row: dict) -> None:
    """Every metric a shipped sweep of ``experiment`` (configs/sweeps/) names is one of a sweep
    row's, up to the sizes in its name (``K2_T256`` matches ``K2_T8``)."""
    import re

    import yaml

    def shape(name: str) -> str:
        return re.sub(r"\d+", "#", name)

    have = {shape(k) for k in row}
    files = sorted((REPO / "configs" / "sweeps").glob("*.yaml"))
    shipped = [yaml.safe_load(f.read_text()) | {"file": f.name} for f in files]
    mine = [c for c in shipped if c["experiment"] == experiment]
    assert mine, f"no shipped sweep of {experiment}"
    for cfg in mine:
        missing = [m for m in cfg["sweep"].get("metrics") or [] if shape(m) not in have]
        assert not missing, (cfg["file"], missing)
