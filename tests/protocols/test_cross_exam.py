"""Figure 4 / Theorem 5.3 (spec DED 6): exact completeness and soundness, exact costs.

One vmapped grid (8 random machines x ~550 strategy pairs, T = 9) is checked debate by debate
against an independent numpy re-derivation of A's claim, honest B's pointer and V's verdict.
"""

from __future__ import annotations

import functools
from operator import attrgetter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.agents.deterministic_players import (
    concat,
    det_alice_zoo,
    det_bob_zoo,
    det_honest_alice,
    make_alice,
    make_bob,
    repeat,
    zoo_pairs,
)
from dedebate.core.bits import bit_table
from dedebate.machines.configurations import (
    check_deterministic,
    clog2,
    index_tree,
    local_bits_numpy,
    random_programs,
    run_program,
    simulate_numpy,
)
from dedebate.machines.oracles import hashed_oracle, table_oracle
from dedebate.machines.program import COIN, DET, ORACLE, make_step_program
from dedebate.protocols.cross_exam import play_cross_exam, play_cross_exam_grid
from dedebate.protocols.deterministic_players import FIRST, FIXED, HONEST, LAST

T, N_IN = 9, 2


@functools.cache
def population():
    return random_programs(7, 8, T, n_inputs=N_IN, n_deps=(1, 3), dep_window=4, oracle_frac=0.4)


@functools.cache
def grid():
    """(alices, bobs, n_comp, outcome[M, K]): honest A x every B, then every A x honest B."""
    key = jax.random.key(3)
    _, bobs = det_bob_zoo(T, clog2(T), key, n_random=3, all_fixed=True, protocol="cross_exam")
    n_comp = bobs.mode.shape[0]
    _, zoo = det_alice_zoo(T, clog2(T), key, n_random=3)
    every = repeat(make_alice(T), 2**T).replace(flip_raw=bit_table(T).astype(bool))
    liars = concat(zoo, every)
    A = concat(repeat(det_honest_alice(T), n_comp), liars)
    B = concat(bobs, repeat(make_bob("honest"), liars.flip_raw.shape[0]))
    return A, B, n_comp, play_cross_exam_grid(population(), A, B)


def reference(prog, alices, bobs):
    """numpy: A's claimed transcripts, B's pointers and V's verdict/costs for one machine."""
    K = alices.flip_raw.shape[0]
    rep = jax.tree.map(lambda v: np.broadcast_to(np.asarray(v), (K,) + np.shape(v)), prog)
    kind = np.asarray(prog.kind)
    # A: wrong answer at the first ORACLE step >= prop_oracle_from, propagated; then raw flips.
    fr = np.asarray(alices.prop_oracle_from)
    is_orc = (kind[None, :] == ORACLE) & (np.arange(T)[None, :] >= fr[:, None])
    wrong = np.zeros((K, T), bool)
    has = (fr >= 0) & is_orc.any(1)
    wrong[np.flatnonzero(has), is_orc.argmax(1)[has]] = True
    a = simulate_numpy(rep, flip=np.asarray(alices.flip_prop) | wrong)
    a = a ^ np.asarray(alices.flip_raw).astype(np.int8)
    a[np.asarray(alices.force_last), T - 1] = 1
    bad = local_bits_numpy(rep, a) != a
    first = np.where(bad.any(1), bad.argmax(1), T - 1)
    mode, arg = np.asarray(bobs.mode), np.asarray(bobs.arg)
    t = np.select([mode == HONEST, mode == LAST, mode == FIRST], [first, T - 1, 0], arg % T)
    local = local_bits_numpy(rep, a)
    accept = (a[np.arange(K), t] == local[np.arange(K), t]) & (a[:, T - 1] == 1)
    ndeps = np.asarray(prog.dep_mask).sum(-1)
    bits = clog2(T) + (1 + ndeps[t] + (t != T - 1)) * (1 + clog2(N_IN + T))
    checked = np.where(bad.any(1), first + 1, T)
    return {
        "alice_wins": accept,
        "pointer": t,
        "costs.bits_read": bits,
        "costs.verifier_queries": (kind[t] == ORACLE).astype(int),
        "b_steps": np.where(mode == HONEST, checked, 0),
    }


def test_population_has_both_outputs_and_numpy_matches_jax():
    y = simulate_numpy(population())
    y_jax = np.asarray(jax.jit(jax.vmap(run_program))(population()))
    np.testing.assert_array_equal(y, y_jax)
    assert (y[0::2, -1] != y[1::2, -1]).all()  # complement pairs: half the machines output 1


