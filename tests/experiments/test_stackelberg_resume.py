"""Resume, per-seed curves and sweep of the Stackelberg experiment (experiments/stackelberg/).

One tiny configuration (2 seeds, 8 A updates in 4 chunks, n_B in {1, 2} and simultaneous play,
players with 4 hidden units) serves every test, so its compiled programs are shared: the sweep
test runs first and compiles the point's programs (init, chunk, finish) once; the uninterrupted
run that the other tests share then trains through those same programs.

A run interrupted after its second chunk, then resumed from the Orbax checkpoint in the same
directory, ends with every final number and every logged per-seed curve of the uninterrupted
run, bit for bit. A finished run whose newest checkpoint is deleted or corrupted resumes to the
same numbers (the bad step moved aside and saved again), and a second resume trains and saves
nothing. The uninterrupted run's rows are checked for which gate (claims) and which are findings.

As a sweep (``point`` / ``DYNAMIC``, a chunked point): a grid over n_B and A's learning rate
compiles each of its programs once, and a run of the same point at the row's documented key
(``point_key``) trains its pairs through those same programs, chunk by chunk through the
checkpointed driver, tracing nothing again: its seed-0 pair of the main schedule is the sweep
row, bit for bit (at ``sweep.batch = 1``).
"""

from __future__ import annotations

import dataclasses
import math
import shutil

import jax
import numpy as np
import pytest

import experiments.stackelberg as E
from dedebate.core.pytrees import stack
from dedebate.lab.evaluate import run_module, train_rows
from dedebate.lab.experiment import gating
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

# 8 A updates in 4 chunks on 2 trees of depth 1, tiny players: the sweep's params and the
# resumed run's Config (equal static fields: one set of compiled programs)
TINY = {
    "seeds": 2,
    "steps": 8,
    "chunks": 4,
    "n_b_values": [1, 2],
    "main_n_b": 2,
    "n_trees": 2,
    "hidden_a": [4],
    "hidden_b": [4],
    "unstable_part": False,
    "warm_seeds": 0,
}
CFG = E.Config(**{**TINY, "n_b_values": (1, 2), "hidden_a": (4,), "hidden_b": (4,)})
RUNS = ("nB1", "nB2", "simultaneous")
N_CHUNKS = len(RUNS) * CFG.chunks  # every run a row of point's programs, trained in turn


def test_point_refuses_the_host_warm_start():
    with pytest.raises(ValueError, match="b_warm_start=True"):
        E.point(dataclasses.replace(CFG, b_warm_start=True))


@pytest.mark.slow  # first in the module: it compiles the programs the run below shares
def test_rates_sweep_compiles_once_and_a_row_is_the_run_alone(tmp_path, monkeypatch):
    traces = count_chunked_traces(monkeypatch, E)  # traces of point's programs (per compile)
    cfg, rec = sweep_one_row_per_call(
        E, tmp_path, params=TINY, seed=0, seeds=2, axes={"main_n_b": [1, 2], "lr_a": [0.03, 0.3]}
    )
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["main_n_b", "lr_a"] and res["groups"] == 1
    # batch 1: every row in its own call, as the run trains each of its schedules
    assert res["compilations"] == 3 and res["rows"] == 8 == len(rec.rows)
    assert traces == {"init": 1, ("chunk", 2): 1, "finish": 1}

    # the point n_B = 1, seed 1, trained alone by run()'s training path (the chunked driver,
    # every schedule a row of the point's programs, at the row's key)
    pt = next(p for p in plan(E, cfg).points if p.values == {"main_n_b": 1, "lr_a": 0.3})
    seed = 1
    ctx = FakeContext(tmp_path / "alone", seed=seed, name=E.NAME)
    ctx.key = point_key(E.NAME, seed, pt.cfg)
    trained = E.trained_parts(pt.cfg, train_rows(E, pt.cfg, ctx))
    assert traces == {"init": 1, ("chunk", 2): 1, "finish": 1}  # nothing traced again
    summary = E.runs.summarise(pt.cfg, trained["stable"].mon)  # [schedule, seed]: n_B = 1 first
    alone = {k: v[0, 0].item() for k, v in summary.items()}
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == seed)
    assert_shipped_sweeps_plot("stackelberg", row)
    assert len(alone) == 9 and {m: row[m] for m in alone} == alone
    # the dynamic numbers reach the training: every point of seed 1 ends at another payoff
    finals = {r["point"]: r["final_u_a"] for r in rec.rows if r["seed"] == seed}
    assert len(set(finals.values())) == 4
    for r in rec.rows:
        assert 0 <= r["converged_at"] <= 8 and r["converged"] == int(r["converged_at"] < 8)
        assert r["final_u_a_rel"] == pytest.approx(r["final_u_a"] / 0.25, rel=1e-6)


