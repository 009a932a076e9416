"""The statistics of report rows: exact intervals and p-values, and numbers that fail closed.

Proportions: :func:`exact_interval` (Clopper-Pearson) and :func:`binomial_p_value`, the exact test
it inverts; means: :func:`mean_interval` (Student's t) and :func:`claim_p_value`;
:func:`wilson_interval` for tables and plots. :func:`nonfinite_reason`, :func:`strict_max` and
:func:`strict_min` make a row whose numbers are not finite fail (:mod:`dedebate.lab.claims`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

_RELATIONS = (">=", "<=", "==")


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _finite(x: Any) -> bool:
    """Whether ``x`` is a finite real number (False for NaN, +-inf, None and non-numbers)."""
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def nonfinite_reason(**named: Any) -> str:
    """Why a row fails closed: the first named number that is not finite, if any.

    Args:
        **named: name -> number (NaN, +-inf and None are not finite).

    Returns ``""`` when every number is finite, else ``"name=value is not finite"`` for the first
    that is not (the note of a row that fails closed).
    """
    for name, x in named.items():
        if not _finite(x):
            return f"{name}={x!r} is not finite"
    return ""


def strict_max(values: Iterable[float]) -> float:
    """``max`` that fails closed: NaN if ``values`` is empty or holds a NaN anywhere.

    The builtin ``max`` keeps or drops a NaN depending on its position.
    """
    xs = [float(v) for v in values]
    if not xs or any(math.isnan(v) for v in xs):
        return math.nan
    return max(xs)


def strict_min(values: Iterable[float]) -> float:
    """``min`` that fails closed: NaN if ``values`` is empty or holds a NaN anywhere."""
    xs = [float(v) for v in values]
    if not xs or any(math.isnan(v) for v in xs):
        return math.nan
    return min(xs)


def claim_p_value(
    estimate: float, se: float, target: float, relation: str, df: float | None = None
) -> float:
    """Two-sided-equivalent p-value of the claim ``true value RELATION target``.

    ``z = (estimate - target) / se`` and ``F`` the normal CDF, or Student's t CDF with ``df``
    degrees of freedom when ``df`` is given; for ``>=`` the evidence against the claim is a low
    estimate, p = min(1, 2 F(z)); for ``<=`` p = min(1, 2 F(-z)); for ``==`` p = 2 F(-|z|).
    Scaled so that ``p >= 0.05`` exactly when the 95% interval ``estimate +- q se`` (``q`` the
    97.5% quantile of ``F``) reaches the target, and ``p >= a`` when the ``1 - a`` interval does.
    With ``se == 0`` the p-value is 1 if the estimate satisfies the relation, else 0.
    Fails closed: a non-finite estimate, target or standard error, or a negative standard
    error, gives p = 0.

    Args:
        estimate: the measured point estimate.
        se: its standard error.
        target: the claim's bound.
        relation: ``">="``, ``"<="`` or ``"=="``.
        df: Student's t degrees of freedom (a mean of ``df + 1`` samples); None: normal.

    Raises:
        ValueError: an unknown relation.
    """
    if relation not in _RELATIONS:
        raise ValueError(f"relation={relation!r}: must be one of {_RELATIONS}")
    if not (_finite(estimate) and _finite(target) and _finite(se)) or se < 0:
        return 0.0
    if se == 0:
        holds = {">=": estimate >= target, "<=": estimate <= target, "==": estimate == target}[
            relation
        ]
        return 1.0 if holds else 0.0
    z = (estimate - target) / se
    if df is None:
        cdf: Callable[[float], float] = _normal_cdf
    else:
        from scipy.special import stdtr  # Student's t CDF (lighter to import than stats)

        def t_cdf(x: float) -> float:
            return float(stdtr(df, x))

        cdf = t_cdf

    if relation == ">=":
        return min(1.0, 2.0 * cdf(z))
    if relation == "<=":
        return min(1.0, 2.0 * cdf(-z))
    return min(1.0, 2.0 * cdf(-abs(z)))


def binomial_p_value(successes: int, trials: int, target: float, relation: str) -> float:
    """Exact two-sided-equivalent p-value of the claim ``true proportion RELATION target``.

    With ``X ~ Binomial(trials, target)``: for ``>=`` p = min(1, 2 P(X <= successes)); for
    ``<=`` p = min(1, 2 P(X >= successes)); for ``==`` twice the smaller of the two tails (the
    one-sided exact tests of ``scipy.stats.binomtest``). ``p >= a`` exactly when the ``1 - a``
    Clopper-Pearson interval (:func:`exact_interval`) reaches the target, and the real chance of
    ``p < a`` under a true claim is at most ``a``.

    Args:
        successes: the count of successes, an integer in ``[0, trials]``.
        trials: the number of trials, an integer >= 1.
        target: the claim's bound, in [0, 1].
        relation: ``">="``, ``"<="`` or ``"=="``.

    Raises:
        ValueError: an unknown relation.
    """
    if relation not in _RELATIONS:
        raise ValueError(f"relation={relation!r}: must be one of {_RELATIONS}")
    from scipy.stats import binomtest

    less, greater = (
        float(binomtest(successes, trials, target, alternative=side).pvalue)
        for side in ("less", "greater")
    )  # P(X <= successes), P(X >= successes)
    return min(1.0, 2.0 * {">=": less, "<=": greater, "==": min(less, greater)}[relation])


def wilson_interval(
    successes: float, trials: float, z: float = 1.959963984540054
) -> tuple[float, float, float]:
    """Wilson score interval for a binomial proportion (95% by default), for tables and plots.

    It equals the jitted :func:`dedebate.core.stats.wilson_jnp`; report rows use the exact
    :func:`exact_interval`, whose coverage is at least its level (Wilson's can be below).
    With zero trials the interval is the whole of [0, 1]; a non-finite count or number of
    trials gives NaN throughout (fail closed). The interval always contains ``p_hat``.

    Args:
        successes: the count of successes.
        trials: the number of trials.
        z: the normal quantile of the level (1.96 for 95%).

    Returns ``(p_hat, lo, hi)``.
    """
    if not (_finite(successes) and _finite(trials)):
        return (math.nan, math.nan, math.nan)
    if trials <= 0:
        return (math.nan, 0.0, 1.0)
    if not 0 <= successes <= trials:
        raise ValueError(
            f"successes={successes!r}, trials={trials!r}: need 0 <= successes <= trials"
        )
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    # the interval contains p (at k = 0 and k = n the rounding of centre -+ half can miss it)
    return (p, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def exact_interval(successes: int, trials: int, level: float = 0.95) -> tuple[float, float, float]:
    """Clopper-Pearson (exact) interval for a binomial proportion.

    Its ends are Beta quantiles (``scipy.special.betaincinv``), equal to
    ``scipy.stats.binomtest(successes, trials).proportion_ci(level, method="exact")`` and
    hundreds of times faster. It covers the true proportion with probability at least ``level``
    for every proportion and number of trials, and inverts :func:`binomial_p_value`.

    Args:
        successes: the count of successes, an integer in ``[0, trials]``.
        trials: the number of trials, an integer >= 1.
        level: the confidence level.

    Returns ``(p_hat, lo, hi)``, all NaN when a count is not finite.

    Raises:
        ValueError: counts that are not integers with ``0 <= successes <= trials``, ``trials >=
            1``, or a level outside (0, 1).
    """
    from scipy.special import betaincinv

    k, n, tail = successes, trials, (1.0 - level) / 2
    if not (math.isfinite(k) and math.isfinite(n)):
        return (math.nan, math.nan, math.nan)
    if not (k == int(k) and n == int(n) and 0 <= k <= n and n >= 1 and 0 < level < 1):
        raise ValueError(
            f"successes={successes!r}, trials={trials!r}, level={level!r}: need integers "
            "0 <= successes <= trials, trials >= 1, and 0 < level < 1"
        )
    p = k / n
    lo = float(betaincinv(k, n - k + 1, tail)) if k > 0 else 0.0
    hi = float(betaincinv(k + 1, n - k, 1.0 - tail)) if k < n else 1.0
    return (p, min(p, lo), max(p, hi))


def mean_interval(
    values: Iterable[float], level: float = 0.95, support: tuple[float, float] | None = None
) -> tuple[float, float, float]:
    """Student's t interval for a mean of i.i.d. samples, clipped to the quantity's range.

    ``mean +- t(n - 1) * std(ddof=1) / sqrt(n)`` with ``t(n - 1)`` the ``(1 + level) / 2``
    quantile of Student's t with ``n - 1`` degrees of freedom, then clipped to ``support``;
    with fewer than two samples the interval is the whole support (``(-inf, inf)`` by default).

    Args:
        values: the samples.
        level: the confidence level.
        support: ``(low, high)`` the quantity cannot leave (``(0, 1)`` for a rate); None:
            unbounded.

    Returns ``(mean, lo, hi)``; a sample that is not finite or lies outside ``support`` makes
    all three NaN.
    """
    import numpy as np
    from scipy.special import stdtrit  # Student's t quantile (lighter to import than stats)

    low, high = support if support is not None else (-math.inf, math.inf)
    x = np.asarray(list(values) if not hasattr(values, "shape") else values, dtype=np.float64)
    n = x.size
    m = float(x.mean()) if n else math.nan
    if not (np.isfinite(x).all() and ((low <= x) & (x <= high)).all()):
        return (math.nan, math.nan, math.nan)
    if n < 2:
        return (m, low, high)
    half = float(stdtrit(n - 1, 0.5 + level / 2)) * float(x.std(ddof=1)) / math.sqrt(n)
    return (m, max(low, m - half), min(high, m + half))
