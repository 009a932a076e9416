"""Lane-local uniform streams: bulk uniforms from threefry2x32 blocks, read through a pointer.

:class:`UniformStream` (:func:`uniform_stream`, sized by :func:`stream_length`) feeds the binomial
draws of :mod:`dedebate.core.binomial`; :func:`block_bits` and :func:`block_uniforms` give two
values per threefry block.
"""

from __future__ import annotations

import math

import jax
import jax.extend
import jax.numpy as jnp
from flax import struct

# Bit generator. The bulk uniforms come from threefry2x32, the debate's own key type, hashed by
# ``jax.extend.random.threefry_2x32`` on counters 0..L-1: each 64-bit block gives two uniforms.
# ``jax.random.uniform`` under JAX's partitionable threefry hashes one block per uniform and XORs
# its two words, twice the hashing; on CPU the hashing is a large share of a draw. XLA's RBG
# (key impl "rbg" / "unsafe_rbg") cannot replace threefry: under vmap it draws the whole batch
# from the batch's first key, so a lane's uniforms would depend on its batch (vmap would differ
# from a loop, and run_trials' replays would not see the lane's uniforms). Keys of another
# implementation fall back to ``jax.random.uniform``.
DEFAULT_WINDOW = 8  # candidates classified per draw
BTRS_ACCEPTANCE = 0.88  # acceptance rate of a BTRS candidate for large means (measured)


@struct.dataclass
class UniformStream:
    """Uniforms ``u[0..L)`` read through the position ``ptr`` (``u`` carries ``2 * window``
    padding entries at its end, never used as randomness), and the key of the slow path. Keep the
    stream out of loop carries (``u`` is read-only and large): carry ``ptr`` and rebuild the
    stream with ``replace(ptr=...)``."""

    u: jax.Array  # float32[L + 2 window]
    ptr: jax.Array  # int32
    key: jax.Array  # typed key of the slow path
    window: int = struct.field(pytree_node=False, default=DEFAULT_WINDOW)

    @property
    def length(self) -> int:
        """The number of random uniforms in the block (the padding excluded)."""
        return self.u.shape[-1] - 2 * self.window


def block_bits(key: jax.Array, length: int) -> jax.Array:
    """``length`` (static) uint32 words, two from each threefry2x32 block of ``key`` (one lane).

    Counters ``0 .. length-1`` (padded to even) are hashed as pairs ``(i, i + length/2)``, and both
    32-bit words of each block are used: half the hashing of ``jax.random.bits`` (JAX's
    partitionable threefry hashes one block per word). Keys that are not threefry2x32 use
    ``jax.random.bits`` (same law, other values).
    """
    if str(jax.random.key_impl(key)) != "threefry2x32":
        return jax.random.bits(key, (length,), jnp.uint32)
    data = jax.random.key_data(key)
    return jax.extend.random.threefry_2x32(
        (data[0], data[1]), jnp.arange(length + length % 2, dtype=jnp.uint32)
    )[:length]


def block_uniforms(key: jax.Array, length: int) -> jax.Array:
    """``length`` float32 uniforms in [0, 1), two from each threefry2x32 block of ``key``.

    The words of :func:`block_bits`, each giving one uniform from its top 23 bits as
    ``jax.random.uniform`` does (for a key that is not threefry2x32, the very values of
    ``jax.random.uniform``).
    """
    mantissa = jnp.right_shift(block_bits(key, length), jnp.uint32(9)) | jnp.uint32(0x3F800000)
    return jax.lax.bitcast_convert_type(mantissa, jnp.float32) - 1.0


def uniform_stream(key: jax.Array, length: int, window: int = DEFAULT_WINDOW) -> UniformStream:
    """A stream of ``length`` bulk uniforms from ``fold_in(key, 0)``, read from position 0.

    ``length`` and ``window`` (candidates classified per draw) are static; positions past the block
    come from the slow-path key ``fold_in(key, 1)``.
    """
    u = block_uniforms(jax.random.fold_in(key, 0), length)
    u = jnp.concatenate([u, jnp.full((2 * window,), 0.5, jnp.float32)])
    return UniformStream(u=u, ptr=jnp.int32(0), key=jax.random.fold_in(key, 1), window=window)


def stream_length(draws: int, window: int = DEFAULT_WINDOW) -> int:
    """A block length serving ``draws`` binomial draws with ample spare.

    The mean use is ~2.3 uniforms per draw; running short is still exact, only slower.
    """
    return math.ceil(2.0 * draws / BTRS_ACCEPTANCE * 1.1) + 2 * window + 8
