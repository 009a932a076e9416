"""Exact real-number arithmetic on float32 values, in integer operations only (spec DED 5.5).

A finite float32 is a dyadic rational ``m 2^e``. XLA may compile one float expression differently
in different programs (a division becomes a product by the reciprocal; a product and a subtraction
fuse into one FMA), so a float test that meets a real-number tie can be decided differently by
two programs. Integer operations are never rewritten: the functions here read the float32 bit
patterns and work on 64-bit numbers held as two uint32 words, so every program agrees.

* :func:`checker_bounds`: the counts k with ``|p - k/n| < tau``, exactly, as open bounds;
* :func:`ratio_f32`: ``k / n`` correctly rounded to float32, assembled by bitcast.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

_U = jnp.uint32


def _sl(v, t):
    """``v << t`` for uint32 v and int32 t >= 0 (0 when t >= 32)."""
    return jnp.where(t < 32, v << jnp.clip(t, 0, 31).astype(_U), _U(0))


def _sr(v, t):
    """``v >> t`` for uint32 v and int32 t >= 0 (0 when t >= 32)."""
    return jnp.where(t < 32, v >> jnp.clip(t, 0, 31).astype(_U), _U(0))


def _low(v, t):
    """The bits of v below bit t (all of v when t >= 32)."""
    return jnp.where(t >= 32, v, v & (_sl(_U(1), t) - _U(1)))


def _shl64(h, lo, t):
    """``(h, lo) << t`` modulo 2^64, for 0 <= t."""
    small = t < 32
    return (jnp.where(small, _sl(h, t) | _sr(lo, 32 - t), _sl(lo, t - 32)),
            jnp.where(small, _sl(lo, t), _U(0)))


def _shr64(h, lo, t):
    """``(h, lo) >> t`` and whether a one was shifted out, for 0 <= t."""
    small = t < 32
    out = (jnp.where(small, _sr(h, t), _U(0)),
           jnp.where(small, _sr(lo, t) | _sl(h, 32 - t), _sr(h, t - 32)))
    sticky = jnp.where(small, _low(lo, t) != 0, (lo != 0) | (_low(h, t - 32) != 0))
    return out, sticky


def _mul(n, m):
    """``n * m`` as (hi, lo) words, for uint32 n < 2^31 and m < 2^25."""
    n0, n1, m0, m1 = n & 0xFFFF, n >> 16, m & 0xFFFF, m >> 16
    mid = n0 * m1 + n1 * m0  # < 2^31
    p00 = n0 * m0
    lo = p00 + (mid << 16)
    return n1 * m1 + (mid >> 16) + (lo < p00).astype(_U), lo


def _parts(m, e, n):
    """``n m 2^e`` (``e <= 0``) as its integer part (hi, lo), its fraction's top 64 bits (hi, lo)
    and whether the fraction has ones below those."""
    ph, pl = _mul(n, m)
    s = -e
    ih, il = _shr64(ph, pl, s)[0]
    fl, fsticky = _shr64(ph, pl, jnp.maximum(s - 64, 0))
    fh, fl2 = _shl64(ph, pl, jnp.maximum(64 - s, 0))
    return (ih, il), (jnp.where(s > 64, fl[0], fh), jnp.where(s > 64, fl[1], fl2)), \
        fsticky & (s > 64)


def _split(bits):
    """(mantissa uint32 < 2^24, exponent int32 >= -149) of a non-negative float32's bits."""
    ef = (bits >> 23).astype(jnp.int32)
    frac = bits & _U(0x7FFFFF)
    return jnp.where(ef == 0, frac, frac | _U(0x800000)), jnp.maximum(ef, 1) - 150


def _key(bits):
    """An int32 ordered as the float32 values of ``bits`` are (-0 below +0; no NaN)."""
    b = lax.bitcast_convert_type(bits, jnp.int32)
    return jnp.where(b < 0, -(b & 0x7FFFFFFF) - 1, b)


