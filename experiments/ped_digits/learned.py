"""The digit audits' learned prover: A trained against a best-responding B (spec PED 7.4, 8.5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from dedebate.agents.ped_digits import (
    POLICY_SIZES,
    DigitProver,
    context_features,
    expected_payoffs,
    prover_beliefs,
    tabulate,
)
from dedebate.training.stackelberg import ADAM, adam_step
from dedebate.trees.digits import digit_trees

if TYPE_CHECKING:
    from . import Config


def learned_prover(cfg: Config, net, b_params, dyn, key, host, f_ev, ev, family, rho):
    """A from ``lp_init_scale * N(0, 1)`` trained against B (from the trained B) at eta = 0 on
    ``lp_trees`` fresh training trees; on the held-out trees the share where its answer agrees
    with its reading, ``P[A correct]`` and ``E[U_A]``."""
    k_pol, k_tr = jax.random.split(key)
    tr = digit_trees(k_tr, host["train"], family, cfg.q, cfg.m, cfg.depth, cfg.lp_trees)
    f_tr = context_features(tr, host["images"], family, cfg.q, cfg.m)
    policy = init_policy(k_pol, cfg.lp_init_scale)
    lrs = (dyn["lp_lr_a"], dyn["lp_lr_b"])
    policy, b, mon = selfplay(net, b_params, policy, f_tr, tr, rho, cfg.lp_steps, cfg.lp_n_b, *lrs)
    belief = prover_beliefs(net.apply(b_params, f_ev), ev.tree)
    u, correct = play_values(net, belief, policy, b, f_ev, ev, rho)
    # DigitProver.answer never reads its tree argument (typed ClaimTree, as in the Prover protocol)
    p_a = jax.vmap(
        lambda bl: DigitProver(bl, policy).answer(None)  # type: ignore[arg-type]
    )(belief)
    reads = (belief[:, 0] > 0.5).astype(jnp.float32)
    agree = jnp.mean(reads * p_a + (1.0 - reads) * (1.0 - p_a))
    return {"agree": agree, "correct": correct.mean(), "u": u.mean(), "train_u": mon["u"][-1]}


def lp_held(cfg: Config) -> int:
    """Learned-prover runs held in memory at once (``lp_batch``; 0 means all ``lp_seeds``)."""
    return min(cfg.lp_batch or cfg.lp_seeds, cfg.lp_seeds)


def learned_provers(cfg: Config, run, key):
    """``run(k)`` for ``lp_seeds`` keys split from ``key``, stacked: all vmapped at once, or
    :func:`lp_held` at a time (``lax.map``), which bounds the memory and rounds a few ulps apart."""
    keys = jax.random.split(key, cfg.lp_seeds)
    held = lp_held(cfg)
    return jax.vmap(run)(keys) if held == cfg.lp_seeds else jax.lax.map(run, keys, batch_size=held)


def _select(flag, new, old):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(flag, x, y), new, old)


def init_policy(key, scale):
    """A's initial policy weights, ``scale * N(0, 1)`` each (:data:`POLICY_SIZES`)."""
    keys = jax.random.split(key, len(POLICY_SIZES))
    return {
        name: scale * jax.random.normal(k, (n,)) for k, (name, n) in zip(keys, POLICY_SIZES.items())
    }


def play_values(net, belief, policy, b_params, features, trees, rho):
    """``(E[U_A], P[A correct])`` per tree of A (beliefs, policy) against B at eta = 0."""
    est = tabulate(net.apply(b_params, features), trees.tree.truth.shape[0], trees.tree)
    return expected_payoffs(DigitProver(belief, policy), est, trees.tree, rho, 0.0)


def selfplay(net, b_params, policy, features, trees, rho, steps, n_b, lr_a, lr_b):
    """A learned prover against a best-responding B (spec PED 7.4, 8.5), at eta = 0 and reading
    with ``b_params``: ``steps`` Adam steps of A on ``J = mean_x E[U_A]``, each after ``n_b`` of B
    on ``-J``; returns ``(policy, b_params, {"u", "correct"})``, the monitors at each A step."""
    belief = prover_beliefs(net.apply(b_params, features), trees.tree)

    def objective(a, b):
        u, acc = play_values(net, belief, a, b, features, trees, rho)
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
