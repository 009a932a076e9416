"""Row-wise Euclidean projection onto the simplex (spec PED 5.3): properties and agreement.

Three implementations are checked against the defining properties and against each other: the
core sort-based one, the sort-free pairwise one used by Algorithm 1 for small |Z|, and the numpy
reference of the benchmark. Nearest point is checked two ways: the KKT conditions (p = max(v -
theta, 0) for one theta) and a generic QP solver (scipy SLSQP).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bench.ogd_numpy import project_rows_to_simplex as project_numpy
from dedebate.core.simplex import project_rows, project_rows_pairwise
from dedebate.core.simplex import project_rows_to_simplex as project_core

WIDTHS = (2, 3, 4, 7, 16, 32)  # up to MAX_PAIRWISE_Z
_pairwise = jax.jit(project_rows_pairwise)
_core = jax.jit(project_core)

# Rows with ties (values drawn from a small grid) and rows of general floats.
_values = st.one_of(
    st.floats(-4.0, 4.0, allow_nan=False, width=32),
    st.sampled_from([-1.0, 0.0, 0.25, 0.5, 1.0]),
)


def _rows(width):
    return arrays(np.float32, (5, width), elements=_values)


@st.composite
def batches(draw):
    width = draw(st.sampled_from(WIDTHS))
    return draw(_rows(width))


def _tol(v: np.ndarray) -> float:
    """Float32 rounding allowance: |Z| roundings of numbers of size max(1, max|v|)."""
    return 4.0 * v.shape[-1] * float(np.finfo(np.float32).eps) * max(1.0, float(np.max(np.abs(v))))


def _kkt_residual(v: np.ndarray, p: np.ndarray) -> float:
    """How far p is from ``max(v - theta, 0)`` for the best single theta per row."""
    v = v.astype(np.float64)
    p = p.astype(np.float64)
    worst = 0.0
    for vr, pr in zip(v, p):
        pos = pr > 1e-6
        theta = float(np.mean(vr[pos] - pr[pos]))
        worst = max(worst, float(np.max(np.abs(pr - np.maximum(vr - theta, 0.0)))))
    return worst


@settings(max_examples=60, deadline=None)
@given(batches())
def test_projection_properties(v):
    tol = _tol(v)
    for p in (np.asarray(_pairwise(v)), np.asarray(_core(v)), project_numpy(v)):
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=tol)
        assert np.all(p >= 0)
        assert _kkt_residual(v, p) < tol


@settings(max_examples=40, deadline=None)
@given(batches())
def test_projection_idempotent_and_implementations_agree(v):
    tol = _tol(v)
    p = np.asarray(_pairwise(v))
    np.testing.assert_allclose(np.asarray(_pairwise(p)), p, atol=tol)
    np.testing.assert_allclose(np.asarray(_core(v)), p, atol=tol)
    np.testing.assert_allclose(project_numpy(v), p, atol=tol)


def test_points_of_the_simplex_are_fixed():
    key = jax.random.key(3)
    p = jax.nn.softmax(3.0 * jax.random.normal(key, (200, 16)), -1)
    np.testing.assert_allclose(np.asarray(_pairwise(p)), np.asarray(p), atol=1e-6)


def test_nearest_point_against_a_qp_solver():
    rng = np.random.default_rng(0)
    v = (2.0 * rng.normal(size=(12, 5))).astype(np.float32)
    p = np.asarray(_pairwise(v), np.float64)
    for vr, pr in zip(v.astype(np.float64), p):
        res = scipy.optimize.minimize(
            lambda q, vr=vr: 0.5 * np.sum((q - vr) ** 2),
            x0=np.full(5, 0.2),
            jac=lambda q, vr=vr: q - vr,
            bounds=[(0.0, None)] * 5,
            constraints=[
                {"type": "eq", "fun": lambda q: q.sum() - 1.0, "jac": lambda q: np.ones_like(q)}
            ],
            method="SLSQP",
            options={"ftol": 1e-12, "maxiter": 200},
        )
        assert res.success
        np.testing.assert_allclose(pr, res.x, atol=1e-5)
        # and no other point of the simplex is nearer
        assert np.sum((pr - vr) ** 2) <= np.sum((res.x - vr) ** 2) + 1e-6


def test_project_rows_dispatch_and_validation():
    v = jnp.asarray(np.random.default_rng(1).normal(size=(3, 40)), jnp.float32)
    rows = jax.jit(project_rows, static_argnums=1)  # one program per method, not op by op
    np.testing.assert_allclose(np.asarray(rows(v, "auto")), np.asarray(rows(v, "sort")), atol=1e-6)
    with pytest.raises(ValueError, match="method='bogus'"):
        project_rows(v, "bogus")


def test_projection_refuses_rows_of_no_entry():
    """A row of width 0 (or a scalar) has no projection: one clear error (was an assert or a
    modulo by zero)."""
    from dedebate.core.simplex import project_rows

    for v in (jnp.zeros((3, 0)), jnp.float32(1.0)):
        for method in ("auto", "pairwise", "sort"):
            with pytest.raises(ValueError, match="rows of at least one entry"):
                project_rows(v, method)
