"""Reference: the stochastic-oracle debate (spec DED 5.1) in plain numpy, vectorised over trials.

What a competent numpy user would write for honest-vs-honest debates on fixture F2 (bits
0..T-2 with position probabilities ``pi``, final bit ~ Bernoulli(mean of them)): per step, draw
Alice's and Bob's counts with ``rng.binomial`` (numpy's BTPE, float64, exact), compare with the
strict thresholds, draw the coin, mask trials that stopped; Vera's count once for aborted trials.
Used by ``bench/stochastic.py`` as the baseline; not part of the package API.
"""

from __future__ import annotations

import numpy as np


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
        p_true = np.full(trials, pi[t]) if t < T - 1 else ones / (T - 1)
        p = rng.binomial(n_alice, p_true) / n_alice
        est = rng.binomial(n_bob, p_true) / n_bob
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
    pi: np.ndarray, trials: int, rng: np.random.Generator, log2_gate: int = 24
) -> dict:
    """Timing reference only: the one-word path of ``bob_draw="lazy"``
    (:mod:`dedebate.protocols.stochastic_lazy`) in numpy, for honest-vs-honest debates on F2 at
    counts whose certificate holds at level ``log2_gate``. The rare path (a 2^-log2_gate share of
    steps) is NOT implemented: those steps are only counted (``rare_steps``), so this is an upper
    bound on the speed of a numpy port of the lazy algorithm, not an exact sampler."""
    T = pi.size + 1
    cut = np.uint32(1 << (32 - log2_gate))
    span = float((1 << 32) - (1 << (32 - log2_gate)))
    ones = np.zeros(trials, np.int64)
    last = np.zeros(trials, np.int64)
    rare = 0
    for t in range(T):
        p_true = np.full(trials, pi[t]) if t < T - 1 else ones / (T - 1)
        word = rng.integers(0, 1 << 32, size=trials, dtype=np.uint32)
        rare += int(np.count_nonzero(word < cut))
        bit = ((word - cut) < np.floor(p_true * span).astype(np.uint32)).astype(np.int64)
        if t < T - 1:
            ones += bit
        last = bit
    return {"verdict": last == 1, "rare_steps": rare}
