"""``check_run_dir`` (dedebate/lab/folder_guard.py) lets W&B's own links out stand, as W&B makes
them in every offline run, and refuses a ``wandb/`` that is itself a link out."""

from __future__ import annotations

import json

import pytest

from dedebate.lab.folder_guard import check_run_dir
from dedebate.lab.rundir import RunDirError


def test_w_and_b_links_its_logs_out_but_its_folder_may_not_link_out(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    logs = run / "sub" / "wandb" / "offline-run-1" / "logs"  # a sub-run's too (reproduce)
    logs.mkdir(parents=True)
    outside.mkdir()
    (logs / "debug-core.log").symlink_to(outside / "core-debug.log")  # as W&B makes it
    (run / "sub" / "wandb" / "latest-run").symlink_to("offline-run-1")
    check_run_dir(run)
    (run / "wandb").symlink_to(outside)
    with pytest.raises(RunDirError, match=f"^{run / 'wandb'}: a symbolic link "):
        check_run_dir(run)


def test_a_results_json_nested_too_deeply_is_run_again_as_a_truncated_one_is(tmp_path, fake_env):
    """``run --resume`` of a run whose results.json is nested 100,000 deep (it raised
    RecursionError): no readable record, so the run runs and writes one."""
    from dedebate import cli
    from tests.hostile.test_catalogue import DEEP, EXPERIMENTS, run_folder

    fake_env.setenv("DEDEBATE_EXPERIMENTS", EXPERIMENTS)
    run = run_folder(tmp_path, "fake_pass", None)
    (run / "results.json").write_text(DEEP)
    assert cli.main(["run", "--no-progress", "--resume", str(run)]) == 0
    results = json.loads((run / "results.json").read_text())
    assert (results["status"], results["passed"], len(results["claims"])) == ("ok", True, 2)
