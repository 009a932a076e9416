"""Complete q-ary claim trees as flat arrays (spec PED 1, 7.1 and 10).

A claim tree holds every claim a prover could put up in a debate of ``depth`` levels: each
internal claim has ``n_cand`` candidate decompositions into ``q`` subclaims, numbered breadth
first (``children(v, c) = v b + 1 + c q + [0..q-1]``, ``b = n_cand q``), so a node's index fixes
its path from the root. The judge's ``M_D`` at (node, candidate) is one of a few aggregator
tables over the ``2^q`` answer patterns (little-endian codes). Recursive decomposability
``M_D(T(y)) = T(yhat)`` (spec PED 7.1) is checked on the host by :func:`check_decomposable`.
The layout is described in spec PED 10.1.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.bits import bits_to_code

MAX_Q = 12
MAX_NODES = 1 << 23


def n_nodes(q: int, depth: int, n_cand: int = 1) -> int:
    """Number of nodes ``sum_{k=0}^{depth} (n_cand q)^k`` of the complete claim tree."""
    b = q * n_cand
    return sum(b**k for k in range(depth + 1))


def level_offset(q: int, n_cand: int, k: int) -> int:
    """Index of the first node at depth ``k``: ``sum_{j<k} (n_cand q)^j``."""
    b = q * n_cand
    return sum(b**j for j in range(k))


def check_sizes(q, depth, n_cand=1) -> None:
    """Validate the static sizes of a claim tree (host side, clear ValueError)."""
    if not isinstance(q, (int, np.integer)) or isinstance(q, bool) or not 2 <= q <= MAX_Q:
        raise ValueError(
            f"q={q!r}: claim trees need an integer width 2 <= q <= {MAX_Q} "
            f"(M_D is stored as a 2^q-wide table)"
        )
    if not isinstance(depth, (int, np.integer)) or isinstance(depth, bool) or depth < 1:
        raise ValueError(f"depth={depth!r}: the tree depth must be an integer >= 1")
    if not isinstance(n_cand, (int, np.integer)) or isinstance(n_cand, bool) or n_cand < 1:
        raise ValueError(f"n_cand={n_cand!r}: the number of candidate decompositions must be >= 1")
    n = n_nodes(int(q), int(depth), int(n_cand))
    if n > MAX_NODES:
        raise ValueError(
            f"depth={depth!r}: a tree with q={q}, n_cand={n_cand} and this depth has {n} nodes; "
            f"at most {MAX_NODES} are allowed"
        )


@struct.dataclass
class ClaimTree:
    """A complete claim tree (spec PED 1): truths, candidate decompositions and M_D tables.

    Array fields are pytree leaves, so a batch of trees vmaps. ``M_D(x, yhat, y_c, z) =
    tables[agg[v, c], code(z)]``; a materialised ``md_table[node, cand, 2^q]`` is
    :attr:`md_table`.
    """

    truth: jax.Array  # int8 [N]: T(claim) in {0, 1}; -1 where hidden in a public view
    # bool [N]: whether every player can observe the claim's truth (a root oracle such as Miller-
    # Rabin, or checkable evidence). Strategies that do not see the truth get public, in which the
    # other truths read -1
    known: jax.Array
    agg: jax.Array  # int32 [N, C]: which aggregator table is M_D at (node, candidate) (leaves: 0)
    tables: jax.Array  # int8 [K, 2^q]: M_D value for every answer pattern of each aggregator
    q: int = struct.field(pytree_node=False)  # subclaims per decomposition (static)
    depth: int = struct.field(pytree_node=False)  # leaves are at depth depth (static)
    # candidate decompositions per claim (static)
    n_cand: int = struct.field(pytree_node=False, default=1)
    # the candidate an honest prover uses: the stable one where there is a choice
    honest_cand: int = struct.field(pytree_node=False, default=0)
    # one word per candidate, for reports
    cand_names: tuple = struct.field(pytree_node=False, default=())

    # ---- static shape helpers -------------------------------------------------------------
    @property
    def branching(self) -> int:
        """Children per internal node over all candidates."""
        return self.q * self.n_cand

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return n_nodes(self.q, self.depth, self.n_cand)

    @property
    def n_internal(self) -> int:
        """Number of internal nodes (depth < ``depth``), the indices ``[0, n_internal)``."""
        return level_offset(self.q, self.n_cand, self.depth)

    def level_offset(self, k: int) -> int:
        """Index of the first node at depth ``k``."""
        return level_offset(self.q, self.n_cand, k)

    # ---- traced accessors -----------------------------------------------------------------
    def children(self, node, cand) -> jax.Array:
        """Indices of the q subclaims of candidate decomposition ``cand`` of ``node``."""
        return node * self.branching + 1 + cand * self.q + jnp.arange(self.q, dtype=jnp.int32)

    def child(self, node, cand, j) -> jax.Array:
        """Index of subclaim ``j`` of candidate ``cand`` of ``node``."""
        return node * self.branching + 1 + cand * self.q + j

    def md(self, node, cand) -> jax.Array:
        """``M_D`` of (node, cand) for all answer patterns."""
        return self.tables[self.agg[node, cand]]

    @property
    def md_table(self) -> jax.Array:
        """Materialised ``md_table[node, cand, 2^q]`` (spec PED 10)."""
        return self.tables[self.agg]

    def child_truths(self, node, cand) -> jax.Array:
        """Truths of the q subclaims of (node, cand)."""
        return self.truth[self.children(node, cand)]

    def public(self) -> ClaimTree:
        """The view of a player who sees only public truths: hidden truths read ``-1``."""
        truth = jnp.where(self.known, self.truth, -1).astype(jnp.int8)
        return dataclasses.replace(self, truth=truth)


def truth_code(truths) -> jax.Array:
    """Little-endian code of a {0,1} pattern (traced)."""
    q = truths.shape[-1]
    weights = (1 << jnp.arange(q, dtype=jnp.int32)).astype(jnp.int32)
    return jnp.sum(truths.astype(jnp.int32) * weights, axis=-1)


def child_codes(tree: ClaimTree) -> np.ndarray:
    """Host side: the code of the true answer pattern of every (internal node, candidate)."""
    truth = np.asarray(tree.truth)
    if truth.ndim != 1:
        raise ValueError(f"tree.truth.ndim={truth.ndim}: pass one tree, not a batch")
    b, q = tree.branching, tree.q
    v = np.arange(tree.n_internal)[:, None, None]
    idx = v * b + 1 + np.arange(tree.n_cand)[None, :, None] * q + np.arange(q)[None, None, :]
    return bits_to_code(truth[idx])


def check_decomposable(tree: ClaimTree) -> None:
    """Host side: raise ValueError unless ``M_D(T(y)) = T(yhat)`` everywhere (spec PED 7.1)."""
    truth = np.asarray(tree.truth)
    if truth.min() < 0:
        raise ValueError("tree.truth has hidden entries (-1): check the full tree, not a view")
    codes = child_codes(tree)
    tables = np.asarray(tree.tables)
    agg = np.asarray(tree.agg)[: tree.n_internal]
    implied = tables[agg, codes]
    parent = truth[: tree.n_internal, None]
    bad = np.argwhere(implied != parent)
    if bad.size:
        v, c = bad[0]
        raise ValueError(
            f"node {v}, candidate {c}: M_D(T(children)) = {implied[v, c]} but T(node) = "
            f"{parent[v, 0]}; the tree is not recursively decomposable"
        )
