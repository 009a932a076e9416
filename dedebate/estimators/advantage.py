"""The outcome-indistinguishability advantage, computed exactly (spec PED 5.1).

Over a finite context set X with distribution mu, a truth map ``g: X -> Delta_Z`` and a
prediction ``h: X -> Delta_Z`` (both ``[X, Z]`` tables), the advantage of a test f is

    Adv_f(h) = E_{x~mu} sum_z (g(x,z) - h(x,z)) f(x, z, h(x))          (truth minus prediction)

an exact expectation (no sampling). ``h`` is (delta, F)-indistinguishable from g when
``|Adv_f(h)| <= delta`` for every f in F. ``|Adv_f| <= 2``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

Array = jax.Array


@struct.dataclass
class OIProblem:
    """A finite indistinguishability problem: ``mu: [X]`` on contexts and truth ``g: [X, Z]``."""

    mu: Array
    g: Array

    @property
    def n_x(self) -> int:
        """The number of contexts."""
        return self.g.shape[0]

    @property
    def n_z(self) -> int:
        """The number of outcomes."""
        return self.g.shape[1]


def oi_problem(mu, g, atol: float = 1e-5) -> OIProblem:
    """A validated float32 :class:`OIProblem`: ``mu [X]`` and each row of ``g [X, Z]`` sum to 1."""
    mu = np.asarray(mu, np.float64)
    g = np.asarray(g, np.float64)
    if g.ndim != 2 or g.shape[0] < 1 or g.shape[1] < 2:
        raise ValueError(f"g shape={g.shape}: expected [X, Z] with X >= 1 and Z >= 2")
    if mu.shape != (g.shape[0],):
        raise ValueError(f"mu shape={mu.shape}: expected [X={g.shape[0]}]")
    for name, a in (("mu", mu), ("g", g)):
        if not np.isfinite(a).all():
            raise ValueError(f"{name}: holds a non-finite entry; probabilities are finite")
    if np.any(mu < 0) or abs(mu.sum() - 1) > atol:
        raise ValueError(f"mu (sum={mu.sum():.6g}, min={mu.min():.3g}): must be a distribution")
    if np.any(g < 0) or np.max(np.abs(g.sum(axis=1) - 1)) > atol:
        raise ValueError("g: every row must be a distribution over Z (non-negative, sums to 1)")
    return OIProblem(mu=jnp.asarray(mu, jnp.float32), g=jnp.asarray(g, jnp.float32))


def random_oi_problem(
    key, n_x: int, n_z: int, n_features: int = 4, truth: str = "softmax", concentration: float = 2.0
):
    """A random problem for tests and benchmarks: ``(problem, features [X, n_features])``.

    Features are standard normal and mu is uniform. The truth g(x):

    * ``"softmax"`` (default): ``softmax(concentration * feat(x) @ W)`` with W standard normal,
      so tests that read the features can tell g from a poor h;
    * ``"dirichlet"``: independent ``Dirichlet(concentration)`` rows;
    * ``"point"``: a point mass at ``argmax feat(x) @ W`` (as in spec PED 6.2, where g is the
      point mass on the correct answers).
    """
    if not isinstance(n_x, (int, np.integer)) or n_x < 1:
        raise ValueError(f"n_x={n_x!r}: need an integer >= 1")
    if not isinstance(n_z, (int, np.integer)) or n_z < 2:
        raise ValueError(f"n_z={n_z!r}: need an integer >= 2")
    if truth not in ("softmax", "dirichlet", "point"):
        raise ValueError(f"truth={truth!r}: allowed values are 'softmax', 'dirichlet', 'point'")
    if not (concentration > 0):
        raise ValueError(f"concentration={concentration!r}: must be positive")
    k_f, k_g = jax.random.split(key)
    features = jax.random.normal(k_f, (n_x, n_features), jnp.float32)
    logits = features @ jax.random.normal(k_g, (n_features, n_z), jnp.float32)
    if truth == "softmax":
        g = jax.nn.softmax(concentration * logits, axis=-1)
    elif truth == "dirichlet":
        g = jax.random.dirichlet(k_g, jnp.full((n_z,), concentration, jnp.float32), (n_x,))
    else:
        g = jax.nn.one_hot(jnp.argmax(logits, axis=-1), n_z, dtype=jnp.float32)
    mu = jnp.full((n_x,), 1.0 / n_x, jnp.float32)
    return OIProblem(mu=mu, g=g), features


def advantage_weight(problem: OIProblem, h: Array) -> Array:
    """``mu(x) (g(x,z) - h(x,z))`` ``[X, Z]``: its inner product with a test f is ``Adv_f(h)``."""
    return problem.mu[:, None] * (problem.g - h)


def advantages(family, problem: OIProblem, h: Array) -> Array:
    """float32 ``[F]``: ``Adv_f(h)`` in [-2, 2] for every test f of ``family`` (spec PED 5.1)."""
    if jnp.shape(h) != problem.g.shape:  # a [Z] or [1, Z] h would broadcast over every context
        raise ValueError(f"h shape={jnp.shape(h)}: expected g's shape {problem.g.shape}")
    return family.advantages(h, advantage_weight(problem, h))


def max_abs_advantage(family, problem: OIProblem, h: Array) -> Array:
    """``max_f |Adv_f(h)|``: h is (delta, F)-indistinguishable iff this is <= delta."""
    return jnp.max(jnp.abs(advantages(family, problem, h)))
