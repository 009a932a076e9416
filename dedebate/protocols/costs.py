"""The costs record every protocol's outcome carries (``outcome.costs``), in one vocabulary.

The papers state their claims as costs per role: oracle queries of each prover and of the
verifier, the bits the verifier reads, and rounds. Every outcome type (the stochastic debate's
``Outcome``, ``DetOutcome``, ``NaiveOutcome``, ``PEDOutcome``) holds them in a :class:`Costs`
field ``costs``; protocol-specific measurements stay on the outcome itself. What each field
counts in each protocol, and where it is 0 because the protocol has no such notion, is in
``docs/outcomes.md`` (section "Costs").
"""

from __future__ import annotations

import jax
from flax import struct


@struct.dataclass
class Costs:
    """Measured costs of one debate (a pytree: vmapped outcomes carry arrays of them)."""

    alice_queries: jax.Array  # oracle queries charged to Alice (the first prover, A)
    bob_queries: jax.Array  # oracle queries charged to Bob (the second prover, B)
    verifier_queries: jax.Array  # oracle queries of the verifier (Vera, V, the judge)
    bits_read: jax.Array  # bits the verifier read; 0 in protocols without that notion
    rounds: jax.Array  # rounds played, as each protocol counts them (docs/outcomes.md)