def _numbers(result):
    return ([(c.value, c.lo, c.hi, c.passed) for c in result.claims], result.tables)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run: its directory, context, result and what its host step was given."""
    root = tmp_path_factory.mktemp("ref")
    ctx, given, host_step = FakeContext(root, seed=0, name="stackelberg"), {}, E.host

    def host(cfg, seed, key, measured):
        given.update(key=key, measured=measured)
        return host_step(cfg, seed, key, measured)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(E, "host", host)
        return root, ctx, run_module(E, CFG, ctx), given


@pytest.mark.slow
def test_experiment_rows_claims_and_findings(reference):
    """The rows about what training achieves are findings; the proven rows are exact, gate, and
    pass (completeness holds against any B, trained or not; chaining for any pair)."""
    res = reference[2]
    findings = [c for c in res.claims if c.finding]
    proven = [c for c in res.claims if gating(c)]
    # exp 1 (converged fraction, final payoff), exp 3 (schedules), A against an exploiting B
    assert len(findings) == 5
    assert [c.source for c in proven] == ["spec PED 4, Thm 6.1(1)", "spec PED 6.3, 6.4"]
    for c in proven:
        assert c.passed, (c.claim, c.value, c.note)
        assert c.p_value is None and c.lo == c.value == c.hi  # exact rows
    tie = E.tie_loss(CFG.rho, 1)  # what honest A's float32 tie rule may cost
    assert proven[0].value >= 0.25 - E.exact_tol(1) - tie
    assert proven[1].value <= E.exact_tol(1, CFG.n_trees)
    assert res.passed
    rows = res.tables["proven"]
    assert len(rows) == len(RUNS) * 2  # (nB1, nB2, simultaneous) x seeds
    assert min(r["honest_u_a_min"] for r in rows) == pytest.approx(proven[0].value)
    assert max(r["chain_abs_err"] for r in rows) == pytest.approx(proven[1].value)
    # the search for an exploiting B ran on the main schedule's pairs only, and a B it found is
    # never better for A than the trained one (the trained B is a B too)
    searched = [r for r in rows if r["exploited_u_a"] is not None]
    assert {r["run"] for r in searched} == {f"nB{CFG.main_n_b}"} and len(searched) == 2
    assert all(r["exploited_u_a"] <= r["trained_u_a"] for r in searched)
    in_class = [r for r in rows if r["class_exploited_u_a"] is not None]
    assert [(r["run"], r["seed"]) for r in in_class] == [(r["run"], r["seed"]) for r in searched]
    assert all(r["class_exploited_u_a"] <= r["trained_u_a"] for r in in_class)
    for key, who in (("exploited_u_a", "B a search"), ("class_exploited_u_a", "trained class")):
        (row,) = [c for c in findings if who in c.claim]
        assert f"per seed {[round(r[key], 4) for r in searched]}" in row.note


@pytest.mark.slow
def test_each_seed_trains_on_trees_of_its_own(reference):
    state = reference[3]["measured"]["state"]
    for name in RUNS:
        leaves = [np.asarray(x) for x in jax.tree.leaves(state[f"stable/{name}"]["trees"])]
        assert all(x.shape[0] == CFG.seeds for x in leaves)
        assert any(not np.array_equal(x[0], x[1]) for x in leaves), name


@pytest.mark.slow
def test_a_search_that_fails_is_a_nan_not_a_seed_left_out(reference, monkeypatch):
    """A search that returns NaN stays NaN in its seed's row (the finding counts it as below);
    only runs that were not searched read None."""
    import jax.numpy as jnp

    def failing(*_):
        def program(a, trees, b, keys):  # tabular [seeds, trees], class [seeds]
            return jnp.full((len(keys), CFG.n_trees), jnp.nan), jnp.full(len(keys), jnp.nan)

        return program

    monkeypatch.setattr(E.runs, "exploit_grid", failing)
    given = reference[3]
    parts = E.trained_parts(CFG, given["measured"]).values()
    _, rows = E.runs.measure_proven(CFG, parts, jax.random.fold_in(given["key"], 1))
    searched = [r for r in rows if r["run"] == f"nB{CFG.main_n_b}"]
    assert len(searched) == CFG.seeds and all(
        math.isnan(r["exploited_u_a"]) and math.isnan(r["class_exploited_u_a"]) for r in searched
    )
    assert all(r["exploited_u_a"] is None for r in rows if r not in searched)


@pytest.mark.slow
def test_the_proven_rows_reduce_the_exact_grids_as_documented(reference, monkeypatch):
    """``measure_proven``'s host steps on grids of chosen numbers: per pair honest A's least
    payoff over the trees and ``|U_A - chain|``; on the main schedule's pairs only (a key each,
    split from the search's key), the search's payoff per tree against the trained B's, the
    lesser, averaged, and the class search's, each capped by the trained B's mean payoff (the
    trained B is a B too)."""
    pairs, inf = len(RUNS) * CFG.seeds, np.inf
    u = np.full(pairs, 0.299)  # below the mean of u_tree's rows, as a rounding may leave it
    u_tree = np.array([[0.25, 0.35]] * pairs)
    u_h = np.array([[0.3, 0.2]] * pairs) + 0.01 * np.arange(pairs)[:, None]
    chain = u + 0.01 * (-1.0) ** np.arange(pairs)  # errors of both signs
    table, within, seen = np.array([[0.1, inf], [inf, inf]]), np.array([-2.0, 5.0]), {}

    def search(*_):
        def program(a, trees, b, keys):  # tabular [seeds, trees], class [seeds]
            seen["b"], seen["keys"] = np.asarray(b), jax.random.key_data(keys)
            return table, within

        return program

    grids = (u_h, u, chain, u_tree)
    monkeypatch.setattr(E.runs, "proof_grid", lambda *_: lambda a, b, trees: grids)
    monkeypatch.setattr(E.runs, "exploit_grid", search)
    parts = E.trained_parts(CFG, reference[3]["measured"])
    _, rows = E.runs.measure_proven(CFG, parts.values(), jax.random.key(0))
    main = RUNS.index(f"nB{CFG.main_n_b}")
    np.testing.assert_array_equal(seen["b"], parts["stable"].carry.b_flat[main])
    keys = jax.random.key_data(jax.random.split(jax.random.key(0), CFG.seeds))  # one per seed
    np.testing.assert_array_equal(seen["keys"], keys)
    for i, row in enumerate(rows):
        assert (row["run"], row["seed"]) == (RUNS[i // CFG.seeds], i % CFG.seeds)
        assert row["honest_u_a_min"] == u_h[i].min() and row["trained_u_a"] == u[i]
        assert row["chain_abs_err"] == pytest.approx(0.01, rel=1e-9)
    searched = rows[main * CFG.seeds : (main + 1) * CFG.seeds]
    assert [(r["exploited_u_a"], r["class_exploited_u_a"]) for r in searched] == [
        (pytest.approx((0.1 + 0.35) / 2, rel=1e-12), -2.0),
        (0.299, 0.299),
    ]


@pytest.mark.slow
def test_resumed_run_equals_uninterrupted(tmp_path, reference):
    _, ref_ctx, ref, _ = reference

    root = tmp_path / "crashed"
    with pytest.raises(Crash):
        run_module(E, CFG, CrashingContext(root, seed=0, name="stackelberg", after=2))
    resumed_ctx = FakeContext(root, seed=0, name="stackelberg", resume=True)
    resumed = run_module(E, CFG, resumed_ctx)
    assert training_bar(resumed_ctx).n == N_CHUNKS  # 2 chunks restored + the rest trained
    assert _numbers(resumed) == _numbers(ref)

    # per-seed curves: each run (a row of point's programs, trained in turn) logs one row per A
    # update at steps (run, A update), keys PART/RUN/seedS/NAME and PART/RUN/a_update; the
    # resumed run logs only the A updates it trained, with the uninterrupted run's values
    curves = _curves(ref_ctx)
    assert sorted(curves) == list(range(len(RUNS) * CFG.steps))
    for i, run in enumerate(RUNS):
        for t in range(CFG.steps):
            assert curves[i * CFG.steps + t][f"stable/{run}/a_update"] == t
            assert {f"stable/{run}/seed{s}/max_adv" for s in range(CFG.seeds)} <= set(
                curves[i * CFG.steps + t]
            )
    final = {(r["schedule"], r["seed"]): r["final_u_a"] for r in ref.tables["stable"]}
    last_nb2 = (RUNS.index("nB2") + 1) * CFG.steps - 1
    for s in range(CFG.seeds):
        assert curves[last_nb2][f"stable/nB2/seed{s}/payoff"] == final[("n_B = 2", s)]
    again = _curves(resumed_ctx)
    assert sorted(again) == list(range(2 * (CFG.steps // CFG.chunks), len(RUNS) * CFG.steps))
    assert all(again[t] == curves[t] for t in again)
    # the tables' rows go after the curves, at the same steps in both runs
    tables = [(step, row) for step, row in resumed_ctx.logged if step not in again]
    assert tables and min(s for s, _ in tables) >= len(RUNS) * CFG.steps
    assert tables == [(step, row) for step, row in ref_ctx.logged if step not in curves]


def _checkpoint_files(root):
    ck = root / "checkpoints"
    return {str(p.relative_to(ck)): p.read_bytes() for p in sorted(ck.rglob("*")) if p.is_file()}


def _curves(ctx):
    return {step: row for step, row in ctx.logged if any(k.endswith("/payoff") for k in row)}


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_damaged_newest_checkpoint_resumes_bit_equal_then_resume_is_a_no_op(
    tmp_path, reference, damage
):
    ref_root, ref_ctx, ref, _ = reference
    root = tmp_path / "run"
    shutil.copytree(ref_root / "checkpoints", root / "checkpoints")
    newest = root / "checkpoints" / str(N_CHUNKS)  # checkpoint step = chunks done
    assert newest.is_dir()
    if damage == "delete":
        shutil.rmtree(newest)
    else:
        truncate_checkpoint(newest)
    ctx = FakeContext(root, seed=0, name="stackelberg", resume=True)
    again = run_module(E, CFG, ctx)
    assert training_bar(ctx).n == N_CHUNKS
    assert _numbers(again) == _numbers(ref)
    # the last chunk was trained again, to the uninterrupted run's curves
    last, end = CFG.steps // CFG.chunks, len(RUNS) * CFG.steps
    assert sorted(_curves(ctx)) == list(range(end - last, end))
    assert all(row == _curves(ref_ctx)[t] for t, row in _curves(ctx).items())
    assert newest.is_dir() and (root / "checkpoints" / f"corrupt-{N_CHUNKS}").is_dir() == (
        damage == "corrupt"
    )

    before = _checkpoint_files(root)  # every chunk done: nothing trained, logged or saved
    ctx = FakeContext(root, seed=0, name="stackelberg", resume=True)
    third = run_module(E, CFG, ctx)
    assert _numbers(third) == _numbers(ref)
    assert training_bar(ctx).n == N_CHUNKS and _curves(ctx) == {}
    assert _checkpoint_files(root) == before


def test_the_parts_are_the_documented_schedules_trees_seeds_and_scales():
    """docs/prover-estimator-debate.md, Stackelberg: part 1 (stable trees) plays every n_B and
    simultaneous play, part 2 (unstable trees) the main n_B, part 4 (stable trees, its own seeds)
    B cold against B warm at A's warm scale; each part on a key of its own."""
    cfg = dataclasses.replace(
        CFG, unstable_part=True, warm_seeds=3, b_warm_start=True, a_init_scale=0.5
    )
    run, part = E.runs.Run, E.runs.Part
    main = run("nB2", 2, False, True)
    schedules = (run("nB1", 1, False, True), main, run("simultaneous", 1, True, True))
    assert E.runs.parts(cfg) == [
        part("stable", 1, True, schedules, 2, 0.5),
        part("unstable", 2, False, (main,), 2, 0.5),
        part("warm", 3, True, (run("cold", 2, False, False), run("warm", 2, False, True)), 3, 2.0),
    ]
    assert E.EXPLOIT_KEY not in {p.key_index for p in E.runs.parts(cfg)}
    wide = dataclasses.replace(CFG, hidden_a=(4,), hidden_b=(6, 3))
    assert E.runs.static(wide) == E.runs.sb.StackelbergStatic(CFG.steps, (4,), (6, 3))


