"""Exact best responses in the stochastic-oracle debate (spec DED 5.1), by backward DP over the
prefix tree (docs/doubly-efficient-debate.md, section 9).

Given the prefix, the rest of a debate depends on no earlier claim or sample, so a best response
chooses per prefix (Bob also per Alice's claim there), with ``V1``, ``V0`` the values of the two
next prefixes and ``coin = clamp01(p)``:

* :func:`bob_best_response`, any Alice: ``V(c) = E_p[min(vera(p), coin V1 + (1 - coin) V0)]``,
  the least acceptance any Bob holds her to (abort iff Vera's acceptance is below going on).
* :func:`alice_best_response`, honest Bob: ``V(c) = sup_p [bob(p) (coin V1 + (1 - coin) V0) +
  (1 - bob(p)) vera(p)]`` over every real claim p, the most any Alice reaches. Bob's and Vera's
  acceptances are step functions of p (their windows move at ``p = k / n -+ tau``); between steps
  the objective is monotone in p, so the sup is the largest value at a step or at an open
  interval's ends (limits). Steps of counts outside
  :func:`~dedebate.exact.acceptance.count_range` are left out, as the acceptance DP drops that
  mass (< 1e-22).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dedebate.agents.stochastic_players import HonestBob
from dedebate.exact.acceptance import (
    checker_prob,
    checker_window,
    claim_law,
    count_range,
    real,
    window_prob,
)
from dedebate.machines.lipschitz import MAX_TREE_T, prefix_tree
from dedebate.protocols.stochastic import Vera

CHUNK = 1 << 22  # prefixes x claims evaluated at once (bounds the host memory to ~100 MiB)


def bob_best_response(machine: Any, alice, vera: Vera, levels: list | None = None) -> float:
    """The least ``P[out = 1]`` any Bob holds ``alice`` to on ``machine`` (T <= 20), exactly."""

    def claims(pi: float, t: int, T: int):
        p, w = claim_law(alice, t, T, pi)
        return np.clip(p, 0.0, 1.0), checker_prob(p, n_v, tau_v, pi), w

    def values(cands, v0, v1):
        coin, ok, w = cands
        go = coin * v1[:, None] + (1.0 - coin) * v0[:, None]
        return np.minimum(ok, go) @ w

    n_v, tau_v = int(vera.n_samples), real(vera.tau)
    return _dp(machine, levels, claims, values)


def alice_best_response(
    machine: Any, bob: HonestBob, vera: Vera, levels: list | None = None
) -> float:
    """The most ``P[out = 1]`` any Alice reaches against honest ``bob`` on ``machine`` (T <= 20),
    a sup over real claims (so at least any float32 Alice's acceptance)."""
    if not isinstance(bob, HonestBob):
        raise TypeError(f"bob of type {type(bob).__name__}: Alice's best response needs HonestBob")
    checkers = ((int(bob.n_samples), real(bob.tau)), (int(vera.n_samples), real(vera.tau)))

    def claims(pi: float, t: int, T: int):
        p, keep, ok = _alice_candidates(pi, checkers)
        return np.clip(p, 0.0, 1.0), keep, ok

    def values(cands, v0, v1):
        coin, keep, vera_ok = cands
        go = coin * v1[:, None] + (1.0 - coin) * v0[:, None]
        return np.max(keep * go + (1.0 - keep) * vera_ok, axis=1)

    return _dp(machine, levels, claims, values)


def _alice_candidates(pi: float, checkers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(p, keep, ok)``: the claims where the sup may lie, with Bob's and Vera's acceptances."""
    steps = np.unique(np.concatenate([_steps(n, tau, pi) for n, tau in checkers]))
    ends = np.concatenate([[steps[0] - 1.0], steps, [steps[-1] + 1.0]])
    mids = (ends[:-1] + ends[1:]) / 2  # inside each open interval between steps
    probs: list[np.ndarray] = []
    for n, tau in checkers:
        lo, hi = checker_window(mids, n, tau)
        # at a step, the window's low end is the next interval's (x_min is right-continuous in p),
        # its high end the previous interval's (x_max is left-continuous)
        inside, at_step = window_prob(lo, hi, n, pi), window_prob(lo[1:], hi[:-1], n, pi)
        probs.append(np.concatenate([inside, inside, at_step]))
    # each interval's two ends (valued as their limits from inside), then each step
    keep, ok = probs
    return np.concatenate([ends[:-1], ends[1:], steps]), keep, ok


def _steps(n: int, tau: float, pi: float) -> np.ndarray:
    """The claims ``k / n -+ tau`` where the checker's window moves, for counts within range."""
    lo, hi = count_range(n, pi)
    k = np.arange(lo, hi + 1, dtype=np.float64) / n
    return np.concatenate([k - tau, k + tau])


def _dp(machine: Any, levels: list | None, claims, values) -> float:
    """Backward DP: per level, each prefix's value from its pi's candidates and the next level."""
    T = int(machine.T)
    if T > MAX_TREE_T:
        raise ValueError(f"T={T}: the exact DP enumerates prefixes, allowed T <= {MAX_TREE_T}")
    levels = prefix_tree(machine) if levels is None else levels
    V = None
    for t in range(T - 1, -1, -1):
        pi_t = np.asarray(levels[t], np.float64)
        v0, v1 = (np.zeros(pi_t.size), np.ones(pi_t.size)) if V is None else np.split(V, 2)
        uniq, inv = np.unique(pi_t, return_inverse=True)
        V = np.empty(pi_t.size)
        for i, pi in enumerate(uniq):
            cands = claims(float(pi), t, T)
            idx = np.flatnonzero(inv.reshape(-1) == i)
            for part in np.array_split(idx, max(1, idx.size * cands[0].size // CHUNK)):
                V[part] = values(cands, v0[part], v1[part])
    assert V is not None  # T >= 1
    return float(V[0])
