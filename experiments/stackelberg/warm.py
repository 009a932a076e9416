"""Warm start of the Stackelberg estimator B from Algorithm 1 (spec PED 5.3, 6).

:func:`ogd_target` builds B against a fixed prover A with Algorithm 1, round by round as in spec 6
(:func:`dedebate.estimators.soundness.construct_estimator`), and :func:`fit_estimator` fits the
network B's ``p_d`` and joint logits to that tabular estimator (KL, Adam) before training.
:func:`warm_start` does both for every seed of a batch of training runs. Against a fair-coin A
(the default initial prover) every spec 6.3 test has zero advantage (``E[s] = 0`` and
``P[a = z] = 1/2``), so Algorithm 1 returns the uniform estimator, which is B's cold start: the
warm start matters only for a non-uniform initial A (``init_carry(..., a_out_scale > 0)``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.bits import bit_table
from dedebate.programs import TRAINING, jit, program_cache
from dedebate.training.stackelberg import (
    ADAM,
    Carry,
    StackelbergStatic,
    adam_step,
    advantage_at,
    players,
    templates,
)
from dedebate.trees.tree import ClaimTree


@struct.dataclass
class EstimatorTarget:
    """A tabular estimator to fit B to: ``p_d[tree]``, the joint ``h[tree, internal node, cand,
    2^q]`` and, per internal node, the ``phat`` B's joint is asked at (``p_d`` at the root, the
    parent joint's marginal elsewhere)."""

    p_d: jax.Array
    joint: jax.Array
    phat: jax.Array


def ogd_target(static: StackelbergStatic, trees: ClaimTree, carry: Carry, rho: float, delta: float):
    """Algorithm 1's estimator against the prover in ``carry`` (host side, one seed's trees).

    Runs :func:`dedebate.estimators.soundness.construct_estimator` (B built round by round with
    Algorithm 1 against the spec 6.3 tests of the fixed A, every stage exiting with
    ``max|Adv| < delta``).
    """
    from dedebate.estimators.soundness import construct_estimator

    prover, _ = players(static, trees, carry)
    rep = construct_estimator(prover, trees, rho, delta, fast_compile=True)
    one = jax.tree_util.tree_map(lambda x: x[0], trees)
    n_int, q = one.n_internal, one.q
    logits = np.asarray(rep.estimator.logits)[:, :n_int]  # [trees, n_int, cand, 2^q]
    with np.errstate(invalid="ignore"):
        h = np.exp(logits - logits.max(axis=-1, keepdims=True))
    h = h / h.sum(axis=-1, keepdims=True)
    p_d = np.asarray(rep.estimator.p0, np.float32)
    marg = h @ np.asarray(bit_table(q), np.float32)  # [trees, n_int, cand, q]
    phat = np.zeros((h.shape[0], one.n_nodes), np.float32)
    phat[:, 0] = p_d
    for v in range(n_int):
        for c in range(one.n_cand):
            phat[:, np.asarray(one.children(v, c))] = marg[:, v, c]
    target = EstimatorTarget(
        jnp.asarray(p_d), jnp.asarray(h, jnp.float32), jnp.asarray(phat[:, :n_int])
    )
    return target, rep


