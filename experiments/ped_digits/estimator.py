"""B for the digit audits, trained toward (delta, F)-indistinguishability (spec PED 5.1, 5.7, 6.3).

Contexts are the internal nodes of a batch of audit trees (uniform mu), outcomes the ``2^q``
truth patterns of their parts, the truth g the point mass on the labels' pattern. F holds fixed
tests (per-depth, per-part marginals; per-depth and per-digit ``M_D``), both provers' round
rewards (spec 6.3, test 1: ``s(x) M_D(z)``; the ``- phat`` term has zero advantage) and both
provers' calibration tests (spec 6.3, test 2, with their selection circuits). The network
(:class:`~dedebate.agents.ped_digits.BagEstimator`) is trained by the online-gradient rounds of
:mod:`dedebate.estimators.train`, with the network swapped in.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dedebate.agents.ped_digits import PIXEL_MAX, BagEstimator
from dedebate.core.bits import bit_table
from dedebate.estimators import train
from dedebate.estimators.advantage import OIProblem, advantage_weight
from dedebate.estimators.families import TableFamily, calibration_family, stack_families
from dedebate.programs import jit
from dedebate.trees.digits import N_DIGITS, DigitTree
from dedebate.trees.stability import child_codes_jnp


def _node_depths(q: int, depth: int) -> np.ndarray:
    return np.concatenate([np.full(q**k, k) for k in range(depth)])


def oi_setup(trees: DigitTree):
    """The indistinguishability problem and test family F on a batch of trees (traceable).

    Args:
        trees: a batch of :class:`~dedebate.trees.digits.DigitTree` (full truths).

    Returns:
        ``(problem, family)``: an :class:`~dedebate.estimators.advantage.OIProblem` over the
        ``n_trees * n_internal`` contexts (tree-major) and a stacked family.
    """
    tree = trees.tree
    q, depth, n_t, n_int = tree.q, tree.depth, tree.truth.shape[0], tree.n_internal
    codes = jax.vmap(child_codes_jnp)(tree)[:, :, 0].reshape(-1)
    n_z = 2**q
    g = jax.nn.one_hot(codes, n_z, dtype=jnp.float32)
    bits = jnp.asarray(bit_table(q), jnp.float32)  # [Z, q]
    md_x = jnp.repeat(jnp.asarray(tree.tables, jnp.float32)[:, 0], n_int, axis=0)  # [X, Z]
    truth = jnp.asarray(tree.truth, jnp.float32)
    node_t = truth[:, :n_int].reshape(-1)
    kids = truth[:, 1 : 1 + n_int * q].reshape(-1, q)
    depth_x = np.tile(_node_depths(q, depth), n_t)
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
    fixed = TableFamily(table=jnp.stack(tests))  # every entry in [-1, 1] by construction

    def liar_select(feat, p):
        marg = p @ bits
        return jax.nn.one_hot(jnp.argmax((1.0 - feat) * (1.0 + marg)), q)

    def honest_select(feat, p):
        marg = p @ bits
        return jax.nn.one_hot(jnp.argmax(jnp.abs(marg - feat)), q)

    liar = calibration_family(liar_select, lambda feat, j, mj: 1.0, kids, q)
    honest = calibration_family(honest_select, lambda feat, j, mj: 2.0 * feat[j] - 1.0, kids, q)
    mu = jnp.full(codes.shape, 1.0 / codes.size, jnp.float32)
    return OIProblem(mu=mu, g=g), stack_families(fixed, liar, honest)


def train_estimator(
    static: train.NetTrainStatic,
    delta,
    lr,
    key,
    trees: DigitTree,
    images,
    features,
    fit_steps: int = 200,
    fit_lr: float = 0.01,
    weight_decay: float = 1e-3,
):
    """B on the training trees: a log-loss fit, then online-gradient rounds (spec 5.7); jitted.

        The linearised indistinguishability loss has little gradient where the network's softmax
        saturates, so the rounds start from ``fit_steps`` AdamW steps on the log-loss of the parts'
        truth pattern plus the log-loss of "this image shows d" at the leaves (the labels of the
    training trees' images); a warm start, the rounds and the exit test are unchanged.

        Args:
            static: the trainer's static settings (``hidden[0]`` is the network's width;
                ``best_response`` must be ``"family"``).
            delta: the exit level.
            lr: the learning rate.
            key: a typed PRNG key (the network's initialisation).
            trees: the training trees.
            images: float ``[N, 64]`` all images of the data set (the leaves' pixels for the fit).
            features: their :func:`~dedebate.agents.ped_digits.context_features`.
            fit_steps: AdamW steps of the warm start (0: none).
            fit_lr: its learning rate.
            weight_decay: its decoupled weight decay.

        Returns:
            ``(params, log)``: the network's parameters and the per-round
            :class:`~dedebate.estimators.train.NetTrainLog`.
    """
    if static.best_response != "family":
        raise ValueError(f"best_response={static.best_response!r}: only 'family' is supported")
    problem, family = oi_setup(trees)
    net = BagEstimator(trees.tree.q, trees.tree.depth, static.hidden[0])
    hp = train.NetTrainParams(
        delta=jnp.asarray(delta, jnp.float32),  # traceable: the caller
        lr=jnp.asarray(lr, jnp.float32),
    )  # validates (Config ranges)
    init = train.make_init(static, net)
    q = trees.tree.q
    leaf_pixels = jnp.asarray(images, jnp.float32)[trees.leaves] / PIXEL_MAX  # [T, L, 64]
    leaf_digit = jax.nn.one_hot(trees.digit, N_DIGITS)[:, None, :]
    leaf_truths = trees.tree.truth[:, trees.tree.level_offset(trees.tree.depth) :].astype(
        jnp.float32
    )
    chunk = train.make_chunk(static, static.rounds, net)

    @jit
    def run(hp, key, family, problem, features):
        state = init(hp, key, problem, features)
        opt = optax.adamw(fit_lr, weight_decay=weight_decay)

        def loss(p):
            joint = -jnp.sum(problem.g * jnp.log(jnp.maximum(net.apply(p, features), 1e-12)), 1)
            shows = net.apply(p, leaf_pixels, leaf_digit, method=BagEstimator.shows)
            leaf = -(
                leaf_truths * jnp.log(jnp.maximum(shows, 1e-12))
                + (1 - leaf_truths) * jnp.log(jnp.maximum(1 - shows, 1e-12))
            )
            return jnp.mean(joint) + q * jnp.mean(leaf)  # q leaves per context on average

        def fit(carry, _):
            params, opt_state = carry
            grads = jax.grad(loss)(params)
            upd, opt_state = opt.update(grads, opt_state, params)
            return (optax.apply_updates(params, upd), opt_state), None

        (params, _), _ = jax.lax.scan(fit, (state.params, opt.init(state.params)), None, fit_steps)
        state, log, _ = chunk(hp, state.replace(params=params), family, problem, features)
        return state.params, log

    return run(hp, key, family, problem, features)


def tree_advantages(joint, trees: DigitTree) -> jax.Array:
    """Each test's advantage per tree: ``a[f, t]``, whose mean over trees is ``Adv_f`` (spec 5.1;
    traceable).

    Args:
        joint: B's joints ``[n_trees * n_internal, 2^q]`` on these trees.
        trees: the trees (full truths).

    Returns:
        float32 ``[F, n_trees]``.
    """
    problem, family = oi_setup(trees)
    h = jnp.asarray(joint, jnp.float32)
    n_t = trees.tree.truth.shape[0]
    per_x = jnp.sum(family.values(h) * (problem.g - h)[None], axis=2)  # [F, X]
    return per_x.reshape(per_x.shape[0], n_t, -1).mean(axis=2)


def max_advantage(joint, trees: DigitTree) -> float:
    """``max_f |Adv_f|`` on a batch of trees.

    Args:
        joint: B's joints on the trees' contexts.
        trees: the trees.

    Returns:
        float.
    """
    problem, family = oi_setup(trees)
    h = jnp.asarray(joint, jnp.float32)
    return float(jnp.max(jnp.abs(family.advantages(h, advantage_weight(problem, h)))))
