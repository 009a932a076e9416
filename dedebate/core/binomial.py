"""Exact binomial counts in JAX: the number of ones among N oracle samples, without drawing them.

Honest debaters estimate a probability pi from N independent oracle answers (spec DED 5.1, Lean's
``count``/``estimate``); the count has law Binomial(N, pi), so one draw of it is exact in
distribution and costs O(1) expected work and memory whatever N is (spec DED 5.5).

* :func:`stream_binomial` / :func:`stream_binomial_fast` / :func:`sample_binomial`: one count,
  from a lane-local :class:`UniformStream` (:func:`uniform_stream`; :func:`block_uniforms` and
  :func:`block_bits`, two values per threefry block) or a key; BTRS (Hoermann 1993) for means
  >= 10, inversion below, with a cheap classification of a window of candidates first (the
  algorithm notes below the imports; the pieces in ``binomial_*`` modules).
* :func:`decide_outside`, :func:`decision_gate`, :func:`outside_probability`: the event "count
  outside [k_lo, k_hi]" drawn directly (one Bernoulli), exact in distribution.
* :func:`log_pmf`, :func:`binom_lower_tail`, :func:`binom_lower_tail_sample`: the pmf in
  Loader's float32-stable form and its lower tail.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from dedebate.core.binomial_btrs import (  # noqa: F401  (_Btrs: read by tests)
    FAST_MEAN,
    INVALID,
    SMALL_MEAN,
    _Btrs,
    _flags,
    _safe_btrs,
)
from dedebate.core.binomial_decision import (
    GATE_LOG2,
    decide_outside,
    decision_gate,
    outside_probability,
)
from dedebate.core.binomial_fast import (  # noqa: F401  (the private names: read by tests)
    _UNDECIDED,
    CAPACITY_SDS,
    FAST_MID,
    OPEN_RATES,
    _draw_fast,
    _window_first,
    _window_first_lanes,
)
from dedebate.core.binomial_pmf import (
    binom_lower_tail,
    binom_lower_tail_sample,
    log_pmf,
    stirlerr,
)
from dedebate.core.binomial_stream import (
    BTRS_ACCEPTANCE,
    DEFAULT_WINDOW,
    UniformStream,
    block_bits,
    block_uniforms,
    stream_length,
    uniform_stream,
)
from dedebate.core.binomial_window import COMPACT, FIRST, _window, _window_status

__all__ = [
    "BTRS_ACCEPTANCE",
    "CAPACITY_SDS",
    "COMPACT",
    "DEFAULT_WINDOW",
    "FAST_MEAN",
    "FAST_MID",
    "FIRST",
    "GATE_LOG2",
    "INVALID",
    "OPEN_RATES",
    "SMALL_MEAN",
    "UniformStream",
    "binom_lower_tail",
    "binom_lower_tail_sample",
    "block_bits",
    "block_uniforms",
    "decide_outside",
    "decision_gate",
    "log_pmf",
    "outside_probability",
    "sample_binomial",
    "stirlerr",
    "stream_binomial",
    "stream_binomial_fast",
    "stream_length",
    "uniform_stream",
]

# -------------------------------------------------------------------------------------------------
# Algorithm notes
# -------------------------------------------------------------------------------------------------
# BTRS (Hoermann 1993, "The generation of binomial random variates", J. Stat. Comput. Simul. 46):
# transformed rejection with a squeeze, valid for ``N p >= 10`` with ``p <= 1/2`` (the other half
# by symmetry); two uniforms per candidate, ~88% of candidates accepted. Small means ``N p < 10``
# use inversion by sequential search; ``p in {0, 1}`` and ``N = 0`` are exact by ``where``, and
# ``N < 0`` or ``p`` outside [0, 1] (NaN included) draw INVALID at once (no loop can spin). The
# acceptance test compares ``log(v alpha / (a / us^2 + b))`` with ``log f(k) - log f(mode)`` (f the
# Binomial pmf), evaluated in Loader's saddle-point form (``stirlerr`` and the deviance ``bd0``,
# Loader 2000, as in R's ``dbinom``) written as offsets from the mode, so float32 keeps ~1e-5
# absolute accuracy up to N ~ 1e7 and ~4e-3 at N ~ 1e9 (where the mean N p itself is only
# float32-accurate). The textbook form (``jax.random.binomial``) subtracts terms of size N log N
# and loses this accuracy in float32.
#
# Speed without losing exactness. A vmapped rejection loop runs until its slowest lane accepts,
# and on CPU every transcendental costs. So each draw first classifies ``window`` candidates at
# once, read from a lane-local UniformStream (bulk uniforms, cheap), with cheap arithmetic:
# *accept* by the squeeze, or by the exact log-ratio evaluated with polynomials only (valid near
# the mean of a lane with mean >= FAST_MEAN: every relative offset below 0.25); *reject* when the
# candidate falls outside [0, N], or when ``log(...)`` exceeds a rigorous upper bound of the
# log-ratio (from ``log x <= x - 1`` applied to the pmf's successive ratios), or the polynomial
# log-ratio; otherwise *undecided*. The draw's result is the first accepted candidate. When an
# undecided candidate precedes it (or no candidate in the window is accepted), the lane finishes
# in an exact sequential loop (``while_loop``, which under ``vmap`` runs only while some lane
# needs it) that evaluates the same candidates in order with the general log-ratio, then fresh
# ones from ``fold_in(key, ...)``. ``stream_binomial_fast`` skips the sequential loop and flags
# the (rare) lanes it leaves open, for callers that can replay a whole trial exactly
# (``dedebate.protocols.stochastic_batch.run_trials``): the loop's mere presence costs XLA on CPU
# a large share of the draw's time. It classifies a lane's candidates only up to the first one
# not rejected (that one decides: accepted, the draw; undecided, the lane is left open), keeping
# one int32 of state per lane. Its batch rule classifies every lane's first candidate, then
# gathers the open lanes (about an eighth) into fixed-size buffers for the next candidates
# (FAST_MID, binomial_fast), so the batch pays for later candidates only on the lanes that need
# them.
#
# Uniform consumption. A draw consumes the uniforms up to its first *accepted-status* candidate
# (a stopping time of the i.i.d. sequence, so all later uniforms stay fresh by the strong Markov
# property), or the whole window if none; small-mean and slow lanes also use a fresh key
# ``fold_in(fold_in(stream.key, ptr), j)``. Everything is lane-local: batched and per-lane calls
# return identical results.


def stream_binomial(stream: UniformStream, n, p) -> tuple[jax.Array, UniformStream]:
    """``(count, stream)``: an exact int32 ``Binomial(n, p)`` count from a lane-local stream.

    A classification of ``stream.window`` candidates, then an exact sequential ``while_loop`` (one
    candidate, or one inversion step, per iteration) for the lanes it leaves open (the algorithm
    notes at the top of this module). The count is INVALID where n < 0 or p is not in [0, 1] (NaN
    included); the stream is advanced past what the draw used.
    """
    k, stream, _ = _draw(stream, n, p, resolve=True)
    return k, stream


def stream_binomial_fast(stream: UniformStream, n, p) -> tuple[jax.Array, UniformStream, jax.Array]:
    """``(count, stream, unresolved)``: the window classification of :func:`stream_binomial` alone.

    Use when whole trials can be replayed: where ``unresolved`` is true the result is not the exact
    draw and the caller must redo the computation with :func:`stream_binomial` (rare for means >=
    FAST_MEAN); elsewhere it equals :func:`stream_binomial`'s.
    """
    return _draw(stream, n, p, resolve=False)


def _draw(stream: UniformStream, n, p, resolve: bool):
    W = stream.window
    L = stream.length
    n, nf, pp, flip, trivial, edge, small, big, fast = _flags(n, p)
    ptr0 = stream.ptr
    if not resolve:
        return _draw_fast(stream, n, nf, pp, flip, trivial, edge, big, fast)

    # ---- fast classification of the window (large-mean lanes) ------------------------------
    status, counts = _window_status(stream.u, nf, pp, big, ptr0, L, W)
    jw = jnp.arange(W, dtype=jnp.int32)
    acc_w, und_w = status == 1, status == 0
    found = jnp.any(acc_w)
    j1 = jnp.min(jnp.where(acc_w, jw, W))  # first accepted-status candidate
    before = jw < j1
    pending = jnp.any(und_w & before)  # an undecided candidate precedes it
    j_und = jnp.min(jnp.where(und_w & before, jw, W))
    k_acc = jnp.sum(jnp.where(jw == j1, counts, 0))
    resolved = fast & found & ~pending

    # ---- exact sequential loop for everything else ------------------------------------------
    need = ~trivial & ~resolved
    start = jnp.where(fast & pending, j_und, jnp.where(fast, W, 0))
    key = stream.key
    win = _window(stream.u, ptr0, 2 * W, L)
    r = pp / (1.0 - pp)
    # loop invariants, computed once: the lane's key, the BTRS constants and the mode's terms of
    # the log ratio (the body then holds only what depends on the candidate)
    lane_key = jax.random.fold_in(key, ptr0)
    b = _safe_btrs(nf, pp, big)
    b.mode_constants()
    f0 = jnp.where(small, jnp.exp(nf * jnp.log1p(-pp)), 1.0)

    def body(c):
        # k and done travel packed in one int32 (kd = k when done, -1 - k while open), so the
        # acceptance test has one consumer and XLA does not duplicate it into two fusions
        j, kd, f, F, u0 = c
        k = -1 - kd
        from_window = (j < W) & (ptr0 + 2 * j + 1 < L) & ~small
        jj = jnp.clip(j, 0, W - 1)
        fresh = jax.random.uniform(jax.random.fold_in(lane_key, j), (3,))
        u = jnp.where(from_window, win[2 * jj], fresh[0])
        v = jnp.where(from_window, win[2 * jj + 1], fresh[1])
        k_off, inr, sq, lhs = b.candidate(u, v)
        ok = inr & (sq | (lhs <= b.log_ratio(k_off)))
        # a fast lane's first accepted-status candidate ends it (its consumption is fixed to j1);
        # with none in the window, every candidate takes the exact test
        ok = ok | (fast & found & (j == j1))
        # inversion (small means): step from k to k + 1 while u0 > F(k); u0 is the first
        # iteration's third uniform. Where the float32 sum of the terms ends below u0 (mass
        # about 1e-6, which would land far in the tail), start again with this iteration's
        # third uniform: the law is the terms' own, renormalised.
        u0 = jnp.where(j == 0, fresh[2], u0)
        k1 = k + 1
        k1f = k1.astype(jnp.float32)
        f1 = f * (nf - k1f + 1.0) / k1f * r
        go_on = (u0 > F) & (k < n) & (f > 0.0)
        again = small & (u0 > F) & ~go_on
        k_new = jnp.where(small, jnp.where(go_on, k1, k), jnp.where(ok, b.count(k_off), k))
        k_new = jnp.where(again, 0, k_new)
        f_new = jnp.where(again, f0, jnp.where(small & go_on, f1, f))
        F_new = jnp.where(again, f0, jnp.where(small & go_on, F + f1, F))
        u0 = jnp.where(again, fresh[2], u0)
        done_new = jnp.where(small, ~go_on & ~again, ok)
        return j + 1, jnp.where(done_new, k_new, -1 - k_new), f_new, F_new, u0

    j_end, k_slow, _, _, _ = jax.lax.while_loop(
        lambda c: c[1] < 0,
        body,
        (start, jnp.where(need, jnp.int32(-1), 0), f0, f0, jnp.float32(0.0)),
    )
    k = jnp.where(resolved, k_acc, k_slow)
    k = jnp.where(flip, n - k, k)
    k = jnp.where(trivial, edge, k)
    # Consumption: up to the first accepted-status candidate (fast lanes) or the whole window;
    # for other BTRS lanes, the window candidates their sequential loop read.
    used = jnp.where(fast, jnp.where(found, j1 + 1, W), jnp.where(big, jnp.minimum(j_end, W), 0))
    used = jnp.minimum(used, jnp.clip((L - ptr0) // 2, 0, W))
    ptr = ptr0 + 2 * used + need.astype(jnp.int32)  # +1 keeps slow-path keys unique
    return k.astype(jnp.int32), dataclasses.replace(stream, ptr=ptr), need


def sample_binomial(key: jax.Array, n, p, window: int = DEFAULT_WINDOW) -> jax.Array:
    """An exact int32 ``Binomial(n, p)`` draw from a key; INVALID where n < 0 or p not in [0, 1]."""
    k, _ = stream_binomial(uniform_stream(key, 2 * window, window), n, p)
    return k