def test_a_runs_dynamic_numbers_are_its_schedule_and_the_threshold_band():
    cfg = dataclasses.replace(CFG, rho=2.0, depth=1, tol=0.1)  # threshold rho^-(d+1) = 1/4
    for n_b, simultaneous in ((2, False), (1, True)):
        d = E.runs.dynamic(cfg, n_b, simultaneous)
        assert (int(d["hp"].n_b), bool(d["hp"].simultaneous)) == (n_b, simultaneous)
        assert d["thr"] == 0.25 and d["band"] == np.float32(0.1 * 0.25)


def test_each_seed_of_a_part_draws_its_trees_and_players_from_its_own_keys():
    """Seed s from ``fold_in(key, s)``: its trees under ``fold_in(., 0)``, its players under
    ``fold_in(., 1)`` at the part's scale of A's output layer."""
    runs, p = E.runs, E.runs.parts(CFG)[0]._replace(a_scale=2.0)

    def by_hand(key):  # each seed on its own, as documented
        out = []
        for s in range(p.seeds):
            k = jax.random.fold_in(key, s)
            trees = runs.make_trees(jax.random.fold_in(k, 0), CFG.n_trees, CFG.depth)
            init = runs.sb.init_carry(runs.static(CFG), trees, jax.random.fold_in(k, 1), 2.0)
            out.append((trees, init.a_flat))
        return out

    (trees, carry), seeds = jax.jit(lambda k: (runs.part_start(CFG, p, k), by_hand(k)))(
        jax.random.key(5)
    )
    for s, want in enumerate(seeds):
        got = jax.tree.map(lambda x, s=s: x[s], (trees, carry.a_flat))
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_the_proven_rho_is_the_stable_trees_only(reference, monkeypatch):
    """The proven rows' rho is the largest fbs over the rho-stable parts' trees: an unstable part
    (hidden-flaw AND trees, fbs 5 at true roots) trains beside them and is left out of it."""
    runs = E.runs
    part = runs.Part("unstable", 2, False, (runs.Run("nB2", 2, False, False),), CFG.seeds, 1.0)
    trees, carry = jax.jit(lambda k: runs.part_start(CFG, part, k))(jax.random.key(3))
    unstable = runs.Trained(None, None, trees, stack([carry]), part, 0.0)
    monkeypatch.setattr(
        runs,
        "exploit_grid",
        lambda *_: lambda a, t, b, keys: (np.zeros((len(keys), CFG.n_trees)), np.zeros(len(keys))),
    )
    stable = E.trained_parts(CFG, reference[3]["measured"])["stable"]
    rho_stable, _ = runs.measure_proven(CFG, [stable], jax.random.key(0))
    rho_both, rows = runs.measure_proven(CFG, [stable, unstable], jax.random.key(0))
    host = jax.device_get(trees)
    worst = max(
        runs.tree_rho(jax.tree.map(lambda x, i=i: x[i], host))
        for i in np.ndindex(CFG.seeds, CFG.n_trees)
    )
    assert rho_both == rho_stable < worst, (rho_both, rho_stable, worst)
    assert [r["part"] for r in rows].count("unstable") == CFG.seeds


