"""Players of the digit-audit debates (docs/ped-digits.md; spec PED 2.3, 6.3, 9.3).

B is a network that reads images: :class:`BagEstimator` classifies each image of a part (for
the audited digit), summarises each part by masked pooling (permutation invariant, so one network
serves every part size) with its stated count, and a head over the q summaries and the depth
gives B's joint over the parts' ``2^q`` truth patterns (a softmax, not a product of per-part
probabilities); ``p_d`` is ``Pr[M_D = 1]`` under the root's joint. A's liar claims every audit
passes and recurses on the false part whose estimate is highest (where B is weakest); the
simplest liar (``lie_then_honest``) claims the same, then plays as honest A does.
:func:`payoffs` plays the protocol of :mod:`dedebate.protocols.prover_estimator` on a batch of
trees with the judge's noise at the leaf. Context features are one flat row per internal node,
so the network trains with :mod:`dedebate.estimators.train`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.agents.ped_strategies import (
    TabularEstimator,
    honest_prover,
    lie_then_honest_prover,
)
from dedebate.core.bits import bit_table
from dedebate.programs import jit
from dedebate.protocols.prover_estimator import PEDParams, PEDStatic, all_paths, ped_params, play
from dedebate.trees.digits import N_DIGITS, DigitTree, judge_mean, stated_counts
from dedebate.trees.tree import ClaimTree

PIXELS = 64
PIXEL_MAX = 16.0
EXTRA = N_DIGITS + 2  # digit one-hot, depth fraction, stated count fraction


def feature_width(q: int, depth: int) -> int:
    """Width of one context's feature row: q padded bags of ``q^(D-1)`` images, masks, extras.

    Args:
        q: parts per claim.
        depth: the depth D.

    Returns:
        int.
    """
    bag = q ** (depth - 1)
    return q * bag * (PIXELS + 1) + EXTRA


class BagEstimator(nn.Module):
    """``h_theta``: context features -> a joint over the q parts' truths (``2^q``).

    Each image goes through a digit classifier (``Pr[image shows d]`` for the audited d); a part
    is summarised by its expected count of d's minus its stated count, the smallest and the mean
    of these probabilities (masked pooling: one network serves every part size); a head over all
    q summaries (with the depth) gives the joint's logits.

    Attributes:
        q: parts per claim.
        depth: the depth D (fixes the padded bag size ``q^(D-1)``).
        hidden: width of the classifier and of the head.
    """

    q: int
    depth: int
    hidden: int = 32

    def setup(self):
        self.encode = nn.Dense(self.hidden)
        self.classify = nn.Dense(N_DIGITS)
        self.mix = nn.Dense(self.hidden)
        self.out = nn.Dense(2**self.q, kernel_init=nn.initializers.zeros)

    def _split(self, feat):
        q, bag = self.q, self.q ** (self.depth - 1)
        n_img = q * bag * PIXELS
        images = feat[:, :n_img].reshape(-1, q, bag, PIXELS)
        mask = feat[:, n_img : n_img + q * bag].reshape(-1, q, bag)
        return images, mask, feat[:, n_img + q * bag :]

    def shows(self, pixels, digit):
        """``Pr[shows d]`` from pixels ``[..., 64]`` (in [0, 1]) and one-hots ``[..., 10]``."""
        logits = self.classify(jnp.tanh(self.encode(pixels)))
        return jnp.sum(jax.nn.softmax(logits) * digit, axis=-1)

    def __call__(self, feat):
        """The joint ``[X, 2^q]`` (uniform at initialisation: zero output layer)."""
        images, mask, extra = self._split(feat)
        shows = self.shows(images, extra[:, None, None, :N_DIGITS])  # [X, q, q^(D-1)]
        size = mask.sum(axis=2)
        count = extra[:, None, N_DIGITS + 1] * size
        expected = jnp.sum(shows * mask, axis=2)
        least = jnp.min(jnp.where(mask > 0, shows, 1.0), axis=2)
        part = jnp.stack([expected - count, least, expected / jnp.maximum(size, 1.0)], axis=-1)
        head = jnp.concatenate([part.reshape(part.shape[0], -1), extra[:, N_DIGITS:]], axis=-1)
        return jax.nn.softmax(self.out(jnp.tanh(self.mix(head))), axis=-1)


@jit(static_argnums=(2, 3, 4))
def context_features(trees: DigitTree, images, family: str, q: int, m: int) -> jax.Array:
    """One feature row per internal node of every tree: ``[n_trees * n_internal, width]``.

    Row order is tree-major, then the tree's breadth-first node order. Each row holds the q
    parts' images (pixels / 16, padded to ``q^(D-1)``), their masks, the digit one-hot, the
    parts' depth ``(k+1)/D`` and their stated count as a fraction of the part's size.

    Args:
        trees: a batch of :class:`~dedebate.trees.digits.DigitTree`.
        images: float ``[N, 64]`` all images of the data set.
        family: the family (fixes the stated counts).
        q: parts per claim.
        m: the slack threshold.

    Returns:
        float32 ``[n_trees * n_internal, feature_width(q, D)]``.
    """
    depth = trees.tree.depth
    bag = q ** (depth - 1)
    counts = stated_counts(family, q, m, depth)
    pix = jnp.asarray(images, jnp.float32)[trees.leaves] / PIXEL_MAX  # [T, L, 64]
    n_t = pix.shape[0]
    rows = []
    for k in range(depth):
        size = q ** (depth - k - 1)  # images per part
        parts = pix.reshape(n_t, q**k, q, size, PIXELS)
        pad = jnp.zeros((n_t, q**k, q, bag - size, PIXELS), jnp.float32)
        imgs = jnp.concatenate([parts, pad], axis=3).reshape(n_t, q**k, -1)
        mask = jnp.broadcast_to(
            (np.arange(bag) < size).astype(np.float32), (n_t, q**k, q, bag)
        ).reshape(n_t, q**k, -1)
        digit = jax.nn.one_hot(trees.digit, N_DIGITS)[:, None, :] * jnp.ones((1, q**k, 1))
        frac = jnp.broadcast_to(
            jnp.asarray([(k + 1) / depth, counts[k + 1] / size], jnp.float32), (n_t, q**k, 2)
        )
        rows.append(jnp.concatenate([imgs, mask, digit, frac], axis=-1))
    return jnp.concatenate(rows, axis=1).reshape(-1, feature_width(q, depth))


def tabulate(joint, n_trees: int, tree: ClaimTree) -> TabularEstimator:
    """B as tables per tree from the network's joints ``[n_trees * n_internal, 2^q]``.

    ``p_d = Pr_{z ~ P_root}[M_D(z) = 1]``: B's root estimate is what its joint for the root's
    parts implies, so the first consistency reward is 0.

    Args:
        joint: the network's joints in :func:`context_features`' row order.
        n_trees: trees in the batch.
        tree: the batch's claim trees (for the root's ``M_D``).

    Returns:
        A batched :class:`~dedebate.agents.ped_strategies.TabularEstimator` (not seeing truths).
    """
    j = jnp.asarray(joint, jnp.float32).reshape(n_trees, tree.n_internal, 1, -1)
    md_root = jnp.asarray(tree.tables, jnp.float32)[:, 0]  # [T, 2^q]
    p0 = jnp.clip(jnp.sum(j[:, 0, 0] * md_root, axis=-1), 0.0, 1.0)
    return TabularEstimator(p0=p0, logits=jnp.log(jnp.maximum(j, 1e-30)))


@struct.dataclass
class AuditLiar:
    """A: claims the audit passes, bets B is too low everywhere, recurses on the false part with
    the highest estimate (where B is weakest); sees the truths (the labels)."""

    sees_truth: bool = struct.field(pytree_node=False, default=True)
    deterministic: bool = struct.field(pytree_node=False, default=True)

    def answer(self, tree: ClaimTree) -> jax.Array:
        """A's root answer: 1 (the audit passes).

        Args:
            tree: the claim tree.

        Returns:
            float32 scalar ``P(a = 1)``.
        """
        return jnp.float32(1.0)

    def direction(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """A's direction: +1 ("B's estimate is too low") at every claim.

        Args:
            tree: the claim tree.
            node: int32 the claim under debate.
            phat: float32 the estimate.
            k: int32 the round.

        Returns:
            float32 ``[3]`` probabilities of ``s`` in (-1, 0, +1).
        """
        return jnp.asarray([0.0, 0.0, 1.0], jnp.float32)

    def decompose(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """The tree's one decomposition.

        Args:
            tree: the claim tree.
            node: int32 the claim.
            phat: float32 the estimate.
            k: int32 the round.

        Returns:
            float32 ``[1]``.
        """
        return jnp.ones((tree.n_cand,), jnp.float32) / tree.n_cand

    def select(self, tree: ClaimTree, node, cand, marginals, pi, phat, k) -> jax.Array:
        """The false part with the highest marginal (any part when none is false).

        Args:
            tree: the claim tree.
            node: int32 the claim.
            cand: int32 the decomposition.
            marginals: float32 ``[q]`` B's marginals.
            pi: float32 B's ``Pr[M_D = 1]``.
            phat: float32 the estimate.
            k: int32 the round.

        Returns:
            float32 ``[q]`` one-hot.
        """
        false = (tree.child_truths(node, cand) == 0).astype(jnp.float32)
        return jax.nn.one_hot(jnp.argmax(false * (1.0 + marginals)), tree.q, dtype=jnp.float32)


POLICY_SIZES = {"answer": 2, "direction": 2, "select": 5}
"""A learned prover's policy weights: (bias, belief) for the answer and the direction, and five
weights over each part's ``[c, m, |c - m|, (1 - c) m, c (1 - m)]`` (its belief c, B's marginal m)
for the selection."""


def _cap(x):
    """``8 tanh(x / 8)``: probabilities stay in ``(3e-4, 1 - 3e-4)``, gradients never vanish."""
    return 8.0 * jnp.tanh(x / 8.0)


@struct.dataclass
class DigitProver:
    """A learned A on one tree: its beliefs ``belief[v]`` that each claim holds (read from the
    images by its own :class:`BagEstimator`, :func:`prover_beliefs`) and policy weights shared by
    all trees (:data:`POLICY_SIZES`). It answers, bets and selects from its beliefs, never from
    the labels; honest play is large positive answer and direction weights and a selection of
    the part where its belief and B's marginal differ most."""

    belief: jax.Array  # float32 [n_nodes]
    policy: dict
    sees_truth: bool = struct.field(pytree_node=False, default=False)
    deterministic: bool = struct.field(pytree_node=False, default=False)

    def answer(self, tree: ClaimTree) -> jax.Array:
        """``P(a = 1) = sigmoid(w0 + w1 (2 b_root - 1))``."""
        w = self.policy["answer"]
        return jax.nn.sigmoid(_cap(w[0] + w[1] * (2.0 * self.belief[0] - 1.0)))

    def direction(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """``P(s = +1) = sigmoid(w0 + w1 (b_node - phat))`` over ``s`` in (-1, 0, +1)."""
        w = self.policy["direction"]
        p = jax.nn.sigmoid(_cap(w[0] + w[1] * (self.belief[node] - phat)))
        return jnp.stack([1.0 - p, jnp.float32(0.0), p])

    def decompose(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """The tree's one decomposition."""
        return jnp.ones((tree.n_cand,), jnp.float32) / tree.n_cand

    def select(self, tree: ClaimTree, node, cand, marginals, pi, phat, k) -> jax.Array:
        """Softmax over the parts of the selection weights times each part's features (each
        logit's gap below the largest capped at 8, so large weights select one part)."""
        c, m = self.belief[tree.children(node, cand)], marginals
        feats = jnp.stack([c, m, jnp.abs(c - m), (1.0 - c) * m, c * (1.0 - m)], axis=-1)
        logits = feats @ self.policy["select"]
        return jax.nn.softmax(_cap(logits - jnp.max(logits)))


def prover_beliefs(joint, tree: ClaimTree) -> jax.Array:
    """A's belief in every claim from its reader's joints (rows of :func:`context_features`):
    the root's is ``Pr[M_D = 1]`` under the root's joint, a part's its marginal.

    Args:
        joint: A's reader's joints ``[n_trees * n_internal, 2^q]``.
        tree: the batch's claim trees (one candidate: part j of claim u is node ``1 + u q + j``).

    Returns:
        float32 ``[n_trees, n_nodes]``.
    """
    n_t, q = tree.truth.shape[0], tree.q
    j = jnp.asarray(joint, jnp.float32).reshape(n_t, tree.n_internal, -1)
    root = jnp.sum(j[:, 0] * jnp.asarray(tree.tables, jnp.float32)[:, 0], axis=-1)
    marg = j @ jnp.asarray(bit_table(q), jnp.float32)  # [T, n_internal, q]
    return jnp.concatenate([root[:, None], marg.reshape(n_t, -1)], axis=1)


# constructors: no arrays at import
PROVERS: dict[str, Callable[[], Any]] = {"honest": honest_prover, "liar": AuditLiar}
PROVERS["lie_then_honest"] = lie_then_honest_prover


def payoffs(prover_name: str, estimators: TabularEstimator, trees: DigitTree, rho, eta):
    """Exact-mode payoffs of one prover against per-tree tabular B, judge noise eta at the leaf.

    The protocol's final check uses the label; the judge's answer has mean ``(1 - eta) T +
    eta (1 - T)``, so the noisy payoff adds ``s_0 (E[answer] - T_leaf)`` (variant (a), weight 1).

    Args:
        prover_name: a name in :data:`PROVERS`.
        estimators: batched B, one per tree.
        trees: the batch of trees.
        rho: the protocol's rho (>= 1).
        eta: the judge's flip probability in ``[0, 1/2]``.

    Returns:
        ``(u_a, a_correct)``: float32 ``[n_trees]`` each.
    """
    if prover_name not in PROVERS:
        raise ValueError(f"prover_name={prover_name!r}: allowed values are {tuple(PROVERS)}")
    if not 0.0 <= float(eta) <= 0.5:
        raise ValueError(f"eta={eta!r}: the judge's flip probability must lie in [0, 1/2]")
    ped_params(rho)  # validates rho
    return exact_payoffs(prover_name, estimators, trees.tree, jnp.float32(rho), jnp.float32(eta))


@jit(static_argnums=0)
def exact_payoffs(prover_name: str, estimators: TabularEstimator, tree: ClaimTree, rho, eta):
    """:func:`payoffs` without the checks (traceable: rho and eta may be traced): the
    prover named in :data:`PROVERS` against batched B (one per tree), judge flip probability
    ``eta``; returns ``(u_a, a_correct)``, float32 ``[n_trees]`` each."""
    prover = PROVERS[prover_name]()
    params = PEDParams(rho=rho, rounds=jnp.int32(-1))
    settings = PEDStatic(mode="exact")
    key = jax.random.key(0)  # unused: exact mode with deterministic provers

    def one(est, t):
        out = play(settings, params, prover, est, t, key)
        t_leaf = t.truth[out.nodes[-1]].astype(jnp.float32)
        u = out.u_a + out.directions[-1] * (judge_mean(t_leaf, eta) - t_leaf)
        return u, out.a_correct

    return jax.vmap(one)(estimators, tree)


def expected_payoffs(prover: DigitProver, estimators: TabularEstimator, tree: ClaimTree, rho, eta):
    """Exact ``E[U_A]`` and ``P[A correct]`` of a learned A per tree (traceable, differentiable).

    Every path of A's selections (``prover``: beliefs ``[n_trees, n_nodes]`` and one policy) is
    played in exact mode against batched B and weighted by its probability; the judge's noise
    adds ``s_0 (E[answer] - T_leaf)`` as in :func:`payoffs`. Returns ``(u_a, a_correct)``,
    float32 ``[n_trees]`` each.
    """
    paths = jnp.asarray(all_paths(jax.tree_util.tree_map(lambda a: a[0], tree)))
    params = PEDParams(rho=jnp.asarray(rho, jnp.float32), rounds=jnp.int32(-1))
    settings = PEDStatic(mode="exact")
    key = jax.random.key(0)  # unused: exact mode with forced paths

    def per_tree(belief, est, t):
        a = dataclasses.replace(prover, belief=belief)
        out = jax.vmap(lambda f: play(settings, params, a, est, t, key, forced=f))(paths)
        w = jnp.exp(out.log_prob)
        t_leaf = t.truth[out.nodes[:, -1]].astype(jnp.float32)
        u = out.u_a + out.directions[:, -1] * (judge_mean(t_leaf, eta) - t_leaf)
        return jnp.sum(w * u), jnp.sum(w * out.a_correct)

    return jax.vmap(per_tree)(prover.belief, estimators, tree)
