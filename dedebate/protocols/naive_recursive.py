"""Naive recursive debate: the baseline of spec PED 7.3 and 9.3.

A claims the root's answer; each round it decomposes the current claim and claims answers for the
q subclaims, which must be consistent with the parent (``M_D(claimed children) = claimed
parent``, else A is caught); the challenger B picks one subclaim to recurse on, and at the bottom
the judge checks A's claim about the leaf. A wins if it is never caught. Against an obfuscated
argument a uniformly random challenger finds the flaw with probability ``q^{-d}`` (spec 9.3),
so the training signal is only ``1/q^d``. Strategies are pytrees like those of
:mod:`dedebate.agents.ped_strategies` (interface in :func:`play_naive`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.protocols.costs import Costs
from dedebate.protocols.prover_estimator import sample_index
from dedebate.trees.tree import ClaimTree, truth_code

MAX_ENUMERATED_PATHS = 1 << 21


# ==== strategies ==================================================================================
@struct.dataclass
class NaiveDebater:
    """A scripted debater.

    * ``mode='honest'``: claims the truth everywhere (sees the truth), on candidate ``cand``
      (None: the tree's honest candidate).
    * ``mode='obfuscating_liar'``: claims the opposite of the public root truth and, at every
      claim, that all subclaims carry the claimed value (for an AND decomposition of a "true"
      claim: all subclaims true). It cannot see where the flaw is.
    """

    mode: str = struct.field(pytree_node=False, default="honest")
    cand: int | np.integer | None = struct.field(pytree_node=False, default=None)
    sees_truth: bool = struct.field(pytree_node=False, default=True)

    def answer(self, tree: ClaimTree):
        """The claimed root answer."""
        t = tree.truth[0].astype(jnp.int32)
        return t if self.mode == "honest" else 1 - jnp.clip(t, 0, 1)

    def decompose(self, tree: ClaimTree, node, claimed, k):
        """The candidate decomposition of the current claim."""
        if self.cand is not None and self.cand >= tree.n_cand:  # both static: fails at trace
            raise ValueError(f"cand={self.cand}: the tree has candidates 0..{tree.n_cand - 1}")
        return jnp.int32(tree.honest_cand if self.cand is None else self.cand)

    def claim(self, tree: ClaimTree, node, cand, claimed, k):
        """The claimed answers of the q subclaims."""
        if self.mode == "honest":
            return truth_code(tree.child_truths(node, cand))
        return jnp.where(claimed == 1, 2**tree.q - 1, 0).astype(jnp.int32)


def naive_debater(mode: str = "honest", cand=None) -> NaiveDebater:
    """Build a :class:`NaiveDebater`, checking its arguments."""
    if mode not in ("honest", "obfuscating_liar"):
        raise ValueError(f"mode={mode!r}: allowed values are 'honest' and 'obfuscating_liar'")
    if cand is not None and (not isinstance(cand, (int, np.integer)) or cand < 0):
        raise ValueError(f"cand={cand!r}: a candidate index must be an integer >= 0 (or None)")
    return NaiveDebater(mode, cand, mode == "honest")


@struct.dataclass
class UniformChallenger:
    """Picks the subclaim to recurse on uniformly at random (knows nothing)."""

    sees_truth: bool = struct.field(pytree_node=False, default=False)

    def challenge(self, tree: ClaimTree, node, cand, claim_code, k):
        """Uniform probabilities over the q subclaims."""
        return jnp.full((tree.q,), 1.0 / tree.q, jnp.float32)


@struct.dataclass
class InformedChallenger:
    """Sees the truth: picks uniformly among the subclaims A claimed wrongly (any if none)."""

    sees_truth: bool = struct.field(pytree_node=False, default=True)

    def challenge(self, tree: ClaimTree, node, cand, claim_code, k):
        """Uniform probabilities over the subclaims A claimed wrongly (all q if none)."""
        claimed = (claim_code >> jnp.arange(tree.q)) & 1
        wrong = (claimed != tree.child_truths(node, cand)).astype(jnp.float32)
        w = jnp.where(wrong.sum() > 0, wrong, jnp.ones_like(wrong))
        return w / w.sum()


# ==== the protocol ================================================================================
@struct.dataclass
class NaiveOutcome:
    """One naive recursive debate; ``costs`` as in docs/outcomes.md."""

    alice_wins: jax.Array  # A was never caught (bool)
    a_correct: jax.Array  # float32, 1 iff A's root answer is the truth
    answer: jax.Array  # int32, A's root answer
    # the round (0-based) where an inconsistent claim was found, costs.rounds if the judge caught a
    # false bottom claim, -1 if A survived
    caught_round: jax.Array
    nodes: jax.Array  # int32 [depth + 1], the nodes visited (root first, the leaf reached last)
    sels: jax.Array  # int32 [depth], B's picks
    log_prob: jax.Array  # float32, log-probability of B's picks
    costs: Costs


def play_naive(debater, challenger, tree: ClaimTree, key, forced=None, rounds=None) -> NaiveOutcome:
    """Play one naive recursive debate (pure, vmappable); returns a :class:`NaiveOutcome`.

    The strategies' interface (``sees_truth`` static; a player that does not see the truth gets
    ``tree.public()``)::

        debater.answer(tree) -> claimed root answer (int)
        debater.decompose(tree, node, claimed, k) -> candidate index (int)
        debater.claim(tree, node, cand, claimed, k) -> code of the claimed child answers (int)
        challenger.challenge(tree, node, cand, claim_code, k) -> probs over the q subclaims

    ``forced`` (int32 ``[depth]``) fixes B's picks instead of ``key`` (entries past ``rounds`` must
    be 0, else the path gets probability 0); ``rounds`` (may be traced; default the depth) masks
    later rounds, and the judge checks the claim reached.
    """
    depth = tree.depth
    n = depth if rounds is None else jnp.clip(jnp.asarray(rounds, jnp.int32), 1, depth)
    view_a = tree if debater.sees_truth else tree.public()
    view_b = tree if challenger.sees_truth else tree.public()
    a = jnp.asarray(debater.answer(view_a), jnp.int32)
    uni = jax.random.uniform(key, (depth,)) if forced is None else jnp.zeros((depth,))
    forced_arr = (
        jnp.zeros((depth,), jnp.int32) if forced is None else jnp.asarray(forced, jnp.int32)
    )

    def step(carry, xs):
        node, claimed, caught, logp = carry
        k, u, f = xs
        active = k < n
        c = jnp.asarray(debater.decompose(view_a, node, claimed, k), jnp.int32)
        code = jnp.asarray(debater.claim(view_a, node, c, claimed, k), jnp.int32)
        consistent = tree.md(node, c)[code] == claimed
        caught = jnp.where(active & (caught < 0) & ~consistent, k, caught)
        probs = challenger.challenge(view_b, node, c, code, k).astype(jnp.float32)
        j = sample_index(u, probs) if forced is None else f
        idle = 0.0 if forced is None else jnp.where(f == 0, 0.0, -jnp.inf)
        logp = logp + jnp.where(active, jnp.log(probs[j]), idle)
        node_next = jnp.where(active, tree.child(node, c, j), node)
        claimed_next = jnp.where(active, (code >> j) & 1, claimed)
        return (node_next, claimed_next, caught, logp), (node, j)

    (leaf, claimed, caught, logp), (nodes, sels) = jax.lax.scan(
        step,
        (jnp.int32(0), a, jnp.int32(-1), jnp.float32(0.0)),
        (jnp.arange(depth), uni, forced_arr),
    )
    caught = jnp.where((caught < 0) & (tree.truth[leaf] != claimed), n, caught)
    zero = jnp.int32(0)
    return NaiveOutcome(
        alice_wins=caught < 0,
        a_correct=(a == tree.truth[0]).astype(jnp.float32),
        answer=a,
        caught_round=caught,
        nodes=jnp.concatenate([nodes, leaf[None]]),
        sels=sels,
        log_prob=logp,
        costs=Costs(
            alice_queries=zero,
            bob_queries=zero,
            verifier_queries=jnp.int32(1),
            bits_read=zero,
            rounds=jnp.asarray(n, jnp.int32),
        ),
    )


def survival_probability(debater, challenger, tree: ClaimTree, rounds=None, batch_size: int = 4096):
    """``(Pr[A survives], total path probability)``: exact, over all ``q^depth`` challenge paths."""
    q, depth = tree.q, tree.depth
    n = q**depth
    if n > MAX_ENUMERATED_PATHS:
        raise ValueError(
            f"tree.depth={depth}: enumerating {n} challenge paths exceeds "
            f"{MAX_ENUMERATED_PATHS}; use sampled episodes instead"
        )
    codes = np.arange(n, dtype=np.int64)[:, None]
    paths = jnp.asarray((codes // (q ** np.arange(depth - 1, -1, -1))[None, :]) % q, jnp.int32)
    key = jax.random.key(0)  # unused: forced paths draw nothing

    def one(f):
        out = play_naive(debater, challenger, tree, key, forced=f, rounds=rounds)
        w = jnp.exp(out.log_prob)
        return jnp.where(w > 0, w * out.alice_wins, 0.0), w

    s, w = jax.lax.map(one, paths, batch_size=min(batch_size, n))
    return s.sum(), w.sum()
