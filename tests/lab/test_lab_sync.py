"""``dedebate sync`` is bounded and stoppable: a ``wandb sync`` that never answers is stopped
after ``--timeout`` with its children, and Ctrl-C ends the command and every upload at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dedebate.lab.sync import sync_all
from tests.conftest import REPO


def _hanging_wandb(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in ``wandb`` that starts a child which never ends, recording the child's pid."""
    pids = tmp_path / "pids"
    fake = tmp_path / "wandb-hangs"
    fake.write_text(f"#!/bin/sh\nsleep 600 &\necho $! >> {pids}\nwait\n")
    fake.chmod(0o755)
    return fake, pids


def _offline_runs(tmp_path: Path, n: int) -> list[Path]:
    runs = [tmp_path / "run" / "wandb" / f"offline-run-{i}" for i in range(n)]
    for r in runs:
        r.mkdir(parents=True)
    return runs


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_for(pred, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def test_an_upload_that_never_answers_is_stopped_with_its_children(tmp_path, monkeypatch):
    fake, pids = _hanging_wandb(tmp_path)
    monkeypatch.setenv("DEDEBATE_WANDB", str(fake))
    lines: list[str] = []
    t0 = time.monotonic()
    failed = sync_all(_offline_runs(tmp_path, 3), jobs=2, timeout=1.0, report=lines.append)
    assert failed == 3 and time.monotonic() - t0 < 30
    assert sum("(exit 124): no answer within 1 s" in line for line in lines) == 3
    assert [line.split(" syncing")[0] for line in lines if "syncing" in line] == [
        "[1/3]",
        "[2/3]",
        "[3/3]",
    ]
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 3 and _wait_for(lambda: not any(map(_alive, children)), 10)


def test_ctrl_c_ends_sync_and_every_upload_at_once(tmp_path, wandb_server):
    fake, pids = _hanging_wandb(tmp_path)
    _offline_runs(tmp_path, 2)
    env = {**os.environ, "DEDEBATE_WANDB": str(fake), "PYTHONPATH": str(REPO)}
    # as from a terminal: Python's Ctrl-C handler, even where this suite was started in the
    # background (a shell's background jobs ignore SIGINT, and a child inherits that); set in
    # the child before the command line starts (a preexec_fn would fork this threaded process)
    start = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('dedebate.cli', run_name='__main__', alter_sys=True)"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", start, "sync", "--jobs", "2", str(tmp_path / "run")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, 60)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 130 and time.monotonic() - t0 < 10, (out, err)
    assert "[1/2] syncing" in out and "interrupted" in err
    children = [int(x) for x in pids.read_text().split()]
    assert _wait_for(lambda: not any(map(_alive, children)), 10)


def test_sync_asks_the_server_once_before_it_uploads(tmp_path, monkeypatch, capsys, wandb_server):
    """A server that does not answer: one line naming it, exit 1 within seconds and nothing
    uploaded (was: every run's upload waited out --timeout, 300 s each); one that answers, or
    --no-probe: the uploads run."""
    from dedebate import cli

    log = tmp_path / "calls"
    fake = tmp_path / "wandb-records"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("DEDEBATE_WANDB", str(fake))
    runs = _offline_runs(tmp_path, 2)
    assert cli.main(["sync", str(tmp_path / "run")]) == 0  # the fixture's server answers
    assert len(log.read_text().splitlines()) == 2
    log.unlink()
    capsys.readouterr()
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # the discard port: refused
    t0 = time.monotonic()
    assert cli.main(["sync", str(tmp_path / "run")]) == 1 and time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert err.startswith("dedebate: error: the W&B server http://127.0.0.1:9 did not answer (")
    assert "nothing synced, the 2 offline run(s) are kept" in err and not log.exists()
    assert cli.main(["sync", "--no-probe", str(tmp_path / "run")]) == 0
    assert sorted(log.read_text().split()) == sorted(["sync", "sync", *map(str, runs)])


def test_sync_refuses_a_timeout_that_is_not_positive(tmp_path, capsys):
    from dedebate import cli

    _offline_runs(tmp_path, 1)
    for bad in ("0", "-1", "inf", "nan"):
        assert cli.main(["sync", "--timeout", bad, str(tmp_path)]) == 2
        assert f"--timeout={float(bad)}: must be a positive" in capsys.readouterr().err


