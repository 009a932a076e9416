"""Report rows (:class:`Claim`) and how they are decided: intervals, p-values, the family.

A :class:`Claim` is one row of the reproduce report: a paper claim, its bound and the measured
value with a 95% interval. Exact rows decide themselves; Monte-Carlo rows carry a p-value (the
test their interval inverts: :func:`binomial_p_value` for proportions, exact;
:func:`claim_p_value` with Student's t for means) and are decided family-wise
(:func:`family_decisions`): with m Monte-Carlo rows a row passes iff its checks hold and
``p >= FAMILY_ALPHA / m`` (Bonferroni), so a report whose claims all hold fails with probability
at most 5%. Every decision fails closed: a value, interval or p-value that is not a finite number
never passes. Intervals: :func:`exact_interval` (Clopper-Pearson, proportion rows),
:func:`mean_interval` (Student's t, means); :func:`wilson_interval` for tables and plots.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FAMILY_ALPHA = 0.05
"""Family-wise error rate of a report: the chance that any true Monte-Carlo claim fails."""

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


def _fail_note(reason: str, note: str) -> str:
    return f"FAIL-CLOSED: {reason}" + (f"; {note}" if note else "")


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


def claim_p_value(estimate: float, se: float, target: float, relation: str,
                  df: float | None = None) -> float:
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
        holds = {">=": estimate >= target, "<=": estimate <= target,
                 "==": estimate == target}[relation]
        return 1.0 if holds else 0.0
    z = (estimate - target) / se
    if df is None:
        cdf = _normal_cdf
    else:
        from scipy.special import stdtr  # Student's t CDF (lighter to import than stats)

        def cdf(x: float) -> float:
            return float(stdtr(df, x))
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

    less, greater = (float(binomtest(successes, trials, target, alternative=side).pvalue)
                     for side in ("less", "greater"))  # P(X <= successes), P(X >= successes)
    return min(1.0, 2.0 * {">=": less, "<=": greater, "==": min(less, greater)}[relation])


@dataclasses.dataclass(frozen=True)
class Claim:
    """One row of the reproduce report: a paper claim checked against a measured number.

    ``bound`` is how the claim reads (``">= 0.6402"``, ``"== 1/16"``, ``"<= 2 delta"``);
    ``value`` is the measured point estimate and ``(lo, hi)`` its 95% interval (equal to
    ``value`` when the number is exact). ``passed`` is decided by the experiment from the interval
    and the bound at the row's own 95% level, never loosened to make a row pass.

    Monte-Carlo rows also carry ``p_value`` (``None`` for exact rows), ``checks`` (the row's
    non-statistical conditions, e.g. two exact computations agreeing) and what the statistics
    were computed from: a proportion row its count ``k`` of ``n`` trials, a mean row its number
    of samples ``n`` and their standard deviation ``sd`` (so two runs can be compared exactly).
    A report decides such rows family-wise (:func:`family_decisions`): with m Monte-Carlo rows,
    a row passes iff ``checks`` and ``p_value >= FAMILY_ALPHA / m`` (Bonferroni), so a report
    whose claims are all true fails with probability at most 5%, however many rows it has.
    Build these rows with :meth:`proportion` or :meth:`mean`.

    ``finding=True`` marks a measured finding that is not a paper claim (for example whether
    self-play training found the honest equilibrium): it states its question and criterion up
    front, ``passed`` says whether the criterion held, and it is reported in full but does not
    gate the run or the report and is not part of the Monte-Carlo family.
    """

    claim: str
    source: str
    bound: str
    value: float
    lo: float
    hi: float
    passed: bool
    note: str = ""
    p_value: float | None = None
    checks: bool = True
    finding: bool = False
    k: int | None = None
    n: int | None = None
    sd: float | None = None

    def __post_init__(self):
        # fail closed: a row whose value, interval or p-value is not a finite number never passes
        named = {"value": self.value, "lo": self.lo, "hi": self.hi}
        if self.p_value is not None:
            named["p_value"] = self.p_value
        reason = nonfinite_reason(**named)
        if reason and self.passed:
            object.__setattr__(self, "passed", False)
        if reason and not self.note.startswith("FAIL-CLOSED"):
            object.__setattr__(self, "note", _fail_note(reason, self.note))
        if reason and self.p_value is not None:
            object.__setattr__(self, "checks", False)

    def to_dict(self) -> dict[str, Any]:
        """The row as a plain dict (the form ``results.json`` holds)."""
        return dataclasses.asdict(self)

    @staticmethod
    def exact(claim: str, source: str, bound: str, value: float, passed: bool, note: str = "",
              *, finding: bool = False):
        """A claim measured exactly (no sampling): the interval is the point itself.

        A value that is not a finite number fails the row (the reason goes in the note).

        Args:
            claim: what the paper claims, in words.
            source: where (theorem, section).
            bound: how the claim reads (``"== 1/16"``).
            value: the exact measured value.
            passed: whether the value satisfies the bound.
            note: free text for the report.
            finding: a measured finding that does not gate (see :class:`Claim`).

        Returns the :class:`Claim` with ``lo == hi == value`` and no p-value.
        """
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = math.nan
        return Claim(claim, source, bound, v, v, v, bool(passed), note, finding=finding)

    @staticmethod
    def proportion(claim: str, source: str, relation: str, target: float, successes: float,
                   trials: float, note: str = "", *, members: int = 1, checks: bool = True,
                   bound: str | None = None) -> Claim:
        """A Monte-Carlo row on a proportion: exact (Clopper-Pearson) 95% interval and test.

        The p-value is :func:`binomial_p_value`, the exact test the interval inverts, so the row
        passes at 95% exactly when the interval reaches the target. ``members > 1`` marks a row
        that reports the worst of ``members`` estimates with the same number of trials (a max or
        min over a zoo): its p-value is Bonferroni-adjusted within the row, ``min(1, members * p)``.
        The row stores ``k = successes`` and ``n = trials``.

        Fails closed (the row FAILs with the reason in its note): a non-finite or fractional
        count, target or number of trials, zero trials, a count outside ``[0, trials]``, a target
        outside [0, 1].

        Args:
            claim: what the paper claims, in words.
            source: where (theorem, section).
            relation: ``">="``, ``"<="`` or ``"=="``.
            target: the bound on the true proportion, in [0, 1].
            successes: the count of successes (a whole number).
            trials: the number of trials (a whole number).
            note: free text for the report.
            members: how many estimates the row is the worst of.
            checks: the row's non-statistical conditions (False fails it).
            bound: how the claim reads; default ``"RELATION target"``.

        Returns the :class:`Claim` with its interval and p-value.

        Raises:
            ValueError: ``members < 1``.
        """
        if members < 1:
            raise ValueError(f"members={members!r}: must be >= 1")
        bound = bound or f"{relation} {target:.6g}"
        reason = nonfinite_reason(successes=successes, trials=trials, target=target)
        for name, x in (("successes", successes), ("trials", trials)):
            if not reason and float(x) != int(x):
                reason = f"{name}={x!r}: a count must be a whole number"
        if not reason and trials <= 0:
            reason = f"trials={trials!r}: a Monte-Carlo row needs at least one trial"
        if not reason and not 0 <= successes <= trials:
            reason = f"successes={successes!r}: must lie in [0, trials={trials!r}]"
        if not reason and not 0.0 <= target <= 1.0:
            reason = f"target={target!r}: a proportion's target must lie in [0, 1]"
        if reason:
            v = successes / trials if _finite(successes) and _finite(trials) and trials > 0 \
                else math.nan
            return Claim(claim, source, bound, v, math.nan, math.nan, False,
                         _fail_note(reason, note), 0.0, False)
        k, n = int(successes), int(trials)
        v, lo, hi = exact_interval(k, n)
        p = min(1.0, members * binomial_p_value(k, n, float(target), relation))
        return Claim(claim, source, bound, v, lo, hi,
                     bool(checks and p >= FAMILY_ALPHA), note, p, bool(checks), k=k, n=n)

    @staticmethod
    def mean(claim: str, source: str, relation: str, target: float, values: Iterable[float],
             note: str = "", *, checks: bool = True, bound: str | None = None,
             support: tuple[float, float] | None = None) -> Claim:
        """A Monte-Carlo row on a mean of i.i.d. samples: Student's t 95% interval and t-test.

        The t-test of ``mean RELATION target`` (``n - 1`` degrees of freedom) uses the sample
        standard error; it is the test the interval inverts. ``support`` is the range of the
        quantity (``(0, 1)`` for a rate): the interval is clipped to it. The row stores ``n`` and
        the sample standard deviation ``sd``. Fails closed (the row FAILs with the reason in its
        note): fewer than two samples, a non-finite sample or target.

        Args:
            claim: what the paper claims, in words.
            source: where (theorem, section).
            relation: ``">="``, ``"<="`` or ``"=="``.
            target: the bound on the true mean.
            values: the samples.
            note: free text for the report.
            checks: the row's non-statistical conditions (False fails it).
            bound: how the claim reads; default ``"RELATION target"``.
            support: ``(low, high)`` the quantity cannot leave; None: unbounded.

        Returns the :class:`Claim` with its interval and p-value.
        """
        import numpy as np

        x = np.asarray(list(values) if not hasattr(values, "shape") else values, np.float64)
        bound = bound or f"{relation} {target:.6g}"
        reason = nonfinite_reason(target=target)
        if not reason and x.size < 2:
            reason = f"values has {x.size} sample(s): a Monte-Carlo mean needs >= 2"
        if not reason and not np.all(np.isfinite(x)):
            bad = x[~np.isfinite(x)]
            reason = (f"{bad.size} of {x.size} samples are not finite (first: "
                      f"{float(bad[0])!r})")
        if reason:
            m = float(x.mean()) if x.size else math.nan
            return Claim(claim, source, bound, m, math.nan, math.nan, False,
                         _fail_note(reason, note), 0.0, False)
        m, lo, hi = mean_interval(x, support=support)
        sd = float(x.std(ddof=1))
        p = claim_p_value(m, sd / math.sqrt(x.size), target, relation, df=x.size - 1)
        return Claim(claim, source, bound, m, lo, hi,
                     bool(checks and p >= FAMILY_ALPHA), note, p, bool(checks), n=int(x.size),
                     sd=sd)


def _row_finite(row: Mapping[str, Any]) -> bool:
    """A row dict's value, interval and p-value are finite numbers (p-value may be None)."""
    named = {k: row.get(k) for k in ("value", "lo", "hi")}
    if row.get("p_value") is not None:
        named["p_value"] = row["p_value"]
    return not nonfinite_reason(**named)


