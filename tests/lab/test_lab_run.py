"""One run: run-directory contents, provenance, W&B offline files; W&B failures lose nothing."""

from __future__ import annotations

import csv
import json
import re
import sys

import jax
import numpy as np
import pytest

from dedebate import cli
from dedebate.lab.config import load_config, resolve
from dedebate.lab.runner import run_experiment

CONFIG = """\
experiment: fake_pass
seed: 5
size: quick
params:
  p: 0.5
"""


def start(tmp_path, capsys, *overrides):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    code = cli.main(
        ["run", "--no-progress", str(path), f"output_dir={tmp_path / 'runs'}", *overrides]
    )
    out, err = capsys.readouterr()
    dirs = sorted((tmp_path / "runs").glob("fake_pass-*"))
    return code, out, err, dirs


def read_results(run_dir):
    return json.loads((run_dir / "results.json").read_text())


def without_timings(metrics):
    """The measured metrics, without the lab's stopwatch times (``wall_<step>_s``)."""
    return {k: v for k, v in metrics.items() if not re.fullmatch(r"wall_\w+_s", k)}


def test_run_directory_contents(tmp_path, fake_env, fake_registry, capsys):
    code, out, err, dirs = start(tmp_path, capsys, "tracking.mode=disabled")
    assert code == 0, err
    assert len(dirs) == 1
    run_dir = dirs[0]
    assert re.fullmatch(r"fake_pass-\d{8}T\d{6}Z", run_dir.name)
    assert str(run_dir) in out

    # config.yaml is the resolved config and loads back to the same RunConfig
    cfg = load_config(run_dir / "config.yaml", fake_registry.experiments)
    expect = resolve(
        {
            "experiment": "fake_pass",
            "seed": 5,
            "size": "quick",
            "output_dir": str(tmp_path / "runs"),
            "tracking": {"mode": "disabled"},
            "params": {"p": 0.5},
        },
        fake_registry.experiments,
    )
    assert cfg == expect
    assert cfg.params.n == 16 and cfg.params.chunks == 2

    res = read_results(run_dir)
    assert set(res) >= {
        "experiment",
        "title",
        "status",
        "passed",
        "claims",
        "metrics",
        "tables",
        "plots",
        "provenance",
    }
    assert res["status"] == "ok" and res["passed"] is True
    assert [c["claim"] for c in res["claims"]] == ["heads rate near p", "flips counted"]
    heads = res["metrics"]["heads"]
    assert res["metrics"]["total"] == 32 and 0 <= heads <= 32
    c0 = res["claims"][0]
    assert c0["lo"] <= c0["value"] == heads / 32 <= c0["hi"]

    prov = res["provenance"]
    assert prov["config_hash"] == cfg.config_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", prov["config_hash"])
    assert prov["seed"] == 5 and prov["size"] == "quick"
    assert prov["dedebate_version"] == __import__("dedebate").__version__
    assert prov["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", prov["git_commit"])
    assert prov["jax_version"] == jax.__version__
    assert prov["backend"] == jax.default_backend()
    assert prov["device_count"] == jax.device_count()
    assert prov["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert prov["result_schema_version"] == 1
    assert prov["git_dirty"] in (True, False, None)
    assert prov["packages"]["jax"] == jax.__version__
    assert prov["packages"]["numpy"] == np.__version__
    assert prov["wall_time_s"] > 0
    assert prov["tracking"]["mode"] == "disabled"

    # one metrics line per table row, logged by the lab at steps 0, 1, ...
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 1]
    assert sum(r["chunks/heads"] for r in lines) == heads
    assert all(isinstance(r["chunks/rate"], float) for r in lines)  # a float32 written as float
    assert [r["chunks/rate"] for r in lines] == [r["chunks/heads"] / 16 for r in lines]

    # plots and tables
    assert res["plots"] == ["plots/counts.png"]
    assert (run_dir / "plots" / "counts.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert res["tables"] == {"chunks": "tables/chunks.csv"}
    with open(run_dir / "tables" / "chunks.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["chunk"], r["n"], int(r["heads"])) for r in rows] == [
        ("0", "16", lines[0]["chunks/heads"]),
        ("1", "16", lines[1]["chunks/heads"]),
    ]
    assert (run_dir / "checkpoints").is_dir()
    assert not (run_dir / "wandb").exists()  # tracking disabled: no W&B files at all


def test_same_config_and_seed_same_numbers(tmp_path, fake_env, capsys):
    _, _, _, dirs = start(tmp_path, capsys, "tracking.mode=disabled")
    _, _, _, dirs = start(tmp_path, capsys, "tracking.mode=disabled")
    assert len(dirs) == 2 and dirs[0] != dirs[1]  # a second run never reuses a directory
    a, b = (read_results(d) for d in dirs)
    assert without_timings(a["metrics"]) == without_timings(b["metrics"])
    assert set(a["metrics"]) - set(without_timings(a["metrics"])) == {"wall_host_s"}
    _, _, _, dirs = start(tmp_path, capsys, "tracking.mode=disabled", "seed=6")
    c = read_results(max(dirs, key=lambda d: d.stat().st_mtime))
    assert c["provenance"]["seed"] == 6


def test_wandb_offline_files_under_run_dir(tmp_path, fake_env, capsys, wandb_server):
    code, out, err, dirs = start(tmp_path, capsys, "tracking.mode=offline")
    assert code == 0, err
    run_dir = dirs[0]
    offline = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 1
    assert list(offline[0].glob("run-*.wandb"))  # the W&B transaction log
    track = read_results(run_dir)["provenance"]["tracking"]
    assert track["mode"] == "offline" and track["failure"] is None
    assert track["wandb_run_id"] and track["wandb_run_id"] in offline[0].name
    assert f"dedebate sync {run_dir}" in out
    assert "warning" not in err
    # the results artifact is staged inside the run directory, not in a per-user folder
    assert [p for p in (run_dir / "wandb" / "data").rglob("*") if p.is_file()]

    # dedebate sync finds the offline run; a stand-in wandb records what it was asked to sync
    assert cli.main(["sync", "--dry-run", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [str(offline[0])]
    log = tmp_path / "synced.txt"
    fake = tmp_path / "wandb-standin"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    fake_env.setenv("DEDEBATE_WANDB", str(fake))
    assert cli.main(["sync", str(run_dir)]) == 0
    assert log.read_text().split() == ["sync", str(offline[0])]
    fake.write_text("#!/bin/sh\necho 'network unreachable' >&2\nexit 3\n")
    assert cli.main(["sync", str(run_dir)]) == 1
    assert "FAILED" in capsys.readouterr().out
    assert cli.main(["sync", str(tmp_path / "nope")]) == 2


def test_wandb_mode_env_respected_by_auto(tmp_path, fake_env, capsys):
    fake_env.setenv("WANDB_MODE", "disabled")
    code, _, err, dirs = start(tmp_path, capsys)  # tracking.mode defaults to auto
    assert code == 0, err
    assert not (dirs[0] / "wandb").exists()
    assert read_results(dirs[0])["provenance"]["tracking"]["mode"] == "disabled"


def _assert_complete(run_dir):
    res = read_results(run_dir)
    assert res["status"] == "ok" and res["passed"] is True and len(res["claims"]) == 2
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 2
    assert (run_dir / "plots" / "counts.png").is_file()
    assert (run_dir / "tables" / "chunks.csv").is_file()
    return res


def test_broken_wandb_init_is_a_warning(tmp_path, fake_env, capsys):
    import wandb

    def boom(*a, **k):
        raise OSError("No space left on device")

    fake_env.setattr(wandb, "init", boom)
    code, _, err, dirs = start(tmp_path, capsys, "tracking.mode=offline")
    assert code == 0
    assert "warning: W&B tracking failed" in err and "No space left on device" in err
    res = _assert_complete(dirs[0])
    assert "No space left" in res["provenance"]["tracking"]["failure"]


def test_wandb_not_installed_is_a_warning(tmp_path, fake_env, capsys):
    fake_env.setitem(sys.modules, "wandb", None)  # "import wandb" now raises ImportError
    code, _, err, dirs = start(tmp_path, capsys, "tracking.mode=offline")
    assert code == 0
    assert "warning: W&B tracking failed" in err and "import of wandb" in err
    _assert_complete(dirs[0])


def test_wandb_failing_mid_run_keeps_local_results(tmp_path, fake_env, capsys):
    import wandb

    def bad_image(*a, **k):
        raise RuntimeError("disk full while writing media")

    fake_env.setattr(wandb, "Image", bad_image)
    code, _, err, dirs = start(tmp_path, capsys, "tracking.mode=offline")
    assert code == 0
    assert err.count("warning: W&B tracking failed") == 1  # warned once, then tracking is off
    assert "disk full" in err
    _assert_complete(dirs[0])


def test_experiment_exception_is_recorded(tmp_path, fake_env, fake_registry, capsys):
    cfg = resolve(
        {"experiment": "fake_raise", "output_dir": str(tmp_path), "tracking": {"mode": "disabled"}},
        fake_registry.experiments,
    )
    rec = run_experiment(fake_registry.experiments["fake_raise"], cfg, show_progress=False)
    assert rec.error == "RuntimeError: boom at step 1" and not rec.passed
    res = read_results(rec.run_dir)
    assert res["status"] == "error" and res["passed"] is False
    assert "RuntimeError: boom at step 1" in (rec.run_dir / "error.txt").read_text()
    assert len((rec.run_dir / "metrics.jsonl").read_text().splitlines()) == 2
    with pytest.raises(RuntimeError, match="boom"):
        run_experiment(
            fake_registry.experiments["fake_raise"], cfg, show_progress=False, raise_errors=True
        )
    # and on the command line: exit 1, one line pointing at error.txt
    path = tmp_path / "r.yaml"
    path.write_text(
        f"experiment: fake_raise\noutput_dir: {tmp_path}\ntracking: {{mode: disabled}}\n"
    )
    assert cli.main(["run", str(path)]) == 1
    assert "boom at step 1" in capsys.readouterr().err


def test_failing_claim_exits_1(tmp_path, fake_env, capsys):
    path = tmp_path / "f.yaml"
    path.write_text(f"experiment: fake_fail\noutput_dir: {tmp_path}\n")
    assert cli.main(["run", str(path), "tracking.mode=disabled"]) == 1
    assert "FAIL  value at least one half" in capsys.readouterr().out
    assert cli.main(["run", str(path), "tracking.mode=disabled", "params.value=0.75"]) == 0


def test_resume_reuses_the_matching_run_dir(tmp_path, fake_env, fake_registry, capsys):
    exps = fake_registry.experiments
    base = {
        "experiment": "fake_pass",
        "size": "quick",
        "output_dir": str(tmp_path),
        "tracking": {"mode": "disabled"},
    }
    first = run_experiment(exps["fake_pass"], resolve(base, exps), show_progress=False)
    again = run_experiment(
        exps["fake_pass"], resolve({**base, "resume": True}, exps), show_progress=False
    )
    assert again.run_dir == first.run_dir
    assert again.reused  # it had finished: nothing to do
    (first.run_dir / "results.json").unlink()  # as if killed before the end: run again
    again = run_experiment(
        exps["fake_pass"], resolve({**base, "resume": True}, exps), show_progress=False
    )
    assert again.run_dir == first.run_dir and not again.reused
    assert read_results(again.run_dir)["provenance"]["resumed"] is True
    # a resumed run that re-logs the same steps replaces those rows: each step appears once
    rows = (first.run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in rows] == [0, 1]
    other = run_experiment(
        exps["fake_pass"], resolve({**base, "resume": True, "seed": 1}, exps), show_progress=False
    )
    assert other.run_dir != first.run_dir  # a different config hash is never resumed into
    # dedebate run --resume RUN_DIR: same config only
    assert cli.main(["run", "--no-progress", "--resume", str(first.run_dir)]) == 0
    assert cli.main(["run", "--resume", str(first.run_dir), "params.n=3"]) == 2
    assert "config hash differs" in capsys.readouterr().err
    # a bad value in the folder's own config.yaml: the error names that file
    stored = first.run_dir / "config.yaml"
    stored.write_text(stored.read_text().replace("experiment: fake_pass", "experiment: nope"))
    assert cli.main(["run", "--resume", str(first.run_dir)]) == 2
    assert f"config error: {stored}: experiment='nope'" in capsys.readouterr().err


def test_a_finished_run_is_reused_only_under_its_own_config(tmp_path, fake_env, fake_registry):
    """Resuming a finished run folder with other params runs again (its results are not the
    stored ones) and equals a fresh run with those params; with the same params it is reused."""
    exps = fake_registry.experiments

    def cfg(p, out):
        raw = {"experiment": "fake_pass", "size": "quick", "output_dir": str(tmp_path / out)}
        raw |= {"resume": True, "tracking": {"mode": "disabled"}, "params": {"p": p}}
        return resolve(raw, exps)

    def go(p, run_dir, out="runs"):
        return run_experiment(exps["fake_pass"], cfg(p, out), run_dir=run_dir, show_progress=False)

    run_dir = tmp_path / "runs" / "one"
    go(0.25, run_dir)
    assert go(0.25, run_dir).reused
    other = go(0.75, run_dir)
    assert not other.reused
    assert read_results(run_dir)["provenance"]["config_hash"] == cfg(0.75, "runs").config_hash()
    fresh = go(0.75, tmp_path / "fresh" / "one", "fresh")
    assert without_timings(other.results["metrics"]) == without_timings(fresh.results["metrics"])


def test_resume_after_crash_equals_uninterrupted(tmp_path, fake_env, capsys):
    fake_env.setenv("DEDEBATE_EXPERIMENTS", "tests.fake_experiments.resumable")
    path = tmp_path / "k.yaml"
    path.write_text(
        f"experiment: fake_ckpt\noutput_dir: {tmp_path / 'runs'}\ntracking: {{mode: disabled}}\n"
    )
    fake_env.setenv("FAKE_CRASH_AT", "2")
    assert cli.main(["run", "--no-progress", str(path)]) == 1
    (crashed,) = (tmp_path / "runs").glob("fake_ckpt-*")
    assert read_results(crashed)["status"] == "error"
    fake_env.delenv("FAKE_CRASH_AT")
    assert cli.main(["run", "--no-progress", "--resume", str(crashed)]) == 0
    resumed = read_results(crashed)
    assert resumed["status"] == "ok" and resumed["metrics"]["resumed_from"] == 3
    assert resumed["provenance"]["resumed"] is True
    fresh_dir = tmp_path / "fresh"
    assert cli.main(["run", "--no-progress", str(path), f"output_dir={fresh_dir}"]) == 0
    (fresh,) = fresh_dir.glob("fake_ckpt-*")
    fresh_res = read_results(fresh)
    assert fresh_res["metrics"]["resumed_from"] == 0
    assert resumed["metrics"]["total"] == fresh_res["metrics"]["total"]
    assert resumed["provenance"]["config_hash"] == fresh_res["provenance"]["config_hash"]
    capsys.readouterr()


def test_sync_dry_run_lists_every_offline_run_of_a_reproduce(tmp_path, fake_env, capsys):
    """A reproduce directory holds the job's offline W&B run and one per experiment; `dedebate
    sync --dry-run` lists each of them once."""
    assert (
        cli.main(
            [
                "reproduce",
                "--quick",
                "--tracking",
                "offline",
                "--no-progress",
                "--output-dir",
                str(tmp_path),
                "--only",
                "fake_pass",
                "fake_fail",
            ]
        )
        == 1
    )
    capsys.readouterr()
    (rep,) = tmp_path.glob("reproduce-*")
    runs = sorted(p for p in rep.rglob("offline-run-*") if p.is_dir())
    assert {p.parents[1] for p in runs} == {rep, rep / "fake_pass", rep / "fake_fail"}
    assert cli.main(["sync", "--dry-run", str(rep)]) == 0
    assert capsys.readouterr().out.split() == [str(p) for p in runs]
