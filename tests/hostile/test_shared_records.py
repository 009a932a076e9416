"""Reading a shared folder's records safely (dedebate/lab/rundir.py, ``read_bytes``): no read
through a link, no FIFO or device (a reader would hang), no file over its cap; and a resume
that meets a record dedebate did not write stops with exit 2 before it writes anything.

Each test plants its hostile folder under ``tmp_path`` and runs the command line in this process;
a hang (the old answer to a FIFO) is cut by an alarm and fails the test."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
from pathlib import Path

import pytest

from dedebate import cli
from dedebate.lab import rundir
from dedebate.lab.folder_guard import check_run_dir
from dedebate.lab.rundir import (
    MAX_METRICS_BYTES,
    MAX_RECORD_BYTES,
    MAX_ROWS_BYTES,
    RunDirError,
    open_append,
    read_bytes,
)
from tests.hostile.test_catalogue import EXPERIMENTS, GOOD_REPORT, run_folder

SECRET = "PASSWORD=hunter2"
QUIET = ["--tracking", "disabled", "--no-progress"]


class Hung(BaseException):
    """A block that did not end in time (no ``except Exception`` or ``OSError`` catches it)."""


@contextlib.contextmanager
def no_hang(seconds: int = 20):
    """Fail (instead of waiting forever) if the block takes longer than ``seconds``."""

    def stop(signum, frame):
        raise Hung(f"hung for {seconds} s (a FIFO read or opened?)")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root``: a file's bytes, else what it is (a FIFO is never read)."""
    out: dict[str, bytes | str] = {}
    for where, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(where, name)
            kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "other"
            regular = path.is_file() and not path.is_symlink()
            out[os.path.relpath(path, root)] = path.read_bytes() if regular else kind
    return out


