"""Random OI problems with random tanh tests, stacked over seeds (spec PED 5.1, 5.3).

The problems Algorithm 1 and the Flax estimator are measured on: |X| contexts with standard
normal features, a truth g over Z = {0,1}^q and ``n_tests`` prediction-dependent tanh tests. The
randomness is drawn in JAX from a typed key (:func:`problem_draws`); :func:`problem_arrays` shapes
it into problems in float64 numpy (float32 results), so the host (:func:`build_problems`) and a
traced, swept function (:func:`traced_problems`, through ``jax.pure_callback``) get the same
numbers. The distribution is that of :func:`dedebate.estimators.advantage.random_oi_problem` and
:func:`dedebate.estimators.families.random_tanh_family`.

``spec`` below is any object with the fields ``n_x``, ``n_features``, ``n_tests``, ``seeds``
(problems per draw), ``truth`` (``softmax``, ``dirichlet`` or ``point``) and, for
:func:`build_problems`, ``test_scale`` (an experiment's config).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.estimators.advantage import OIProblem
from dedebate.estimators.families import TanhFamily

TRUTHS = ("softmax", "dirichlet", "point")


def tanh_input_dim(spec, n_z: int) -> int:
    """Input width of a tanh test: features, one-hot z, h(x), h(x, z) and a bias."""
    return spec.n_features + 2 * n_z + 2


def problem_draws(spec, key, n_z: int):
    """``(draw, dirichlet)``: the randomness of ``spec.seeds`` problems with |Z| = n_z, in JAX.

    float32 standard normals ``[seeds, X d + d |Z| + F dim]`` and, for ``truth = dirichlet``, the
    Dirichlet(2) rows ``[seeds, X, |Z|]`` (else ``[seeds, 0, |Z|]``).
    """
    total = (
        spec.n_x * spec.n_features
        + spec.n_features * n_z
        + spec.n_tests * tanh_input_dim(spec, n_z)
    )
    k_draw, k_dir = jax.random.split(key)
    draw = jax.random.normal(k_draw, (spec.seeds, total), jnp.float32)
    if spec.truth == "dirichlet":
        dirichlet = jax.random.dirichlet(
            k_dir, jnp.full((n_z,), 2.0, jnp.float32), (spec.seeds, spec.n_x)
        )
    else:
        dirichlet = jnp.zeros((spec.seeds, 0, n_z), jnp.float32)
    return draw, dirichlet


def problem_arrays(spec, n_z: int, draw, dirichlet, test_scale) -> tuple[np.ndarray, ...]:
    """``(mu [S, X], g [S, X, Z], features [S, X, d], weights [S, F, dim], base [S, F, X])``.

    The problems of one draw, stacked over ``spec.seeds`` (pure numpy, float64 arithmetic). Standard
    normal features; truth ``softmax(2 feat @ W)`` (or the Dirichlet(2) rows, or the argmax point
    mass); tanh weights ``N(0, scale^2 / dim)`` with ``base = w_x . feat + bias`` as
    :func:`~dedebate.estimators.families.tanh_family` caches it; mu uniform.
    """
    dim = tanh_input_dim(spec, n_z)
    sizes = (spec.n_x * spec.n_features, spec.n_features * n_z, spec.n_tests * dim)
    draw = np.asarray(draw, np.float64)
    dirichlet = np.asarray(dirichlet, np.float64)
    scale = float(test_scale)
    out = [], [], [], [], []
    for s in range(spec.seeds):
        a, b, c = np.split(draw[s], np.cumsum(sizes)[:-1])
        feat = a.reshape(spec.n_x, spec.n_features).astype(np.float32)
        logits = feat @ b.reshape(spec.n_features, n_z)
        if spec.truth == "softmax":
            e = np.exp(2.0 * (logits - logits.max(axis=1, keepdims=True)))
            g = e / e.sum(axis=1, keepdims=True)
        elif spec.truth == "dirichlet":
            g = dirichlet[s] / dirichlet[s].sum(axis=1, keepdims=True)
        else:
            g = np.eye(n_z)[np.argmax(logits, axis=1)]
        weights = (scale * c.reshape(spec.n_tests, dim) / np.sqrt(dim)).astype(np.float32)
        base = weights[:, : spec.n_features] @ feat.T + weights[:, -1:]
        for acc, x in zip(out, (np.full(spec.n_x, 1.0 / spec.n_x), g, feat, weights, base)):
            acc.append(np.asarray(x, np.float32))
    return tuple(np.stack(x) for x in out)


def wrap_arrays(arrays, n_z: int) -> tuple[OIProblem, TanhFamily]:
    """:func:`problem_arrays`' tuple as problems and test families."""
    mu, g, feat, weights, base = arrays
    return OIProblem(mu=mu, g=g), TanhFamily(features=feat, weights=weights, base=base, n_z=n_z)


def build_problems(spec, key, n_z: int):
    """``spec.seeds`` random problems with |Z| = n_z on the host, as :func:`traced_problems`."""
    draw, dirichlet = problem_draws(spec, key, n_z)
    arrays = tuple(
        jnp.asarray(x) for x in problem_arrays(spec, n_z, draw, dirichlet, spec.test_scale)
    )
    problems, families = wrap_arrays(arrays, n_z)
    return problems, families, families.features


def traced_problems(spec, key, n_z: int, test_scale) -> tuple[OIProblem, TanhFamily]:
    """:func:`build_problems` inside a trace, with the same numbers as on the host.

    The draws are made in JAX; :func:`problem_arrays` (float64 numpy) runs through
    ``jax.pure_callback`` (one host call per run).
    """
    draw, dirichlet = problem_draws(spec, key, n_z)
    d, f = spec.n_features, spec.n_tests
    shapes = tuple(
        jax.ShapeDtypeStruct((spec.seeds, *s), jnp.float32)
        for s in (
            (spec.n_x,),
            (spec.n_x, n_z),
            (spec.n_x, d),
            (f, tanh_input_dim(spec, n_z)),
            (f, spec.n_x),
        )
    )
    arrays = jax.pure_callback(
        functools.partial(problem_arrays, spec, n_z),
        shapes,
        draw,
        dirichlet,
        test_scale,
        vmap_method="sequential",
    )
    return wrap_arrays(arrays, n_z)
