"""Fits and intervals shared by the experiments, in host (numpy float64) and jitted (jnp) forms.

:func:`linfit` / :func:`loglog_slope` fit ``y = a x + b`` (with R^2) and the exponent ``k`` of
``y ~ x^k`` on the host, the numbers a report prints; ``*_jnp`` are the same fits in closed form
for jitted or vmapped code. :func:`finite_linfit` / :func:`finite_loglog_slope` return NaN on
non-finite input so that a report row fails, not the fit. :func:`wilson_jnp` is the 95% Wilson
score interval, equal (to float32 rounding) to :func:`dedebate.lab.experiment.wilson_interval`,
for tables and plots; report rows take exact intervals from their counts on the host
(:mod:`dedebate.lab.claims`).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

Z95 = 1.959963984540054
"""The two-sided 95% normal quantile."""


def linfit(x, y) -> tuple[float, float, float]:
    """``(a, b, r2)``: the least-squares line ``y = a x + b`` (host, float64, ``numpy.polyfit``).

    ``r2 = 1 - SS_res / SS_tot`` with ``SS_tot`` floored at 1e-12 (a constant ``y`` gives about 1).
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(
            f"x, y of shapes {x.shape}, {y.shape}: need two 1-D arrays of equal length >= 2"
        )
    a, b = np.polyfit(x, y, 1)
    r2 = 1.0 - np.sum((y - (a * x + b)) ** 2) / max(np.sum((y - y.mean()) ** 2), 1e-12)
    return float(a), float(b), float(r2)


def loglog_slope(x, y) -> float:
    """Slope of ``log y`` against ``log x``: the exponent ``k`` of a power law ``y ~ x^k``."""
    return linfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)))[0]


def finite_linfit(x, y) -> tuple[float, float, float]:
    """:func:`linfit`, or NaNs when a number is not finite."""
    if not np.all(np.isfinite(np.asarray(x, float))) or not np.all(
        np.isfinite(np.asarray(y, float))
    ):
        return math.nan, math.nan, math.nan
    return linfit(x, y)


def finite_loglog_slope(x, y) -> float:
    """:func:`loglog_slope`, or NaN when a number is not finite or not positive."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0) and np.all(y > 0)):
        return math.nan
    return loglog_slope(x, y)


def nan_last(x: float) -> float:
    """Sort key that puts NaN after every number (so a NaN run is never chosen as the best)."""
    return math.inf if math.isnan(x) else x


def linfit_jnp(x, y):
    """:func:`linfit` in closed form in ``jnp`` (float32, jittable); a constant ``x`` gives NaN."""
    x, y = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    xm, ym = jnp.mean(x), jnp.mean(y)
    dx, dy = x - xm, y - ym
    a = jnp.sum(dx * dy) / jnp.sum(dx * dx)
    b = ym - a * xm
    ss_tot = jnp.maximum(jnp.sum(dy * dy), 1e-12)
    r2 = 1.0 - jnp.sum((y - (a * x + b)) ** 2) / ss_tot
    return a, b, r2


def loglog_slope_jnp(x, y):
    """:func:`loglog_slope` with ``jnp`` (jittable, vmappable)."""
    return linfit_jnp(jnp.log(jnp.asarray(x, jnp.float32)), jnp.log(jnp.asarray(y, jnp.float32)))[0]


def wilson_jnp(successes, trials: int):
    """``(p_hat, lo, hi)``: the 95% Wilson interval of ``successes / trials`` (static trials),
    which holds ``p_hat`` (float32 rounding put ``hi`` below 1 at ``successes = trials``)."""
    if not isinstance(trials, (int, np.integer)) or isinstance(trials, bool) or trials < 1:
        raise ValueError(f"trials={trials!r}: the number of trials is an integer >= 1")
    n = float(trials)
    p = jnp.asarray(successes, jnp.float32) / n
    z2 = Z95 * Z95
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = Z95 * jnp.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    lo, hi = jnp.maximum(0.0, centre - half), jnp.minimum(1.0, centre + half)
    return p, jnp.minimum(lo, p), jnp.maximum(hi, p)