def fit_estimator(
    static: StackelbergStatic,
    trees: ClaimTree,
    carry: Carry,
    target: EstimatorTarget,
    steps: int = 300,
    lr: float = 0.03,
):
    """``(carry, loss)``: B's parameters fitted to ``target`` by ``steps`` Adam steps (pure) on

        mean_x KL(Bern(target p_d) || Bern(B p_d)) + mean_{x, node, cand} KL(h || softmax(B joint))

    with B's joint asked at the target's ``phat`` and ``k = d - level``; B gets a fresh Adam state,
    A is kept. A loss of 0 is an exact fit (B sees only public views, so distinct tabular contexts
    with equal views cannot all be fitted).
    """
    one = jax.tree_util.tree_map(lambda x: x[0], trees)
    d, n_int, n_cand = one.depth, one.n_internal, one.n_cand
    level = np.zeros(n_int, np.int32)
    for lev in range(d):
        level[one.level_offset(lev) : one.level_offset(lev + 1)] = lev
    ks = jnp.asarray(d - level)
    _, b0, _, unravel_b = templates(static, one.q)
    views = jax.vmap(lambda t: t.public())(trees)
    eps = 1e-12

    def loss(bf):
        est = b0.replace(params=unravel_b(bf))

        def per_tree(view, p_t, h_t, ph_t):
            p = jnp.clip(est.initial(view), 1e-6, 1 - 1e-6)
            kl0 = p_t * (jnp.log(p_t + eps) - jnp.log(p)) + (1 - p_t) * (
                jnp.log(1 - p_t + eps) - jnp.log(1 - p)
            )

            def ctx_kl(v, c):
                logq = jax.nn.log_softmax(est.joint(view, v, c, ph_t[v], ks[v]))
                hv = h_t[v, c]
                return jnp.sum(hv * (jnp.log(hv + eps) - logq))

            nodes = jnp.repeat(jnp.arange(n_int), n_cand)
            cands = jnp.tile(jnp.arange(n_cand), n_int)
            return kl0, jax.vmap(ctx_kl)(nodes, cands).mean()

        kl0, klj = jax.vmap(per_tree)(views, target.p_d, target.joint, target.phat)
        return kl0.mean() + klj.mean()

    grad = jax.value_and_grad(loss)

    def body(_, x):
        bf, opt, _ = x
        val, g = grad(bf)
        bf, opt = adam_step(bf, opt, g, lr, -1.0)
        return bf, opt, val

    bf, _, _ = jax.lax.fori_loop(
        0, steps, body, (carry.b_flat, ADAM.init(carry.b_flat), jnp.float32(0))
    )
    return carry.replace(b_flat=bf, opt_b=ADAM.init(bf)), loss(bf)


@program_cache
def fit_grid(static: StackelbergStatic, steps: int):
    """``jit(vmap over seeds (fit_estimator))``: ``(trees, carries, targets) -> (carries, kl)``."""
    return jit(jax.vmap(lambda t, c, g: fit_estimator(static, t, c, g, steps)), options=TRAINING)


@program_cache
def advantage_grid(static: StackelbergStatic, rho: float):
    """``jit(vmap over seeds)`` of B's realised advantages ``adv [seeds, d + 1, 2]``
    (:func:`dedebate.training.stackelberg.advantage_at`).
    """
    return jit(jax.vmap(lambda t, c: advantage_at(static, rho, t, c)[2]), options=TRAINING)


def warm_info_template(seeds: int, depth: int) -> dict:
    """Zeros of the numbers :func:`warm_start` reports, for ``seeds`` seeds of depth ``depth``."""
    n = seeds
    return {
        "adv_cold": np.zeros(n, np.float32),
        "adv_warm": np.zeros(n, np.float32),
        "fit_kl": np.zeros(n, np.float32),
        "ogd_steps": np.zeros((n, depth + 1), np.int32),
        "ogd_max_adv": np.zeros(n, np.float32),
        "ogd_wall_s": np.zeros((), np.float32),
    }


def ogd_targets(
    static: StackelbergStatic, trees: ClaimTree, carries: Carry, rho: float, delta: float
):
    """:func:`ogd_target` per seed: ``(targets, ogd_steps [seeds, d + 1], ogd_max_adv)``."""
    targets, steps, max_adv = [], [], []
    for s in range(jax.tree_util.tree_leaves(carries)[0].shape[0]):
        tree_s = jax.tree_util.tree_map(lambda x, s=s: x[s], trees)
        carry_s = jax.tree_util.tree_map(lambda x, s=s: x[s], carries)
        target, rep = ogd_target(static, tree_s, carry_s, rho, delta)
        targets.append(target)
        stages = [st for st in rep.stages if st.stage != "final"]
        steps.append([st.steps for st in stages])
        max_adv.append(max(st.max_adv for st in stages))
    stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *targets)
    return stacked, np.asarray(steps, np.int32), np.asarray(max_adv, np.float32)


def warm_start(
    static: StackelbergStatic, trees: ClaimTree, carries: Carry, targets, rho: float, fit_steps: int
):
    """``(carries, {"adv_cold", "adv_warm", "fit_kl"})``: each seed's B fitted to its target.

    Fitted by :func:`fit_grid`; B's realised max|Adv| before and after by :func:`advantage_grid`.
    """
    fitted, kl = fit_grid(static, fit_steps)(trees, carries, targets)
    adv = advantage_grid(static, float(rho))
    return fitted, {
        "adv_cold": np.abs(np.asarray(adv(trees, carries))).max(axis=(-2, -1)),
        "adv_warm": np.abs(np.asarray(adv(trees, fitted))).max(axis=(-2, -1)),
        "fit_kl": np.asarray(kl),
    }