def answer(capsys, argv: list[str]) -> tuple[int, str, str]:
    """Run ``dedebate ARGV``; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    with no_hang():
        code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def env(fake_env):
    fake_env.setenv("DEDEBATE_EXPERIMENTS", EXPERIMENTS)
    return fake_env


@pytest.fixture
def finished_run(tmp_path, env, capsys) -> Path:
    """A finished fake_pass run (its folder)."""
    cfg = tmp_path / "fake_pass.yaml"
    cfg.write_text(f"experiment: fake_pass\nsize: quick\noutput_dir: {tmp_path / 'runs'}\n")
    code, out, _ = answer(capsys, ["run", str(cfg), "tracking.mode=disabled", "--no-progress"])
    assert code == 0, out
    (run,) = (tmp_path / "runs").iterdir()
    return run


@pytest.fixture
def finished_reproduce(tmp_path, env, capsys) -> Path:
    """A complete reproduce folder of fake_pass."""
    code, out, _ = answer(
        capsys,
        ["reproduce", "--quick", "--only", "fake_pass", "--output-dir", str(tmp_path / "reps")]
        + QUIET,
    )
    assert code == 0, out
    (rep,) = (tmp_path / "reps").iterdir()
    return rep


def secret_report(outside: Path) -> Path:
    """A report.json outside every run folder, holding a secret."""
    outside.mkdir(parents=True, exist_ok=True)
    data = json.loads(GOOD_REPORT)
    data["experiments"][0]["claims"][0]["claim"] = SECRET
    (outside / "private.json").write_text(json.dumps(data))
    return outside / "private.json"


# -- hole 1: report and compare read report.json / results.json through a link out


@pytest.mark.parametrize("html", [False, True], ids=["report", "report --html"])
def test_report_refuses_a_report_json_that_links_out(tmp_path, env, capsys, html):
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / "report.json").symlink_to(secret_report(tmp_path / "outside"))
    page = tmp_path / "page.html"
    code, out, err = answer(capsys, ["report", str(rep), *(["--html", str(page)] if html else [])])
    assert code == 2
    one_line(err, f"{rep / 'report.json'}: a symbolic link", "regular files and folders")
    assert SECRET not in out + err and not page.exists()


def test_compare_refuses_a_results_json_that_links_out(tmp_path, env, capsys, finished_run):
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").symlink_to(secret_report(tmp_path / "outside"))
    for argv in (
        ["compare", str(other), str(finished_run)],
        ["compare", str(other / "results.json"), str(finished_run)],
    ):
        code, out, err = answer(capsys, argv)
        assert code == 2
        one_line(err, f"{other / 'results.json'}: a symbolic link")
        assert SECRET not in out + err


# -- hole 2: a FIFO in a shared folder hung --resume


@pytest.mark.parametrize("name", [".lock", "results.json", "metrics.jsonl"])
def test_run_resume_refuses_a_fifo_instead_of_hanging(tmp_path, env, capsys, name):
    run = run_folder(tmp_path, "fake_pass", None)
    (run / "results.json").write_text(json.dumps({"status": "running", "claims": []}))
    (run / name).unlink(missing_ok=True)
    os.mkfifo(run / name)
    before = snapshot(run)
    code, _, err = answer(capsys, ["run", "--no-progress", "--resume", str(run)])
    assert code == 2
    one_line(err, f"{run / name}: not a regular file (a FIFO)", "regular files and folders")
    assert snapshot(run) == before


def test_reproduce_resume_refuses_a_fifo_report_json(tmp_path, env, capsys):
    rep = tmp_path / "rep"
    rep.mkdir()
    os.mkfifo(rep / "report.json")
    code, _, err = answer(
        capsys, ["reproduce", "--resume", str(rep), "--only", "fake_pass"] + QUIET
    )
    assert code == 2
    one_line(err, f"{rep / 'report.json'}: not a regular file (a FIFO)")


def test_reproduce_resume_refuses_a_folder_with_a_link_out_before_running(tmp_path, env, capsys):
    rep, outside = tmp_path / "rep", tmp_path / "outside.txt"
    rep.mkdir()
    outside.write_text("theirs")
    (rep / "notes.txt").symlink_to(outside)
    code, _, err = answer(
        capsys, ["reproduce", "--resume", str(rep), "--only", "fake_pass"] + QUIET
    )
    assert code == 2 and sorted(p.name for p in rep.iterdir()) == ["notes.txt"]
    one_line(err, f"{rep / 'notes.txt'}", "outside.txt")
    assert outside.read_text() == "theirs"


def test_sweep_resume_refuses_a_fifo_groups_sha256(tmp_path, env, capsys):
    sweep = run_folder(tmp_path, "fake_sweep", {"seeds": 2, "axes": {"p": [0.25, 0.5]}})
    os.mkfifo(sweep / "groups.sha256")
    code, _, err = answer(capsys, ["sweep", "--resume", str(sweep), "--no-progress"])
    assert code == 2
    one_line(err, f"{sweep / 'groups.sha256'}: not a regular file (a FIFO)")


def test_the_reader_and_the_appender_refuse_what_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "file").write_text("ok")
    (tmp_path / "link").symlink_to("file")
    with no_hang():
        for path in (tmp_path / "pipe", tmp_path):
            with pytest.raises(RunDirError, match="not a regular file"):
                read_bytes(path, 10)
        with pytest.raises(RunDirError, match="a symbolic link"):
            read_bytes(tmp_path / "link", 10)
        with pytest.raises(RunDirError, match="FIFO"):
            open_append(tmp_path / "pipe")  # nobody reads it: no wait
        with pytest.raises(RunDirError, match="a symbolic link"):
            open_append(tmp_path / "link")
    assert read_bytes(tmp_path / "file", 2) == b"ok"
    with open_append(tmp_path / "file") as fh:
        fh.write("!")
    assert (tmp_path / "file").read_text() == "ok!"
    # a hard link: the rows would change the file's other name too (a user's file elsewhere)
    os.link(tmp_path / "file", tmp_path / "metrics.jsonl")
    with pytest.raises(RunDirError, match=r"a hard link \(2 names\), not appended to"):
        open_append(tmp_path / "metrics.jsonl")
    assert (tmp_path / "file").read_text() == "ok!"


def test_check_run_dir_refuses_a_fifo_or_socket_anywhere(tmp_path):
    import socket

    run = tmp_path / "run"
    (run / "plots").mkdir(parents=True)
    (run / "wandb").mkdir()
    check_run_dir(run)
    os.mkfifo(run / "wandb" / "pipe")  # W&B's folder too (check_wandb_dir)
    with pytest.raises(RunDirError, match=r"wandb/pipe: a FIFO"):
        check_run_dir(run)
    (run / "wandb" / "pipe").unlink()
    os.mkfifo(run / "plots" / "pipe")
    with pytest.raises(RunDirError, match=r"plots/pipe: not a regular file \(a FIFO\)"):
        check_run_dir(run)
    (run / "plots" / "pipe").unlink()
    with contextlib.closing(socket.socket(socket.AF_UNIX)) as s:
        s.bind(str(run / "sock"))
        with pytest.raises(RunDirError, match=r"sock: not a regular file \(a socket\)"):
            check_run_dir(run)


# -- a link planted after check_run_dir looked: the writers make their temporary file afresh


@pytest.mark.parametrize("write", ["json", "text", "csv", "figure"])
def test_a_link_at_a_writers_temporary_file_is_replaced_not_written_through(tmp_path, write):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET)
    run = tmp_path / "run"
    run.mkdir()
    (run / "out.tmp").symlink_to(outside)
    writers = {
        "json": lambda p: rundir.write_json(p, {"a": 1}),
        "text": lambda p: rundir.write_text(p, "new\n"),
        "csv": lambda p: rundir.write_csv(p, [{"a": 1}]),
        "figure": lambda p: rundir.write_figure(p, plt.figure(), dpi=10),
    }
    writers[write](run / "out")
    assert outside.read_text() == SECRET
    assert not (run / "out").is_symlink() and (run / "out").stat().st_size > 0
    assert sorted(os.listdir(run)) == ["out"]


# -- hole 3: reads had no size limit


def sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no disk (a hole)."""
    with open(path, "wb") as fh:
        fh.truncate(size)


