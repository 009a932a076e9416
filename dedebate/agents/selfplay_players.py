"""Learned Alice and Bob of the stochastic-oracle debate's self-play (spec DED 5.1).

Both players are plain pytrees and memoryless, as in the Lean model. Alice (:class:`AliceParams`)
is a tanh MLP on the features an unbounded Alice sees at a prefix (:func:`node_features`: step,
true pi, previous bit, fraction of ones) claiming ``p = pi + b * mlp(features)``; honesty is
``mlp = 0``. Bob (:class:`BobParams`) is the ``B_LEARNED`` family of
:class:`~dedebate.agents.stochastic_players.ZooBob`: abort probability ``sigmoid(w[t] + w_dev
|p - pi| / b + w_prev * prev_bit)``, reading the expected estimate pi. So a trained Bob is a
ZooBob (:func:`bob_as_zoo`) and a trained Alice a player of ``play`` (:func:`learned_alice`).
Training: :mod:`dedebate.training.stochastic_selfplay`; exact value: :mod:`dedebate.exact.selfplay`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.agents.stochastic_players import B_LEARNED, ZooBob
from dedebate.protocols.stochastic import StepView

N_FEATURES = 4
"""Alice's features per prefix (:func:`node_features`)."""


def node_features(t, pi, prev, ones, T: int):
    """Alice's features float32 ``[..., 4]``: ``[t/(T-1), pi, prev, ones/max(t, 1)]``."""
    t = jnp.asarray(t, jnp.float32)
    return jnp.stack(
        jnp.broadcast_arrays(
            t / max(T - 1, 1),
            jnp.asarray(pi, jnp.float32),
            jnp.asarray(prev, jnp.float32),
            jnp.asarray(ones, jnp.float32) / jnp.maximum(t, 1.0),
        ),
        axis=-1,
    )


def level_codes(T: int) -> list[dict]:
    """Per t < T, int32 ``prev`` and ``ones`` ``[2^t]`` of every little-endian t-bit prefix."""
    out = []
    for t in range(T):
        codes = np.arange(2**t, dtype=np.int64)
        prev = ((codes >> (t - 1)) & 1) if t > 0 else np.zeros_like(codes)
        ones = np.array([int(c).bit_count() for c in codes], np.int64)
        out.append({"prev": prev.astype(np.int32), "ones": ones.astype(np.int32)})
    return out


@struct.dataclass
class AliceParams:
    """Alice's MLP (features -> hidden (tanh) -> 1); claim ``pi + unit * out``."""

    w1: jax.Array  # [N_FEATURES, H]
    b1: jax.Array  # [H]
    w2: jax.Array  # [H]
    b2: jax.Array  # []


@struct.dataclass
class BobParams:
    """Bob's abort logit ``w[t] + w_dev |p - pi| / scale + w_prev prev`` (ZooBob B_LEARNED)."""

    w: jax.Array  # [T]
    w_dev: jax.Array  # []
    w_prev: jax.Array  # []


def init_alice(key: jax.Array, hidden: int, init_scale: float | jax.Array = 1.0) -> AliceParams:
    """Random Alice: Glorot-like first layer, output layer of scale ``init_scale``."""
    k1, k2, k3 = jax.random.split(key, 3)
    return AliceParams(
        w1=jax.random.normal(k1, (N_FEATURES, hidden)) / jnp.sqrt(N_FEATURES),
        b1=jnp.zeros((hidden,)),
        w2=jax.random.normal(k2, (hidden,)) * init_scale / jnp.sqrt(hidden),
        b2=jax.random.normal(k3, ()) * init_scale,
    )


def init_bob(key: jax.Array, T: int, init_logit: float | jax.Array = -2.0) -> BobParams:
    """Bob almost deviation-blind: logits ``init_logit + N(0, 0.1^2)``, weights N(0, 0.1^2)."""
    k1, k2, k3 = jax.random.split(key, 3)
    return BobParams(
        w=init_logit + 0.1 * jax.random.normal(k1, (T,)),
        w_dev=0.1 * jax.random.normal(k2, ()),
        w_prev=0.1 * jax.random.normal(k3, ()),
    )


def alice_claim(params: AliceParams, feats: jax.Array, pi: jax.Array, unit) -> jax.Array:
    """Alice's claim ``p = pi + unit * mlp(feats)`` (any real; the coin clamps it).

    The lie is measured in ``unit`` (the must-abort threshold b), so one optimiser step moves
    claims on the scale where the protocol's thresholds live while any lie stays reachable.
    """
    h = jnp.tanh(feats @ params.w1 + params.b1)
    return pi + unit * (h @ params.w2 + params.b2)


def bob_logit(params: BobParams, t, dev_abs, prev, scale) -> jax.Array:
    """Bob's abort logit ``w[t] + w_dev * dev_abs / scale + w_prev * prev``."""
    return (
        params.w[t]
        + params.w_dev * dev_abs / scale
        + params.w_prev * jnp.asarray(prev, jnp.float32)
    )


def bob_abort(params: BobParams, t, dev_abs, prev, scale) -> jax.Array:
    """Bob's abort probability ``sigmoid(bob_logit(...))`` (``ZooBob.abort_prob``, B_LEARNED)."""
    return jax.nn.sigmoid(bob_logit(params, t, dev_abs, prev, scale))


def bob_as_zoo(params: BobParams, scale: float) -> ZooBob:
    """The trained Bob (leaves may carry batch axes) as a :class:`ZooBob` of kind ``B_LEARNED``."""
    return ZooBob(
        kind=jnp.int32(B_LEARNED),
        w=jnp.asarray(params.w, jnp.float32),
        w_dev=jnp.asarray(params.w_dev, jnp.float32),
        w_prev=jnp.asarray(params.w_prev, jnp.float32),
        tau_vera=jnp.float32(scale),
        n_samples=jnp.int32(0),
        tau=jnp.float32(0.0),
        coin=jnp.float32(-1.0),
    )


@struct.dataclass
class LearnedAlice:
    """The trained Alice as a player of :func:`dedebate.protocols.stochastic.play` (reads the
    true pi from the view, draws no oracle samples)."""

    params: AliceParams
    unit: jax.Array  # float32
    n_samples: jax.Array  # int32 (0)
    samples: bool = struct.field(pytree_node=False, default=False)

    def claim(self, view: StepView, count, u):
        """Alice's claim at the view's prefix."""
        f = node_features(view.t, view.pi, view.prev_bit, view.ones, view.T)
        return alice_claim(self.params, f, view.pi, self.unit).astype(jnp.float32)

    def coin_share(self, view: StepView, p, z):
        """Alice's coin share: the fair share ``z`` unchanged."""
        return z


def learned_alice(params: AliceParams, unit: float) -> LearnedAlice:
    """The trained Alice as a player of :func:`dedebate.protocols.stochastic.play`."""
    return LearnedAlice(params=params, unit=jnp.float32(unit), n_samples=jnp.int32(0))
