"""Claim trees over labelled images: audits of digits (spec PED 9.4, 9.5; docs/ped-digits.md).

A tree of depth D and width q audits ``q^D`` images (a multiset S) for one digit d. The claim at
depth k covers a contiguous block of ``q^(D-k)`` images and says it passes its audit, ``M_D =
Thr_m`` of its q parts' audits (each stated with its count ``m^(D-k-1)``), down to the leaves,
where a claim is "this image shows d"; a passing block holds at least ``m^(D-k)`` d's. Two
families:

* ``exact`` (m = q, AND): every part must reach its count, so a claim is true iff every image
  shows d; a false claim misses by one image (one false part). fbs = q at a true claim.
* ``slack`` (m < q, threshold): truths follow the noisy-evidence rule of spec 9.4 (a true claim
  has q-1 or q true parts, a false one 0 or 1), so fbs is ``w / (w - m + 1)`` at w true parts.
  A true claim holds its count; a false one is the failed audit ``Thr_m`` of its parts, whose
  block may still hold that many d's (the count is not its truth).

Truths are drawn top down by :func:`dedebate.trees.library.build_tree` (hidden from players:
``known`` is False), then each leaf gets an image of digit d if true and of another digit if
false, drawn from one pool of a disjoint split, so training and evaluation trees share no image.
The judge at a leaf answers from the label, flipped with probability eta. Pure: the images and
labels are arrays the caller loads.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.programs import jit
from dedebate.trees.library import and_rule, build_tree, threshold_rule
from dedebate.trees.tree import ClaimTree

FAMILIES = ("exact", "slack")
N_DIGITS = 10


def family_rule(family: str, q: int, m: int):
    """The decomposition rule of a family.

    Args:
        family: ``"exact"`` (AND of q parts) or ``"slack"`` (``Thr_m``, true claims with q-1 or
            q true parts, false ones with 0 or 1).
        q: parts per claim.
        m: parts that must reach their counts (slack only; ``1 <= m < q``).

    Returns:
        A :class:`~dedebate.trees.library.CandidateRule` with hidden subclaim truths.
    """
    if family == "exact":
        return and_rule(q, public=False)
    if family != "slack":
        raise ValueError(f"family={family!r}: allowed values are {FAMILIES}")
    if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or not 1 <= m < q:
        raise ValueError(f"m={m!r}: the slack family needs an integer 1 <= m < q={q}")
    true_counts = tuple(w for w in (q - 1, q) if w >= m)
    false_counts = tuple(w for w in (0, 1) if w < m)
    return threshold_rule(q, m, true_counts, false_counts, public=False)


def stated_counts(family: str, q: int, m: int, depth: int) -> np.ndarray:
    """The count each claim states, by depth: ``m'^(D-k)`` with ``m' = q`` (exact) or ``m``.

    Args:
        family: the family.
        q: parts per claim.
        m: the slack family's threshold.
        depth: the tree's depth D.

    Returns:
        int numpy array ``[D + 1]``.
    """
    if family not in FAMILIES:
        raise ValueError(f"family={family!r}: allowed values are {FAMILIES}")
    if not isinstance(depth, (int, np.integer)) or isinstance(depth, bool) or depth < 0:
        raise ValueError(f"depth={depth!r}: a tree's depth is an integer >= 0")
    base = q if family == "exact" else m
    return np.asarray([base ** (depth - k) for k in range(depth + 1)], np.int64)


def split_pools(labels, shares, seed: int) -> list[np.ndarray]:
    """Disjoint pools of image indices (a seeded permutation cut by ``shares``).

    Args:
        labels: int ``[n]`` labels of the whole data set.
        shares: fractions of the images per pool (positive, summing to at most 1).
        seed: the permutation's seed.

    Returns:
        One int numpy array of indices per pool, each sorted by label (then index).
    """
    labels = np.asarray(labels)
    shares = np.asarray(shares, np.float64)
    if shares.ndim != 1 or np.any(shares <= 0) or shares.sum() > 1 + 1e-9:
        raise ValueError(f"shares={shares.tolist()}: need positive fractions summing to <= 1")
    perm = np.random.default_rng(seed).permutation(labels.size)
    cuts = np.cumsum(np.floor(shares * labels.size).astype(int))  # equal shares: equal sizes
    pools = np.split(perm, cuts)[: shares.size]
    for i, p in enumerate(pools):
        if np.unique(labels[p]).size < N_DIGITS:
            raise ValueError(f"shares={shares.tolist()}: pool {i} lacks a digit; use larger shares")
    return [p[np.lexsort((p, labels[p]))] for p in pools]


@struct.dataclass
class Pool:
    """One pool's image indices sorted by label, with each digit's ``[start, start + count)``."""

    index: jax.Array  # int32 [n]
    start: jax.Array  # int32 [10]
    count: jax.Array  # int32 [10]


def pool(indices, labels) -> Pool:
    """A :class:`Pool` from indices sorted by label (as :func:`split_pools` returns them).

    Args:
        indices: int ``[n]`` image indices, sorted by label.
        labels: int ``[N]`` labels of the whole data set.

    Returns:
        The :class:`Pool`.
    """
    lab = np.asarray(labels)[np.asarray(indices)]
    if np.any(np.diff(lab) < 0):
        raise ValueError("indices: a pool must be sorted by label")
    count = np.bincount(lab, minlength=N_DIGITS)
    if np.any(count[:N_DIGITS] == 0):
        missing = np.flatnonzero(count[:N_DIGITS] == 0).tolist()
        raise ValueError(
            f"indices: the pool has no image of digit(s) {missing}; a tree may ask "
            "for any digit (split_pools makes pools that hold every digit)"
        )
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    return Pool(
        jnp.asarray(indices, jnp.int32),
        jnp.asarray(start, jnp.int32),
        jnp.asarray(count, jnp.int32),
    )


@struct.dataclass
class DigitTree:
    """A claim tree over images: the tree, its digit and the image index of every leaf."""

    tree: ClaimTree
    digit: jax.Array  # int32
    leaves: jax.Array  # int32 [q^D], left to right


def digit_tree(
    key, images_pool: Pool, family: str, q: int, m: int, depth: int, root_truth
) -> DigitTree:
    """One audit tree (traceable; vmap over keys and root truths for a batch).

    Args:
        key: a typed PRNG key.
        images_pool: the pool the leaves' images come from.
        family: ``"exact"`` or ``"slack"``.
        q: parts per claim.
        m: the slack family's threshold (ignored by ``exact``).
        depth: the depth D.
        root_truth: int 0/1 (may be traced).

    Returns:
        A :class:`DigitTree` (the truths hidden from players).
    """
    rule = family_rule(family, q, m)
    k_true, k_false, k_d, k_img = jax.random.split(key, 4)
    trees = [
        build_tree(k, (rule,), depth, root_truth=t, root_oracle=False)
        for k, t in ((k_true, 1), (k_false, 0))
    ]
    tree = jax.tree_util.tree_map(lambda a, b: jnp.where(root_truth == 1, a, b), *trees)
    digit = jax.random.randint(k_d, (), 0, N_DIGITS)
    leaf_truth = tree.truth[tree.level_offset(depth) :]
    n = leaf_truth.shape[0]
    u = jax.random.uniform(k_img, (n,))
    c, s = images_pool.count[digit], images_pool.start[digit]
    pos = s + jnp.minimum((u * c).astype(jnp.int32), c - 1)
    other = jnp.minimum(
        (u * (images_pool.index.shape[0] - c)).astype(jnp.int32), images_pool.index.shape[0] - c - 1
    )
    neg = jnp.where(other < s, other, other + c)
    leaves = images_pool.index[jnp.where(leaf_truth == 1, pos, neg)]
    return DigitTree(tree=tree, digit=digit, leaves=leaves)


def digit_trees(
    key, images_pool: Pool, family: str, q: int, m: int, depth: int, n_trees: int
) -> DigitTree:
    """A batch of trees, half with true roots (first half) and half with false ones.

    Args:
        key: a typed PRNG key.
        images_pool: the pool.
        family: the family.
        q: parts per claim.
        m: the slack threshold.
        depth: the depth.
        n_trees: how many (>= 2).

    Returns:
        A batched :class:`DigitTree` (leading axis ``n_trees``).
    """
    if not isinstance(n_trees, (int, np.integer)) or n_trees < 2:
        raise ValueError(f"n_trees={n_trees!r}: need an integer >= 2 (true and false roots)")
    family_rule(family, q, m)  # validates before tracing
    return _digit_trees(key, images_pool, family, q, m, depth, n_trees)


@jit(static_argnums=(2, 3, 4, 5, 6))
def _digit_trees(key, images_pool, family, q, m, depth, n_trees):
    truths = jnp.asarray(np.arange(n_trees) < (n_trees + 1) // 2, jnp.int32)
    keys = jax.random.split(key, n_trees)
    return jax.vmap(lambda k, t: digit_tree(k, images_pool, family, q, m, depth, t))(keys, truths)


def judge(key, truth, eta) -> jax.Array:
    """The noisy human at leaves: the label's answer, flipped with probability eta.

    Args:
        key: a typed PRNG key.
        truth: int ``[...]`` 0/1 truths of the leaf claims.
        eta: the flip probability in ``[0, 1/2]``.

    Returns:
        int8 answers, the shape of ``truth``.
    """
    flip = jax.random.uniform(key, jnp.shape(truth)) < eta
    return jnp.where(flip, 1 - truth, truth).astype(jnp.int8)


def judge_mean(truth, eta) -> jax.Array:
    """``E[judge answer] = (1 - eta) T + eta (1 - T)``, what exact-mode debates use.

    Args:
        truth: 0/1 truths (float or int).
        eta: the flip probability.

    Returns:
        float32 of the shape of ``truth``.
    """
    t = jnp.asarray(truth, jnp.float32)
    return (1.0 - eta) * t + eta * (1.0 - t)
