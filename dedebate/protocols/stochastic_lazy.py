"""Lazy exact draws for honest-vs-checker debates (``DebateStatic(bob_draw="lazy")``, spec DED 5.9).

The coin first, then Alice's count and Bob's decision only where Hoeffding cannot certify that Bob
continues: the same joint law of ``(y, abort, X on an abort)`` as the default mode, other per-key
outcomes. :func:`lazy_level` certifies a level G once per debate, :func:`lazy_gate` /
:func:`typical_set` a step, :func:`cheap_path` decides all but a ``2^-G`` share of the certified
steps from one word, and :func:`rare_step` draws the rest exactly in :func:`play_lazy` (with
``resolve``; without, they mark the trial unresolved for ``run_trials`` to replay).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from dedebate.core.binomial import (
    binom_lower_tail,
    binom_lower_tail_sample,
    block_bits,
    outside_probability,
    sample_binomial,
)
from dedebate.protocols.stochastic_scan import (
    ROLE_ALICE_EST,
    ROLE_COIN,
    DebateCarry,
    StepView,
    debate_chunks,
    outcome_of,
    scan_debate,
)

LAZY_GATE_LOG2 = 24  # default G: the one-word path decides all but 2^-24 of the certified steps
FLOAT_SLACK = 2e-6  # covers float32 rounding of Bob's checker |p - Z/N_B| < tau and of the gate
HOEFFDING_MARGIN = 1.01  # relative margin on the float32 Hoeffding exponents


def lazy_level(
    n_alice: jax.Array, n_bob: jax.Array, tau_bob: jax.Array, max_log2: int = LAZY_GATE_LOG2
):
    """The certificate of step 2, for every pi at once: ``(G, delta, ok)``.

    ``G`` is the largest level in ``[0, max_log2]`` that the sample counts can certify (-1 if
    none), ``delta`` Alice's half-width at that level (``S = [ceil(N_A (pi - delta)),
    floor(N_A (pi + delta))]``, see :func:`typical_set`) and ``ok`` the rigorous check that each
    of four one-sided Hoeffding bounds is at most ``2^-(G+2)``, i.e. reaches the exponent
    ``need = (G + 2) ln 2`` (times :data:`HOEFFDING_MARGIN`):

    * ``Y ~ Binomial(N_A - 1, pi)`` at or below ``lo - 1`` (the lower tail of ``X = Y + y`` at
      y = 0) and at or above ``hi`` (the upper tail at y = 1): both edges lie at least
      ``N_A delta - 1 - N_A 2^-23`` from the mean ``(N_A - 1) pi`` (the ceil/floor and float32
      rounding of ``N_A (pi -+ delta)``), so ``exp(-2 d^2 / (N_A - 1))`` must reach the bound;
    * Bob's estimate ``Z / N_B`` at distance ``e = tau - FLOAT_SLACK - delta - 2^-22`` or more
      from pi (every abort when X is in S: the claim ``X / N_A`` is within ``delta + 2^-23`` of
      pi, and the checker's float32 rounding is in the slack): ``exp(-2 N_B e^2)``.

    Depends on N_A, N_B and tau only, so a debate computes it once; only ``0 < pi < 1`` is
    checked per step.
    """
    na = jnp.asarray(n_alice, jnp.int32)
    nb = jnp.asarray(n_bob, jnp.int32)
    naf = jnp.maximum(na, 2).astype(jnp.float32)
    nbf = jnp.maximum(nb, 1).astype(jnp.float32)
    tau = jnp.asarray(tau_bob, jnp.float32)
    n1 = naf - 1.0
    unit = math.log(2.0) * HOEFFDING_MARGIN
    # delta(s) = (4 + 1.005 s sqrt(n1 / 2)) / N_A and Bob's distance 1.005 s / sqrt(2 N_B) must fit
    # in tau - slack: the largest s = sqrt(need) that fits, then the largest G below it.
    room = tau - FLOAT_SLACK - 4.0 / naf
    s_max = room / (1.005 * (jnp.sqrt(n1 / 2.0) / naf + 1.0 / jnp.sqrt(2.0 * nbf)))
    need_max = jnp.where(room > 0, s_max * s_max, 0.0)
    g = jnp.clip(jnp.floor((need_max - 1e-3) / unit) - 2.0, -1.0, float(max_log2))
    need = (g + 2.0) * unit + 1e-3
    delta = (4.0 + 1.005 * jnp.sqrt(need * n1 / 2.0)) / naf
    d = naf * delta - 1.0 - naf * 2.0**-23
    e = tau - FLOAT_SLACK - delta - 2.0**-22
    ok = (
        (g >= 0)
        & (na >= 2)
        & (nb >= 1)
        & (d > 0)
        & (2.0 * d * d >= need * n1 * (1 + 1e-5))
        & (e > 0)
        & (2.0 * nbf * e * e >= need * (1 + 1e-5))
    )
    return g.astype(jnp.int32), delta, ok


def typical_set(pi: jax.Array, n_alice: jax.Array, delta: jax.Array):
    """Alice's typical counts int32 ``(lo, hi)`` at a step, clipped to [-1, N_A + 1].

    ``lo = ceil(N_A (pi - delta))``, ``hi = floor(N_A (pi + delta))``, computed in float32.
    """
    naf = jnp.maximum(jnp.asarray(n_alice, jnp.int32), 2).astype(jnp.float32)
    pi = jnp.asarray(pi, jnp.float32)
    lo = jnp.clip(jnp.ceil(naf * (pi - delta)), -1.0, naf + 1.0).astype(jnp.int32)
    hi = jnp.clip(jnp.floor(naf * (pi + delta)), -1.0, naf + 1.0).astype(jnp.int32)
    return lo, hi


def lazy_gate(
    pi: jax.Array,
    n_alice: jax.Array,
    n_bob: jax.Array,
    tau_bob: jax.Array,
    level=None,
    max_log2: int = LAZY_GATE_LOG2,
):
    """``(gate, lo, hi, G)``: ``gate = ok and 0 < pi < 1`` at a step, typical set ``[lo, hi]``."""
    g, delta, ok = lazy_level(n_alice, n_bob, tau_bob, max_log2) if level is None else level
    pi = jnp.asarray(pi, jnp.float32)
    lo, hi = typical_set(pi, n_alice, delta)
    return ok & (pi > 0.0) & (pi < 1.0), lo, hi, g


def cheap_path(word: jax.Array, pi: jax.Array, g: jax.Array):
    """``(cheap, y)``: the one-word case of a certified step (spec DED 5.9, step 3).

    ``cheap`` iff ``G >= 1`` and ``word >= cut = 2^(32-G)`` (Bob continues), and then the coin
    ``y = 1[word - cut < pi (2^32 - cut)]`` (int32, compared in integers). ``2^32 - cut`` is exact
    in float32 for G <= 24, its product with pi is rounded to float32 (2^-24 relative: at most
    2^-24 in P(y = 1)) and floored.
    """
    g = jnp.asarray(g, jnp.int32)
    shift = jnp.clip(32 - g, 8, 31).astype(jnp.uint32)
    cut = jnp.left_shift(jnp.uint32(1), shift)
    span = jnp.float32(2.0**32) - cut.astype(jnp.float32)
    thr = jnp.floor(jnp.clip(jnp.asarray(pi, jnp.float32), 0.0, 1.0) * span)
    y = (word - cut) < thr.astype(jnp.uint32)
    return (g >= 1) & (word >= cut), y.astype(jnp.int32)


def rare_step(
    key: jax.Array,
    word: jax.Array,
    pi: jax.Array,
    lo: jax.Array,
    hi: jax.Array,
    g: jax.Array,
    alice: Any,
    bob: Any,
    view: Any,
    active: jax.Array,
    z_bob: jax.Array | None = None,
    z_key: jax.Array | None = None,
):
    """``(y, cont, p)``: steps 1-3 for a certified step whose word is below ``2^(32-G)``.

    Alice's claim ``p = X / N_A`` is drawn only here. ``z_bob`` is a fresh ``Binomial(N_B, pi)``
    count, used where Bob's decision is drawn from his count (residual component); or give ``z_key``
    instead (exactly one of them): then ``z_bob = sample_binomial(z_key, N_B, pi)`` is drawn in the
    same loop as Alice's count (one binomial draw site to compile, same values). ``active`` false:
    no work (values unused). The composition of :func:`_rare_begin`, :func:`_draw_loop` and
    :func:`_rare_end`, which :func:`play_lazy` runs with its other counts drawn in the same loop
    (one binomial draw site per step).
    """
    if (z_bob is None) == (z_key is None):
        raise ValueError("rare_step needs exactly one of z_bob (Bob's count) and z_key (its key)")
    r = _rare_begin(key, word, pi, lo, hi, g, alice, active)
    if z_key is None:
        y_bulk, _ = _draw_loop(r, pi, lo, hi)
    else:
        n_bob = jnp.asarray(bob.n_samples, jnp.int32)
        y_bulk, (z_bob,) = _draw_loop(r, pi, lo, hi, [z_key], [n_bob], [pi])
    return _rare_end(r, y_bulk, pi, g, alice, bob, view, z_bob)


def _rare_begin(key, word, pi, lo, hi, g, alice, active) -> dict:
    """:func:`rare_step` before Alice's count: the coin, the component and, off S, the tail draw."""
    # The rest needs X | X in S (_draw_loop).
    k_y, k_w, k_side, k_tail, k_bulk, k_bu = jax.random.split(key, 6)
    na = jnp.asarray(alice.n_samples, jnp.int32)
    n1 = na - 1
    e_scaled = 0.5  # e = 2^-(G+1) in units of 2^-G
    y = (jax.random.uniform(k_y) < pi).astype(jnp.int32)
    # v in units of 2^-G: (word + w) 2^-32 * 2^G, uniform on [0, 1) given the rare word
    gf = jnp.asarray(g, jnp.float32)
    v = (word.astype(jnp.float32) + jax.random.uniform(k_w)) * jnp.exp2(gf - 32.0)
    resid = active & (v < e_scaled)
    # Residual component: X off S with probability q / e (q: the exact tails of Y).
    y_lo = lo - y - 1  # X < lo  <=>  Y <= y_lo
    y_hi = hi - y + 1  # X > hi  <=>  Y >= y_hi
    # each pair of tail walks below runs as one walk vmapped over the two sides (one loop to
    # compile; the values are those of the two walks)
    q_lo, q_hi = jax.vmap(binom_lower_tail, (0, None, 0, 0))(
        jnp.stack([y_lo, n1 - y_hi]),
        n1,
        jnp.stack([pi, 1.0 - pi]),
        jnp.stack([resid, resid & (y_hi <= n1)]),
    )
    scale = jnp.exp2(gf + 1.0)  # 1 / e
    u_side = jax.random.uniform(k_side)
    off = resid & (u_side < (q_lo + q_hi) * scale)
    low_side = u_side < q_lo * scale
    u_tail = jax.random.uniform(k_tail)
    y_low, y_hi_tail = jax.vmap(binom_lower_tail_sample, (0, None, 0, 0, 0))(
        jnp.stack([y_lo, n1 - y_hi]),
        n1,
        jnp.stack([pi, 1.0 - pi]),
        jnp.stack([u_tail * q_lo, u_tail * q_hi]),
        jnp.stack([off & low_side, off & ~low_side]),
    )
    y_up = n1 - y_hi_tail
    return {
        "y": y,
        "v": v,
        "resid": resid,
        "off": off,
        "low_side": low_side,
        "y_low": y_low,
        "y_up": y_up,
        "need_bulk": active & ~off,
        "k_bulk": k_bulk,
        "k_bu": k_bu,
        "n1": n1,
        "active": active,
    }


def _draw_loop(r: dict, pi, lo, hi, keys=None, ns=None, ps=None):
    """``(Y, counts)``: Alice's typical count and the slots' counts, from one draw site."""
    # Y | lo <= Y + y <= hi by rejection from the binomial draws sample_binomial(fold_in(k_bulk, i),
    # N_A - 1, pi), i = 0, 1, ... (acceptance >= 1 - 2^-(G+1)), and, first, the counts
    # sample_binomial(keys[s], ns[s], ps[s]) for the slots s of keys (if given): one while_loop
    # around one draw site (each draw is lane-local, so its value does not depend on where it is
    # drawn). Y = lo - y - 1 (outside S) where no typical draw is needed.
    y, need = r["y"], r["need_bulk"]
    m = 0 if keys is None else len(ns)
    impl = jax.random.key_impl(r["k_bulk"])
    slot_data = [jax.random.key_data(k) for k in ([] if keys is None else keys)]
    counts0 = jnp.zeros((m,), jnp.int32)

    def cond(c):
        i, ky, _ = c
        return (i < m) | (need & ~((lo <= ky + y) & (ky + y <= hi)))

    def body(c):
        i, ky, counts = c
        bulk_key = jax.random.key_data(jax.random.fold_in(r["k_bulk"], i - m))
        kd, n, p = bulk_key, r["n1"], pi
        for s in range(m):  # the slot draws come first
            kd = jnp.where(i == s, slot_data[s], kd)
            n = jnp.where(i == s, ns[s], n)
            p = jnp.where(i == s, ps[s], p)
        k = sample_binomial(jax.random.wrap_key_data(kd, impl=impl), n, p)
        counts = jnp.where(jnp.arange(m) == i, k, counts)
        return i + 1, jnp.where(i >= m, k, ky), counts

    # Start outside S (Y = -1 - y), so the first candidate is drawn in the loop.
    _, y_bulk, counts = jax.lax.while_loop(cond, body, (jnp.int32(0), lo - y - 1, counts0))
    return y_bulk, counts


def _rare_end(r: dict, y_bulk, pi, g, alice, bob, view, z_bob, ungated=None):
    """:func:`rare_step` after Alice's count: her claim and Bob's decision."""
    # With ungated = (key, x), the lanes off the rare step (~r["active"]) draw the step as the
    # default mode does instead: Alice's claim on her count x and Bob's decision with fresh uniforms
    # from that key, then the coin on her claim. The inputs are selected per lane before one call of
    # each player (one copy of their code in the program).
    gf = jnp.asarray(g, jnp.float32)
    e_scaled = 0.5
    x = r["y"] + jnp.where(r["off"], jnp.where(r["low_side"], r["y_low"], r["y_up"]), y_bulk)
    u_a, u_b, y = jnp.float32(0.0), jax.random.uniform(r["k_bu"]), r["y"]
    if ungated is not None:
        k_c, k_ua, k_ub = jax.random.split(ungated[0], 3)
        rare = r["active"]
        x = jnp.where(rare, x, ungated[1])
        u_a = jnp.where(rare, u_a, jax.random.uniform(k_ua))
        u_b = jnp.where(rare, u_b, jax.random.uniform(k_ub))
    p = jnp.asarray(alice.claim(view, x, u_a), jnp.float32)
    if ungated is not None:
        y = jnp.where(rare, y, (jax.random.uniform(k_c) < jnp.clip(p, 0.0, 1.0)).astype(jnp.int32))
    # Bob: typical component -> u_B < a_X with the exact tails; residual -> his own fresh count.
    k_lo, k_hi, cert = bob.continue_interval(p)
    typical = r["active"] & ~r["resid"] & cert
    a_scaled = outside_probability(bob.n_samples, pi, k_lo, k_hi, typical) * jnp.exp2(gf)
    v_b = (r["v"] - e_scaled) / (1.0 - jnp.exp2(-gf - 1.0))
    # ~cert (the checker's interval not bracketed; not expected) also falls back to his count.
    cont_fresh = jnp.asarray(bob.cont(view, p, z_bob, u_b), bool)
    cont = jnp.where(typical, ~(v_b < a_scaled), cont_fresh)
    return y, cont, p


def check_players(alice: Any, bob: Any) -> None:
    """Check the mode is exact for the players: Alice claims ``count / N_A``, Bob is a checker."""
    if not getattr(alice, "honest_estimate", False):
        raise ValueError(
            f"bob_draw='lazy' needs an honest Alice who claims count / N_A "
            f"(honest_estimate = True, e.g. HonestAlice), not {type(alice).__name__}"
        )
    if not (hasattr(bob, "continue_interval") and hasattr(bob, "tau") and bob.samples):
        raise ValueError(
            f"bob_draw='lazy' needs a checker Bob with continue_interval and tau "
            f"(e.g. HonestBob), not {type(bob).__name__}"
        )


def play_lazy(
    spec: Any, machine: Any, alice: Any, bob: Any, vera: Any, key: jax.Array, resolve: bool
):
    """One debate in this mode: ``(outcome, unresolved)`` like the default mode's ``_play``.

    Randomness: the words come from the coin role's stream (``fold_in(role, chunk)``, one word
    per step); the exact draws of step ``t`` from ``fold_in(fold_in(estimate role, chunk), j)``.
    Without ``resolve`` only the one-word case is computed (no abort can happen there); every
    other step marks the trial unresolved. With ``resolve`` the exact draws sit behind a
    ``lax.cond``, which skips them for an unbatched trial (``run_trials`` replays trials one by
    one with ``lax.map``); under ``vmap`` both branches run.
    """
    check_players(alice, bob)
    if machine.T != spec.T:
        raise ValueError(f"machine.T={machine.T} but spec.T={spec.T}: they must agree")
    T, C = spec.T, spec.steps_per_chunk
    k_coin = jax.random.fold_in(key, ROLE_COIN)
    k_est = jax.random.fold_in(key, ROLE_ALICE_EST)
    n_alice = jnp.asarray(alice.n_samples, jnp.int32)
    n_bob = jnp.asarray(bob.n_samples, jnp.int32)
    g, delta, certified = lazy_level(n_alice, n_bob, bob.tau, spec.lazy_gate_log2)
    # At pi in {0, 1} the counts are 0 or N and the checker Bob's decision on honest Alice's
    # estimate depends on nothing else: both decisions once per trial, not per step.
    view0 = StepView(
        t=jnp.int32(0),
        pi=jnp.float32(0.0),
        prev_bit=jnp.int32(0),
        ones=jnp.int32(0),
        state=machine.init_state(),
        T=T,
    )

    # (vmapped over e in {0, 1}: one copy of the players' code in the program, not two)
    def end_cont(e):
        p_e = jnp.asarray(alice.claim(view0, e * n_alice, jnp.float32(0.0)), jnp.float32)
        return jnp.asarray(bob.cont(view0, p_e, e * n_bob, jnp.float32(0.0)), bool)

    cont_end = jax.vmap(end_cont)(jnp.arange(2, dtype=jnp.int32))

    def step_common(state, t, prev, ones, word):
        ts = jnp.minimum(t, T - 1)
        pi = jnp.clip(machine.prob(state, ts), 0.0, 1.0).astype(jnp.float32)
        view = StepView(t=ts, pi=pi, prev_bit=prev, ones=ones, state=state, T=T)
        gate = certified & (pi > 0.0) & (pi < 1.0)
        # pi in {0, 1}: every count is N pi, so the step is decided without randomness.
        trivial = (pi <= 0.0) | (pi >= 1.0)
        cont_t = jnp.where(pi >= 1.0, cont_end[1], cont_end[0])
        cheap_w, y_w = cheap_path(word, pi, g)
        cheap = (trivial & cont_t) | (gate & cheap_w)
        y = jnp.where(trivial, (pi >= 1.0).astype(jnp.int32), y_w)
        return ts, pi, view, gate, cheap, y

    def step_fast(c, tw):
        # No abort can happen here, and every step is a real one: no masks.
        state, last, prev, ones, unres = c
        t, word = tw
        ts, pi, view, gate, cheap, y = step_common(state, t, prev, ones, word)
        return (machine.advance(state, ts, y), y, y, ones + y, unres | ~cheap), None

    def exact_chunk(carry, ci):
        words = block_bits(jax.random.fold_in(k_coin, ci), C)
        k_chunk = jax.random.fold_in(k_est, ci)

        def step_exact(c, j):
            state, vera_due, p_ab = c.state, c.vera_due, c.p_ab
            t = ci * C + j
            active = (t < T) & ~c.stopped
            ts, pi, view, gate, cheap, y_c = step_common(state, t, c.prev, c.ones, words[j])
            cheap = active & cheap
            rare = active & ~cheap & gate
            other = active & ~cheap & ~gate
            kj = jax.random.fold_in(k_chunk, j)
            n_v = jnp.where(vera_due, jnp.asarray(vera.n_samples, jnp.int32), 0)

            def draw(_):
                # One draw site for every count of the step (:func:`_draw_loop`): Alice's
                # (ungated step), Bob's (ungated, or the rare step's residual part), Vera's
                # (due), then Alice's typical count of the rare step.
                ns = [jnp.where(other, n_alice, 0), jnp.where(rare | other, n_bob, 0), n_v]
                ks = [jax.random.fold_in(kj, i) for i in range(2, 5)]
                lo, hi = typical_set(pi, n_alice, delta)
                r = _rare_begin(jax.random.fold_in(kj, 0), words[j], pi, lo, hi, g, alice, rare)
                y_bulk, (x_u, z_b, z_v) = _draw_loop(r, pi, lo, hi, ks, ns, [pi, pi, c.pi_ab])
                # the rare step's end; the other lanes draw the coin and Bob's uniform fresh
                y_x, cont_x, p_x = _rare_end(
                    r,
                    y_bulk,
                    pi,
                    g,
                    alice,
                    bob,
                    view,
                    z_b,
                    ungated=(jax.random.fold_in(kj, 1), x_u),
                )
                return y_x, cont_x, p_x, z_v

            def skip(_):
                return jnp.int32(0), jnp.bool_(True), jnp.float32(0.0), jnp.int32(0)

            y_x, cont_x, p, z_v = jax.lax.cond(jnp.any(rare | other | vera_due), draw, skip, None)
            vera_count = jnp.where(vera_due, z_v, c.vera_count)  # judged after the scan
            y = jnp.where(cheap, y_c, y_x)
            cont = cheap | cont_x
            go = active & cont
            abort = active & ~cont
            state = jax.tree.map(
                lambda a, b: jnp.where(go, a, b), machine.advance(state, ts, y), state
            )
            return DebateCarry(
                state=state,
                stopped=c.stopped | abort,
                last=jnp.where(go, y, c.last),
                rounds=c.rounds + active.astype(jnp.int32),
                prev=jnp.where(go, y, c.prev),
                ones=c.ones + jnp.where(go, y, 0),
                p_ab=jnp.where(abort, p, p_ab),
                pi_ab=jnp.where(abort, pi, c.pi_ab),
                t_ab=jnp.where(abort, t, c.t_ab),
                vera_due=abort,
                vera_count=vera_count,
                vera_n=c.vera_n + n_v,
                unresolved=c.unresolved,
            ), None

        return jax.lax.scan(step_exact, carry, jnp.arange(C))

    if resolve:
        return scan_debate(exact_chunk, machine, T, C, alice, bob, vera)
    # The same words as the exact path (chunk ci, slot j), flattened and cut to the T steps.
    words = jax.vmap(lambda ci: block_bits(jax.random.fold_in(k_coin, ci), C))(
        jnp.arange(debate_chunks(T, C))
    )
    z = jnp.int32(0)
    f = jnp.bool_(False)
    init = (machine.init_state(), z, z, z, f)
    final, _ = jax.lax.scan(step_fast, init, (jnp.arange(T), words.reshape(-1)[:T]))
    _, last, _, _, unres = final
    return outcome_of(f, f, last, jnp.int32(T), jnp.int32(-1), alice, bob, z), unres
