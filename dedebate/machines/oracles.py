"""Oracles: the (simulated) human judgement a machine queries (spec DED 3.1, 3.2).

An oracle maps a query string z (the masked dependency bits of an ORACLE step, int8[L] with a
bool mask) and the step index t to ``pi(z) = P[O(z) = 1]``; a deterministic oracle returns 0 or
1. The step index is there because in the Lean model the oracle sees the prefix length. Each
oracle is a ``flax.struct`` pytree (numbers dynamic, sizes static); its builder validates the
probabilities on the host, naming the offending entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


class Oracle(Protocol):
    """The oracle interface: ``prob(query, mask, t) -> pi(z)``."""

    def prob(self, query: jax.Array, mask: jax.Array, t: jax.Array) -> jax.Array:
        """``pi(z) = P[O(z) = 1]`` for the query z at step t.

        Args:
            query: int8 ``[L]``, the query bits.
            mask: bool ``[L]``, the slots that belong to the query.
            t: int32 step index.

        Returns:
            float32 scalar in ``[0, 1]``.
        """


def check_probabilities(name: str, values) -> np.ndarray:
    """``values`` as float32 numpy, each checked to be a probability in ``[0, 1]`` (host)."""
    arr = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f"{name}[{', '.join(map(str, idx))}]" if arr.ndim else name
        raise ValueError(
            f"{where}={float(arr[idx])!r}: a probability must lie in [0, 1] (NaN is not allowed)"
        )
    return arr.astype(np.float32)


def query_code(query: jax.Array, n_bits: int) -> jax.Array:
    """Little-endian integer code of the first ``n_bits`` query bits.

    A query shorter than ``n_bits`` (a program with fewer dependency slots than the table's query
    length) is an error rather than a silent broadcast.
    """
    if query.shape[-1] < n_bits:
        raise ValueError(
            f"query has {query.shape[-1]} bits: the oracle reads queries of length {n_bits}; give "
            "the program at least that many dependency slots"
        )
    w = jnp.left_shift(jnp.int32(1), jnp.arange(n_bits, dtype=jnp.int32))
    return jnp.sum(query[:n_bits].astype(jnp.int32) * w)


@struct.dataclass
class TableOracle:
    """``pi(z) = table[code(z)]`` over all 2^l queries of length l (the first l dependency bits)."""

    table: jax.Array  # float32[2^l]
    l: int = struct.field(pytree_node=False)

    def prob(self, query, mask, t):
        """``pi(z) = table[code(z)]``."""
        return self.table[query_code(query, self.l)]


def table_oracle(table) -> TableOracle:
    """A validated :class:`TableOracle`: ``2^l`` probabilities by the first l query bits."""
    arr = check_probabilities("table", table)
    l = int(np.log2(arr.size)) if arr.size else -1
    if arr.ndim != 1 or arr.size != 2**l:
        raise ValueError(f"table has {arr.size} entries: a table oracle needs 2^l entries")
    return TableOracle(table=jnp.asarray(arr), l=l)


@struct.dataclass
class PositionOracle:
    """``pi(z, t) = probs[t]``: the answer depends only on the step index (spec DED 9, F1/F2)."""

    probs: jax.Array  # float32[T]

    def prob(self, query, mask, t):
        """``pi(z) = probs[t]``."""
        return self.probs[t]


def position_oracle(probs) -> PositionOracle:
    """Validated :class:`PositionOracle`."""
    return PositionOracle(probs=jnp.asarray(check_probabilities("probs", probs)))


@struct.dataclass
class PrefixMeanOracle:
    """``pi(z) = mean of the unmasked query bits`` (0 for an empty query); spec DED 9, F2."""

    def prob(self, query, mask, t):
        """``pi(z)``: the mean of the unmasked query bits."""
        n = jnp.sum(mask)
        s = jnp.sum(jnp.where(mask, query, 0).astype(jnp.float32))
        return jnp.where(n > 0, s / jnp.maximum(n, 1), 0.0).astype(jnp.float32)


@struct.dataclass
class AffineMeanOracle:
    """``pi(z, t) = base[t] + weight[t] * mean(unmasked z)`` (mean 0 for an empty query).

    Covers the position-only oracle (``weight = 0``), the prefix-mean oracle (``base = 0``,
    ``weight = 1``) and their per-step mixtures used by the fixtures' step programs (spec DED 9:
    F1, F2, F3). Build with :func:`affine_mean_oracle`, which checks that ``base[t]`` and
    ``base[t] + weight[t]`` (the two extremes of the mean) are probabilities.
    """

    base: jax.Array  # float32[T]
    weight: jax.Array  # float32[T]

    def prob(self, query, mask, t):
        """``pi(z) = base[t] + weight[t] * mean(unmasked z)``."""
        n = jnp.sum(mask)
        s = jnp.sum(jnp.where(mask, query, 0).astype(jnp.float32))
        mean = jnp.where(n > 0, s / jnp.maximum(n, 1), 0.0)
        return jnp.clip(self.base[t] + self.weight[t] * mean, 0.0, 1.0).astype(jnp.float32)


def affine_mean_oracle(base, weight) -> AffineMeanOracle:
    """A validated :class:`AffineMeanOracle`: ``base[t]``, ``base[t] + weight[t]`` in [0, 1]."""
    b = check_probabilities("base", base)
    w = np.asarray(weight, dtype=np.float64)
    if b.ndim != 1 or w.shape != b.shape:
        raise ValueError(f"weight has shape {w.shape}: it needs the shape of base {b.shape} (1-D)")
    check_probabilities("base + weight", b.astype(np.float64) + w)
    return AffineMeanOracle(base=jnp.asarray(b), weight=jnp.asarray(w, jnp.float32))


@struct.dataclass
class HashedOracle:
    """A pseudo-random oracle for long queries: ``pi(z) = lo + (hi - lo) * hash(seed, z) / 2^32``.

    The hash is a fixed integer mix (multiply-xorshift over the masked bits and their positions), so
    it is a fixed function of the query and costs O(L) per query. With ``deterministic=True`` the
    oracle answers the bit ``1[pi(z) >= 1/2]`` (a deterministic oracle for spec DED 6-7).
    """

    seed: jax.Array  # uint32 scalar
    lo: jax.Array
    hi: jax.Array
    deterministic: bool = struct.field(pytree_node=False, default=False)

    def _hash(self, query, mask):
        pos = jnp.arange(query.shape[0], dtype=jnp.uint32)
        v = jnp.where(mask, query.astype(jnp.uint32) + 1, 0).astype(jnp.uint32)
        h = v * jnp.uint32(0x9E3779B1) + pos * jnp.uint32(0x85EBCA77) + self.seed
        h = h ^ (h >> 15)
        h = h * jnp.uint32(0x2C1B3C6D)
        h = h ^ (h >> 12)
        acc = jax.lax.reduce(h, jnp.uint32(0), jax.lax.bitwise_xor, (0,))
        acc = acc ^ (acc >> 16)
        acc = acc * jnp.uint32(0x7FEB352D)
        acc = acc ^ (acc >> 15)
        return acc

    def prob(self, query, mask, t):
        """``pi(z) = lo + (hi - lo) * hash(seed, z) / 2^32``."""
        u = self._hash(query, mask).astype(jnp.float32) / jnp.float32(2.0**32)
        p = self.lo + (self.hi - self.lo) * u
        return (p >= 0.5).astype(jnp.float32) if self.deterministic else p


def hashed_oracle(
    seed: int, lo: float = 0.0, hi: float = 1.0, deterministic: bool = False
) -> HashedOracle:
    """A validated :class:`HashedOracle` (``0 <= lo <= hi <= 1``; or ``1[pi >= 1/2]``)."""
    check_probabilities("lo", lo)
    check_probabilities("hi", hi)
    if lo > hi:
        raise ValueError(f"lo={lo} > hi={hi}: the probability range must satisfy lo <= hi")
    return HashedOracle(
        seed=jnp.uint32(seed % 2**32),
        lo=jnp.float32(lo),
        hi=jnp.float32(hi),
        deterministic=deterministic,
    )


class JudgeMLP(nn.Module):
    """A small MLP standing in for simulated human judgement: query bits -> P[yes]."""

    hidden: int = 16

    @nn.compact
    def __call__(self, query: jax.Array) -> jax.Array:
        h = nn.tanh(nn.Dense(self.hidden)(query.astype(jnp.float32) * 2.0 - 1.0))
        return jax.nn.sigmoid(nn.Dense(1)(h)[..., 0])


@struct.dataclass
class NeuralOracle:
    """``pi(z) = sigmoid(MLP(z))`` with Flax parameters (a black-box simulated judge)."""

    params: Mapping[str, Any]  # Flax variables (a dict or FrozenDict)
    hidden: int = struct.field(pytree_node=False, default=16)

    def prob(self, query, mask, t):
        """``pi(z) = sigmoid(MLP(z))``."""
        q = jnp.where(mask, query, 0)
        return jnp.asarray(JudgeMLP(self.hidden).apply(self.params, q), jnp.float32)


def neural_oracle(key: jax.Array, query_len: int, hidden: int = 16) -> NeuralOracle:
    """A :class:`NeuralOracle` with freshly initialised parameters."""
    if query_len < 1:
        raise ValueError(f"query_len={query_len}: a neural oracle needs queries of length >= 1")
    params = JudgeMLP(hidden).init(key, jnp.zeros((query_len,), jnp.int8))
    return NeuralOracle(params=params, hidden=hidden)