def consistency_rows(checks: Mapping[str, tuple[bool, str]]) -> list[Claim]:
    """Rows for an experiment's consistency checks: only the checks that fail.

    The checks are conditions that hold by construction when the code is right (a cost charged
    as N_V per abort, an algorithm's own stopping rule, a symmetry that holds for every
    estimator). They are not paper claims, so a check that holds adds no row (record ``checks``
    in ``metrics``); one that fails becomes a failing gating row named after it, so a broken
    invariant still fails the run.

    Returns one failing exact :class:`Claim` per check that does not hold.
    """
    return [Claim.exact(f"consistency check failed: {name}", "implementation invariant",
                        "holds", 0.0, False, detail)
            for name, (ok, detail) in checks.items() if not bool(ok)]


def _in_family(row: Mapping[str, Any]) -> bool:
    return row.get("p_value") is not None and not row.get("finding", False)


def gating(row: Mapping[str, Any] | Claim) -> bool:
    """Whether a row gates pass/fail (every claim does; a finding does not)."""
    return not (row.finding if isinstance(row, Claim) else row.get("finding", False))


def family_decisions(claims: Sequence[Mapping[str, Any] | Claim],
                     alpha: float = FAMILY_ALPHA) -> list[bool]:
    """Pass/fail of every row under the family-wise policy (Bonferroni over Monte-Carlo rows).

    A row whose value, interval or p-value is not finite fails (fail closed). Exact rows
    (``p_value`` None) keep their own decision. With m Monte-Carlo rows, such a row passes iff
    its checks hold and ``p_value >= alpha / m``. A dict's own decision is read from
    ``passed_95`` when present, else ``passed``.
    """
    rows = [c.to_dict() if isinstance(c, Claim) else c for c in claims]
    m = sum(_in_family(r) for r in rows)
    out = []
    for r in rows:
        p = r.get("p_value")
        if not _row_finite(r):
            out.append(False)  # fail closed
        elif not _in_family(r):
            out.append(bool(r.get("passed_95", r["passed"])))
        else:
            out.append(bool(r.get("checks", True)) and p >= alpha / m)
    return out


