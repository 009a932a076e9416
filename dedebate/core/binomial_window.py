"""The exact draw's window classification: every candidate of a lane's window, batched.

:func:`_window_status` classifies the ``window`` candidates of a lane (accepted, rejected or
undecided, and their counts); under ``vmap`` its batch rule :func:`_window_status_lanes` spends
work on later candidates only for the few lanes the first ones leave unsettled.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from dedebate.core.binomial_btrs import _classify, _is_fast, _safe_btrs
from dedebate.programs import jit

# The exact path's batch rule (``_window_status_lanes``): candidates every lane classifies before
# the lanes they leave unsettled (about 0.12^FIRST of them) go on to the rest of the window,
# COMPACT lanes at a time.
FIRST, COMPACT = 3, 64


def _window(u, ptr0, size: int, L: int):
    """``size`` entries of the stream block ``u`` from ``ptr0`` (clamped to the block)."""
    return jax.lax.dynamic_slice(u, (jnp.minimum(ptr0, L),), (size,))


def _lane_batched(per_lane, lanes, L: int, W: int):
    """``per_lane(u, nf, pp, big, ptr0)`` (one lane, 2 outputs) with ``lanes`` as batch rule."""
    # Under vmap, lanes(u, nf, pp, big, ptr0, L=L, W=W) gets every argument with a leading lane axis
    # (unbatched ones broadcast).
    f = jax.custom_batching.custom_vmap(per_lane)

    @f.def_vmap
    def f_vmap(axis_size, in_batched, *args):
        batched = [
            x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
            for x, b in zip(args, in_batched)
        ]
        return lanes(*batched, L=L, W=W), (True, True)

    return f


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


def _window_status(u, nf, pp, big, ptr0, L: int, W: int):
    """Statuses and counts of the W window candidates read from the block ``u`` at ``ptr0``."""
    # Slots a settled lane never needs may be left undecided (0): only the first accepted candidate
    # and the undecided ones before it matter downstream, and both are always classified.

    def per_lane(u, nf, pp, big, ptr0):
        z = jnp.zeros((W,), jnp.int32)
        return _status_range(_window(u, ptr0, 2 * W, L), nf, pp, big, ptr0, L, 0, W, z, z)

    return _lane_batched(per_lane, _window_status_lanes, L, W)(u, nf, pp, big, ptr0)


@jit(static_argnames=("L", "W"))
def _window_status_lanes(u, nf, pp, big, ptr0, *, L: int, W: int):
    """The batch rule of :func:`_window_status` (every argument with a leading lane axis)."""
    # Every lane classifies its first FIRST candidates; the few lanes that these do not settle
    # classify the rest COMPACT at a time (_open_lanes), so the batch does not pay for the rare
    # lane. Jitted so that the loops' batching, which runs the rule again on each of its passes,
    # traces it once per shape.
    B = u.shape[0]
    fast = _is_fast(nf, pp, big)
    first = min(FIRST, W)
    z = jnp.zeros((B, W), jnp.int32)

    def stage(u, nf, pp, big, ptr0, s0, c0, lo, hi):
        # pad the short window of stage A to 2W entries (unread beyond 2 * hi)
        win = _window(u, ptr0, 2 * hi, L)
        win = jnp.concatenate([win, jnp.zeros((2 * (W - hi),), win.dtype)])
        return _status_range(win, nf, pp, big, ptr0, L, lo, hi, s0, c0)

    status, counts = jax.vmap(functools.partial(stage, lo=0, hi=first))(u, nf, pp, big, ptr0, z, z)
    if W <= FIRST:
        return status, counts
    need = ~jax.vmap(_settled)(status, fast)

    def chunk(c):
        status, counts, need = c
        idx, ok = _open_lanes(need, COMPACT)
        g = jnp.where(ok, idx, 0)
        st, ct = jax.vmap(functools.partial(stage, lo=first, hi=W))(
            u[g], nf[g], pp[g], big[g], ptr0[g], status[g], counts[g]
        )
        dst = jnp.where(ok, idx, B)
        return (
            status.at[dst].set(st, mode="drop"),
            counts.at[dst].set(ct, mode="drop"),
            need.at[dst].set(False, mode="drop"),
        )

    status, counts, _ = jax.lax.while_loop(lambda c: jnp.any(c[2]), chunk, (status, counts, need))
    return status, counts


def _open_lanes(is_open, blocks: int):
    """``(idx, ok)``: the first open lane of each of ``blocks`` blocks (``ok``: it has one)."""
    # Two reductions; a block with several open lanes gives the next one on the next pass, after the
    # caller has closed this one.
    B = is_open.shape[0]
    blocks = min(blocks, B)
    size = -(-B // blocks)
    grid = jnp.pad(is_open, (0, blocks * size - B)).reshape(blocks, size)
    return jnp.arange(blocks) * size + jnp.argmax(grid, axis=1), jnp.any(grid, axis=1)
