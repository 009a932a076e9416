"""Exact value of a learned self-play pair by DP over the prefix tree (spec DED 5.1).

With ``V_T = last bit``, at prefix code c of step t (little-endian, as in
:func:`dedebate.machines.lipschitz.prefix_tree`)::

    V_t(c) = (1 - a) (clamp01(p) V_{t+1}(c + 2^t) + (1 - clamp01(p)) V_{t+1}(c)) + a * vera(p)

with Alice's claim p, Bob's abort probability a and Vera's acceptance vera(p). :func:`dp_value`
is differentiable (training uses it with a smooth Vera surrogate); :func:`measure_pair` is the
reported measurement: float64 on the host with the exact binomial Vera, plus reach-weighted
tracking, abort targeting, the value against honest Bob and both players' best responses
(exploitability: Bob's exact, Alice's bounded above and below). :func:`measure_pairs` measures a
seed-batch of trained pairs.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.selfplay_players import (
    AliceParams,
    BobParams,
    alice_claim,
    bob_abort,
    bob_as_zoo,
    level_codes,
    node_features,
)
from dedebate.agents.stochastic_players import honest_alice
from dedebate.exact.acceptance import acceptance_exact, checker_prob, real
from dedebate.programs import jit
from dedebate.protocols.stochastic import DebateParams, make_vera


def dp_value(p_levels, abort_levels, vera_levels):
    """``P[out = 1]`` by backward DP over the prefix tree (spec DED 5.1), differentiable.

    Per step t, ``[2^t]`` levels (little-endian prefix codes) of Alice's claims, Bob's abort
    probabilities (or scalars) and Vera's acceptance; jnp if any first-level input is a jax array,
    else numpy, dtype preserved.
    """
    xp = (
        jnp
        if any(isinstance(x, jax.Array) for x in (p_levels[0], abort_levels[0], vera_levels[0]))
        else np
    )
    T = len(p_levels)
    V: Any = None  # the values of level t + 1's prefixes (None below the last level)
    for t in range(T - 1, -1, -1):
        p, a, v = p_levels[t], abort_levels[t], vera_levels[t]
        coin = xp.clip(p, 0.0, 1.0)
        if V is None:
            v0, v1 = 0.0, 1.0
        else:
            half = V.shape[0] // 2
            v0, v1 = V[:half], V[half:]
        V = (1.0 - a) * (coin * v1 + (1.0 - coin) * v0) + a * v
    return V[0]


def reach_levels(p_levels, abort_levels):
    """Probability of reaching each prefix *and playing its step* (no abort before)."""
    xp = jnp if isinstance(p_levels[0], jax.Array) else np
    r = xp.ones((1,), dtype=p_levels[0].dtype)
    out = [r]
    for t in range(len(p_levels) - 1):
        coin = xp.clip(p_levels[t], 0.0, 1.0)
        go = r * (1.0 - abort_levels[t])
        r = xp.concatenate([go * (1.0 - coin), go * coin])
        out.append(r)
    return out


def level_inputs(levels: list[np.ndarray]) -> dict:
    """``{"pi", "t", "prev", "ones"}`` ``[2^T - 1]``, node ``2^t - 1 + c`` is prefix c."""
    T = len(levels)
    codes = level_codes(T)
    cat = np.concatenate
    return {
        "pi": jnp.asarray(cat([np.asarray(lv) for lv in levels]), jnp.float32),
        "t": jnp.asarray(cat([np.full(2**t, t) for t in range(T)]), jnp.int32),
        "prev": jnp.asarray(cat([c["prev"] for c in codes]), jnp.int32),
        "ones": jnp.asarray(cat([c["ones"] for c in codes]), jnp.int32),
    }


def split_levels(x):
    """Split a flat node array into its levels (static slices)."""
    n = x.shape[0] + 1
    T = n.bit_length() - 1
    return [x[2**t - 1 : 2 ** (t + 1) - 1] for t in range(T)]


def policy_nodes(alice: AliceParams, bob: BobParams, inputs: dict, unit, scale):
    """``(p, a)``: Alice's claims, Bob's abort probabilities at every prefix ``[2^T - 1]``."""
    pi, t = inputs["pi"], inputs["t"]
    T = bob.w.shape[-1]
    p = alice_claim(alice, node_features(t, pi, inputs["prev"], inputs["ones"], T), pi, unit)
    return p, bob_abort(bob, t, jnp.abs(p - pi), inputs["prev"], scale)


def policy_levels(alice: AliceParams, bob: BobParams, inputs: dict, unit, scale):
    """:func:`policy_nodes` split per level."""
    p, a = policy_nodes(alice, bob, inputs, unit, scale)
    return split_levels(p), split_levels(a)


_policy_nodes = jit(policy_nodes)


def probe_deviations(constants: DebateParams, n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """``(must_abort, must_not)``: ``n`` deviations in ``[b, 4b]`` and ``n`` in ``[0, s)``."""
    s, b = constants.s, constants.b
    return np.linspace(b, 4 * b, n), np.linspace(0.0, s, n, endpoint=False)


def alice_best_response_bounds(
    pis: list[np.ndarray],
    abort: list,
    n: int,
    tau: float,
    own: list[np.ndarray] | None = None,
    tol: float = 1e-6,
) -> tuple[float, float]:
    """``(lower, upper)`` bounds on Alice's best response to a fixed Bob, by branch and bound.

    Per level: ``pis[t]``; ``abort[t](d, node)``, Bob's abort probability at deviation ``d``;
    ``own[t]``, Alice's claims (optional, counted in ``lower``). Claim intervals are bounded above
    at the corners of the abort, the continuation and Vera's widened window, and halved while a
    bound exceeds the best claim found by more than ``tol`` (docs/doubly-efficient-debate.md, 5.7).
    """
    m = pis[-1].size
    lo = hi = (np.zeros(m), np.ones(m))  # the values after the last step: its bit
    for t in range(len(pis) - 1, -1, -1):
        v_lo, v_hi = _level_bounds(
            pis[t], abort[t], n, tau, lo, hi, None if own is None else own[t], tol
        )
        m = v_lo.size // 2
        lo, hi = (v_lo[:m], v_lo[m:]), (v_hi[:m], v_hi[m:])
    return float(v_lo[0]), float(v_hi[0])


def _level_bounds(pi, at, n, tau, lo_child, hi_child, own, tol, cells=256, max_cells=1 << 17):
    """One level of :func:`alice_best_response_bounds`: ``(lower, upper)`` per prefix."""
    m = pi.size
    every = np.arange(m)

    def cont(node, p, child):
        v0, v1 = child[0][node], child[1][node]
        return v0 + np.clip(p, 0.0, 1.0) * (v1 - v0)

    def value(node, p, child):
        a = at(np.abs(p - pi[node]), node)
        return (1.0 - a) * cont(node, p, child) + a * checker_prob(p, n, tau, pi[node])

    def upper(node, lo, hi):
        near, far = np.abs(lo - pi[node]), np.abs(hi - pi[node])
        inside = (lo <= pi[node]) & (pi[node] <= hi)
        d_lo, d_hi = np.where(inside, 0.0, np.minimum(near, far)), np.maximum(near, far)
        vera = checker_prob((lo + hi) / 2, n, tau + (hi - lo) / 2 + 1e-9, pi[node])
        corners = [
            c + a * (vera - c)
            for a in (at(d_lo, node), at(d_hi, node))
            for c in (cont(node, lo, hi_child), cont(node, hi, hi_child))
        ]
        return np.max(corners, axis=0)

    far = [np.full(m, -tau - 1e6), np.full(m, 1.0 + tau + 1e6)]  # claims near the tails' limits
    tried = far if own is None else [*far, own]
    with np.errstate(over="ignore"):  # Bob's abort far from pi: exp overflows to a = 0 or 1
        limit = at(np.full(m, 1e9), every)
        best_lo, best_hi = (
            np.max([value(every, p, c) for p in tried], 0) for c in (lo_child, hi_child)
        )
    bound = np.maximum(
        *[
            (1.0 - np.minimum(at(d, every), limit)) * v
            for d, v in ((pi + tau, hi_child[0]), (1.0 + tau - pi, hi_child[1]))
        ]
    )
    edges = np.linspace(-tau, 1.0 + tau, cells + 1)
    node, lo, hi = np.repeat(every, cells), np.tile(edges[:-1], m), np.tile(edges[1:], m)
    while True:
        mid = (lo + hi) / 2
        np.maximum.at(best_lo, node, value(node, mid, lo_child))
        np.maximum.at(best_hi, node, value(node, mid, hi_child))
        ub = upper(node, lo, hi)
        open_ = ub > best_hi[node] + tol
        np.maximum.at(bound, node[~open_], ub[~open_])
        node, lo, hi, mid, ub = (x[open_] for x in (node, lo, hi, mid, ub))
        if node.size == 0:
            break
        if 2 * node.size > max_cells:
            np.maximum.at(bound, node, ub)
            break
        node, lo, hi = np.tile(node, 2), np.concatenate([lo, mid]), np.concatenate([mid, hi])
    return best_lo, np.maximum(best_hi, bound)


def measure_pair(
    levels: list[np.ndarray],
    alice: AliceParams,
    bob: BobParams,
    constants: DebateParams,
    full: bool = True,
) -> dict:
    """Exact measurements of one trained pair on one instance (float64, exact binomial Vera).

    Plain floats: ``value`` (the pair's acceptance), ``tracking`` (reach-weighted mean
    ``|p - pi|``), ``max_dev_visited``, ``p_abort``, ``w_dev``; unless ``full`` is False also
    ``hit`` and ``false_alarm`` (Bob's reach-weighted abort probability at
    :func:`probe_deviations`), ``false_alarm_c`` (at ``|p - pi| <= s/2``), ``value_vs_honest_bob``,
    ``bob_best_response`` (exact), ``alice_best_response`` and ``alice_best_response_ub``
    (:func:`alice_best_response_bounds`), ``gap`` and ``gap_ub`` (their differences: the
    exploitability lies between them)."""
    T = len(levels)
    inputs = level_inputs(levels)
    scale = float(constants.b)
    p32, a32 = _policy_nodes(alice, bob, inputs, jnp.float32(scale), jnp.float32(scale))
    ps = split_levels(np.asarray(p32, np.float64))
    aborts = split_levels(np.asarray(a32, np.float64))
    pis = [np.asarray(lv, np.float64) for lv in levels]
    n_v, tau_v = int(constants.n_vera), real(np.float32(constants.tau_vera))
    veras = [checker_prob(p, n_v, tau_v, pi) for p, pi in zip(ps, pis)]
    value = float(dp_value(ps, aborts, veras))
    reach = reach_levels(ps, aborts)
    mass = sum(float(r.sum()) for r in reach)
    dev = [np.abs(p - pi) for p, pi in zip(ps, pis)]
    tracking = sum(float((r * d).sum()) for r, d in zip(reach, dev)) / mass
    max_dev = max(float(np.max(np.where(r > 1e-9, d, 0.0))) for r, d in zip(reach, dev))
    abort_path = sum(float((r * a).sum()) for r, a in zip(reach, aborts))  # P[abort]
    light = {
        "value": value,
        "tracking": tracking,
        "max_dev_visited": max_dev,
        "p_abort": abort_path,
        "w_dev": float(bob.w_dev),
    }
    if not full:
        return light
    # Bob at probe deviations, reach-weighted over the visited prefixes.
    hi_dev, lo_dev = probe_deviations(constants)
    codes = level_codes(T)
    bob_np = jax.tree.map(lambda x: np.asarray(x, np.float64), bob)

    def abort_at(t, d, prev):
        z = bob_np.w[t] + bob_np.w_dev * d / scale + bob_np.w_prev * prev
        return 1.0 / (1.0 + np.exp(-z))

    def probe(devs):
        tot = 0.0
        for t in range(T):
            a = abort_at(t, devs[None, :], codes[t]["prev"][:, None]).mean(axis=1)
            tot += float((reach[t] * a).sum())
        return tot / mass

    hit, false_alarm = probe(hi_dev), probe(lo_dev)
    false_c = probe(np.linspace(0.0, constants.s / 2, 8))  # |dev| <= c (Lean c = s/2)
    value_vs_honest_bob = _vs_honest_bob(ps, pis, veras, constants)
    # Bob's exact best response to this Alice (per prefix: abort iff Vera < continuation).
    V = None
    for t in range(T - 1, -1, -1):
        coin = np.clip(ps[t], 0.0, 1.0)
        v0, v1 = (0.0, 1.0) if V is None else (V[: V.size // 2], V[V.size // 2 :])
        V = np.minimum(coin * v1 + (1.0 - coin) * v0, veras[t])
    assert V is not None  # T >= 1
    bob_br = float(V[0])
    # Alice's best response to this Bob, bounded by branch and bound (her own claims included).
    bob_at = [lambda d, node, t=t: abort_at(t, d, codes[t]["prev"][node]) for t in range(T)]
    alice_br, alice_ub = alice_best_response_bounds(pis, bob_at, n_v, tau_v, own=ps)
    return {
        **light,
        "hit": hit,
        "false_alarm": false_alarm,
        "false_alarm_c": false_c,
        "value_vs_honest_bob": value_vs_honest_bob,
        "bob_best_response": bob_br,
        "alice_best_response": alice_br,
        "gap": alice_br - bob_br,
        "alice_best_response_ub": alice_ub,
        "gap_ub": alice_ub - bob_br,
    }


def take(tree, *idx):
    """Index every leaf of a stacked pytree (host helper)."""
    return jax.tree.map(lambda x: x[idx], tree)


def _vs_honest_bob(ps, pis, veras, constants: DebateParams) -> float:
    """Alice's exact acceptance against honest Bob (exact binomial checker with N_B, tau_B)."""
    n_b, tau_b = int(constants.n_bob), real(np.float32(constants.tau_bob))
    cont = [checker_prob(p, n_b, tau_b, pi) for p, pi in zip(ps, pis)]
    return float(dp_value(ps, [1.0 - c for c in cont], veras))