def awaits_family(row: Mapping[str, Any]) -> bool:
    """Whether a decided row fails only by the family level ``alpha / m`` of a family that may
    still grow: a finite Monte-Carlo row whose checks hold and whose p-value is positive. More
    rows lower the level, so such a row can still pass; every other decision is final (a row
    passing at m rows passes at more).

    Args:
        row: a claim dict decided by :func:`with_family_decisions`.

    Returns True for a failing row that a larger family may pass.
    """
    return (_in_family(row) and not row["passed"] and _row_finite(row)
            and bool(row.get("checks", True)) and row["p_value"] > 0)


def with_family_decisions(claims: Sequence[Mapping[str, Any] | Claim],
                          alpha: float = FAMILY_ALPHA, family: str = "run"
                          ) -> list[dict[str, Any]]:
    """Claim dicts with ``passed`` set by :func:`family_decisions`.

    The row's own 95% decision is kept as ``passed_95``; Monte-Carlo rows also get the family
    they were decided over (``family``: ``"run"``, the run's own rows, or ``"report"``, every
    row of a reproduce report), its size ``family_size`` and their per-row level
    ``family_level = alpha / m``.
    """
    rows = [c.to_dict() if isinstance(c, Claim) else dict(c) for c in claims]
    decisions = family_decisions(rows, alpha)
    m = sum(_in_family(r) for r in rows)
    out = []
    for r, ok in zip(rows, decisions):
        own = bool(r.get("passed_95", r["passed"]))
        extra = {"family": family, "family_size": m, "family_level": alpha / m} \
            if _in_family(r) else {}
        out.append({**r, "passed_95": own, "passed": ok, **extra})
    return out



