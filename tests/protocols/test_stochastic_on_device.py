"""The stochastic debate's many trials stay on the device: the fast path on every lane,
the unresolved lanes compacted and replayed exactly in-program (``replay_unresolved``), equal to
the exact play lane for lane, with host transfers that do not grow with the lanes."""

from __future__ import annotations

import collections
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dedebate.agents.stochastic_zoo as zoo
from dedebate.core.stats import Z95, wilson_jnp
from dedebate.machines.fixtures import fixture_for_k
from dedebate.protocols import stochastic_batch as sb
from dedebate.protocols.stochastic import debate_static, lean_defaults, trial_keys
from tests.lab.test_batch_lanes import Row, fake_cell, fake_play

Lane = collections.namedtuple("Lane", "wins steps")
SPEC = debate_static(8)  # the fakes read no spec; zoo_stats reads its T and bob_draw


@pytest.mark.parametrize(
    "flags, chunk, one_by_one",
    [
        ("none", 4, False),
        ("one", 4, False),
        ("four", 4, False),
        ("five", 4, False),
        ("all", 4, False),
        ("all", 64, False),
        ("five", 1, True),
    ],
)
def test_replay_unresolved_replaces_exactly_the_unresolved_lanes(flags, chunk, one_by_one):
    """Every unresolved lane gets ``exact(lane)``, every other keeps its fast value, however many
    (0, 1, a buffer, a buffer and one, all 11) and in any number of passes."""
    n = 11
    pick = {
        "none": [],
        "one": [7],
        "four": [0, 3, 4, 10],
        "five": [1, 2, 5, 6, 9],
        "all": list(range(n)),
    }[flags]
    un = np.zeros(n, bool)
    un[pick] = True
    fast = Lane(-jnp.ones(n, jnp.int32), jnp.zeros(n, jnp.float32))

    def exact(i):
        return Lane(100 + i, i * 0.5)

    got = jax.jit(sb.replay_unresolved, static_argnums=(0, 3, 4))(
        exact, fast, jnp.asarray(un), chunk, one_by_one
    )
    np.testing.assert_array_equal(got.wins, np.where(un, 100 + np.arange(n), -1))
    np.testing.assert_array_equal(got.steps, np.where(un, np.arange(n) * 0.5, 0.0))


def test_replay_chunk_is_a_64th_of_the_lanes_at_least_64():
    assert [sb.replay_chunk(n) for n in (1, 8, 64, 100, 4096, 16384, 30000)] == [
        1,
        8,
        64,
        64,
        64,
        256,
        468,
    ]


def fake_play_fast(spec, machine, alice, bob, vera, key):
    """``fake_play``'s outcome where the lane resolves (about half the lanes, by its key), a wrong
    one (wins flipped, costs negated) where it does not."""
    out, un = fake_play(spec, machine, alice, bob, vera, key), _unresolved(key)
    wrong = jax.tree.map(lambda x: -x if x.dtype == jnp.float32 else 1 - x, out)
    return jax.tree.map(lambda w, o: jnp.where(un, w, o), wrong, out), un


def _unresolved(key):
    return jax.random.key_data(key)[0] % 2 == 1


def test_zoo_stats_fast_with_replay_equals_the_exact_play(monkeypatch):
    """With a fake sampler (no compile), the fast path plus in-program replays gives the exact
    path's numbers bit for bit, in one batch and in padded batches; ~90 of 185 lanes replay
    (more than one buffer of 64), and without the replays the numbers would differ."""
    monkeypatch.setattr(zoo, "play", fake_play)
    monkeypatch.setattr(zoo, "play_fast", fake_play_fast)
    rows, trials, ma, hh = 5, 37, 2, 1
    d = fake_cell(rows)
    run = jax.jit(zoo.zoo_stats, static_argnums=(0, 3, 4, 5, 6, 7))
    key = jax.random.key(3)
    keys = [trial_keys(jax.random.fold_in(key, s), trials) for s in (0, 1)]
    unresolved = [int(np.sum(np.asarray(jax.vmap(_unresolved)(k)))) for k in keys]
    assert ma * unresolved[0] + (rows - ma) * unresolved[1] > 64
    ref = jax.tree.map(np.asarray, run(SPEC, d, key, trials, ma, hh, 0, False))
    for lanes in (0, 64):
        got = jax.tree.map(np.asarray, run(SPEC, d, key, trials, ma, hh, lanes, True))
        for k in ref:
            np.testing.assert_array_equal(got[k], ref[k], err_msg=f"{k} at max_lanes={lanes}")
    monkeypatch.setattr(zoo, "replay_unresolved", lambda exact, out, *_: out)
    skipped = jax.tree.map(np.asarray, run(SPEC, d, key, trials, ma, hh, 999, True))  # retraced
    assert not np.array_equal(skipped["wins"], ref["wins"])


