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

from dedebate.lab.claim_stats import (
    _finite,
    binomial_p_value,
    claim_p_value,
    exact_interval,
    mean_interval,
    nonfinite_reason,
    strict_max,
    strict_min,
    wilson_interval,
)

__all__ = [
    "FAMILY_ALPHA",
    "Claim",
    "awaits_family",
    "binomial_p_value",
    "claim_p_value",
    "consistency_rows",
    "exact_interval",
    "family_decisions",
    "family_size",
    "gating",
    "mean_interval",
    "nonfinite_reason",
    "strict_max",
    "strict_min",
    "wilson_interval",
    "with_family_decisions",
]

FAMILY_ALPHA = 0.05
"""Family-wise error rate of a report: the chance that any true Monte-Carlo claim fails."""


def _fail_note(reason: str, note: str) -> str:
    return f"FAIL-CLOSED: {reason}" + (f"; {note}" if note else "")


def _failed(claim: str, source: str, bound: str, value: float, reason: str, note: str) -> Claim:
    """A failing row without an interval: a sample that cannot be decided (``reason``)."""
    return Claim(
        claim, source, bound, value, math.nan, math.nan, False, _fail_note(reason, note), 0.0, False
    )


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
        if not reason and not self.lo <= self.value <= self.hi:
            reason = f"the interval [{self.lo!r}, {self.hi!r}] does not hold value={self.value!r}"
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
    def exact(
        claim: str,
        source: str,
        bound: str,
        value: float,
        passed: bool,
        note: str = "",
        *,
        finding: bool = False,
    ):
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
    def proportion(
        claim: str,
        source: str,
        relation: str,
        target: float,
        successes: float,
        trials: float,
        note: str = "",
        *,
        members: int = 1,
        checks: bool = True,
        bound: str | None = None,
    ) -> Claim:
        """A Monte-Carlo row on a proportion: exact (Clopper-Pearson) 95% interval and test.

        The p-value is :func:`binomial_p_value`, the exact test the interval inverts, so the row
        passes at 95% exactly when the interval reaches the target. ``members > 1`` marks a row
        that reports the worst of ``members`` estimates with the same number of trials (a max or
        min over a zoo): its p-value is Bonferroni-adjusted within the row, ``min(1, members * p)``,
        and its interval is the one that test inverts, at level ``1 - 0.05 / members`` (valid for
        the worst member although it was picked after looking). The row stores ``k = successes``
        and ``n = trials``.

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
            v = (
                successes / trials
                if _finite(successes) and _finite(trials) and trials > 0
                else math.nan
            )
            return _failed(claim, source, bound, v, reason, note)
        k, n = int(successes), int(trials)
        v, lo, hi = exact_interval(k, n, 1.0 - FAMILY_ALPHA / members)
        p = min(1.0, members * binomial_p_value(k, n, float(target), relation))
        return Claim(
            claim,
            source,
            bound,
            v,
            lo,
            hi,
            bool(checks and p >= FAMILY_ALPHA),
            note,
            p,
            bool(checks),
            k=k,
            n=n,
        )

    @staticmethod
    def mean(
        claim: str,
        source: str,
        relation: str,
        target: float,
        values: Iterable[float],
        note: str = "",
        *,
        checks: bool = True,
        bound: str | None = None,
        support: tuple[float, float] | None = None,
    ) -> Claim:
        """A Monte-Carlo row on a mean of i.i.d. samples: Student's t 95% interval and t-test.

        The t-test of ``mean RELATION target`` (``n - 1`` degrees of freedom) uses the sample
        standard error; it is the test the interval inverts. ``support`` is the range of the
        quantity (``(0, 1)`` for a rate): the interval is clipped to it. The row stores ``n`` and
        the sample standard deviation ``sd``. Fails closed (the row FAILs with the reason in its
        note): fewer than two samples, a non-finite sample or target, a sample outside
        ``support``.

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
            reason = f"{bad.size} of {x.size} samples are not finite (first: {float(bad[0])!r})"
        low, high = support if support is not None else (-math.inf, math.inf)
        if not reason and not np.all((low <= x) & (x <= high)):
            out = x[(x < low) | (x > high)]
            reason = (
                f"{out.size} sample(s) outside the support {support} (first: {float(out[0])!r})"
            )
        if reason:
            m = float(x.mean()) if x.size else math.nan
            return _failed(claim, source, bound, m, reason, note)
        m, lo, hi = mean_interval(x, support=support)
        sd = float(x.std(ddof=1))
        p = claim_p_value(m, sd / math.sqrt(x.size), target, relation, df=x.size - 1)
        return Claim(
            claim,
            source,
            bound,
            m,
            lo,
            hi,
            bool(checks and p >= FAMILY_ALPHA),
            note,
            p,
            bool(checks),
            n=int(x.size),
            sd=sd,
        )