@pytest.mark.slow
def test_the_compiled_searches_are_each_search_on_its_own_half_of_the_key(reference):
    """``exploit_grid`` per seed: the tabular search on the first key of ``split(key)``, the
    class search on the second, each as called on its own (their starts differ). Float32 Adam
    paths, vmapped or not: 1e-4, as the searches' own tests."""
    from dedebate.training.exploit import class_exploit_payoff, exploit_payoff

    runs, st = E.runs, E.runs.static(CFG)
    t = E.trained_parts(CFG, reference[3]["measured"])["stable"]
    main = RUNS.index(f"nB{CFG.main_n_b}")
    carry = jax.tree.map(lambda x: x[main], t.carry)
    a, _ = jax.vmap(lambda tr, c: runs.sb.players(st, tr, c))(t.trees, carry)
    keys = jax.random.split(jax.random.key(4), CFG.seeds)
    grid = runs.exploit_grid(st, float(CFG.rho), CFG.exploit_restarts, CFG.exploit_steps)
    table, within = grid(a, t.trees, carry.b_flat, keys)
    n, m = CFG.exploit_restarts, CFG.exploit_steps

    @jax.jit
    def alone(prover, trees, b_flat, key):
        k_table, k_class = jax.random.split(key)
        return (
            exploit_payoff(st, float(CFG.rho), prover, trees, k_table, n, m),
            class_exploit_payoff(st, float(CFG.rho), prover, trees, b_flat, k_class, n, m),
        )

    for s in range(CFG.seeds):
        pick = lambda x, s=s: x[s]  # noqa: E731
        want = alone(jax.tree.map(pick, a), jax.tree.map(pick, t.trees), carry.b_flat[s], keys[s])
        np.testing.assert_allclose(np.asarray(table[s]), np.asarray(want[0]), rtol=0, atol=1e-4)
        assert float(within[s]) == pytest.approx(float(want[1]), abs=1e-4)
