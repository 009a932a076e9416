"""Debate with a witness for NP^O: Figure 2 + Figure 4, Theorem 7.1 (spec DED 8).

``x in L`` iff some witness w has ``M^O(x, w) = 1``. A sends w, then the cross-examination
debate (:mod:`dedebate.protocols.cross_exam`) runs on ``M(x, w)``, whose input tape is
``[x, w]``; completeness 1 and soundness 0 carry over for every fixed w. Costs are Figure 4's with
``n = |x| + |w|`` inputs, one more round and ``|w|`` more bits from A. Two NP^O task families
built as step programs with a 0/1 oracle table (:func:`plan_task`, :func:`constraint_task`; spec
DED 8.2), exact membership by enumerating witnesses, and a batch layout of every (instance,
witness) pair for :data:`~dedebate.protocols.cross_exam.play_cross_exam_grid`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.bits import bit_table
from dedebate.machines.configurations import check_deterministic, simulate_numpy
from dedebate.machines.oracles import table_oracle
from dedebate.machines.program import DET, ORACLE, StepProgram, make_step_program
from dedebate.protocols.cross_exam import DetOutcome, play_cross_exam
from dedebate.protocols.deterministic_players import Alice, Bob

MAX_WITNESS_BITS = 16
CANDIDATES = 16  # random instances drawn per requested instance, to pick half yes / half no
ATTEMPTS = 20  # judges drawn before giving up on a balanced set of instances


@struct.dataclass
class WitnessTask:
    """An NP^O instance (or a batch of them on axis 0)."""

    program: StepProgram  # the step program reading the tape [x, w]; its stored w part is ignored
    n_w: int = struct.field(pytree_node=False)  # witness length in bits (static)

    @property
    def n_x(self) -> int:
        """Length of the instance part x of the input tape."""
        return self.program.n_inputs - self.n_w


def with_witness(task: WitnessTask, w: jax.Array) -> StepProgram:
    """``M(x, w)``: one task's program with the 0/1 witness ``w [n_w]`` written on its input."""
    x = task.program.x[: task.n_x].astype(jnp.int8)
    return dataclasses.replace(task.program, x=jnp.concatenate([x, w.astype(jnp.int8)]))


def play_witness(task: WitnessTask, w: jax.Array, alice: Alice, bob: Bob) -> DetOutcome:
    """One witness debate: A's witness w, then Figure 4 on ``M(x, w)`` (+1 round, +n_w bits)."""
    out = play_cross_exam(with_witness(task, w), alice, bob)
    costs = dataclasses.replace(out.costs, rounds=out.costs.rounds + 1)
    return dataclasses.replace(out, costs=costs, a_message_bits=out.a_message_bits + task.n_w)


def all_witnesses(n_w: int) -> np.ndarray:
    """Every witness of ``n_w <= MAX_WITNESS_BITS`` bits: int8 ``[2^n_w, n_w]``, little-endian."""
    if not 0 <= n_w <= MAX_WITNESS_BITS:
        raise ValueError(f"n_w={n_w}: exhaustive witnesses need 0 <= n_w <= {MAX_WITNESS_BITS}")
    return bit_table(n_w)


def witness_programs(task: WitnessTask, ws) -> StepProgram:
    """``M(x_i, w_j)`` for I instances and witnesses ``ws [J, n_w]``: I * J programs (host)."""
    ws = np.asarray(ws, np.int8)
    J = ws.shape[0]
    prog = task.program
    if np.ndim(prog.kind) != 2:
        raise ValueError("task: witness_programs needs a task batched over instances (axis 0)")
    I = np.shape(prog.kind)[0]
    rep = jax.tree.map(lambda v: np.repeat(np.asarray(v), J, axis=0), prog)
    x = np.asarray(prog.x)[:, : task.n_x]
    xw = np.concatenate([np.repeat(x, J, axis=0), np.tile(ws, (I, 1))], axis=1)
    return rep.replace(x=xw.astype(np.int8))


def accepting_witnesses(task: WitnessTask) -> np.ndarray:
    """Exact membership, bool ``[I, 2^n_w]``: which witnesses make ``M(x_i, w) = 1``."""
    ws = all_witnesses(task.n_w)
    out = simulate_numpy(witness_programs(task, ws))[:, -1]
    return out.reshape(-1, ws.shape[0]) == 1


@dataclasses.dataclass(frozen=True)
class _Structure:
    kind: list
    deps: list
    rule: list
    n_x: int
    n_w: int


def _and_rule(width: int) -> np.ndarray:
    return np.asarray(bit_table(width).all(axis=1), np.int8)


def _parity_rule(width: int) -> np.ndarray:
    return np.asarray(bit_table(width).sum(axis=1) % 2, np.int8)


def _plan_structure(k: int, c: int, b: int) -> _Structure:
    n_x, n_w = k * c, k * b
    kind: list[int] = []
    deps: list[list[int]] = []
    rule: list[np.ndarray | None] = []
    n = n_x + n_w
    for i in range(k):
        base = 3 * i
        xs = [i * c + j for j in range(c)]
        ws = [n_x + i * b + j for j in range(b)]
        state = [n + base - 2] if i > 0 else []  # s_i, written at step 3(i-1)+1
        kind.append(ORACLE)  # ok_i = O(x_i, w_i, s_i)
        deps.append(xs + ws + state)
        rule.append(None)
        kind.append(DET)  # s_{i+1} = parity(w_i) xor s_i
        deps.append(ws + state)
        rule.append(_parity_rule(len(ws + state)))
        kind.append(DET)  # acc_i = ok_i and acc_{i-1}
        prev = [n + base - 1] if i > 0 else []
        deps.append([n + base] + prev)
        rule.append(_and_rule(1 + len(prev)))
    return _Structure(kind, deps, rule, n_x, n_w)