def test_compare_refuses_a_results_json_over_its_cap(tmp_path, env, capsys, finished_run):
    big = tmp_path / "big"
    big.mkdir()
    sparse(big / "results.json", MAX_RECORD_BYTES + 1)
    code, _, err = answer(capsys, ["compare", str(big), str(finished_run)])
    assert code == 2
    one_line(err, f"{big / 'results.json'}: {MAX_RECORD_BYTES + 1} bytes", "MAX_RECORD_BYTES")


def test_run_resume_refuses_a_metrics_jsonl_over_its_cap(tmp_path, env, capsys):
    run = run_folder(tmp_path, "fake_pass", None)
    (run / "checkpoints").mkdir()  # an attempt was cut short: its metrics are read back
    sparse(run / "metrics.jsonl", MAX_METRICS_BYTES + 1)
    code, _, err = answer(capsys, ["run", "--no-progress", "--resume", str(run)])
    assert code == 2
    one_line(err, f"{run / 'metrics.jsonl'}: {MAX_METRICS_BYTES + 1} bytes", "MAX_METRICS_BYTES")
    assert (run / "metrics.jsonl").stat().st_size == MAX_METRICS_BYTES + 1


def test_sweep_rows_over_their_cap_are_refused(tmp_path):
    from dedebate.lab.sweep_rows import read_rows

    sparse(tmp_path / "sweep.csv", MAX_ROWS_BYTES + 1)
    with pytest.raises(RunDirError, match="MAX_ROWS_BYTES"):
        read_rows(tmp_path / "sweep.csv")


def test_report_html_leaves_out_a_plot_over_its_cap(tmp_path, env, capsys, monkeypatch):
    from dedebate.lab import rerender
    from tests.hostile.test_html_report import tiny_png

    rep = tmp_path / "rep"
    (rep / "exp" / "plots").mkdir(parents=True)
    with open(rep / "exp" / "plots" / "big.png", "wb") as fh:
        fh.write(rerender.PNG_SIGNATURE)
        fh.truncate(rerender.MAX_PLOT_BYTES + 1)
    for name in ("a.png", "b.png"):
        (rep / "exp" / "plots" / name).write_bytes(tiny_png())
    data = json.loads(GOOD_REPORT)
    data["experiments"][0]["plots"] = [f"exp/plots/{n}" for n in ("big.png", "a.png", "b.png")]
    (rep / "report.json").write_text(json.dumps(data))
    monkeypatch.setattr(rerender, "MAX_EMBEDDED_BYTES", len(tiny_png()) + 1)  # room for one
    page = tmp_path / "page.html"
    code, _, _ = answer(capsys, ["report", str(rep), "--html", str(page)])
    assert code == 0
    html = page.read_text()
    assert page.stat().st_size < 100_000
    assert "exp/plots/big.png is over rerender.MAX_PLOT_BYTES, the 16 MiB a plot may be)" in html
    assert html.count("<img") == 1
    assert "exp/plots/b.png would take the page over rerender.MAX_EMBEDDED_BYTES" in html


