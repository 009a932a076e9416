"""Euclidean projection of each row onto the probability simplex (spec PED 5.3)."""

import jax
import optax


def project_rows_to_simplex(v: jax.Array) -> jax.Array:
    """Project every row ``v[..., :]`` onto ``{p >= 0, sum p = 1}`` (Duchi et al. 2008).

    ``optax.projections.projection_simplex`` projects one vector; it is vmapped over all leading
    axes here.
    """
    flat = v.reshape(-1, v.shape[-1])
    out = jax.vmap(optax.projections.projection_simplex)(flat)
    return out.reshape(v.shape)