def test_the_wandb_probe_asks_the_server_the_installed_wandb_uses(monkeypatch):
    import wandb

    from dedebate.lab import tracking

    monkeypatch.delenv("WANDB_BASE_URL", raising=False)
    assert tracking.base_url() == wandb.Settings().base_url.rstrip("/")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9/")
    assert tracking.base_url() == "http://127.0.0.1:9"


def test_the_attempts_of_a_resumed_run_are_uploaded_together(tmp_path, monkeypatch):
    log = tmp_path / "calls"
    fake = tmp_path / "wandb-records"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("DEDEBATE_WANDB", str(fake))
    w = tmp_path / "run" / "wandb"
    runs = [
        w / "offline-run-20261204_100000-abc",
        w / "offline-run-20261204_110000-xyz",
        w / "offline-run-20261204_110000-xyz-1",
        w / "offline-run-20261204_120000-abc",
    ]
    for r in runs:
        r.mkdir(parents=True)
    lines: list[str] = []
    assert sync_all(runs, jobs=1, report=lines.append) == 0
    assert sorted(log.read_text().splitlines()) == [
        f"sync {runs[0]} {runs[3]}",
        f"sync {runs[1]} {runs[2]}",
    ]
    assert f"synced {runs[3]} (and 1 earlier attempt(s))" in lines


def test_wandb_sync_writes_its_log_beside_the_run_not_in_the_callers_folder(tmp_path, monkeypatch):
    """``wandb sync`` writes ``wandb/debug-sync.*.log`` into its working folder: started from the
    caller's folder, it left a ``wandb/`` there (a repository's, say). It runs in the run's."""
    fake = tmp_path / "wandb-logs"
    fake.write_text('#!/bin/sh\nmkdir -p wandb && echo "$@" > wandb/debug-sync.log\n')
    fake.chmod(0o755)
    monkeypatch.setenv("DEDEBATE_WANDB", str(fake))
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.chdir(caller)
    runs = _offline_runs(tmp_path, 1)
    assert sync_all([Path(os.path.relpath(runs[0]))], jobs=1, timeout=30.0, report=print) == 0
    assert not (caller / "wandb").exists()
    log = (tmp_path / "run" / "wandb" / "debug-sync.log").read_text()
    assert log.split()[-1] == str(runs[0])  # the run's path made absolute


def _write_log(path: Path, records) -> None:
    """W&B's run log (LevelDB's format: 32 KiB blocks, a 7-byte header a piece; CRC unchecked)."""
    import struct

    out = bytearray(b":W&B\x00\x00\x00")
    for rec in records:
        data, kind = rec.SerializeToString(), None
        while kind not in (1, 4):
            room = 32768 - len(out) % 32768
            if room < 7:
                out += b"\x00" * room
                continue
            piece, data = data[: room - 7], data[room - 7 :]
            kind = (1 if not data else 2) if kind is None else (4 if not data else 3)
            out += struct.pack("<IHB", 0, len(piece), kind) + piece
    path.write_bytes(bytes(out))