def test_zoo_stats_picks_the_fast_program_by_work(monkeypatch):
    """``fast=None``: the fast program from ``FAST_WORK`` lanes x T, the exact one below."""
    played = []
    monkeypatch.setattr(zoo, "play", lambda *a: played.append("exact") or fake_play(*a))
    monkeypatch.setattr(zoo, "play_fast", lambda *a: played.append("fast") or fake_play_fast(*a))
    rows, trials = 3, 10
    d = {
        k: Row(jnp.zeros(rows, jnp.int32), jnp.full(rows, 0.5)) for k in ("alice", "bob", "machine")
    }
    d["vera"] = jnp.float32(1.0)
    spec = debate_static(8)
    monkeypatch.setattr(zoo, "FAST_WORK", rows * trials * 8 + 1)
    jax.eval_shape(lambda: zoo.zoo_stats(spec, d, jax.random.key(0), trials, 1, 0))
    assert played == ["exact"]
    monkeypatch.setattr(zoo, "FAST_WORK", rows * trials * 8)
    jax.eval_shape(lambda: zoo.zoo_stats(spec, d, jax.random.key(0), trials, 1, 0))
    assert played == ["exact", "fast", "exact"]  # the replay traces the exact play once


@pytest.mark.slow
def test_zoo_stats_real_debates_fast_equals_exact():
    """The real sampler on a small zoo cell (K = 2, T = 8): honest Alice with 40 samples in three
    Bob rows leaves their lanes unresolved (play_fast's range), which replay in-program; every
    row's counts and means equal the exact ``vmap(play)`` path's."""
    T, trials = 8, 48
    c = lean_defaults(2, T).constants(2, T)
    _, m_no, _ = fixture_for_k(2, T, 0.33333)
    _, m_yes, _ = fixture_for_k(2, T, 2 / 3)
    d, a_names, b_names = zoo.zoo_cell(c, m_no, m_yes, np.zeros(3), np.zeros(4))
    ma, hh = len(a_names), b_names.index("honest")
    ns = np.array(d["alice"].n_samples)
    ns[ma : ma + 3] = 40
    d["alice"] = d["alice"].replace(n_samples=ns)
    run = jax.jit(zoo.zoo_stats, static_argnums=(0, 3, 4, 5, 6, 7))
    spec, key = debate_static(T), jax.random.key(5)
    ref = jax.tree.map(np.asarray, run(spec, d, key, trials, ma, hh, 0, False))
    got = jax.tree.map(np.asarray, run(spec, d, key, trials, ma, hh, 0, True))
    assert ref["wins"].shape == (len(a_names) + len(b_names),)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def fake_outcome(spec, machine, alice, bob, vera, key):
    bits = jax.random.key_data(key)
    return Lane(bits[0] % 3 + alice, (bits[1] % 7).astype(jnp.float32))


def fake_outcome_fast(spec, machine, alice, bob, vera, key):
    out, un = fake_outcome(spec, machine, alice, bob, vera, key), _unresolved(key)
    return Lane(jnp.where(un, -1, out.wins), jnp.where(un, -1.0, out.steps)), un


class Counter:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *a, **kw):
        self.calls += 1
        return self.fn(*a, **kw)