def _constraint_structure(v: int, clauses: np.ndarray, c: int) -> _Structure:
    C = clauses.shape[0]
    n_x, n_w = C * c, v
    n = n_x + n_w
    kind: list[int] = []
    deps: list[list[int]] = []
    rule: list[np.ndarray | None] = []
    for j in range(C):
        kind.append(ORACLE)  # sat_j = O(type_j, w_{clause j})
        deps.append([j * c + i for i in range(c)] + [n_x + int(u) for u in clauses[j]])
        rule.append(None)
        kind.append(DET)  # acc_j = sat_j and acc_{j-1}
        prev = [n + 2 * j - 1] if j > 0 else []
        deps.append([n + 2 * j] + prev)
        rule.append(_and_rule(1 + len(prev)))
    return _Structure(kind, deps, rule, n_x, n_w)


def _build(
    st: _Structure, table: np.ndarray, xs: np.ndarray, n_instances: int
) -> WitnessTask | None:
    """Tasks from the rows of ``xs``, half yes and half no (None if too few of either)."""
    # Every instance shares the structure and the oracle, so the program is built once and only x
    # varies along axis 0. Membership is exact (every witness is tried).
    if st.n_w > MAX_WITNESS_BITS:
        raise ValueError(
            f"witness length {st.n_w}: at most {MAX_WITNESS_BITS} bits "
            "(membership is decided by enumerating every witness)"
        )
    one = make_step_program(
        st.kind, st.deps, table_oracle(table), st.rule, x=np.zeros(st.n_x + st.n_w, np.int8)
    )
    check_deterministic(one)
    xs = np.asarray(xs, np.int8)
    pool = jax.tree.map(lambda v: np.broadcast_to(np.asarray(v), (xs.shape[0],) + np.shape(v)), one)
    pool = WitnessTask(
        program=pool.replace(
            x=np.concatenate([xs, np.zeros((xs.shape[0], st.n_w), np.int8)], axis=1)
        ),
        n_w=st.n_w,
    )
    yes = accepting_witnesses(pool).any(axis=1)
    n_yes = (n_instances + 1) // 2
    pick_yes, pick_no = np.flatnonzero(yes)[:n_yes], np.flatnonzero(~yes)[: n_instances - n_yes]
    if pick_yes.size < n_yes or pick_no.size < n_instances - n_yes:
        return None
    rows = np.sort(np.concatenate([pick_yes, pick_no]))
    prog = jax.tree.map(lambda v: np.ascontiguousarray(np.asarray(v)[rows]), pool.program)
    return WitnessTask(program=prog, n_w=st.n_w)


def plan_task(
    seed: int, n_instances: int, k: int = 4, c: int = 2, b: int = 2, density: float = 0.3
) -> WitnessTask:
    """Plan instances: a plan of k actions of b bits, each approved by a random 0/1 judge.

    Step i's action is judged by the oracle on (the instance's c context bits for step i, the
    action, a state bit = parity of the earlier actions); x is in L iff some plan has every action
    approved. The judge approves each query with probability ``density`` and is redrawn until the
    candidates hold both yes and no instances; context bits are uniform. Query length
    ``l = c + b + 1``.
    """
    if k < 1 or c < 0 or b < 1:
        raise ValueError(f"k={k}, c={c}, b={b}: need k >= 1 plan steps, c >= 0, b >= 1")
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density={density}: a probability in [0, 1]")
    rng = np.random.default_rng(seed)
    st = _plan_structure(k, c, b)
    for _ in range(ATTEMPTS):
        table = (rng.random(2 ** (c + b + 1)) < density).astype(np.float32)
        xs = rng.integers(0, 2, size=(CANDIDATES * n_instances, k * c))
        task = _build(st, table, xs, n_instances)
        if task is not None:
            return task
    raise ValueError(
        f"density={density}: no judge among {ATTEMPTS} draws gave both yes and no "
        "instances; choose a density nearer 1/2"
    )


def constraint_task(
    seed: int, n_instances: int, v: int = 8, n_clauses: int = 8, c: int = 2, density: float = 0.6
) -> WitnessTask:
    """Constraint instances: v boolean variables, clauses on 3 variables judged by a 0/1 oracle.

    Clause j reads 3 distinct variables (random, fixed); its ``c`` type bits come from x, and the
    judge accepts each (type, values) query with probability ``density``; x is in L iff some
    assignment satisfies every clause. Scopes and judge are redrawn until the candidates hold both
    yes and no instances. Query length ``l = c + 3``.
    """
    if v < 3 or n_clauses < 1 or c < 0:
        raise ValueError(
            f"v={v}, n_clauses={n_clauses}, c={c}: need v >= 3, n_clauses >= 1, c >= 0"
        )
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density={density}: a probability in [0, 1]")
    rng = np.random.default_rng(seed)
    for _ in range(ATTEMPTS):
        clauses = np.stack([rng.choice(v, size=3, replace=False) for _ in range(n_clauses)])
        table = (rng.random(2 ** (c + 3)) < density).astype(np.float32)
        xs = rng.integers(0, 2, size=(CANDIDATES * n_instances, n_clauses * c))
        task = _build(_constraint_structure(v, clauses, c), table, xs, n_instances)
        if task is not None:
            return task
    raise ValueError(
        f"density={density}: no judge among {ATTEMPTS} draws gave both yes and no "
        "instances; choose a density nearer the satisfiability threshold"
    )
