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


def list_raising(monkeypatch, error: Exception) -> int:
    """``dedebate list`` with its command replaced by one that raises ``error``: the exit code."""

    def fails(args):
        raise error

    monkeypatch.setitem(cli.COMMANDS, "list", fails)
    return cli.main(["list"])


@pytest.mark.parametrize(
    "code", ["EACCES", "EPERM", "EROFS", "ENOSPC", "EDQUOT", "ENOTDIR", "EISDIR"]
)
def test_a_path_the_user_must_fix_is_one_line_and_exit_2(monkeypatch, capsys, code):
    """A command that meets an unusable path (no permission, read-only, disk or quota full, a
    file where a folder should be): exit 2, one line naming the path and the reason."""
    import errno
    import os

    number = getattr(errno, code)
    rc = list_raising(monkeypatch, OSError(number, os.strerror(number), "/data/runs/x"))
    assert_one_line_error(rc, capsys.readouterr().err, f"/data/runs/x: {os.strerror(number)}")
    # an error of two paths (a rename) names both
    rc = list_raising(monkeypatch, OSError(number, os.strerror(number), "/data/a", None, "/data/b"))
    assert_one_line_error(rc, capsys.readouterr().err, f"/data/a -> /data/b: {os.strerror(number)}")


@pytest.mark.parametrize(
    "error",
    [
        ConnectionResetError(104, "Connection reset by peer", "/data/runs/x"),
        OSError(28, "No space left on device"),
    ],
)
def test_any_other_os_error_is_raised(monkeypatch, error):
    """An OSError that is not a path's fault (a broken connection), or names no path, is not
    dressed up as a usage error."""
    with pytest.raises(OSError) as raised:
        list_raising(monkeypatch, error)
    assert raised.value is error


def test_only_an_override_of_the_tracking_mode_keeps_a_resumed_run_online(capsys):
    """A resumed folder's ``tracking.mode: online`` is kept only when the command line sets
    ``tracking.mode`` (or the whole ``tracking``); another tracking key does not count."""
    from dedebate.cli.run import offline_unless_asked

    raw = {"seed": 3, "tracking": {"mode": "online", "entity": "e", "project": "p"}}
    for asked in (["tracking.mode=online"], [" tracking.mode =offline"], ["tracking={}"]):
        assert offline_unless_asked(raw, ["seed=3", *asked], "f") is raw, asked
    assert capsys.readouterr().err == ""
    for not_asked in ([], ["tracking.project=q"], ["tracking_mode=online"]):
        got = offline_unless_asked(raw, not_asked, "f")
        assert got == {"seed": 3, "tracking": {"mode": "offline", "entity": "e", "project": "p"}}
        assert raw["tracking"]["mode"] == "online"  # the config read is left as it was
        assert "resuming offline" in capsys.readouterr().err
    offline = {"tracking": {"mode": "offline"}}
    assert offline_unless_asked(offline, [], "f") is offline
    assert offline_unless_asked(["not", "a", "dict"], [], "f") == ["not", "a", "dict"]
