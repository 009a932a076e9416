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
    """Alice's features at a prefix: ``[t/(T-1), pi, prev_bit, ones/max(t, 1)]`` (float32).

    Args:
        t, pi, prev, ones: the step, the true step probability, the previous bit and the number
            of ones so far (broadcastable arrays or scalars).
        T: the number of steps (static).

    Returns:
        float32 array of shape ``broadcast(t, pi, prev, ones) + (N_FEATURES,)``.
    """
    t = jnp.asarray(t, jnp.float32)
    return jnp.stack(jnp.broadcast_arrays(
        t / max(T - 1, 1), jnp.asarray(pi, jnp.float32), jnp.asarray(prev, jnp.float32),
        jnp.asarray(ones, jnp.float32) / jnp.maximum(t, 1.0)), axis=-1)


def level_codes(T: int) -> list[dict]:
    """The prefix features that do not depend on the machine, per level.

    Args:
        T: the number of steps.

    Returns:
        A list over t < T of ``{"prev": int32[2^t], "ones": int32[2^t]}``: the last bit (0 at
        t = 0) and the number of ones of every little-endian prefix code of length t.
    """
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


def init_alice(key: jax.Array, hidden: int, init_scale: float = 1.0) -> AliceParams:
    """Random Alice: Glorot-like first layer, output layer of scale ``init_scale``.

    Args:
        key: typed PRNG key.
        hidden: the MLP's width.
        init_scale: the typical initial lie, in units of the claim unit.

    Returns:
        :class:`AliceParams` (float32).
    """
    k1, k2, k3 = jax.random.split(key, 3)
    return AliceParams(
        w1=jax.random.normal(k1, (N_FEATURES, hidden)) / jnp.sqrt(N_FEATURES),
        b1=jnp.zeros((hidden,)),
        w2=jax.random.normal(k2, (hidden,)) * init_scale / jnp.sqrt(hidden),
        b2=jax.random.normal(k3, ()) * init_scale)


def init_bob(key: jax.Array, T: int, init_logit: float = -2.0) -> BobParams:
    """Bob starting almost deviation-blind.

    Args:
        key: typed PRNG key.
        T: the number of steps (one abort logit per step).
        init_logit: the mean initial abort logit.

    Returns:
        :class:`BobParams`: logits ``init_logit + N(0, 0.1^2)`` per step, ``w_dev, w_prev ~
        N(0, 0.1^2)``.
    """
    k1, k2, k3 = jax.random.split(key, 3)
    return BobParams(w=init_logit + 0.1 * jax.random.normal(k1, (T,)),
                     w_dev=0.1 * jax.random.normal(k2, ()),
                     w_prev=0.1 * jax.random.normal(k3, ()))


def alice_claim(params: AliceParams, feats: jax.Array, pi: jax.Array, unit) -> jax.Array:
    """Alice's claim ``p = pi + unit * mlp(feats)`` (any real; the coin clamps it).

    The lie is measured in ``unit`` (the must-abort threshold b), so one optimiser step moves
    claims on the scale where the protocol's thresholds live while any lie stays reachable.

    Args:
        params: Alice's MLP.
        feats: features ``[..., N_FEATURES]`` (:func:`node_features`).
        pi: the true step probabilities ``[...]``.
        unit: the claim unit.

    Returns:
        The claims ``[...]``.
    """
    h = jnp.tanh(feats @ params.w1 + params.b1)
    return pi + unit * (h @ params.w2 + params.b2)


def bob_logit(params: BobParams, t, dev_abs, prev, scale) -> jax.Array:
    """Bob's abort logit ``w[t] + w_dev * dev_abs / scale + w_prev * prev``.

    Args:
        params: Bob's weights.
        t: the step (int, indexes ``w``).
        dev_abs: ``|p - pi|``.
        prev: the previous bit.
        scale: the deviation scale (b).

    Returns:
        The logit, broadcast over the arguments.
    """
    return (params.w[t] + params.w_dev * dev_abs / scale
            + params.w_prev * jnp.asarray(prev, jnp.float32))


def bob_abort(params: BobParams, t, dev_abs, prev, scale) -> jax.Array:
    """Bob's abort probability ``sigmoid(bob_logit(...))`` (``ZooBob.abort_prob``, B_LEARNED).

    Args:
        params, t, dev_abs, prev, scale: as for :func:`bob_logit`.

    Returns:
        The abort probability, broadcast over the arguments.
    """
    return jax.nn.sigmoid(bob_logit(params, t, dev_abs, prev, scale))


def bob_as_zoo(params: BobParams, scale: float) -> ZooBob:
    """The trained Bob as a :class:`ZooBob` of kind ``B_LEARNED`` (no oracle samples).

    Args:
        params: Bob's weights (leaves may carry leading batch axes).
        scale: the deviation scale (b), Bob's ``tau_vera`` field.

    Returns:
        A ZooBob for :func:`dedebate.exact.acceptance_exact` and
        :func:`dedebate.protocols.stochastic.play`.
    """
    return ZooBob(kind=jnp.int32(B_LEARNED), w=jnp.asarray(params.w, jnp.float32),
                  w_dev=jnp.asarray(params.w_dev, jnp.float32),
                  w_prev=jnp.asarray(params.w_prev, jnp.float32),
                  tau_vera=jnp.float32(scale), n_samples=jnp.int32(0), tau=jnp.float32(0.0),
                  coin=jnp.float32(-1.0))


@struct.dataclass
class LearnedAlice:
    """The trained Alice as a player of :func:`dedebate.protocols.stochastic.play` (reads the
    true pi from the view, draws no oracle samples)."""

    params: AliceParams
    unit: jax.Array  # float32
    n_samples: jax.Array  # int32 (0)
    samples: bool = struct.field(pytree_node=False, default=False)

    def claim(self, view: StepView, count, u):
        """Alice's claim at the view's prefix.

        Args:
            view: the step's view (prefix, true pi, previous bit, ones so far, T).
            count: Alice's oracle sample count (ignored: she draws none).
            u: her private uniform (ignored).

        Returns:
            The claimed probability, float32 scalar, a multiple of ``unit``.
        """
        f = node_features(view.t, view.pi, view.prev_bit, view.ones, view.T)
        return alice_claim(self.params, f, view.pi, self.unit).astype(jnp.float32)

    def coin_share(self, view: StepView, p, z):
        """Alice's coin share: the fair share ``z`` unchanged.

        Args:
            view: the step's view (unused).
            p: the claimed probability of the step (unused).
            z: her fair uniform share in [0, 1).

        Returns:
            ``z``.
        """
        return z


def learned_alice(params: AliceParams, unit: float) -> LearnedAlice:
    """The trained Alice as a player of :func:`dedebate.protocols.stochastic.play`.

    Args:
        params: Alice's MLP.
        unit: the claim unit (b).

    Returns:
        :class:`LearnedAlice` drawing no oracle samples.
    """
    return LearnedAlice(params=params, unit=jnp.float32(unit), n_samples=jnp.int32(0))

