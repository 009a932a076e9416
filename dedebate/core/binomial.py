"""Exact binomial counts in JAX: the number of ones among N oracle samples, without drawing them.

Honest debaters estimate a probability pi from N independent oracle answers (spec DED 5.1, Lean's
``count``/``estimate``); the count has law Binomial(N, pi), so one draw of it is exact in
distribution and costs O(1) expected work and memory whatever N is (spec DED 5.5).

* :func:`stream_binomial` / :func:`stream_binomial_fast` / :func:`sample_binomial`: one count,
  from a lane-local :class:`UniformStream` (:func:`uniform_stream`; :func:`block_uniforms` and
  :func:`block_bits`, two values per threefry block) or a key; BTRS (Hoermann 1993) for means
  >= 10, inversion below, with a cheap classification of a window of candidates first (the
  algorithm notes below the imports).
* :func:`decide_outside`, :func:`decision_gate`, :func:`outside_probability`: the event "count
  outside [k_lo, k_hi]" drawn directly (one Bernoulli), exact in distribution.
* :func:`log_pmf`, :func:`binom_lower_tail`, :func:`binom_lower_tail_sample`: the pmf in
  Loader's float32-stable form and its lower tail.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from flax import struct

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
# (FAST_MID below), so the batch pays for later candidates only on the lanes that need them.
#
# Uniform consumption. A draw consumes the uniforms up to its first *accepted-status* candidate
# (a stopping time of the i.i.d. sequence, so all later uniforms stay fresh by the strong Markov
# property), or the whole window if none; small-mean and slow lanes also use a fresh key
# ``fold_in(fold_in(stream.key, ptr), j)``. Everything is lane-local: batched and per-lane calls
# return identical results.
#
# Bit generator. The bulk uniforms come from threefry2x32, the debate's own key type, hashed by
# ``jax.extend.random.threefry_2x32`` on counters 0..L-1: each 64-bit block gives two uniforms.
# ``jax.random.uniform`` under JAX's partitionable threefry hashes one block per uniform and XORs
# its two words, twice the hashing; on CPU the hashing is a large share of a draw. XLA's RBG
# (key impl "rbg" / "unsafe_rbg") cannot replace threefry: under vmap it draws the whole batch
# from the batch's first key, so a lane's uniforms would depend on its batch (vmap would differ
# from a loop, and run_trials' replays would not see the lane's uniforms). Keys of another
# implementation fall back to ``jax.random.uniform``.
#
# Decision-only draws (decide_outside): when a caller only needs the event "count outside
# [k_lo, k_hi]", one Bernoulli draw with that event's probability is exact in distribution and
# cheaper; decision_gate certifies (Hoeffding) when the probability is below 2^-GATE_LOG2 so that
# 32 random bits decide all but that fraction of draws, and binom_lower_tail (pmf summed in
# Loader's form) serves the rest.

# stirlerr(k) = log k! - [(k + 1/2) log k - k + log sqrt(2 pi)], k = 0..15 (float64 values; k = 0
# is unused).
_STIRLERR = np.array([
    0.0, 0.08106146679532733, 0.041340695955409235, 0.02767792568499816, 0.020790672103765395,
    0.016644691189821703, 0.013876128823070655, 0.011896709945891981, 0.010411265261975,
    0.009255462182710783, 0.008330563433360805, 0.00757367548795207, 0.006942840107208692,
    0.00640899418800478, 0.005951370112766252, 0.005554733551965452], np.float32)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
SMALL_MEAN = 10.0  # BTRS needs N min(p, 1-p) >= 10 (Hoermann 1993)
FAST_MEAN = 600.0  # lanes with N min(p, 1-p) >= this use the polynomial fast path
DEFAULT_WINDOW = 8  # candidates classified per draw
BTRS_ACCEPTANCE = 0.88  # acceptance rate of a BTRS candidate for large means (measured)
INVALID = -1  # the count drawn for n < 0 or p outside [0, 1] (NaN included): no draw, no loop
_INVERSION_SLOT = 0x7FFFFFFF
_EXTRA_SLOT = 0x7FFFFFFE
_POLY_RANGE = 0.25  # polynomial forms are used for relative offsets below this
_UB_MARGIN = 1e-5  # slack on the rigorous upper bound against float rounding


# -------------------------------------------------------------------------------------------------
# Pieces of the log pmf ratio
# -------------------------------------------------------------------------------------------------
def _stirlerr_series(x: jax.Array) -> jax.Array:
    """stirlerr(x) for x >= 15 (asymptotic series, error < 1e-11)."""
    return _stirlerr_series_inv(1.0 / x)


def _stirlerr_series_inv(r: jax.Array) -> jax.Array:
    """:func:`_stirlerr_series` of ``x = 1 / r``."""
    r2 = r * r
    return r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 / 1260.0))


def stirlerr(x: jax.Array) -> jax.Array:
    """Stirling's error ``log x! - [(x + 1/2) log x - x + log sqrt(2 pi)]`` for integers x >= 1.

    Float32, the shape of ``x``: a table below 15, the asymptotic series above.
    """
    table = jnp.asarray(_STIRLERR)[jnp.clip(x, 0, 15).astype(jnp.int32)]
    return jnp.where(x < 15.0, table, _stirlerr_series(jnp.maximum(x, 15.0)))


def _h_poly(d: jax.Array) -> jax.Array:
    """``h(d) = (1 + d) log(1 + d) - d`` for |d| < 0.25, by its Taylor series."""
    # h(d) = sum_{j>=2} (-d)^j / (j (j-1)), to d^13: relative error < 1e-8.
    r = 1 / (13 * 12)
    for j in range(12, 1, -1):
        r = 1 / (j * (j - 1)) - d * r
    return d * d * r


def _h(d: jax.Array) -> jax.Array:
    """``h(d) = (1 + d) log(1 + d) - d`` for d >= -1 (so ``bd0(x, M) = M h((x - M) / M)``)."""
    dd = jnp.maximum(d, -1.0)
    direct = (1.0 + dd) * jnp.log1p(jnp.maximum(dd, -1.0 + 1e-7)) - dd
    return jnp.where(jnp.abs(d) < 0.1, _h_poly(d), direct)


def _log1p_poly(x: jax.Array) -> jax.Array:
    """``log(1 + x)`` for |x| < 0.25 (Taylor to x^14, error < 1e-9)."""
    r = 1 / 14
    for j in range(13, 0, -1):
        r = 1 / j - x * r
    return x * r


def _flags(n, p):
    """Symmetry p -> min(p, 1-p), the regime flags and the count of a trivial lane."""
    # edge: 0 or n, and INVALID where n < 0 or p is not in [0, 1], NaN included.
    n = jnp.asarray(n, jnp.int32)
    p = jnp.asarray(p, jnp.float32)
    flip = p > 0.5
    pp = jnp.where(flip, 1.0 - p, p)
    nf = n.astype(jnp.float32)
    invalid = (n < 0) | ~((p >= 0.0) & (p <= 1.0))
    trivial = invalid | (n == 0) | (pp == 0.0)
    edge = jnp.where(invalid, INVALID, jnp.where(flip, n, 0))
    mean = nf * pp
    small = ~trivial & (mean < SMALL_MEAN)
    big = ~trivial & ~small
    fast = ~trivial & (mean >= FAST_MEAN)
    return n, nf, pp, flip, trivial, edge, small, big, fast


class _Btrs:
    """Per-lane BTRS constants for ``p <= 1/2`` and ``n p >= 10`` (build with safe inputs for
    other lanes); see the module docstring."""

    def __init__(self, n: jax.Array, p: jax.Array, mode: jax.Array | None = None):
        self.n, self.p = n, p
        self.q = 1.0 - p
        self.M = n * p  # mean
        self.Q = n * self.q
        spq = jnp.sqrt(self.M * self.q)
        self.b = 1.15 + 2.53 * spq
        self.a = -0.0873 + 0.0248 * self.b + 0.01 * p
        self.quarter_inv_a = 0.25 / self.a
        self.vr = 0.92 - 4.2 / self.b
        self.alpha = (2.83 + 5.1 / self.b) * spq
        # the mode floor((n + 1) p), one rounding (n + 1 is exact): written n p + p, XLA may
        # contract it into a fused multiply-add in one program and not in another. ``mode``:
        # the same value computed once elsewhere, which a count and its candidate share.
        self.m = jnp.floor((n + 1.0) * p) if mode is None else mode
        self.dm = self.m - self.M  # offset of the mode from the mean, in (p - 1, p]
        self.c_off = 0.5 - self.dm  # BTRS's c = n p + 1/2, relative to the mode

    # -- the candidate --------------------------------------------------------------------------
    def candidate(self, u: jax.Array, v: jax.Array):
        """BTRS candidate from uniforms (u, v): (k_off = k - mode, in range, squeeze, lhs)."""
        uu = u - 0.5
        us = 0.5 - jnp.abs(uu)
        t = 2.0 * self.a / us  # so a / us^2 = t^2 / (4 a): one divide per candidate, not two
        k_off = jnp.floor((t + self.b) * uu + self.c_off)
        inrange = (k_off >= -self.m) & (k_off <= self.n - self.m)
        k_off = jnp.where(inrange, k_off, 0.0)
        squeeze = (us >= 0.07) & (v <= self.vr)
        lhs = jnp.log(v * self.alpha / (t * t * self.quarter_inv_a + self.b))
        return k_off, inrange, squeeze, lhs

    def count(self, k_off: jax.Array) -> jax.Array:
        return self.m.astype(jnp.int32) + k_off.astype(jnp.int32)

    # -- exact log ratio, general form (slow path) ---------------------------------------------
    def log_ratio(self, k_off: jax.Array) -> jax.Array:
        """``log f(m + k_off) - log f(m)`` in Loader's form, any k in [0, n]. The ends use
        ``f(0) / f(1) = q / (n p)`` and ``f(n) / f(n-1) = p / (n q)``."""
        n, m = self.n, self.m
        if not hasattr(self, "s_mode"):
            self.mode_constants()
        ko = jnp.clip(k_off, 1.0 - m, n - 1.0 - m)  # k clamped to [1, n-1]
        k = m + ko
        dk = ko + self.dm  # k - mean
        inner = (self.s_mode - stirlerr(k) - stirlerr(n - k)
                 - self.M * (_h(dk / self.M) - self.h_mode_M)
                 - self.Q * (_h(-dk / self.Q) - self.h_mode_Q)
                 - 0.5 * (jnp.log1p(ko / m) + jnp.log1p(-ko / (n - m))))
        edge = jnp.where(k_off < ko, self.log_edge_lo,
                         jnp.where(k_off > ko, self.log_edge_hi, 0.0))
        return inner + edge

    def mode_constants(self):
        """The terms of :meth:`log_ratio` that do not depend on the candidate (the mode's
        stirlerr and deviance terms, the ends' log ratios): computed once per draw."""
        n, m = self.n, self.m
        self.s_mode = stirlerr(m) + stirlerr(n - m)
        self.h_mode_M = _h(self.dm / self.M)
        self.h_mode_Q = _h(-self.dm / self.Q)
        self.log_edge_lo = jnp.log(self.q / (n * self.p))
        self.log_edge_hi = jnp.log(self.p / (n * self.q))

    # -- cheap pieces (fast path) --------------------------------------------------------------
    def fast_constants(self):
        """Per-draw constants of the polynomial log ratio (large-mean lanes only)."""
        n, m = self.n, self.m
        self.inv_M = 1.0 / self.M
        self.inv_Q = 1.0 / self.Q
        self.inv_m = 1.0 / m
        self.inv_nm = 1.0 / (n - m)
        self.inv_q = 1.0 / self.q
        self.inv_p = 1.0 / self.p
        self.s_m = _stirlerr_series(jnp.maximum(m, 15.0)) + _stirlerr_series(
            jnp.maximum(n - m, 15.0))
        self.h_m = self.M * _h_poly(self.dm * self.inv_M) + self.Q * _h_poly(-self.dm * self.inv_Q)

    def upper_bound(self, k_off: jax.Array, inv_k: jax.Array, inv_nk: jax.Array) -> jax.Array:
        """A rigorous upper bound of ``log f(m + k_off) - log f(m)`` without transcendentals.

        ``log(f(j+1)/f(j)) = log((n-j) p / ((j+1) q)) <= (M - j - q) / ((j+1) q)`` with every
        term <= 0 for j >= m; bounding the denominators by the last one gives, for k > m,
        ``(k-m) ((M - m) - q - (k-m-1)/2) / (k q)``; symmetrically, for k < m,
        ``(m-k) ((m-M) + q - (m-k+1)/2) / ((n-k) p)``. ``inv_k``, ``inv_nk``: ``1 / k`` and
        ``1 / (n - k)`` (each clamped below at 15, which a fast lane's k > m or n - k > n - m
        always exceeds), shared with :meth:`poly_log_ratio`.
        """
        t = jnp.abs(k_off)
        up = t * (-self.dm - self.q - (t - 1.0) * 0.5) * (inv_k * self.inv_q)
        down = t * (self.dm + self.q - (t + 1.0) * 0.5) * (inv_nk * self.inv_p)
        return jnp.where(k_off > 0, up, jnp.where(k_off < 0, down, 0.0))

    def reciprocals(self, k_off: jax.Array):
        """``(1 / max(k, 15), 1 / max(n - k, 15))`` of the candidate ``k = m + k_off``."""
        k = self.m + k_off
        return 1.0 / jnp.maximum(k, 15.0), 1.0 / jnp.maximum(self.n - k, 15.0)

    def poly_log_ratio(self, k_off: jax.Array, inv_k: jax.Array, inv_nk: jax.Array):
        """(valid, log ratio) with polynomials only; valid when every relative offset < 0.25.
        ``inv_k``, ``inv_nk`` from :meth:`reciprocals` (stirlerr's series in ``1 / k``)."""
        dk = k_off + self.dm
        x1, x2 = dk * self.inv_M, -dk * self.inv_Q
        y1, y2 = k_off * self.inv_m, -k_off * self.inv_nm
        valid = ((jnp.abs(x1) < _POLY_RANGE) & (jnp.abs(x2) < _POLY_RANGE)
                 & (jnp.abs(y1) < _POLY_RANGE) & (jnp.abs(y2) < _POLY_RANGE))
        lr = (self.s_m - _stirlerr_series_inv(inv_k) - _stirlerr_series_inv(inv_nk)
              + self.h_m - self.M * _h_poly(x1) - self.Q * _h_poly(x2)
              - 0.5 * (_log1p_poly(y1) + _log1p_poly(y2)))
        return valid, lr


def _safe_btrs(nf, pp, big, mode=None):
    return _Btrs(jnp.where(big, nf, 1000.0), jnp.where(big, pp, 0.5), mode)


# -------------------------------------------------------------------------------------------------
# Lane-local uniform streams
# -------------------------------------------------------------------------------------------------
@struct.dataclass
class UniformStream:
    """Uniforms ``u[0..L)`` read through the position ``ptr`` (``u`` carries ``2 * window``
    padding entries at its end, never used as randomness), and the key of the slow path. Keep the
    stream out of loop carries (``u`` is read-only and large): carry ``ptr`` and rebuild the
    stream with ``replace(ptr=...)``."""

    u: jax.Array  # float32[L + 2 window]
    ptr: jax.Array  # int32
    key: jax.Array  # typed key of the slow path
    window: int = struct.field(pytree_node=False, default=DEFAULT_WINDOW)

    @property
    def length(self) -> int:
        """The number of random uniforms in the block (the padding excluded)."""
        return self.u.shape[-1] - 2 * self.window


def block_bits(key: jax.Array, length: int) -> jax.Array:
    """``length`` (static) uint32 words, two from each threefry2x32 block of ``key`` (one lane).

    Counters ``0 .. length-1`` (padded to even) are hashed as pairs ``(i, i + length/2)``, and both
    32-bit words of each block are used: half the hashing of ``jax.random.bits`` (JAX's
    partitionable threefry hashes one block per word). Keys that are not threefry2x32 use
    ``jax.random.bits`` (same law, other values).
    """
    if str(jax.random.key_impl(key)) != "threefry2x32":
        return jax.random.bits(key, (length,), jnp.uint32)
    data = jax.random.key_data(key)
    return jax.extend.random.threefry_2x32(
        (data[0], data[1]), jnp.arange(length + length % 2, dtype=jnp.uint32))[:length]


def block_uniforms(key: jax.Array, length: int) -> jax.Array:
    """``length`` float32 uniforms in [0, 1), two from each threefry2x32 block of ``key``.

    The words of :func:`block_bits`, each giving one uniform from its top 23 bits as
    ``jax.random.uniform`` does (for a key that is not threefry2x32, the very values of
    ``jax.random.uniform``).
    """
    mantissa = jnp.right_shift(block_bits(key, length), jnp.uint32(9)) | jnp.uint32(0x3F800000)
    return jax.lax.bitcast_convert_type(mantissa, jnp.float32) - 1.0


def uniform_stream(key: jax.Array, length: int, window: int = DEFAULT_WINDOW) -> UniformStream:
    """A stream of ``length`` bulk uniforms from ``fold_in(key, 0)``, read from position 0.

    ``length`` and ``window`` (candidates classified per draw) are static; positions past the block
    come from the slow-path key ``fold_in(key, 1)``.
    """
    u = block_uniforms(jax.random.fold_in(key, 0), length)
    u = jnp.concatenate([u, jnp.full((2 * window,), 0.5, jnp.float32)])
    return UniformStream(u=u, ptr=jnp.int32(0), key=jax.random.fold_in(key, 1), window=window)


def stream_length(draws: int, window: int = DEFAULT_WINDOW) -> int:
    """A block length serving ``draws`` binomial draws with ample spare.

    The mean use is ~2.3 uniforms per draw; running short is still exact, only slower.
    """
    return math.ceil(2.0 * draws / BTRS_ACCEPTANCE * 1.1) + 2 * window + 8


def stream_uniforms(stream: UniformStream, k: int) -> tuple[jax.Array, UniformStream]:
    """``(values, stream)``: ``k`` (static) float32 uniforms and the stream advanced by ``k``."""
    L = stream.length
    idx = stream.ptr + jnp.arange(k, dtype=jnp.int32)
    vals = stream.u[jnp.minimum(idx, L - 1)]
    extra_key = jax.random.fold_in(stream.key, _EXTRA_SLOT)
    extra = jax.vmap(lambda i: jax.random.uniform(jax.random.fold_in(extra_key, i)))
    vals = jnp.where(idx < L, vals, extra(idx)) if k else vals
    return vals, stream.replace(ptr=stream.ptr + k)


# -------------------------------------------------------------------------------------------------
# The draw
# -------------------------------------------------------------------------------------------------
def stream_binomial(stream: UniformStream, n, p) -> tuple[jax.Array, UniformStream]:
    """``(count, stream)``: an exact int32 ``Binomial(n, p)`` count from a lane-local stream.

    A classification of ``stream.window`` candidates, then an exact sequential ``while_loop`` (one
    candidate, or one inversion step, per iteration) for the lanes it leaves open (the algorithm
    notes at the top of this module). The count is INVALID where n < 0 or p is not in [0, 1] (NaN
    included); the stream is advanced past what the draw used.
    """
    k, stream, _ = _draw(stream, n, p, resolve=True)
    return k, stream


def stream_binomial_fast(stream: UniformStream, n, p
                         ) -> tuple[jax.Array, UniformStream, jax.Array]:
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
        # iteration's third uniform
        u0 = jnp.where(j == 0, fresh[2], u0)
        k1 = k + 1
        k1f = k1.astype(jnp.float32)
        f1 = f * (nf - k1f + 1.0) / k1f * r
        go_on = (u0 > F) & (k < n) & (f > 0.0)
        k_new = jnp.where(small, jnp.where(go_on, k1, k), jnp.where(ok, b.count(k_off), k))
        f_new = jnp.where(small & go_on, f1, f)
        F_new = jnp.where(small & go_on, F + f1, F)
        done_new = jnp.where(small, ~go_on, ok)
        return j + 1, jnp.where(done_new, k_new, -1 - k_new), f_new, F_new, u0

    f0 = jnp.where(small, jnp.exp(nf * jnp.log1p(-pp)), 1.0)
    j_end, k_slow, _, _, _ = jax.lax.while_loop(
        lambda c: c[1] < 0, body,
        (start, jnp.where(need, jnp.int32(-1), 0), f0, f0, jnp.float32(0.0)))
    k = jnp.where(resolved, k_acc, k_slow)
    k = jnp.where(flip, n - k, k)
    k = jnp.where(trivial, edge, k)
    # Consumption: up to the first accepted-status candidate (fast lanes) or the whole window;
    # for other BTRS lanes, the window candidates their sequential loop read.
    used = jnp.where(fast, jnp.where(found, j1 + 1, W), jnp.where(big, jnp.minimum(j_end, W), 0))
    used = jnp.minimum(used, jnp.clip((L - ptr0) // 2, 0, W))
    ptr = ptr0 + 2 * used + need.astype(jnp.int32)  # +1 keeps slow-path keys unique
    return k.astype(jnp.int32), stream.replace(ptr=ptr), need


# The exact path's batch rule (``_window_status_lanes``): candidates every lane classifies before
# the lanes they leave unsettled (about 0.12^FIRST of them) go on to the rest of the window,
# COMPACT lanes at a time.
FIRST, COMPACT = 3, 64

# The fast path's batch rule (``_window_first_lanes``) classifies in three stages: every lane its
# first candidate; the lanes still open, gathered into a buffer, candidates 1 .. FAST_MID-1; the
# lanes open after those, into a smaller buffer, the rest of the window. OPEN_RATES bound the
# share of all lanes open after the first candidate and after FAST_MID (measured at mean
# FAST_MEAN, where they are largest: 0.148 and 0.0038; 0.115 and 0.0016 at large means). A
# buffer holds the mean open count at that rate plus CAPACITY_SDS standard deviations; a lane
# that does not fit stays unresolved, so the capacities change speed, never a draw.
FAST_MID = 3
OPEN_RATES = (0.15, 0.005)
CAPACITY_SDS = 5.0


def _draw_fast(stream: UniformStream, n, nf, pp, flip, trivial, edge, big, fast):
    """The draw without the sequential loop: the window's first unrejected candidate decides."""
    # Accepted: the draw is that candidate's count, as in stream_binomial (whose first
    # accepted-status candidate it is, with no undecided one before it). Undecided, or none in the
    # window, or a lane that is not fast: unresolved.
    W, L, ptr0 = stream.window, stream.length, stream.ptr
    state, k_acc = _window_first(stream.u, nf, pp, big, ptr0, L, W)
    resolved = state > _UNDECIDED  # (only fast lanes are resolved)
    j1 = jnp.bitwise_and(state, _J_MASK)
    k = jnp.where(flip, n - k_acc, k_acc)
    k = jnp.where(trivial, edge, k)
    used = jnp.where(resolved, j1 + 1, jnp.where(fast, W, 0))
    used = jnp.minimum(used, jnp.clip((L - ptr0) // 2, 0, W))
    return k.astype(jnp.int32), stream.replace(ptr=ptr0 + 2 * used), ~trivial & ~resolved


# The fast path's state of a lane, one int32: OPEN while every candidate so far was rejected;
# UNDECIDED when the first candidate not rejected was undecided, or when the window had none,
# or for a lane that is not fast (all three: unresolved); else it was accepted, and the
# state is ``k_off * 2^J_BITS + j`` (its offset from the mode and its index in the window). One
# int32 is one consumer of each classification, so XLA on CPU computes it once (with separate
# outputs it recomputed the classification for each). An accepted offset of 2^26 or more (only
# possible for n > 2^28) counts as undecided, so the packing cannot overflow: the exact path
# draws those lanes.
_J_BITS, _J_MASK = 4, 15  # window <= 16
_OPEN, _UNDECIDED = -(2 ** 31), -(2 ** 31) + 1
_MAX_OFF = 2 ** 26


def _first_range(win, lane, ptr0, L: int, lo: int, hi: int, state, loop: str = "fori"):
    """Classify candidates ``lo .. hi-1`` of the window ``win`` while a lane's ``state`` is OPEN."""
    # win is [2 (hi - lo), ...]: u and v of each candidate from lo on, any trailing lane shape;
    # lane: the lanes' (nf, pp, big, mode) (_mode).
    #
    # A loop, not unrolled: its body is one vectorised fusion over the lanes. Unrolled, XLA on CPU
    # fused the window's gather and every candidate into one fusion that ran twice as slow. loop:
    # "fori"; "while", which also stops when no lane is open; "opaque", a loop whose trip count XLA
    # cannot read (a runtime value, always hi - lo) and whose BTRS constants depend on the trip (nf
    # + 0 * j). XLA on CPU inlines a loop of known trip count one and then recomputes the
    # classification inside every consumer of the state; and it hoists loop invariants out of a
    # loop, each constant a kernel of its own (about twenty), where in the body they fuse into the
    # classification's one kernel.
    nf, pp, big, mode = lane
    if loop != "opaque":
        btrs = _safe_btrs(nf, pp, big, mode)
        btrs.fast_constants()

    def body(j, state):
        if loop == "opaque":
            b = _safe_btrs(nf + 0.0 * j.astype(nf.dtype), pp, big, mode)
            b.fast_constants()
        else:
            b = btrs
        u = jax.lax.dynamic_index_in_dim(win, 2 * (j - lo), keepdims=False)
        v = jax.lax.dynamic_index_in_dim(win, 2 * (j - lo) + 1, keepdims=False)
        k_off, inr, sq, lhs = b.candidate(u, v)
        acc, rej = _accept_reject(b, k_off, inr, sq, lhs, ptr0 + 2 * j + 1 < L)
        acc = acc & (jnp.abs(k_off) < _MAX_OFF)
        code = jnp.where(acc, k_off.astype(jnp.int32) * (1 << _J_BITS) + j,
                         jnp.where(rej, _OPEN, _UNDECIDED))
        return jnp.where(state == _OPEN, code, state)

    if loop == "while":
        return jax.lax.while_loop(lambda c: (c[0] < hi) & jnp.any(c[1] == _OPEN),
                                  lambda c: (c[0] + 1, body(c[0], c[1])), (jnp.int32(lo), state))[1]
    if loop == "opaque":  # a pointer is never negative: the bound is hi, at run time (the
        # first lane's pointer, or none: a batch of zero lanes has no first lane)
        return jax.lax.fori_loop(lo, hi + jnp.minimum(jnp.ravel(ptr0)[:1].sum(), 0), body,
                                 state)
    return jax.lax.fori_loop(lo, hi, body, state)


def _window_first(u, nf, pp, big, ptr0, L: int, W: int):
    """``(state, count)``: the fast-path state of the window at ``ptr0`` and its accepted count."""
    # The state is never OPEN; the count is unflipped (0 if none). Batched, the lanes are classified
    # in stages (_window_first_lanes).

    def per_lane(u, nf, pp, big, ptr0):
        mode = _mode(nf, pp, big)
        state = _first_range(_window(u, ptr0, 2 * W, L)[:, None], (nf, pp, big, mode), ptr0, L,
                             0, W, jnp.full((1,), _OPEN, jnp.int32))
        state = jnp.where(_is_fast(nf, pp, big) & (state != _OPEN), state, _UNDECIDED)
        return state[0], _first_count(mode, state)[0]

    return _lane_batched(per_lane, _window_first_lanes, L, W)(u, nf, pp, big, ptr0)


@functools.partial(jax.jit, static_argnames=("L", "W", "rates"))
def _window_first_lanes(u, nf, pp, big, ptr0, *, L: int, W: int,
                        rates: tuple[float, float] = OPEN_RATES):
    """The batch rule of :func:`_window_first` (every argument with a leading lane axis)."""
    # In the stages described by FAST_MID: every lane classifies its first candidate; the open
    # lanes, gathered into a buffer of _buffer_capacity(lanes, rates[0]), candidates 1 ..
    # FAST_MID-1; those still open, into a buffer for rates[1], the rest of the window. Fixed shapes
    # and no loop over passes: a lane that does not fit a buffer is left UNDECIDED. Jitted so that
    # the loops' batching, which runs the rule again on each of its passes, traces it once per
    # shape.
    B = u.shape[0]
    mid = min(FAST_MID, W)
    mode = _mode(nf, pp, big)
    state = _first_range(_lane_rows(u, ptr0, L, 2), (nf, pp, big, mode), ptr0, L, 0, 1,
                         jnp.full((B,), _OPEN, jnp.int32), loop="opaque")
    state = jnp.where(_is_fast(nf, pp, big), state, _UNDECIDED)
    # each later stage: (the buffer's lanes as indices into the previous stage, its states)
    stages, lanes, prev = [], None, state
    for rate, lo, hi, loop in ((rates[0], 1, mid, "fori"), (rates[1], mid, W, "while")):
        if lo >= hi:
            break
        size = prev.shape[0]
        is_open = prev == _OPEN
        slots = _compact_lanes(is_open, min(size, _buffer_capacity(B, rate)))
        local = jnp.minimum(slots, size - 1)
        g = local if lanes is None else lanes[local]  # the buffer's lanes, as lane indices
        # the candidates lo .. hi-1 where _window puts them (the block has 2 W entries of padding)
        w = _gathered_rows(u, g, jnp.minimum(ptr0[g], L) + 2 * lo, 2 * (hi - lo))
        st = _first_range(w, (nf[g], pp[g], big[g], mode[g]), ptr0[g], L, lo, hi,
                          jnp.where(slots < size, _OPEN, _UNDECIDED), loop)
        stages.append((prev, is_open, slots))
        lanes, prev = g, st
    state = jnp.where(prev == _OPEN, _UNDECIDED, prev)  # every candidate rejected
    for before, is_open, slots in reversed(stages):  # back through the buffers
        state = jnp.where(is_open, _UNDECIDED, before).at[slots].set(state, mode="drop")
    return state, _first_count(mode, state)


def _lane_rows(u, ptr0, L: int, size: int):
    """``size`` entries of every lane's block ``u`` from its ``ptr0``, as rows ``[size, lanes]``."""
    # One contiguous slice per lane (XLA on CPU copies those faster than size scalar gathers):
    # _window per lane.
    return jax.vmap(lambda row, p: _window(row, p, size, L))(u, ptr0).T


def _gathered_rows(u, lanes, start, size: int):
    """``size`` entries of the blocks ``u[lanes]`` from ``start``, as rows over ``lanes``."""
    # One gather of size * len(lanes) scalars (for a buffer of a few lanes, cheaper than copying
    # their blocks); start + size is at most the block's width.
    flat = lanes.astype(jnp.int32) * u.shape[-1] + start
    return u.reshape(-1)[flat[None, :] + jnp.arange(size, dtype=jnp.int32)[:, None]]


def _buffer_capacity(lanes: int, rate: float) -> int:
    """Slots for the lanes still open among ``lanes``, each open w.p. at most ``rate``."""
    # The binomial mean plus CAPACITY_SDS standard deviations, plus 16, rounded up to a multiple of
    # 32 (at most lanes).
    mean = lanes * rate
    cap = mean + CAPACITY_SDS * math.sqrt(max(mean * (1.0 - rate), 1.0)) + 16.0
    return min(lanes, 32 * math.ceil(cap / 32))


def _compact_lanes(mask, capacity: int):
    """The first ``capacity`` lanes where ``mask``, in order (``mask.size`` in unused slots)."""
    # A lane's slot is the number of set lanes before it, counted by 32-lane words
    # (population_count) and a prefix sum over the words, then one scatter: on CPU much cheaper than
    # jnp.nonzero's prefix sum over every lane.
    B = mask.shape[0]
    words = -(-B // 32)
    grid = jnp.pad(mask, (0, 32 * words - B)).reshape(words, 32)
    bit = jnp.left_shift(jnp.uint32(1), jnp.arange(32, dtype=jnp.uint32))
    packed = jnp.sum(jnp.where(grid, bit, jnp.uint32(0)), axis=1, dtype=jnp.uint32)
    count = jax.lax.population_count(packed).astype(jnp.int32)
    before_word = jnp.cumsum(count) - count
    within = jax.lax.population_count(packed[:, None] & (bit - 1)).astype(jnp.int32)
    slot = (before_word[:, None] + within).reshape(-1)[:B]
    return jnp.full((capacity,), B, jnp.int32).at[jnp.where(mask, slot, capacity)].set(
        jnp.arange(B, dtype=jnp.int32), mode="drop")


def _open_lanes(is_open, blocks: int):
    """``(idx, ok)``: the first open lane of each of ``blocks`` blocks (``ok``: it has one)."""
    # Two reductions; a block with several open lanes gives the next one on the next pass, after the
    # caller has closed this one.
    B = is_open.shape[0]
    blocks = min(blocks, B)
    size = -(-B // blocks)
    grid = jnp.pad(is_open, (0, blocks * size - B)).reshape(blocks, size)
    return jnp.arange(blocks) * size + jnp.argmax(grid, axis=1), jnp.any(grid, axis=1)


def _is_fast(nf, pp, big):
    """The lanes of the fast path (as in :func:`_flags`; ``pp = min(p, 1 - p)``)."""
    return big & (nf * pp >= FAST_MEAN)


def _mode(nf, pp, big):
    """The BTRS mode ``floor((n + 1) p)`` of every lane (as :func:`_safe_btrs` builds it)."""
    return _safe_btrs(nf, pp, big).m


def _first_count(mode, state):
    """The accepted candidate's unflipped count of a fast-path state (0 if none) under ``mode``."""
    return jnp.where(state > _UNDECIDED, mode.astype(jnp.int32) + jnp.right_shift(state, _J_BITS),
                     0)


def _status_range(win, nf, pp, big, ptr0, L: int, lo: int, hi: int, status, counts):
    """Classify candidates ``lo .. hi-1`` of one lane's window into ``status`` and ``counts``."""
    # status: 1 accepted, 2 rejected, 0 undecided. A loop over the candidates, not unrolled and not
    # vectorised over the window: under vmap the body is then batch-shaped scalar code, which XLA on
    # CPU vectorises well (a [batch, window] array runs much slower). Its body has one output fed by
    # the heavy arithmetic (the status) and one by the cheap candidate (the count): XLA on CPU fuses
    # -- recomputes -- producers into every consumer, so fewer consumers means less work.
    btrs = _safe_btrs(nf, pp, big)
    btrs.fast_constants()

    def body(j, c):
        status, counts = c
        u = jax.lax.dynamic_index_in_dim(win, 2 * j, keepdims=False)
        v = jax.lax.dynamic_index_in_dim(win, 2 * j + 1, keepdims=False)
        acc, rej, k_j = _classify(btrs, u, v, ptr0 + 2 * j + 1 < L)
        code = jnp.where(acc, 1, jnp.where(rej, 2, 0)).astype(jnp.int32)
        return status.at[j].set(code), counts.at[j].set(k_j)

    return jax.lax.fori_loop(lo, hi, body, (status, counts))


def _settled(status, fast):
    """Whether the first ``FIRST`` statuses decide: an accepted one, no undecided before."""
    jw = jnp.arange(status.shape[-1])
    acc = (status == 1) & (jw < FIRST)
    j1 = jnp.min(jnp.where(acc, jw, status.shape[-1]))
    return ~fast | (jnp.any(acc) & ~jnp.any((status == 0) & (jw < j1)))


def _window(u, ptr0, size: int, L: int):
    """``size`` entries of the stream block ``u`` from ``ptr0`` (clamped to the block)."""
    return jax.lax.dynamic_slice(u, (jnp.minimum(ptr0, L),), (size,))


def _window_status(u, nf, pp, big, ptr0, L: int, W: int):
    """Statuses and counts of the W window candidates read from the block ``u`` at ``ptr0``."""
    # Slots a settled lane never needs may be left undecided (0): only the first accepted candidate
    # and the undecided ones before it matter downstream, and both are always classified.

    def per_lane(u, nf, pp, big, ptr0):
        z = jnp.zeros((W,), jnp.int32)
        return _status_range(_window(u, ptr0, 2 * W, L), nf, pp, big, ptr0, L, 0, W, z, z)

    return _lane_batched(per_lane, _window_status_lanes, L, W)(u, nf, pp, big, ptr0)


def _lane_batched(per_lane, lanes, L: int, W: int):
    """``per_lane(u, nf, pp, big, ptr0)`` (one lane, 2 outputs) with ``lanes`` as batch rule."""
    # Under vmap, lanes(u, nf, pp, big, ptr0, L=L, W=W) gets every argument with a leading lane axis
    # (unbatched ones broadcast).
    f = jax.custom_batching.custom_vmap(per_lane)

    @f.def_vmap
    def f_vmap(axis_size, in_batched, *args):
        args = [x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
                for x, b in zip(args, in_batched)]
        return lanes(*args, L=L, W=W), (True, True)

    return f


@functools.partial(jax.jit, static_argnames=("L", "W"))
def _window_status_lanes(u, nf, pp, big, ptr0, *, L: int, W: int):
    """The batch rule of :func:`_window_status` (every argument with a leading lane axis)."""
    # Every lane classifies its first FIRST candidates; the few lanes that these do not settle
    # classify the rest COMPACT at a time (_open_lanes), so the batch does not pay for the rare
    # lane. Jitted so that the loops' batching, which runs the rule again on each of its passes,
    # traces it once per shape.
    B = u.shape[0]
    fast = big & (nf * pp >= FAST_MEAN)  # as in _flags (pp = min(p, 1 - p))
    first = min(FIRST, W)
    z = jnp.zeros((B, W), jnp.int32)

    def stage(u, nf, pp, big, ptr0, s0, c0, lo, hi):
        # pad the short window of stage A to 2W entries (unread beyond 2 * hi)
        win = _window(u, ptr0, 2 * hi, L)
        win = jnp.concatenate([win, jnp.zeros((2 * (W - hi),), win.dtype)])
        return _status_range(win, nf, pp, big, ptr0, L, lo, hi, s0, c0)

    status, counts = jax.vmap(functools.partial(stage, lo=0, hi=first))(
        u, nf, pp, big, ptr0, z, z)
    if W <= FIRST:
        return status, counts
    need = ~jax.vmap(_settled)(status, fast)

    def chunk(c):
        status, counts, need = c
        idx, ok = _open_lanes(need, COMPACT)
        g = jnp.where(ok, idx, 0)
        st, ct = jax.vmap(functools.partial(stage, lo=first, hi=W))(
            u[g], nf[g], pp[g], big[g], ptr0[g], status[g], counts[g])
        dst = jnp.where(ok, idx, B)
        return (status.at[dst].set(st, mode="drop"), counts.at[dst].set(ct, mode="drop"),
                need.at[dst].set(False, mode="drop"))

    status, counts, _ = jax.lax.while_loop(lambda c: jnp.any(c[2]), chunk,
                                           (status, counts, need))
    return status, counts


def _classify(btrs: _Btrs, u: jax.Array, v: jax.Array, valid_pos: jax.Array):
    """Cheap three-way classification of candidates: (accepted, rejected, unflipped count)."""
    k_off, inr, sq, lhs = btrs.candidate(u, v)
    acc, rej = _accept_reject(btrs, k_off, inr, sq, lhs, valid_pos)
    return acc, rej, btrs.count(k_off)


def _accept_reject(btrs: _Btrs, k_off, inr, sq, lhs, valid_pos):
    """``(accepted, rejected)`` by the squeeze, the log-ratio polynomial and the upper bound."""
    inv_k, inv_nk = btrs.reciprocals(k_off)
    pvalid, lr = btrs.poly_log_ratio(k_off, inv_k, inv_nk)
    ub = btrs.upper_bound(k_off, inv_k, inv_nk)
    acc = valid_pos & inr & (sq | (pvalid & (lhs <= lr)))
    rej = valid_pos & (~inr | (~sq & ((lhs > ub + _UB_MARGIN * (1.0 + jnp.abs(ub)))
                                      | (pvalid & (lhs > lr)))))
    return acc, rej


def sample_binomial(key: jax.Array, n, p, window: int = DEFAULT_WINDOW) -> jax.Array:
    """An exact int32 ``Binomial(n, p)`` draw from a key; INVALID where n < 0 or p not in [0, 1]."""
    k, _ = stream_binomial(uniform_stream(key, 2 * window, window), n, p)
    return k


# -------------------------------------------------------------------------------------------------
# Decision-only draws: an event ``count not in [k_lo, k_hi]`` without drawing the count
# -------------------------------------------------------------------------------------------------
# A checker that only compares a Binomial(n, pi) count with an interval needs one Bernoulli draw
# with the exact probability ``P_out = P[X < k_lo] + P[X > k_hi]``. With 32 random bits ``B`` and a
# uniform ``U2`` (the number ``(B + U2) 2^-32`` is uniform), the event is ``(B + U2) 2^-32 <
# P_out``. When a rigorous Hoeffding bound gives ``P_out <= 2^-GATE_LOG2``, ``B >= 2^(32 -
# GATE_LOG2)`` already decides "inside" (all but a 2^-GATE_LOG2 fraction of steps); only the rest
# needs ``P_out`` itself (:func:`binom_lower_tail`, a rare path).
GATE_LOG2 = 24  # the cheap path decides all but 2^-24 of the gated draws (so a 4096 x 256
# honest run rarely needs a replay at all)


def log_pmf(k: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
    """``log P[X = k]`` for X ~ Binomial(n, p), ``0 <= k <= n``, ``0 < p < 1``, in Loader's form.

    ``stirlerr`` and the deviance, as R's ``dbinom``: float32 keeps ~1e-5 absolute accuracy where
    the textbook ``lgamma`` form loses everything for large n.
    """
    kf = jnp.asarray(k, jnp.float32)
    nf = jnp.asarray(n, jnp.float32)
    p = jnp.asarray(p, jnp.float32)
    q = 1.0 - p
    kk = jnp.clip(kf, 1.0, jnp.maximum(nf - 1.0, 1.0))
    M, Q = nf * p, nf * q
    inner = (stirlerr(nf) - stirlerr(kk) - stirlerr(nf - kk)
             - M * _h((kk - M) / M) - Q * _h((nf - kk - Q) / Q)
             + 0.5 * jnp.log(nf / (2.0 * math.pi * kk * (nf - kk))))
    return jnp.where(kf <= 0, nf * jnp.log1p(-p), jnp.where(kf >= nf, nf * jnp.log(p), inner))


def _lower_tail_walk(k, n, p, target, active):
    """``(j, P[j <= X <= k])``: the pmf summed from ``k`` down until it reaches ``target``."""
    # By the ratio f(j-1)/f(j) = j q / ((n-j+1) p), until the sum reaches target or a term falls
    # below 2^-30 of the sum; j is the last count added. No work where active is false or k < 0
    # (then (k, 0)).
    k = jnp.asarray(k, jnp.int32)
    n = jnp.asarray(n, jnp.int32)
    p = jnp.asarray(p, jnp.float32)
    go = jnp.asarray(active) & (k >= 0)
    f0 = jnp.where(go, jnp.exp(log_pmf(jnp.maximum(k, 0), n, p)), 0.0)
    r = (1.0 - p) / p

    def cond(c):
        j, term, acc = c
        return go & (j > 0) & (acc < target) & (term > acc * 2.0 ** -30)

    def body(c):
        j, term, acc = c
        term = term * j.astype(jnp.float32) / (n - j + 1).astype(jnp.float32) * r
        return j - 1, term, acc + term

    j, _, acc = jax.lax.while_loop(cond, body, (k, f0, f0))
    return j, acc


def binom_lower_tail(k: jax.Array, n: jax.Array, p: jax.Array, active: jax.Array = True
                     ) -> jax.Array:
    """``P[X <= k]`` for X ~ Binomial(n, p), ``0 < p < 1``, with ``k`` below the mean.

    Sums the pmf from ``k`` downwards until a term falls below 2^-30 of the sum (the terms decrease
    geometrically below the mean, so the rest is smaller still). Float32, relative accuracy ~1e-4.
    Above the mean the sum is slow, not wrong. 0 for ``k < 0`` and where ``active`` is false (no
    work there).
    """
    return _lower_tail_walk(k, n, p, jnp.inf, active)[1]


def binom_lower_tail_sample(k: jax.Array, n: jax.Array, p: jax.Array, target: jax.Array,
                            active: jax.Array = True) -> jax.Array:
    """Inversion inside the lower tail: the largest ``j <= k`` with ``P[j <= X <= k] >= target``.

    The same walk, in the same order, as :func:`binom_lower_tail`, so with ``target = U *
    binom_lower_tail(k, n, p)`` (U uniform on [0, 1)) the result is distributed as ``X | X <= k``.
    Returns ``k`` where ``active`` is false.
    """
    return _lower_tail_walk(k, n, p, target, active)[0]


def decision_gate(n: jax.Array, pi: jax.Array, k_lo: jax.Array, k_hi: jax.Array,
                  log2_gate: int = GATE_LOG2) -> jax.Array:
    """Whether Hoeffding certifies ``P[X outside [k_lo, k_hi]] <= 2^-log2_gate``.

    Hoeffding's bound ``P[X < k_lo] <= exp(-2 n d^2)`` (``d = pi - (k_lo - 1)/n``) and its mirror
    image, each side at most half, with a margin for float32 rounding; where it holds,
    :func:`decide_outside` is cheap but for a 2^-log2_gate fraction.
    """
    nf = jnp.asarray(n, jnp.float32)
    pi = jnp.asarray(pi, jnp.float32)
    need = (log2_gate + 1) * math.log(2.0) * 1.001 + 1e-3
    d_lo = pi - (k_lo - 1).astype(jnp.float32) / nf
    d_hi = (k_hi + 1).astype(jnp.float32) / nf - pi
    lo_ok = (k_lo <= 0) | ((d_lo > 0) & (2.0 * nf * d_lo * d_lo >= need))
    hi_ok = (k_hi >= n) | ((d_hi > 0) & (2.0 * nf * d_hi * d_hi >= need))
    return (n > 0) & (pi > 0.0) & (pi < 1.0) & (k_lo <= k_hi) & lo_ok & hi_ok


def outside_probability(n, pi, k_lo, k_hi, active=True) -> jax.Array:
    """``P[X < k_lo] + P[X > k_hi]``, X ~ Binomial(n, pi), for gated arguments (0 if inactive)."""
    # both tails by one walk (vmapped over the two sides: one loop to compile, same values)
    pi = jnp.asarray(pi, jnp.float32)
    ks = jnp.stack([k_lo - 1, n - k_hi - 1])
    tails = jax.vmap(binom_lower_tail, (0, None, 0, None))(ks, n, jnp.stack([pi, 1.0 - pi]),
                                                           active)
    return tails[0] + tails[1]


def decide_outside(bits: jax.Array, u2: jax.Array, n, pi, k_lo, k_hi, active=True,
                   log2_gate: int = GATE_LOG2, resolve: bool = True):
    """``(outside, rare)``: the event ``X not in [k_lo, k_hi]``, X ~ Binomial(n, pi), exact in law.

    For gated arguments (:func:`decision_gate`): the event is ``(B + U2) 2^-32 < P_out`` for 32
    random ``bits`` B and a uniform ``u2``; only where ``B < 2^(32 - log2_gate)`` (``rare``) must
    ``P_out`` be computed, compared on a 2^-42 grid or finer. ``resolve=False`` skips that and
    leaves ``outside`` false there (the caller must replay); inactive lanes give (False, False).
    """
    cut = jnp.uint32(1 << (32 - log2_gate))
    rare = jnp.asarray(active) & (bits < cut)
    if not resolve:
        return jnp.zeros_like(rare), rare
    p_out = outside_probability(n, pi, k_lo, k_hi, rare)
    scaled = p_out * 2.0 ** 32  # <= 2^(32 - log2_gate): exact enough in float32
    outside = rare & (bits.astype(jnp.float32) + u2 < scaled)
    return outside, rare
