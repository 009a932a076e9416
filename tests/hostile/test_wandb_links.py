"""Links planted in a shared run folder's ``wandb/``: ``run --resume`` refuses them before W&B
writes anything (it staged its artifact files through ``wandb/data``), and ``dedebate sync``
refuses them before uploading anything (it uploaded the folder an ``offline-run-*`` link leads
to); W&B's own log links, as it makes them in every offline run, pass."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dedebate import cli
from dedebate.lab.folder_guard import check_wandb_dir
from dedebate.lab.rundir import RunDirError
from tests.hostile.test_catalogue import EXPERIMENTS, fill_outside, run_folder, snapshot

RUN = "offline-run-20261205_053815-zadcts0o"


def offline_run_folder(work: Path) -> Path:
    """A fake_pass run folder holding only its config.yaml, tracked offline by W&B."""
    return run_folder(work, "fake_pass", None, tracking="offline")


def w_and_b_layout(run: Path, outside: Path) -> Path:
    """``run/wandb/`` as W&B leaves it after one offline run (its links included)."""
    w = run / "wandb"
    logs = w / RUN / "logs"
    logs.mkdir(parents=True)
    (w / RUN / "files").mkdir()
    (w / RUN / "run-zadcts0o.wandb").write_bytes(b"W&B")
    (logs / "debug.log").write_text("log\n")
    (logs / "debug-core.log").symlink_to(outside / "core-debug.log")  # W&B's cache in $HOME
    (w / "latest-run").symlink_to(RUN)
    (w / "debug.log").symlink_to(f"{RUN}/logs/debug.log")
    (w / "debug-internal.log").symlink_to(f"{RUN}/logs/debug-internal.log")
    (w / "data" / "artifacts" / "staging").mkdir(parents=True)
    return w


def test_resume_refuses_a_wandb_data_link_before_w_and_b_stages_through_it(
    tmp_path, fake_env, capsys
):
    """Hole 4: ``wandb/data`` links to another folder; the old code staged results.json,
    config.yaml and the plots there (exit 0)."""
    fake_env.setenv("DEDEBATE_EXPERIMENTS", EXPERIMENTS)
    outside = tmp_path / "outside"
    outside.mkdir()
    fill_outside(outside)
    before = snapshot(outside)
    run = offline_run_folder(tmp_path / "work")
    (run / "wandb").mkdir()
    (run / "wandb" / "data").symlink_to(outside)
    assert cli.main(["run", "--no-progress", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'wandb' / 'data'}: a symbolic link (to {outside})" in err
    assert len(err.strip().splitlines()) == 1
    assert snapshot(outside) == before  # nothing staged through the link
    assert not list((run / "wandb").glob("offline-run-*"))  # W&B never started


@pytest.mark.parametrize("dry_run", [True, False])
def test_sync_refuses_an_offline_run_link_out_of_the_folder(tmp_path, fake_env, capsys, dry_run):
    """Hole 5: ``wandb/offline-run-*`` links to another folder's run; the old code handed that
    path to ``wandb sync`` (and listed it in ``--dry-run``)."""
    outside = tmp_path / "outside"
    (outside / "victim_run").mkdir(parents=True)
    (outside / "victim_run" / "run-victim.wandb").write_bytes(b"private")
    run = tmp_path / "run"
    w = w_and_b_layout(run, outside)
    (w / "offline-run-20261205_060000-victim01").symlink_to(outside / "victim_run")
    log = tmp_path / "synced.txt"
    fake = tmp_path / "wandb-standin"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    fake_env.setenv("DEDEBATE_WANDB", str(fake))
    argv = ["sync", *(["--dry-run"] if dry_run else []), str(tmp_path)]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and not log.exists()  # nothing listed, nothing uploaded
    assert "offline-run-20261205_060000-victim01: a symbolic link (to " in err


def test_w_and_b_own_links_pass_and_every_other_entry_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    w = w_and_b_layout(tmp_path / "run", outside)
    (w / "dedebate-run-id").symlink_to(outside / "secret.txt")  # never read through, replaced
    check_wandb_dir(w)
    check_wandb_dir(tmp_path / "run" / "nothing")  # no wandb/ yet: nothing to refuse
    plants = {
        w / RUN / "files" / "config.yaml": lambda p: p.symlink_to(outside / "secret.txt"),
        w / "data" / "artifacts" / "staging": lambda p: p.symlink_to(outside),
        w / "latest-run": lambda p: p.symlink_to(outside),  # W&B's name, but leading out
        w / RUN / "debug-core.log": lambda p: p.symlink_to(outside / "x"),  # not in logs/
        w / "inside": lambda p: p.symlink_to(RUN),  # even a link inside the run
        w / RUN / "files" / "pipe": lambda p: os.mkfifo(p),
    }
    saved = tmp_path / "saved"
    for path, plant in plants.items():
        if path.exists() or path.is_symlink():
            path.rename(saved)
        plant(path)
        with pytest.raises(RunDirError, match=f"^{path}: a (symbolic link|FIFO)"):
            check_wandb_dir(w)
        path.unlink()
        if saved.exists() or saved.is_symlink():
            saved.rename(path)
        check_wandb_dir(w)
    (w / "data").rename(saved)
    (w / "data").symlink_to(tmp_path / "run" / "config")  # wandb/data as a link, even inside
    with pytest.raises(RunDirError, match="a run directory's wandb/ must be a folder holding only"):
        check_wandb_dir(w)
    real = w.rename(tmp_path / "real-wandb")
    w.symlink_to(real)  # wandb/ itself a link
    with pytest.raises(RunDirError, match=f"^{w}: a symbolic link"):
        check_wandb_dir(w)
    w.unlink()
    w.write_text("")
    with pytest.raises(RunDirError, match=f"^{w}: a regular file; "):
        check_wandb_dir(w)


def test_an_offline_run_resumes_and_syncs_with_w_and_b_own_links(tmp_path, fake_env, capsys):
    """The real W&B layout (its log links) passes: a resumed offline run adds an attempt, which
    ``sync --dry-run`` lists beside the first."""
    fake_env.setenv("DEDEBATE_EXPERIMENTS", EXPERIMENTS)
    run = offline_run_folder(tmp_path / "work")
    assert cli.main(["run", "--no-progress", "--resume", str(run)]) == 0
    results = json.loads((run / "results.json").read_text())
    results["status"] = "running"  # the process died: resume it
    (run / "results.json").write_text(json.dumps(results))
    assert cli.main(["run", "--no-progress", "--resume", str(run)]) == 0
    capsys.readouterr()
    assert cli.main(["sync", "--dry-run", str(run)]) == 0
    listed = capsys.readouterr().out.split()
    assert len(listed) == 2 and all(Path(p).parent == run / "wandb" for p in listed)
    assert [p for p in (run / "wandb" / "data").rglob("*") if p.is_file()]  # staged inside
