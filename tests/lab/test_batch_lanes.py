"""Full-size batches from the device's memory (``dedebate.lab.devices.lanes_for_memory``), and the
stochastic debate's numbers independent of the batch they run in."""

from __future__ import annotations

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dedebate.agents.stochastic_zoo as zoo
import experiments.stochastic_debate as exp
from dedebate.lab.config import default_config
from dedebate.lab.devices import device_memory_bytes, lanes_for_memory
from dedebate.protocols.costs import Costs
from dedebate.protocols.stochastic import debate_static, trial_keys


class FakeDevice:
    def __init__(self, stats):
        self.stats = stats

    def memory_stats(self):
        if isinstance(self.stats, Exception):
            raise self.stats
        return self.stats


def test_lanes_from_a_fake_memory_figure():
    gpu = FakeDevice({"bytes_limit": 80 * 2**30, "bytes_in_use": 0})
    assert device_memory_bytes(gpu) == 80 * 2**30
    assert device_memory_bytes(FakeDevice(None)) is None
    assert device_memory_bytes(FakeDevice(NotImplementedError("cpu"))) is None
    # a quarter of 80 GiB at 1 MiB per lane: 20480 lanes (a multiple of 256)
    kw = {"default": 1000, "lo": 256, "hi": 1 << 20}
    assert lanes_for_memory(2**20, device=gpu, **kw) == 20480
    assert lanes_for_memory(2**20 + 1, device=gpu, **kw) == 20224  # rounded down to 256s
    assert lanes_for_memory(2**20, memory_bytes=2**30, **kw) == 256  # 256 fits exactly
    assert lanes_for_memory(2**20, memory_bytes=2**28, **kw) == 256  # at least lo
    assert lanes_for_memory(1, device=gpu, **kw) == 1 << 20  # at most hi
    assert lanes_for_memory(2**20, device=FakeDevice(None), **kw) == 1000  # no figure: default
    assert lanes_for_memory(2**20, memory_bytes=2**30, fraction=1.0, multiple=1, **kw) == 1024
    with pytest.raises(ValueError, match="bytes_per_lane=0"):
        lanes_for_memory(0, **kw)
    # the default clipped too; a zero memory figure is no figure; lo above hi refused
    assert lanes_for_memory(1, default=10, lo=256, hi=1024, device=FakeDevice(None)) == 256
    assert lanes_for_memory(1, default=10**6, lo=256, hi=1024, device=FakeDevice(None)) == 1024
    assert device_memory_bytes(FakeDevice({"bytes_limit": 0})) is None
    with pytest.raises(ValueError, match=r"^lo=10, hi=5, multiple=256: need 1 <= lo <= hi"):
        lanes_for_memory(1, default=1, lo=10, hi=5)


