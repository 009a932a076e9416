"""The stochastic-oracle debate of Figure 1 / Theorem 6.2, Lean's version: one debate (spec DED 5).

Alice argues for output 1, Bob for 0, Vera judges. For steps n = 0 .. T-1 Alice claims
``p ~ P[y_n = 1 | prefix]``, Bob continues (the protocol draws ``y_n = 1[u < clamp01(p)]``) or
aborts (Vera judges (prefix, p) once, from N_V oracle samples). :func:`play` is one debate, pure:
a ``lax.scan`` over chunks of steps with a ``stopped`` mask, vmappable over trials, machines and
parameters; honest estimates are exact in distribution (one ``Binomial(N, pi)`` count per role,
:mod:`dedebate.core.binomial`). ``DebateStatic.bob_draw`` picks how Bob's estimate is drawn
(``count``, ``decision``, ``lazy``: spec DED 5.5). Parameters: :mod:`.stochastic_constants`;
the players' interface: :mod:`.stochastic_interface`; many trials: :mod:`.stochastic_batch`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from dedebate.core.binomial import (
    DEFAULT_WINDOW,
    block_bits,
    block_uniforms,
    decide_outside,
    decision_gate,
    stream_binomial,
    stream_binomial_fast,
    stream_length,
    uniform_stream,
)
from dedebate.programs import jit
from dedebate.protocols.stochastic_constants import (  # noqa: F401  (re-exported)
    INT32_MAX,
    DebateParams,
    LeanParams,
    lean_defaults,
    paper_constants,
)
from dedebate.protocols.stochastic_interface import (  # noqa: F401  (re-exported)
    AlicePlayer,
    BobPlayer,
    Vera,
    checker_interval,
    make_vera,
    two_party_coin,
)
from dedebate.protocols.stochastic_lazy import play_lazy
from dedebate.protocols.stochastic_scan import (
    ROLE_ALICE,
    ROLE_ALICE_EST,
    ROLE_BOB,
    ROLE_BOB_EST,
    ROLE_COIN,
    DebateCarry,
    Outcome,
    StepView,
    checker_accepts,  # noqa: F401  (re-exported)
    scan_debate,
)


# =================================================================================================
# Play
# =================================================================================================
@dataclasses.dataclass(frozen=True)
class DebateStatic:
    """Static structure of a debate (hashable; a jit static argument).

    * ``T`` -- steps (must equal ``machine.T``);
    * ``chunk`` -- steps whose randomness is drawn at once (memory per trial ~ 12 * chunk floats);
    * ``window`` -- binomial candidates classified per draw (:mod:`dedebate.core.binomial`);
    * ``two_party_coin`` -- the paper's coin ``u = frac(z_A + z_B)`` instead of the trusted one;
    * ``estimator`` -- ``"binomial"`` (exact count draws, default) or ``"calls"`` (N real
      Bernoulli calls per estimate, in blocks of ``call_block``; for black-box samplers);
    * ``bob_draw`` -- ``"count"`` (default: Bob's count is drawn and shown to his ``cont``) or
      ``"decision"`` (for checker Bobs with ``continue_interval``, e.g. honest Bob: his decision
      is drawn directly, exact in distribution, see :func:`play`; other uniforms than "count")
      or ``"lazy"`` (honest Alice vs a checker Bob, trusted coin: the coin first, Alice's count
      and Bob's decision only where they can matter, see
      :mod:`dedebate.protocols.stochastic_lazy`; exact in distribution, one 32-bit word per step
      but for a ``2^-lazy_gate_log2`` share of the steps);
    * ``lazy_gate_log2`` -- G of the lazy mode, in [0, 24] (24: default; smaller values send
      more steps down the exact rare path, e.g. to test it).
    """

    T: int
    chunk: int = 64
    window: int = DEFAULT_WINDOW
    two_party_coin: bool = False
    estimator: str = "binomial"
    call_block: int = 1024
    bob_draw: str = "count"
    lazy_gate_log2: int = 24

    def __post_init__(self):
        if not (isinstance(self.T, int) and self.T >= 1):
            raise ValueError(f"T={self.T!r}: the number of steps must be an integer >= 1")
        if not (isinstance(self.chunk, int) and self.chunk >= 1):
            raise ValueError(f"chunk={self.chunk!r}: must be an integer >= 1")
        if not (isinstance(self.window, int) and 1 <= self.window <= 16):
            raise ValueError(f"window={self.window!r}: must be an integer in [1, 16]")
        if self.estimator not in ("binomial", "calls"):
            raise ValueError(
                f"estimator={self.estimator!r}: allowed are 'binomial' (exact "
                "count draws) and 'calls' (N real Bernoulli calls)"
            )
        if self.bob_draw not in ("count", "decision", "lazy"):
            raise ValueError(
                f"bob_draw={self.bob_draw!r}: allowed are 'count' (draw Bob's "
                "count), 'decision' (draw a checker Bob's decision) and 'lazy' "
                "(honest Alice vs a checker Bob: draw only what can matter)"
            )
        if self.bob_draw in ("decision", "lazy") and self.estimator != "binomial":
            raise ValueError(f"bob_draw={self.bob_draw!r} needs estimator='binomial'")
        if self.bob_draw == "lazy" and self.two_party_coin:
            raise ValueError("bob_draw='lazy' needs the trusted coin (two_party_coin=False)")
        if not (isinstance(self.lazy_gate_log2, int) and 0 <= self.lazy_gate_log2 <= 24):
            raise ValueError(
                f"lazy_gate_log2={self.lazy_gate_log2!r}: must be an integer in [0, 24]"
            )
        if not (isinstance(self.call_block, int) and self.call_block >= 1):
            raise ValueError(f"call_block={self.call_block!r}: must be an integer >= 1")

    @property
    def steps_per_chunk(self) -> int:
        """Steps per chunk: at most ``chunk``, balanced so the T + 1 iterations pad little."""
        n = -(-(self.T + 1) // self.chunk)
        return -(-(self.T + 1) // n)


def debate_static(T: int, **kw) -> DebateStatic:
    """The static half of a debate, validated."""
    return DebateStatic(T=int(T), **kw)


def _calls_count(key: jax.Array, n: jax.Array, p: jax.Array, block: int) -> jax.Array:
    """``n`` real Bernoulli(p) calls counted in blocks of ``block`` (O(n) work, O(block) memory)."""
    nb = (n + block - 1) // block

    def body(i, acc):
        u = jax.random.uniform(jax.random.fold_in(key, i), (block,))
        valid = i * block + jnp.arange(block) < n
        return acc + jnp.sum(valid & (u < p)).astype(jnp.int32)

    return jax.lax.fori_loop(0, nb, body, jnp.int32(0))


def _slots(resolve: bool):
    """``(counts, new pointers, unresolved)``: exact counts of the estimate slots."""
    # resolve=False: the window classification only, see
    # dedebate.core.binomial.stream_binomial_fast.

    def draw(streams, ns, ps):
        if resolve:
            ks, st = stream_binomial(streams, ns, ps)
            return ks, st.ptr, jnp.bool_(False)
        ks, st, un = stream_binomial_fast(streams, ns, ps)
        return ks, st.ptr, un

    # One jitted function of the lanes: the batch rule below runs again on every pass of the
    # scans' batching (their carries settle in a few passes), and jit traces it once per shape.
    draw_lanes = jit(jax.vmap(draw))

    @jax.custom_batching.custom_vmap
    def draw_slots(streams, ns, ps):
        return jax.vmap(draw)(streams, ns, ps)

    @draw_slots.def_vmap
    def draw_slots_vmap(axis_size, in_batched, streams, ns, ps):
        # Flatten (batch, slot) into one lane axis: XLA on CPU vectorises along the minor axis,
        # and a minor slot axis of size 2 would run several times slower.
        def flat(x, batched):
            x = x if batched else jnp.broadcast_to(x, (axis_size,) + x.shape)
            return x.reshape((-1,) + x.shape[2:])

        streams = jax.tree.map(flat, streams, in_batched[0])
        ns, ps = flat(ns, in_batched[1]), flat(ps, in_batched[2])
        out = draw_lanes(streams, ns, ps)
        return tuple(x.reshape(axis_size, -1) for x in out), (True, True, True)

    return draw_slots


_DRAW_SLOTS = {True: _slots(True), False: _slots(False)}


def _where_tree(c, a, b):
    return jax.tree.map(lambda x, y: jnp.where(c, x, y), a, b)


def play(
    spec: DebateStatic, machine: Any, alice: AlicePlayer, bob: BobPlayer, vera: Vera, key: jax.Array
) -> Outcome:
    """Play one debate on ``machine`` (spec DED 5.1), exact in distribution.

    ``machine.T == spec.T``. Every argument except ``spec`` is a pytree, so ``vmap`` works over
    trials (keys), machines, players (e.g. adversary parameters, sample counts) and Vera.
    """
    return _play(spec, machine, alice, bob, vera, key, True)[0]


def play_fast(
    spec: DebateStatic, machine: Any, alice: AlicePlayer, bob: BobPlayer, vera: Vera, key: jax.Array
) -> tuple[Outcome, jax.Array]:
    """``(outcome, unresolved)``: :func:`play` without the rare exact fall-back loops of its draws.

    Where ``unresolved`` is true the outcome is invalid and the trial must be replayed with
    :func:`play` (same key: the replay is the exact result); everywhere else the outcome equals
    :func:`play`'s. :func:`dedebate.protocols.stochastic_batch.run_trials` does this bookkeeping.
    """
    return _play(spec, machine, alice, bob, vera, key, False)


def _play(
    spec: DebateStatic,
    machine: Any,
    alice: AlicePlayer,
    bob: BobPlayer,
    vera: Vera,
    key: jax.Array,
    resolve: bool,
) -> tuple[Outcome, jax.Array]:
    """The debate (see :func:`play`): ``(outcome, unresolved)``."""
    # Vera judges in the iteration after the abort (so the scan runs T + 1 iterations), drawing her
    # count in the estimate slot Alice no longer uses: one binomial draw site serves everyone.
    if spec.bob_draw == "lazy":
        return play_lazy(spec, machine, alice, bob, vera, key, resolve)
    if machine.T != spec.T:
        raise ValueError(f"machine.T={machine.T} but spec.T={spec.T}: they must agree")
    T, C, W = spec.T, spec.steps_per_chunk, spec.window
    L = stream_length(C, W)
    role = [jax.random.fold_in(key, r) for r in range(6)]
    decide = spec.bob_draw == "decision" and bob.samples
    if decide and not hasattr(bob, "continue_interval"):
        raise ValueError(
            f"bob_draw='decision' needs a checker Bob with continue_interval "
            f"(e.g. HonestBob), not {type(bob).__name__}"
        )
    # Estimate slots: slot 0 = Alice's estimate (if she samples), then Vera's after an abort;
    # slot 1 = Bob's estimate (if he samples). In "decision" mode the fast path draws no count
    # for Bob, and the exact path uses his count only where the decision is not drawn directly.
    slot_roles = [ROLE_ALICE_EST] + (
        [ROLE_BOB_EST] if bob.samples and (resolve or not decide) else []
    )
    n_alice = jnp.asarray(alice.n_samples, jnp.int32) if alice.samples else jnp.int32(0)
    n_bob = jnp.asarray(bob.n_samples, jnp.int32) if bob.samples else jnp.int32(0)
    n_vera = jnp.asarray(vera.n_samples, jnp.int32)

    def chunk_body(carry, ci):
        ck = [jax.random.fold_in(k, ci) for k in role]
        # uniforms from both words of each threefry block (half the hashing of random.uniform)
        coin = block_uniforms(ck[ROLE_COIN], C)
        ua = block_uniforms(ck[ROLE_ALICE], 2 * C).reshape(C, 2)  # [claim randomness, coin share]
        ub = block_uniforms(ck[ROLE_BOB], 2 * C).reshape(C, 2)
        if spec.estimator == "binomial":
            streams = [uniform_stream(ck[r], L, W) for r in slot_roles]
            stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *streams)
        if decide:  # Bob's decision: 32 bits per step (+ a uniform on the rare exact path)
            bob_bits = block_bits(jax.random.fold_in(ck[ROLE_BOB_EST], 2), C)
            bob_u2 = block_uniforms(jax.random.fold_in(ck[ROLE_BOB_EST], 3), C)

        def step(cp, j):
            c, ptrs = cp
            state, vera_due, p_ab, unres = c.state, c.vera_due, c.p_ab, c.unresolved
            t = ci * C + j
            active = (t < T) & ~c.stopped
            ts = jnp.minimum(t, T - 1)
            pi = jnp.clip(machine.prob(state, ts), 0.0, 1.0).astype(jnp.float32)
            view = StepView(t=ts, pi=pi, prev_bit=c.prev, ones=c.ones, state=state, T=T)
            # ---- estimates: exact counts for the roles that sample (and Vera, when due) ----
            n0 = jnp.where(vera_due, n_vera, jnp.where(active, n_alice, 0))
            p0 = jnp.where(vera_due, c.pi_ab, pi)
            two = len(slot_roles) == 2
            ns = jnp.stack([n0] + ([jnp.where(active, n_bob, 0)] if two else []))
            ps = jnp.stack([p0] + ([pi] if two else []))
            if spec.estimator == "binomial":
                ks, ptrs, un = _DRAW_SLOTS[resolve](stacked.replace(ptr=ptrs), ns, ps)
                unres = unres | jnp.any(un)
            else:
                ks = jnp.stack(
                    [
                        _calls_count(jax.random.fold_in(ck[r], j), ns[i], ps[i], spec.call_block)
                        for i, r in enumerate(slot_roles)
                    ]
                )
            count_a = ks[0]
            count_b = ks[1] if len(slot_roles) == 2 else jnp.int32(0)
            vera_n = c.vera_n + jnp.where(vera_due, ns[0], 0)  # the samples her draw used
            vera_count = jnp.where(vera_due, count_a, c.vera_count)  # judged after the scan
            # ---- Alice claims, Bob continues or aborts, the coin ----
            p = jnp.asarray(alice.claim(view, count_a, ua[j, 0]), jnp.float32)
            if decide:
                cont, unres = _bob_decision(
                    view,
                    p,
                    bob,
                    n_bob,
                    active,
                    bob_bits[j],
                    bob_u2[j],
                    count_b,
                    ub[j, 0],
                    unres,
                    resolve,
                )
            else:
                cont = jnp.asarray(bob.cont(view, p, count_b, ub[j, 0]), bool)
            if spec.two_party_coin:
                za = alice.coin_share(view, p, ua[j, 1])
                zb = bob.coin_share(view, p, ub[j, 1])
                u = two_party_coin(za, zb)
            else:
                u = coin[j]
            bit = (u < jnp.clip(p, 0.0, 1.0)).astype(jnp.int32)
            go = active & cont
            abort = active & ~cont
            c = DebateCarry(
                state=_where_tree(go, machine.advance(state, ts, bit), state),
                stopped=c.stopped | abort,
                last=jnp.where(go, bit, c.last),
                rounds=c.rounds + active.astype(jnp.int32),
                prev=jnp.where(go, bit, c.prev),
                ones=c.ones + jnp.where(go, bit, 0),
                p_ab=jnp.where(abort, p, p_ab),
                pi_ab=jnp.where(abort, pi, c.pi_ab),
                t_ab=jnp.where(abort, t, c.t_ab),
                vera_due=abort,
                vera_count=vera_count,
                vera_n=vera_n,
                unresolved=unres,
            )
            return (c, ptrs), None

        ptr0 = jnp.zeros((len(slot_roles),), jnp.int32)
        (carry, _), _ = jax.lax.scan(step, (carry, ptr0), jnp.arange(C))
        return carry, None

    return scan_debate(chunk_body, machine, T, C, alice, bob, vera)


def _bob_decision(view, p, bob, n_bob, active, bits, u2, count, u, unres, resolve):
    """A checker Bob's decision drawn directly (``bob_draw="decision"``), exact in distribution."""
    # He aborts iff his count X ~ Binomial(N_B, pi) falls outside the interval he accepts, an event
    # of probability P_out. Where Hoeffding certifies P_out <= 2^-24 (the gate), one draw of 32 bits
    # decides it (dedebate.core.binomial.decide_outside), computing P_out only on the rare bits
    # below 2^8; elsewhere (a lie near his threshold) his count, drawn from his own stream as in
    # "count" mode, decides. Both branches are exact in distribution, and the branch is a function
    # of the state, so the decision is. Without resolve the rare and ungated steps only mark unres
    # (count is then not drawn).
    k_lo, k_hi, cert = bob.continue_interval(p)
    gate = cert & decision_gate(n_bob, view.pi, k_lo, k_hi)
    outside, rare = decide_outside(
        bits, u2, n_bob, view.pi, k_lo, k_hi, active & gate, resolve=resolve
    )
    if not resolve:
        return jnp.bool_(True), unres | (active & (~gate | rare))
    by_count = jnp.asarray(bob.cont(view, p, count, u), bool)
    return jnp.where(gate, ~outside, by_count), unres


def play_trials(
    spec: DebateStatic,
    machine: Any,
    alice: AlicePlayer,
    bob: BobPlayer,
    vera: Vera,
    keys: jax.Array,
) -> Outcome:
    """``vmap(play)`` over typed trial keys ``[n]`` (the rest shared): outcomes ``[n]``."""
    return jax.vmap(play, in_axes=(None, None, None, None, None, 0))(
        spec, machine, alice, bob, vera, keys
    )


play_trials_jit = jit(play_trials, static_argnums=0)


def trial_keys(key: jax.Array, n: int, offset: int = 0) -> jax.Array:
    """Typed keys of trials ``offset .. offset + n - 1`` (``n`` static): ``fold_in(key, i)``.

    A trial's key does not depend on how many trials ran beside it.
    """
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(offset + jnp.arange(n))
