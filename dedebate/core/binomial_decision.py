"""Decision-only draws: the event "a Binomial(n, pi) count lies outside [k_lo, k_hi]", exact in
law, without drawing the count (one Bernoulli: :func:`decide_outside`, gated by
:func:`decision_gate`; :func:`outside_probability` the event's probability)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from dedebate.core.binomial_pmf import binom_lower_tail

# A checker that only compares a Binomial(n, pi) count with an interval needs one Bernoulli draw
# with the exact probability ``P_out = P[X < k_lo] + P[X > k_hi]``. With 32 random bits ``B`` and a
# uniform ``U2`` (the number ``(B + U2) 2^-32`` is uniform), the event is ``(B + U2) 2^-32 <
# P_out``. When a rigorous Hoeffding bound gives ``P_out <= 2^-GATE_LOG2``, ``B >= 2^(32 -
# GATE_LOG2)`` already decides "inside" (all but a 2^-GATE_LOG2 fraction of steps); only the rest
# needs ``P_out`` itself (:func:`binom_lower_tail`, a rare path).
GATE_LOG2 = 24  # the cheap path decides all but 2^-24 of the gated draws (so a 4096 x 256
# honest run rarely needs a replay at all)


def decision_gate(
    n: jax.Array, pi: jax.Array, k_lo: jax.Array, k_hi: jax.Array, log2_gate: int = GATE_LOG2
) -> jax.Array:
    """Whether Hoeffding certifies ``P[X outside [k_lo, k_hi]] <= 2^-log2_gate``.

    Hoeffding's bound ``P[X < k_lo] <= exp(-2 n d^2)`` (``d = pi - (k_lo - 1)/n``) and its mirror
    image, each side at most half, with a margin for float32 rounding; where it holds,
    :func:`decide_outside` is cheap but for a 2^-log2_gate fraction.
    """
    nf = jnp.asarray(n, jnp.float32)
    pi = jnp.asarray(pi, jnp.float32)
    need = (log2_gate + 1) * math.log(2.0) * 1.001 + 1e-3
    d_lo = pi - (k_lo - 1).astype(jnp.float32) / nf
    d_hi = (k_hi + 1).astype(jnp.float32) / nf - pi
    lo_ok = (k_lo <= 0) | ((d_lo > 0) & (2.0 * nf * d_lo * d_lo >= need))
    hi_ok = (k_hi >= n) | ((d_hi > 0) & (2.0 * nf * d_hi * d_hi >= need))
    return (n > 0) & (pi > 0.0) & (pi < 1.0) & (k_lo <= k_hi) & lo_ok & hi_ok


def outside_probability(n, pi, k_lo, k_hi, active=True) -> jax.Array:
    """``P[X < k_lo] + P[X > k_hi]``, X ~ Binomial(n, pi), for gated arguments (0 if inactive)."""
    # both tails by one walk (vmapped over the two sides: one loop to compile, same values)
    pi = jnp.asarray(pi, jnp.float32)
    ks = jnp.stack([k_lo - 1, n - k_hi - 1])
    tails = jax.vmap(binom_lower_tail, (0, None, 0, None))(ks, n, jnp.stack([pi, 1.0 - pi]), active)
    return tails[0] + tails[1]


def decide_outside(
    bits: jax.Array,
    u2: jax.Array,
    n,
    pi,
    k_lo,
    k_hi,
    active=True,
    log2_gate: int = GATE_LOG2,
    resolve: bool = True,
):
    """``(outside, rare)``: the event ``X not in [k_lo, k_hi]``, X ~ Binomial(n, pi), exact in law.

    For gated arguments (:func:`decision_gate`): the event is ``(B + U2) 2^-32 < P_out`` for 32
    random ``bits`` B and a uniform ``u2``; only where ``B < 2^(32 - log2_gate)`` (``rare``) must
    ``P_out`` be computed, compared on a 2^-42 grid or finer. ``resolve=False`` skips that and
    leaves ``outside`` false there (the caller must replay); inactive lanes give (False, False).
    """
    cut = jnp.uint32(1 << (32 - log2_gate))
    rare = jnp.asarray(active) & (bits < cut)
    if not resolve:
        return jnp.zeros_like(rare), rare
    p_out = outside_probability(n, pi, k_lo, k_hi, rare)
    scaled = p_out * 2.0**32  # <= 2^(32 - log2_gate): exact enough in float32
    outside = rare & (bits.astype(jnp.float32) + u2 < scaled)
    return outside, rare
