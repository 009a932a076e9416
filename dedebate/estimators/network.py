"""Flax estimator network h_theta: contexts -> Delta_Z (spec PED 5.2-5.3, 10).

For contexts too many to tabulate, B's prediction is a network reading context features and
returning a distribution over the |Z| = 2^q outcomes (a softmax over |Z| logits). Trained by
:mod:`dedebate.estimators.train` toward (delta, F)-indistinguishability.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class EstimatorNet(nn.Module):
    """``h_theta(feat) = softmax(MLP(feat))`` over ``n_z`` outcomes; tanh hidden layers.

    The output layer starts at zero, so h_theta starts at the uniform distribution (the
    tabular Algorithm 1's h_1, spec 5.3).
    """

    n_z: int
    hidden: tuple[int, ...] = (32, 32)

    @nn.compact
    def __call__(self, feat: jax.Array) -> jax.Array:
        u = feat
        for width in self.hidden:
            u = jnp.tanh(nn.Dense(width)(u))
        logits = nn.Dense(self.n_z, kernel_init=nn.initializers.zeros)(u)
        return jax.nn.softmax(logits, axis=-1)
