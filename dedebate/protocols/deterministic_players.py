"""The deterministic debates' player interface (spec DED 6, 7, 8): strategy pytrees and moves.

Strategies are data (``flax.struct`` pytrees), so one compiled debate vmaps over a batch of
them. :class:`Alice` simulates M once and may lie in several ways; :class:`MessageAlice` gives
Figure 3's messages outright (against the deterministic honest B every adaptive strategy equals
one such sequence, so enumerating them is the exhaustive adversary); :class:`Bob` plays one of
the modes of :data:`BOB_MODES`. The move functions compute each role's message and the honest
provers' costs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.machines.configurations import ConfigMachine, consistency, run_program
from dedebate.machines.program import ORACLE, StepProgram

HONEST, RANDOM, LAST, FIRST, FIXED = 0, 1, 2, 3, 4
BOB_MODES = {"honest": HONEST, "random": RANDOM, "last": LAST, "first": FIRST, "fixed": FIXED}
Scalar = jax.Array | np.integer | np.bool_  # a scalar leaf: numpy when built, traced in play


@struct.dataclass
class Alice:
    """A transcript-based prover: she simulates M once and may lie. All zeros / -1 is honest."""

    # flip these answers *during* the simulation (later steps read the flipped bit: a locally
    # consistent transcript built from wrong answers)
    flip_prop: jax.Array  # bool[T]
    flip_raw: jax.Array  # bool[T]: flip these bits afterwards (inconsistent bits)
    # flip the answer of the first ORACLE step at or after this index (-1: no wrong oracle answer)
    prop_oracle_from: Scalar  # int32
    force_last: Scalar  # bool: set a_{T-1} = 1 (claim acceptance)
    # in Figure 3 (her claimed transcript's configurations), corrupt the message of this round
    # (0 = the final configuration Z', k >= 1 = the midpoint of round k; -1: honest) into the
    # configuration ``lie_shift`` steps from the right index with bit ``lie_flip`` flipped (-1:
    # none)
    lie_round: Scalar  # int32
    lie_shift: Scalar  # int32
    lie_flip: Scalar  # int32


@struct.dataclass
class MessageAlice:
    """Figure 3 messages given explicitly."""

    messages: jax.Array  # int8[m + 1, S]: messages[0] = Z', messages[k] = round k's midpoint


@struct.dataclass
class Bob:
    """B's strategy.

    ``mode`` (a value of :data:`BOB_MODES`) HONEST (Figure 4: the first locally inconsistent step
    of A's transcript, else the last step; Figure 3: keep the invariant "the current claim is
    false"), LAST (the last step / always "second half"), FIRST (step 0 / always "first half"),
    FIXED (step ``arg mod T``; bits ``(arg >> k) & 1``) or RANDOM, which plays like FIXED with a
    uniformly random 30-bit ``arg`` drawn from an explicit key when the strategy is built (a
    randomised strategy is a distribution over fixed ones; drawing it up front keeps the PRNG out
    of the compiled debate).
    """

    mode: Scalar  # int32
    arg: Scalar  # int32


# -- Alice -----------------------------------------------------------------------------------------
def alice_transcript(program: StepProgram, alice: Alice) -> jax.Array:
    """A's claimed transcript (the honest run y when she is honest)."""
    T = program.T
    ts = jnp.arange(T)
    is_orc = (program.kind == ORACLE) & (ts >= alice.prop_oracle_from)
    first_orc = jnp.argmax(is_orc)
    wrong = (alice.prop_oracle_from >= 0) & jnp.any(is_orc) & (ts == first_orc)
    a = run_program(program, alice.flip_prop | wrong)
    a = a ^ alice.flip_raw.astype(jnp.int8)
    return jnp.where(alice.force_last & (ts == T - 1), jnp.int8(1), a)


def alice_config(cm: ConfigMachine, alice, a: jax.Array | None, rnd, index) -> jax.Array:
    """A's Figure 3 message in round ``rnd``, whose honest value is configuration ``index``."""
    if isinstance(alice, MessageAlice):
        return alice.messages[rnd]
    assert a is not None  # only a MessageAlice plays without the transcript
    lie = alice.lie_round == rnd
    i = jnp.clip(index + jnp.where(lie, alice.lie_shift, 0), 0, cm.T_pad)
    cfg = cm.from_transcript(a, i)
    flip = lie & (alice.lie_flip >= 0) & (jnp.arange(cm.S) == alice.lie_flip)
    return cfg ^ flip.astype(jnp.int8)


def alice_cost(program: StepProgram, alice) -> tuple[jax.Array, jax.Array]:
    """Costs of a transcript-based A: one run of M (zero for a :class:`MessageAlice`)."""
    if isinstance(alice, MessageAlice):
        return jnp.int32(0), jnp.int32(0)
    return jnp.int32(program.T), jnp.sum(program.kind == ORACLE).astype(jnp.int32)


# -- Bob -------------------------------------------------------------------------------------------
def bob_pointer(program: StepProgram, a: jax.Array, bob: Bob):
    """Figure 4: B's step t, with the costs of the honest scan."""
    T = program.T
    bad = ~consistency(program, a)
    any_bad = jnp.any(bad)
    first = jnp.argmax(bad).astype(jnp.int32)
    honest_t = jnp.where(any_bad, first, T - 1)
    checked = jnp.where(any_bad, first + 1, T)
    queries = jnp.sum((program.kind == ORACLE) & (jnp.arange(T) < checked)).astype(jnp.int32)
    t = jnp.select(
        [bob.mode == HONEST, bob.mode == LAST, bob.mode == FIRST],
        [honest_t, jnp.int32(T - 1), jnp.int32(0)],
        jnp.mod(bob.arg, T),
    ).astype(jnp.int32)
    honest = bob.mode == HONEST
    return t, jnp.where(honest, checked, 0), jnp.where(honest, queries, 0)


def bob_bit(cm: ConfigMachine, bob: Bob, lo: jax.Array, mid: jax.Array, half, k):
    """Figure 3 round k: B's bit (1 = "the first half lo -> mid is wrong") and the honest cost.

    Honest B runs ``Step^half`` from lo and answers 1 iff the result differs from A's midpoint:
    then the first half is false, otherwise the second half must be (spec DED 7).
    """
    sim, q = cm.step_n(lo, half)
    honest_b = jnp.any(sim != mid).astype(jnp.int32)
    b = jnp.select(
        [bob.mode == HONEST, bob.mode == LAST, bob.mode == FIRST],
        [honest_b, jnp.int32(0), jnp.int32(1)],
        (bob.arg >> k) & 1,
    ).astype(jnp.int32)
    honest = bob.mode == HONEST
    return b, jnp.where(honest, half, 0).astype(jnp.int32), jnp.where(honest, q, 0)
