"""The player interfaces of prover-estimator debate (spec PED 2.1, 2.4): what A and B implement.

A strategy is a pytree; each method is a pure function of what the player may see at that moment
of the protocol and returns a distribution, which :func:`dedebate.protocols.prover_estimator.play`
samples or takes expectations of. ``dedebate.agents`` implements them (``ped_strategies``,
``learned``). Arguments shared by the methods: ``tree``, the full claim tree when the
static ``sees_truth`` is True, else ``tree.public()`` (unobservable truths read -1); ``node``,
int32, the claim under debate; ``phat``, float32, the estimate ``phat_k`` under debate; ``k``,
int32, the round; ``cand``, int32, A's candidate decomposition.
"""

from __future__ import annotations

from typing import Protocol

import jax

from dedebate.trees.tree import ClaimTree


class Prover(Protocol):
    """What the protocol asks of A (spec 2.1, 2.4).

    An optional attribute ``deterministic`` (one-hot decompositions and selections) lets exact mode
    skip random draws.
    """

    sees_truth: bool

    def answer(self, tree: ClaimTree) -> jax.Array:
        """A's root answer: float32 scalar ``P(a = 1)``."""

    def direction(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """A's direction at a claim, fixed before B speaks (spec 2.4.1).

        Returns:
            float32 ``[3]``: probabilities of ``s`` in (-1, 0, +1).
        """

    def decompose(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """A's choice of candidate decomposition: float32 ``[n_cand]`` probabilities."""

    def select(self, tree: ClaimTree, node, cand, marginals, pi, phat, k) -> jax.Array:
        """A's choice of the subclaim to recurse on; it sees ``P_k``, never ``z^k`` (spec 2.4.2).

        Args:
            marginals: float32 ``[q]``, B's marginals ``P_k[z_i = 1]``.
            pi: float32 ``pi_k = E_{z ~ P_k} M_D(y^k, z)``.

        Returns:
            float32 ``[q]`` probabilities.
        """


class Estimator(Protocol):
    """What the protocol asks of B (spec 2.1, 10)."""

    sees_truth: bool

    def initial(self, tree: ClaimTree) -> jax.Array:
        """B's initial estimate ``p_d``: float32 scalar in ``[0, 1]``."""

    def joint(self, tree: ClaimTree, node, cand, phat, k) -> jax.Array:
        """B's joint ``P_k`` over the ``2^q`` answer patterns of the subclaims.

        Returns:
            float32 ``[2^q]`` logits (may hold ``-inf``).
        """
