"""The contract between the lab shell and an experiment module (``experiments/NAME.py``).

An experiment module is a thin recipe that knows both the pure debate code and this contract.
It defines:

* ``NAME: str`` -- the registry name (also the default config file ``configs/NAME.yaml``);
* ``TITLE: str`` -- one line for the report;
* ``Config`` -- a ``@config_dataclass`` of the experiment's parameters, each field declared once
  as ``name: type = param(default, "doc", ge=..., le=..., choices=...)``
  (``dedebate/lab/params.py``); every integer has a finite maximum. The lab checks the ranges and
  reports a bad value in one line naming the full key (``params.name=value: must be ...``).
  ``__post_init__`` holds only checks between fields, raising ``ValueError("name=value: what is
  allowed")``;
* ``SIZES: dict[str, dict]`` -- overrides of ``Config`` fields for the ``quick`` size (tiny, used by
  the tests) and the ``full`` size (paper scale, for an accelerator). ``default`` is ``Config()``.
  A config file's ``params`` and the command line override the preset;
* ``run(cfg: Config, ctx: RunContext) -> ExperimentResult`` -- the whole experiment. Pure JAX
  inside; all I/O goes through ``ctx``.

Optionally, an experiment is *sweepable* (``dedebate sweep``; ``dedebate/lab/sweep.py``). It then
also defines:

* ``DYNAMIC: tuple[str, ...]`` -- the ``Config`` fields that enter the computation only as numbers
  (probabilities, thresholds, learning rates, delta, sample-count scale factors): never as a
  shape, a static size or Python control flow;
* ``point(cfg: Config) -> (dynamic, fn)`` -- ``dynamic`` is a pytree of arrays holding the values
  of the DYNAMIC fields of ``cfg`` (the same structure, shapes and dtypes whatever those values
  are); ``fn(dynamic, key) -> dict[str, scalar array]`` is pure JAX, reads ``cfg`` only for its
  static fields, and returns the metrics of one run (one row of ``sweep.csv``). An experiment
  that trains returns a *chunked point* instead, ``(dynamic, ChunkedFn(init, chunk, chunks,
  finish, axis))`` (``dedebate/lab/sweep.py``): ``init(dynamic, key) -> state``,
  ``chunk(dynamic, state, spec) -> (state, monitors)`` for each static ``spec`` of ``chunks``
  and ``finish(dynamic, state, monitors) -> metrics``. A sweep group runs them as compiled
  programs (init, one chunk per distinct spec, finish); ``run`` trains the same rows through
  the same programs, chunk by chunk with checkpoints (``train_point``), so its pairs are the
  sweep's rows bit for bit (a program of one row runs unbatched: ``sweep.batch: 1``).
* ``inputs(cfg: Config, seed: int, key) -> pytree`` (optional) -- data an experiment builds on the
  host (populations of random machines, strategy batches, enumerations), from the run's ``seed``
  and ``key``, with the same structure and shapes for every point of a static group. With it,
  ``fn`` takes a third argument, ``fn(dynamic, key, inputs)``: the lab calls ``inputs`` once per
  row of a sweep (at the row's key) and stacks the results along the run axis with ``dynamic``;
  ``run`` calls it once. Keep anything in it that cannot be traced, out of ``fn``;
* ``COMPILE_OPTIONS: dict`` (optional) -- XLA compiler options of the swept program, for an
  experiment whose run compiles its programs with them (they can change float rounding, so a
  sweep row is bit-equal to the run only when both compile alike); or a function of the
  platform name (``"cpu"``, ``"gpu"``, ...) returning such a dict or None;
* ``sweep_figures(rows) -> dict[str, matplotlib.figure.Figure]`` (optional, any experiment) --
  figures of a whole sweep that the per-metric plots cannot show (e.g. a frontier found across
  points); ``rows`` are the sweep's rows as in ``sweep.csv`` (index columns, axis values,
  metrics). The lab calls it after the sweep (when ``sweep.plots``) and saves each figure as
  ``plots/NAME.png``; an exception costs the figures and a warning, not the sweep.

The lab stacks ``dynamic`` over grid points x seeds and evaluates ``jit(vmap(fn))`` once per
combination of values of the static axes, sharded over every device; ``key`` is the row's key,
``fold_in(fold_in(key(seed), w0), w1)`` with ``(w0, w1)`` from the hash of the point's resolved
params (see ``dedebate/lab/sweep.py``). An experiment without ``point`` can still be swept: each
point is then a full ``run`` and its scalar ``metrics`` are the row.

The lab discovers experiment modules by importing every module of the ``experiments`` package that
defines ``NAME`` and ``run``; nothing needs registering by hand.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import jax


def doc(text: str) -> dict[str, str]:
    """``metadata`` of a documented dataclass field without a range: ``dataclasses.field(
    default=..., metadata=doc("what it is"))`` (``dedebate config NAME`` prints it). Experiment
    parameters use :func:`dedebate.lab.params.param`, which also states the range."""
    return {"doc": text}


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
    """``""`` when every named number is finite, else ``"name=value is not finite"`` for the
    first that is not (NaN, +-inf, None): the note of a row that fails closed."""
    for name, x in named.items():
        if not _finite(x):
            return f"{name}={x!r} is not finite"
    return ""


def _fail_note(reason: str, note: str) -> str:
    return f"FAIL-CLOSED: {reason}" + (f"; {note}" if note else "")


def strict_max(values: Iterable[float]) -> float:
    """``max`` that fails closed: NaN if ``values`` is empty or holds a NaN anywhere (the
    builtin ``max`` keeps or drops a NaN depending on its position)."""
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


def claim_p_value(estimate: float, se: float, target: float, relation: str) -> float:
    """Two-sided-equivalent p-value of the claim ``true value RELATION target``.

    ``z = (estimate - target) / se``; for ``>=`` the evidence against the claim is a low
    estimate, p = min(1, 2 Phi(z)); for ``<=`` p = min(1, 2 Phi(-z)); for ``==``
    p = 2 Phi(-|z|). Scaled so that ``p >= 0.05`` exactly when the 95% interval
    ``estimate +- 1.96 se`` reaches the target, and ``p >= a`` when the ``1 - a`` interval does.
    With ``se == 0`` the p-value is 1 if the estimate satisfies the relation, else 0.
    Fails closed: a non-finite estimate, target or standard error, or a negative standard
    error, gives p = 0.
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
    if relation == ">=":
        return min(1.0, 2.0 * _normal_cdf(z))
    if relation == "<=":
        return min(1.0, 2.0 * _normal_cdf(-z))
    return 2.0 * _normal_cdf(-abs(z))


