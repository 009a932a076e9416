"""Figure 4 / Theorem 5.3: deterministic debate with cross-examination (spec DED 6).

1. A sends a claimed transcript ``a in {0,1}^T`` (honest A simulates M once and sends y).
2. B sends a step t (honest B: the first t with ``a_t != g_t(a_{I(t)})``, relevant bits read from
   A's transcript; the last step if there is none).
3. V recomputes I(t) from the fixed dependency table, reads ``a_t`` and ``a_{I(t)}``, evaluates the
   local rule (one oracle query if t is an ORACLE step) and outputs 1 iff the rule holds at t
   **and** ``a_{T-1} = 1`` (dedebate's repair, spec DED 6).

Completeness 1: y is consistent everywhere and ends in 1. Soundness 0: a transcript consistent
everywhere equals y (induction over t), so a lie ending in 1 has an inconsistent step and honest B
finds one.

Costs (``DetOutcome.costs``), counted as in spec DED 3.1 and 6: V reads B's index (``ceil(log2 T)``
bits) and each tape position it looks at -- ``a_t``, the ``|I(t)|`` relevant positions and ``a_{T-1}``
(once when ``t = T-1``) -- as one value bit plus an address of ``w = ceil(log2(n + T))`` bits::

    bits_read = ceil(log2 T) + (1 + |I(t)| + [t != T-1]) * (1 + w)

V makes ``[kind[t] == ORACLE] <= 1`` oracle queries; honest A simulates T steps; honest B checks
steps 0..t* (t* the first inconsistency, all T if none).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from dedebate.machines.configurations import clog2, local_bit, num_deps
from dedebate.machines.program import ORACLE, StepProgram
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
    """One deterministic debate (Figures 2-4): verdict and measured costs per role.

    ``alice_wins``: V accepts. ``costs``: ``rounds`` = A-messages V processed (each answered by
    at most one B message); ``bits_read`` = bits V read (module docstrings give the formulas);
    ``verifier_queries`` = V's oracle queries; ``alice_queries`` / ``bob_queries`` = the honest
    provers' oracle queries (0 for a prover that does not simulate). ``a_steps`` / ``b_steps``:
    machine steps the honest provers simulated (0 for a prover that does not simulate);
    ``a_message_bits``: length of A's messages; ``pointer``: the step V checked (Figure 4) or
    the index of lo at the final check (Figure 3).
    """

    alice_wins: jax.Array
    costs: Costs
    a_steps: jax.Array
    b_steps: jax.Array
    a_message_bits: jax.Array
    pointer: jax.Array


def verify(program: StepProgram, a: jax.Array, t: jax.Array):
    """V's decision on transcript ``a`` at B's step t: ``(accept, bits_read, v_queries)``."""
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
    """One Figure 4 debate on a deterministic program (pure; vmap over any argument)."""
    a = alice_transcript(program, alice)
    t, b_steps, b_queries = bob_pointer(program, a, bob)
    accept, bits, vq = verify(program, a, t)
    a_steps, a_queries = alice_cost(program, alice)
    costs = Costs(alice_queries=a_queries, bob_queries=b_queries, verifier_queries=vq,
                  bits_read=bits, rounds=jnp.int32(1))
    return DetOutcome(alice_wins=accept, costs=costs, a_steps=a_steps, b_steps=b_steps,
                      a_message_bits=jnp.int32(program.T), pointer=t)


# On CPU the debates are tiny and every machine shape needs its own compilation, so compile time
# dominates: XLA's backend optimisation level 0 cuts it for a slower (still millisecond) run.
FAST_COMPILE = {"xla_backend_optimization_level": 0}


def grid(play):
    """``play`` vmapped over machines (axis 0) x zipped strategy pairs (axis 0): outcome[M, K].

    Jitted with :data:`FAST_COMPILE` on the CPU backend and XLA's defaults elsewhere.
    """
    fn = jax.vmap(jax.vmap(play, in_axes=(None, 0, 0)), in_axes=(0, None, None))
    on_cpu, elsewhere = jax.jit(fn, compiler_options=FAST_COMPILE), jax.jit(fn)

    def run(machines, alices, bobs):
        return (on_cpu if jax.default_backend() == "cpu" else elsewhere)(machines, alices, bobs)

    return run


play_cross_exam_grid = grid(play_cross_exam)
