"""Figure 3 / Theorem 5.1 (spec DED 7): configurations, exact completeness / soundness, costs.

Random machines with T = 9 (padded to 16: halting configurations are fixed points), as register
configurations (W = 3, S = 9) and full-tape configurations (W = T, S = 15). Every Figure 3 debate
is vmapped over machines x strategy pairs; every claimed transcript and every message sequence of
a 3-step machine are tried.
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
    configuration_lies,
    det_alice_zoo,
    det_bob_zoo,
    det_honest_alice,
    make_alice,
    make_bob,
    repeat,
)
from dedebate.core.bits import bit_table
from dedebate.machines.configurations import (
    config_machine,
    index_tree,
    local_bits_numpy,
    random_programs,
    simulate_numpy,
)
from dedebate.machines.program import ORACLE
from dedebate.protocols.binary_search import play_binary_search, play_binary_search_grid
from dedebate.protocols.deterministic_players import FIRST, HONEST, LAST, MessageAlice

T, N_IN, W = 9, 2, 3
M, T_PAD = 4, 16


@functools.cache
def population():
    return random_programs(11, 8, T, n_inputs=N_IN, n_deps=(1, 3), dep_window=W, oracle_frac=0.4)


@functools.cache
def suite(window):
    cm = config_machine(population(), window=window)
    key = jax.random.key(5)
    _, bobs = det_bob_zoo(T, M, key, n_random=3, all_fixed=True, protocol="binary_search")
    n_comp = bobs.mode.shape[0]
    _, zoo = det_alice_zoo(T, M, key, n_random=3)
    n_zoo = zoo.flip_raw.shape[0]
    lie_names, lies = configuration_lies(T, M, cm.S, cm.w_c, cm.n)
    every = repeat(make_alice(T), 2**T).replace(flip_raw=bit_table(T).astype(bool))
    liars = concat(zoo, lies, every)
    A = concat(repeat(det_honest_alice(T), n_comp), liars)
    B = concat(bobs, repeat(make_bob("honest"), liars.flip_raw.shape[0]))
    blocks = {
        "comp": slice(0, n_comp),
        "zoo": slice(n_comp, n_comp + n_zoo),
        "lies": slice(n_comp + n_zoo, n_comp + n_zoo + len(lie_names)),
        "every": slice(n_comp + n_zoo + len(lie_names), None),
    }
    return cm, A, B, blocks, lie_names, play_binary_search_grid(cm, A, B)


def outputs():
    return simulate_numpy(population())[:, -1]


@pytest.mark.parametrize("window", [W, None])
def test_completeness_and_soundness_are_exact(window):
    cm, _A, _B, blocks, _, out = suite(window)
    assert (cm.S, cm.T_pad, cm.m) == ((4 + N_IN + (W if window else T)), T_PAD, M)
    acc = np.asarray(out.alice_wins)
    y = outputs()
    comp = acc[y == 1, blocks["comp"]]
    assert comp.shape[1] >= 2**M and comp.all()  # every B bit pattern was tried
    sound = acc[y == 0, blocks["comp"].stop :]
    assert sound.shape[1] > 2**T and not sound.any()
    assert int(np.asarray(out.costs.verifier_queries).max()) <= 1


@pytest.mark.parametrize("window", [W, None])
def test_costs_with_honest_alice_against_every_bob(window):
    """Output 1: full debates, (m+1) S + m bits in m+1 rounds, lo ends where B's bits select.
    Output 0: honest A's final configuration is not accepting, one round of S bits."""
    cm, _A, B, blocks, _, out = suite(window)
    sl = blocks["comp"]
    mode, arg = np.asarray(B.mode)[sl], np.asarray(B.arg)[sl]
    kind = np.asarray(population().kind)
    y1 = outputs() == 1

    def col(name):
        return np.asarray(attrgetter(name)(out))[:, sl]

    want = {
        "costs.bits_read": ((M + 1) * cm.S + M, cm.S),
        "costs.rounds": (M + 1, 1),
        "a_message_bits": ((M + 1) * cm.S, cm.S),
    }
    for name, (full, stopped) in want.items():
        np.testing.assert_array_equal(col(name)[y1], full, err_msg=name)
        np.testing.assert_array_equal(col(name)[~y1], stopped, err_msg=name)
    np.testing.assert_array_equal(col("a_steps"), T)
    np.testing.assert_array_equal(
        col("b_steps")[y1],
        np.broadcast_to(np.where(mode == HONEST, T_PAD - 1, 0), (int(y1.sum()), mode.size)),
    )
    np.testing.assert_array_equal(col("b_steps")[~y1], 0)
    # bit pattern of each B: honest and LAST always say "second half" to a truthful A.
    bits = np.stack(
        [
            np.select([mode == HONEST, mode == LAST, mode == FIRST], [0, 0, 1], (arg >> k) & 1)
            for k in range(M)
        ],
        axis=1,
    )
    lo = ((1 - bits) * (T_PAD >> (np.arange(M) + 1))).sum(1)
    np.testing.assert_array_equal(col("pointer")[y1], np.broadcast_to(lo, (int(y1.sum()), lo.size)))
    q = (lo[None, :] < T) & (kind[:, np.minimum(lo, T - 1)] == ORACLE)
    np.testing.assert_array_equal(col("costs.verifier_queries")[y1], q[y1].astype(int))
    np.testing.assert_array_equal(col("costs.verifier_queries")[~y1], 0)


