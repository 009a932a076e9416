"""metrics.jsonl of a resumed run holds every logged row once (dedebate/lab/context.py).

The chunked driver (dedebate/lab/driver.py) truncates the file at the first step after the
chunks it restored, so the rows between its checkpoint and the crash are logged again once;
rows at steps the file still holds are not written twice. The file ends equal (up to ``wall_s``)
to an uninterrupted run's, row for row and in the same order, and resuming a finished run
changes nothing. The fakes force the re-log by deleting the newest checkpoint after the crash (as
if the attempt had died before that save was finalised).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.lab.config import resolve
from dedebate.lab.experiment import Chunks, Claim, ExperimentResult
from dedebate.lab.registry import discover_experiments
from dedebate.lab.runner import run_experiment


def rows(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def without_wall(rs):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in rs]


def tree(run_dir):
    """Every file under checkpoints/ with its bytes."""
    d = run_dir / "checkpoints"
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def checkpoint_steps(run_dir):
    return sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())


def config(module, tmp_path, out, **top):
    return resolve(
        {
            "experiment": module.NAME,
            "output_dir": str(tmp_path / out),
            "tracking": {"mode": "disabled"},
            **top,
        },
        {module.NAME: module},
    )


def run(module, tmp_path, out, **kwargs):
    return run_experiment(module, config(module, tmp_path, out), show_progress=False, **kwargs)


def resume(module, tmp_path, out, run_dir):
    return run_experiment(
        module, config(module, tmp_path, out, resume=True), run_dir=run_dir, show_progress=False
    )


# -- fake_ckpt: one walk through the driver, a row and a checkpoint after every step -----------


@pytest.fixture
def fake_ckpt():
    return discover_experiments(["tests.fake_experiments.resumable"]).experiments["fake_ckpt"]


def test_relogged_steps_appear_once_with_uninterrupted_values(tmp_path, fake_ckpt, monkeypatch):
    fresh = run(fake_ckpt, tmp_path, "fresh")
    assert fresh.error is None
    want = without_wall(rows(fresh.run_dir))
    assert [r["step"] for r in want] == list(range(6))

    monkeypatch.setenv("FAKE_CRASH_AT", "2")
    crashed = run(fake_ckpt, tmp_path, "cut")
    assert crashed.error == "RuntimeError: crash after step 2"
    monkeypatch.delenv("FAKE_CRASH_AT")
    assert [r["step"] for r in rows(crashed.run_dir)] == [0, 1, 2]
    assert checkpoint_steps(crashed.run_dir) == [2, 3]  # chunks done
    shutil.rmtree(crashed.run_dir / "checkpoints" / "3")  # step 2's save never finished
    # the crashed attempt's row of step 2 is replaced by the resume's (marked to tell them apart)
    logged = rows(crashed.run_dir)
    logged[2]["stale"] = True
    (crashed.run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logged))

    again = resume(fake_ckpt, tmp_path, "cut", crashed.run_dir)
    assert again.error is None and again.results["provenance"]["resumed"] is True
    assert again.result.metrics["resumed_from"] == 2  # so step 2 was logged a second time
    got = rows(crashed.run_dir)
    assert [r["step"] for r in got] == list(range(6))
    assert without_wall(got) == want
    assert again.result.metrics["total"] == fresh.result.metrics["total"]

    # a run killed after its last checkpoint, before its results.json: the resume restores
    # every chunk and logs or saves nothing again
    before = (crashed.run_dir / "metrics.jsonl").read_bytes(), tree(crashed.run_dir)
    (crashed.run_dir / "results.json").unlink()
    done = resume(fake_ckpt, tmp_path, "cut", crashed.run_dir)
    assert done.error is None and done.result.metrics["resumed_from"] == 6 and not done.reused
    assert ((crashed.run_dir / "metrics.jsonl").read_bytes(), tree(crashed.run_dir)) == before
    # resuming the finished run: its stored record, nothing run
    results = (crashed.run_dir / "results.json").read_bytes()
    stored = resume(fake_ckpt, tmp_path, "cut", crashed.run_dir)
    assert stored.reused and stored.results == done.results
    assert (crashed.run_dir / "results.json").read_bytes() == results
    assert ((crashed.run_dir / "metrics.jsonl").read_bytes(), tree(crashed.run_dir)) == before


def test_torn_last_line_is_dropped_with_a_warning(tmp_path, fake_ckpt, monkeypatch, capsys):
    fresh = run(fake_ckpt, tmp_path, "fresh")
    monkeypatch.setenv("FAKE_CRASH_AT", "3")
    crashed = run(fake_ckpt, tmp_path, "cut")
    monkeypatch.delenv("FAKE_CRASH_AT")
    with open(crashed.run_dir / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 4, "wall_s": 0.1, "tot')  # killed in the middle of a write
    capsys.readouterr()
    again = resume(fake_ckpt, tmp_path, "cut", crashed.run_dir)
    assert again.error is None and again.result.metrics["resumed_from"] == 4
    assert "dropped 1 unreadable line" in capsys.readouterr().err
    assert without_wall(rows(crashed.run_dir)) == without_wall(rows(fresh.run_dir))


def test_a_fresh_run_in_an_old_directory_starts_a_new_file(tmp_path, fake_ckpt):
    first = run(fake_ckpt, tmp_path, "a")
    again = run(fake_ckpt, tmp_path, "a", run_dir=first.run_dir)  # resume=false: from scratch
    assert again.error is None and again.result.metrics["resumed_from"] == 0
    assert [r["step"] for r in rows(first.run_dir)] == list(range(6))


# -- two parts in one driver (like stackelberg's stable/unstable parts), three rows per step
# -- (a part row and two with the same metric names, like stochastic_selfplay's instances) -----


@dataclasses.dataclass(frozen=True)
class PartsConfig:
    steps: int = dataclasses.field(default=4, metadata={"doc": "steps per part, >= 1"})


class Crash(RuntimeError):
    pass


def _parts_chunks(cfg: PartsConfig, key) -> Chunks:
    """Parts "a" then "b", ``steps`` chunks each, a checkpoint after every chunk; chunk ``g`` logs
    one row of part-named metrics and two rows ``{"instance", "value"}`` at step ``g``."""

    def chunk(state, g):
        if g == PARTS.crash_at + 1:
            raise Crash(f"crash after global step {g - 1}")
        key, sub = jax.random.split(state["key"])
        return {"x": state["x"] + jax.random.normal(sub), "key": key}, None

    def log_rows(g, state, _):
        part, x = "ab"[g // cfg.steps], state["x"]
        return [
            (g, {f"{part}/x": x, f"{part}/g": g}),
            *(
                (g, {"instance": f"{part}{inst}", "value": x + (inst == "q")})
                for inst in ("p", "q")
            ),
        ]

    return Chunks(
        init_state={"x": jnp.float32(0.0), "key": key},
        chunk=chunk,
        n_chunks=2 * cfg.steps,
        log_rows=log_rows,
        desc="parts",
    )


def _parts_report(cfg: PartsConfig, measured, host) -> ExperimentResult:
    done = measured["trained"]
    ran = Claim.exact(
        "ran",
        "fake",
        "== 2 parts",
        done.ran + done.restored,
        done.ran + done.restored == 2 * cfg.steps,
    )
    return ExperimentResult(
        claims=[ran], metrics={"x": float(done.state["x"]), "resumed_from": done.restored}
    )


PARTS = types.SimpleNamespace(
    NAME="fake_parts",
    TITLE="Fake: two parts reusing steps",
    Config=PartsConfig,
    SIZES={"quick": {}, "full": {}},
    chunks=_parts_chunks,
    report=_parts_report,
    crash_at=-2,
)


@pytest.mark.parametrize("crash_at", [2, 6], ids=["in-part-a", "in-part-b"])
def test_parts_in_one_driver_keep_every_row(tmp_path, monkeypatch, crash_at):
    fresh = run(PARTS, tmp_path, "fresh")
    want = without_wall(rows(fresh.run_dir))
    assert len(want) == 2 * 4 * 3 and [r["step"] for r in want[:3]] == [0, 0, 0]

    monkeypatch.setattr(PARTS, "crash_at", crash_at)
    crashed = run(PARTS, tmp_path, "cut")
    assert crashed.error == f"Crash: crash after global step {crash_at}"
    monkeypatch.setattr(PARTS, "crash_at", -2)
    assert len(rows(crashed.run_dir)) == 3 * (crash_at + 1)
    shutil.rmtree(crashed.run_dir / "checkpoints" / str(crash_at + 1))

    again = resume(PARTS, tmp_path, "cut", crashed.run_dir)
    assert again.error is None and again.result.metrics["resumed_from"] == crash_at
    assert without_wall(rows(crashed.run_dir)) == want
    assert again.result.metrics["x"] == fresh.result.metrics["x"]


# -- a resume under another config (an older preset, another version): the earlier attempt's
# -- files are set aside (runner.set_aside_stale), never mixed with the new rows ------------------


def stale_dirs(run_dir):
    return sorted(p for p in run_dir.iterdir() if p.name.startswith("stale-"))


def test_a_resume_under_another_config_sets_the_old_rows_aside(tmp_path, capsys):
    from tests.fake_experiments import fake_pass

    old = run_experiment(
        fake_pass,
        config(fake_pass, tmp_path, "old", params={"n": 32}),
        show_progress=False,
    )
    run_dir = old.run_dir
    assert [r["chunks/n"] for r in rows(run_dir)] == [32, 32, 32]
    old_rows = (run_dir / "metrics.jsonl").read_bytes()
    res = json.loads((run_dir / "results.json").read_text())
    (run_dir / "results.json").write_text(json.dumps({**res, "status": "running"}))  # it died
    capsys.readouterr()

    again = resume(fake_pass, tmp_path, "old", run_dir)  # the default n = 64 now
    assert again.error is None and not again.reused
    assert [r["chunks/n"] for r in rows(run_dir)] == [64, 64, 64]  # no row of the old config
    assert again.results["provenance"]["resumed"] is False  # a fresh start
    (stale,) = stale_dirs(run_dir)
    assert (stale / "metrics.jsonl").read_bytes() == old_rows  # moved, nothing lost
    assert "n: 32" in (stale / "config.yaml").read_text()
    assert json.loads((stale / "results.json").read_text())["status"] == "running"
    assert (stale / "checkpoints").is_dir() and (stale / "tables" / "chunks.csv").is_file()
    assert "n: 64" in (run_dir / "config.yaml").read_text()
    err = capsys.readouterr().err.splitlines()
    (line,) = [x for x in err if "another config" in x]
    assert f"moved to {stale.name}/ and the run starts fresh" in line

    # the same config again: resumed as before (the finished run is a no-op), nothing set aside
    assert resume(fake_pass, tmp_path, "old", run_dir).reused
    assert stale_dirs(run_dir) == [stale]


def test_a_chunked_resume_under_another_config_starts_fresh(tmp_path, fake_ckpt, monkeypatch):
    monkeypatch.setenv("FAKE_CRASH_AT", "2")
    crashed = run(fake_ckpt, tmp_path, "cut")  # steps = 6
    monkeypatch.delenv("FAKE_CRASH_AT")
    assert checkpoint_steps(crashed.run_dir) == [2, 3]
    old_rows = (crashed.run_dir / "metrics.jsonl").read_bytes()

    again = run_experiment(
        fake_ckpt,
        config(fake_ckpt, tmp_path, "cut", resume=True, params={"steps": 5}),
        run_dir=crashed.run_dir,
        show_progress=False,
    )  # was: CheckpointMismatch, on every resume until the folder was deleted
    assert again.error is None and again.result.metrics["resumed_from"] == 0
    fresh = run_experiment(
        fake_ckpt,
        config(fake_ckpt, tmp_path, "fresh", params={"steps": 5}),
        show_progress=False,
    )
    assert without_wall(rows(crashed.run_dir)) == without_wall(rows(fresh.run_dir))
    assert again.result.metrics["total"] == fresh.result.metrics["total"]
    (stale,) = stale_dirs(crashed.run_dir)
    assert (stale / "metrics.jsonl").read_bytes() == old_rows
    assert sorted(p.name for p in (stale / "checkpoints").iterdir() if p.name.isdigit()) == [
        "2",
        "3",
    ]
    assert checkpoint_steps(crashed.run_dir) == checkpoint_steps(fresh.run_dir)  # this config's


def test_monitors_of_each_chunk_land_at_their_place_along_the_time_axis(tmp_path):
    """Monitors on axis 1 of a (3, 6) buffer, 2 steps a chunk: the buffer is the chunks joined in
    order along that axis (not the first axis), restored as they were after a resume."""
    from dedebate.lab.driver import run_chunks
    from tests.fakes import FakeContext

    def chunk(state, c):
        m = 10 * c + jnp.arange(6, dtype=jnp.float32).reshape(3, 2)
        return state + 1, {"m": m}

    def go(resume):
        ctx = FakeContext(tmp_path / "run", resume=resume)
        template = {"m": np.full((3, 6), np.nan, np.float32)}
        return run_chunks(ctx, "axis", jnp.int32(0), chunk, 3, monitors=template, axis=1)

    want = np.concatenate([np.asarray(chunk(0, c)[1]["m"]) for c in range(3)], axis=1)
    first = go(False)
    np.testing.assert_array_equal(first.monitors["m"], want)
    again = go(True)
    assert (again.restored, again.ran) == (3, 0)
    np.testing.assert_array_equal(again.monitors["m"], want)


def test_the_last_chunk_is_checkpointed_when_every_does_not_divide_the_chunks(tmp_path):
    """``every = 5`` over 7 chunks saves after chunk 5 and after the last (7): a resume restores
    all 7 and runs none, with the state of the run (a last chunk left unsaved was run again)."""
    from dedebate.lab.driver import run_chunks
    from tests.fakes import FakeContext

    def chunk(state, c):
        return state + jnp.float32(c + 1), None

    def go(resume):
        ctx = FakeContext(tmp_path / "run", resume=resume)
        return ctx, run_chunks(ctx, "seven", jnp.float32(0.0), chunk, 7, every=5)

    ctx, first = go(False)
    assert (first.restored, first.ran, float(first.state)) == (0, 7, 28.0)
    with ctx.checkpointer(every=5) as ckpt:
        assert ckpt.latest_step() == 7
    _, again = go(True)
    assert (again.restored, again.ran, float(again.state)) == (7, 0, 28.0)