# -- hole 6: --resume parsed config.yaml through a link before checking for links


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_resume_checks_the_folder_before_reading_a_linked_config(tmp_path, env, capsys, command):
    sweep = {"seeds": 2, "axes": {"p": [0.25, 0.5]}} if command == "sweep" else None
    run = run_folder(tmp_path, "fake_sweep" if sweep else "fake_pass", sweep)
    creds = tmp_path / "outside" / "creds.yaml"
    creds.parent.mkdir()
    creds.write_text(f'experiment: fake_pass\nseed: "{SECRET}"\naws_secret_access_key: 1\n')
    (run / "config.yaml").unlink()
    (run / "config.yaml").symlink_to(creds)
    code, out, err = answer(capsys, [command, "--no-progress", "--resume", str(run)])
    assert code == 2
    one_line(err, f"{run / 'config.yaml'}: a symbolic link")
    assert "hunter2" not in out + err and "aws_secret" not in out + err


# -- holes 7 and 8: a finished results.json dedebate did not write


def test_reproduce_resume_with_a_malformed_results_json_rewrites_nothing(
    capsys, finished_reproduce
):
    rep = finished_reproduce
    path = rep / "fake_pass" / "results.json"
    results = json.loads(path.read_text())
    results["claims"][0]["p_value"] = "x"
    path.write_text(json.dumps(results))
    before = snapshot(rep)
    code, _, err = answer(
        capsys, ["reproduce", "--resume", str(rep), "--only", "fake_pass"] + QUIET
    )
    assert code == 2
    one_line(err, f"{path}: not a record dedebate writes", "claims[0].p_value is a string")
    # report.json and report.md byte for byte; the resume checked the records under the folder's
    # lock, an empty .lock file (a second resume of the folder stops on it)
    assert snapshot(rep) == before | {".lock": b""}


@pytest.mark.parametrize(
    "damage",
    [
        {"p_value": "x"},
        {"family_level": "x"},
        {"value": [1]},
    ],
    ids=["p_value", "family_level", "value"],
)
def test_run_resume_with_a_malformed_finished_results_json_is_exit_2(capsys, finished_run, damage):
    path = finished_run / "results.json"
    results = json.loads(path.read_text())
    results["claims"][0].update(damage)
    path.write_text(json.dumps(results))
    before = snapshot(finished_run)
    code, out, err = answer(capsys, ["run", "--no-progress", "--resume", str(finished_run)])
    assert code == 2, out + err
    one_line(err, f"{path}: not a record dedebate writes", f"claims[0].{next(iter(damage))} is")
    assert snapshot(finished_run) == before


def test_run_resume_with_other_field_types_is_exit_2(capsys, finished_run):
    path = finished_run / "results.json"
    results = json.loads(path.read_text())
    for key, value in (("tables", ["x"]), ("metrics", [1]), ("plots", 5)):
        path.write_text(json.dumps({**results, key: value}))
        code, _, err = answer(capsys, ["run", "--no-progress", "--resume", str(finished_run)])
        assert code == 2
        one_line(err, f"{path}: not a record dedebate writes", f"{key} is")


def test_a_finished_run_is_still_reused(capsys, finished_run):
    """The checks leave a record dedebate wrote alone: resuming it is a no-op."""
    before = snapshot(finished_run)
    code, _, err = answer(capsys, ["run", "--no-progress", "--resume", str(finished_run)])
    assert code == 0 and "run already finished" in err
    assert snapshot(finished_run) == before


def test_a_reused_records_wandb_path_from_another_machine_is_not_printed(capsys, finished_run):
    """A finished record from a colleague names their machine's W&B folder: resuming it points at
    the folder's own ``wandb/`` instead (it names one inside the run as it is)."""
    record = finished_run / "results.json"
    data = json.loads(record.read_text())
    elsewhere, inside = "/home/colleague/private/wandb/run-1", finished_run / "wandb" / "run-1"
    for where, shown in ((elsewhere, finished_run / "wandb"), (inside, inside)):
        data["provenance"]["tracking"] = {"mode": "offline", "wandb_dir": str(where)}
        record.write_text(json.dumps(data))
        code, out, _ = answer(capsys, ["run", "--no-progress", "--resume", str(finished_run)])
        assert code == 0 and f"W&B offline run: {shown} (upload with" in out, out
        assert "colleague" not in out


