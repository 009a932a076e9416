"""Fixture library: machines with a proven Lipschitz constant K and a known P_M(1) (spec DED 9).

All K are in Lean's sense (spec DED 3.3): the oracle o' may move the conditional probability of
every step at every prefix by at most eps, and P[final = 1] must move by at most K * eps. The
proofs use the hybrid identity of spec DED 3.4: ``|dP_M| <= eps * sum_t sup_prefix |Delta_t|``.
Every fixture's machine is an efficient :class:`~dedebate.machines.program.Machine` (state =
transcript + a running sum, O(1) ``prob``), a ``flax.struct`` pytree whose numbers vmap, with an
exact jittable ``output_prob_dp()`` and an equivalent ``step_program()``. :class:`Fixture`
bundles the machine with its name, proven K, closed-form P_M(1) and the argument for K
(:mod:`~dedebate.machines.fixture_base`); F1, F2 (``fixtures_mean``), F3 (``fixtures_cascade``)
and the threshold sums (``fixtures_threshold``) each have a module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dedebate.machines.fixture_base import Fixture, SumState, _check_T
from dedebate.machines.fixtures_cascade import CascadeMachine, f3_cascade, f3_target
from dedebate.machines.fixtures_mean import (
    MeanFinalMachine,
    f1,
    f1_target,
    f2,
    f2_target,
    spread_probs,
)
from dedebate.machines.fixtures_threshold import (
    ThresholdSumMachine,
    and_fixture,
    majority,
    meta_analysis,
    or_fixture,
    threshold_lipschitz,
)

__all__ = [
    "CASCADE_NOISE",
    "CascadeMachine",
    "Fixture",
    "MeanFinalMachine",
    "SumState",
    "ThresholdSumMachine",
    "and_fixture",
    "f1",
    "f1_target",
    "f2",
    "f2_target",
    "f3_cascade",
    "f3_target",
    "fixture_for_k",
    "majority",
    "meta_analysis",
    "or_fixture",
    "spread_probs",
    "standard_fixtures",
    "threshold_lipschitz",
]


def standard_fixtures(T: int = 16, high: bool = True) -> list[Fixture]:
    """One of each fixture with T steps: F1-F3 with P_M(1) >= 2/3 if ``high`` else <= 1/3."""
    T = _check_T(T, 4)
    n = T - 1
    p = 0.75 if high else 0.25
    rng = np.random.default_rng(12345)
    spread = np.round(rng.uniform(0.3, 0.9, n), 3)
    maj_n = n if n % 2 else n - 1
    reports = (np.arange(n) % 3 != 2).astype(np.int8)
    fx = [
        f1_target(T, p, pi=0.5, spread=0.3),
        f2_target(T, p, spread=0.2),
        f3_target(T, p),
        majority(np.full(maj_n, 0.6)),
        and_fixture(np.round(rng.uniform(0.85, 0.99, n), 3)),
        or_fixture(np.round(rng.uniform(0.01, 0.15, n), 3)),
        meta_analysis(reports, spread, theta=max(1, n // 4)),
    ]
    return fx


CASCADE_NOISE = 0.25  # F3 with r = 1/4: exact hybrid sum (1 - (3/4)^T) * 4 < 4


def fixture_for_k(K: int, T: int, p1: float) -> tuple[str, Any, float]:
    """``(name, machine, K)``: the stochastic debate's instance of Lipschitz constant K.

    K is 1 (F1), 2 (F2) or 4 (the F3 cascade with noise r = 1/4, whose exact hybrid sum
    ``(1 - (3/4)^T) / (1/4)`` stays below 4).
    """
    if K == 1:
        return "F1", f1_target(T, p1, pi=0.5, spread=0.3).machine, 1.0
    if K == 2:
        return "F2", f2_target(T, p1, spread=0.2).machine, 2.0
    fx = f3_cascade(T, p1, p1, CASCADE_NOISE)
    tight = fx.machine.tight_lipschitz()
    if tight > 4.0:
        raise AssertionError(f"cascade hybrid sum {tight} exceeds the declared K = 4")
    return "F3(r=1/4)", fx.machine, 4.0