def test_sync_refuses_a_run_whose_records_name_files_outside_it(tmp_path, capsys):
    from wandb.proto import wandb_internal_pb2 as pb

    from dedebate import cli

    secret = tmp_path / "secret.netrc"
    secret.write_text("machine api.wandb.ai password hunter2\n")
    run = tmp_path / "shared" / "r" / "wandb" / "offline-run-20260101_000000-abc"
    run.mkdir(parents=True)
    staged = run.parent / "data" / "staged.csv"
    staged.parent.mkdir()
    staged.write_text("a,b\n")
    big = pb.Record()  # a record over a block, in pieces: the reader joins them
    big.history.item.add(key="x", value_json="1" * 70000)
    art = pb.Record()
    for p in (str(staged), "/nowhere/on/this/machine.csv"):  # a copy's paths: nowhere here
        art.artifact.manifest.contents.add(path="f.csv", local_path=p)
    _write_log(run / "run-abc.wandb", [big, art])
    assert cli.main(["sync", "--dry-run", str(tmp_path / "shared")]) == 0
    capsys.readouterr()
    art.artifact.manifest.contents.add(path="g.csv", local_path=str(secret))
    _write_log(run / "run-abc.wandb", [big, art])
    assert cli.main(["sync", "--dry-run", str(tmp_path / "shared")]) == 2
    err = capsys.readouterr().err
    assert "name 1 file(s) or request(s) outside its run directory" in err
    assert "secret.netrc" in err
    files = pb.Record()
    files.files.files.add(path="../../../secret.netrc")
    _write_log(run / "run-abc.wandb", [files])
    assert cli.main(["sync", "--dry-run", str(tmp_path / "shared")]) == 2
    # a log under another name: W&B's sync uploads every *.wandb in the folder
    _write_log(run / "run-abc.wandb", [pb.Record()])
    assert cli.main(["sync", "--dry-run", str(tmp_path / "shared")]) == 0
    _write_log(run / "evil.wandb", [big, art])
    capsys.readouterr()
    assert cli.main(["sync", "--dry-run", str(tmp_path / "shared")]) == 2
    assert "secret.netrc" in capsys.readouterr().err
    (run / "evil.wandb").unlink()
    # a TensorBoard record (a sync reads its directory, or a bucket) or any request (a sync would
    # log or download an artifact): W&B writes neither into an offline run's log
    tb, get = pb.Record(), pb.Record()
    tb.tbrecord.log_dir, tb.tbrecord.save = "gs://bucket/runs", True
    get.request.download_artifact.download_root = str(tmp_path / "overwritten")
    for rec, shown in (
        (tb, "TensorBoard directory 'gs://bucket/runs'"),
        (get, "a download_artifact request"),
    ):
        _write_log(run / "run-abc.wandb", [big, rec])
        assert cli.main(["sync", "--dry-run", str(tmp_path / "shared")]) == 2
        assert shown in capsys.readouterr().err
    (run / "run-abc.wandb").write_bytes(b"not a log")
    assert cli.main(["sync", "--dry-run", str(tmp_path / "shared")]) == 2
    assert "not a W&B run log" in capsys.readouterr().err


def test_sync_takes_a_run_folder_itself_and_each_run_once(tmp_path, capsys):
    from wandb.proto import wandb_internal_pb2 as pb

    from dedebate import cli

    runs = [tmp_path / "r" / "wandb" / f"offline-run-20260101_00000{i}-id{i}" for i in (1, 2)]
    for run in runs:
        run.mkdir(parents=True)
        _write_log(run / f"run-{run.name[-3:]}.wandb", [pb.Record()])
    assert cli.main(["sync", "--dry-run", str(runs[0])]) == 0  # was: "no offline W&B runs"
    assert capsys.readouterr().out.splitlines() == [str(runs[0])]
    assert cli.main(["sync", "--dry-run", str(tmp_path), str(runs[1]), str(tmp_path / "r")]) == 0
    assert capsys.readouterr().out.splitlines() == list(map(str, runs))  # each once


def test_sync_counts_runs_by_id_and_exits_1_when_one_fails(tmp_path, monkeypatch, capsys):
    """Three offline folders of two runs (one resumed: two attempts of one id); the upload of the
    other fails: one line per run, ``1/2 W&B run(s) synced`` and exit 1; with both uploads
    answering, ``2/2`` and exit 0."""
    from wandb.proto import wandb_internal_pb2 as pb

    from dedebate import cli

    w = tmp_path / "r" / "wandb"
    names = ["20260101_000001-good", "20260101_000002-good", "20260101_000003-bad"]
    for name in names:
        run = w / f"offline-run-{name}"
        run.mkdir(parents=True)
        _write_log(run / f"run-{name[-4:]}.wandb", [pb.Record()])
    fake = tmp_path / "wandb-fails-bad"
    fake.write_text('#!/bin/sh\ncase "$*" in *-bad*) exit 3 ;; esac\n')
    fake.chmod(0o755)
    monkeypatch.setenv("DEDEBATE_WANDB", str(fake))
    assert cli.main(["sync", "--no-probe", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    ends = sorted(ln.split()[0] for ln in out.splitlines() if not ln.startswith("["))
    assert ends == ["FAILED", "synced"], out
    assert err.strip().splitlines()[-1] == "1/2 W&B run(s) synced"
    fake.write_text("#!/bin/sh\nexit 0\n")
    assert cli.main(["sync", "--no-probe", str(tmp_path)]) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == "2/2 W&B run(s) synced"
