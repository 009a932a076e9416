"""The ogd_estimator quick run through the CLI, and checkpoint and resume of its network training.

The experiment trains the Flax estimators in chunks of ``net_checkpoint_every`` rounds and saves
the whole training state (parameters, optimiser states, round, key, and the advantage log so far)
with Orbax after each chunk. A run interrupted after some chunks and resumed must end with the
very same numbers (bit-equal arrays) as an uninterrupted run; the chunked training must agree
with the one-shot training program; and ``dedebate run configs/ogd_estimator.yaml size=quick``
must pass every claim, write the report's tables within their bounds, Orbax checkpoints and offline
W&B files, and ``resume=true`` must continue that run.

As a sweep (``point`` / ``DYNAMIC``): Algorithm 1 over deltas x seeds at the quick size is one
compiled program; the report's Algorithm 1 rows for the same point run alone
(``point_row`` and ``algorithm1_table``, what a run does with them) at the row's documented key
(``point_key``) go through that same program (no second compile) and hold exactly the row's
numbers. The sweep test runs before the CLI's quick run, whose Algorithm 1 rows are a point of
that sweep: the run reuses its program.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import experiments.ogd_estimator as exp
from dedebate.estimators.ogd import iteration_bound
from dedebate.estimators.train import NetTrainStatic, make_train_grid, net_train_params
from dedebate.lab.config import resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.evaluate import drive_chunks
from dedebate.lab.sweep import plan, point_key, point_row, run_sweep
from experiments.ogd_estimator.algorithm1 import PER_RUN, RECOMPUTE_TOL
from tests.conftest import REPO, assert_shipped_sweeps_plot
from tests.fakes import FakeContext, count_point_traces, truncate_checkpoint

# 45 rounds in chunks of 10: five chunks, the last one partly past the end (no-op rounds).
CFG = dataclasses.replace(
    exp.Config(**exp.SIZES["quick"]),
    net_rounds=45,
    net_checkpoint_every=10,
    net_lrs=(1.0, 3.0),
    net_delta=0.03,
)
# ... with a trained MLP distinguisher, whose parameters and Adam state are checkpointed too
CFG_MLP = dataclasses.replace(CFG, net_best_response="family+mlp")


class Interrupted(Exception):
    """Stands in for a crash between two chunks."""


class StopAfterChunks(FakeContext):
    """A context whose training progress bar raises after ``chunks`` chunks."""

    def __init__(self, root, chunks: int, **kwargs):
        super().__init__(root, name=exp.NAME, **kwargs)
        self.chunks = chunks

    @contextlib.contextmanager
    def progress(self, total, desc):
        with super().progress(total, desc) as bar:
            if "Flax estimator" in desc:
                update = bar.update

                def stop(n=1):
                    update(n)
                    if bar.n >= self.chunks:
                        raise Interrupted

                bar.update = stop
            yield bar


def train_network(cfg, ctx):
    """The run's network training (the lab's chunked driver on ``chunks``), read by ``net_run``."""
    out = drive_chunks(exp, cfg, ctx)
    return exp.net_run(cfg, out["trained"])


def _leaves(state):
    """Every array of a training state as numpy (typed PRNG keys as their key data)."""
    out = []
    for leaf in jax.tree_util.tree_leaves(state):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out.append(np.asarray(leaf))
    return out


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _steps(root):
    return sorted(int(p.name) for p in (root / "checkpoints").iterdir() if p.name.isdigit())


@pytest.mark.parametrize(
    "cfg", [CFG, pytest.param(CFG_MLP, marks=pytest.mark.slow)], ids=["family", "family+mlp"]
)
def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, cfg):
    full = train_network(cfg, FakeContext(tmp_path / "full", name=exp.NAME))
    assert full.chunks_run == 5 and full.resumed_from == 0
    assert _steps(tmp_path / "full") == [4, 5]  # chunks done; keep=2

    with pytest.raises(Interrupted):
        train_network(cfg, StopAfterChunks(tmp_path / "cut", chunks=2))
    assert _steps(tmp_path / "cut") == [1, 2]

    ctx = FakeContext(tmp_path / "cut", name=exp.NAME, resume=True)
    resumed = train_network(cfg, ctx)
    assert resumed.resumed_from == 20 and resumed.chunks_run == 3
    assert ctx.bars[-1].n == 5  # the bar starts at the restored chunk
    assert _steps(tmp_path / "cut") == [4, 5]

    # bit for bit: parameters, optimiser states, key, counters, and every round's log
    a, b = _leaves(full.state), _leaves(resumed.state)
    assert len(a) == len(b) and len(a) >= (14 if cfg is CFG_MLP else 8)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
    for name in ("max_adv", "dist_adv", "chosen", "final_max_adv"):
        np.testing.assert_array_equal(getattr(full, name), getattr(resumed, name))
    assert full.max_adv.shape == (2, cfg.seeds, 45)
    # the run is not trivial: it trained, and the log moved
    assert np.all(np.asarray(full.state.updates) >= 1)
    assert np.all(np.asarray(full.state.round) == 45)
    assert not np.all(full.max_adv[..., :20] == full.max_adv[..., :1])
    if cfg is CFG_MLP:  # the distinguisher was trained (its |Adv| is logged every round)
        assert full.state.dist_params is not None and np.all(full.dist_adv > 0)
    else:
        assert full.state.dist_params is None and np.all(full.dist_adv == 0)
        _chunked_training_matches_the_one_shot_program(tmp_path, cfg, full)
        _corrupt_finished_run_recovers_then_resume_is_a_no_op(tmp_path / "full", cfg, full)


def _chunked_training_matches_the_one_shot_program(tmp_path, cfg, run):
    """The chunked run ``run`` of ``cfg`` agrees with the one-shot training program."""
    problems, families = exp.make_problems(
        cfg,
        jax.random.fold_in(FakeContext(tmp_path, name=exp.NAME).key, exp.NET_PROBLEM_KEY),
        2**cfg.net_q,
        cfg.test_scale,
    )
    feats = families.features
    static = NetTrainStatic(
        rounds=cfg.net_rounds, hidden=tuple(cfg.net_hidden), optimizer=cfg.net_optimizer
    )
    hp = net_train_params([cfg.net_delta] * len(cfg.net_lrs), list(cfg.net_lrs))
    keys = jax.random.split(
        jax.random.fold_in(FakeContext(tmp_path, name=exp.NAME).key, 200), cfg.seeds
    )
    state, log, final = make_train_grid(static, batched_data=True)(
        hp, keys, families, problems, feats
    )
    np.testing.assert_array_equal(np.asarray(state.updates), np.asarray(run.state.updates))
    np.testing.assert_array_equal(
        np.asarray(state.rounds_to_delta), np.asarray(run.state.rounds_to_delta)
    )
    np.testing.assert_array_equal(np.asarray(log.chosen), run.chosen)
    np.testing.assert_allclose(np.asarray(log.max_adv), run.max_adv, rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(final), run.final_max_adv, rtol=0, atol=1e-5)


def _tree(root):
    ck = root / "checkpoints"
    return {str(p.relative_to(ck)): p.read_bytes() for p in sorted(ck.rglob("*")) if p.is_file()}


def _assert_same_run(a, b):
    for x, y in zip(_leaves(a.state), _leaves(b.state), strict=True):
        np.testing.assert_array_equal(x, y)
    for name in ("max_adv", "dist_adv", "chosen", "final_max_adv"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def _corrupt_finished_run_recovers_then_resume_is_a_no_op(root, cfg, full):
    """A finished run whose newest checkpoint is truncated: the resume falls back a chunk,
    moves the bad step aside and saves that step again (no StepAlreadyExistsError), with the
    same numbers; a second resume runs nothing and changes nothing on disk."""
    step_dir = root / "checkpoints" / "5"
    truncate_checkpoint(step_dir / "state")
    again = train_network(cfg, FakeContext(root, name=exp.NAME, resume=True))
    assert again.resumed_from == 40 and again.chunks_run == 1
    _assert_same_run(full, again)
    assert _steps(root) == [4, 5] and (root / "checkpoints" / "corrupt-5").is_dir()
    before = _tree(root)
    ctx = FakeContext(root, name=exp.NAME, resume=True)
    third = train_network(cfg, ctx)
    assert third.resumed_from == 45 and third.chunks_run == 0 and ctx.logged == []
    _assert_same_run(full, third)
    assert _tree(root) == before


QUICK = exp.Config(**exp.SIZES["quick"])


@pytest.mark.slow  # before the CLI test: its quick run's Algorithm 1 is a point of this sweep
def test_delta_sweep_compiles_once_and_a_row_is_the_report_alone(tmp_path, monkeypatch):
    traces = count_point_traces(monkeypatch, exp)  # traces of the sweep's fn (once per compile)
    raw = {
        "experiment": exp.NAME,
        "seed": 2,
        "size": "quick",
        "output_dir": str(tmp_path / "out"),
        "tracking": {"mode": "disabled"},
        "sweep": {
            "seeds": 2,
            "axes": {"deltas": [[0.2, 0.1], [0.1, 0.05]]},
            "plots": False,
            "batch": 1,
        },
    }
    cfg = resolve(raw, {exp.NAME: exp})
    clear_program_cache()
    rec = run_sweep(exp, cfg, show_progress=False)
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["deltas"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces[0] and res["rows"] == 4 == len(rec.rows)

    # the point deltas = (0.1, 0.05) (the quick size's), seed 2, alone through the report's code
    # (run's part 1): the one-point case of the sweep, so it reuses the sweep's program
    pt = next(p for p in plan(exp, cfg).points if p.values["deltas"] == (0.1, 0.05))
    assert pt.cfg == QUICK
    ctx = FakeContext(tmp_path / "alone", seed=2, name=exp.NAME)
    ctx.key = point_key(exp.NAME, 2, pt.cfg)
    metrics, extras = point_row(exp, pt.cfg, ctx.key, ctx.seed, extras=True)
    report, traces_by_run = exp.algorithm1_table(pt.cfg, metrics, extras, ctx.key)
    assert traces[0] == 1
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == 2)
    assert_shipped_sweeps_plot("ogd_estimator", row)
    other = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] != 2)
    assert len(report) == 2 * 2 * 2  # problems x step rules x deltas (one q)
    for r in report:
        d = QUICK.deltas.index(r["delta"])
        pre = f"Z{r['n_z']}/{r['step_rule']}/d{d}/s{r['seed']}"
        for m in PER_RUN:
            assert row[f"{pre}/{m}"] == r[m], (pre, m)  # bit for bit (Python floats of float32)
        assert r["steps"] <= r["bound"] and r["max_adv"] < r["delta"]
        # the float64 recomputation of the exit h (from the program's extras) agrees
        assert r["max_adv_numpy"] == pytest.approx(r["max_adv"], abs=RECOMPUTE_TOL)
        assert r["fresh_tests"] == 4 * QUICK.n_tests
    # the other seed's problems are other problems
    assert (
        sum(
            other[f"{p}/max_adv"] != row[f"{p}/max_adv"]
            for p in (
                f"Z4/{rule}/d{d}/s{s}"
                for rule in ("hazan", "tight")
                for d in (0, 1)
                for s in (0, 1)
            )
        )
        >= 6
    )
    for rule in ("hazan", "tight"):  # problem 0's advantage traces, for the report's figure
        for delta in QUICK.deltas:
            tr = traces_by_run[(rule, 2, delta)]
            assert tr.shape == (QUICK.trace_len,) and np.isfinite(tr[0])
    assert row["d0/delta"] == pytest.approx(0.1) and row["d1/delta"] == pytest.approx(0.05)
    for rule in ("hazan", "tight"):  # the aggregates over the problems, from the same runs
        steps = [
            r["steps"]
            for r in report
            if r["step_rule"] == rule and r["n_z"] == 4 and r["delta"] == 0.1
        ]
        assert row[f"Z4/{rule}/d0/steps_max"] == max(steps)
        assert row[f"Z4/{rule}/d0/steps_over_bound_max"] <= 1.0

    # the sweep's figure: measured T and the proven bound per |Z|, one panel per step rule
    fig = exp.sweep_figures(rec.rows)["algorithm1_steps_vs_bound"]
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 2]
    bound = fig.axes[0].get_lines()[1].get_ydata()  # hazan, |Z| = 4, at 1/delta^2 = 25, 100, 400
    assert list(bound) == pytest.approx([36 * 4 * 25, 36 * 4 * 100, 36 * 4 * 400])


@pytest.mark.slow
def test_cli_quick_run_passes_writes_checkpoints_and_wandb_then_resumes(
    tmp_path, monkeypatch, capsys
):
    """``dedebate run configs/ogd_estimator.yaml size=quick``: every claim passes, Orbax
    checkpoints and offline W&B files are written; then ``resume=true`` continues that run from
    its latest checkpoint to the same numbers."""
    from dedebate import cli
    from dedebate.lab.schema import validation_errors

    monkeypatch.delenv("DEDEBATE_EXPERIMENTS", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_dir"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    args = [
        "run",
        "--no-progress",
        str(REPO / "configs" / "ogd_estimator.yaml"),
        "size=quick",
        f"output_dir={tmp_path / 'runs'}",
    ]
    assert cli.main(args) == 0, capsys.readouterr().err
    (run_dir,) = (tmp_path / "runs").glob("ogd_estimator-*")
    first = json.loads((run_dir / "results.json").read_text())
    failed = [
        (c["claim"], c["value"], c["note"])
        for c in first["claims"]
        if not c["passed"] and not c["finding"]
    ]
    assert not failed and first["passed"] is True, failed
    assert validation_errors(first, "results") == []  # a real run's record fits its schema
    quick = exp.Config(**exp.SIZES["quick"])
    for plot in first["plots"]:
        assert (run_dir / plot).stat().st_size > 0
    # every part reported: its claims, the sweep's rows within their bounds, the soundness
    # table's stages with rewards within theirs; findings (fresh tests) need not pass
    fresh = [c for c in first["claims"] if "fresh tests" in c["claim"]]
    assert len(fresh) == len(quick.step_rules) and all(c["finding"] for c in fresh)
    names = " ".join(c["claim"] for c in first["claims"])
    for part in (
        "T <= 36 |Z|",
        "T <= 4.5 |Z|",
        "regret",
        "Flax estimator",
        "U_A <= rho^-(d+1)",
        "per-round mean reward",
    ):
        assert part in names
    rows = _csv(run_dir / "tables" / "algorithm1.csv")
    assert len(rows) == (
        len(quick.q_values) * len(quick.deltas) * quick.seeds * len(quick.step_rules)
    )
    assert all(
        int(r["steps"]) <= float(r["bound"])
        and float(r["max_adv"]) < float(r["delta"])
        and r["converged"] == "True"
        for r in rows
    )
    # each run against its own rule's bound; all its fresh tests below delta iff the largest is
    for r in rows:
        want = iteration_bound(r["step_rule"], int(r["n_z"]), float(r["delta"]))
        assert float(r["bound"]) == pytest.approx(want, rel=1e-12), r
        below = float(r["fresh_max_adv"]) < float(r["delta"])
        assert below == (float(r["fresh_share_below_delta"]) == 1.0), r
    stages = _csv(run_dir / "tables" / "soundness.csv")
    assert {s["stage"] for s in stages} == {"init", "k=1", "final"}
    assert all(float(s["reward"]) <= float(s["bound"]) for s in stages)
    # every row at an explicit step, in order: training (step = rounds done), then each table row
    logged = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    n_table_rows = len(rows) + len(_csv(run_dir / "tables" / "network.csv")) + len(stages)
    assert logged == sorted(set(logged)) and len(logged) == (
        quick.net_rounds // quick.net_checkpoint_every + n_table_rows
    )
    assert first["provenance"]["resumed"] is False
    assert first["provenance"]["tracking"]["mode"] == "offline"

    every = quick.net_checkpoint_every
    n_chunks = quick.net_rounds // every
    assert _steps(run_dir) == [n_chunks - 1, n_chunks]  # chunks done
    assert list((run_dir / "checkpoints" / str(n_chunks)).rglob("*"))  # Orbax files
    offline = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("run-*.wandb"))
    assert first["metrics"]["network_timing"]["net_chunks_run"] == n_chunks

    # as if the run had died before its last chunk: drop the newest checkpoint; resume=true
    # finds this run (same config hash), restores the previous one and trains the last chunk
    # (and its results.json: a finished run's resume does nothing)
    shutil.rmtree(run_dir / "checkpoints" / str(n_chunks))
    (run_dir / "results.json").unlink()
    assert cli.main([*args, "resume=true"]) == 0, capsys.readouterr().err
    assert list((tmp_path / "runs").glob("ogd_estimator-*")) == [run_dir]
    again = json.loads((run_dir / "results.json").read_text())
    assert again["provenance"]["resumed"] is True
    timing = again["metrics"]["network_timing"]
    assert timing["net_resumed_from_round"] == quick.net_rounds - every
    assert timing["net_chunks_run"] == 1
    assert again["tables"]["network"] == first["tables"]["network"]
    assert [c["value"] for c in again["claims"]] == [c["value"] for c in first["claims"]]
    # metrics.jsonl: every row once, at increasing explicit steps (the resumed attempt's driver
    # cut the file at its restored chunk; the rows before it were not written twice)
    steps = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and len(steps) == n_chunks + n_table_rows
