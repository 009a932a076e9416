"""Exact acceptance probability of the stochastic-oracle debate for small T (spec DED 5.6).

``P[out = 1]`` for given Alice and Bob strategies (honest players and the zoos of
:mod:`dedebate.agents.stochastic_players`) by backward dynamic programming over the prefix tree
(:func:`dedebate.machines.lipschitz.prefix_tree`, T <= 20), in float64 on the host. Each prefix
needs three sums over the law of Alice's claim, computed once per (step, pi, previous bit).
Comparisons are the checker's, strict on real numbers: the float32 parameters' exact values
(:func:`real`), claims formed in float32 as the players form them, and boundaries ``n (p -+ tau)``
near an integer (:data:`TIE_TOL`) recomputed exactly with fractions, as the simulator's integer
checker (:func:`dedebate.core.dyadic.checker_bounds`) decides them.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import special

from dedebate.agents.stochastic_players import (
    A_ALWAYS_ONE,
    A_HONEST,
    A_HONEST_SHIFT,
    A_LIE_LAST,
    A_PER_STEP,
    A_SHIFT,
    B_ABORT_FIRST,
    B_AFTER_ONE,
    B_HONEST,
    B_LEARNED,
    B_NEVER,
    B_RANDOM_STEP,
    HonestAlice,
    HonestBob,
    ZooAlice,
    ZooBob,
)
from dedebate.machines.lipschitz import MAX_TREE_T, prefix_tree
from dedebate.protocols.stochastic import Vera

SD_RANGE = 10.0
TAIL_EXPONENT = math.log(2e22)  # each tail of a count's law left out: < exp(-this) = 5e-23
TIE_TOL = 1e-12
"""Relative distance from an integer within which a checker boundary ``n (p -+ tau)``, formed in
float64 (round-off ~2e-16 relative), is recomputed exactly with fractions."""


def real(x):
    """The real number a float32 parameter is: its exact value, which float64 holds.

    The simulator's checker decides on exactly these values (``real(float32(0.05))`` is
    ``0.0500000007450580596923828125``, not 0.05).
    """
    a = np.asarray(x, np.float32).astype(np.float64)
    return a if a.ndim else float(a)


def ratio_f32(count: np.ndarray, n: int) -> np.ndarray:
    """``count / n`` correctly rounded to float32, as float64: honest Alice's claim.

    ``n`` (0 is treated as 1) is below 2^24, so that float32 division of the two exact float32
    numbers is the correctly rounded ratio.
    """
    n = max(int(n), 1)
    if n >= 2**24:
        raise ValueError(f"n={n}: the exact DP forms count / n in float32, allowed n < 2^24")
    c = np.asarray(np.round(count), np.float32)
    return (c / np.float32(n)).astype(np.float64)


def _alice_params(alice) -> dict:
    if isinstance(alice, HonestAlice):
        return {"kind": A_HONEST, "n": int(alice.n_samples)}
    if isinstance(alice, ZooAlice):
        return {
            "kind": int(alice.kind),
            "n": int(alice.n_samples),
            "delta": np.float32(alice.delta),
            "lies": np.asarray(alice.lies, np.float32),
        }
    raise TypeError(
        f"alice of type {type(alice).__name__}: the exact DP knows HonestAlice and ZooAlice"
    )


def _bob_params(bob) -> dict:
    if isinstance(bob, HonestBob):
        return {"kind": B_HONEST, "n": int(bob.n_samples), "tau": real(bob.tau)}
    if isinstance(bob, ZooBob):
        return {
            "kind": int(bob.kind),
            "n": int(bob.n_samples),
            "tau": real(bob.tau),
            "w": np.asarray(bob.w, np.float64),
            "w_dev": float(bob.w_dev),
            "w_prev": float(bob.w_prev),
            "tau_vera": float(bob.tau_vera),
        }
    raise TypeError(f"bob of type {type(bob).__name__}: the exact DP knows HonestBob and ZooBob")


def count_range(n: int, pi: float) -> tuple[int, int]:
    """The counts ``[lo, hi]`` of ``Binomial(n, pi)`` outside which each tail holds < 5e-23:
    ``SD_RANGE`` standard deviations (+ 2) about the mean, widened where Chernoff's bound
    ``P(X <= k) <= exp(-n KL(k / n, pi))`` (and the upper tail's) needs it. The standard
    deviations alone are not enough where pi is near 0 or 1: at (100, 0.97) they left out
    2.5e-15 below."""
    mu, sd = n * pi, math.sqrt(n * pi * (1 - pi))
    lo = max(0, math.floor(mu - SD_RANGE * sd - 2))
    hi = min(n, math.ceil(mu + SD_RANGE * sd + 2))
    if not 0.0 < pi < 1.0:
        return lo, hi

    def small(k: int) -> bool:  # Chernoff: the tail from count k outwards (k beside the mean)
        a = k / n
        kl = special.rel_entr(a, pi) + special.rel_entr(1.0 - a, 1.0 - pi)
        return bool(n * kl >= TAIL_EXPONENT)

    if lo > 0 and not small(lo - 1):  # the largest k < lo whose lower tail is small, then k + 1
        a, b = -1, lo - 1  # small(a) (-1: no such count), not small(b)
        while b - a > 1:
            m = (a + b) // 2
            a, b = (m, b) if small(m) else (a, m)
        lo = a + 1
    if hi < n and not small(hi + 1):  # the smallest k > hi whose upper tail is small, then k - 1
        a, b = hi + 1, n + 1  # not small(a), small(b) (n + 1: no such count)
        while b - a > 1:
            m = (a + b) // 2
            a, b = (a, m) if small(m) else (m, b)
        hi = b - 1
    return lo, hi


def binomial_law(n: int, pi: float) -> tuple[np.ndarray, np.ndarray]:
    """``(points, probs)``: support ``count / n`` and probabilities of ``count ~ Binomial(n, pi)``.

    Mass outside :func:`count_range` is dropped (< 1e-22) and the rest renormalised to sum to 1.
    """
    if n <= 0:
        return np.zeros(1), np.ones(1)
    if pi <= 0.0 or pi >= 1.0:
        return np.array([0.0 if pi <= 0 else 1.0]), np.ones(1)
    lo, hi = count_range(n, pi)
    c = np.arange(lo, hi + 1, dtype=np.float64)
    logpmf = (
        special.gammaln(n + 1.0)
        - special.gammaln(c + 1.0)
        - special.gammaln(n - c + 1.0)
        + c * math.log(pi)
        + (n - c) * math.log1p(-pi)
    )
    w = np.exp(logpmf)
    return c / n, w / w.sum()


def _cdf(k: np.ndarray, n: int, pi: float | np.ndarray) -> np.ndarray:
    """``P[X <= k]`` for ``X ~ Binomial(n, pi)`` (scipy's ``bdtr``), any integer-valued k."""
    k = np.asarray(k, np.float64)
    inside = special.bdtr(np.clip(k, 0, n), n, pi)
    return np.where(k < 0, 0.0, np.where(k >= n, 1.0, inside))


def checker_prob(p: np.ndarray, n: int, tau: float, pi: float | np.ndarray) -> np.ndarray:
    """``P[|p - X / n| < tau]`` for ``X ~ Binomial(n, pi)``, exactly (strict, real numbers)."""
    return window_prob(*checker_window(p, n, tau), n, pi)


def checker_window(p: np.ndarray, n: int, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """``(x_min, x_max)``: the counts X with ``|p - X / n| < tau`` (none where x_max < x_min)."""
    p = np.asarray(p, np.float64)
    x_min = _floor_exact(n, p, -tau) + 1  # X > n (p - tau) and X < n (p + tau)
    return x_min, -_floor_exact(n, -p, -tau) - 1


def window_prob(x_min, x_max, n: int, pi: float | np.ndarray) -> np.ndarray:
    """``P[x_min <= X <= x_max]`` for ``X ~ Binomial(n, pi)``."""
    prob = _cdf(x_max, n, pi) - _cdf(x_min - 1, n, pi)
    return np.where(x_max >= x_min, prob, 0.0)


def _f32_sum(x: np.ndarray, shift) -> np.ndarray:
    """``x + shift`` formed in float32 as the player forms its claim, returned as float64."""
    return (np.asarray(x, np.float32) + np.float32(shift)).astype(np.float64)


def _floor_exact(n: int, a: np.ndarray, b: float) -> np.ndarray:
    """``floor(n (a + b))`` exactly: float64, but fractions within ``TIE_TOL`` of an integer."""
    a = np.asarray(a, np.float64)
    v = n * (a + b)
    out = np.floor(v)
    near = np.abs(v - np.round(v)) <= TIE_TOL * np.maximum(1.0, np.abs(v))
    for i in zip(*np.nonzero(near)):
        out[i] = math.floor(n * (Fraction(float(a[i])) + Fraction(float(b))))
    return out


def _claim_law(a: dict, t: int, T: int, pi: float) -> tuple[np.ndarray, np.ndarray]:
    kind = a["kind"]
    if kind in (A_HONEST, A_HONEST_SHIFT) or (kind == A_LIE_LAST and t < T - 1):
        c, w = binomial_law(a["n"], pi)
        est = ratio_f32(c * max(a["n"], 1), a["n"])  # the player's float32 estimate count / N_A
        # then her float32 shift
        return (_f32_sum(est, a["delta"]) if kind == A_HONEST_SHIFT else est), w
    if kind == A_ALWAYS_ONE:
        return np.ones(1), np.ones(1)
    if kind in (A_SHIFT, A_LIE_LAST):
        return _f32_sum(np.array([pi]), a["delta"]), np.ones(1)
    if kind == A_PER_STEP:
        return _f32_sum(np.array([pi]), a["lies"][min(t, a["lies"].size - 1)]), np.ones(1)
    raise ValueError(f"alice kind={kind}: unknown")


def claim_law(alice, t: int, T: int, pi: float) -> tuple[np.ndarray, np.ndarray]:
    """``(claims, probs)``: the law of ``alice``'s claim at step t of T, ``P[y_t = 1] = pi``."""
    return _claim_law(_alice_params(alice), t, T, pi)


def _cont(b: dict, t: int, T: int, pi: float, prev: int, p: np.ndarray) -> np.ndarray:
    kind = b["kind"]
    if kind == B_HONEST:
        return checker_prob(p, b["n"], b["tau"], pi)
    if kind == B_NEVER:
        return np.ones_like(p)
    if kind == B_ABORT_FIRST:
        return np.full_like(p, 0.0 if t == 0 else 1.0)
    if kind == B_RANDOM_STEP:
        return np.full_like(p, 1.0 - 1.0 / max(T - t, 1))
    if kind == B_AFTER_ONE:
        return np.full_like(p, 0.0 if (prev == 1 and t > 0) else 1.0)
    if kind == B_LEARNED:
        z = (
            b["w"][min(t, b["w"].size - 1)]
            + b["w_dev"] * np.abs(p - pi) / b["tau_vera"]
            + b["w_prev"] * prev
        )
        return 1.0 - 1.0 / (1.0 + np.exp(-z))
    raise ValueError(f"bob kind={kind}: unknown")


def acceptance_exact(machine: Any, alice, bob, vera: Vera, levels: list | None = None) -> float:
    """Exact ``P[out = 1]`` of the debate on ``machine`` (T <= 20), ``alice`` vs ``bob``."""
    T = int(machine.T)
    if T > MAX_TREE_T:
        raise ValueError(f"T={T}: the exact DP enumerates prefixes, allowed T <= {MAX_TREE_T}")
    levels = prefix_tree(machine) if levels is None else levels
    a, b = _alice_params(alice), _bob_params(bob)
    n_v, tau_v = int(vera.n_samples), real(vera.tau)
    V = None
    for t in range(T - 1, -1, -1):
        pi_t = np.asarray(levels[t], np.float64)
        codes = np.arange(pi_t.size)
        prev = ((codes >> (t - 1)) & 1) if t > 0 else np.zeros_like(codes)
        if V is None:
            v0, v1 = np.zeros(pi_t.size), np.ones(pi_t.size)
        else:
            v0, v1 = V[: pi_t.size], V[pi_t.size :]
        keys = np.stack([pi_t, prev.astype(np.float64)], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        A = np.empty(len(uniq))
        B = np.empty(len(uniq))
        D = np.empty(len(uniq))
        for i, (pi, pv) in enumerate(uniq):
            p, w = _claim_law(a, t, T, float(pi))
            cont = _cont(b, t, T, float(pi), int(pv), p)
            coin = np.clip(p, 0.0, 1.0)
            vera_ok = checker_prob(p, n_v, tau_v, float(pi))
            A[i] = np.sum(w * cont * coin)
            B[i] = np.sum(w * cont * (1.0 - coin))
            D[i] = np.sum(w * (1.0 - cont) * vera_ok)
        inv = inv.reshape(-1)
        V = A[inv] * v1 + B[inv] * v0 + D[inv]
    assert V is not None  # T >= 1
    return float(V[0])


def acceptance_exact_many(machine: Any, alices: list, bob, vera: Vera) -> np.ndarray:
    """:func:`acceptance_exact` for several Alices against one Bob (one prefix tree)."""
    levels = prefix_tree(machine)
    return np.array([acceptance_exact(machine, a, bob, vera, levels) for a in alices])
