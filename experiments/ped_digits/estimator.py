"""B for the digit audits, trained toward (delta, F)-indistinguishability (spec PED 5.1, 5.7, 6.3).

F: per-depth part marginals and ``M_D``, per-digit ``M_D``, both provers' round rewards and
calibration tests (spec 6.3, tests 1 and 2), over the internal nodes of a batch of trees.
"""

from __future__ import annotations

from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dedebate.agents.ped_digits import PIXEL_MAX, BagEstimator
from dedebate.core.bits import bit_table
from dedebate.estimators import train
from dedebate.estimators.advantage import OIProblem
from dedebate.estimators.families import TableFamily, calibration_family, stack_families
from dedebate.programs import jit
from dedebate.trees.digits import N_DIGITS, DigitTree
from dedebate.trees.stability import child_codes_jnp


def oi_setup(trees: DigitTree):
    """``(problem, family)`` over the trees' ``n_trees * n_internal`` contexts (tree-major)."""
    tree = trees.tree
    q, depth, n_t, n_int = tree.q, tree.depth, tree.truth.shape[0], tree.n_internal
    codes = jax.vmap(child_codes_jnp)(tree)[:, :, 0].reshape(-1)
    g = jax.nn.one_hot(codes, 2**q, dtype=jnp.float32)
    bits = jnp.asarray(bit_table(q), jnp.float32)  # [Z, q]
    md_x = jnp.repeat(jnp.asarray(tree.tables, jnp.float32)[:, 0], n_int, axis=0)  # [X, Z]
    truth = jnp.asarray(tree.truth, jnp.float32)
    node_t = truth[:, :n_int].reshape(-1)
    kids = truth[:, 1 : 1 + n_int * q].reshape(-1, q)
    depth_x = np.tile(np.concatenate([np.full(q**k, k) for k in range(depth)]), n_t)
    digit_x = jnp.repeat(jnp.asarray(trees.digit), n_int)
    tests = []
    for k in range(depth):
        at = jnp.asarray(depth_x == k, jnp.float32)[:, None]
        tests += [at * (2 * bits[None, :, j] - 1) for j in range(q)]
        tests.append(at * (2 * md_x - 1))
    for d in range(N_DIGITS):
        tests.append((digit_x == d).astype(jnp.float32)[:, None] * (2 * md_x - 1))
    tests.append((2 * node_t - 1)[:, None] * md_x)  # honest A's round reward
    tests.append(md_x)  # the liar's round reward (s = +1)
    fixed = TableFamily(table=jnp.stack(tests))

    def liar_select(feat, p):
        return jax.nn.one_hot(jnp.argmax((1.0 - feat) * (1.0 + p @ bits)), q)

    def honest_select(feat, p):
        return jax.nn.one_hot(jnp.argmax(jnp.abs(p @ bits - feat)), q)

    liar = calibration_family(liar_select, lambda feat, j, mj: 1.0, kids, q)
    honest = calibration_family(honest_select, lambda feat, j, mj: 2.0 * feat[j] - 1.0, kids, q)
    mu = jnp.full(codes.shape, 1.0 / codes.size, jnp.float32)
    return OIProblem(mu=mu, g=g), stack_families(fixed, liar, honest)


def train_estimator(
    static, delta, lr, key, trees, images, features, fit_steps=200, fit_lr=0.01, weight_decay=1e-3
):
    """``(params, log)``: ``fit_steps`` AdamW steps on the log-loss of the parts' pattern and the
    leaves' labels (a warm start: the softmax saturates), then the online-gradient rounds."""
    q, depth = trees.tree.q, trees.tree.depth
    net = BagEstimator(q, depth, static.hidden[0])
    hp = train.NetTrainParams(*(jnp.asarray(x, jnp.float32) for x in (delta, lr)))
    init = train.make_init(static, net)
    chunk = train.make_chunk(static, static.rounds, net)

    @jit
    def run(hp, key, trees, images, features):
        problem, family = oi_setup(trees)
        tree = trees.tree
        leaf_pixels = jnp.asarray(images, jnp.float32)[trees.leaves] / PIXEL_MAX  # [T, L, 64]
        leaf_digit = jax.nn.one_hot(trees.digit, N_DIGITS)[:, None, :]
        leaf_truths = tree.truth[:, tree.level_offset(depth) :].astype(jnp.float32)
        state = init(hp, key, problem, features)
        opt = optax.adamw(fit_lr, weight_decay=weight_decay)

        def safe_log(x):
            return jnp.log(jnp.maximum(x, 1e-12))

        def loss(p):
            joint = -jnp.sum(problem.g * safe_log(net.apply(p, features)), 1)
            shows = cast(
                jax.Array, net.apply(p, leaf_pixels, leaf_digit, method=BagEstimator.shows)
            )
            leaf = -(leaf_truths * safe_log(shows) + (1 - leaf_truths) * safe_log(1 - shows))
            return jnp.mean(joint) + q * jnp.mean(leaf)  # q leaves per context on average

        def fit(carry, _):
            params, opt_state = carry
            upd, opt_state = opt.update(jax.grad(loss)(params), opt_state, params)
            return (optax.apply_updates(params, upd), opt_state), None

        (params, _), _ = jax.lax.scan(fit, (state.params, opt.init(state.params)), None, fit_steps)
        state, log, _ = chunk(hp, state.replace(params=params), family, problem, features)
        return state.params, log

    return run(hp, key, trees, images, features)


@jit
def tree_advantages(joint, trees: DigitTree) -> jax.Array:
    """Each test's advantage per tree, ``[F, n_trees]`` (its mean over trees is ``Adv_f``)."""
    problem, family = oi_setup(trees)
    h = jnp.asarray(joint, jnp.float32)
    per_x = jnp.sum(family.values(h) * (problem.g - h)[None], axis=2)  # [F, X]
    return per_x.reshape(per_x.shape[0], trees.tree.truth.shape[0], -1).mean(axis=2)


def max_advantage(joint, trees: DigitTree) -> float:
    """``max_f |Adv_f|`` on a batch of trees (the notebook's check)."""
    return float(jnp.max(jnp.abs(tree_advantages(joint, trees).mean(axis=1))))
