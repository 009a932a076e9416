"""The fast draw: a lane's window classified up to its first candidate not rejected, no loop.

:func:`_draw_fast` serves :func:`dedebate.core.binomial.stream_binomial_fast`: the first
unrejected candidate decides (accepted: the draw; undecided: the lane is left unresolved for the
caller to replay). Under ``vmap`` the batch rule :func:`_window_first_lanes` gathers the lanes
still open into fixed-size buffers, so the batch pays for later candidates only where needed.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from dedebate.core.binomial_btrs import _accept_reject, _is_fast, _mode, _safe_btrs
from dedebate.core.binomial_stream import UniformStream
from dedebate.core.binomial_window import _lane_batched, _window
from dedebate.programs import jit

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


# The fast path's state of a lane, one int32: OPEN while every candidate so far was rejected;
# UNDECIDED when the first candidate not rejected was undecided, or when the window had none,
# or for a lane that is not fast (all three: unresolved); else it was accepted, and the
# state is ``k_off * 2^J_BITS + j`` (its offset from the mode and its index in the window). One
# int32 is one consumer of each classification, so XLA on CPU computes it once (with separate
# outputs it recomputed the classification for each). An accepted offset of 2^26 or more (only
# possible for n > 2^28) counts as undecided, so the packing cannot overflow: the exact path
# draws those lanes.
_J_BITS, _J_MASK = 4, 15  # window <= 16
_OPEN, _UNDECIDED = -(2**31), -(2**31) + 1
_MAX_OFF = 2**26


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
    stream = dataclasses.replace(stream, ptr=ptr0 + 2 * used)
    return k.astype(jnp.int32), stream, ~trivial & ~resolved


def _window_first(u, nf, pp, big, ptr0, L: int, W: int):
    """``(state, count)``: the fast-path state of the window at ``ptr0`` and its accepted count."""
    # The state is never OPEN; the count is unflipped (0 if none). Batched, the lanes are classified
    # in stages (_window_first_lanes).

    def per_lane(u, nf, pp, big, ptr0):
        mode = _mode(nf, pp, big)
        state = _first_range(
            _window(u, ptr0, 2 * W, L)[:, None],
            (nf, pp, big, mode),
            ptr0,
            L,
            0,
            W,
            jnp.full((1,), _OPEN, jnp.int32),
        )
        state = jnp.where(_is_fast(nf, pp, big) & (state != _OPEN), state, _UNDECIDED)
        return state[0], _first_count(mode, state)[0]

    return _lane_batched(per_lane, _window_first_lanes, L, W)(u, nf, pp, big, ptr0)


@jit(static_argnames=("L", "W", "rates"))
def _window_first_lanes(
    u, nf, pp, big, ptr0, *, L: int, W: int, rates: tuple[float, float] = OPEN_RATES
):
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
    state = _first_range(
        _lane_rows(u, ptr0, L, 2),
        (nf, pp, big, mode),
        ptr0,
        L,
        0,
        1,
        jnp.full((B,), _OPEN, jnp.int32),
        loop="opaque",
    )
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
        st = _first_range(
            w,
            (nf[g], pp[g], big[g], mode[g]),
            ptr0[g],
            L,
            lo,
            hi,
            jnp.where(slots < size, _OPEN, _UNDECIDED),
            loop,
        )
        stages.append((prev, is_open, slots))
        lanes, prev = g, st
    state = jnp.where(prev == _OPEN, _UNDECIDED, prev)  # every candidate rejected
    for before, is_open, slots in reversed(stages):  # back through the buffers
        state = jnp.where(is_open, _UNDECIDED, before).at[slots].set(state, mode="drop")
    return state, _first_count(mode, state)


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
        code = jnp.where(
            acc, k_off.astype(jnp.int32) * (1 << _J_BITS) + j, jnp.where(rej, _OPEN, _UNDECIDED)
        )
        return jnp.where(state == _OPEN, code, state)

    if loop == "while":
        return jax.lax.while_loop(
            lambda c: (c[0] < hi) & jnp.any(c[1] == _OPEN),
            lambda c: (c[0] + 1, body(c[0], c[1])),
            (jnp.int32(lo), state),
        )[1]
    if loop == "opaque":  # a pointer is never negative: the bound is hi, at run time (the
        # first lane's pointer, or none: a batch of zero lanes has no first lane)
        return jax.lax.fori_loop(lo, hi + jnp.minimum(jnp.ravel(ptr0)[:1].sum(), 0), body, state)
    return jax.lax.fori_loop(lo, hi, body, state)


def _first_count(mode, state):
    """The accepted candidate's unflipped count of a fast-path state (0 if none) under ``mode``."""
    return jnp.where(
        state > _UNDECIDED, mode.astype(jnp.int32) + jnp.right_shift(state, _J_BITS), 0
    )


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
    return (
        jnp.full((capacity,), B, jnp.int32)
        .at[jnp.where(mask, slot, capacity)]
        .set(jnp.arange(B, dtype=jnp.int32), mode="drop")
    )