@dataclasses.dataclass(frozen=True)
class Claim:
    """One row of the reproduce report: a paper claim checked against a measured number.

    ``bound`` is how the claim reads (``">= 0.6402"``, ``"== 1/16"``, ``"<= 2 delta"``);
    ``value`` is the measured point estimate and ``(lo, hi)`` its 95% interval (equal to
    ``value`` when the number is exact). ``passed`` is decided by the experiment from the interval
    and the bound at the row's own 95% level, never loosened to make a row pass.

    Monte-Carlo rows also carry ``p_value`` (see :func:`claim_p_value`; ``None`` for exact rows)
    and ``checks`` (the row's non-statistical conditions, e.g. two exact computations agreeing).
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
        return dataclasses.asdict(self)

    @staticmethod
    def exact(claim: str, source: str, bound: str, value: float, passed: bool, note: str = ""):
        """A claim measured exactly (no sampling): the interval is the point itself. A value that
        is not a finite number fails the row (the reason goes in the note)."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = math.nan
        return Claim(claim, source, bound, v, v, v, bool(passed), note)

    @staticmethod
    def proportion(claim: str, source: str, relation: str, target: float, successes: float,
                   trials: float, note: str = "", *, members: int = 1, checks: bool = True,
                   bound: str | None = None) -> Claim:
        """A Monte-Carlo row on a proportion: Wilson 95% interval and the score test of
        ``p RELATION target`` (the test the Wilson interval inverts, so the row passes at 95%
        exactly when the interval reaches the target).

        ``members > 1`` marks a row that reports the worst of ``members`` estimates with the
        same number of trials (a max or min over a zoo): its p-value is Bonferroni-adjusted
        within the row, ``min(1, members * p)``.

        Fails closed (the row FAILs with the reason in its note): a non-finite count, target or
        number of trials, zero trials, a count outside ``[0, trials]``, a target outside [0, 1].
        """
        if members < 1:
            raise ValueError(f"members={members!r}: must be >= 1")
        bound = bound or f"{relation} {target:.6g}"
        reason = nonfinite_reason(successes=successes, trials=trials, target=target)
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
        v, lo, hi = wilson_interval(successes, trials)
        se0 = math.sqrt(max(target * (1.0 - target), 0.0) / trials)
        p = min(1.0, members * claim_p_value(v, se0, target, relation))
        return Claim(claim, source, bound, v, lo, hi,
                     bool(checks and p >= FAMILY_ALPHA), note, p, bool(checks))

    @staticmethod
    def mean(claim: str, source: str, relation: str, target: float, values: Iterable[float],
             note: str = "", *, checks: bool = True, bound: str | None = None) -> Claim:
        """A Monte-Carlo row on a mean of i.i.d. samples: normal 95% interval and the z-test of
        ``mean RELATION target`` with the sample standard error.

        Fails closed (the row FAILs with the reason in its note): fewer than two samples, a
        non-finite sample or target."""
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
        m, lo, hi = mean_interval(x)
        se = float(x.std(ddof=1)) / math.sqrt(x.size)
        p = claim_p_value(m, se, target, relation)
        return Claim(claim, source, bound, m, lo, hi,
                     bool(checks and p >= FAMILY_ALPHA), note, p, bool(checks))


