"""W&B for sweeps and runs: one W&B run per point grouped under the sweep, per-seed values kept
apart, the resolved config, artifacts and summaries; offline files for real; failures lose
nothing. A recording stand-in for the ``wandb`` module checks exactly what is sent."""

from __future__ import annotations

import csv
import dataclasses

import pytest

from dedebate.lab.config import resolve
from dedebate.lab.registry import discover_experiments
from dedebate.lab.runner import run_experiment
from dedebate.lab.sweep import run_sweep


@pytest.fixture(scope="module")
def reg():
    return discover_experiments(["tests.fake_experiments.sweepable", "tests.fake_experiments"])


def sweep_config(reg, tmp_path, **tracking):
    return resolve(
        {
            "experiment": "fake_sweep",
            "size": "quick",
            "output_dir": str(tmp_path),
            "tracking": {"mode": "auto", **tracking},
            "sweep": {"seeds": 2, "plots": False, "axes": {"p": [0.2, 0.6], "threshold": [0.5]}},
        },
        reg.experiments,
    )


def test_one_wandb_run_per_point_grouped_per_sweep(reg, tmp_path, fake_wandb):
    rec = run_sweep(reg.experiments["fake_sweep"], sweep_config(reg, tmp_path), show_progress=False)
    runs = fake_wandb.runs
    assert [r.kwargs["job_type"] for r in runs] == ["sweep", "fake_sweep", "fake_sweep"]
    assert {r.kwargs["group"] for r in runs} == {rec.sweep_dir.name}
    assert {r.kwargs["mode"] for r in runs} == {"offline"}  # offline by default
    assert {r.kwargs["dir"] for r in runs} == {str(rec.sweep_dir)}
    assert all(r.exit_code == 0 for r in runs)
    rows = list(csv.DictReader((rec.sweep_dir / "sweep.csv").read_text().splitlines()))

    sweep_run, *points = runs
    # the sweep's run: resolved config, the table, the artifact, a summary
    assert sweep_run.kwargs["config"]["sweep"]["axes"] == {"p": [0.2, 0.6], "threshold": [0.5]}
    assert sweep_run.kwargs["config"]["params"]["n"] == 8  # size quick, resolved
    (table,) = [d["sweep"] for d in sweep_run.logged if "sweep" in d]
    assert len(table.data) == 4 and table.columns[:3] == ["point", "seed", "group"]
    (art,) = sweep_run.artifacts
    assert art.type == "sweep"
    assert set(art.files) == {"sweep.csv", "results.json", "config.yaml"}
    assert sweep_run.summary["points"] == 2 and sweep_run.summary["rows"] == 4
    assert sweep_run.summary["compilations"] == rec.results["compilations"]

    # each point's run: its own resolved params; each seed under its own keys, never merged
    for i, run in enumerate(points):
        assert run.kwargs["config"]["params"]["p"] == [0.2, 0.6][i]
        assert run.kwargs["config"]["point"] == i and "sweep" not in run.kwargs["config"]
        mine = [r for r in rows if r["point"] == str(i)]
        for r in mine:
            assert run.summary[f"seed/{r['seed']}/rate"] == float(r["rate"])
            assert run.summary[f"seed/{r['seed']}/heads"] == int(r["heads"])
        mean = sum(float(r["rate"]) for r in mine) / 2
        assert run.summary["rate/mean"] == pytest.approx(mean)
        assert run.summary["rate/lo"] <= mean <= run.summary["rate/hi"]

    # a resumed sweep continues its own W&B run (it started another of the same name); one
    # stopped before its results.json (a finished one is not run again)
    (sweep_dir,) = tmp_path.glob("fake_sweep-sweep-*")
    (sweep_dir / "results.json").unlink()
    again = sweep_config(reg, tmp_path)
    run_sweep(
        reg.experiments["fake_sweep"], dataclasses.replace(again, resume=True), show_progress=False
    )
    assert fake_wandb.runs[3].kwargs["job_type"] == "sweep"
    assert fake_wandb.runs[3].kwargs["id"] == sweep_run.id
    assert len(fake_wandb.runs) == 4 and not [*sweep_dir.glob("groups/*.untracked")]
    # a sweep killed between a group's file and its points' runs: the resume sends those runs
    # (it sent none: the group was done; the W&B audit)
    (sweep_dir / "groups" / "group-000.untracked").write_text("")
    (sweep_dir / "results.json").unlink()
    run_sweep(
        reg.experiments["fake_sweep"], dataclasses.replace(again, resume=True), show_progress=False
    )
    resent = fake_wandb.runs[4:]  # the sweep's run, then group 0's two points
    assert [r.kwargs["job_type"] for r in resent] == ["sweep", "fake_sweep", "fake_sweep"]
    assert [r.kwargs["name"] for r in resent[1:]] == [r.kwargs["name"] for r in points]
    assert not (sweep_dir / "groups" / "group-000.untracked").exists()


def test_sweep_tracking_modes_and_failures(reg, tmp_path, fake_wandb, monkeypatch, capsys):
    mod = reg.experiments["fake_sweep"]
    run_sweep(mod, sweep_config(reg, tmp_path, group="my-group"), show_progress=False)
    assert {r.kwargs["group"] for r in fake_wandb.runs} == {"my-group"}
    fake_wandb.runs.clear()
    monkeypatch.setenv("WANDB_MODE", "disabled")  # auto follows WANDB_MODE
    rec = run_sweep(mod, sweep_config(reg, tmp_path), show_progress=False)
    assert fake_wandb.runs == [] and rec.results["provenance"]["tracking"]["mode"] == "disabled"
    monkeypatch.delenv("WANDB_MODE")

    def broken(**kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(fake_wandb, "init", broken)
    rec = run_sweep(mod, sweep_config(reg, tmp_path), show_progress=False)
    err = capsys.readouterr().err
    assert "warning: W&B tracking failed" in err and "No space left" in err
    assert len((rec.sweep_dir / "sweep.csv").read_text().splitlines()) == 5  # header + 4
    assert "No space left" in rec.results["provenance"]["tracking"]["failure"]


def test_run_artifact_holds_results_and_plots(reg, tmp_path, fake_wandb):
    cfg = resolve(
        {"experiment": "fake_pass", "size": "quick", "output_dir": str(tmp_path)}, reg.experiments
    )
    rec = run_experiment(reg.experiments["fake_pass"], cfg, show_progress=False)
    (run,) = fake_wandb.runs
    config = dict(run.kwargs["config"])
    prov = config.pop("provenance")  # W&B gets the provenance results.json records
    assert run.kwargs["job_type"] == "fake_pass" and config == cfg.to_dict()
    assert prov == {k: rec.results["provenance"][k] for k in prov}
    (art,) = run.artifacts
    assert set(art.files) == {"results.json", "config.yaml", "chunks.csv", "counts.png"}
    assert (
        run.summary["claims_passed"] == 2
        and run.summary["heads"] == rec.results["metrics"]["heads"]
    )


def test_real_offline_wandb_files(reg, tmp_path):
    rec = run_sweep(
        reg.experiments["fake_sweep"],
        sweep_config(reg, tmp_path, mode="offline"),
        show_progress=False,
    )
    offline = sorted((rec.sweep_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 3  # the sweep and its two points
    assert all(list(d.glob("run-*.wandb")) for d in offline)
    track = rec.results["provenance"]["tracking"]
    assert track["failure"] is None and track["wandb_run_id"] in " ".join(d.name for d in offline)
