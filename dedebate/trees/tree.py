"""Complete q-ary claim trees as flat arrays (spec PED 1, 7.1 and 10).

A claim tree holds every claim a prover could put up in a depth-``depth`` debate. Each internal
claim has ``n_cand`` candidate decompositions, each into ``q`` subclaims, so the node set is a
complete ``b``-ary tree with ``b = n_cand * q``, numbered breadth first:

    root = 0,   children(v, c) = v * b + 1 + c * q + [0, 1, ..., q - 1],

and level ``k`` (claims at depth ``k``) is the index range ``[offset(k), offset(k + 1))`` with
``offset(k) = (b^k - 1) / (b - 1)``. Every node therefore has one parent and one path from the
root: the path, and with it every estimate a debate attaches to the node, is a function of the
node index alone.

The judge's decomposition machine is a table: ``M_D(x, yhat, y_c, z) = tables[agg[v, c], code(z)]``
for the answer pattern ``z in {0,1}^q`` with little-endian code (``dedebate.core.bit_table``). A
small library of aggregator tables indexed per (node, candidate) replaces a materialised
``md_table[node, cand, 2^q]`` (available as :attr:`ClaimTree.md_table`): the library trees use one
or two aggregators for all nodes, which keeps deep trees small.

Recursive decomposability (spec PED 7.1) is ``M_D(T(y)) = T(yhat)`` at every internal node and
candidate; :func:`check_decomposable` verifies it on the host.
"""

from __future__ import annotations

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

    Array fields (pytree leaves, so a batch of trees vmaps):

    * ``truth``  int8[N]: ``T(claim)`` in {0, 1}; ``-1`` where hidden in a public view.
    * ``known``  bool[N]: whether every player can observe the claim's truth (a root oracle such as
      Miller-Rabin, or checkable evidence). Strategies that do not see the truth get
      :meth:`public`, in which the other truths read ``-1``.
    * ``agg``    int32[N, C]: which aggregator table is ``M_D`` at (node, candidate) (leaves: 0).
    * ``tables`` int8[K, 2^q]: ``M_D`` value for every answer pattern of each aggregator.

    Static fields: ``q``, ``depth`` (leaves are at depth ``depth``), ``n_cand`` and ``honest_cand``
    (the candidate decomposition an honest prover uses: the stable one where there is a choice),
    and ``cand_names`` (one word per candidate, for reports).
    """

    truth: jax.Array
    known: jax.Array
    agg: jax.Array
    tables: jax.Array
    q: int = struct.field(pytree_node=False)
    depth: int = struct.field(pytree_node=False)
    n_cand: int = struct.field(pytree_node=False, default=1)
    honest_cand: int = struct.field(pytree_node=False, default=0)
    cand_names: tuple = struct.field(pytree_node=False, default=())

    # ---- static shape helpers -------------------------------------------------------------
    @property
    def branching(self) -> int:
        return self.q * self.n_cand

    @property
    def n_nodes(self) -> int:
        return n_nodes(self.q, self.depth, self.n_cand)

    @property
    def n_internal(self) -> int:
        """Number of internal nodes (depth < ``depth``); they are the indices ``[0, n_internal)``."""
        return level_offset(self.q, self.n_cand, self.depth)

    def level_offset(self, k: int) -> int:
        return level_offset(self.q, self.n_cand, k)

    # ---- traced accessors -----------------------------------------------------------------
    def children(self, node, cand) -> jax.Array:
        """Indices of the q subclaims of candidate decomposition ``cand`` of ``node``."""
        return node * self.branching + 1 + cand * self.q + jnp.arange(self.q, dtype=jnp.int32)

    def child(self, node, cand, j) -> jax.Array:
        return node * self.branching + 1 + cand * self.q + j

    def md(self, node, cand) -> jax.Array:
        """``M_D`` of (node, cand) for all answer patterns: int8[2^q]."""
        return self.tables[self.agg[node, cand]]

    @property
    def md_table(self) -> jax.Array:
        """Materialised ``md_table[node, cand, 2^q]`` (spec PED 10)."""
        return self.tables[self.agg]

    def child_truths(self, node, cand) -> jax.Array:
        """Truths of the q subclaims (int8[q]; ``-1`` where hidden in a public view)."""
        return self.truth[self.children(node, cand)]

    def public(self) -> ClaimTree:
        """The view of a player who sees only public truths: hidden truths read ``-1``."""
        return self.replace(truth=jnp.where(self.known, self.truth, -1).astype(jnp.int8))


def truth_code(truths) -> jax.Array:
    """Little-endian code of a {0,1} pattern ``truths[..., q]`` (traced)."""
    q = truths.shape[-1]
    weights = (1 << jnp.arange(q, dtype=jnp.int32)).astype(jnp.int32)
    return jnp.sum(truths.astype(jnp.int32) * weights, axis=-1)


def child_codes(tree: ClaimTree) -> np.ndarray:
    """Host side: ``codes[v, c]`` = code of the true answer pattern of candidate c at internal v."""
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
