"""Deterministic debate with cross-examination: Figure 4, Theorem 5.3 (spec DED 6).

A sends a claimed transcript ``a`` of T bits, B names a step t (honest B: the first inconsistent
one), and V recomputes step t's local rule from ``a_{I(t)}`` (at most one oracle query) and
accepts iff it holds and ``a_{T-1} = 1``. A transcript consistent everywhere is the true one, so
completeness is 1 and soundness 0. The bits V reads are counted as in :func:`verify`. Also holds
:class:`DetOutcome`, the outcome of every deterministic debate, and :func:`grid`, which batches a
play function over machines x strategy pairs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from dedebate.machines.configurations import clog2, local_bit, num_deps
from dedebate.machines.program import ORACLE, StepProgram
from dedebate.programs import FASTEST_COMPILE, jit
from dedebate.protocols.costs import Costs
from dedebate.protocols.deterministic_players import (
    Alice,
    Bob,
    alice_cost,
    alice_transcript,
    bob_pointer,
)


@struct.dataclass
class DetOutcome:
    """One deterministic debate (Figures 2-4): verdict and measured costs per role."""

    alice_wins: jax.Array  # V accepts (bool)
    costs: Costs  # the shared Costs (docs/outcomes.md)
    a_steps: jax.Array  # machine steps honest A simulated (0 for a prover that does not simulate)
    b_steps: jax.Array  # machine steps honest B simulated (0 likewise)
    a_message_bits: jax.Array  # total length of A's messages
    # the step V checked (Figure 4) or the index of lo at the final check (Figure 3)
    pointer: jax.Array


def verify(program: StepProgram, a: jax.Array, t: jax.Array):
    """``(accept, bits_read, v_queries)``: V's decision on A's transcript ``a [T]`` at B's step t.

    V reads B's index (``ceil(log2 T)`` bits) and each tape position it looks at -- ``a_t``, the
    ``|I(t)|`` relevant positions and ``a_{T-1}`` (once when ``t = T-1``) -- as one value bit plus
    an address of ``w = ceil(log2(n + T))`` bits::

        bits_read = ceil(log2 T) + (1 + |I(t)| + [t != T-1]) * (1 + w)

    ``v_queries`` is 1 iff step t is an oracle step.
    """
    T, n = program.T, program.n_inputs
    a = a.astype(jnp.int8)
    tape = jnp.concatenate([program.x.astype(jnp.int8), a])
    local_ok = a[t] == local_bit(program, tape, t)
    accept = local_ok & (a[T - 1] == 1)
    w = clog2(n + T)
    reads = 1 + num_deps(program)[t] + jnp.where(t != T - 1, 1, 0)
    bits = jnp.int32(clog2(T)) + reads * (1 + w)
    return accept, bits.astype(jnp.int32), (program.kind[t] == ORACLE).astype(jnp.int32)


def play_cross_exam(program: StepProgram, alice: Alice, bob: Bob) -> DetOutcome:
    """Play one Figure 4 debate (pure; vmap over any argument); ``pointer``: the step V checked.

    ``program`` must pass :func:`~dedebate.machines.configurations.check_deterministic` (checked
    on the host by the caller): a COIN step, or an oracle answer p in (0, 1), would be read as
    the bit ``p >= 1/2``.
    """
    a = alice_transcript(program, alice)
    t, b_steps, b_queries = bob_pointer(program, a, bob)
    accept, bits, vq = verify(program, a, t)
    a_steps, a_queries = alice_cost(program, alice)
    costs = Costs(
        alice_queries=a_queries,
        bob_queries=b_queries,
        verifier_queries=vq,
        bits_read=bits,
        rounds=jnp.int32(1),
    )
    return DetOutcome(
        alice_wins=accept,
        costs=costs,
        a_steps=a_steps,
        b_steps=b_steps,
        a_message_bits=jnp.int32(program.T),
        pointer=t,
    )


def grid(play):
    """``run(machines, alices, bobs)``: ``play`` over M machines x K zipped strategy pairs.

    Jitted with :data:`dedebate.programs.FASTEST_COMPILE` on the CPU backend (the debates are tiny
    and every machine shape compiles anew, so compile time dominates) and XLA's defaults
    elsewhere; the :class:`DetOutcome`'s leaves have shape ``[M, K]``.
    """
    fn = jax.vmap(jax.vmap(play, in_axes=(None, 0, 0)), in_axes=(0, None, None))
    on_cpu, elsewhere = jit(fn, options=FASTEST_COMPILE), jit(fn)

    def run(machines, alices, bobs):
        return (on_cpu if jax.default_backend() == "cpu" else elsewhere)(machines, alices, bobs)

    return run


play_cross_exam_grid = grid(play_cross_exam)
