"""Bad input to the command line: one line naming the value and what is allowed, exit 2, no
traceback, nothing on disk damaged (``bench --out``, ``--jobs``, the SLURM variables, ``report
--html``, ``DEDEBATE_KEEP_XLA_FLAGS``, a flag where a config key was meant, compare of a sweep).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dedebate import _xla_flags, cli
from dedebate.cli.reproduce import jobs_value
from dedebate.lab import distributed, fast_compile
from dedebate.lab.distributed import DistributedError, ProcessEnv, process_env
from tests.conftest import FAKE_BENCH, REPO
from tests.fakes import assert_one_line_error


def answer(capsys, argv):
    """``cli.main(argv)`` in this process: (code, stdout, stderr)."""
    capsys.readouterr()
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# -- 1: bench --out is checked before the benchmark runs, and written atomically


@pytest.fixture
def bench_calls(monkeypatch):
    """The fake benchmark ``tiny``, recording each call instead of running."""
    import tests.fake_experiments.fakebench.tiny as tiny

    calls = []
    monkeypatch.setenv("DEDEBATE_BENCH", FAKE_BENCH)
    monkeypatch.setattr(tiny, "run", lambda full: calls.append(full) or {"n": 1})
    return calls


def test_bench_refuses_an_unusable_out_before_running(tmp_path, capsys, bench_calls):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(afile)
    for out, fragment in (
        (afile / "x.json", f"{afile} is a file, not a directory"),
        (afile / "deeper" / "x.json", f"{afile} is a file, not a directory"),
        (folder, "a directory"),
        (link, "a symbolic link"),
    ):
        code, out_text, err = answer(capsys, ["bench", "tiny", "--out", str(out)])
        assert_one_line_error(code, err, f"--out {out}", "give a file path")
        assert fragment in err and out_text == ""
    assert bench_calls == []  # the benchmark never ran
    assert afile.read_text() == "mine\n" and list(folder.iterdir()) == []
    assert link.is_symlink()


def test_bench_writes_out_atomically_into_a_new_folder(tmp_path, capsys, bench_calls):
    out = tmp_path / "new" / "deeper" / "b.json"
    code, text, _ = answer(capsys, ["bench", "tiny", "--out", str(out)])
    assert code == 0 and bench_calls == [False]
    assert json.loads(out.read_text()) == json.loads(text)
    assert sorted(p.name for p in out.parent.iterdir()) == ["b.json"]  # no .tmp left


# -- 2: --jobs and DEDEBATE_JOBS take ASCII digits only


def test_jobs_value_refuses_what_int_cannot_read():
    assert jobs_value("²") is None and jobs_value("٣") is None
    assert jobs_value("1" + "0" * 5000) is None  # over int()'s digit limit
    assert (jobs_value("3"), jobs_value("auto"), jobs_value("0")) == (3, "auto", None)


def test_reproduce_refuses_superscript_jobs(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DEDEBATE_JOBS", raising=False)
    argv = ["reproduce", "--quick", "--output-dir", str(tmp_path / "runs")]
    code, _, err = answer(capsys, [*argv, "--jobs", "²"])
    assert_one_line_error(code, err, "--jobs ²: must be an integer >= 1 or auto")
    monkeypatch.setenv("DEDEBATE_JOBS", "²")
    code, _, err = answer(capsys, argv)
    assert_one_line_error(code, err, "DEDEBATE_JOBS='²': must be an integer >= 1 or auto")
    assert not (tmp_path / "runs").exists()


# -- 3: the SLURM variables are checked as the JAX_* ones are


@pytest.mark.parametrize(
    "env, distributed, message",
    [
        ({"SLURM_NTASKS": "abc"}, False, "SLURM_NTASKS='abc': must be an integer >= 1"),
        ({"SLURM_NTASKS": "0"}, False, "SLURM_NTASKS='0': must be an integer >= 1"),
        ({"SLURM_NTASKS": "²", "SLURM_PROCID": "0"}, True, "SLURM_NTASKS='²'"),
        ({"SLURM_NTASKS": "", "SLURM_PROCID": "0"}, True, "SLURM_NTASKS='': must be"),
        (
            {"SLURM_NTASKS": "2", "SLURM_PROCID": "x"},
            True,
            "SLURM_PROCID='x': must be an integer in [0, SLURM_NTASKS=2)",
        ),
        ({"SLURM_NTASKS": "2", "SLURM_PROCID": "7"}, True, "SLURM_PROCID='7': must be an"),
        ({"SLURM_NTASKS": "2", "SLURM_PROCID": "-1"}, True, "SLURM_PROCID='-1': must be an"),
    ],
)
def test_bad_slurm_variables_are_named(env, distributed, message):
    with pytest.raises(DistributedError) as caught:
        process_env(distributed, environ=env)
    assert str(caught.value).startswith(message)


def test_good_slurm_variables_are_read():
    assert distributed.slurm_tasks({}) is None
    assert distributed.slurm_tasks({"SLURM_NTASKS": " "}) is None
    assert distributed.slurm_tasks({"SLURM_NTASKS": " 4 "}) == 4
    env = {"SLURM_NTASKS": "2", "SLURM_PROCID": "1"}
    assert process_env(True, environ=env) == ProcessEnv("slurm", 2, 1, None)
    assert process_env(False, environ=env) == ProcessEnv()


@pytest.mark.parametrize(
    "env, flags, message",
    [
        ({"SLURM_NTASKS": "abc"}, [], "SLURM_NTASKS='abc'"),
        ({"SLURM_NTASKS": "2", "SLURM_PROCID": "x"}, ["--distributed"], "SLURM_PROCID='x'"),
    ],
)
def test_sweep_with_bad_slurm_variables_exits_2(tmp_path, capsys, monkeypatch, env, flags, message):
    for name in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, _, err = answer(capsys, ["sweep", str(tmp_path / "c.yaml"), *flags])
    assert_one_line_error(code, err, message)


# -- 4: report --html never replaces a record of the reproduce folder


@pytest.fixture
def reproduce_dir(tmp_path):
    """A reproduce folder with the records ``report --html`` must leave alone."""
    rep = tmp_path / "rep"
    (rep / "exp").mkdir(parents=True)
    records = {
        "report.json": json.dumps({"experiments": [], "provenance": {}}),
        "report.md": "# report\n",
        "config.yaml": "size: quick\n",
        "exp/results.json": "{}",
        "exp/metrics.jsonl": "{}\n",
    }
    for name, text in records.items():
        (rep / name).write_text(text)
    return rep, records


def test_report_html_refuses_a_record_of_the_folder(reproduce_dir, capsys):
    rep, records = reproduce_dir
    (rep / "old.html").symlink_to(rep / "report.json")
    for target in [*records, "exp", "notes", "old.html"]:
        code, out, err = answer(capsys, ["report", str(rep), "--html", str(rep / target)])
        assert_one_line_error(
            code, err, f"--html {rep / target}", "only a new or existing *.html file"
        )
        assert out == ""
    assert {name: (rep / name).read_text() for name in records} == records
    assert not (rep / "notes").exists() and (rep / "old.html").is_symlink()


def test_report_html_writes_a_page_inside_or_outside(reproduce_dir, tmp_path, capsys):
    rep, _ = reproduce_dir
    (rep / "page.html").write_text("an earlier page")
    for page in (rep / "page.html", rep / "exp" / "new.HTML", tmp_path / "elsewhere"):
        code, out, _ = answer(capsys, ["report", str(rep), "--html", str(page)])
        assert code == 0 and out == f"wrote {page}\n"
        assert page.read_text().lstrip().lower().startswith("<!doctype html")


# -- 5: DEDEBATE_KEEP_XLA_FLAGS takes DEDEBATE_FAST_COMPILE's words, and refuses others


def test_keep_xla_flags_takes_the_fast_compile_words(monkeypatch):
    assert (_xla_flags.ON_VALUES, _xla_flags.OFF_VALUES) == (
        fast_compile.ON_VALUES,
        fast_compile.OFF_VALUES,
    )
    for value, keep in (("1", True), ("True", True), ("yes", True), (" on ", True), ("", False)):
        env = {"DEDEBATE_KEEP_XLA_FLAGS": value}
        assert _xla_flags.keep_requested(env) is keep and fast_compile.keep_flags(env) is keep
        assert bool(fast_compile.apply(env)) is not keep  # kept: no flag added
    for value in ("0", "false", "NO", "off"):
        assert fast_compile.keep_flags({"DEDEBATE_KEEP_XLA_FLAGS": value}) is False
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("DEDEBATE_KEEP_XLA_FLAGS", "yes")
    _xla_flags.apply_cpu_workaround((0, 10, 2))
    assert os.environ["XLA_FLAGS"] == ""
    monkeypatch.setenv("DEDEBATE_KEEP_XLA_FLAGS", "maybe")  # at import: never raises
    _xla_flags.apply_cpu_workaround((0, 10, 2))
    assert os.environ["XLA_FLAGS"] == _xla_flags.YNN_FLAG


def test_keep_xla_flags_refuses_another_word(cli_env):
    env = {"DEDEBATE_KEEP_XLA_FLAGS": "maybe"}
    with pytest.raises(ValueError, match=r"DEDEBATE_KEEP_XLA_FLAGS='maybe': must be 1 .* or 0"):
        fast_compile.wanted(None, True, env)
    with pytest.raises(ValueError, match="DEDEBATE_KEEP_XLA_FLAGS='maybe'"):
        fast_compile.apply(env)
    proc = subprocess.run(
        [sys.executable, "-m", "dedebate.cli", "bench", "tiny"],
        env={**cli_env, **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_one_line_error(
        proc.returncode, proc.stderr, "dedebate: error: DEDEBATE_KEEP_XLA_FLAGS='maybe'"
    )
    assert proc.stdout == ""


# -- 6: a flag where a config key was meant, and compare of a sweep, say what to write instead


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["run", "machines", "--quick"], "write size=quick"),
        (["sweep", "machines", "--full"], "write size=full"),
        (["run", "machines", "--set", "params.n=3"], "write key.sub=value"),
        (["run", "machines", "--seed=3"], "write seed=3"),
        (["run", "machines", "--params.n", "3"], "write params.n=VALUE"),
        (["run", "machines", "--output-dir=x"], "write output_dir=x"),
    ],
)
def test_a_flag_for_a_config_key_gets_a_hint(capsys, argv, hint):
    code, _, err = answer(capsys, argv)
    assert_one_line_error(code, err, f"unrecognized arguments: {argv[2]}", hint)


def test_other_unknown_flags_get_no_hint(capsys):
    code, _, err = answer(capsys, ["compare", "a", "b", "--quick"])
    assert_one_line_error(
        code, err, "unrecognized arguments: --quick (see dedebate compare --help)"
    )
    assert "size=" not in err
    code, _, err = answer(capsys, ["run", "machines", "--bogus"])
    assert_one_line_error(code, err, "unrecognized arguments: --bogus (see dedebate run --help)")


def test_compare_names_a_sweep_record(tmp_path, capsys):
    sweep = tmp_path / "sweep-x"
    sweep.mkdir()
    (sweep / "results.json").write_text(json.dumps({"kind": "sweep", "experiment": "x"}))
    code, _, err = answer(capsys, ["compare", str(sweep), str(sweep)])
    assert_one_line_error(code, err, "a sweep's record", "compare takes run directories")


def test_a_config_not_found_lists_the_shipped_ones(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "configs/machine.yaml"]) == 2
    err = capsys.readouterr().err
    assert "config file not found: 'configs/machine.yaml'; a shipped config by name: " in err
    assert "machines, ogd_estimator" in err and "; a shipped sweep: sweeps/budget_frontier" in err
    # a sweep by its bare name: the sweeps' names (it named none: the UX audit)
    assert cli.main(["sweep", "stochastic_scale"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sweeps/stochastic_scale (or a YAML file's path)" in err
    assert cli.main(["run", "tracking.mode=disabled"]) == 2  # an override in the config's place
    err = capsys.readouterr().err
    assert "('tracking.mode=disabled' is an override: name the config before it, NAME" in err


def test_resume_of_a_missing_path_or_a_file_says_which(tmp_path, capsys):
    """``--resume`` names what is wrong with its path (it said "no config.yaml there" for all)."""
    afile = tmp_path / "results.json"
    afile.write_text("{}")
    for cmd in ("run", "sweep"):
        assert cli.main([cmd, "--resume", str(tmp_path / "nope")]) == 2
        assert capsys.readouterr().err.endswith("nope: no such directory\n")
        assert cli.main([cmd, "--resume", str(afile)]) == 2
        assert f"not a directory (--resume takes the {cmd}'s folder)" in capsys.readouterr().err
