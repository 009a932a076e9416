"""Figure 2 + 4 / Theorem 7.1 (spec DED 8): NP^O debates with a witness, exact c = 1 / s = 0.

Membership of every instance is decided by enumerating all 2^8 witnesses, both with the numpy
reference simulator and directly from the task's definition (the oracle table read by hand).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from dedebate.agents.deterministic_grids import witness_suite
from dedebate.agents.deterministic_players import (
    concat,
    det_alice_zoo,
    det_bob_zoo,
    det_honest_alice,
    make_bob,
    repeat,
)
from dedebate.machines.configurations import clog2, index_tree, run_program
from dedebate.machines.program import ORACLE
from dedebate.protocols import det_witness
from dedebate.protocols.cross_exam import play_cross_exam_grid
from dedebate.protocols.det_witness import (
    MAX_WITNESS_BITS,
    accepting_witnesses,
    all_witnesses,
    constraint_task,
    plan_task,
    play_witness,
    witness_programs,
)

K, C, B = 4, 2, 2  # plan: 4 actions of 2 bits, 2 context bits per step
TYPE_BITS = 2  # constraint_task's default c: type bits per clause


@functools.cache
def tasks():
    return {"plan": plan_task(1, 4, k=K, c=C, b=B), "constraints": constraint_task(1, 4)}


@functools.cache
def grid(name):
    task = tasks()[name]
    T = task.program.T
    key = jax.random.key(9)
    _, bobs = det_bob_zoo(T, clog2(T), key, n_random=2, all_fixed=True)
    _, liars = det_alice_zoo(T, clog2(T), key, n_random=2)
    n_comp = bobs.mode.shape[0]
    A = concat(repeat(det_honest_alice(T), n_comp), liars)
    Bb = concat(bobs, repeat(make_bob("honest"), liars.flip_raw.shape[0]))
    ws = all_witnesses(task.n_w)
    out = play_cross_exam_grid(witness_programs(task, ws), A, Bb)
    return A, Bb, n_comp, out


def plan_valid_by_definition(task) -> np.ndarray:
    """w is a valid plan iff the judge approves every (context_i, action_i, parity so far)."""
    table = np.asarray(task.program.oracle.table)[0]
    xs = np.asarray(task.program.x)[:, : task.n_x]
    ws = all_witnesses(task.n_w)
    valid = np.ones((xs.shape[0], ws.shape[0]), bool)
    for i in range(K):
        state = ws[:, : i * B].sum(1) % 2
        for r, x in enumerate(xs):
            bits = np.concatenate(
                [
                    np.broadcast_to(x[i * C : (i + 1) * C], (ws.shape[0], C)),
                    ws[:, i * B : (i + 1) * B],
                    state[:, None],
                ],
                axis=1,
            )
            valid[r] &= table[(bits << np.arange(bits.shape[1])).sum(1)] == 1
    return valid


def constraints_valid_by_definition(task) -> np.ndarray:
    """w is valid iff the judge approves every clause: each oracle step's query, its type bits
    (deps < n_x) and its variables (w at deps - n_x), reads 1 in the table."""
    prog = task.program
    table = np.asarray(prog.oracle.table)[0]
    kind, deps, mask = (np.asarray(a)[0] for a in (prog.kind, prog.deps, prog.dep_mask))
    xs, ws = np.asarray(prog.x)[:, : task.n_x], all_witnesses(task.n_w)
    valid = np.ones((xs.shape[0], ws.shape[0]), bool)
    for t in np.flatnonzero(kind == ORACLE):
        d = deps[t][mask[t]]
        for r, x in enumerate(xs):
            bits = np.concatenate(
                [
                    np.broadcast_to(x[d[d < task.n_x]], (ws.shape[0], int((d < task.n_x).sum()))),
                    ws[:, d[d >= task.n_x] - task.n_x],
                ],
                axis=1,
            )
            valid[r] &= table[(bits << np.arange(bits.shape[1])).sum(1)] == 1
    return valid


def test_instances_are_balanced_and_membership_is_exact():
    for name, task in tasks().items():
        valid = accepting_witnesses(task)
        assert valid.any(1).tolist().count(True) == 2 and valid.shape == (4, 2**task.n_w), name
        ws = all_witnesses(task.n_w)
        progs = witness_programs(task, ws)
        y = np.asarray(jax.jit(jax.vmap(run_program))(progs))[:, -1]
        np.testing.assert_array_equal(y.reshape(valid.shape), valid.astype(np.int8))
    np.testing.assert_array_equal(
        accepting_witnesses(tasks()["plan"]), plan_valid_by_definition(tasks()["plan"])
    )
    # every clause satisfied (a chain that read the previous clause for the previous acc made a
    # yes-instance of the last two clauses alone, and passed everything)
    cons = tasks()["constraints"]
    np.testing.assert_array_equal(accepting_witnesses(cons), constraints_valid_by_definition(cons))


def test_each_clause_reads_its_type_bits_and_three_distinct_variables():
    """The constraint task's oracle step j reads x's type bits of clause j, then 3 distinct
    variables of w (its docstring); on each yes-instance some witnesses fail, so the witness is
    read (a clause reading x instead of w made every witness valid and passed)."""
    task = tasks()["constraints"]
    prog = index_tree(task.program, 0)
    kind, deps, mask = (np.asarray(a) for a in (prog.kind, prog.deps, prog.dep_mask))
    oracle = np.flatnonzero(kind == ORACLE)
    assert oracle.size == 8
    for j, t in enumerate(oracle):
        d = deps[t][mask[t]]
        assert d[:TYPE_BITS].tolist() == [j * TYPE_BITS + i for i in range(TYPE_BITS)], (j, d)
        scope = d[TYPE_BITS:] - task.n_x
        assert scope.size == 3 == np.unique(scope).size, (j, d)
        assert ((scope >= 0) & (scope < task.n_w)).all(), (j, d)
    for name, task in tasks().items():
        valid = accepting_witnesses(task)
        counts = valid[valid.any(1)].sum(1)
        assert ((counts > 0) & (counts < 2**task.n_w)).all(), (name, counts)


def test_sixteen_witness_bits_are_allowed_and_seventeen_refused():
    """Up to MAX_WITNESS_BITS = 16 bits, as documented: every witness enumerated, a task built."""
    assert MAX_WITNESS_BITS == 16
    ws = all_witnesses(16)
    assert ws.shape == (2**16, 16) and (ws[5, :4] == [1, 0, 1, 0]).all()
    rng = np.random.default_rng(0)
    clauses, table = np.array([[0, 1, 2]] * 2), (rng.random(2**5) < 0.5).astype(np.float32)
    st = det_witness._constraint_structure(16, clauses, 2)
    det_witness._build(st, table, rng.integers(0, 2, size=(1, 4)), 1)  # no error
    with pytest.raises(ValueError, match=r"^witness length 17: at most 16 bits"):
        det_witness._build(det_witness._constraint_structure(17, clauses, 2), table, ws[:1, :4], 1)


@pytest.mark.parametrize("name", ["plan", "constraints"])
def test_witness_suite_counts_follow_from_the_task(name):
    """The experiment's summary of a task, each count from its definition: every witness of
    every no-instance meets every liar, every valid witness meets every B; Figure 2's round plus
    Figure 4's one; the query length l = c + b + 1 (plan) or c + 3 (constraints); Theorem 7.1's
    bits bound, attained (a fixed B stops at a non-final oracle step with l dependencies)."""
    task = tasks()[name]
    A, Bb, n_comp, _ = grid(name)
    st = witness_suite(task, (A, Bb, n_comp))
    valid = accepting_witnesses(task)
    yes = valid.any(1)
    n_liars = A.flip_raw.shape[0] - n_comp
    assert st["sound_debates"] == int((~yes).sum()) * 2**task.n_w * n_liars
    assert st["comp_debates"] == int(valid.sum()) * n_comp
    assert (st["valid"], st["n_comp"]) == (int(valid.sum()), n_comp)  # the coverage row's terms
    assert (st["yes"], st["no"], st["witnesses"]) == (2, 2, 2**task.n_w)
    assert st["rounds"] == 2 and st["a_steps_max"] == task.program.T
    assert st["valid_min"] == min(int(valid[i].sum()) for i in np.flatnonzero(yes))
    l = {"plan": C + B + 1, "constraints": TYPE_BITS + 3}[name]
    T, n = task.program.T, task.program.n_inputs
    assert st["l"] == l and st["bits_bound"] == clog2(T) + (l + 2) * (1 + clog2(n + T))
    assert st["bits_max"] == st["bits_bound"]


@pytest.mark.parametrize("name", ["plan", "constraints"])
def test_completeness_over_valid_witnesses_soundness_over_every_witness(name):
    task = tasks()[name]
    A, _Bb, n_comp, out = grid(name)
    valid = accepting_witnesses(task)
    yes = valid.any(1)
    acc = np.asarray(out.alice_wins).reshape(4, -1, A.flip_raw.shape[0])  # [instance, w, pair]
    comp = acc[:, :, :n_comp][valid]  # honest A with any valid witness, every B
    assert comp.size >= 2 * task.program.T and comp.all()
    sound = acc[~yes][:, :, n_comp:]  # every witness of a no-instance, every liar
    assert sound.size == 2 * 2**task.n_w * (A.flip_raw.shape[0] - n_comp) and not sound.any()
    # a yes-instance with an invalid witness is also rejected against honest B
    assert not acc[yes][~valid[yes]][:, n_comp:].any()


@pytest.mark.parametrize("name", ["plan", "constraints"])
def test_costs_follow_the_cross_examination_formula(name):
    task = tasks()[name]
    _A, _Bb, _n_comp, out = grid(name)
    T, n = task.program.T, task.program.n_inputs
    prog = index_tree(task.program, 0)
    ndeps = np.asarray(prog.dep_mask).sum(1)
    t = np.asarray(out.pointer)
    w = clog2(n + T)
    np.testing.assert_array_equal(
        np.asarray(out.costs.bits_read), clog2(T) + (1 + ndeps[t] + (t != T - 1)) * (1 + w)
    )
    kind = np.asarray(prog.kind)
    np.testing.assert_array_equal(
        np.asarray(out.costs.verifier_queries), (kind[t] == ORACLE).astype(int)
    )
    np.testing.assert_array_equal(np.asarray(out.a_steps), T)  # Ptime O(T): one simulation
    assert int(np.asarray(out.costs.verifier_queries).max()) == 1


def test_single_witness_debate_equals_the_grid_entry():
    task = tasks()["constraints"]
    A, Bb, n_comp, out = grid("constraints")
    ws = all_witnesses(task.n_w)
    valid = accepting_witnesses(task)
    play = jax.jit(play_witness)
    i = int(np.flatnonzero(valid.any(1))[0])
    j = int(np.flatnonzero(valid[i])[0])
    for k in (0, n_comp - 1, n_comp + 2):
        one = play(index_tree(task, i), ws[j], index_tree(A, k), index_tree(Bb, k))
        row = i * ws.shape[0] + j
        assert bool(one.alice_wins) == bool(np.asarray(out.alice_wins)[row, k])
        assert int(one.costs.bits_read) == int(np.asarray(out.costs.bits_read)[row, k])
        assert int(one.costs.rounds) == 2 and int(one.a_message_bits) == task.n_w + task.program.T


def test_task_arguments_are_validated():
    with pytest.raises(ValueError, match="density=1.0"):
        plan_task(0, 4, density=1.0)  # every plan approved: no no-instance exists
    with pytest.raises(ValueError, match="v=2"):
        constraint_task(0, 4, v=2)
    with pytest.raises(ValueError, match="n_w=17"):
        all_witnesses(17)