def _floor_combined(a, b, sub, n, big):
    """``floor(n (a +- b))`` clipped to ``[0, n + 1]`` and whether ``n (a +- b)`` is an integer,
    for ``a >= b >= 0`` below 2^24 (per-term parts from :func:`_parts`)."""
    (ia, fa, sa), (ib, fb, sb) = a, b
    # fractions: f = F 2^-64 + r, r > 0 only for a term below 2^-9 (sticky); see checker_bounds
    sum_l = fa[1] + fb[1]
    c0 = (sum_l < fa[1]).astype(_U)
    sum_h = fa[0] + fb[0] + c0
    carry = (sum_h < fa[0]) | ((sum_h == fa[0]) & (c0 == 1))
    f_eq = (fa[0] == fb[0]) & (fa[1] == fb[1])
    f_lt = (fa[0] < fb[0]) | ((fa[0] == fb[0]) & (fa[1] < fb[1]))
    borrow = ~sa & (f_lt | (f_eq & sb))
    adj = jnp.where(sub, -borrow.astype(jnp.int32), carry.astype(jnp.int32))
    int_add = (sum_h == 0) & (sum_l == 0) & ~sa & ~sb
    int_sub = f_eq & ~sa & ~sb
    # integer parts (< 2^55): a +- b, then the adjustment, as 64-bit words
    bh = jnp.where(sub, ~ib[0], ib[0])
    bl = jnp.where(sub, ~ib[1], ib[1])
    lo = ia[1] + bl
    c1 = (lo < ia[1]).astype(_U)
    hi = ia[0] + bh + c1
    lo2 = lo + jnp.where(sub, _U(1), _U(0))  # two's complement of b: ~b + 1
    hi = hi + (lo2 < lo).astype(_U)
    lo3 = lo2 + adj.astype(_U)
    hi = hi + jnp.where(adj > 0, (lo3 < lo2).astype(_U), jnp.where(adj < 0, (lo3 > lo2).astype(_U)
                                                                   * _U(0xFFFFFFFF), _U(0)))
    bound = (n + 1).astype(_U)
    value = jnp.where((hi != 0) | big, bound, jnp.minimum(lo3, bound)).astype(jnp.int32)
    return value, jnp.where(sub, int_sub, int_add) & ~big


