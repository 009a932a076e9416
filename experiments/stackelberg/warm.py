"""Warm start of the Stackelberg estimator B from Algorithm 1's estimator (spec PED 5.3, 6)."""

from __future__ import annotations

from operator import itemgetter

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.bits import bit_table
from dedebate.programs import TRAINING, jit, program_cache
from dedebate.training import stackelberg as sb
from dedebate.trees.tree import ClaimTree

from .runs import stack


@struct.dataclass
class EstimatorTarget:
    """A tabular estimator: ``p_d``, the joint ``[tree, node, cand, 2^q]``, its ``phat``."""

    p_d: jax.Array
    joint: jax.Array
    phat: jax.Array


def ogd_target(static, trees: ClaimTree, carry, rho: float, delta: float):
    """``(EstimatorTarget, report)``: Algorithm 1's estimator against ``carry``'s A (one seed)."""
    from dedebate.estimators.soundness import construct_estimator

    prover, _ = sb.players(static, trees, carry)
    rep = construct_estimator(prover, trees, rho, delta, fast_compile=True)
    one = jax.tree.map(lambda x: x[0], trees)
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


def fit_estimator(static, trees, carry, target, steps: int = 300, lr: float = 0.03):
    """``(carry, loss)``: B fitted to ``target`` by Adam on KL(p_d) + mean KL(joint) (A kept)."""
    one = jax.tree.map(lambda x: x[0], trees)
    d, n_int, n_cand = one.depth, one.n_internal, one.n_cand
    level = np.zeros(n_int, np.int32)
    for lev in range(d):
        level[one.level_offset(lev) : one.level_offset(lev + 1)] = lev
    ks = jnp.asarray(d - level)
    _, b0, _, unravel_b = sb.templates(static, one.q)
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
        bf, opt = sb.adam_step(bf, opt, g, lr, -1.0)
        return bf, opt, val

    bf, _, _ = jax.lax.fori_loop(
        0, steps, body, (carry.b_flat, sb.ADAM.init(carry.b_flat), jnp.float32(0))
    )
    return carry.replace(b_flat=bf, opt_b=sb.ADAM.init(bf)), loss(bf)


@program_cache
def fit_grid(static: sb.StackelbergStatic, steps: int):
    """``jit(vmap over seeds (fit_estimator))``: ``(trees, carries, targets) -> (carries, kl)``."""
    return jit(jax.vmap(lambda t, c, g: fit_estimator(static, t, c, g, steps)), options=TRAINING)


@program_cache
def advantage_grid(static: sb.StackelbergStatic, rho: float):
    """``jit(vmap over seeds)`` of B's realised advantages ``[seeds, d + 1, 2]``."""
    return jit(jax.vmap(lambda t, c: sb.advantage_at(static, rho, t, c)[2]), options=TRAINING)


def warm_start(static, trees, carries, rho: float, delta: float, steps: int):
    """``(carries, info)``: each seed's B fitted to Algorithm 1's estimator for its initial A."""
    seeds = range(jax.tree.leaves(carries)[0].shape[0])
    fits = [
        ogd_target(static, *jax.tree.map(itemgetter(s), (trees, carries)), rho, delta)
        for s in seeds
    ]
    stages = [[st for st in rep.stages if st.stage != "final"] for _, rep in fits]
    fitted, kl = fit_grid(static, steps)(trees, carries, stack([target for target, _ in fits]))
    adv = advantage_grid(static, float(rho))
    return fitted, {
        "adv_cold": np.abs(np.asarray(adv(trees, carries))).max(axis=(-2, -1)),
        "adv_warm": np.abs(np.asarray(adv(trees, fitted))).max(axis=(-2, -1)),
        "fit_kl": np.asarray(kl),
        "ogd_steps": np.asarray([[st.steps for st in ss] for ss in stages], np.int32),
        "ogd_max_adv": np.asarray([max(st.max_adv for st in ss) for ss in stages], np.float32),
    }
