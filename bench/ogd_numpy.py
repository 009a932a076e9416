"""Numpy reference of Algorithm 1 (spec PED 5.3) for the random tanh test family.

The same math as :mod:`dedebate.estimators.ogd` with :class:`dedebate.estimators.families.
TanhFamily`, written as competent vectorised numpy: float32 throughout, the h-independent part of
the pre-activation cached, tests evaluated ``chunk`` at a time into a reused buffer (no ``[F, X,
Z]`` temporary), in-place ufuncs, and a sort-based per-row simplex projection (Duchi et al. 2008).
The default ``chunk`` is the fastest measured (``CHUNK``).

    Adv_f(h) = sum_x mu(x) sum_z (g(x,z) - h(x,z)) tanh(base[f,x] + wz[f,z] + (h wh_f)(x)
                                                          + whz[f] h(x,z))
    f_t = argmax_f |Adv_f(h_t)|, eta_t = 1/sqrt(|Z| t)   (or sqrt(2/(|Z| t)), "tight")
    h_{t+1} = Proj_simplex(h_t + eta_t sign(Adv_{f_t}) f_t(., ., h_t))
"""

from __future__ import annotations

import math

import numpy as np

CHUNK = 1
"""Tests per buffer: 1, one ``[X, Z]`` float32 buffer (6.4 MB at the benchmark's size; 8 made it
51 MB, out of cache). ``advantages`` on the benchmark problem (two-core machine, 2026-12-05, median
of 3 rounds of 3 calls): chunk 1 311 ms, 2 312 ms, 4 331 ms, 8 424 ms, 16 462 ms; the results
are bit-identical (each test's sum runs over its own contiguous row)."""


def project_rows_to_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex (sort-based)."""
    n_z = v.shape[1]
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1)
    css -= 1.0
    k = np.arange(1, n_z + 1, dtype=v.dtype)
    cond = u - css / k > 0
    k_star = n_z - np.argmax(cond[:, ::-1], axis=1)  # last True (index + 1)
    theta = css[np.arange(v.shape[0]), k_star - 1] / k_star.astype(v.dtype)
    return np.maximum(v - theta[:, None], 0.0)


class NumpyTanhOGD:
    """Algorithm 1 on numpy arrays: ``features [X, d]``, ``weights [F, d + 2Z + 2]``, ``mu [X]``,
    ``g [X, Z]``. ``chunk`` tests are evaluated at a time."""

    def __init__(self, features, weights, mu, g, step_rule: str = "hazan", chunk: int = CHUNK):
        self.features = np.asarray(features, np.float32)
        self.weights = np.asarray(weights, np.float32)
        self.mu = np.asarray(mu, np.float32)
        self.g = np.asarray(g, np.float32)
        n_x, n_z = self.g.shape
        d = self.features.shape[1]
        self.n_z = n_z
        self.w_z = np.ascontiguousarray(self.weights[:, d : d + n_z])
        self.w_h = np.ascontiguousarray(self.weights[:, d + n_z : d + 2 * n_z])
        self.w_hz = np.ascontiguousarray(self.weights[:, d + 2 * n_z])
        self.base = self.weights[:, :d] @ self.features.T + self.weights[:, -1:]  # [F, X]
        self.chunk = int(chunk)
        self.buf = np.empty((self.chunk, n_x, n_z), np.float32)
        self.scale = {"hazan": 1.0, "tight": math.sqrt(2.0)}[step_rule]

    def _pre(self, sl, h, hw, out):
        """Pre-activations of tests ``sl`` into ``out[:n]`` (shape [n, X, Z])."""
        n = sl.stop - sl.start
        o = out[:n]
        np.multiply(self.w_hz[sl, None, None], h[None], out=o)
        o += self.base[sl, :, None]
        o += hw[sl, :, None]
        o += self.w_z[sl, None, :]
        return o

    def advantages(self, h: np.ndarray) -> np.ndarray:
        weight = self.mu[:, None] * (self.g - h)
        hw = self.w_h @ h.T  # [F, X]
        n_f = self.weights.shape[0]
        adv = np.empty(n_f, np.float32)
        for start in range(0, n_f, self.chunk):
            sl = slice(start, min(start + self.chunk, n_f))
            o = self._pre(sl, h, hw, self.buf)
            np.tanh(o, out=o)
            o *= weight[None]
            adv[sl] = o.reshape(o.shape[0], -1).sum(axis=1)
        return adv

    def value_of(self, i: int, h: np.ndarray) -> np.ndarray:
        pre = (
            self.base[i][:, None]
            + self.w_z[i][None, :]
            + (h @ self.w_h[i])[:, None]
            + self.w_hz[i] * h
        )
        return np.tanh(pre)

    def run(self, n_steps: int, delta: float):
        """``n_steps`` iterations from uniform h_1 (no-ops once ``max|Adv| < delta``).

        Returns ``(h, steps_taken, chosen_tests, trace_of_max_abs_adv)``.
        """
        n_x = self.g.shape[0]
        h = np.full((n_x, self.n_z), 1.0 / self.n_z, np.float32)
        adv = self.advantages(h)
        trace = [float(np.max(np.abs(adv)))]
        chosen = []
        t = 0
        for _ in range(n_steps):
            if np.max(np.abs(adv)) < delta:
                break
            i = int(np.argmax(np.abs(adv)))
            t += 1
            eta = np.float32(self.scale / math.sqrt(self.n_z * t))
            h = project_rows_to_simplex(h + (eta * np.sign(adv[i])) * self.value_of(i, h))
            adv = self.advantages(h)
            chosen.append(i)
            trace.append(float(np.max(np.abs(adv))))
        return h, t, np.asarray(chosen), np.asarray(trace)
