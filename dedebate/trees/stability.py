"""rho-stability as fractional block sensitivity (spec PED 3).

Host-side linear programs (numpy + scipy HiGHS): the fbs packing LP over the sensitive blocks and
its dual (spec 3.2), the worst-case flip probability ``F(eps) = eps * fbs`` for ``eps <= 1/q``
(spec 3.3), closed forms for thresholds, AND, OR, majority, parity and dictator (spec 3.4), fbs
of every node of a tree and the tree's smallest admissible rho, and the error-shifting
estimator's table (spec 4). For jitted code :func:`lp_lookup` solves the LPs once per aggregator
table and reachable child code, and the ``*_jnp`` functions index the result inside ``jit``. A
function ``f: {0,1}^q -> {0,1}`` is given as its table ``f[code(z)]`` (little-endian codes).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dedebate.core.bits import bit_table
from dedebate.trees.tree import MAX_Q, ClaimTree, child_codes


def _linprog(*args, **kwargs):
    """``scipy.optimize.linprog``, imported on first use (its import costs ~0.5 s of CPU)."""
    from scipy.optimize import linprog as solve

    return solve(*args, **kwargs)


def _check_function(table, z) -> tuple[np.ndarray, int, int]:
    """The table as int64 0/1, q and the code z, each checked."""
    raw = np.asarray(table)
    if raw.ndim != 1:
        raise ValueError(f"table.shape={raw.shape}: a function's table is one row of 2^q entries")
    n = raw.size
    q = n.bit_length() - 1
    if n < 2 or 2**q != n:
        raise ValueError(f"table has {n} entries: a function of q bits needs 2^q entries, q >= 1")
    if q > MAX_Q:
        raise ValueError(f"q={q}: fbs LPs are limited to q <= {MAX_Q} (2^q blocks)")
    if raw.dtype.kind not in "biuf" or not np.isin(raw, (0, 1)).all():
        raise ValueError("table: a boolean function's table must hold only 0 and 1")
    f = raw.astype(np.int64)
    if isinstance(z, (bool, np.bool_)) or not isinstance(z, (int, np.integer)):
        raise ValueError(f"z={z!r}: an answer pattern's code is an integer")
    z = int(z)
    if not 0 <= z < n:
        raise ValueError(f"z={z}: an answer pattern of q={q} bits has a code in [0, {n})")
    return f, q, z


def sensitive_blocks(table, z) -> np.ndarray:
    """Codes of the nonempty blocks ``B`` with ``f(z XOR 1_B) != f(z)`` (spec 3.2)."""
    f, q, z = _check_function(table, z)
    blocks = np.arange(1, 2**q)
    return blocks[f[z ^ blocks] != f[z]]


def fbs(table, z, return_packing: bool = False):
    """Fractional block sensitivity ``fbs_z(f)`` by the packing LP (spec 3.2)::

        max sum_{B in S_z} u_B   s.t.  sum_{B ∋ i} u_B <= 1 (all i),  u >= 0.

    With ``return_packing`` also ``u``, float64 ``[2^q]`` by block code (zero off ``S_z``).
    """
    f, q, z = _check_function(table, z)
    blocks = sensitive_blocks(f, z)
    u = np.zeros(2**q)
    if blocks.size == 0:
        return (0.0, u) if return_packing else 0.0
    a_ub = bit_table(q)[blocks].T.astype(np.float64)  # [q, |S|]
    res = _linprog(
        -np.ones(blocks.size), A_ub=a_ub, b_ub=np.ones(q), bounds=(0, None), method="highs"
    )
    if res.status != 0:
        raise RuntimeError(f"fbs LP failed: {res.message}")
    u[blocks] = np.clip(res.x, 0.0, None)
    value = float(-res.fun)
    return (value, u) if return_packing else value


def fbs_dual(table, z, return_cover: bool = False):
    """The dual (fractional certificate) LP, equal in value to :func:`fbs`::

        min sum_i t_i   s.t.  sum_{i in B} t_i >= 1 (all B in S_z),  t >= 0.

    With ``return_cover`` also ``t``, float64 ``[q]``.
    """
    f, q, z = _check_function(table, z)
    blocks = sensitive_blocks(f, z)
    if blocks.size == 0:
        return (0.0, np.zeros(q)) if return_cover else 0.0
    a_ub = -bit_table(q)[blocks].astype(np.float64)  # [|S|, q]
    res = _linprog(
        np.ones(q), A_ub=a_ub, b_ub=-np.ones(blocks.size), bounds=(0, None), method="highs"
    )
    if res.status != 0:
        raise RuntimeError(f"fbs dual LP failed: {res.message}")
    value = float(res.fun)
    return (value, np.clip(res.x, 0.0, None)) if return_cover else value


def flip_probability(table, z, eps: float) -> float:
    """Worst-case ``Pr[f(z') != f(z)]`` with marginal error ``<= eps`` per coordinate (spec 3.3)::

    F(eps) = max { sum_{B in S_z} w_B : sum_{B ∋ i} w_B <= eps,  sum_B w_B <= 1,  w >= 0 }.
    """
    f, q, z = _check_function(table, z)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"eps={eps!r}: a marginal error must lie in [0, 1]")
    blocks = np.arange(2**q)
    sens = (f[z ^ blocks] != f[z]).astype(np.float64)
    a_ub = np.vstack([bit_table(q).T.astype(np.float64), np.ones((1, 2**q))])
    b_ub = np.concatenate([np.full(q, eps), [1.0]])
    res = _linprog(-sens, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"flip-probability LP failed: {res.message}")
    return float(-res.fun)


# ---- closed forms (spec 3.4) -----------------------------------------------------------------
def fbs_threshold(q: int, t: int, w: int) -> float:
    """fbs of ``Thr_t`` at a point with w ones: ``w/(w-t+1)`` if ``w >= t`` else ``(q-w)/(t-w)``."""
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (q, t, w)):
        raise ValueError(f"(q, t, w)=({q!r}, {t!r}, {w!r}): need integers")
    if not 1 <= t <= q or not 0 <= w <= q:
        raise ValueError(f"(q, t, w)=({q}, {t}, {w}): need 1 <= t <= q and 0 <= w <= q")
    return w / (w - t + 1) if w >= t else (q - w) / (t - w)


def fbs_and(q: int, w: int) -> float:
    """fbs of AND: q at all ones, 1 elsewhere."""
    return fbs_threshold(q, q, w)


def fbs_or(q: int, w: int) -> float:
    """fbs of OR: q at all zeros, 1 elsewhere."""
    return fbs_threshold(q, 1, w)


def fbs_majority(q: int, w: int) -> float:
    """fbs of MAJ of q = 2m + 1 bits: ``w/(w-m)`` for ``w >= m+1``, ``(q-w)/(m+1-w)`` otherwise."""
    if q % 2 != 1:
        raise ValueError(f"q={q!r}: majority needs an odd number of bits")
    return fbs_threshold(q, (q + 1) // 2, w)


def fbs_parity(q: int) -> float:
    """fbs of parity: every singleton is sensitive, so q at every point."""
    if not isinstance(q, (int, np.integer)) or isinstance(q, bool) or q < 1:
        raise ValueError(f"q={q!r}: parity needs an integer number of bits q >= 1")
    return float(q)


def fbs_dictator() -> float:
    """fbs of a dictator: 1 at every point."""
    return 1.0


# ---- trees -------------------------------------------------------------------------------------
def _unique_lp(tree: ClaimTree, solve, cache: dict | None):
    """Apply ``solve(table, code)`` to every distinct (aggregator, true child code) pair."""
    codes = child_codes(tree)  # [n_int, C]
    agg = np.asarray(tree.agg)[: tree.n_internal]
    tables = np.asarray(tree.tables)
    cache = {} if cache is None else cache
    pairs = np.stack([agg, codes], axis=-1).reshape(-1, 2)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
    results = []
    for a, c in uniq:
        key = (tables[a].astype(np.int8).tobytes(), int(c))  # a byte an entry: the size gives q
        if key not in cache:
            cache[key] = solve(tables[a], int(c))
        results.append(cache[key])
    return results, inverse.reshape(codes.shape)


def node_fbs(tree: ClaimTree, cache: dict | None = None) -> np.ndarray:
    """float64 ``fbs[v, c]`` of ``M_D`` at internal node v, candidate c, at the true children.

    ``cache``: an optional dict of LP results keyed by (table, code), shared between calls.
    """
    cache = {} if cache is None else cache
    results, inverse = _unique_lp(tree, lambda f, z: fbs(f, z, return_packing=True), cache)
    values = np.array([r[0] for r in results])
    return values[inverse]


def tree_rho(tree: ClaimTree, cand: int | None = None, cache: dict | None = None) -> float:
    """An admissible rho for A decomposing by candidate ``cand`` (default: the honest one): the
    max fbs over every internal node at its true children (spec 3.3). The tree also holds nodes
    only other candidates reach, so this can exceed the smallest, the max over the nodes A's own
    decompositions reach (``hidden_flaw_tree(q=4)``: 2 against 4/3).
    """
    c = tree.honest_cand if cand is None else cand
    if not isinstance(c, (int, np.integer)) or isinstance(c, bool) or not 0 <= c < tree.n_cand:
        raise ValueError(f"cand={cand!r}: the tree has candidates 0..{tree.n_cand - 1}")
    return float(node_fbs(tree, cache)[:, c].max())


def error_shifting_table(tree: ClaimTree, cache: dict | None = None) -> np.ndarray:
    """The error-shifting estimator's distribution at every (node, candidate) (spec 4).

    Mass ``u_B / fbs`` on pattern ``z* XOR B`` for an optimal packing ``u``, ``z*`` the true child
    vector. Where fbs = 0 (no sensitive block) the row is the point mass on ``z*``.
    """
    cache = {} if cache is None else cache
    results, inverse = _unique_lp(tree, lambda f, z: fbs(f, z, return_packing=True), cache)
    codes = child_codes(tree)
    blocks = np.arange(2**tree.q)
    rel = np.zeros((len(results), 2**tree.q))  # mass on block B (B = 0: stay at the truth)
    for i, (value, u) in enumerate(results):
        if value > 0:
            rel[i] = u / value
        else:
            rel[i, 0] = 1.0
    # pattern y = z* XOR B, so out[v, c, y] = rel[v, c, y XOR z*]
    patterns: np.ndarray = codes[..., None] ^ blocks
    out = np.take_along_axis(rel[inverse], patterns, axis=-1)
    return out.astype(np.float32)


# ---- LP results as lookup tables for jitted code -------------------------------------------------
def lp_lookup(tables, popcounts) -> dict[str, np.ndarray]:
    """Host (scipy HiGHS): the fbs packing LP of every aggregator table at every reachable code.

    The codes solved are those whose number of true children is in ``popcounts``. A tree family's
    rules fix its tables and reachable codes (e.g. a threshold rule: the popcounts ``true_counts +
    false_counts``; an AND rule: ``q`` and ``q - 1``), so one lookup serves every tree the family's
    generator draws, whatever the key.
    """
    tables = np.asarray(tables)
    n_tab, size = tables.shape
    pop = np.asarray([bin(z).count("1") for z in range(size)])
    want = np.isin(pop, np.asarray(sorted(set(int(w) for w in popcounts)), np.int64))
    value = np.full((n_tab, size), np.nan)
    row = np.full((n_tab, size), -1, np.int32)
    rels: list[np.ndarray] = []
    for a in range(n_tab):
        for z in np.flatnonzero(want):
            v, u = fbs(tables[a], int(z), return_packing=True)
            rel = np.zeros(size)
            if v > 0:
                rel = u / v
            else:
                rel[0] = 1.0
            value[a, z], row[a, z] = v, len(rels)
            rels.append(rel)
    rels.append(np.full(size, np.nan))
    row[row < 0] = len(rels) - 1
    return {"fbs": value, "row": row, "rel": np.stack(rels).astype(np.float32)}


def child_codes_jnp(tree: ClaimTree):
    """:func:`child_codes` for jitted code: codes of the true child patterns."""
    b, q = tree.branching, tree.q
    v = np.arange(tree.n_internal)[:, None, None]
    idx = v * b + 1 + np.arange(tree.n_cand)[None, :, None] * q + np.arange(q)[None, None, :]
    bits = jnp.asarray(tree.truth)[idx].astype(jnp.int32)
    return jnp.sum(bits << jnp.arange(q, dtype=jnp.int32), axis=-1)


def node_fbs_jnp(tree: ClaimTree, fbs_table):
    """:func:`node_fbs` for jitted code: fbs[v, c] at the true child vector."""
    agg = jnp.asarray(tree.agg)[: tree.n_internal]
    return jnp.asarray(fbs_table)[agg, child_codes_jnp(tree)]


def error_shifting_table_jnp(tree: ClaimTree, lookup: dict):
    """:func:`error_shifting_table` for jitted code, from the tree's :func:`lp_lookup`."""
    codes = child_codes_jnp(tree)
    agg = jnp.asarray(tree.agg)[: tree.n_internal]
    rel = jnp.asarray(lookup["rel"])[jnp.asarray(lookup["row"])[agg, codes]]  # [v, c, B]
    blocks = jnp.arange(2**tree.q, dtype=jnp.int32)
    return jnp.take_along_axis(rel, codes[..., None] ^ blocks, axis=-1)
