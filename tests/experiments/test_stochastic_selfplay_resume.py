"""Resume of the stochastic self-play experiment (experiments/stochastic_selfplay/).

A tiny run (T = 3, 2 seeds, 2 training rows -- the main pairs and n_B = 1, both instances per
chunk -- of 4 chunks each, a checkpoint every 2 chunks) is interrupted after its third chunk --
one chunk past the last checkpoint, so the resumed attempt both restores chunks and recomputes
one it had already logged -- then resumed from the Orbax checkpoints in the same directory
(through the lab's chunked driver, via ``train_point``). The final training state (both players, Adam states, update
counters, keys, monitors) is bit-equal to the uninterrupted run's, every claim, table and metric
(wall times aside) is equal, and the rows the resumed attempt logs equal the uninterrupted run's.
A finished run whose newest checkpoint is deleted or corrupted resumes to the same state and
numbers, and a second resume trains, logs and saves nothing. One uninterrupted run is shared by
the tests.

As a sweep (``point`` / ``DYNAMIC``, a chunked point): the learning-rate grid x seeds compiles
each of its programs (init, chunk, finish) once, and the same point run alone with ``run`` at the
row's documented key (``point_key``) trains through those same programs (chunked, checkpointed),
compiling nothing more: its ``metrics["point"]`` (float64, measured on the host) is the sweep
row, bit for bit. The sweep's params are the resumed run's Config (equal static
fields), and the sweep test runs first: the uninterrupted run trains through its programs.
"""  # noqa: E501

from __future__ import annotations

import shutil

import jax
import numpy as np
import pytest

import experiments.stochastic_selfplay as E
from dedebate.lab import driver
from dedebate.lab.checkpoint import Checkpointer
from dedebate.lab.driver import checkpoint_template
from dedebate.lab.evaluate import run_module
from dedebate.lab.sweep import plan, point_key
from tests.conftest import assert_shipped_sweeps_plot
from tests.fakes import (
    Crash,
    CrashingContext,
    FakeContext,
    count_chunked_traces,
    sweep_one_row_per_call,
    training_bar,
    truncate_checkpoint,
)

# the sweep's params and the resumed run's Config (equal static fields: one set of programs)
TINY = {
    "T": 3,
    "seeds": 2,
    "steps": 40,
    "log_every": 10,
    "chunks": 4,
    "checkpoint_every": 2,
    "hidden": 4,
    "n_b": 2,
    "mc_trials": 50,
    "ablate_tail": False,
    "n_b_sweep": [1],
}
CFG = E.Config(**{**TINY, "n_b_sweep": (1,)})
N_CHUNKS = 2 * CFG.chunks  # rows (n_b = 2: the main pairs, n_b = 1), both instances per chunk
TEMPLATE = []  # the driver's (initial state, monitors) of the reference run


def _final_state(root):
    """The last checkpoint of a run directory, restored against the driver's template."""
    with Checkpointer(root / "checkpoints", "fake") as ckpt:
        return ckpt.restore(checkpoint_template(*TEMPLATE[0]))


def _leaves(state):
    return [
        np.asarray(jax.random.key_data(x))
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
        else np.asarray(x)
        for x in jax.tree.leaves(state)
    ]


def _numbers(result):
    metrics = {k: v for k, v in result.metrics.items() if k != "wall_s"}
    return (
        [(c.claim, c.value, c.lo, c.hi, c.passed, c.note) for c in result.claims],
        result.tables,
        metrics,
    )


