"""The Lean prefix model (spec DED 3.2): each step's oracle sees the whole prefix.

:class:`LeanMachine` implements the sequential-sampler interface of
:mod:`dedebate.machines.program` with ``P[y_n = 1 | y_<n] = clamp01(prob_fn(params, bits, n))``,
where ``bits`` is int8[T] with every entry at index >= n masked to 0 (so ``prob_fn`` reads only
the prefix), ``n`` is a traced int32 and ``params`` a pytree (vmappable). The clamp is Lean's
``bernoulli``; :func:`lean_machine` rejects on the host a ``prob_fn`` that returns a value
outside [0, 1] or NaN. Paper-model step programs are the special case where ``prob_fn`` reads
only ``bits[I(n)]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.programs import jit

# Prefix checks evaluate prob_fn on all 2^(T-1) transcripts up to this T, on a sample above it.
FULL_CHECK_T = 14
SAMPLED_CHECK_PREFIXES = 2048


@struct.dataclass
class LeanMachine:
    """A T-step Lean-model machine: ``prob_fn(params, masked_bits, n) -> P[y_n = 1]``."""

    params: Any
    prob_fn: Callable[[Any, jax.Array, jax.Array], jax.Array] = struct.field(pytree_node=False)
    T: int = struct.field(pytree_node=False)

    def init_state(self) -> jax.Array:
        """The state before step 0 (the empty prefix)."""
        return jnp.zeros((self.T,), jnp.int8)

    def raw_prob(self, bits: jax.Array, t) -> jax.Array:
        """``prob_fn`` on the prefix ``bits[:t]`` (later entries masked to 0), unclamped."""
        masked = jnp.where(jnp.arange(self.T) < t, bits, 0).astype(jnp.int8)
        return jnp.asarray(
            self.prob_fn(self.params, masked, jnp.asarray(t, jnp.int32)), jnp.float32
        )

    def prob(self, bits: jax.Array, t) -> jax.Array:
        """The step probability ``p_t = P[y_t = 1 | y_<t]``."""
        return jnp.clip(self.raw_prob(bits, t), 0.0, 1.0)

    def advance(self, bits: jax.Array, t, bit) -> jax.Array:
        """The state after writing ``y_t = bit``."""
        return bits.at[t].set(bit.astype(jnp.int8))

    def bits(self, bits: jax.Array) -> jax.Array:
        """The transcript written so far."""
        return bits


def _check_prefixes(m: LeanMachine, seed: int) -> None:
    T = m.T
    if T <= FULL_CHECK_T:
        codes = np.arange(2 ** (T - 1) if T > 1 else 1, dtype=np.int64)
        ys = (codes[:, None] >> np.arange(T)[None, :]) & 1
    else:
        ys = np.random.default_rng(seed).integers(0, 2, size=(SAMPLED_CHECK_PREFIXES, T))
    ys_jnp = jnp.asarray(ys, jnp.int8)

    def all_steps(y):
        return jax.vmap(lambda t: m.raw_prob(y, t))(jnp.arange(T))

    p = np.asarray(jit(jax.vmap(all_steps))(ys_jnp))
    bad = ~np.isfinite(p) | (p < 0) | (p > 1)
    if bad.any():
        row, n = (int(i) for i in np.argwhere(bad)[0])
        prefix = "".join(str(int(b)) for b in np.asarray(ys[row, :n]))
        raise ValueError(
            f"prob_fn(prefix={prefix!r}, n={n})={float(p[row, n])!r}: a step "
            "probability must lie in [0, 1] (NaN is not allowed)"
        )


def lean_machine(
    prob_fn: Callable, params: Any, T: int, check: bool = True, seed: int = 0
) -> LeanMachine:
    """A validated :class:`LeanMachine` of ``prob_fn(params, masked_bits, n) -> P[y_n = 1]``.

    With ``check`` (default) ``prob_fn`` is evaluated at every step on every prefix when ``T <= 14``
    (on 2048 random transcripts from ``seed`` otherwise) and must return probabilities in [0, 1].
    """
    if not isinstance(T, (int, np.integer)) or isinstance(T, bool) or T < 1:
        raise ValueError(f"T={T!r}: a Lean machine needs an integer number of steps T >= 1")
    if not callable(prob_fn):
        raise TypeError(f"prob_fn={prob_fn!r}: must be a function (params, bits, n) -> prob")
    m = LeanMachine(params=params, prob_fn=prob_fn, T=int(T))
    if check:
        _check_prefixes(m, seed)
    return m


# -- examples --------------------------------------------------------------------------------------
def _f2_prob(params, bits, n):
    T = bits.shape[0]
    mean = jnp.sum(bits.astype(jnp.float32)) / (T - 1)  # entries >= n are masked to 0
    return jnp.where(n < T - 1, params["pi"][jnp.minimum(n, T - 2)], mean)


def f2_lean(pi) -> LeanMachine:
    """Fixture F2 written directly in the Lean model (spec DED 9), for cross-checks.

    ``pi[n]`` for n < T-1, then the mean of the whole prefix; independent of
    :class:`~dedebate.machines.fixtures.MeanFinalMachine`.
    """
    from dedebate.machines.oracles import check_probabilities

    pi = check_probabilities("pi", pi)
    if pi.ndim != 1 or pi.size < 1:
        raise ValueError(f"pi shape={pi.shape}: F2 needs one probability per step but the last")
    return lean_machine(_f2_prob, {"pi": jnp.asarray(pi)}, int(pi.size) + 1, check=False)


def _polya_prob(params, bits, n):
    ones = jnp.sum(bits.astype(jnp.float32))
    return (params["a"] + ones) / (params["a"] + params["b"] + n.astype(jnp.float32))


def polya_urn(T: int, a: float = 1.0, b: float = 1.0) -> LeanMachine:
    """Polya's urn: ``P[y_n = 1 | y_<n] = (a + #ones) / (a + b + n)``; every step reads the whole
    prefix.

    By exchangeability every bit, the last one included, has P = a / (a + b).
    """
    if not (a > 0 and b > 0):
        raise ValueError(f"a={a!r}, b={b!r}: Polya's urn needs positive pseudo-counts")
    params = {"a": jnp.float32(a), "b": jnp.float32(b)}
    return lean_machine(_polya_prob, params, T)
