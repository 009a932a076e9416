"""Nothing lost, nothing stuck: hostile input and a hostile environment give one line and an exit
code, never a hang, a traceback or a silently wrong result.

The index of the twelve failures once seen by trying the lab as a hostile user would; each has a
``test_failure_NN_...`` here, or (where the test needs a real experiment's training and is
expensive) a line naming where it lives:

01 a corrupt newest checkpoint left a run stuck (StepAlreadyExistsError on every resume):
   test_failure_01_corrupt_newest_checkpoint_recovers_then_resume_is_a_no_op here (the lab's
   driver and Orbax checkpointer, every kind of damage: tests/lab/test_lab_resume.py::
   test_damaged_newest_checkpoint_recovers_and_converges; saves with and without ``force``:
   tests/lab/test_lab_checkpoint.py::test_saves_never_collide_with_old_steps; the real training
   experiments, newest checkpoint deleted or corrupted, bit-equal and then a no-op:
   tests/experiments/test_ogd_resume.py, tests/experiments/test_stackelberg_resume.py,
   tests/experiments/test_stochastic_selfplay_resume.py; a failed resume keeps the finished results:
   tests/lab/test_lab_resume.py::test_a_failed_resume_keeps_the_finished_results)
02 a YAML alias bomb grew to gigabytes: test_failure_02_yaml_alias_bomb_is_refused_before_expansion
03 counts without an upper bound; a process that died left no record:
   test_failure_03_a_run_records_running_before_the_work_starts here; the bounds:
   tests/lab/test_lab_params.py::test_every_field_is_a_bounded_param_and_every_preset_is_in_range
   and ::test_over_limit_count_fails_fast_naming_the_max
04 W&B online without a network waited a minute per W&B run:
   test_failure_04_wandb_online_without_network_falls_back_to_offline_once (a reproduce online
   off-network against offline), test_failure_04_wandb_probe_and_a_failed_online_start
05 resuming a finished run garbled and duplicated metrics.jsonl:
   test_failure_05_resuming_a_finished_run_changes_nothing_on_disk (also ``reproduce --resume``);
   explicit steps, rows logged once: tests/lab/test_lab_metrics_resume.py
06 output-directory problems printed tracebacks; ``~`` made a folder named ``~``:
   test_failure_06_output_directory_errors_are_one_line_for_run_sweep_and_reproduce
07 sweep child processes imported the current folder's ``experiments`` package:
   test_failure_07_sweep_children_never_import_the_current_folders_packages
08 with ``size: quick`` bad values in the file were silently replaced by the preset:
   test_failure_08_bad_value_in_file_under_quick_is_a_one_line_error
09 deep YAML nesting, duplicate keys, a directory as the config:
   test_failure_09_deep_nesting_duplicate_keys_and_bad_paths
10 a resumed sweep trusted a truncated group file: test_failure_10_resumed_sweep_recomputes_a_
   damaged_group
11 a full disk gave hundreds of traceback lines and left ``.tmp`` files:
   test_failure_11_full_disk_is_one_line_naming_the_file_and_leaves_no_temporary_file
12 two ``--resume`` of one run at once failed cryptically:
   test_failure_12_second_resume_of_a_run_in_use_exits_2_at_once
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import json
import os
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from dedebate import cli
from dedebate.lab import tracking
from dedebate.lab.config import MAX_YAML_DEPTH, MAX_YAML_NODES, dump_yaml, resolve
from dedebate.lab.experiment import Claim, ExperimentResult
from dedebate.lab.folder_guard import lock_run_dir
from dedebate.lab.rundir import RunDirError, new_run_dir, write_csv, write_json
from dedebate.lab.runner import find_resumable, run_experiment
from tests.conftest import REPO
from tests.fakes import truncate_checkpoint

# "billion laughs": 9 levels of 9 aliases, about 4e8 strings once expanded (params.xs holds it)
BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n"
        for i in range(8)
    )
    + "experiment: fake_pass\nparams:\n  xs: *i\n"
)


@dataclasses.dataclass(frozen=True)
class _TinyConfig:
    """A params dataclass without fields, for configs built without a real experiment."""


def one_line_error(capsys, code, *needles):
    """Exit 2 and exactly one line on stderr holding every needle; return that line."""
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (out, err)
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def closed_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- safe YAML


def test_failure_02_yaml_alias_bomb_is_refused_before_expansion(tmp_path, fake_env, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    t0 = time.monotonic()
    code = cli.main(["run", str(bomb)])
    one_line_error(
        capsys, code, "bomb.yaml: invalid YAML at line ", f"more than {MAX_YAML_NODES} nodes"
    )
    # resume=true reads the run directories' config.yaml files with the same limits: a run
    # directory holding a bomb is skipped (not resumable), and `--resume` of it is one line
    runs = tmp_path / "runs"
    planted = runs / "fake_pass-20990101T000000Z"
    planted.mkdir(parents=True)
    (planted / "config.yaml").write_text(BOMB)
    cfg = resolve(
        {"experiment": "fake_pass", "output_dir": str(runs), "resume": True},
        {"fake_pass": types.SimpleNamespace(Config=_TinyConfig, NAME="fake_pass")},
    )
    assert find_resumable(cfg) is None
    code = cli.main(["run", "--resume", str(planted)])
    one_line_error(capsys, code, "config.yaml: invalid YAML", "nodes")
    assert time.monotonic() - t0 < 5  # was: 5-6 GB and no answer


def test_failure_09_deep_nesting_duplicate_keys_and_bad_paths(tmp_path, fake_env, capsys):
    deep = tmp_path / "deep.yaml"
    deep.write_text("experiment: fake_pass\nparams:\n  xs: " + "[" * 5000 + "]" * 5000 + "\n")
    err = one_line_error(
        capsys, cli.main(["run", str(deep)]), f"nested deeper than {MAX_YAML_DEPTH} levels"
    )
    assert "Recursion" not in err
    # the same limit on a command-line value
    code = cli.main(["run", str(deep.with_name("none.yaml")), "params.xs=" + "[" * 5000])
    one_line_error(capsys, code)  # the missing file or the value: one line either way
    dup = tmp_path / "dup.yaml"
    dup.write_text("experiment: fake_pass\nparams:\n  n: 4\n  p: 0.5\n  n: 8\n")
    one_line_error(
        capsys,
        cli.main(["run", str(dup)]),
        "dup.yaml: invalid YAML at line 5, column 3: duplicate key 'n' (first at line 3)",
    )
    one_line_error(capsys, cli.main(["run", str(tmp_path)]), f"{tmp_path}: is a directory")
    one_line_error(capsys, cli.main(["sweep", str(tmp_path)]), "is a directory")
    one_line_error(capsys, cli.main(["run", str(tmp_path / "nope.yaml")]), "config file not found")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"experiment: fake_pass\n# caf\xe9\n")
    one_line_error(capsys, cli.main(["run", str(bad)]), "not UTF-8 text")


# ----------------------------------------------------------------------------- W&B off-network


def test_failure_04_wandb_online_without_network_falls_back_to_offline_once(
    tmp_path, fake_env, capsys, monkeypatch
):
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    # what waits on the network: the probe (timed here) and online W&B starts (none may happen)
    import wandb

    probes, inits = [], []
    real_probe, real_init = tracking.probe, wandb.init

    def timed_probe(url, timeout=tracking.PROBE_TIMEOUT_S):
        t0 = time.monotonic()
        try:
            return real_probe(url, timeout)
        finally:
            probes.append(time.monotonic() - t0)

    def watched_init(**kwargs):
        inits.append(kwargs["mode"])
        return real_init(**kwargs)

    monkeypatch.setattr(tracking, "probe", timed_probe)
    monkeypatch.setattr(wandb, "init", watched_init)
    # the slowest way to have no network: a server that accepts and never answers (dropped
    # packets); nothing leaves the host. A reproduce online, then the same offline.
    times, reports = {}, {}
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        url = f"http://127.0.0.1:{mute.getsockname()[1]}"
        monkeypatch.setenv("WANDB_BASE_URL", url)
        # offline first: it pays the one-time start of W&B's service process in this test
        # process, so the difference below is the online run's wait on the network alone
        for mode in ("offline", "online"):
            t0 = time.monotonic()
            code = cli.main(
                [
                    "reproduce",
                    "--quick",
                    "--tracking",
                    mode,
                    "--no-progress",
                    "--only",
                    "fake_pass",
                    "--output-dir",
                    str(tmp_path / mode),
                ]
            )
            times[mode] = time.monotonic() - t0
            out, err = capsys.readouterr()
            assert code == 0, err
            (reports[mode],) = (tmp_path / mode).glob("reproduce-*")
            if mode == "online":
                warnings = [line for line in err.splitlines() if "W&B online mode is off" in line]
                assert len(warnings) == 1, err
                assert f"{url} does not answer: no answer within" in warnings[0]
    # one probe for the whole reproduce, bounded by its timeout; was: 60 s per W&B run
    assert len(probes) == 1
    assert tracking.PROBE_TIMEOUT_S - 0.5 <= probes[0] <= tracking.PROBE_TIMEOUT_S + 1
    assert inits == ["offline"] * 4  # the reproduce job and the fake_pass run, twice
    assert times["online"] - times["offline"] < 15, times
    for mode, rep in reports.items():  # every result on disk, online (fallen back) or offline
        assert json.loads((rep / "report.json").read_text())["complete"] is True
        res = json.loads((rep / "fake_pass" / "results.json").read_text())
        assert res["status"] == "ok" and len(res["claims"]) == 2
        assert res["provenance"]["tracking"]["mode"] == "offline", mode
        assert list((rep / "fake_pass" / "wandb").glob("offline-run-*"))
        assert list((rep / "wandb").glob("offline-run-*"))


def test_failure_04_wandb_probe_and_a_failed_online_start(tmp_path, monkeypatch, capsys):
    import http.server
    import threading

    import wandb

    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - the http.server hook
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    with http.server.HTTPServer(("127.0.0.1", 0), Answer) as srv, socket.socket() as mute:
        threading.Thread(target=srv.handle_request, daemon=True).start()
        assert tracking.probe(f"http://127.0.0.1:{srv.server_port}", 5.0) is None  # any status
        mute.bind(("127.0.0.1", 0))
        mute.listen()  # accepts, never answers
        t0 = time.monotonic()
        why = tracking.probe(f"http://127.0.0.1:{mute.getsockname()[1]}", 0.3)
        assert why is not None and time.monotonic() - t0 < 2
    assert "refused" in tracking.probe(f"http://127.0.0.1:{closed_loopback_port()}", 2.0)
    # the socket's timeout can fire before the probe's own wait ends (a loaded machine): the
    # reason reads the same either way
    import urllib.error
    import urllib.request

    def socket_timeout(request, timeout):
        raise urllib.error.URLError(TimeoutError("timed out"))

    with monkeypatch.context() as m:
        m.setattr(urllib.request, "urlopen", socket_timeout)
        assert tracking.probe("http://127.0.0.1:9", 0.25) == "no answer within 0.25 s"

    # the server answers, but the online start fails: this run and later ones go offline
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{closed_loopback_port()}")
    monkeypatch.setattr(tracking, "probe", lambda url, timeout=0: None)
    modes = []

    def fake_init(**kwargs):
        modes.append(kwargs["mode"])
        if kwargs["mode"] == "online":
            raise RuntimeError("api key rejected")
        return types.SimpleNamespace(id="r", dir=str(tmp_path), finish=lambda **kw: None)

    monkeypatch.setattr(wandb, "init", fake_init)
    start = dict(mode="online", run_dir=tmp_path, project="p", job_type="j", config={})
    assert tracking.Tracker.start(**start).mode == "offline"
    assert tracking.Tracker.start(**start).mode == "offline"
    assert modes == ["online", "offline", "offline"]
    err = capsys.readouterr().err
    assert (
        err.count(
            "W&B online mode is off (the online start failed: RuntimeError: api key rejected)"
        )
        == 1
    ), err


def test_every_wandb_wait_is_bounded_and_no_run_sends_wandbs_telemetry(tmp_path, monkeypatch):
    """wandb's default end of a run (``finish_timeout`` 0) waits for its upload for ever, so a
    server that stops answering hung every run; and wandb-core posted its own telemetry to the
    server unless ``WANDB_ERROR_REPORTING`` is false, offline runs too. An older wandb without
    some option keeps the others."""
    wandb = pytest.importorskip("wandb")
    s = tracking._settings(wandb)
    assert s.finish_timeout == tracking.FINISH_TIMEOUT_S > 0 and s.init_timeout == 60.0
    assert s.x_file_stream_timeout_seconds == s.x_graphql_timeout_seconds == 30.0

    class OldSettings:  # no finish_timeout, no per-request timeouts
        model_fields = {"silent": None, "x_disable_stats": None, "init_timeout": None}

        def __init__(self, **kw):
            self.kw = kw

    old = tracking._settings(types.SimpleNamespace(Settings=OldSettings))
    assert old.kw == {"silent": True, "x_disable_stats": True, "init_timeout": 60.0}
    monkeypatch.delenv("WANDB_ERROR_REPORTING", raising=False)
    run = types.SimpleNamespace(id="r", dir=str(tmp_path), finish=lambda **kw: None)
    monkeypatch.setattr(wandb, "init", lambda **kw: run)
    start = dict(mode="offline", run_dir=tmp_path, project="p", job_type="j", config={})
    assert tracking.Tracker.start(**start).mode == "offline"
    assert os.environ["WANDB_ERROR_REPORTING"] == "false"


# ----------------------------------------------------------------------------- run directories


def test_failure_06_output_directory_errors_are_one_line_for_run_sweep_and_reproduce(
    tmp_path, fake_env, capsys, monkeypatch
):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("experiment: fake_pass\nsize: quick\ntracking: {mode: disabled}\n")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out_dir, reason in (
        (afile / "sub", "a part of the path is a file"),
        (afile, "a file is in the way"),
    ):
        one_line_error(
            capsys,
            cli.main(["run", str(cfg), f"output_dir={out_dir}"]),
            f"output_dir '{out_dir}': cannot create a run directory there",
            reason,
        )
        one_line_error(
            capsys, cli.main(["sweep", str(cfg), f"output_dir={out_dir}", "sweep.seeds=2"]), reason
        )
        one_line_error(
            capsys,
            cli.main(
                ["sweep", str(cfg), f"output_dir={out_dir}", "sweep.seeds=2", "--processes", "2"]
            ),
            reason,
        )
        one_line_error(
            capsys,
            cli.main(["reproduce", "--quick", "--only", "fake_pass", "--output-dir", str(out_dir)]),
            reason,
        )
    # an unwritable folder (simulated: the tests may run as root, who may write anywhere)
    real_mkdir = Path.mkdir

    def no_permission(self, *args, **kwargs):
        if str(self).startswith(str(tmp_path / "locked")):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", no_permission)
    one_line_error(
        capsys,
        cli.main(["run", str(cfg), f"output_dir={tmp_path / 'locked'}"]),
        "cannot create a run directory there: Permission denied",
    )
    monkeypatch.undo()
    # `~` is the home directory, not a folder named "~"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    made = new_run_dir("~/runs", "x")
    assert made.parent == tmp_path / "home" / "runs" and not (tmp_path / "~").exists()


def test_failure_11_full_disk_is_one_line_naming_the_file_and_leaves_no_temporary_file(
    tmp_path, fake_env, capsys, monkeypatch
):
    real_fdopen = os.fdopen

    class HalfWritten:  # the writers' temporary file (opened "w"/"wb") on a disk that fills up
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    def full_disk(fd, mode="r", *args, **kwargs):
        fh = real_fdopen(fd, mode, *args, **kwargs)
        return HalfWritten(fh) if mode.startswith("w") else fh

    cfg = tmp_path / "c.yaml"
    cfg.write_text("experiment: fake_pass\nsize: quick\ntracking: {mode: disabled}\n")
    monkeypatch.setattr(os, "fdopen", full_disk)
    code = cli.main(["run", str(cfg), f"output_dir={tmp_path / 'runs'}"])
    one_line_error(capsys, code, "cannot write ", "config.yaml: No space left on device")
    assert not list(tmp_path.rglob("*.tmp"))
    monkeypatch.undo()

    # the CSV writer too (it streams rows into its temporary file)
    def full_row(self, row):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(csv.DictWriter, "writerow", full_row)
    with pytest.raises(RunDirError, match=r"cannot write .*t\.csv: No space left on device$"):
        write_csv(tmp_path / "t.csv", [{"a": 1}])
    assert not list(tmp_path.glob("t.csv*"))


def test_a_written_file_is_on_disk_before_its_name_and_its_name_after(tmp_path, monkeypatch):
    """The writers sync the temporary file, rename it, then sync its folder (a crash after the
    write leaves the old file or the whole new one); a failing sync (EIO) is one
    RunDirError line and leaves no temporary file."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_json(tmp_path / "r.json", {"x": 1})
    file, folder = (tmp_path / "r.json").stat().st_ino, tmp_path.stat().st_ino
    assert events == [("fsync", file), ("replace", str(tmp_path / "r.json")), ("fsync", folder)]

    def failing(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(RunDirError, match=r"cannot write .*s\.csv: Input/output error$"):
        write_csv(tmp_path / "s.csv", [{"a": 1}])
    assert not list(tmp_path.glob("s.csv*"))


def test_failure_12_second_resume_of_a_run_in_use_exits_2_at_once(tmp_path, fake_env, capsys):
    reg = {"fake_pass": types.SimpleNamespace(Config=_TinyConfig, NAME="fake_pass")}
    run_dir = tmp_path / "fake_pass-20250101T000000Z"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(
        dump_yaml(
            resolve(
                {"experiment": "fake_pass", "size": "quick", "tracking": {"mode": "disabled"}}, reg
            )
        )
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from dedebate.lab.folder_guard import lock_run_dir; "
            f"lock = lock_run_dir({str(run_dir)!r}); print('locked', flush=True); "
            "sys.stdin.read()",
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        code = cli.main(["run", "--no-progress", "--resume", str(run_dir)])
        one_line_error(capsys, code, f"run in use by PID {holder.pid}: {run_dir}")
        assert time.monotonic() - t0 < 5
        assert (run_dir / ".lock").read_text().strip() == str(holder.pid)
    finally:
        holder.kill()  # dies without cleaning up, as a killed run does
        holder.wait(timeout=30)
    # the holder is dead: its lock is stale and taken over (the file still names the dead PID)
    assert (run_dir / ".lock").read_text().strip() == str(holder.pid)
    with lock_run_dir(run_dir):
        assert (run_dir / ".lock").read_text().strip() == str(os.getpid())
        with pytest.raises(RunDirError, match=f"run in use by PID {os.getpid()}"):
            lock_run_dir(run_dir)  # a second holder, even in this process
    assert (run_dir / ".lock").read_text() == ""  # released


# ----------------------------------------------------------------------------- resume


def _snapshot(run_dir: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``run_dir``: its bytes and modification time."""
    return {
        str(f.relative_to(run_dir)): (f.read_bytes(), f.stat().st_mtime_ns)
        for f in sorted(run_dir.rglob("*"))
        if f.is_file()
    }


def test_failure_01_corrupt_newest_checkpoint_recovers_then_resume_is_a_no_op(tmp_path, capsys):
    from dedebate.lab.registry import discover_experiments

    module = discover_experiments(["tests.fake_experiments.resumable"]).experiments["fake_ckpt"]
    cfg = resolve(
        {
            "experiment": "fake_ckpt",
            "output_dir": str(tmp_path),
            "resume": True,
            "tracking": {"mode": "disabled"},
        },
        {"fake_ckpt": module},
    )
    done = run_experiment(module, cfg, show_progress=False)
    run_dir, good = done.run_dir, (done.run_dir / "results.json").read_bytes()
    assert json.loads(good)["status"] == "ok" and len(json.loads(good)["claims"]) == 1
    newest = run_dir / "checkpoints" / "6"
    truncate_checkpoint(newest)
    # the finished run is finished: its results are kept, its checkpoints are not even read
    assert run_experiment(module, cfg, show_progress=False).reused
    assert (run_dir / "results.json").read_bytes() == good
    # killed before its results.json: the resume falls back a step, moves the bad one aside,
    # saves that step again (was: StepAlreadyExistsError on every later resume) ...
    (run_dir / "results.json").unlink()
    capsys.readouterr()
    again = run_experiment(module, cfg, show_progress=False)
    assert again.run_dir == run_dir and again.error is None and not again.reused
    assert "falling back to step 5" in capsys.readouterr().err
    assert again.results["claims"] == json.loads(good)["claims"]
    assert again.results["metrics"]["total"] == json.loads(good)["metrics"]["total"]
    assert again.results["metrics"]["resumed_from"] == 5
    assert (run_dir / "checkpoints" / "corrupt-6").is_dir() and (newest / "state").is_dir()
    # ... and then nothing is stuck: the next resume is a no-op
    before = _snapshot(run_dir)
    assert run_experiment(module, cfg, show_progress=False).reused
    assert _snapshot(run_dir) == before


def _finished_fake_pass(tmp_path) -> tuple[Path, Path]:
    """``(config, run directory)`` of a finished quick fake_pass run, tracking off."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"experiment: fake_pass\nsize: quick\noutput_dir: {tmp_path / 'runs'}\n"
        "tracking: {mode: disabled}\n"
    )
    assert cli.main(["run", "--no-progress", str(cfg)]) == 0
    (run_dir,) = (tmp_path / "runs").glob("fake_pass-*")
    return cfg, run_dir


def test_a_finished_run_from_another_version_is_reused_with_a_warning(tmp_path, fake_env, capsys):
    """A resume reuses a finished run computed by another dedebate version (same config) and
    says so in one line, the stored version escaped (it is someone else's text)."""
    import dedebate

    _, run_dir = _finished_fake_pass(tmp_path)
    results = json.loads((run_dir / "results.json").read_text())
    results["provenance"]["dedebate_version"] = "0.0.1\x1b[2J"
    (run_dir / "results.json").write_text(json.dumps(results))
    capsys.readouterr()
    assert cli.main(["run", "--no-progress", "--resume", str(run_dir)]) == 0
    _, err = capsys.readouterr()
    assert err.splitlines() == [
        f"dedebate: warning: {run_dir}: computed by dedebate 0.0.1\\x1b[2J, this is "
        f"{dedebate.__version__}; its stored results are kept (a new run recomputes them)",
        f"dedebate: run already finished: {run_dir}; nothing to do",
    ]


def test_failure_05_resuming_a_finished_run_changes_nothing_on_disk(
    tmp_path, fake_env, capsys, monkeypatch
):
    cfg, run_dir = _finished_fake_pass(tmp_path)
    before = _snapshot(run_dir)
    assert {
        "results.json",
        "metrics.jsonl",
        "config.yaml",
        "plots/counts.png",
        "tables/chunks.csv",
    } <= set(before)
    capsys.readouterr()
    for argv in (["--resume", str(run_dir)], [str(cfg), "resume=true"]):
        assert cli.main(["run", "--no-progress", *argv]) == 0
        out, err = capsys.readouterr()
        assert err == f"dedebate: run already finished: {run_dir}; nothing to do\n"
        assert "PASS  heads rate near p" in out  # the stored record, reported again
        assert _snapshot(run_dir) == before  # no byte, no mtime, not even the lock file

    # reproduce --resume: the finished experiment is skipped, the failed one is run again
    rep_args = [
        "reproduce",
        "--quick",
        "--no-progress",
        "--tracking",
        "disabled",
        "--only",
        "fake_pass",
        "fake_raise",
        "--output-dir",
        str(tmp_path / "rep"),
    ]
    assert cli.main(rep_args) == 1
    (rep,) = (tmp_path / "rep").glob("reproduce-*")
    passed = _snapshot(rep / "fake_pass")
    failed = json.loads((rep / "fake_raise" / "results.json").read_text())
    assert failed["status"] == "error"
    fake_raise = sys.modules["tests.fake_experiments.fake_raise"]
    monkeypatch.delattr(fake_raise, "chunks")  # fixed: no chunk raises any more
    monkeypatch.setattr(
        fake_raise,
        "report",
        lambda cfg, measured, host: ExperimentResult(
            claims=[Claim.exact("fixed", "s", "== 1", 1, True)]
        ),
    )
    capsys.readouterr()
    assert (
        cli.main(
            [
                "reproduce",
                "--resume",
                str(rep),
                "--no-progress",
                "--tracking",
                "disabled",
                "--only",
                "fake_pass",
                "fake_raise",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert f"run already finished: {rep / 'fake_pass'}; nothing to do" in err
    assert "PASS: 3/3 claims pass" in out, out
    assert _snapshot(rep / "fake_pass") == passed
    assert json.loads((rep / "fake_raise" / "results.json").read_text())["status"] == "ok"
    report = json.loads((rep / "report.json").read_text())
    assert report["complete"] and report["passed"] and report["provenance"]["resumed"] is True
    assert list((tmp_path / "rep").iterdir()) == [rep]  # no new reproduce directory
    # what the resume needs from the command line is checked first, in one line
    one_line_error(
        capsys,
        cli.main(["reproduce", "--resume", str(rep), "--full"]),
        "it was reproduced with size 'quick', not 'full'",
    )
    one_line_error(
        capsys,
        cli.main(["reproduce", "--resume", str(tmp_path)]),
        "no report.json there (not a reproduce directory)",
    )


# ----------------------------------------------------------------------------- run record


def test_failure_03_a_run_records_running_before_the_work_starts(tmp_path):
    seen = []

    def host(cfg, seed, key, measured):  # the work: it sees the run's results.json on disk
        (results,) = tmp_path.glob("tiny-*/results.json")
        seen.append(json.loads(results.read_text()))

    def report(cfg, measured, host):
        return ExperimentResult(
            claims=[Claim.exact("c", "s", "== 1", 1, True)], tables={"t": [{"a": 1}]}
        )

    module = types.SimpleNamespace(
        NAME="tiny", TITLE="tiny", Config=_TinyConfig, host=host, report=report
    )
    cfg = resolve(
        {
            "experiment": "tiny",
            "output_dir": str(tmp_path),
            "resume": True,
            "tracking": {"mode": "disabled"},
        },
        {"tiny": module},
    )
    rec = run_experiment(module, cfg, show_progress=False)
    assert seen[0]["status"] == "running" and seen[0]["pid"] == os.getpid()
    assert "died" in seen[0]["note"] and seen[0]["started_utc"]
    assert json.loads((rec.run_dir / "results.json").read_text())["status"] == "ok"
    # a finished run resumed: nothing runs
    assert run_experiment(module, cfg, run_dir=rec.run_dir, show_progress=False).reused
    assert len(seen) == 1
    # a finished run that lost a file is run again: its results stay on disk meanwhile
    (rec.run_dir / "tables" / "t.csv").unlink()
    run_experiment(module, cfg, run_dir=rec.run_dir, show_progress=False)
    assert seen[1]["status"] == "ok" and seen[1]["claims"][0]["claim"] == "c"
    # an attempt that died left "running": the next attempt replaces it with its own
    write_json(rec.run_dir / "results.json", {"status": "running", "pid": -1})
    run_experiment(module, cfg, run_dir=rec.run_dir, show_progress=False)
    assert seen[2]["status"] == "running" and seen[2]["pid"] == os.getpid()


# ----------------------------------------------------------------------------- sweeps


def test_failure_07_sweep_children_never_import_the_current_folders_packages(
    tmp_path, cli_env, capfd, monkeypatch
):
    from dedebate.lab.distributed import launch_local
    from dedebate.lab.registry import discover_experiments

    # the parent's experiments: a package importable here (not on the children's PYTHONPATH)
    real = tmp_path / "real" / "relexps"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("")
    (real / "tiny.py").write_text(
        "NAME = 'tiny'\nTITLE = 'the real one'\n\n\n"
        "def report(cfg, measured, host):\n"
        "    raise NotImplementedError\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "real"))
    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", "relexps")
    assert discover_experiments().names() == ["tiny"]
    # the folder the sweep is started from has impostors of the same names
    cwd = tmp_path / "cwd"
    for pkg in ("experiments", "relexps"):
        (cwd / pkg).mkdir(parents=True)
        (cwd / pkg / "__init__.py").write_text("")
    monkeypatch.chdir(cwd)
    code = launch_local(["list"], 1, environ={**cli_env, "DEDEBATE_EXPERIMENTS": "relexps"})
    out, err = capfd.readouterr()
    assert code == 0, err
    assert out == "tiny\tthe real one\n", (out, err)  # was: "(no experiments registered)"


def test_a_process_killed_by_a_signal_ends_the_job_with_128_plus_it(
    tmp_path, cli_env, capfd, monkeypatch
):
    from dedebate.lab.distributed import launch_local

    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments.dying")  # the children's
    env = {**cli_env, "DEDEBATE_EXPERIMENTS": "tests.fake_experiments.dying"}  # path has tests
    cfg = tmp_path / "dies.yaml"
    cfg.write_text(f"experiment: fake_dies\noutput_dir: {tmp_path}\ntracking: {{mode: disabled}}\n")
    argv = ["run", str(cfg), "--no-progress"]
    code = launch_local(argv, 2, environ=env)  # both processes run it: both die by SIGKILL
    err = capfd.readouterr().err
    assert code == 128 + 9, err  # was -9 (247 in a shell)
    assert "another process exited" not in err


def test_failure_10_resumed_sweep_recomputes_a_damaged_group(tmp_path, capsys):
    from dedebate.lab.registry import discover_experiments
    from dedebate.lab.sweep import plan, run_sweep
    from dedebate.lab.sweep_rows import check_group_file

    reg = discover_experiments(["tests.fake_experiments.sweepable"])
    module = reg.experiments["fake_sweep"]
    raw = {
        "experiment": "fake_sweep",
        "size": "quick",
        "seed": 1,
        "output_dir": str(tmp_path),
        "tracking": {"mode": "disabled"},
        "sweep": {"seeds": 2, "axes": {"p": [0.3, 0.6]}, "plots": False},
    }
    cfg = resolve(raw, reg.experiments)
    rec = run_sweep(module, cfg, show_progress=False)
    table = (rec.sweep_dir / "sweep.csv").read_text()
    g0 = rec.sweep_dir / "groups" / "group-000.csv"
    good = g0.read_text()
    lines = good.splitlines(keepends=True)
    p = plan(module, cfg)
    assert check_group_file(g0, p, p.groups[0]) is None
    assert "0 rows, expected 4" in check_group_file(_write(g0, lines[0]), p, p.groups[0])
    assert "fewer cells" in check_group_file(
        _write(g0, "".join(lines[:-1]) + lines[-1][:6] + "\n"), p, p.groups[0]
    )
    assert "is not a (new) row" in check_group_file(
        _write(g0, lines[0] + lines[1] * 4), p, p.groups[0]
    )
    assert "is not point 1's value" in check_group_file(
        _write(g0, good.replace(",0.6,", ",0.7,")), p, p.groups[0]
    )
    header = lines[0].rstrip("\n").split(",")
    cells = lines[1].rstrip("\n").split(",")
    cells[header.index("rate")] = "0.999"  # a measured value edited, the structure intact
    edited = lines[0] + ",".join(cells) + "\n" + "".join(lines[2:])
    assert "differ from those hashed in groups.sha256" in check_group_file(
        _write(g0, edited), p, p.groups[0]
    )
    capsys.readouterr()
    fixed = run_sweep(
        module, resolve({**raw, "resume": True}, reg.experiments), show_progress=False
    )
    assert "recomputing group 0" in capsys.readouterr().err
    assert fixed.results["groups_resumed"] == 0 and g0.read_text() == good

    _write(g0, lines[0])  # truncated to its header
    capsys.readouterr()
    again = run_sweep(
        module, resolve({**raw, "resume": True}, reg.experiments), show_progress=False
    )
    err = capsys.readouterr().err
    assert again.sweep_dir == rec.sweep_dir
    assert f"{g0}: 0 rows, expected 4" in err and "recomputing group 0" in err
    assert again.results["groups_resumed"] == 0 and again.results["rows"] == 4
    assert (rec.sweep_dir / "sweep.csv").read_text() == table  # the same numbers
    assert g0.read_text() == good
    # an intact group file is trusted: resumed, nothing computed, no warning (the sweep has
    # finished: its results.json is kept as it is)
    third = run_sweep(
        module, resolve({**raw, "resume": True}, reg.experiments), show_progress=False
    )
    assert third.results == {} and len(third.rows) == 4
    err = capsys.readouterr().err
    assert "warning" not in err and "sweep already finished" in err
    assert (rec.sweep_dir / "sweep.csv").read_text() == table
    # a sweep in use by another process is not resumed beside it
    with lock_run_dir(rec.sweep_dir), pytest.raises(RunDirError, match="run in use by PID"):
        run_sweep(module, resolve({**raw, "resume": True}, reg.experiments), show_progress=False)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"eight"', "params.T='eight': expected an integer"),
        ("-3", "params.T=-3: must be an even integer in [4, 18]"),
        ("64", "params.T=64: must be an even integer in [4, 18]"),
    ],
)
def test_failure_08_bad_value_in_file_under_quick_is_a_one_line_error(
    value, message, tmp_path, capsys, monkeypatch
):
    """A value in the file is validated whatever the size preset: one line, exit 2, no run."""
    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", "experiments")
    path = tmp_path / "c.yaml"
    path.write_text(
        f"experiment: machines\nsize: quick\noutput_dir: {tmp_path / 'runs'}\n"
        f"params:\n  T: {value}\n"
    )
    assert cli.main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"dedebate: error: config error: {message}"
    assert not (tmp_path / "runs").exists()
