"""What the players of the stochastic-oracle debate see and implement (spec DED 5.1).

Alice and Bob are :class:`AlicePlayer` / :class:`BobPlayer` protocols (``dedebate.agents``
implements them); Vera is the checker :class:`Vera`, which accepts a claim p from N oracle samples
with count k iff ``|p - k / N| < tau`` (strict; :func:`checker_interval` gives the accepted counts
as an interval). :func:`two_party_coin` is the paper's optional coin ``frac(z_A + z_B)``.
"""

from __future__ import annotations

from typing import Protocol

import jax
import jax.numpy as jnp
from flax import struct

from dedebate.core.dyadic import checker_bounds
from dedebate.protocols.stochastic_constants import DebateParams
from dedebate.protocols.stochastic_scan import StepView


class AlicePlayer(Protocol):
    """Alice: ``n_samples`` (int32, 0 = draws none) oracle samples per step, then ``claim``.

    ``samples`` (static) says whether the protocol must draw counts for her at all.
    ``claim(view, count, u)`` -> p (float32, any real); ``count`` ~ Binomial(n_samples, pi) at
    this prefix, ``u`` a fresh uniform of her own. ``coin_share(view, p, z)`` -> her share of the
    two-party coin (honest: ``z``, a fresh uniform).
    """

    samples: bool
    n_samples: jax.Array

    def claim(self, view: StepView, count: jax.Array, u: jax.Array) -> jax.Array:
        """Alice's claim of the step's probability ``P[x_t = 1 | prefix]``.

        Args:
            view: what the players see at this step.
            count: int32, her oracle count ~ Binomial(n_samples, pi) at this prefix.
            u: float32, a fresh uniform of her own.

        Returns:
            float32 p (any real; the trusted coin clamps it to [0, 1]).
        """
        ...

    def coin_share(self, view: StepView, p: jax.Array, z: jax.Array) -> jax.Array:
        """Alice's share of the two-party coin (:func:`two_party_coin`).

        Args:
            view: what the players see at this step.
            p: float32, her claim.
            z: float32, a fresh uniform (the honest share).

        Returns:
            float32 share in [0, 1).
        """
        ...


class BobPlayer(Protocol):
    """Bob: like Alice; ``cont(view, p, count, u)`` -> True to continue, False to abort."""

    samples: bool
    n_samples: jax.Array

    def cont(self, view: StepView, p: jax.Array, count: jax.Array, u: jax.Array) -> jax.Array:
        """Bob's decision on Alice's claim: continue the debate or abort to Vera.

        Args:
            view: what the players see at this step.
            p: float32, Alice's claim.
            count: int32, his oracle count ~ Binomial(n_samples, pi).
            u: float32, a fresh uniform of his own.

        Returns:
            bool: True to continue, False to abort.
        """
        ...

    def coin_share(self, view: StepView, p: jax.Array, z: jax.Array) -> jax.Array:
        """Bob's share of the two-party coin (:func:`two_party_coin`).

        Args:
            view: what the players see at this step.
            p: float32, Alice's claim.
            z: float32, a fresh uniform (the honest share).

        Returns:
            float32 share in [0, 1).
        """
        ...


def two_party_coin(z_a: jax.Array, z_b: jax.Array) -> jax.Array:
    """The paper's coin by cross-examination (spec DED 5.4, steps 2b-2d): ``frac(z_A + z_B)``.

    Each share is first taken to the grid of multiples of 2^-23 in [0, 1) that a uniform float32
    share lives on (an honest share is unchanged; a non-finite one is 0), so the sum is exact
    and the coin is uniform on the grid whenever one share is, whatever the other sends.
    """
    return jnp.mod(_grid_share(z_a) + _grid_share(z_b), 1.0)


def _grid_share(z: jax.Array) -> jax.Array:
    """``frac(z)`` rounded down to a multiple of 2^-23 (0 for a non-finite ``z``)."""
    z = jnp.asarray(z, jnp.float32)
    frac = jnp.where(jnp.isfinite(z), z - jnp.floor(z), 0.0)
    return jnp.floor(frac * 2.0**23) / 2.0**23


def checker_interval(p: jax.Array, n: jax.Array, tau: jax.Array):
    """``(k_lo, k_hi, certified)``: the counts the checker accepts, as an interval.

    The checker's exact rule (:func:`dedebate.core.dyadic.checker_bounds`): ``k_lo`` is the smallest
    count with ``k > n (p - tau)``, ``k_hi`` the largest with ``k < n (p + tau)``, in real numbers
    on the float32 values, clipped to ``[0, n]`` (empty when ``k_lo > k_hi``). ``certified`` is
    always true (the rule is exact; callers keep a fall-back for false).
    """
    n = jnp.asarray(n, jnp.int32)
    lo, hi = checker_bounds(p, n, tau)
    k_lo = jnp.clip(lo, -1, n) + 1
    k_hi = jnp.clip(hi, 0, n + 1) - 1
    return k_lo, k_hi, jnp.ones(k_lo.shape, bool)


@struct.dataclass
class Vera:
    """The verifier: Lean's ``vera c s v``, the checker with ``N_V`` samples and ``tau_V``."""

    n_samples: jax.Array  # int32
    tau: jax.Array  # float32


def make_vera(constants: DebateParams) -> Vera:
    """Vera with ``N_V`` and ``tau_V`` from the debate's constants."""
    return Vera(n_samples=jnp.int32(constants.n_vera), tau=jnp.float32(constants.tau_vera))
