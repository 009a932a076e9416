"""What both play modes of the stochastic debate share (spec DED 5.1, 5.5).

* the role slots of the trial key (``ROLE_*``: each role's randomness is ``fold_in(key, role)``);
* :class:`StepView`, what a player sees at a step;
* :func:`checker_accepts`, Lean's checker (Bob's and Vera's test), exact at ties
  (:func:`dedebate.core.dyadic.checker_bounds`);
* :class:`Outcome` and :func:`outcome_of`, one debate's result with its costs;
* :class:`DebateCarry` and :func:`scan_debate`: the state the play loop keeps from step to step
  (named fields) and the scan over chunks of steps that :mod:`dedebate.protocols.stochastic`
  (count and decision modes) and :mod:`dedebate.protocols.stochastic_lazy` (lazy mode) drive
  with their own chunk bodies.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from dedebate.core.dyadic import checker_bounds, computed_once
from dedebate.protocols.costs import Costs

# Role slots for fold_in of the trial key.
ROLE_ALICE_EST, ROLE_BOB_EST, ROLE_VERA, ROLE_COIN, ROLE_ALICE, ROLE_BOB = range(6)


@struct.dataclass
class StepView:
    """What a player sees at step t."""

    t: jax.Array  # int32, the step
    # float32, the true step probability (honest players ignore it; adversaries, unbounded in
    # theory, may read it)
    pi: jax.Array
    prev_bit: jax.Array  # int32, the previous bit (0 at t = 0)
    ones: jax.Array  # int32, the number of ones so far
    state: Any  # the machine state (the prefix)
    T: int = struct.field(pytree_node=False)  # the number of steps (static)


def checker_accepts(p: jax.Array, count: jax.Array, n: jax.Array, tau: jax.Array) -> jax.Array:
    """Lean's checker ``bob'`` (spec DED 5.1): accept iff ``|p - count/n| < tau`` (strict).

    Decided exactly in real numbers on the float32 values of p and tau, by integer arithmetic
    (:func:`dedebate.core.dyadic.checker_bounds`), so every program agrees at ties.
    """
    lo, hi = checker_bounds(p, n, tau)
    count = jnp.asarray(count, jnp.int32)
    return computed_once((count > lo) & (count < hi))


@struct.dataclass
class Outcome:
    """One stochastic debate's result (spec DED 5.5; a trial is one pure function of its key).

    ``costs``: oracle samples charged to Alice and Bob (float32), the samples Vera's draws used
    (counted at the draw site), ``bits_read = 0`` (not measured), ``rounds`` = steps played.
    """

    alice_wins: jax.Array  # bool: output 1
    aborted: jax.Array  # bool: Bob aborted and Vera judged
    abort_step: jax.Array  # int32: the step Bob aborted at, -1 if none
    last_bit: jax.Array  # int32: y_{T-1} when there was no abort (else the last bit drawn)
    costs: Costs


@struct.dataclass
class DebateCarry:
    """The scan carry of one debate: what the play loop keeps from step to step."""

    state: Any  # the machine state (the prefix so far)
    stopped: jax.Array  # bool, Bob aborted
    last: jax.Array  # int32, the last bit drawn
    rounds: jax.Array  # int32, steps played (Alice's claims)
    prev: jax.Array  # int32, the previous bit (0 before the first step)
    ones: jax.Array  # int32, ones so far
    p_ab: jax.Array  # float32, Alice's claim at the abort
    pi_ab: jax.Array  # float32, the true probability at the abort
    t_ab: jax.Array  # int32, the abort step (-1 if none)
    vera_due: jax.Array  # bool, Vera judges in this iteration (the one after the abort)
    # int32, the count of Vera's draw (judged by checker_accepts once, after the scan)
    vera_count: jax.Array
    vera_n: jax.Array  # int32, the oracle samples Vera's draws used (counted at the draw site)
    unresolved: jax.Array  # bool, a fast-path draw left the trial open (it must be replayed)


def initial_carry(machine: Any) -> DebateCarry:
    """The carry before the first step: the empty prefix, nothing played."""
    z = jnp.int32(0)
    f = jnp.bool_(False)
    return DebateCarry(
        state=machine.init_state(),
        stopped=f,
        last=z,
        rounds=z,
        prev=z,
        ones=z,
        p_ab=jnp.float32(0.0),
        pi_ab=jnp.float32(0.0),
        t_ab=jnp.int32(-1),
        vera_due=f,
        vera_count=z,
        vera_n=z,
        unresolved=f,
    )


def scan_debate(
    chunk_body, machine: Any, T: int, C: int, alice, bob, vera
) -> tuple[Outcome, jax.Array]:
    """``(outcome, unresolved)``: ``chunk_body`` over the T steps and Vera's iteration.

    ``T`` and ``C`` (steps per chunk) are static. Vera judges the claim at the abort on the count of
    her draw, here, once per debate rather than in every step of the scan.
    """
    final, _ = jax.lax.scan(chunk_body, initial_carry(machine), jnp.arange(debate_chunks(T, C)))
    vera_ok = checker_accepts(final.p_ab, final.vera_count, vera.n_samples, vera.tau)
    out = outcome_of(
        final.stopped, vera_ok, final.last, final.rounds, final.t_ab, alice, bob, final.vera_n
    )
    return out, final.unresolved


def debate_chunks(T: int, C: int) -> int:
    """Chunks of C steps that hold the T steps and Vera's iteration: ``ceil((T + 1) / C)``."""
    return -(-(T + 1) // C)


def outcome_of(aborted, vera_ok, last, rounds, t_ab, alice, bob, vera_samples) -> Outcome:
    """The :class:`Outcome` of a finished debate.

    The verdict is Vera's after an abort, else the last bit; N_A and N_B are charged per step
    played (players that sample); Vera's queries are ``vera_samples``, the samples her draws used as
    counted by the play loop at the draw site (N_V once on an abort when the protocol is right: a
    measurement, not a charge).
    """
    alice_wins = jnp.where(aborted, vera_ok, last == 1)
    rf = rounds.astype(jnp.float32)
    qa = rf * jnp.asarray(alice.n_samples, jnp.float32) if alice.samples else jnp.float32(0.0)
    qb = rf * jnp.asarray(bob.n_samples, jnp.float32) if bob.samples else jnp.float32(0.0)
    qv = jnp.asarray(vera_samples, jnp.int32)  # exact: N_V can pass 2^24 (the paper's)
    costs = Costs(
        alice_queries=qa, bob_queries=qb, verifier_queries=qv, bits_read=jnp.int32(0), rounds=rounds
    )
    return Outcome(
        alice_wins=alice_wins,
        aborted=jnp.asarray(aborted),
        abort_step=jnp.asarray(t_ab),
        last_bit=last,
        costs=costs,
    )