@pytest.mark.parametrize("window", [W, None])
def test_every_transcript_binary_search_finds_the_first_inconsistent_step(window):
    """Configurations of a claimed transcript a: messages are well-formed, so the debate runs all
    m rounds iff a claims 1. With the full tape, ``Step^h(C_i(a)) = C_{i+h}(a)`` iff a obeys the
    rules on steps i..i+h-1, so honest B's search ends at a's first inconsistent step (a register
    buffer forgets old bits, so there only the costs are exact)."""
    cm, _A, _B, blocks, _, out = suite(window)
    sl = blocks["every"]
    a = bit_table(T) ^ simulate_numpy(population())[:, None, :]  # [machine, code, T]
    y_true = outputs()
    kind = np.asarray(population().kind)
    for i in range(8):
        prog = index_tree(population(), i)
        bad = local_bits_numpy(prog, a[i]) != a[i]
        claims_one = a[i][:, -1] == 1
        first = np.where(bad.any(1), bad.argmax(1), T_PAD - 1)
        rounds = np.where(claims_one, M + 1, 1)
        got = {
            f.rpartition(".")[2]: np.asarray(attrgetter(f)(out))[i, sl]
            for f in (
                "alice_wins",
                "costs.rounds",
                "costs.bits_read",
                "pointer",
                "costs.verifier_queries",
            )
        }
        np.testing.assert_array_equal(got["rounds"], rounds)
        np.testing.assert_array_equal(
            got["bits_read"], np.where(claims_one, (M + 1) * cm.S + M, cm.S)
        )
        assert not got["alice_wins"][bad.any(1) & (y_true[i] == 0)].any()
        if window is not None:
            continue
        np.testing.assert_array_equal(got["alice_wins"], claims_one & ~bad.any(1))
        np.testing.assert_array_equal(got["pointer"][claims_one], first[claims_one])
        q = claims_one & (first < T) & (kind[i, np.minimum(first, T - 1)] == ORACLE)
        np.testing.assert_array_equal(got["verifier_queries"], q.astype(int))


def test_malformed_message_stops_the_debate_with_exact_cost():
    cm, _A, _B, blocks, names, out = suite(W)
    for j, name in enumerate(names):
        if not name.startswith("cfg_input_r"):
            continue
        r = int(name.rsplit("r", 1)[1])  # round of the corrupted input bit (0 = Z')
        k = blocks["lies"].start + j
        np.testing.assert_array_equal(np.asarray(out.costs.rounds)[:, k], r + 1)
        np.testing.assert_array_equal(
            np.asarray(out.costs.bits_read)[:, k], (r + 1) * cm.S + max(r - 1, 0)
        )
        assert not np.asarray(out.alice_wins)[:, k].any()
        assert not np.asarray(out.costs.verifier_queries)[:, k].any()


def test_every_message_sequence_of_a_three_step_machine():
    """The exhaustive adversary: all (2^5)^3 sequences (Z', a_1, a_2) against honest B."""
    progs = random_programs(2, 4, 3, n_inputs=1, n_deps=2, dep_window=2)
    cm = config_machine(progs, window=2)
    assert (cm.S, cm.m, cm.T_pad) == (5, 2, 4)
    seqs = bit_table(15).reshape(-1, 3, 5)
    out = play_binary_search_grid(
        cm, MessageAlice(messages=seqs), repeat(make_bob("honest"), seqs.shape[0])
    )
    acc = np.asarray(out.alice_wins)
    y = simulate_numpy(progs)
    assert not acc[y[:, -1] == 0].any()
    # the honest sequence (configurations of y at 4, 2, 3) is among the accepted ones
    honest = jax.vmap(lambda c, yy: jnp.stack([c.from_transcript(yy, i) for i in (4, 2, 3)]))(
        cm, jnp.asarray(y)
    )
    codes = (np.asarray(honest).reshape(4, 15) << np.arange(15)).sum(1)
    for i in np.flatnonzero(y[:, -1] == 1):
        assert acc[i, codes[i]]
    assert int(np.asarray(out.costs.verifier_queries).max()) <= 1


