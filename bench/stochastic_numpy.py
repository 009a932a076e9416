"""References: the stochastic-oracle debate (spec DED 5.1) in plain numpy, vectorised over trials.

:func:`play_f2_numpy` is what a competent numpy user would write for honest-vs-honest debates on
fixture F2 (bits 0..T-2 with position probabilities ``pi``, final bit ~ Bernoulli(mean of them)):
per step, draw Alice's and Bob's counts with ``rng.binomial`` (numpy's BTPE, float64, exact),
compare with the strict thresholds, draw the coin, mask trials that stopped; Vera's count once for
aborted trials. :func:`one_word_path_f2_numpy` is a numpy port of the lazy mode's algorithm (one
word a step, the rest of the step's law on a rare share of steps), exact too. Used by
``bench/stochastic.py`` as the baselines; not part of the package API.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
from scipy.stats import binom


def play_f2_numpy(
    pi: np.ndarray,
    n_alice: int,
    n_bob: int,
    n_vera: int,
    tau_bob: float,
    tau_vera: float,
    trials: int,
    rng: np.random.Generator,
) -> dict:
    """``trials`` honest-vs-honest debates on F2 with position probabilities ``pi`` (length
    T-1). Returns the verdicts and abort flags (numpy arrays)."""
    T = pi.size + 1
    ones = np.zeros(trials, np.int64)
    stopped = np.zeros(trials, bool)
    last = np.zeros(trials, np.int64)
    p_abort = np.zeros(trials)
    pi_abort = np.zeros(trials)
    for t in range(T):
        # the same for every trial before the last step: a scalar p (same draws as an array of it)
        p_true = pi[t] if t < T - 1 else ones / (T - 1)
        size = trials if t < T - 1 else None
        p = rng.binomial(n_alice, p_true, size=size) / n_alice
        est = rng.binomial(n_bob, p_true, size=size) / n_bob
        cont = np.abs(p - est) < tau_bob
        bit = (rng.random(trials) < p).astype(np.int64)
        active = ~stopped
        go = active & cont
        abort = active & ~cont
        if t < T - 1:
            ones += np.where(go, bit, 0)
        last = np.where(go, bit, last)
        p_abort = np.where(abort, p, p_abort)
        pi_abort = np.where(abort, p_true, pi_abort)
        stopped |= abort
    verdict = last == 1
    if stopped.any():
        idx = np.nonzero(stopped)[0]
        est_v = rng.binomial(n_vera, pi_abort[idx]) / n_vera
        verdict[idx] = np.abs(p_abort[idx] - est_v) < tau_vera
    return {"verdict": verdict, "aborted": stopped}


def one_word_path_f2_numpy(
    pi: np.ndarray,
    n_alice: int,
    n_bob: int,
    n_vera: int,
    tau_bob: float,
    tau_vera: float,
    trials: int,
    rng: np.random.Generator,
    log2_gate: int = 24,
) -> dict:
    """The lazy mode's algorithm (:mod:`dedebate.protocols.stochastic_lazy`) in numpy, for
    ``trials`` honest-vs-honest debates on F2 (arguments as :func:`play_f2_numpy`); exact in
    distribution, the law of :func:`play_f2_numpy`.

    A step draws one 32-bit word. At or above ``cut = 2^(32 - log2_gate)`` Bob continues and the
    coin is ``word - cut < floor(pi (2^32 - cut))`` (one comparison with a threshold computed once
    per position); below it (a ``2^-log2_gate`` share of steps, counted in ``rare_steps``)
    :func:`_rare_step` draws the rest of the step's law. Raises ``ValueError`` where that rest is
    not a distribution (counts whose aborts are not rare enough for ``log2_gate``)."""
    T = pi.size + 1
    cut = 1 << (32 - log2_gate)
    span = float((1 << 32) - cut)
    # coin = 1 iff word <= top on the one-word path (top = cut - 1 + threshold, below 2^32)
    top = (np.floor(pi * span) + (cut - 1)).astype(np.uint32)
    ones = np.zeros(trials, np.int64)
    bit = np.zeros(trials, bool)
    stops: dict[int, tuple[float, float]] = {}  # trial -> (Alice's claim, pi) at its abort
    rare = 0
    for t in range(T):
        word = _words(rng, trials)
        if t < T - 1:
            bit = word <= top[t]
        else:
            p_last = ones / (T - 1)
            bit = word <= (np.floor(p_last * span) + (cut - 1)).astype(np.uint32)
        if word.min() < cut:  # rare steps: the one-word coin above is replaced
            for i in np.flatnonzero(word < cut):
                rare += 1
                if int(i) in stops:
                    continue
                p_i = float(pi[t] if t < T - 1 else p_last[i])
                y, claim = _rare_step(p_i, n_alice, n_bob, tau_bob, log2_gate, rng)
                bit[i] = y
                if claim is not None:
                    stops[int(i)] = (claim, p_i)
        if t < T - 1:
            ones += bit
    verdict = bit.copy()
    aborted = np.zeros(trials, bool)
    if stops:
        idx = np.fromiter(stops, np.int64)
        claim, p_ab = np.array([stops[i] for i in idx.tolist()]).T
        est_v = rng.binomial(n_vera, p_ab) / n_vera
        verdict[idx] = np.abs(claim - est_v) < tau_vera
        aborted[idx] = True
    return {"verdict": verdict, "aborted": aborted, "rare_steps": rare}


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uint32 words: both halves of each raw 64-bit output (PCG64: ``rng.integers``'s)."""
    # the values rng.integers(0, 2**32, n, np.uint32) gives from a generator at an even count of
    # words, without its per-word overhead (about 4x faster at 4096 words)
    if isinstance(rng.bit_generator, np.random.MT19937):  # 32-bit outputs
        return rng.integers(0, 1 << 32, size=n, dtype=np.uint32)
    return rng.bit_generator.random_raw((n + 1) // 2).view(np.uint32)[:n]


def _rare_step(pi, n_alice, n_bob, tau_bob, log2_gate, rng) -> tuple[int, float | None]:
    """A step whose word fell below the cut: ``(coin, None | Alice's claim if Bob aborts)``."""
    # The whole step must have the law of play_f2_numpy's. The word path gives (coin y, Bob
    # continues) with weight (1 - e) C(y), e = 2^-G; this path, weight e, gives the rest: the coin
    # with P(y) - (1 - e) C(y), then an abort with all of P(y, abort) and Alice's count X with
    # P(X | y, abort).
    e = Fraction(1, 1 << log2_gate)
    span = (1 << 32) - (1 << (32 - log2_gate))
    c1 = Fraction(int(np.floor(pi * float(span))), span)  # C(1), the word path's P(y = 1)
    r1 = float((Fraction(pi) - (1 - e) * c1) / e)  # this path's P(y = 1), exact to rounding
    y = int(rng.random() < r1)
    p_y, r_y = (pi, r1) if y else (1.0 - pi, 1.0 - r1)
    mass = _abort_mass(pi, n_alice, n_bob, tau_bob)[y]  # P(y, abort) = p_y P(abort | y)
    p_abort = mass / (float(e) * r_y) if mass > 0 else 0.0
    if not (0.0 <= r1 <= 1.0 and p_abort <= 1.0):
        raise ValueError(
            f"one-word path at level {log2_gate}: aborts too likely at pi={pi} (P(abort | y={y}) ="
            f" {mass / p_y:.3g} for counts {n_alice}, {n_bob}); use a lower level"
        )
    if not rng.random() < p_abort:
        return y, None
    claim, w = _abort_weights(pi, n_alice, n_bob, tau_bob)
    w = w * (claim if y else 1.0 - claim)  # P(X, coin = y, abort)
    k = int(np.searchsorted(np.cumsum(w), rng.random() * w.sum(), side="right"))
    return y, float(claim[min(k, claim.size - 1)])


def _abort_weights(pi, n_alice, n_bob, tau_bob) -> tuple[np.ndarray, np.ndarray]:
    """Alice's claims X / N_A (X of non-zero probability) and ``P(X, Bob aborts)`` (float64)."""
    x = np.arange(n_alice + 1)
    pmf = binom.pmf(x, n_alice, pi)
    p = x[pmf > 0] / n_alice  # Alice's claim; Bob continues iff |p - Z / N_B| < tau
    pmf = pmf[pmf > 0]

    def cont(z):
        return np.abs(p - z / n_bob) < tau_bob  # Bob's check, as in play_f2_numpy

    lo = np.ceil((p - tau_bob) * n_bob)  # the first z that continues, to within one
    lo += ~cont(lo) & 1
    lo -= cont(lo - 1) & 1
    hi = np.floor((p + tau_bob) * n_bob)  # the last, to within one
    hi -= ~cont(hi) & 1
    hi += cont(hi + 1) & 1
    lo, hi = np.maximum(lo, 0), np.minimum(hi, n_bob)
    tails = np.where(lo > 0, binom.cdf(lo - 1, n_bob, pi), 0.0) + binom.sf(hi, n_bob, pi)
    return p, pmf * np.where(lo <= hi, tails, 1.0)  # P(X) P(Bob aborts | X)


@functools.lru_cache(maxsize=512)
def _abort_mass(pi, n_alice, n_bob, tau_bob) -> tuple[float, float]:
    """``P(coin = y, Bob aborts)`` for y = 0, 1 at one step (cached: a position's is reused)."""
    claim, w = _abort_weights(pi, n_alice, n_bob, tau_bob)
    return float(np.sum(w * (1.0 - claim))), float(np.sum(w * claim))