def honest_alice_against(fx, levels, constants: DebateParams, bob: BobParams) -> list[float]:
    """Per seed of stacked Bobs: honest Alice's exact acceptance against it on ``fx``'s instance."""
    vera = make_vera(constants)
    return [
        acceptance_exact(
            fx.machine, honest_alice(constants), bob_as_zoo(take(bob, s), constants.b), vera, levels
        )
        for s in range(int(np.shape(bob.w_dev)[0]))
    ]


def against_honest_bob(
    levels, constants: DebateParams, alice: AliceParams, bob: BobParams
) -> list[float]:
    """Per seed of stacked pairs: Alice's exact acceptance against honest Bob (``bob`` only
    completes the policy evaluation; its aborts are not used)."""
    inputs, scale = level_inputs(levels), jnp.float32(constants.b)
    pis = [np.asarray(lv, np.float64) for lv in levels]
    n_v, tau_v = int(constants.n_vera), real(np.float32(constants.tau_vera))
    out = []
    for s in range(int(np.shape(bob.w_dev)[0])):
        p32, _ = _policy_nodes(take(alice, s), take(bob, s), inputs, scale, scale)
        ps = split_levels(np.asarray(p32, np.float64))
        veras = [checker_prob(p, n_v, tau_v, pi) for p, pi in zip(ps, pis)]
        out.append(_vs_honest_bob(ps, pis, veras, constants))
    return out


def measure_pairs(
    fx, levels, constants: DebateParams, alice: AliceParams, bob: BobParams
) -> tuple[list[dict], list[float]]:
    """``(ev, honest)``: per seed :func:`measure_pair` and honest Alice's exact acceptance."""
    seeds = int(np.shape(bob.w_dev)[0])
    ev = [measure_pair(levels, take(alice, s), take(bob, s), constants) for s in range(seeds)]
    return ev, honest_alice_against(fx, levels, constants, bob)