# -- a link among the run folders: resume=true found the newest matching name and followed it


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_resume_never_picks_a_run_folder_through_a_link(tmp_path, env, capsys, command):
    sweep = {"seeds": 2, "axes": {"p": [0.25, 0.5]}} if command == "sweep" else None
    experiment = "fake_sweep" if sweep else "fake_pass"
    victim = run_folder(tmp_path / "elsewhere", experiment, sweep)  # its config.yaml matches
    (victim / "results.json").write_text('{"precious": true}')
    before = snapshot(victim)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    name = f"{experiment}-sweep-29991231T000000Z" if sweep else f"{experiment}-29991231T000000Z"
    (out_dir / name).symlink_to(victim)  # the newest name, as an unpacked archive could plant it
    cfg = tmp_path / f"{experiment}.yaml"
    cfg.write_text(f"experiment: {experiment}\nsize: quick\noutput_dir: {out_dir}\n")
    argv = [command, "--no-progress", str(cfg), "tracking.mode=disabled", "resume=true"]
    if sweep:
        argv += ["sweep.seeds=2", "sweep.axes.p=[0.25,0.5]"]
    code, out, err = answer(capsys, argv)
    assert code == 0, err
    assert snapshot(victim) == before and str(victim) not in out + err
    assert [p.name for p in out_dir.iterdir() if not p.is_symlink()] != []


# -- a run folder resumed as a sweep (or a sweep folder as a run) was overwritten, exit 0


def test_a_finished_run_is_not_turned_into_a_sweep(tmp_path, env, capsys, finished_run):
    before = snapshot(finished_run)
    sweep = ["sweep.seeds=1", "sweep.axes.p=[0.5]", "--no-progress"]
    code, _, err = answer(capsys, ["run", "--resume", str(finished_run), *sweep])
    assert code == 2
    one_line(err, f"{finished_run} holds a run, and these overrides make it a sweep")
    cfg = tmp_path / "fake_sweep.yaml"
    cfg.write_text(f"experiment: fake_sweep\nsize: quick\noutput_dir: {tmp_path / 'runs'}\n")
    argv = ["sweep", str(cfg), "tracking.mode=disabled", *sweep, "--sweep-dir", str(finished_run)]
    code, _, err = answer(capsys, argv)
    assert code == 2
    one_line(err, f"{finished_run} holds a run, not a sweep")
    assert snapshot(finished_run) == before


def test_resume_false_is_refused_with_resume(tmp_path, env, capsys, finished_run):
    """``--resume DIR resume=false`` recomputed a finished run (or every group of a sweep) in
    place: a kill meanwhile lost its metrics for good, and a later resume said "finished"."""
    before = snapshot(finished_run)
    for cmd in ("run", "sweep"):
        code, _, err = answer(capsys, [cmd, "--resume", str(finished_run), "resume=false"])
        assert code == 2
        one_line(err, f"resume=false contradicts --resume {finished_run}")
    assert snapshot(finished_run) == before


def test_a_sweep_folder_is_not_turned_into_a_run(tmp_path, env, capsys):
    cfg = tmp_path / "fake_sweep.yaml"
    cfg.write_text(f"experiment: fake_sweep\nsize: quick\noutput_dir: {tmp_path / 'runs'}\n")
    sweep = ["sweep.seeds=1", "sweep.axes.p=[0.25,0.5]", "--no-progress"]
    code, out, _ = answer(capsys, ["sweep", str(cfg), "tracking.mode=disabled", *sweep])
    assert code == 0, out
    (folder,) = (tmp_path / "runs").iterdir()
    (folder / "results.json").unlink()  # interrupted before its last group
    max(folder.glob("groups/group-*")).unlink()
    before = snapshot(folder)
    code, _, err = answer(capsys, ["run", "--resume", str(folder), "sweep=null", "--no-progress"])
    assert code == 2
    one_line(err, f"{folder} holds a sweep, and these overrides make it a run")
    assert snapshot(folder) == before