def row_finite(row: Mapping[str, Any]) -> bool:
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
    return [
        Claim.exact(
            f"consistency check failed: {name}",
            "implementation invariant",
            "holds",
            0.0,
            False,
            detail,
        )
        for name, (ok, detail) in checks.items()
        if not bool(ok)
    ]


def _in_family(row: Mapping[str, Any]) -> bool:
    return row.get("p_value") is not None and not row.get("finding", False)


def family_size(rows: Iterable[Mapping[str, Any]]) -> int:
    """m: the Monte-Carlo rows a family decides, less those failed closed (a non-finite value,
    interval or p-value fails whatever m is; counted, it would lower the others' bar)."""
    return sum(_in_family(r) and row_finite(r) for r in rows)


def gating(row: Mapping[str, Any] | Claim) -> bool:
    """Whether a row gates pass/fail (every claim does; a finding does not)."""
    return not (row.finding if isinstance(row, Claim) else row.get("finding", False))


def family_decisions(
    claims: Sequence[Mapping[str, Any] | Claim], alpha: float = FAMILY_ALPHA
) -> list[bool]:
    """Pass/fail of every row under the family-wise policy (Bonferroni over Monte-Carlo rows).

    A row whose value, interval or p-value is not finite fails (fail closed). Exact rows
    (``p_value`` None) keep their own decision. With m Monte-Carlo rows, such a row passes iff
    its checks hold and ``p_value >= alpha / m`` (m: :func:`family_size`). A dict's own
    decision is read from ``passed_95`` when present, else ``passed``.
    """
    rows = [c.to_dict() if isinstance(c, Claim) else c for c in claims]
    m = family_size(rows)
    out = []
    for r in rows:
        if not row_finite(r):
            out.append(False)  # fail closed
        elif not _in_family(r):
            out.append(bool(r.get("passed_95", r["passed"])))
        else:
            out.append(bool(r.get("checks", True)) and r["p_value"] >= alpha / m)
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
    return (
        _in_family(row)
        and not row["passed"]
        and row_finite(row)
        and bool(row.get("checks", True))
        and row["p_value"] > 0
    )


def with_family_decisions(
    claims: Sequence[Mapping[str, Any] | Claim], alpha: float = FAMILY_ALPHA, family: str = "run"
) -> list[dict[str, Any]]:
    """Claim dicts with ``passed`` set by :func:`family_decisions`.

    The row's own 95% decision is kept as ``passed_95``; Monte-Carlo rows also get the family
    they were decided over (``family``: ``"run"``, the run's own rows, or ``"report"``, every
    row of a reproduce report), its size ``family_size`` and their per-row level
    ``family_level = alpha / m``.
    """
    rows = [c.to_dict() if isinstance(c, Claim) else dict(c) for c in claims]
    decisions = family_decisions(rows, alpha)
    m = family_size(rows)
    out = []
    for r, ok in zip(rows, decisions):
        own = bool(r.get("passed_95", r["passed"]))
        extra = (
            {"family": family, "family_size": m, "family_level": alpha / max(m, 1)}
            if _in_family(r)
            else {}
        )
        out.append({**r, "passed_95": own, "passed": ok, **extra})
    return out