def _row_finite(row: Mapping[str, Any]) -> bool:
    """A row dict's value, interval and p-value are finite numbers (p-value may be None)."""
    named = {k: row.get(k) for k in ("value", "lo", "hi")}
    if row.get("p_value") is not None:
        named["p_value"] = row["p_value"]
    return not nonfinite_reason(**named)


def consistency_rows(checks: Mapping[str, tuple[bool, str]]) -> list[Claim]:
    """Rows for an experiment's consistency checks: conditions that hold by construction when
    the code is right (a cost charged as N_V per abort, an algorithm's own stopping rule, a
    symmetry that holds for every estimator). They are not paper claims, so a check that holds
    adds no row (record ``checks`` in ``metrics``); one that fails becomes a failing gating row
    named after it, so a broken invariant still fails the run. ``checks`` maps a name to
    ``(holds, detail)``."""
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
    (``p_value`` None) keep their own decision. With m Monte-Carlo rows, such a row
    passes iff its checks hold and ``p_value >= alpha / m``. ``claims`` are :class:`Claim` rows or
    their dicts (a dict's own decision is read from ``passed_95`` when present, else ``passed``).
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


def with_family_decisions(claims: Sequence[Mapping[str, Any] | Claim],
                          alpha: float = FAMILY_ALPHA) -> list[dict[str, Any]]:
    """Claim dicts with ``passed`` set by :func:`family_decisions`, the row's own 95% decision
    kept as ``passed_95``, and the family size and per-row level of Monte-Carlo rows."""
    rows = [c.to_dict() if isinstance(c, Claim) else dict(c) for c in claims]
    decisions = family_decisions(rows, alpha)
    m = sum(_in_family(r) for r in rows)
    out = []
    for r, ok in zip(rows, decisions):
        own = bool(r.get("passed_95", r["passed"]))
        extra = {"family_size": m, "family_level": alpha / m} if _in_family(r) else {}
        out.append({**r, "passed_95": own, "passed": ok, **extra})
    return out


@dataclasses.dataclass
class ExperimentResult:
    """What ``run`` returns: report rows, summary metrics and optional tidy tables.

    ``metrics`` values must be JSON-able (numbers, strings, lists, dicts). ``tables`` maps a
    table name to a list of rows (dicts with the same keys); the lab writes each as CSV.
    ``plots`` lists the file names (under ``ctx.plots_dir``) the experiment saved.
    """

    claims: list[Claim] = dataclasses.field(default_factory=list)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    plots: list[str] = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        """At least one gating claim, and every claim passes under the family-wise policy
        (:func:`family_decisions`); findings do not gate. An experiment with no gating claim
        (only findings, or nothing) does not pass: there is nothing it has shown."""
        gate = [ok for c, ok in zip(self.claims, family_decisions(self.claims)) if gating(c)]
        return bool(gate) and all(gate)


class Progress(Protocol):
    def update(self, n: int = 1) -> None: ...

    def set_postfix(self, **kwargs: Any) -> None: ...


class RunContext(Protocol):
    """What the lab hands an experiment. All impure services live behind it.

    * ``key`` -- a typed PRNG key (``jax.random.key``) derived from the run's seed and the
      experiment name; derive sub-keys with ``jax.random.fold_in(key, index)``.
    * ``seed`` -- the integer seed the key came from.
    * ``size`` -- ``"quick"``, ``"default"`` or ``"full"``.
    * ``progress(total, desc)`` -- a context manager yielding a :class:`Progress` bar (host side,
      call ``update`` between jitted chunks).
    * ``log(metrics, step=None)`` -- append a row to ``metrics.jsonl`` and to the W&B run. Give
      the step: steps are one clock over the whole run (see ``dedebate/lab/runner.py``).
    * ``truncate_metrics(step)`` -- on resume, drop the rows of ``metrics.jsonl`` from ``step``
      on (what the resumed attempt computes again); :func:`dedebate.lab.driver.run_chunks` calls
      it.
    * ``save_figure(fig, name)`` -- save a matplotlib figure as ``plots/NAME.png``, close it,
      log it to W&B, and return the file name for ``ExperimentResult.plots``.
    * ``checkpoint_dir`` -- a directory for Orbax checkpoints of this run (resume support).
    * ``resume`` -- whether the run was asked to resume from ``checkpoint_dir``.
    * ``checkpointer(every, keep)`` -- an Orbax checkpointer on ``checkpoint_dir``
      (:class:`dedebate.lab.checkpoint.Checkpointer`, guarded by the run's config hash; use it as
      a context manager so saves finish before the run ends).
    * ``stopwatch(name)`` -- a context manager timing its block (wall clock) into the run's
      metrics as ``wall_<name>_s`` (a name timed twice adds up); it yields a :class:`Lap` whose
      ``seconds`` is set when the block ends, for a note. Experiments read no clock themselves.

    Chunked training goes through :func:`dedebate.lab.driver.run_chunks`, which uses only these
    services (checkpoints, restore and skip, monitors, progress, logging with explicit steps).
    """

    key: jax.Array
    seed: int
    size: str
    checkpoint_dir: Any
    resume: bool

    def progress(self, total: int, desc: str): ...

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None: ...

    def truncate_metrics(self, step: int) -> None: ...

    def save_figure(self, fig: Any, name: str) -> str: ...

    def checkpointer(self, every: int = 1, keep: int = 3) -> Any: ...

    def stopwatch(self, name: str) -> contextlib.AbstractContextManager[Lap]: ...


@dataclasses.dataclass
class Lap:
    """What :func:`stopwatch` measured: ``seconds`` of wall clock (set when the block ends)."""

    name: str
    seconds: float = 0.0


_TIMER_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@contextlib.contextmanager
def stopwatch(name: str, timings: dict[str, float] | None = None) -> Iterator[Lap]:
    """Time the block with ``time.perf_counter``: yields a :class:`Lap`; when the block ends
    (also by an exception) sets its ``seconds`` and adds them to ``timings["wall_<name>_s"]``
    (if given). ``RunContext.stopwatch(name)`` is this with the run's timings."""
    if not _TIMER_NAME.match(name):
        raise ValueError(f"stopwatch name={name!r}: use letters, digits and '_' only")
    lap = Lap(name)
    t0 = time.perf_counter()
    try:
        yield lap
    finally:
        lap.seconds = time.perf_counter() - t0
        if timings is not None:
            key = f"wall_{name}_s"
            timings[key] = timings.get(key, 0.0) + lap.seconds


def wilson_interval(successes: float, trials: float, z: float = 1.959963984540054):
    """Wilson score interval for a binomial proportion (95% by default).

    Returns ``(p_hat, lo, hi)``. With zero trials the interval is the whole of [0, 1]; a
    non-finite count or number of trials gives NaN throughout (fail closed).
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


def mean_interval(values: Iterable[float], z: float = 1.959963984540054):
    """Normal-theory interval for a mean of i.i.d. samples (for unbounded or real-valued data).

    Returns ``(mean, lo, hi)``.
    """
    import numpy as np

    x = np.asarray(list(values) if not hasattr(values, "shape") else values, dtype=np.float64)
    n = x.size
    m = float(x.mean()) if n else math.nan
    if n < 2:
        return (m, -math.inf, math.inf)
    se = float(x.std(ddof=1)) / math.sqrt(n)
    return (m, m - z * se, m + z * se)
