"""Per-row Euclidean projection onto the simplex for small |Z|, without sorting (spec PED 5.3).

For a row v in R^Z the projection is ``max(v - theta, 0)`` (Duchi et al. 2008) where, with
``u`` the values sorted decreasingly, ``theta = (sum_{i<=k*} u_i - 1) / k*``. The sequence
``theta_k = (sum_{i<=k} u_i - 1) / k`` rises while ``k <= k*`` and does not rise after it
(``theta_{k+1}`` is a weighted mean of ``theta_k`` and ``u_{k+1}``), so

    theta = max_k theta_k = max_j ( sum_i v_i [v_i >= v_j] - 1 ) / #{i : v_i >= v_j} ,

where ties are harmless: ``k*`` always sits at the end of a run of equal values. The right side
needs no sort: ``|Z|^2`` comparisons, unrolled over the static |Z| and vectorised over rows. On
CPU this is much faster than the sort-based :func:`dedebate.core.project_rows_to_simplex` at
small |Z| (XLA's CPU sort is slow); the two are checked equal in ``tests/test_simplex.py``. Use it
for |Z| <= :data:`MAX_PAIRWISE_Z` (the unrolled graph grows as |Z|^2).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dedebate.core.simplex import project_rows_to_simplex

MAX_PAIRWISE_Z = 32


def project_rows_pairwise(v: jax.Array) -> jax.Array:
    """Project every row ``v[..., :]`` onto ``{p >= 0, sum p = 1}`` by the max-threshold formula."""
    n_z = v.shape[-1]
    rows = [v[..., j] for j in range(n_z)]
    theta = None
    for j in range(n_z):
        s = jnp.zeros_like(rows[j])
        c = jnp.zeros_like(rows[j])
        for i in range(n_z):
            ge = rows[i] >= rows[j]
            s = s + jnp.where(ge, rows[i], 0.0)
            c = c + ge.astype(v.dtype)
        th = (s - 1.0) / c
        theta = th if theta is None else jnp.maximum(theta, th)
    return jnp.maximum(v - theta[..., None], 0.0)


PROJECTIONS = ("auto", "pairwise", "sort")


def project_rows(v: jax.Array, method: str = "auto") -> jax.Array:
    """Row-wise simplex projection: ``"sort"`` (core, any |Z|), ``"pairwise"`` (small |Z|), or
    ``"auto"`` (pairwise when |Z| <= MAX_PAIRWISE_Z, else sort)."""
    if method not in PROJECTIONS:
        raise ValueError(f"method={method!r}: allowed values are {PROJECTIONS}")
    if method == "sort" or (method == "auto" and v.shape[-1] > MAX_PAIRWISE_Z):
        return project_rows_to_simplex(v)
    return project_rows_pairwise(v)
