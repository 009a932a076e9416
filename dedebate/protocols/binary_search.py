"""Binary-search debate without cross-examination: Figure 3, Theorem 5.1 (spec DED 7).

The machine is a :class:`~dedebate.machines.configurations.ConfigMachine` (S-bit configurations,
halting configurations as fixed points, run padded to ``T_pad = 2^m`` steps). A announces a final
configuration, then for m rounds A names the midpoint of the disputed run and B says which half
is wrong; V finally checks ``hi == Step^O(lo)`` with at most one oracle query. Completeness 1,
soundness 0. V reads ``(m + 1) S + m`` bits in a full debate; the costs of a debate stopped early
are in ``docs/outcomes.md`` (section "Bits read by the deterministic verifiers").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dedebate.machines.configurations import ConfigMachine
from dedebate.protocols.costs import Costs
from dedebate.protocols.cross_exam import DetOutcome, grid
from dedebate.protocols.deterministic_players import (
    HONEST,
    Bob,
    MessageAlice,
    alice_config,
    alice_cost,
    alice_transcript,
    bob_bit,
)


def play_binary_search(cm: ConfigMachine, alice, bob: Bob) -> DetOutcome:
    """Play one Figure 3 debate (pure; ``lax.scan`` over the m rounds with masks).

    ``alice`` is an ``Alice`` or a ``MessageAlice`` (configurations given outright); vmap over a
    batch of configuration machines ``cm``. The outcome's ``pointer`` is ``lo``'s index at the final
    check.
    """
    S = cm.S
    a = None if isinstance(alice, MessageAlice) else alice_transcript(cm.program, alice)
    z = alice_config(cm, alice, a, 0, jnp.int32(cm.T_pad))
    alive0 = cm.well_formed(z) & cm.acc(z)
    carry0 = {
        "lo": cm.init(),
        "hi": z,
        "lo_idx": jnp.int32(0),
        "alive": alive0,
        "rounds": jnp.int32(1),
        "bits": jnp.int32(S),
        "b_steps": jnp.int32(0),
        "b_queries": jnp.int32(0),
    }

    def round_fn(c, k):
        half = jnp.right_shift(jnp.int32(cm.T_pad), k + 1)
        mid = alice_config(cm, alice, a, k + 1, c["lo_idx"] + half)
        read = c["alive"]
        ok = read & cm.well_formed(mid)
        b, steps, q = bob_bit(cm, bob, c["lo"], mid, half, k)
        first = ok & (b == 1)
        second = ok & (b == 0)
        return {
            "lo": jnp.where(second, mid, c["lo"]),
            "hi": jnp.where(first, mid, c["hi"]),
            "lo_idx": c["lo_idx"] + jnp.where(second, half, 0),
            "alive": ok,
            "rounds": c["rounds"] + read.astype(jnp.int32),
            "bits": c["bits"] + jnp.where(read, S, 0) + ok.astype(jnp.int32),
            "b_steps": c["b_steps"] + jnp.where(ok, steps, 0),
            "b_queries": c["b_queries"] + jnp.where(ok, q, 0),
        }, None

    c, _ = jax.lax.scan(round_fn, carry0, jnp.arange(cm.m, dtype=jnp.int32))
    nxt, queried = cm.step(c["lo"])
    accept = c["alive"] & jnp.all(nxt == c["hi"])
    a_steps, a_queries = alice_cost(cm.program, alice)
    honest_b = bob.mode == HONEST
    costs = Costs(
        alice_queries=a_queries,
        bob_queries=jnp.where(honest_b, c["b_queries"], 0),
        verifier_queries=(c["alive"] & queried).astype(jnp.int32),
        bits_read=c["bits"],
        rounds=c["rounds"],
    )
    return DetOutcome(
        alice_wins=accept,
        costs=costs,
        a_steps=a_steps,
        b_steps=jnp.where(honest_b, c["b_steps"], 0),
        a_message_bits=c["rounds"] * S,
        pointer=c["lo_idx"],
    )


play_binary_search_grid = grid(play_binary_search)
