"""The command line's documented defaults, option pass-through and boundary checks (README,
docs/lab.md): each test fails on a mutation of dedebate/cli/ that every other test let through."""

from __future__ import annotations

import pytest

from dedebate import cli
from dedebate.cli.parser import build_parser, parse_args
from tests.fakes import assert_one_line_error

pytestmark = pytest.mark.usefixtures("fake_env")


def quick(out, *extra) -> list[str]:
    return ["reproduce", "--quick", "--only", "fake_pass", "--output-dir", str(out), *extra]


def run_config(tmp_path, experiment: str) -> str:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"experiment: {experiment}\nsize: quick\noutput_dir: {tmp_path}\n"
        "tracking: {mode: disabled}\n"
    )
    return str(cfg)


def test_no_command_is_a_bad_command_line():
    assert cli.main([]) == 2


def test_documented_defaults():
    """reproduce writes under runs/ with tracking auto (WANDB_MODE decides); sync uploads four
    runs at a time with a 300 s bound each; sweep takes overrides after its options."""
    p = build_parser()
    rep, sync = parse_args(p, ["reproduce"]), parse_args(p, ["sync", "x"])
    assert (rep.output_dir, rep.tracking, sync.jobs, sync.timeout) == ("runs", "auto", 4, 300.0)
    assert parse_args(p, ["sweep", "c.yaml", "--no-progress", "seed=3"]).overrides == ["seed=3"]


def test_no_progress_writes_nothing_to_stderr(tmp_path, capsys):
    assert cli.main(["run", "--no-progress", run_config(tmp_path, "fake_pass")]) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(quick(tmp_path / "r", "--tracking", "disabled", "--no-progress")) == 0
    assert capsys.readouterr().err == ""


def test_traceback_raises_the_experiments_error(tmp_path):
    with pytest.raises(RuntimeError, match="boom at step 1"):
        cli.main(["run", "--no-progress", "--traceback", run_config(tmp_path, "fake_raise")])


def test_tracking_auto_follows_wandb_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert cli.main(quick(tmp_path, "--no-progress")) == 0
    (rep,) = tmp_path.glob("reproduce-*")
    assert not list(rep.rglob("wandb"))


def test_values_just_outside_their_ranges_are_refused(tmp_path, capsys):
    code = cli.main(quick(tmp_path, "--no-progress", "--seed", str(2**32)))
    err = capsys.readouterr().err
    assert_one_line_error(code, err, "--seed 4294967296: must be an integer in [0, 2^32)")
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text("experiment: fake_pass\nsize: quick\n")
    code = cli.main(["sweep", str(cfg), "--processes", "0"])
    assert_one_line_error(code, capsys.readouterr().err, "--processes 0: must lie in [1, 64]")
    code = cli.main(["sync", "--jobs", "0", str(tmp_path)])
    assert_one_line_error(code, capsys.readouterr().err, "--jobs=0: must be at least 1")
    f = tmp_path / "f"
    f.write_text("")
    code = cli.main(["sync", str(f)])
    assert_one_line_error(code, capsys.readouterr().err, f"{f}: not a directory")


def test_resume_with_another_seed_is_refused(tmp_path, capsys):
    assert cli.main(quick(tmp_path, "--tracking", "disabled", "--no-progress")) == 0
    (rep,) = tmp_path.glob("reproduce-*")
    capsys.readouterr()
    code = cli.main(["reproduce", "--resume", str(rep), "--seed", "1"])
    assert_one_line_error(code, capsys.readouterr().err, "it was reproduced with --seed 0, not 1")


def test_list_writes_no_warning(capsys):
    assert cli.main(["list"]) == 0 and capsys.readouterr().err == ""


def test_override_flag_gets_the_key_value_hint(capsys):
    code = cli.main(["run", "machines", "--override", "params.n=3"])
    assert_one_line_error(code, capsys.readouterr().err, "write key.sub=value")
