"""A learned prover for the digit audits, trained against a best-responding B (spec PED 7.4, 8.5).

A reads the images with a fixed copy of B's trained network (A reads as well as B; a reader
trained on the payoff alone collapsed to beliefs of 1/2 in probes) and learns the policy weights
of :class:`~dedebate.agents.ped_digits.DigitProver` (random at the start, so a seed may start as a
liar). The objective is the exact ``J = mean_x E[U_A]`` on A's training trees; as in
:mod:`dedebate.training.stackelberg`, B takes ``n_b`` Adam steps on ``-J`` per Adam step of A on
``J``, each iteration one joint gradient. Pure; vmap over seeds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dedebate.agents.ped_digits import (
    POLICY_SIZES,
    BagEstimator,
    DigitProver,
    expected_payoffs,
    prover_beliefs,
    tabulate,
)
from dedebate.training.stackelberg import ADAM, adam_step
from dedebate.trees.digits import DigitTree


def _select(flag, new, old):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(flag, x, y), new, old)


def init_policy(key, scale):
    """A's initial policy weights, ``scale * N(0, 1)`` each (:data:`POLICY_SIZES`).

    Args:
        key: a typed PRNG key.
        scale: their scale.

    Returns:
        ``{name: float32 [size]}``.
    """
    keys = jax.random.split(key, len(POLICY_SIZES))
    return {
        name: scale * jax.random.normal(k, (n,)) for k, (name, n) in zip(keys, POLICY_SIZES.items())
    }


def beliefs(net: BagEstimator, reader, features, trees: DigitTree) -> jax.Array:
    """A's beliefs ``[n_trees, n_nodes]`` from its reader's parameters (a :class:`BagEstimator`).

    Args:
        net: the network.
        reader: its parameters.
        features: the trees' context features.
        trees: the trees.

    Returns:
        float32 ``[n_trees, n_nodes]``.
    """
    return prover_beliefs(net.apply(reader, features), trees.tree)


def play_values(net: BagEstimator, belief, policy, b_params, features, trees: DigitTree, rho, eta):
    """``(E[U_A], P[A correct])`` per tree of A (beliefs and policy) against B (``b_params``).

    Args:
        net: B's network.
        belief: A's beliefs (:func:`beliefs`).
        policy: A's policy weights.
        b_params: B's network parameters.
        features: the trees' context features.
        trees: the trees.
        rho: the protocol's rho.
        eta: the judge's flip probability.

    Returns:
        float32 ``[n_trees]`` each.
    """
    est = tabulate(net.apply(b_params, features), trees.tree.truth.shape[0], trees.tree)
    return expected_payoffs(DigitProver(belief, policy), est, trees.tree, rho, eta)


def train(
    net: BagEstimator,
    steps: int,
    n_b: int,
    lr_a,
    lr_b,
    belief,
    policy,
    b_params,
    features,
    trees: DigitTree,
    rho,
    eta,
):
    """``steps`` A updates, each after ``n_b`` B updates (Stackelberg, A leading).

    Args:
        net: the network.
        steps: A updates (static).
        n_b: B updates per A update (static).
        lr_a: A's Adam step size.
        lr_b: B's Adam step size.
        belief: A's beliefs on the training trees (fixed).
        policy: A's initial policy weights.
        b_params: B's initial network parameters.
        features: A's training trees' context features.
        trees: A's training trees.
        rho: the protocol's rho.
        eta: the judge's flip probability.

    Returns:
        ``(policy, b_params, monitors)``: the players after training and ``{"u", "correct"}``,
        ``mean_x E[U_A]`` and ``P[A correct]`` at each A update (``[steps]``).
    """

    def objective(a, b):
        u, acc = play_values(net, belief, a, b, features, trees, rho, eta)
        return u.mean(), acc.mean()

    grad_both = jax.value_and_grad(objective, argnums=(0, 1), has_aux=True)

    def outer(carry, _):
        def inner(i, x):
            a, b, oa, ob, _, _ = x
            (u, acc), (ga, gb) = grad_both(a, b)
            last = i == n_b
            b2, ob2 = adam_step(b, ob, gb, lr_b, -1.0)
            a2, oa2 = adam_step(a, oa, ga, lr_a, 1.0)
            b, ob = _select(~last, (b2, ob2), (b, ob))
            a, oa = _select(last, (a2, oa2), (a, oa))
            return a, b, oa, ob, u, acc

        a, b, oa, ob, u, acc = jax.lax.fori_loop(
            0, n_b + 1, inner, (*carry, jnp.float32(0), jnp.float32(0))
        )
        return (a, b, oa, ob), {"u": u, "correct": acc}

    init = (policy, b_params, ADAM.init(policy), ADAM.init(b_params))
    (a, b, _, _), mon = jax.lax.scan(outer, init, None, length=steps)
    return a, b, mon