def test_a_shared_folder_cannot_switch_a_resume_to_online_tracking(
    capsys, finished_run, monkeypatch
):
    """A folder whose config.yaml says ``tracking.mode: online`` (to the sharer's entity) resumes
    offline unless the command line asks for online: the reader's W&B login must not send the
    run where the folder says. Tracking is not in the config hash, so nothing else stops it."""
    import yaml

    from dedebate.lab import runner

    class Started(Exception):
        """The run would start here, under this config."""

    def start(module, cfg, **_):
        raise Started(cfg.tracking)

    monkeypatch.setattr(runner, "run_experiment", start)
    path = finished_run / "config.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["tracking"] = {"mode": "online", "entity": "attackers\x1b[2J", "project": "exfil"}
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(Started) as started:
        answer(capsys, ["run", "--no-progress", "--resume", str(finished_run)])
    assert started.value.args[0].mode == "offline"
    assert started.value.args[0].entity == "attackers\x1b[2J"
    err = capsys.readouterr().err
    one_line(err, "asks for online W&B tracking", "(entity 'attackers\\x1b[2J', project 'exfil')")
    with pytest.raises(Started) as started:
        answer(
            capsys, ["run", "--no-progress", "--resume", str(finished_run), "tracking.mode=online"]
        )
    assert started.value.args[0].mode == "online"
    assert capsys.readouterr().err == ""


def test_compare_never_reads_a_config_through_a_link(tmp_path, capsys, finished_run):
    """A shared run folder whose config.yaml links to a file elsewhere: compare reads its
    params for the config-difference warning, and must not show what the linked file holds."""
    import shutil

    import yaml

    from dedebate.lab.config_types import ConfigError
    from dedebate.lab.config_yaml import read_yaml
    from dedebate.lab.rundir import read_config

    victim = tmp_path / "outside" / "victim.yaml"
    victim.parent.mkdir()
    raw = yaml.safe_load((finished_run / "config.yaml").read_text())
    victim.write_text(yaml.safe_dump({**raw, "params": {**raw["params"], "label": SECRET}}))
    shared = tmp_path / "shared"
    shutil.copytree(finished_run, shared, ignore=shutil.ignore_patterns(".lock"))
    (shared / "config.yaml").unlink()
    (shared / "config.yaml").symlink_to(victim)
    results = json.loads((shared / "results.json").read_text())
    results["provenance"]["config_hash"] = "0" * 16  # another config: compare shows the params
    (shared / "results.json").write_text(json.dumps(results))
    code, out, err = answer(capsys, ["compare", str(shared), str(finished_run)])
    assert SECRET not in out + err and code == 0, out + err
    with pytest.raises(ConfigError, match="a symbolic link, not followed"):
        read_config(shared / "config.yaml")
    assert read_yaml(shared / "config.yaml")["params"]["label"] == SECRET  # a user's own file


def test_ls_lists_records_of_the_wrong_shapes_without_a_traceback(tmp_path, capsys):
    """``ls`` of a shared folder: claims that are a number read as an unreadable record, and
    start times of different JSON types still sort (both raised a TypeError)."""
    root = tmp_path / "shared"
    for name, data in {
        "a": {"schema_version": 1, "experiments": [{"name": "x", "claims": 5}]},
        "b": {"experiment": "x", "claims": [], "provenance": {"started_utc": 5}},
        "c": {"experiment": "x", "claims": [], "provenance": {"started_utc": "2026-01-01"}},
    }.items():
        (root / name).mkdir(parents=True)
        record = "report.json" if "experiments" in data else "results.json"
        (root / name / record).write_text(json.dumps(data))
    code, out, err = answer(capsys, ["ls", str(root)])
    assert code == 0 and "Traceback" not in err, out + err
    (row,) = [line for line in out.splitlines() if f"{root / 'a'}" in line]
    assert "unreadable" in row


def test_report_html_with_a_link_loop_among_its_plots_is_written(tmp_path, capsys):
    """A plot path through a loop of links is "not shown" (resolve raised RuntimeError)."""
    from tests.hostile.test_html_report import plant_hostile_report

    rep, _, _ = plant_hostile_report(tmp_path / "rep", tmp_path / "outside")
    plots = rep / "exp" / "plots"
    (plots / "a.png").symlink_to(plots / "b.png")
    (plots / "b.png").symlink_to(plots / "a.png")
    report = json.loads((rep / "report.json").read_text())
    report["experiments"][0]["plots"] = ["exp/plots/a.png"]
    (rep / "report.json").write_text(json.dumps(report))
    code, _, err = answer(capsys, ["report", str(rep), "--html", str(tmp_path / "r.html")])
    assert code == 0, err
    assert "is not a PNG file inside the report directory" in (tmp_path / "r.html").read_text()


def test_records_of_too_many_rows_are_refused_before_they_are_expanded(tmp_path, capsys):
    """Every claim row read is filled in with its defaults: a file of ``{}`` rows took 2.6 GB to
    list and 9.7 GB to compare at 20 MB. Past the caps, ls, compare and report refuse it."""
    from dedebate.lab.rerender import MAX_CLAIM_ROWS, MAX_EXPERIMENTS

    run, rep = tmp_path / "run", tmp_path / "rep"
    run.mkdir()
    rep.mkdir()
    claims = [{}] * (MAX_CLAIM_ROWS + 1)
    (run / "results.json").write_text(json.dumps({"experiment": "x", "claims": claims}))
    many = [{"name": "x", "claims": []}] * (MAX_EXPERIMENTS + 1)
    (rep / "report.json").write_text(json.dumps({"schema_version": 1, "experiments": many}))
    code, out, _ = answer(capsys, ["ls", str(tmp_path)])
    assert code == 0 and out.count("unreadable") == 2, out
    for folder, what in ((run, "claim rows"), (rep, "experiments")):
        code, _, err = answer(capsys, ["compare", str(folder), str(folder)])
        assert code == 2 and "over the" in err and what in err, err
    code, _, err = answer(capsys, ["report", str(rep)])
    assert code == 2 and f"{MAX_EXPERIMENTS + 1} experiments, over the" in err, err


def test_compare_json_of_a_record_holding_nan_writes_null(tmp_path, capsys):
    """A shared report.json may hold NaN (Python reads it): ``compare --json`` writes null there,
    not "a bug in dedebate"."""
    from tests.hostile.test_catalogue import report_with

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(report_with(bound=[float("nan")]))
    code, out, err = answer(capsys, ["compare", "--json", str(tmp_path / "a"), str(tmp_path / "b")])
    assert code == 0 and err == "" and "NaN" not in out, err
    assert json.loads(out)["rows"]


def test_csv_text_a_spreadsheet_would_run_is_written_quoted_and_read_back_as_it_was(tmp_path):
    """A text cell starting ``= + - @`` (tab, CR) or ``'`` is written with a ``'`` in front (a
    spreadsheet shows it as text instead of running ``=HYPERLINK(...)``), numbers as they are;
    both readers (a sweep's rows, ``records.metrics``' cells) give back the values written."""
    import csv

    from dedebate.lab import records
    from dedebate.lab.sweep_rows import parse_cell, read_rows

    texts = ['=HYPERLINK("http://x","y")', "+1", "-2", "@SUM(A1)", "\tx", "\rx", "'=1", "'", "ok"]
    row = {f"c{i}": t for i, t in enumerate(texts)} | {"neg": -1.5, "n": -3, "list": [1, -2]}
    row |= {"yes": True, "no": False, "none": None}
    rundir.write_csv(tmp_path / "t.csv", [row])
    with open(tmp_path / "t.csv", newline="", encoding="utf-8") as fh:
        (raw,) = csv.DictReader(fh)
    formula = [v for v in raw.values() if v[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert formula == ["-1.5", "-3"], raw  # numbers only: every text cell is quoted
    assert [raw[f"c{i}"] for i in range(len(texts))] == ["'" + t for t in texts[:-1]] + ["ok"]
    assert read_rows(tmp_path / "t.csv") == [row]
    assert {k: parse_cell(v) for k, v in raw.items()} == row
    # the two readers agree on non-finite numbers too (records.metrics gave "nan" as text)
    rundir.write_csv(tmp_path / "f.csv", [{"nan": math.nan, "inf": math.inf, "ninf": -math.inf}])
    (nan,) = read_rows(tmp_path / "f.csv")
    assert math.isnan(nan["nan"]) and (nan["inf"], nan["ninf"]) == (math.inf, -math.inf)
    (sweep := tmp_path / "sweep").mkdir()
    (sweep / "sweep.csv").write_bytes((tmp_path / "f.csv").read_bytes())
    record = {"kind": "sweep", "experiment": "x", "status": "ok", "schema_version": 1}
    (sweep / "results.json").write_text(json.dumps({**record, "table": "sweep.csv"}))
    (got,) = records.metrics(sweep)
    assert math.isnan(got["nan"]) and (got["inf"], got["ninf"]) == (math.inf, -math.inf)