def wilson_interval(successes: float, trials: float, z: float = 1.959963984540054):
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
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    # the interval contains p (at k = 0 and k = n the rounding of centre -+ half can miss it)
    return (p, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def exact_interval(successes: int, trials: int, level: float = 0.95):
    """Clopper-Pearson (exact) interval for a binomial proportion.

    Its ends are Beta quantiles (``scipy.special.betaincinv``), equal to
    ``scipy.stats.binomtest(successes, trials).proportion_ci(level, method="exact")`` and
    hundreds of times faster. It covers the true proportion with probability at least ``level``
    for every proportion and number of trials, and inverts :func:`binomial_p_value`.

    Args:
        successes: the count of successes, an integer in ``[0, trials]``.
        trials: the number of trials, an integer >= 1.
        level: the confidence level.

    Returns ``(p_hat, lo, hi)``.
    """
    from scipy.special import betaincinv

    k, n, tail = successes, trials, (1.0 - level) / 2
    p = k / n
    lo = float(betaincinv(k, n - k + 1, tail)) if k > 0 else 0.0
    hi = float(betaincinv(k + 1, n - k, 1.0 - tail)) if k < n else 1.0
    return (p, min(p, lo), max(p, hi))


def mean_interval(values: Iterable[float], level: float = 0.95,
                  support: tuple[float, float] | None = None):
    """Student's t interval for a mean of i.i.d. samples, clipped to the quantity's range.

    ``mean +- t(n - 1) * std(ddof=1) / sqrt(n)`` with ``t(n - 1)`` the ``(1 + level) / 2``
    quantile of Student's t with ``n - 1`` degrees of freedom, then clipped to ``support``;
    with fewer than two samples the interval is the whole support (``(-inf, inf)`` by default).

    Args:
        values: the samples.
        level: the confidence level.
        support: ``(low, high)`` the quantity cannot leave (``(0, 1)`` for a rate); None:
            unbounded.

    Returns ``(mean, lo, hi)``.
    """
    import numpy as np
    from scipy.special import stdtrit  # Student's t quantile (lighter to import than stats)

    low, high = support if support is not None else (-math.inf, math.inf)
    x = np.asarray(list(values) if not hasattr(values, "shape") else values, dtype=np.float64)
    n = x.size
    m = float(x.mean()) if n else math.nan
    if n < 2:
        return (m, low, high)
    half = float(stdtrit(n - 1, 0.5 + level / 2)) * float(x.std(ddof=1)) / math.sqrt(n)
    return (m, max(low, m - half), min(high, m + half))
