"""Stochastic-oracle debate with a witness for MA^O: Figure 2 + Figure 1, Theorem 7.2 (spec DED 8).

``x in L`` iff some w has ``P[M^O(x, w) = 1] >= 2/3``, and ``x not in L`` iff every w has it
``<= 1/3``. Alice first sends w, then the stochastic debate of
:mod:`dedebate.protocols.stochastic` runs on ``M(x, w)``; soundness carries over because every w
fails on a no-instance. The constants need one Lipschitz constant for every w,
``K* = max_w K(M(x, w))``. The task is the meta-analysis fixture with the witness selecting
studies (spec DED 8.2); every w gives a machine of the same shape, so all witnesses stack and
vmap.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.machines.fixtures import Fixture, meta_analysis, threshold_lipschitz
from dedebate.protocols.stochastic import DebateStatic, Outcome, Vera, play

MAX_STUDIES = 12


@dataclasses.dataclass(frozen=True, eq=False)
class MetaAnalysisTask:
    """An MA^O instance. Build with :func:`meta_analysis_task`."""

    # int8 [n]: study i reports a positive (1) or negative (0) effect (the input x)
    reports: np.ndarray  # int8[n]
    # float64 [n]: probability that study i is sound (its oracle probability)
    quality: np.ndarray  # float64[n]
    # the conclusion "the effect is real" is #sound selected positive - #sound selected negative >=
    # theta
    theta: int

    @property
    def n(self) -> int:
        """Number of studies."""
        return int(self.reports.size)

    @property
    def T(self) -> int:
        """Steps of the machine: one per study plus the conclusion."""
        return self.n + 1

    def witnesses(self) -> np.ndarray:
        """All witnesses, int8 ``[2^n, n]`` (row i = little-endian bits of i)."""
        return np.array(list(itertools.product([0, 1], repeat=self.n)), np.int8)[:, ::-1]

    def fixture(self, w) -> Fixture:
        """The fixture ``M(x, w)``: unselected studies are read as unsound (probability 0)."""
        w = np.asarray(w)
        if w.shape != (self.n,) or not np.isin(w, [0, 1]).all():
            raise ValueError(f"w={w!r}: a witness selects studies, {self.n} bits (0 or 1)")
        return meta_analysis(self.reports, self.quality * w, self.theta)

    def machines(self, ws) -> object:
        """The machines ``M(x, w)`` of the rows of ``ws [J, n]``, stacked on a leading axis."""
        ms = [self.fixture(w).machine for w in np.asarray(ws)]
        return jax.tree.map(lambda *xs: jnp.stack(xs), *ms)

    def output_prob(self, w) -> float:
        """Exact ``P[M(x, w) = 1]`` by a dynamic program over the signed sum (host, float64)."""
        w = np.asarray(w)
        n = self.n
        dist = np.zeros(2 * n + 1)
        dist[n] = 1.0
        for i in range(n):
            p = float(np.float32(self.quality[i] * w[i]))  # as the machine stores it
            step = 1 if self.reports[i] else -1
            dist = dist * (1.0 - p) + np.roll(dist, step) * p
        sums = np.arange(-n, n + 1)
        return float(dist[sums >= self.theta].sum())

    @functools.cached_property
    def _probs(self) -> np.ndarray:
        return np.array([self.output_prob(w) for w in self.witnesses()], np.float64)

    def output_probs(self) -> np.ndarray:
        """Exact float64 ``P[M(x, w) = 1]`` ``[2^n]`` for every witness, as :meth:`witnesses`."""
        return self._probs.copy()

    @functools.cached_property
    def _lipschitz(self) -> float:
        return float(
            max(
                threshold_lipschitz(np.float32(self.quality * w), self.reports, self.theta)
                for w in self.witnesses()
            )
        )

    def lipschitz(self) -> float:
        """``K* = max_w K(M(x, w))``: one constant valid for every witness (spec DED 8)."""
        return self._lipschitz

    def membership(self) -> str:
        """``"yes"`` (some w has P >= 2/3), ``"no"`` (every w has P <= 1/3) or ``"gap"``."""
        best = float(self.output_probs().max())
        return "yes" if best >= 2 / 3 else ("no" if best <= 1 / 3 else "gap")

    def honest_witness(self) -> np.ndarray:
        """Honest Alice's advice, int8 ``[n]``: the witness with the largest ``P[M(x, w) = 1]``."""
        return self.witnesses()[int(np.argmax(self.output_probs()))]


def meta_analysis_task(reports, quality, theta: int) -> MetaAnalysisTask:
    """A validated task: 1 to ``MAX_STUDIES`` 0/1 reports, qualities in [0, 1], an int ``theta``."""
    x = np.asarray(reports)
    if x.ndim != 1 or not (1 <= x.size <= MAX_STUDIES) or not np.isin(x, [0, 1]).all():
        raise ValueError(f"reports={reports!r}: 1 to {MAX_STUDIES} study reports (bits 0 or 1)")
    q = np.asarray(quality, np.float64)
    if q.shape != x.shape or not np.all((q >= 0) & (q <= 1)):
        raise ValueError(f"quality={quality!r}: one probability in [0, 1] per study")
    meta_analysis(x, q, theta)  # validates theta
    return MetaAnalysisTask(reports=x.astype(np.int8), quality=q, theta=int(theta))


def yes_task() -> MetaAnalysisTask:
    """A YES instance: four strong positive studies; selecting them gives P ~ 0.95 >= 2/3."""
    return meta_analysis_task([1, 1, 1, 1, 0, 0], [0.95, 0.9, 0.9, 0.85, 0.6, 0.5], theta=3)


def no_task() -> MetaAnalysisTask:
    """A NO instance: the positive studies are weak; every selection gives P <= 0.15 <= 1/3."""
    return meta_analysis_task([1, 1, 1, 1, 0, 0], [0.45, 0.4, 0.35, 0.3, 0.9, 0.9], theta=3)


def witness_debate(
    spec: DebateStatic, machines, w_index: jax.Array, alice, bob, vera: Vera, key: jax.Array
) -> tuple[jax.Array, Outcome]:
    """Figure 2: Alice sends the witness, then the stochastic debate runs on ``M(x, w)``.

    Vmappable over keys, witness choices and players.
    """
    machine = jax.tree.map(lambda a: a[w_index], machines)
    return w_index, play(spec, machine, alice, bob, vera, key)