def test_completeness_is_exactly_one_against_every_bob():
    _A, B, n_comp, out = grid()
    y1 = simulate_numpy(population())[:, -1] == 1
    acc = np.asarray(out.alice_wins)[y1, :n_comp]
    assert acc.size >= 4 * T and acc.all()
    assert np.asarray(B.mode)[:n_comp].tolist().count(FIXED) == T  # every step t was tried


def test_soundness_is_exactly_zero_against_every_lie_and_every_transcript():
    _A, _B, n_comp, out = grid()
    y0 = simulate_numpy(population())[:, -1] == 0
    acc = np.asarray(out.alice_wins)[y0, n_comp:]
    assert acc.shape[1] >= 2**T and not acc.any()


def test_each_debate_matches_the_numpy_reference_and_cost_formula():
    A, B, _n_comp, out = grid()
    progs = population()
    for i in range(progs.kind.shape[0]):
        ref = reference(index_tree(progs, i), A, B)
        for name, want in ref.items():
            np.testing.assert_array_equal(np.asarray(attrgetter(name)(out))[i], want, err_msg=name)
    assert int(np.asarray(out.costs.verifier_queries).max()) == 1  # oracle steps get checked ...
    assert set(np.unique(np.asarray(out.costs.verifier_queries))) <= {0, 1}  # ... at most one
    np.testing.assert_array_equal(np.asarray(out.a_steps), T)
    np.testing.assert_array_equal(np.asarray(out.costs.rounds), 1)


def test_wrong_oracle_answer_is_locally_consistent_but_caught():
    """The consistent liar: every step but the flipped oracle step obeys its rule."""
    progs = population()
    A, _B, n_comp, out = grid()
    k = n_comp + 6  # det_alice_zoo order: honest, claim_one, 3 flips, flip_all, oracle_wrong_first
    assert int(np.asarray(A.prop_oracle_from)[k]) == 0
    checked = 0
    for i in range(progs.kind.shape[0]):
        prog = index_tree(progs, i)
        kind = np.asarray(prog.kind)
        if not (kind == ORACLE).any():
            continue
        t0 = int(np.argmax(kind == ORACLE))
        flip = np.zeros(T, bool)
        flip[t0] = True
        a = simulate_numpy(prog, flip=flip)
        bad = np.flatnonzero(local_bits_numpy(prog, a) != a)
        assert bad.tolist() == [t0]
        checked += 1
        if a[-1] == 1 and simulate_numpy(prog)[-1] == 0:  # a lie needing no other change
            assert int(np.asarray(out.pointer)[i, k]) == t0 and not bool(out.alice_wins[i, k])
    assert checked >= 4


def test_vmap_grid_equals_per_debate_loop():
    A, B, n_comp, out = grid()
    progs = population()
    single = jax.jit(play_cross_exam)
    for i in (0, 3, 6):
        for k in (0, 1, n_comp - 1, n_comp, n_comp + 7, n_comp + 20):
            one = single(index_tree(progs, i), index_tree(A, k), index_tree(B, k))
            for f in (
                "alice_wins",
                "pointer",
                "costs.bits_read",
                "costs.verifier_queries",
                "b_steps",
                "costs.bob_queries",
            ):
                get = attrgetter(f)
                assert int(get(one)) == int(np.asarray(get(out))[i, k]), f


def test_random_program_equals_make_step_program_build():
    progs = population()
    prog = index_tree(progs, 2)  # a machine with l = 3 = L relevant bits per step
    kind = np.asarray(prog.kind)
    mask = np.asarray(prog.dep_mask)
    deps = [np.asarray(prog.deps)[t][mask[t]].tolist() for t in range(T)]
    rule = [
        np.asarray(prog.rule)[t][: 2 ** len(deps[t])] if kind[t] == DET else None for t in range(T)
    ]
    built = make_step_program(kind, deps, prog.oracle, rule, x=np.asarray(prog.x), rule_bits=prog.R)
    assert built.L == prog.L == 3
    np.testing.assert_array_equal(np.asarray(run_program(built)), simulate_numpy(prog))


