"""Debate grids judged in JAX: machines x strategy pairs, completeness / soundness counts and
costs (spec DED 6, 7, 8).

A grid is a population of machines against the zipped strategy pairs of
:func:`~dedebate.agents.deterministic_players.zoo_pairs` (honest A against the B zoo, then the A
zoo against honest B). :func:`grid_cells` marks its judged cells, :func:`play_grid` plays it
(vmapped, pure), :func:`judged_counts` and :func:`honest_costs` summarise an outcome grid as int32
scalars (usable inside a jitted, swept function). :func:`witness_suite` is the host-side grid of the
witness variant (Figure 2+4, every witness of every instance).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.deterministic_players import judge_grid
from dedebate.machines.configurations import check_deterministic, clog2
from dedebate.machines.program import StepProgram
from dedebate.protocols.binary_search import play_binary_search
from dedebate.protocols.cross_exam import play_cross_exam, play_cross_exam_grid
from dedebate.protocols.det_witness import accepting_witnesses, all_witnesses, witness_programs


def grid_cells(machines, pairs, y1):
    """One judged grid: ``machines`` [M], ``A``, ``B`` (K pairs), bool [M, K] ``comp``, ``sound``.

    Completeness cells are the honest-A pairs (the first ``n_comp`` of ``pairs``) on the machines
    where ``y1``; soundness cells the honest-B pairs on the others. A :class:`StepProgram` with a
    COIN step or a non-0/1 oracle is refused (``ValueError``): the protocols read ``p >= 1/2`` as
    the step's bit, so a random machine would be judged as a deterministic one.
    """
    if isinstance(machines, StepProgram):
        check_deterministic(machines)
    A, B, n_comp = pairs
    k = np.arange(np.asarray(B.mode).shape[0]) < n_comp
    return {
        "machines": machines,
        "A": A,
        "B": B,
        "comp": y1[:, None] & k[None, :],
        "sound": ~y1[:, None] & ~k[None, :],
    }


def play_grid(play):
    """``grid(machines, alices, bobs) -> outcome[M, K]``: ``play`` over machines x pairs."""
    return jax.vmap(jax.vmap(play, in_axes=(None, 0, 0)), in_axes=(0, None, None))


GRID_PLAY = {"fig4": play_grid(play_cross_exam), "fig3": play_grid(play_binary_search)}
"""The unjitted grids of Figure 4 (cross-examination) and Figure 3 (binary search)."""


def judged_counts(out, g):
    """int32 ``comp_debates``, ``comp_accepts``, ``sound_debates``, ``sound_accepts``,
    ``v_queries_max``, ``bits_max`` and ``v_queries_sound`` (soundness debates where V queried) of
    an outcome grid.
    """
    i32 = jnp.int32
    return {
        "comp_debates": jnp.sum(g["comp"], dtype=i32),
        "comp_accepts": jnp.sum(out.alice_wins & g["comp"], dtype=i32),
        "sound_debates": jnp.sum(g["sound"], dtype=i32),
        "sound_accepts": jnp.sum(out.alice_wins & g["sound"], dtype=i32),
        "v_queries_max": jnp.max(out.costs.verifier_queries),
        "bits_max": jnp.max(out.costs.bits_read),
        # soundness debates in which V queried the oracle (honest B pointed at an ORACLE
        # step); the honest debates check the last step, which is DET
        "v_queries_sound": jnp.sum(jnp.where(g["sound"], out.costs.verifier_queries, 0), dtype=i32),
    }


def honest_costs(out, rows):
    """Costs of the honest debate (pair 0) on the machines ``rows`` and the worst over the zoo.

    The honest debate's largest ``rounds``, ``bits_read``, ``a_message_bits``, ``a_steps``,
    ``b_steps`` and smallest ``bits_read_min``; over every pair ``rounds_max_over_zoo``,
    ``bits_read_max_over_zoo`` and ``v_queries_max``.
    """
    c = out.costs
    h = {
        "rounds": c.rounds[rows, 0],
        "bits_read": c.bits_read[rows, 0],
        **{k: getattr(out, k)[rows, 0] for k in ("a_message_bits", "a_steps", "b_steps")},
    }
    return {
        "rounds": jnp.max(h["rounds"]),
        "bits_read": jnp.max(h["bits_read"]),
        "bits_read_min": jnp.min(h["bits_read"]),
        "rounds_max_over_zoo": jnp.max(c.rounds[rows]),
        "bits_read_max_over_zoo": jnp.max(c.bits_read[rows]),
        "v_queries_max": jnp.max(c.verifier_queries[rows]),
        "a_message_bits": jnp.max(h["a_message_bits"]),
        "a_steps": jnp.max(h["a_steps"]),
        "b_steps": jnp.max(h["b_steps"]),
    }


def witness_suite(task, pairs) -> dict:
    """The witness debate (Figure 2+4) over every instance and witness of a task (host side).

    Every (instance, witness) pair of ``task`` is one machine of a Figure 4 grid; completeness is
    judged over every valid witness, soundness over every witness of every no-instance (spec DED 8).
    Returns :func:`~dedebate.agents.deterministic_players.judge_grid`'s counts plus ``yes``, ``no``,
    ``witnesses``, ``T``, ``n``, ``l``, ``bits_bound`` (Theorem 7.1), ``a_steps_max``, ``rounds``,
    ``valid_min`` (fewest valid witnesses of a yes-instance), ``valid`` (all of them) and
    ``n_comp`` (the Bs each valid witness meets).
    """
    T, n = task.program.T, task.program.n_inputs
    ws = all_witnesses(task.n_w)
    valid = accepting_witnesses(task)  # [I, 2^n_w], exact
    yes = valid.any(axis=1)
    A, B, nc = pairs
    out = play_cross_exam_grid(witness_programs(task, ws), A, B)
    comp_mask = valid.reshape(-1)  # honest A holds a valid witness
    sound_mask = np.repeat(~yes, ws.shape[0])  # a liar may send any witness of a no-instance
    st = judge_grid(out, nc, valid.reshape(-1).astype(np.int8), comp_mask, sound_mask)
    # Theorem 7.1 costs: honest A simulates T steps; V reads <= ceil(log2 T) + (l + 2)(1 + w).
    l_max = int(np.asarray(task.program.dep_mask).sum(-1).max())
    st.update(
        yes=int(yes.sum()),
        no=int((~yes).sum()),
        witnesses=int(ws.shape[0]),
        T=T,
        n=n,
        l=l_max,
        bits_bound=clog2(T) + (l_max + 2) * (1 + clog2(n + T)),
        a_steps_max=int(np.asarray(out.a_steps).max()),
        rounds=int(np.asarray(out.costs.rounds).max()) + 1,
        valid_min=int(valid[yes].sum(axis=1).min()) if yes.any() else 0,
        valid=int(valid.sum()),
        n_comp=int(nc),
    )
    return st