@pytest.mark.slow  # first in the module: it compiles the programs every run below shares
def test_rate_sweep_compiles_once_and_a_row_is_the_report_alone(tmp_path, monkeypatch):
    traces = count_chunked_traces(monkeypatch, E)  # traces of point's programs (per compile)
    cfg, rec = sweep_one_row_per_call(
        E, tmp_path, params=TINY, seed=1, seeds=2, axes={"lr_a": [0.01, 0.05], "n_b": [2, 3]}
    )
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["lr_a", "n_b"] and res["groups"] == 1
    # init, the one chunk length (4 chunks of 1 period) and finish: each compiled once
    assert res["compilations"] == 3 and res["rows"] == 8 == len(rec.rows)
    assert traces == {"init": 1, ("chunk", 1): 1, "finish": 1}

    # the point lr_a = 0.05, n_b = 3, seed 1 alone through run (chunked training, report code)
    pt = next(p for p in plan(E, cfg).points if p.values == {"lr_a": 0.05, "n_b": 3})
    ctx = FakeContext(tmp_path / "alone", seed=1, name=E.NAME)
    ctx.key = point_key(E.NAME, 1, pt.cfg)
    report = run_module(E, pt.cfg, ctx)
    # the run trained through the sweep's programs: nothing traced (nor compiled) again
    assert traces == {"init": 1, ("chunk", 1): 1, "finish": 1}
    alone = report.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == 1)
    assert_shipped_sweeps_plot("stochastic_selfplay", row)
    assert set(alone) <= set(row)
    # bit for bit: the row is the run's float64 measurement of the same players
    assert {k: row[k] for k in alone} == alone
    # the report's rows read the same numbers
    # the gating rows: every player (either instance) and, in their notes, the row's main ones
    assert report.claims[0].value <= alone["honest_alice_vs_bob_min"]
    assert report.claims[1].value >= alone["alice_vs_honest_bob_max"]
    for claim, case, key in ((0, "yes", "honest_alice_vs_bob"), (1, "no", "value_vs_honest_bob")):
        main = [round(alone[f"{case}/s{s}/{key}"], 4) for s in range(2)]
        assert f"per seed {main}" in report.claims[claim].note
    assert [t["value"] for t in report.tables["seeds"]] == [
        alone[f"{c}/s{s}/value"] for c in ("yes", "no") for s in range(2)
    ]
    # the rows differ in the swept rates (a sweep that ignored them would repeat one row)
    assert len({r["yes/s0/value"] for r in rec.rows}) == 8
    assert all(
        0.0 <= r["no/value_min"] <= r["no/value_mean"] <= r["no/value_max"] <= 1.0 for r in rec.rows
    )

    # the sweep's figure: acceptance and gap vs lr_a (two instances x one line per lr_b)
    fig = E.sweep_figures(rec.rows)["selfplay_rates"]
    assert [len(ax.get_lines()) for ax in fig.axes] == [4, 2]