def test_hand_machine_transcript_and_verdicts():
    # x = (1, 0); y0 = x0 xor x1; y1 = O(x0, y0) with O(1,1) = 0; y2 = not y1; y3 = y0 and y2.
    oracle = table_oracle([1.0, 1.0, 1.0, 0.0])
    prog = make_step_program(
        [DET, ORACLE, DET, DET],
        [[0, 1], [0, 2], [3], [2, 4]],
        oracle,
        [[0, 1, 1, 0], None, [1, 0], [0, 0, 0, 1]],
        x=[1, 0],
    )
    np.testing.assert_array_equal(simulate_numpy(prog), [1, 0, 1, 1])
    play = jax.jit(play_cross_exam)
    honest = play(prog, det_honest_alice(4), make_bob("honest"))
    # honest B finds no inconsistency and points at the last step: V reads B's index (2 bits) and
    # a_3, a_0, a_2 (1 + |I(3)| positions) at 1 + ceil(log2 6) = 4 bits each.
    assert bool(honest.alice_wins) and int(honest.pointer) == 3
    assert int(honest.costs.bits_read) == 2 + 3 * 4 and int(honest.costs.verifier_queries) == 0
    # Flipping the oracle answer (consistently) makes y3 = 0: rejected by the final-bit check
    # unless A also lies at the end, and then B points at step 3.
    liar = play(prog, make_alice(4, prop_oracle_from=0), make_bob("honest"))
    assert not bool(liar.alice_wins)
    liar = play(prog, make_alice(4, prop_oracle_from=0, force_last=True), make_bob("honest"))
    assert int(liar.pointer) == 1 and not bool(liar.alice_wins)
    assert int(liar.costs.verifier_queries) == 1
    wrong_b = play(prog, make_alice(4, prop_oracle_from=0, force_last=True), make_bob("last"))
    assert int(wrong_b.pointer) == 3 and not bool(wrong_b.alice_wins)  # y3 = y0 and y2 = 0 != 1
    lucky = play(prog, make_alice(4, prop_oracle_from=0, force_last=True), make_bob("first"))
    assert bool(lucky.alice_wins)  # a misbehaving B loses soundness: the honest B is needed


def test_nondeterministic_machines_are_rejected():
    with pytest.raises(ValueError, match="COIN"):
        check_deterministic(
            make_step_program([COIN, DET], [[], [0]], table_oracle([1.0]), [None, [0, 1]])
        )
    with pytest.raises(ValueError, match="0 or 1"):
        check_deterministic(make_step_program([ORACLE], [[]], table_oracle([0.5])))
    with pytest.raises(ValueError, match="deterministic=True"):
        check_deterministic(make_step_program([ORACLE], [[]], hashed_oracle(1)))
    check_deterministic(make_step_program([ORACLE], [[]], hashed_oracle(1, deterministic=True)))
    # a judged grid refuses them too: its protocols read p >= 1/2 as the bit, so a coin-flip
    # machine (P[output = 1] = 1/2) was judged with honest A winning
    from dedebate.agents.deterministic_grids import grid_cells

    coin = make_step_program([COIN, DET], [[], [0]], table_oracle([1.0]), [None, [0, 1]])
    zoo = zoo_pairs(2, jax.random.key(0), n_random=1, all_fixed=True, protocol="cross_exam")
    with pytest.raises(ValueError, match="COIN"):
        grid_cells(coin, zoo, np.ones(1, bool))


def test_bad_strategy_and_population_arguments():
    with pytest.raises(ValueError, match="mode='sideways'"):
        make_bob("sideways")
    with pytest.raises(ValueError, match="key=None"):
        make_bob("random")
    with pytest.raises(ValueError, match="flip_raw=\\[9\\]"):
        make_alice(9, flip_raw=[9])
    with pytest.raises(ValueError, match="batch=3"):
        random_programs(0, 3, 8)
    with pytest.raises(ValueError, match="n_deps"):
        random_programs(0, 2, 8, n_deps=13)
    assert jnp.asarray(make_alice(4, flip_raw=[1, 2]).flip_raw).tolist() == [0, 1, 1, 0]


def test_a_bool_mask_of_another_length_is_refused_not_read_as_steps():
    """``flip_raw=[True, False, True]`` for T = 4 flipped steps 0 and 1 (the bools as indices)."""
    with pytest.raises(ValueError, match=r"flip_raw: a bool mask of shape \(3,\); a mask has"):
        make_alice(4, flip_raw=np.array([True, False, True]))
    assert make_alice(4, flip_raw=np.array([True, False, True, False])).flip_raw.tolist() == [
        True,
        False,
        True,
        False,
    ]


