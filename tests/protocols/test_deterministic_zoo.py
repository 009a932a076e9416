"""The deterministic debates' adversary zoos hold what their docstrings name (spec DED 6, 7): every
liar claims acceptance, each configuration liar corrupts the bit of its region, each Bob plays its
named mode, and a grid's pairs are the zoos of its protocol (a weaker zoo passed every test: the
soundness rows still read 0)."""

from __future__ import annotations

import functools
import re
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from dedebate.agents.deterministic_grids import grid_cells, judged_counts
from dedebate.agents.deterministic_players import (
    _early_steps,
    configuration_lies,
    det_alice_zoo,
    det_bob_zoo,
    judge_grid,
    make_alice,
    zoo_pairs,
)
from dedebate.machines.configurations import (
    clog2,
    config_machine,
    index_tree,
    random_programs,
    simulate_numpy,
)
from dedebate.protocols.deterministic_players import (
    BOB_MODES,
    FIXED,
    alice_config,
    alice_transcript,
)

T, N_IN, W = 9, 2, 3
M = clog2(T)  # 4 rounds of binary search


@functools.cache
def population():
    return random_programs(11, 6, T, n_inputs=N_IN, n_deps=(1, 3), dep_window=W, oracle_frac=0.4)


@pytest.mark.parametrize("bad", [[-1], [T], [2, T + 3]])
def test_make_alice_refuses_step_indices_outside_the_machine(bad):
    with pytest.raises(
        ValueError, match=re.escape(f"flip_raw={bad}: step indices must lie in 0..8")
    ):
        make_alice(T, flip_raw=bad)
    assert make_alice(T, flip_raw=[0, T - 1]).flip_raw.tolist() == [True] + [False] * 7 + [True]


def test_every_liar_of_the_alice_zoo_claims_acceptance_and_honest_alice_the_truth():
    names, zoo = det_alice_zoo(T, M, jax.random.key(0), n_random=3)
    assert names[0] == "honest" and len(set(names)) == len(names)
    transcripts = jax.jit(jax.vmap(jax.vmap(alice_transcript, (None, 0)), (0, None)))
    a = np.asarray(transcripts(population(), zoo))  # [machine, alice, T]
    np.testing.assert_array_equal(a[:, 0], simulate_numpy(population()))
    assert (a[:, 1:, -1] == 1).all()  # a liar claiming 0 is rejected by the final bit alone
    # no named liar is another's copy (flip_last was claim_one's); random masks may repeat, and
    # the midpoint liars lie in their messages only
    named = [n for n in names if not n.startswith(("midpoint_", "flip_many_", "wrong_answers_"))]
    assert len({a[:, names.index(n)].tobytes() for n in named}) == len(named)
    # every random liar lies before the last step on every machine (with key 0, flip_many_2's
    # draw held no step before the last: a copy of claim_one)
    honest = a[:, :1, :-1]
    random_liars = [k for k, n in enumerate(names) if n.startswith(("flip_many_", "wrong_"))]
    assert len(random_liars) == 6
    assert (a[:, random_liars, :-1] != honest).any(axis=-1).all()


def test_a_random_mask_holds_a_step_before_the_last_and_keeps_every_other_draw():
    rng, twin = np.random.default_rng(3), np.random.default_rng(3)
    for _ in range(200):  # p = 1/4 over 5 steps: about 1 in 3 draws holds none before the last
        got, u = _early_steps(rng, 5, 0.25), twin.random(5)
        if (u[:-1] < 0.25).any():
            np.testing.assert_array_equal(got, u < 0.25)
        else:
            want = u < 0.25
            want[np.argmin(u[:-1])] = True
            np.testing.assert_array_equal(got, want)
    seen = {tuple(np.flatnonzero(_early_steps(rng, 5, 0.0))) for _ in range(200)}
    assert seen == {(0,), (1,), (2,), (3,)}  # each missed with probability (3/4)^200
    assert _early_steps(rng, 1, 0.0).tolist() == [False]  # a one-step machine has no earlier step


