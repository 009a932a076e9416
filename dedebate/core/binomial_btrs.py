"""BTRS candidates (Hoermann 1993) and their exact and cheap acceptance tests.

:class:`_Btrs` holds a lane's constants for ``p <= 1/2``, ``n p >= SMALL_MEAN``: the candidate
from two uniforms, the exact log pmf ratio to the mode in Loader's form, and for lanes with mean
>= FAST_MEAN its polynomial form and a rigorous upper bound (the algorithm notes of
:mod:`dedebate.core.binomial`). :func:`_flags` sorts lanes into regimes; :func:`_accept_reject`
classifies a candidate cheaply.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dedebate.core.binomial_pmf import (
    _h,
    _h_poly,
    _log1p_poly,
    _stirlerr_series,
    _stirlerr_series_inv,
    stirlerr,
)

SMALL_MEAN = 10.0  # BTRS needs N min(p, 1-p) >= 10 (Hoermann 1993)
FAST_MEAN = 600.0  # lanes with N min(p, 1-p) >= this use the polynomial fast path
INVALID = -1  # the count drawn for n < 0 or p outside [0, 1] (NaN included): no draw, no loop
_POLY_RANGE = 0.25  # polynomial forms are used for relative offsets below this
_UB_MARGIN = 1e-5  # slack on the rigorous upper bound against float rounding


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
        inner = (
            self.s_mode
            - stirlerr(k)
            - stirlerr(n - k)
            - self.M * (_h(dk / self.M) - self.h_mode_M)
            - self.Q * (_h(-dk / self.Q) - self.h_mode_Q)
            - 0.5 * (jnp.log1p(ko / m) + jnp.log1p(-ko / (n - m)))
        )
        edge = jnp.where(k_off < ko, self.log_edge_lo, jnp.where(k_off > ko, self.log_edge_hi, 0.0))
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
            jnp.maximum(n - m, 15.0)
        )
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
        valid = (
            (jnp.abs(x1) < _POLY_RANGE)
            & (jnp.abs(x2) < _POLY_RANGE)
            & (jnp.abs(y1) < _POLY_RANGE)
            & (jnp.abs(y2) < _POLY_RANGE)
        )
        lr = (
            self.s_m
            - _stirlerr_series_inv(inv_k)
            - _stirlerr_series_inv(inv_nk)
            + self.h_m
            - self.M * _h_poly(x1)
            - self.Q * _h_poly(x2)
            - 0.5 * (_log1p_poly(y1) + _log1p_poly(y2))
        )
        return valid, lr


def _safe_btrs(nf, pp, big, mode=None):
    return _Btrs(jnp.where(big, nf, 1000.0), jnp.where(big, pp, 0.5), mode)


def _is_fast(nf, pp, big):
    """The lanes of the fast path (as in :func:`_flags`; ``pp = min(p, 1 - p)``)."""
    return big & (nf * pp >= FAST_MEAN)


def _mode(nf, pp, big):
    """The BTRS mode ``floor((n + 1) p)`` of every lane (as :func:`_safe_btrs` builds it)."""
    return _safe_btrs(nf, pp, big).m


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
    rej = valid_pos & (
        ~inr | (~sq & ((lhs > ub + _UB_MARGIN * (1.0 + jnp.abs(ub))) | (pvalid & (lhs > lr))))
    )
    return acc, rej