@pytest.mark.parametrize("protocol", ["binary_search", "cross_exam"])
def test_the_exhaustive_soundness_pairs_claim_every_transcript_once(protocol):
    """``exhaustive``: the last 2^T Alices flip every set of the T output bits exactly once (one
    claims ``a_{T-1} = 1`` in half of them), each against honest B; counted here apart from
    ``bit_table``. A zoo that never flipped the last bit kept its debate counts and passed."""
    import itertools

    T = 5
    plain = zoo_pairs(T, jax.random.key(0), n_random=1, all_fixed=True, protocol=protocol)
    full = zoo_pairs(
        T, jax.random.key(0), n_random=1, all_fixed=True, protocol=protocol, exhaustive=True
    )
    flips = np.asarray(full[0].flip_raw)[-(2**T) :].astype(int)
    assert len(np.asarray(full[0].flip_raw)) == len(np.asarray(plain[0].flip_raw)) + 2**T
    assert sorted(map(tuple, flips.tolist())) == sorted(itertools.product((0, 1), repeat=T))
    assert np.all(np.asarray(full[1].mode)[-(2**T) :] == HONEST)


def test_honest_bobs_costs_are_the_oracle_steps_up_to_the_first_inconsistent_one():
    """Honest B (Figure 4) scans A's transcript to its first locally inconsistent step and pays
    the oracle steps it recomputes: counted here in numpy, for the honest transcript (every step,
    all of A's oracle queries) and for each single-step lie of every machine."""
    from dedebate.protocols.deterministic_players import alice_cost, bob_pointer

    progs, honest = population(), make_bob("honest")
    pointer = jax.jit(bob_pointer)
    seen = set()
    for i in range(np.asarray(progs.kind).shape[0]):
        prog = index_tree(progs, i)
        kind, y = np.asarray(prog.kind), simulate_numpy(prog)
        for flip in [None, *range(T)]:
            a = y.copy()
            if flip is not None:
                a[flip] ^= 1
            bad = np.flatnonzero(local_bits_numpy(prog, a) != a)
            checked = int(bad[0]) + 1 if bad.size else T
            t, got_checked, queries = pointer(prog, jnp.asarray(a), honest)
            assert (int(t), int(got_checked)) == (checked - 1, checked), (i, flip)
            assert int(queries) == int(np.sum(kind[:checked] == ORACLE)), (i, flip)
            seen.add(bool(bad.size))
        assert int(queries) <= int(alice_cost(prog, det_honest_alice(T))[1])
        assert int(pointer(prog, jnp.asarray(y), honest)[2]) == int(np.sum(kind == ORACLE))
    assert seen == {True, False}


def test_a_grids_counts_and_costs_read_its_judged_cells():
    """``judged_counts`` and ``honest_costs`` against numpy over the grid: V's oracle queries
    happen only in soundness debates (honest B points at a liar's ORACLE step; the honest debate
    checks the last step, which is DET), so the worst over the zoo is 1 and the honest pair's 0."""
    from dedebate.agents.deterministic_grids import grid_cells, honest_costs, judged_counts

    A, B, n_comp, out = grid()
    y1 = simulate_numpy(population())[:, -1] == 1
    g = grid_cells(population(), (A, B, n_comp), y1)
    got = jax.jit(judged_counts)(out, {k: g[k] for k in ("comp", "sound")})
    acc, vq = np.asarray(out.alice_wins), np.asarray(out.costs.verifier_queries)
    bits = np.asarray(out.costs.bits_read)
    comp, sound = acc[y1, :n_comp], acc[~y1, n_comp:]
    want = {
        "comp_debates": comp.size,
        "comp_accepts": comp.sum(),
        "sound_debates": sound.size,
        "sound_accepts": sound.sum(),
        "v_queries_max": 1,
        "bits_max": bits.max(),
        "v_queries_sound": vq[~y1, n_comp:].sum(),
    }
    assert {k: int(v) for k, v in got.items()} == {k: int(v) for k, v in want.items()}
    assert 0 < want["v_queries_sound"] < vq[~y1, n_comp:].size

    rows = np.flatnonzero(y1)
    costs = jax.jit(honest_costs)(out, rows)
    rounds = np.asarray(out.costs.rounds)
    assert int(costs["v_queries_max"]) == vq[rows].max() == 1 and vq[rows, 0].max() == 0
    assert int(costs["bits_read"]) == bits[rows, 0].max() > int(costs["bits_read_min"])
    assert int(costs["bits_read_min"]) == bits[rows, 0].min()
    assert int(costs["bits_read_max_over_zoo"]) == bits[rows].max()
    assert int(costs["rounds_max_over_zoo"]) == rounds[rows].max()
    assert int(costs["a_steps"]) == T and int(costs["b_steps"]) == T  # honest: consistent