def test_midpoint_liars_send_the_configuration_one_step_off_in_their_round_only():
    names, zoo = det_alice_zoo(T, M, jax.random.key(0), n_random=0)
    cm = index_tree(config_machine(population(), window=W), 0)
    a = simulate_numpy(population())[0]
    seen = set()
    for k, name in enumerate(names):
        if not name.startswith("midpoint_"):
            continue
        liar, r = index_tree(zoo, k), int(name.rsplit("_r", 1)[1])
        step = {"shift": 1, "back": -1}[name.split("_")[1]]
        seen.add((r, step))
        for rnd in range(M + 1):
            for i in (3, 8):
                got = np.asarray(alice_config(cm, liar, a, rnd, i))
                want = cm.from_transcript(a, i + step if rnd == r else i)
                np.testing.assert_array_equal(got, np.asarray(want), err_msg=f"{name} round {rnd}")
    assert seen == {(r, s) for r in (1, M // 2, M) for s in (1, -1)}


def test_configuration_liars_flip_one_bit_of_their_region_in_their_round():
    """``[counter (w_c) | input (n) | buffer (W)]``: each ``cfg_<region>_r<round>`` flips the
    region's bit named (the counter's first, the input's first, the buffer's first and last) in
    its round; ``z_output_only`` flips the final configuration's output bit, so Acc reads 1."""
    cm = index_tree(config_machine(population(), window=W), 0)
    names, lies = configuration_lies(T, M, cm.S, cm.w_c, cm.n)
    regions = ("counter", "buffer_first", "buffer_last", "input")
    assert names == ["z_output_only"] + [f"cfg_{p}_r{r}" for r in (0, 1, 2, 4) for p in regions]
    first = {
        "counter": 0,
        "input": cm.w_c,
        "buffer_first": cm.w_c + cm.n,
        "buffer_last": cm.w_c + cm.n + cm.W - 1,
    }
    y = simulate_numpy(population())
    for k, name in enumerate(names[1:], 1):
        liar = index_tree(lies, k)
        region, r = name[4:].rsplit("_r", 1)
        for rnd in range(M + 1):
            diff = alice_config(cm, liar, y[0], rnd, 5) ^ cm.from_transcript(y[0], 5)
            want = np.arange(cm.S) == first[region] if rnd == int(r) else np.zeros(cm.S, bool)
            np.testing.assert_array_equal(np.asarray(diff, bool), want, err_msg=f"{name} {rnd}")
    zero = int(np.flatnonzero(y[:, -1] == 0)[0])  # a machine whose output is 0
    cm0, liar = index_tree(config_machine(population(), window=W), zero), index_tree(lies, 0)
    final = cm0.from_transcript(y[zero], cm0.T_pad)
    assert not bool(cm0.acc(final))
    assert bool(cm0.acc(alice_config(cm0, liar, y[zero], 0, cm0.T_pad)))


@pytest.mark.parametrize("protocol, fixed", [("cross_exam", T), ("binary_search", 2**M)])
def test_each_bob_of_the_zoo_plays_its_named_mode_and_the_fixed_bobs_cover_every_choice(
    protocol, fixed
):
    """Cross-examination's fixed Bobs point at every step, binary search's take every bit
    pattern of its m rounds; the random Bobs draw distinct 30-bit arguments."""
    names, bobs = det_bob_zoo(T, M, jax.random.key(5), 8, all_fixed=True, protocol=protocol)
    mode, arg = np.asarray(bobs.mode), np.asarray(bobs.arg)
    assert names[:3] == ["honest", "last", "first"]
    assert mode.tolist() == [BOB_MODES[n.split("_")[0]] for n in names]
    assert sorted(arg[mode == FIXED]) == list(range(fixed))
    drawn = arg[mode == BOB_MODES["random"]]
    assert len(set(drawn.tolist())) == 8 and drawn.min() >= 0 and drawn.max() < 2**30
    assert drawn.max() > 2**20  # the chance that 8 uniform draws all fall below is 2^-80


def test_a_grids_pairs_are_the_zoos_of_its_protocol():
    """Figure 3 (binary search, m rounds) meets the midpoint liars of rounds 1, m/2 and m;
    Figure 4 reads no midpoint, so its zoo holds none (they would be copies)."""
    T8, m8 = 8, 3
    for protocol, n_alices, midpoints in (
        ("binary_search", 9 + 4, {(1, 1), (1, -1), (3, 1), (3, -1)}),
        ("cross_exam", 9, set()),
    ):
        A, B, n_comp = zoo_pairs(
            T8, jax.random.key(0), n_random=0, all_fixed=True, protocol=protocol
        )
        fixed = 2**m8 if protocol == "binary_search" else T8
        assert n_comp == 3 + fixed
        assert (np.asarray(B.mode)[:n_comp] == FIXED).sum() == fixed
        liars = jax.tree.map(lambda v, n=n_comp: np.asarray(v)[n:], A)
        assert liars.flip_raw.shape[0] == n_alices
        rounds = np.asarray(liars.lie_round)
        got = set(
            zip(rounds[rounds > 0].tolist(), np.asarray(liars.lie_shift)[rounds > 0].tolist())
        )
        assert got == midpoints, protocol


def test_judge_grid_counts_the_judged_cells_and_the_worst_costs():
    """A hand-made outcome of two machines (y = 1, 0) and four pairs, two of them completeness:
    the host's count and the grid's (in JAX) are the same."""
    out = SimpleNamespace(
        alice_wins=np.array([[1, 0, 1, 1], [1, 1, 0, 1]]),
        costs=SimpleNamespace(
            verifier_queries=np.array([[0, 1, 0, 0], [0, 0, 0, 0]]),
            bits_read=np.array([[3, 7, 2, 2], [4, 4, 9, 1]]),
        ),
    )
    want = {
        "comp_debates": 2,
        "comp_accepts": 1,
        "sound_debates": 2,
        "sound_accepts": 1,
        "v_queries_max": 1,
        "bits_max": 9,
    }
    assert judge_grid(out, 2, np.array([1, 0])) == want
    pairs = (None, SimpleNamespace(mode=np.zeros(4)), 2)
    g = grid_cells(None, pairs, np.array([True, False]))
    got = {k: int(v) for k, v in judged_counts(out, g).items()}
    assert got == {**want, "v_queries_sound": 0}
    out.costs.verifier_queries[1, 3] = 1  # V queried in a soundness debate
    assert int(judged_counts(out, g)["v_queries_sound"]) == 1
