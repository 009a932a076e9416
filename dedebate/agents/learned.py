"""Learned Flax players for prover-estimator debate (spec PED 2.1, 8, 10).

Both players implement the strategy interface of :mod:`dedebate.agents.ped_strategies` and see
only the public view of the claim tree (``sees_truth = False``). A has four small MLP heads
(answer, direction, decompose, select); B has an initial head and, per node and candidate, a
product part plus a ``2^q``-wide global part for its joint logits. Final layers start at zero
(B uniform, A fair coins) and every logit is capped to ``(-8, 8)`` by ``8 tanh(x / 8)``. The
features and the reasons are in spec PED 10.2.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.bits import bit_table
from dedebate.trees.tree import ClaimTree

N_NODE = 4  # [known, value, phat, k / depth]
N_CAND = N_NODE + 3
N_SEL = 5
N_ROOT = 2
N_CHILD = 5
N_GLOBAL = 6
LOGIT_CAP = 8.0  # logits squashed to (-8, 8): a sigmoid stays in (3e-4, 1 - 3e-4), a softmax not


def _cap(x):
    """``LOGIT_CAP tanh(x / LOGIT_CAP)``: gradients stay nonzero, so a cornered player can move."""
    return LOGIT_CAP * jnp.tanh(x / LOGIT_CAP)


# LeCun-scaled uniform hidden weights: same variance as Flax's default truncated normal, but far
# cheaper to compile (no erf_inv per parameter), which matters inside every jitted training run.
_HIDDEN_INIT = nn.initializers.variance_scaling(1.0, "fan_in", "uniform")


class MLP(nn.Module):
    """tanh MLP with a zero-initialised output layer (so a fresh policy is uniform)."""

    hidden: tuple[int, ...]
    out: int

    @nn.compact
    def __call__(self, x):
        for width in self.hidden:
            x = jnp.tanh(nn.Dense(width, kernel_init=_HIDDEN_INIT)(x))
        return nn.Dense(self.out, kernel_init=nn.initializers.zeros)(x)


def _check_hidden(hidden) -> tuple[int, ...]:
    h = tuple(hidden)
    if any(not isinstance(w, (int, np.integer)) or w < 1 for w in h):
        raise ValueError(f"hidden={list(hidden)!r}: hidden widths must be integers >= 1")
    return tuple(int(w) for w in h)


def _public(truth) -> tuple[jax.Array, jax.Array]:
    """``(known, value)`` of public-view truths (hidden entries read -1)."""
    t = jnp.asarray(truth).astype(jnp.float32)
    return (t >= 0).astype(jnp.float32), jnp.maximum(t, 0.0)


def _node_feat(tree: ClaimTree, node, phat, k) -> jax.Array:
    known, value = _public(tree.truth[node])
    kk = jnp.asarray(k, jnp.float32) / tree.depth
    return jnp.stack([known, value, jnp.asarray(phat, jnp.float32), kk])


def _cand_feat(tree: ClaimTree, node, cand) -> jax.Array:
    known, value = _public(tree.child_truths(node, cand))
    md = tree.md(node, cand).astype(jnp.float32)
    return jnp.stack([known.mean(), (known * value).mean(), md.mean()])


@struct.dataclass
class LearnedProver:
    """A learned prover (spec PED 10.2)."""

    params: dict  # head name -> Flax params (answer, direction, decompose, select)
    # hidden widths of each head (static)
    hidden: tuple = struct.field(pytree_node=False, default=(16,))
    # False: it sees the public view
    sees_truth: bool = struct.field(pytree_node=False, default=False)
    # False: its choices are drawn
    deterministic: bool = struct.field(pytree_node=False, default=False)

    def _head(self, name, x, out=1):
        return _cap(MLP(self.hidden, out).apply({"params": self.params[name]}, x))

    def answer(self, tree: ClaimTree) -> jax.Array:
        """A's root answer: the answer head on the root's ``[known, value]``."""
        known, value = _public(tree.truth[0])
        return jax.nn.sigmoid(self._head("answer", jnp.stack([known, value]))[0])

    def direction(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """A's direction: ``s = +1`` with the direction head's probability, else -1 (never 0)."""
        p = jax.nn.sigmoid(self._head("direction", _node_feat(tree, node, phat, k))[0])
        return jnp.stack([1.0 - p, jnp.float32(0.0), p])

    def decompose(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """A's choice of candidate decomposition: softmax of the shared head over the candidates."""
        nf = _node_feat(tree, node, phat, k)
        feats = jax.vmap(lambda c: jnp.concatenate([nf, _cand_feat(tree, node, c)]))(
            jnp.arange(tree.n_cand)
        )
        return jax.nn.softmax(jax.vmap(lambda f: self._head("decompose", f)[0])(feats))

    def select(self, tree: ClaimTree, node, cand, marginals, pi, phat, k) -> jax.Array:
        """A's selection: the select head's softmax over the subclaims."""
        known, value = _public(tree.child_truths(node, cand))
        q = tree.q
        feats = jnp.stack(
            [marginals, known, value, jnp.full((q,), pi), jnp.full((q,), phat)], axis=-1
        ).astype(jnp.float32)
        return jax.nn.softmax(jax.vmap(lambda f: self._head("select", f)[0])(feats))