def test_well_formed_refuses_a_written_slot_at_or_after_the_counter_and_another_input():
    """Spec 3's well-formed configuration: the input is x and, while ``c < W``, every buffer
    slot ``j >= c`` is still 0. Each honest configuration at ``c < W`` is well formed; writing
    any one slot ``j >= c`` or flipping an input bit is not (``j > c`` alone passed every test:
    Figure 3's verdicts do not read well-formedness)."""
    c0 = index_tree(config_machine(population(), window=W), 0)
    y = jnp.asarray(simulate_numpy(population())[0])
    for c in range(W):
        cfg = c0.from_transcript(y, c)
        assert bool(c0.well_formed(cfg))
        for j in range(c, W):
            assert not bool(c0.well_formed(cfg.at[c0.w_c + c0.n + j].set(1))), (c, j)
        assert not bool(c0.well_formed(cfg.at[c0.w_c].set(1 - cfg[c0.w_c]))), c


def test_a_halted_configuration_queries_nothing_even_after_an_oracle_step():
    """A configuration at ``c >= T`` is a fixed point of Step and makes no query, also where the
    last step is an oracle step (every machine the experiments run ends in a DET step)."""
    from dedebate.machines.configurations import run_program
    from dedebate.machines.oracles import table_oracle
    from dedebate.machines.program import DET, make_step_program

    prog = make_step_program(
        [DET, DET, DET, ORACLE],
        [[], [0], [1], [2]],
        table_oracle([0.0, 1.0]),
        rule=[[1], [0, 1], [1, 0], None],
    )
    cm = config_machine(prog)
    end = cm.from_transcript(run_program(prog), 4)
    nxt, queried = cm.step(end)
    assert not bool(queried) and bool(jnp.all(nxt == end))
    _, queried = cm.step(cm.from_transcript(run_program(prog), 3))  # the oracle step itself
    assert bool(queried)


def test_configurations_follow_the_machine_and_halt():
    cm = config_machine(population(), window=W)
    y = simulate_numpy(population())

    @jax.jit
    @jax.vmap
    def trajectory(c, yy):
        def body(cfg, i):
            ok = jnp.all(cfg == c.from_transcript(yy, i)) & c.well_formed(cfg)
            nxt, _ = c.step(cfg)
            return nxt, ok

        last, oks = jax.lax.scan(body, c.init(), jnp.arange(T_PAD + 1))
        end, queries = c.step_n(c.init(), T_PAD)
        return oks, c.acc(end), queries, jnp.all(last == end)

    oks, acc, queries, same = trajectory(cm, jnp.asarray(y))
    assert np.asarray(oks).all() and np.asarray(same).all()
    np.testing.assert_array_equal(np.asarray(acc), y[:, -1] == 1)
    np.testing.assert_array_equal(
        np.asarray(queries), (np.asarray(population().kind) == ORACLE).sum(1)
    )
    one = index_tree(cm, 0)
    bad = np.asarray(one.init()).copy()
    bad[: cm.w_c] = [0, 1, 0, 1]  # counter 10 > T
    wf = jax.jit(type(cm).well_formed)
    assert bool(wf(one, one.init())) and not bool(wf(one, jnp.asarray(bad)))


def test_vmap_grid_equals_per_debate_loop():
    cm, A, B, blocks, _, out = suite(None)
    single = jax.jit(play_binary_search)
    for i in (1, 4):
        for k in (
            0,
            3,
            blocks["zoo"].start + 6,
            blocks["lies"].start + 2,
            blocks["every"].start + 300,
        ):
            one = single(index_tree(cm, i), index_tree(A, k), index_tree(B, k))
            for f in (
                "alice_wins",
                "costs.rounds",
                "costs.bits_read",
                "costs.verifier_queries",
                "b_steps",
                "pointer",
            ):
                get = attrgetter(f)
                assert int(get(one)) == int(np.asarray(get(out))[i, k]), f


def test_window_must_cover_every_dependency():
    with pytest.raises(ValueError, match="window=2"):
        config_machine(population(), window=2)
    with pytest.raises(ValueError, match="window=10"):
        config_machine(population(), window=10)


@pytest.mark.parametrize("window", [W, None])
def test_the_simplest_liar_flips_only_the_final_configurations_output_bit(window):
    """``z_output_only`` (T = 9, not a power of two): on an output-0 machine its Z' is honest
    A's but for one bit, and that bit makes Z' accepting; then honest B's bisection finds it."""
    from dedebate.protocols.deterministic_players import alice_config, alice_transcript

    cm, A, _B, blocks, lie_names, out = suite(window)
    i = blocks["lies"].start + lie_names.index("z_output_only")
    liar = jax.tree.map(lambda x: x[i], A)
    honest = make_alice(T)
    y0 = np.flatnonzero(outputs() == 0)
    for j in y0:
        one = jax.tree.map(lambda x, j=j: x[j], cm)
        z = [
            np.asarray(alice_config(one, a, alice_transcript(one.program, a), 0, one.T_pad))
            for a in (honest, liar)
        ]
        assert int((z[0] != z[1]).sum()) == 1
        assert not bool(one.acc(z[0])) and bool(one.acc(z[1]))
    assert not np.asarray(out.alice_wins)[y0, i].any()