@pytest.mark.parametrize("in_one", [True, False])
def test_run_trials_host_transfers_do_not_grow_with_the_lanes(monkeypatch, in_one):
    """64 and 1024 lanes (1 and 16 slices of 64): no implicit transfer (``transfer_guard``), the
    same number of explicit ones, and every lane as the exact play gives it, with about half the
    lanes replayed; both with each slice one program (``in_one``) and fast-then-replay."""
    monkeypatch.setattr(sb, "play", fake_outcome)
    monkeypatch.setattr(sb, "play_fast", fake_outcome_fast)
    monkeypatch.setattr(sb, "RUN_WORK", 0 if in_one else 1 << 40)
    spec = debate_static(5, chunk=5 + in_one)  # a spec of this test's own (jit traces it anew)
    counts = []
    for n in (64, 1024):
        puts, gets = Counter(jax.device_put), Counter(jax.device_get)
        monkeypatch.setattr(jax, "device_put", puts)
        monkeypatch.setattr(jax, "device_get", gets)
        keys = trial_keys(jax.random.key(1), n)
        alice = np.arange(n, dtype=np.int32)
        with jax.transfer_guard("disallow"):
            out = sb.run_trials(
                spec, None, alice, None, None, keys, axes=(None, 0, None, None), max_lanes=64
            )
        monkeypatch.undo()
        monkeypatch.setattr(sb, "play", fake_outcome)
        monkeypatch.setattr(sb, "play_fast", fake_outcome_fast)
        monkeypatch.setattr(sb, "RUN_WORK", 0 if in_one else 1 << 40)
        ref = jax.vmap(fake_outcome, in_axes=(None, None, 0, None, None, 0))(
            spec, None, alice, None, None, keys
        )
        np.testing.assert_array_equal(np.asarray(out.wins), np.asarray(ref.wins))
        np.testing.assert_array_equal(np.asarray(out.steps), np.asarray(ref.steps))
        assert 0.4 * n < np.sum(np.asarray(jax.vmap(_unresolved)(keys))) < 0.6 * n
        counts.append((puts.calls, gets.calls))
    assert counts[0] == counts[1] and counts[0] == (1, 0 if in_one else 1), counts


def test_cell_metrics_read_the_worst_member_of_each_side_and_the_honest_pair():
    """A cell's rates from made-up counts (3 Alices, then 3 Bobs; the honest Bob second): the
    soundness row is the best Alice (the last), completeness the worst Bob (the first), and
    ``holds`` sits exactly at 3/5 and 2/5."""
    trials, ma, hh = 100, 3, 1
    stats = {
        "aborts": jnp.asarray([1, 2, 3, 4, 5, 6], jnp.int32),
        "queries_alice": jnp.float32(7.0),
        "queries_alice_sd": jnp.float32(2.0),
        **{k: jnp.float32(1.5) for k in ("queries_bob", "rounds")},
        **{k: jnp.float32(9.0) for k in ("queries_vera_max", "queries_vera_mean")},
    }
    for wins, holds in (([10, 20, 40, 60, 90, 70], 1.0), ([10, 20, 41, 60, 90, 70], 0.0)):
        st = {**stats, "wins": jnp.asarray(wins, jnp.int32)}
        m = {k: float(v) for k, v in zoo.cell_metrics(st, trials, ma, hh, "c").items()}
        for metric, count in (("soundness_max", wins[2]), ("completeness_min", 60)):
            assert m[f"c/{metric}"] == np.float32(count / trials), metric
            want = tuple(float(x) for x in wilson_jnp(count, trials))
            assert (m[f"c/{metric}_lo"], m[f"c/{metric}_hi"]) == want[1:], metric
        assert m["c/honest_completeness"] == np.float32(0.9) and m["c/holds"] == holds
        assert m["c/aborts"] == 21 and m["c/alice2_wins"] == wins[2] and m["c/bob0_wins"] == 60
        half = Z95 * 2.0 / math.sqrt(trials)  # sd 2 over 100 trials
        assert m["c/queries_alice_hi"] - m["c/queries_alice"] == pytest.approx(half, rel=1e-6)
    for wins in ([10, 20, 40, 59, 90, 70], [41, 20, 40, 60, 90, 70]):  # one side just over
        st = {**stats, "wins": jnp.asarray(wins, jnp.int32)}
        assert float(zoo.cell_metrics(st, trials, ma, hh, "c")["c/holds"]) == 0.0