@struct.dataclass
class LearnedEstimator:
    """A learned estimator (spec PED 10.2)."""

    params: dict  # head name -> Flax params (initial, child, global)
    # hidden widths of each head (static)
    hidden: tuple = struct.field(pytree_node=False, default=(32,))
    # False: it sees the public view
    sees_truth: bool = struct.field(pytree_node=False, default=False)

    def _head(self, name, x, out=1):
        return _cap(MLP(self.hidden, out).apply({"params": self.params[name]}, x))

    def initial(self, tree: ClaimTree) -> jax.Array:
        """B's initial estimate ``p_d``: the initial head on the root's features."""
        known, value = _public(tree.truth[0])
        return jax.nn.sigmoid(self._head("initial", jnp.stack([known, value]))[0])

    def joint(self, tree: ClaimTree, node, cand, phat, k) -> jax.Array:
        """B's joint logits: the product part plus the global part, capped."""
        q = tree.q
        known, value = _public(tree.child_truths(node, cand))
        nknown, nvalue = _public(tree.truth[node])
        phat = jnp.asarray(phat, jnp.float32)
        per_child = jnp.stack(
            [known, value, jnp.full((q,), phat), jnp.full((q,), nknown), jnp.full((q,), nvalue)],
            axis=-1,
        )
        child_logit = jax.vmap(lambda f: self._head("child", f)[0])(per_child)
        bits = jnp.asarray(bit_table(q), jnp.float32)
        cf = _cand_feat(tree, node, cand)
        glob = jnp.stack(
            [phat, nknown, nvalue, cf[0], cf[2], jnp.asarray(k, jnp.float32) / tree.depth]
        )
        return _cap(bits @ child_logit + self._head("global", glob, 2**q))


def init_prover(key, hidden=(16,)) -> LearnedProver:
    """Fresh learned prover: every head outputs a fair coin / uniform choice."""
    hidden = _check_hidden(hidden)
    sizes = {"answer": N_ROOT, "direction": N_NODE, "decompose": N_CAND, "select": N_SEL}
    keys = jax.random.split(key, len(sizes))
    params = {
        name: MLP(hidden, 1).init(kk, jnp.zeros((n,), jnp.float32))["params"]
        for kk, (name, n) in zip(keys, sizes.items())
    }
    return LearnedProver(params, hidden)


def init_estimator(key, q: int, hidden=(32,)) -> LearnedEstimator:
    """Fresh learned estimator for width-``q`` trees: ``p_d = 1/2`` and the uniform joint."""
    hidden = _check_hidden(hidden)
    if not isinstance(q, (int, np.integer)) or not 1 <= q <= 12:
        raise ValueError(f"q={q!r}: the estimator's joint has 2^q logits; need 1 <= q <= 12")
    k0, k1, k2 = jax.random.split(key, 3)
    params = {
        "initial": MLP(hidden, 1).init(k0, jnp.zeros((N_ROOT,)))["params"],
        "child": MLP(hidden, 1).init(k1, jnp.zeros((N_CHILD,)))["params"],
        "global": MLP(hidden, 2 ** int(q)).init(k2, jnp.zeros((N_GLOBAL,)))["params"],
    }
    return LearnedEstimator(params, hidden)
