"""``reproduce --quick`` compiles for speed of compilation on a CPU-only installation
(dedebate/lab/fast_compile.py): when, what goes into ``XLA_FLAGS``, that its workers inherit it and
that results record it. That these options leave the stochastic debate bit-identical and float
training equal to rounding is ``tests/lab/test_opt_level.py``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dedebate import _xla_flags
from dedebate.cli.parser import build_parser
from dedebate.cli.startup import _fast_compile
from dedebate.lab import fast_compile, parallel


@pytest.mark.parametrize(
    "size, cpu_only, env, expected",
    [
        ("quick", True, None, True),
        ("quick", False, None, False),
        ("default", True, None, False),
        (None, True, None, False),
        ("full", True, "1", True),
        ("default", False, "on", True),
        ("quick", True, "0", False),
        ("quick", True, "", True),
        ("quick", True, " False ", False),
    ],
)
def test_when_it_applies(size, cpu_only, env, expected):
    environ = {} if env is None else {fast_compile.ENV: env}
    assert fast_compile.wanted(size, cpu_only, environ) is expected


def test_a_bad_value_names_the_variable_and_what_is_allowed():
    with pytest.raises(ValueError, match=r"DEDEBATE_FAST_COMPILE='maybe': must be 1 .* or 0"):
        fast_compile.wanted("quick", True, {fast_compile.ENV: "maybe"})


def test_flags_are_added_unless_named_or_kept():
    env = {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    assert fast_compile.apply(env) == [
        "--xla_backend_optimization_level=0",
        "--xla_cpu_use_fusion_emitters=false",
    ]
    assert env["XLA_FLAGS"] == (
        "--xla_dump_to=/tmp/x --xla_backend_optimization_level=0 "
        "--xla_cpu_use_fusion_emitters=false"
    )
    assert fast_compile.apply(env) == []  # twice is once
    env = {"XLA_FLAGS": "--xla_backend_optimization_level=3"}  # the user's value stays
    assert fast_compile.apply(env) == ["--xla_cpu_use_fusion_emitters=false"]
    assert env["XLA_FLAGS"].startswith("--xla_backend_optimization_level=3 ")
    env = {"DEDEBATE_KEEP_XLA_FLAGS": "1"}
    assert fast_compile.apply(env) == [] and "XLA_FLAGS" not in env


def test_a_resumed_quick_reproduce_compiles_as_it_started(tmp_path, monkeypatch):
    (tmp_path / "report.json").write_text(json.dumps({"provenance": {"size": "quick", "seed": 0}}))
    monkeypatch.setattr(parallel, "accelerator_plugins_installed", lambda: False)
    monkeypatch.delenv(fast_compile.ENV, raising=False)
    monkeypatch.delenv("DEDEBATE_KEEP_XLA_FLAGS", raising=False)
    for argv, added in (
        (["reproduce", "--resume", str(tmp_path)], 2),
        (["reproduce", "--resume", str(tmp_path / "nowhere")], 0),
        (["reproduce", "--quick"], 2),
        (["reproduce"], 0),
        (["run", "x"], 0),
    ):
        monkeypatch.setenv("XLA_FLAGS", "")
        assert len(_fast_compile(build_parser().parse_args(argv))) == added, argv


def _without_fast_flags(env):
    flags = [
        f
        for f in env.get("XLA_FLAGS", "").split()
        if not any(name in f for name in fast_compile.FLAGS)
    ]
    return {**env, "XLA_FLAGS": " ".join(flags)}


def test_quick_workers_inherit_the_flags_and_results_record_them(tmp_path, cli_env):
    if parallel.accelerator_plugins_installed():
        pytest.skip("the flags apply by default only where JAX has only its CPU")
    env = {**_without_fast_flags(cli_env), "DEDEBATE_EXPERIMENTS": "tests.fake_experiments"}
    env.pop(fast_compile.ENV, None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dedebate.cli",
            "reproduce",
            "--quick",
            "--jobs",
            "2",
            "--no-progress",
            "--tracking",
            "disabled",
            "--only",
            "fake_pass",
            "fake_fail",
            "--output-dir",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr  # fake_fail fails a claim
    (rep,) = tmp_path.glob("reproduce-*")
    for where in (
        rep / "report.json",
        rep / "fake_pass" / "results.json",
        rep / "fake_fail" / "results.json",
    ):
        flags = json.loads(where.read_text())["provenance"]["xla_flags"].split()
        assert {"--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"} <= set(
            flags
        ), where


def test_a_bad_value_is_a_usage_error(tmp_path, cli_env):
    env = {**cli_env, fast_compile.ENV: "maybe"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dedebate.cli",
            "reproduce",
            "--quick",
            "--output-dir",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "dedebate: error: DEDEBATE_FAST_COMPILE='maybe': must be 1 (on) or 0 (off), or unset "
        "(on for `reproduce --quick` where JAX has only its CPU)"
    ]
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(
    "flags, level",
    [
        ("", None),
        ("--xla_dump_to=/tmp/x", None),
        ("--xla_backend_optimization_level=0", 0),
        ("--xla_backend_optimization_level=2 --xla_backend_optimization_level=0", 0),
        ("--xla_backend_optimization_level=3", 3),
    ],
)
def test_a_programs_own_level_is_capped_by_the_process(flags, level):
    env = {"XLA_FLAGS": flags}
    assert _xla_flags.requested_opt_level(env) == level
    own = {_xla_flags.OPT_LEVEL: 1, "xla_other": True}
    want = own if level is None or level >= 1 else {**own, _xla_flags.OPT_LEVEL: level}
    assert _xla_flags.capped_options(own, env) == want
    assert _xla_flags.capped_options({"xla_other": True}, env) == {"xla_other": True}


# The programs' option sets (dedebate/programs.py) and the experiments' choices of them: the
# compile-bound ones capped, the Stackelberg trainers' (they run long) at level 1 always.
PROGRAM_OPTIONS = """
import json
from dedebate import programs
from dedebate.agents import stochastic_zoo
from experiments import prover_estimator as ped_exp, stackelberg as stackelberg_exp
print(json.dumps([o["xla_backend_optimization_level"] for o in (
    programs.FAST_COMPILE, stochastic_zoo.compile_options("cpu"), ped_exp.COMPILE_OPTIONS,
    programs.TRAINING, stackelberg_exp.COMPILE_OPTIONS)]))
"""


@pytest.mark.parametrize(
    "flags, levels",
    [("", [1, 1, 1, 1, 1]), ("--xla_backend_optimization_level=0", [0, 0, 0, 1, 1])],
)
def test_quick_runs_compile_the_programs_at_level_0_but_the_stackelberg_trainers(
    flags, levels, cli_env
):
    env = {**cli_env, "XLA_FLAGS": flags}
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM_OPTIONS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == levels


def test_the_command_line_sets_the_flags_before_any_program_is_defined():
    """The options are read when a module defines its programs, so the command line must add the
    flags before it imports any such module: what ``cli.main`` imports up to then is the CLI and
    the two lab modules of :func:`dedebate.cli.startup._fast_compile` (the CLI's own modules are
    left out of the list)."""
    code = (
        "import json, sys; import dedebate.cli; from dedebate.lab import fast_compile, "
        "parallel; print(json.dumps(sorted(m for m in sys.modules if m.startswith(("
        "'dedebate', 'experiments')) and not m.startswith('dedebate.cli.'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(proc.stdout) == [
        "dedebate",
        "dedebate._xla_flags",
        "dedebate.cli",
        "dedebate.lab",
        "dedebate.lab.fast_compile",
        "dedebate.lab.parallel",
    ]