def test_full_size_takes_its_lanes_from_the_device(monkeypatch):
    cfg = default_config(exp, "full").params
    assert cfg.max_lanes == 0 and default_config(exp, "quick").params.max_lanes == 4096
    assert exp.batch_lanes(4096, 1024) == 4096  # a set value is kept
    monkeypatch.setattr("dedebate.lab.devices.device_memory_bytes", lambda device=None: None)
    assert exp.batch_lanes(0, 1024) == 16384  # a CPU: the default
    monkeypatch.setattr(
        "dedebate.lab.devices.device_memory_bytes", lambda device=None: 16 * 2**30
    )  # 64 * 1024 + 4096 bytes per debate
    assert exp.batch_lanes(0, 1024) == (4 * 2**30 // (64 * 1024 + 4096)) // 256 * 256 == 61440
    assert exp.batch_lanes(0, 8) == 262_144  # capped
    with pytest.raises(ValueError, match="max_lanes=100: must be 0"):
        exp.Config(max_lanes=100)


Out = collections.namedtuple("Out", "alice_wins aborted costs")
Row = collections.namedtuple("Row", "kind w")


def fake_play(spec, machine, alice, bob, vera, key):
    """A cheap stand-in for ``play`` (no sampler to compile): a debate's outputs depend on its
    key and its row only."""
    bits = jax.random.key_data(key).astype(jnp.float32)
    u = jnp.stack([bits[-1] % 997 / 997, bits[0] % 991 / 991, (bits[-1] + bits[0]) % 983 / 983])
    wins = (u[0] < machine.w).astype(jnp.int32)
    costs = Costs(
        alice_queries=u[2] * alice.w,
        bob_queries=u[1] + bob.w,
        verifier_queries=u[0] * 7 + vera,
        bits_read=jnp.int32(0),
        rounds=(u[2] * 5).astype(jnp.int32),
    )
    return Out(wins, (u[1] < 0.1).astype(jnp.int32), costs)


def fake_cell(rows: int) -> dict:
    """A zoo cell for :func:`fake_play`: every player's and machine's weight ``w`` differs by
    row (0.2 to 0.8)."""
    w = jnp.linspace(0.2, 0.8, rows)
    d = {k: Row(jnp.zeros(rows, jnp.int32), w) for k in ("alice", "bob", "machine")}
    return d | {"vera": jnp.float32(1.0)}


def test_zoo_stats_equal_for_every_batch_size(monkeypatch):
    """The lanes of :func:`dedebate.agents.stochastic_zoo.zoo_stats` are indexed and keyed globally: all at once and in batches
    that do not divide the lanes (the last padded), the counts and means are the same bit for
    bit."""  # noqa: E501
    monkeypatch.setattr(zoo, "play", fake_play)
    rows, trials, ma, hh = 5, 37, 2, 1
    d = fake_cell(rows)
    run = jax.jit(zoo.zoo_stats, static_argnums=(0, 3, 4, 5, 6))
    key = jax.random.key(3)
    spec = debate_static(8)  # fake_play reads none; 185 x 8 steps: below FAST_WORK, exact play
    ref = jax.tree.map(np.asarray, run(spec, d, key, trials, ma, hh, 0))
    assert ref["wins"].shape == (rows,) and 0 < ref["wins"].sum() < rows * trials
    for lanes in (64,):  # 3 batches of 64 (lax.map), the last padded, vs one vmap of 185
        got = jax.tree.map(np.asarray, run(spec, d, key, trials, ma, hh, lanes))
        for k in ref:
            np.testing.assert_array_equal(got[k], ref[k], err_msg=f"{k} at max_lanes={lanes}")


def test_zoo_stats_equal_a_row_by_row_replay(monkeypatch):
    """Each row's wins and aborts, and the honest pair's (row ``ma + hh``) query and round means,
    equal the same debates played row by row on their side's keys (the fake costs differ by row,
    so reading another row's costs, or the other side's keys, would show)."""
    monkeypatch.setattr(zoo, "play", fake_play)
    rows, trials, ma, hh = 5, 37, 2, 1
    d = fake_cell(rows)
    key, spec = jax.random.key(3), debate_static(8)
    got = jax.tree.map(np.asarray, zoo.zoo_stats(spec, d, key, trials, ma, hh, 0, False))
    sides = [trial_keys(jax.random.fold_in(key, s), trials) for s in (0, 1)]

    def row(r):
        take = functools.partial(jax.tree.map, lambda x: x[r])
        m, a, b = take(d["machine"]), take(d["alice"]), take(d["bob"])
        one = jax.vmap(lambda k: fake_play(spec, m, a, b, d["vera"], k))
        return jax.tree.map(np.asarray, one(sides[int(r >= ma)]))

    played = [row(r) for r in range(rows)]
    np.testing.assert_array_equal(got["wins"], [p.alice_wins.sum() for p in played])
    np.testing.assert_array_equal(got["aborts"], [p.aborted.sum() for p in played])
    honest = played[ma + hh].costs
    tol = 2 * trials * 2**-24  # two float32 means of 37 positive terms, 37 roundings each
    np.testing.assert_allclose(got["queries_alice"], honest.alice_queries.mean(), rtol=tol)
    np.testing.assert_allclose(got["queries_bob"], honest.bob_queries.mean(), rtol=tol)
    np.testing.assert_allclose(got["rounds"], honest.rounds.mean(), rtol=tol)
    vera = np.concatenate([p.costs.verifier_queries for p in played])
    np.testing.assert_allclose(got["queries_vera_max"], vera.max(), rtol=0)