def test_the_finish_program_calls_no_host_code():
    """finish returns the trained players and the exact measurement runs on the host after it
    (``measure``): no callback in the device program, where JAX called from the callback can hang
    an accelerator."""
    import dataclasses

    cfg = dataclasses.replace(E.Config(), **{**E.SIZES["quick"], **TINY})
    dynamic, fn = E.point(cfg)
    state = fn.init(dynamic, jax.random.key(0))
    jaxpr = str(jax.make_jaxpr(lambda d, c: fn.finish(d, c, None))(dynamic, state))
    assert "callback" not in jaxpr and fn.measure is not None


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run: its directory, context and result."""
    root = tmp_path_factory.mktemp("ref")
    ctx = FakeContext(root, seed=0, name=E.NAME)
    real = driver.run_chunks

    def recording(ctx, desc, init_state, chunk_fn, n_chunks, **kw):
        TEMPLATE[:] = [(init_state, kw["monitors"])]
        return real(ctx, desc, init_state, chunk_fn, n_chunks, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "run_chunks", recording)
        return root, ctx, run_module(E, CFG, ctx)


@pytest.mark.slow
def test_resumed_run_equals_uninterrupted(tmp_path, reference):
    ref_root, ref_ctx, ref = reference

    root = tmp_path / "crashed"
    with pytest.raises(Crash):
        run_module(E, CFG, CrashingContext(root, seed=0, name=E.NAME, after=3))
    resumed_ctx = FakeContext(root, seed=0, name=E.NAME, resume=True)
    resumed = run_module(E, CFG, resumed_ctx)
    bar = training_bar(resumed_ctx)
    assert bar.n == bar.total == N_CHUNKS  # 2 chunks restored, 6 trained

    # the final training state, bit for bit (the last chunk is always checkpointed)
    step_ref, state_ref = _final_state(ref_root)
    step_res, state_res = _final_state(root)
    assert step_ref == step_res == N_CHUNKS  # chunks done
    assert jax.tree.structure(state_ref) == jax.tree.structure(state_res)
    for x, y in zip(_leaves(state_ref), _leaves(state_res)):
        np.testing.assert_array_equal(x, y)
    carry = state_ref["state"]["main"]
    assert carry.step.tolist() == [CFG.steps]  # shared update counter of the (one-row) run
    assert float(np.abs(np.asarray(carry.bob.w)).max()) > 0  # a trained, non-trivial state

    # every reported number
    assert _numbers(resumed) == _numbers(ref)

    # logged rows: the uninterrupted run logs each monitor period of the main pairs once per
    # instance, at step = Alice updates; the resumed attempt logs the main chunks it trained
    # (the third, trained and logged before the crash but not checkpointed, so recomputed, and
    # the fourth), each with the uninterrupted run's values; the driver cut the file after the
    # restored chunks' rows
    ref_rows = {(m["instance"], s): m for s, m in ref_ctx.logged if "instance" in m}
    assert len(ref_rows) == 2 * CFG.steps // CFG.log_every  # then the tables' rows
    assert [s for s, _ in ref_ctx.logged] == sorted(s for s, _ in ref_ctx.logged)
    again = {(m["instance"], s): m for s, m in resumed_ctx.logged if "instance" in m}
    assert sorted(again) == [(c, s) for c in ("no", "yes") for s in (30, 40)]
    assert resumed_ctx.truncated == [21]  # after the restored chunks' rows (steps 10, 20)
    assert all(again[k] == ref_rows[k] for k in again)


@pytest.mark.slow
def test_the_report_states_leans_bounds_and_pools_the_monte_carlo_debates(reference):
    """The instance bounds are Lean's (spec DED 5.3) at each instance's P_M(1), the soundness one
    read at P_M(0) = 1 - P_M(1); the Monte-Carlo rows pool ``seeds x mc_trials`` debates."""
    ref = reference[2]
    p, K, T = E.setup(CFG)[1], ref.metrics["K"], CFG.T
    p1_yes, p0_no = ref.metrics["yes"]["p1"], 1.0 - ref.metrics["no"]["p1"]
    comp = (1 - p.v) * (p1_yes - K * p.c - (1 - (1 - p.q) ** T))
    sound = 1 - (1 - p.v) * (1 - p.q) ** T * (p0_no - K * p.b)
    assert ref.metrics["completeness_bound_instance"] == pytest.approx(comp, rel=1e-12)
    assert ref.metrics["soundness_acceptance_bound_instance"] == pytest.approx(sound, rel=1e-12)
    n = CFG.seeds * CFG.mc_trials
    for case in E.CASES:
        wins = sum(ref.metrics[case]["mc_wins_per_seed"])
        (row,) = [c for c in ref.claims if f"trained pairs ({case})" in c.claim]
        assert row.value == wins / n and f"{wins}/{n} debates" in row.note


def _checkpoint_files(root):
    ck = root / "checkpoints"
    return {str(p.relative_to(ck)): p.read_bytes() for p in sorted(ck.rglob("*")) if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_damaged_newest_checkpoint_resumes_bit_equal_then_resume_is_a_no_op(
    tmp_path, reference, damage
):
    ref_root, ref_ctx, ref = reference
    root = tmp_path / "run"
    shutil.copytree(ref_root / "checkpoints", root / "checkpoints")
    newest = root / "checkpoints" / str(N_CHUNKS)  # checkpoint step = chunks done
    assert newest.is_dir()
    if damage == "delete":
        shutil.rmtree(newest)
    else:
        truncate_checkpoint(newest)
    ctx = FakeContext(root, seed=0, name=E.NAME, resume=True)
    again = run_module(E, CFG, ctx)
    assert training_bar(ctx).n == N_CHUNKS
    assert _numbers(again) == _numbers(ref)
    step_ref, state_ref = _final_state(ref_root)
    step_res, state_res = _final_state(root)
    assert step_ref == step_res == N_CHUNKS
    for x, y in zip(_leaves(state_ref), _leaves(state_res), strict=True):
        np.testing.assert_array_equal(x, y)
    # the last checkpoint interval (the last two chunks, of the n_b = 1 row, whose rows are not
    # logged) was trained again and saved where the bad step was
    assert newest.is_dir() and not [m for _, m in ctx.logged if "instance" in m]
    assert (root / "checkpoints" / f"corrupt-{N_CHUNKS}").is_dir() == (damage == "corrupt")

    before = _checkpoint_files(root)  # every chunk done: nothing trained, logged or saved
    ctx = FakeContext(root, seed=0, name=E.NAME, resume=True)
    third = run_module(E, CFG, ctx)
    assert _numbers(third) == _numbers(ref)
    assert training_bar(ctx).n == N_CHUNKS and not [m for _, m in ctx.logged if "instance" in m]
    assert _checkpoint_files(root) == before


def test_checkpoint_config_validation():
    with pytest.raises(ValueError, match="checkpoint_every=0"):
        E.Config(checkpoint_every=0)
    with pytest.raises(ValueError, match="chunks=51"):
        E.Config(chunks=51)  # 1000 updates / 20 per monitor = 50 periods
    with pytest.raises(ValueError, match="chunks=0"):
        E.Config(chunks=0)


def test_the_monte_carlo_keys_are_no_training_seeds_keys():
    """Training seed s of instance i starts from ``fold_in(fold_in(key, i), s)``; the Monte-Carlo
    debates came from ``fold_in(fold_in(key, i), 7)``: seed 7's key whenever seeds >= 8."""
    key = jax.random.key(0)

    def data(k):
        return tuple(np.asarray(jax.random.key_data(k)).ravel())

    train = {
        data(jax.random.fold_in(jax.random.fold_in(key, i), s))
        for i in range(len(E.CASES))
        for s in range(256)
    }
    mc = [jax.random.fold_in(jax.random.fold_in(key, E.MC_KEY), i) for i in range(len(E.CASES))]
    assert not {data(k) for k in mc} & train
    assert not {data(jax.random.fold_in(k, 7)) for k in mc} & train  # _mc_wins' trial keys