def checker_bounds(p: jax.Array, n: jax.Array, tau: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The counts k with ``|p - k/n| < tau`` in real numbers, as open bounds ``lo < k < hi``.

    ``|p - k/n| < tau`` iff ``floor(n (p - tau)) < k < ceil(n (p + tau))``, p and tau the exact
    dyadic rationals their float32 values are. Each bound is ``floor(n (a +- b))`` for
    ``a = max(|p|, tau) >= b = min(|p|, tau)``: the integer parts of ``n a`` and ``n b`` plus the
    carry (or borrow) of their fractions, kept to 64 bits. A fraction has ones below 2^-64 only if
    its term is below 2^-9 (``n m < 2^55``); then the other term's 64 bits decide the carry
    alone, and two such terms have no carry. A claim that is not finite, or ``tau <= 0`` or NaN,
    accepts no count; ``tau = +inf`` accepts every count for a finite claim.

    Args:
        p: float32, the claim.
        n: int, the number of samples, ``0 <= n < 2^30`` (0 is treated as 1).
        tau: float32, the tolerance.

    Returns:
        ``(lo, hi)``, int32 in ``[-1, n + 1]``: the rule holds for a count ``0 <= k <= n`` iff
        ``lo < k < hi``.
    """
    p = jnp.asarray(p, jnp.float32)
    tau = jnp.asarray(tau, jnp.float32)
    p, tau = jnp.broadcast_arrays(p, tau)
    nn = jnp.broadcast_to(jnp.maximum(jnp.asarray(n, jnp.int32), 1), p.shape).astype(_U)
    bp = lax.bitcast_convert_type(p, _U)
    bt = lax.bitcast_convert_type(tau, _U)
    ap = bp & _U(0x7FFFFFFF)  # |p|
    neg = (bp >> 31) == 1
    mp, ep = _split(ap)
    mt, et = _split(bt & _U(0x7FFFFFFF))
    p_big = ap >= _U(0x4B800000)  # >= 2^24: n x has no 64-bit integer part here
    t_big = bt >= _U(0x4B800000)
    # per-term parts (exponent clamped to <= 0: a term >= 2^24 is handled below)
    part_p = _parts(mp, jnp.minimum(ep, 0), nn)
    part_t = _parts(mt, jnp.minimum(et, 0), nn)
    p_hi = ap >= bt  # |p| >= tau: p is the larger term
    a = jax.tree.map(lambda u, v: jnp.where(p_hi, u, v), part_p, part_t)
    b = jax.tree.map(lambda u, v: jnp.where(p_hi, v, u), part_p, part_t)
    # a >= 2^24: a sum saturates; a difference a - b is +-W 2^eb with W small, or >= a / 2
    ma, ea = jnp.where(p_hi, mp, mt), jnp.where(p_hi, ep, et)
    mb, eb = jnp.where(p_hi, mt, mp), jnp.where(p_hi, et, ep)
    d = ea - eb
    w = jnp.where(d <= 1, (ma << jnp.clip(d, 0, 1).astype(_U)) - mb, _U(2))  # 2: saturates
    w_is = jnp.where(w == 0, 0, jnp.where((w == 1) & (eb == 0), 1, 2))  # a - b in {0, 1, >= 2}
    huge = p_big | t_big
    f_sub, i_sub = _floor_combined(a, b, True, nn, jnp.zeros_like(huge))
    f_add, i_add = _floor_combined(a, b, False, nn, huge)
    n1 = nn.astype(jnp.int32) + 1
    f_sub = jnp.where(huge, jnp.where(w_is == 0, 0, jnp.where(w_is == 1, n1 - 1, n1)), f_sub)
    i_sub = i_sub | huge
    # lower: k > floor(n (p - tau)), trivially true when p < tau
    kp, kt = _key(bp), _key(bt)
    lo = jnp.where(kp < kt, -1, f_sub)
    # upper: k < ceil(n (p + tau)); none when p + tau <= 0, i.e. p <= -tau
    fl, is_int = jnp.where(neg, f_sub, f_add), jnp.where(neg, i_sub, i_add)
    hi = jnp.where(neg & (ap >= bt), 0, jnp.minimum(fl + 1 - is_int.astype(jnp.int32), n1))
    ok = jnp.isfinite(p) & jnp.isfinite(tau) & (kt > 0)
    everything = jnp.isfinite(p) & (tau == jnp.inf)
    lo = jnp.where(everything, -1, jnp.where(ok, lo, n1))
    hi = jnp.where(everything, n1, jnp.where(ok, hi, 0))
    return lo, hi


def ratio_f32(k: jax.Array, n: jax.Array) -> jax.Array:
    """``k / n`` correctly rounded to float32 (to nearest, ties to even), by integer division.

    The result is assembled from its bits, so no program can fuse it into a later operation.

    Args:
        k: int32, ``0 <= k <= n``.
        n: int32, ``1 <= n < 2^31`` (0 is treated as 1, as the checker does).

    Returns:
        float32 of the broadcast shape.
    """
    k, n = jnp.broadcast_arrays(jnp.asarray(k, jnp.int32),
                                jnp.maximum(jnp.asarray(n, jnp.int32), 1))
    ku = jnp.maximum(k, 1).astype(_U)
    nu = n.astype(_U)
    gap = jnp.maximum(lax.clz(ku).astype(jnp.int32) - lax.clz(nu).astype(jnp.int32), 0)
    r = ku << gap.astype(_U)  # bitlen(r) = bitlen(n) <= 31
    below = r < nu
    r = jnp.where(below, r << 1, r)  # n <= r < 2n < 2^32
    e = -gap - below.astype(jnp.int32)  # 2^e <= k / n < 2^(e+1)
    m = jnp.ones_like(nu)
    r = r - nu
    for _ in range(24):  # the 23 bits after the leading one, then the guard bit
        r = r << 1
        bit = r >= nu
        r = jnp.where(bit, r - nu, r)
        m = (m << 1) | bit.astype(_U)
    up = ((m & 1) == 1) & ((r != 0) | ((m & 2) == 2))  # guard set; sticky or odd: round up
    m = (m >> 1) + up.astype(_U)
    carry = m >> 24  # rounded up to 2^24
    m = jnp.where(carry == 1, m >> 1, m)
    e = e + carry.astype(jnp.int32)
    bits = ((e + 127).astype(_U) << 23) | (m & _U(0x7FFFFF))
    bits = jnp.where(k <= 0, _U(0), jnp.where(k >= n, _U(0x3F800000), bits))
    return lax.bitcast_convert_type(bits, jnp.float32)
