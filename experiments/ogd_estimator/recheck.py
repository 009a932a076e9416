"""Tanh-test advantages recomputed in float64 numpy, on the training tests and on fresh ones
(spec PED 5.1, 5.5).

An independent check of Algorithm 1's exit h: :func:`tanh_advantages` is the literal definition of
``Adv_f(h)`` for a tanh test, not :class:`~dedebate.estimators.families.TanhFamily`'s blocked
float32 evaluation; :func:`fresh_tanh_weights` draws ``factor`` times as many new tests of the same
distribution (:mod:`.problems`) from another key, and
:func:`exit_advantages` measures the exit h on both (no theorem bounds a fresh test's advantage:
a finding, not a guarantee).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .problems import tanh_input_dim


def tanh_advantages(features, weights, mu, g, h) -> np.ndarray:
    """The literal tanh-test advantages, in float64 numpy (spec PED 5.1).

    ``Adv_f(h) = sum_x mu(x) sum_z (g - h)(x, z) tanh(w_f . [feat(x), onehot(z), h(x),
    h(x, z), 1])`` for every row ``w_f`` of ``weights``.
    """
    feat, w, h = (np.asarray(a, np.float64) for a in (features, weights, h))
    d, n_z = feat.shape[1], h.shape[1]
    w_x, w_z, w_h = w[:, :d], w[:, d : d + n_z], w[:, d + n_z : d + 2 * n_z]
    w_hz, w_b = w[:, d + 2 * n_z], w[:, -1]
    pre = (feat @ w_x.T + h @ w_h.T + w_b)[:, None, :] + w_z.T[None] + h[:, :, None] * w_hz
    weight = np.asarray(mu, np.float64)[:, None] * (np.asarray(g, np.float64) - h)
    return np.einsum("xz,xzf->f", weight, np.tanh(pre))


def fresh_tanh_draw(spec, key, n_z: int, factor: int):
    """Standard normals of ``factor * spec.n_tests`` fresh tests per problem (JAX)."""
    return jax.random.normal(
        key, (spec.seeds, factor * spec.n_tests, tanh_input_dim(spec, n_z)), jnp.float32
    )


def fresh_tanh_weights(spec, draw, n_z: int) -> np.ndarray:
    """Tanh test weights ``N(0, scale^2 / dim)`` from :func:`fresh_tanh_draw`'s normals."""
    return spec.test_scale * np.asarray(draw, np.float64) / np.sqrt(tanh_input_dim(spec, n_z))


def exit_advantages(deltas, families, problems, h, fresh) -> dict[str, list[list[float]]]:
    """The exit h's advantages on the training tests and on fresh tests, ``[seed][delta]`` lists.

    ``max_adv_numpy`` (by :func:`tanh_advantages`), ``fresh_max_adv``, ``fresh_share_below_delta``
    (fresh tests with |Adv| < delta) and ``fresh_tests`` (their number).
    """
    out = {
        "max_adv_numpy": [],
        "fresh_max_adv": [],
        "fresh_share_below_delta": [],
        "fresh_tests": [],
    }
    feats, weights = np.asarray(families.features), np.asarray(families.weights)
    mu, g = np.asarray(problems.mu), np.asarray(problems.g)
    for s in range(feats.shape[0]):
        rows = {k: [] for k in out}
        for j, delta in enumerate(deltas):
            train = tanh_advantages(feats[s], weights[s], mu[s], g[s], h[s, j])
            new = np.abs(tanh_advantages(feats[s], fresh[s], mu[s], g[s], h[s, j]))
            rows["max_adv_numpy"].append(float(np.max(np.abs(train))))
            rows["fresh_max_adv"].append(float(np.max(new)))
            rows["fresh_share_below_delta"].append(float(np.mean(new < delta)))
            rows["fresh_tests"].append(int(new.size))
        for k, v in rows.items():
            out[k].append(v)
    return out
