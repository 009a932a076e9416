"""SIGTERM to ``dedebate reproduce --jobs 2`` ends the whole job (SIGINT takes the same path, a
KeyboardInterrupt, with exit 130): the command, its fork server and its workers, with nothing
written after the command has gone; they also end when it is killed outright; a resume then runs
what was stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _children() -> dict[int, list[int]]:
    """Every live process's children, from /proc."""
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return kids


def _descendants(pid: int) -> set[int]:
    kids, out, todo = _children(), set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.add(k)
            todo.append(k)
    return out


def _alive(pids: set[int]) -> set[int]:
    live = {k for ks in _children().values() for k in ks}
    return pids & live


def _wait_for(pred, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not pred():
        time.sleep(0.1)
    return pred()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGKILL, -signal.SIGKILL)])
def test_a_signal_ends_reproduce_its_fork_server_and_workers(tmp_path, cli_env, sig, code):
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {
        **cli_env,
        "DEDEBATE_EXPERIMENTS": "tests.fake_experiments.slow",
        "DEDEBATE_TEST_MARK_DIR": str(marks),
    }
    cmd = [
        sys.executable,
        "-m",
        "dedebate.cli",
        "reproduce",
        "--quick",
        "--no-progress",
        "--tracking",
        "disabled",
    ]
    leader = subprocess.Popen(
        [*cmd, "--jobs", "2", "--output-dir", str(tmp_path / "out")],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert _wait_for(lambda: len(list(marks.glob("started-*"))) == 2, 240)
        started = time.monotonic()
        tree = _descendants(leader.pid)
        workers = {int(p.read_text()) for p in marks.glob("started-*")}
        assert workers <= tree
        leader.send_signal(sig)
        out, err = leader.communicate(timeout=60)
    finally:
        leader.kill()
    assert leader.returncode == code, err
    assert _wait_for(lambda: not _alive(tree), 15), f"left running: {_alive(tree)}"
    time.sleep(max(0.0, started + 4.0 + 1.0 - time.monotonic()))  # past the experiments' end
    assert not list(marks.glob("finished-*"))
    if sig != signal.SIGTERM:
        return
    (rep,) = (tmp_path / "out").glob("reproduce-*")
    again = subprocess.run(  # the resumed experiments need not sleep (their config is kept)
        [*cmd, "--jobs", "2", "--resume", str(rep)],
        env={**env, "DEDEBATE_TEST_SLEEP_S": "0"},
        text=True,
        capture_output=True,
        timeout=240,
    )
    assert again.returncode == 0, again.stderr
    report = json.loads((rep / "report.json").read_text())
    assert sorted(e["name"] for e in report["experiments"]) == ["fake_slow_a", "fake_slow_b"]
    assert len(list(marks.glob("finished-*"))) == 2
