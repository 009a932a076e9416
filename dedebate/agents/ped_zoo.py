"""The prover-estimator zoos played against each other, exactly and by sampling (spec PED 2.2, 4,
7.3, 9.2, 9.3).

Pure JAX over stacked trees, the computations a report on Theorem 6.1 is made of:

* :func:`completeness_payoffs` -- honest A against the completeness zoo of estimators (honest,
  root liar, constant 1/2, random joints) and error-shifting B; an honest-answer prover on the
  unstable candidate against error-shifting B (spec 4, 9.2, 9.5);
* :func:`error_shift_payoffs` -- U_A against error-shifting B per root error (spec 4);
* :func:`obfuscation_payoffs` -- exact E[U_A] of the A zoo (the obfuscating liar per direction
  policy, a liar on the stable candidate, honest and wrong-direction A) against the calibrated
  estimator, and survival in naive recursive debate (spec 9.3);
* :func:`sampled_obfuscation` -- the same liars in sampled debates (jitted);
* :func:`training_signals` -- U(honest) - U(liar) of both protocols by depth (spec 7.3, jitted);
* :func:`max_node_fbs` -- the largest fbs over a tree's internal nodes from an LP lookup.

Payoffs are exact expectations (spec 2.2) unless a name says "sampled".
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from dedebate.agents.ped_strategies import (
    CalibratedEstimator,
    ConstantEstimator,
    ErrorShiftingEstimator,
    HonestEstimator,
    RootLiarEstimator,
    honest_prover,
    obfuscating_liar,
    random_joint_estimator,
    tabulate,
    unstable_prover,
)
from dedebate.protocols.naive_recursive import (
    UniformChallenger,
    naive_debater,
    play_naive,
    survival_probability,
)
from dedebate.protocols.prover_estimator import (
    COMPILE_OPTIONS,
    PEDSettings,
    expected_payoff,
    play,
)
from dedebate.trees import hidden_flaw_tree
from dedebate.trees.stability import node_fbs_jnp

EXACT = PEDSettings(mode="exact")
SAMPLED = PEDSettings(mode="sampled")
NAIVE_LIAR = naive_debater("obfuscating_liar", cand=0)
"""The obfuscating liar of naive recursive debate (hidden-flaw AND, candidate 0)."""


_jit = functools.partial(jax.jit, compiler_options=COMPILE_OPTIONS)


def _liar():
    """The obfuscating liar (its direction policy ``dir_probs`` is vmapped over)."""
    return obfuscating_liar()


def exact_u(settings, params, prover, estimator, tree):
    """Exact expected payoff of a prover with deterministic path choices (spec 2.2)."""
    return play(settings, params, prover, estimator, tree, jax.random.key(0)).u_a


def completeness_payoffs(params, trees, shifts, errors, rj_keys):
    """On each tree (``lax.map``): honest A (stable candidate) against the completeness zoo (the
    tabulated honest, root-liar, constant-1/2 and random-joint estimators, vmapped as one batch)
    and against error-shifting B for each root error; and an honest-answer prover on the unstable
    candidate (1) against error-shifting B."""
    honest = honest_prover()
    unstable = unstable_prover(1)

    def per_tree(args):
        tree, shift = args
        fixed = [tabulate(est, tree) for est in (HonestEstimator(), RootLiarEstimator(),
                                                  ConstantEstimator(jnp.float32(0.5)))]
        fixed = jax.tree.map(lambda *x: jnp.stack(x), *fixed)
        rand = jax.vmap(lambda k: random_joint_estimator(k, tree))(rj_keys)
        zoo = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), fixed, rand)
        u_zoo = jax.vmap(lambda est: exact_u(EXACT, params, honest, est, tree))(zoo)

        provers = jax.tree.map(lambda a, b: jnp.stack([a, b]), honest, unstable)
        shifting = jax.vmap(lambda pr: jax.vmap(lambda e: exact_u(
            EXACT, params, pr, ErrorShiftingEstimator(e, shift), tree))(errors))(provers)
        return {"honest": u_zoo[0], "root_liar": u_zoo[1], "constant_half": u_zoo[2],
                "random_joint": u_zoo[3:], "error_shifting": shifting[0],
                "unstable": shifting[1]}

    return jax.lax.map(per_tree, (trees, shifts))


def error_shift_payoffs(params, prover, tree, shift, errors):
    """U_A of ``prover`` against error-shifting B for each root error (e = 0 is honest B)."""
    return jax.vmap(lambda e: exact_u(EXACT, params, prover, ErrorShiftingEstimator(e, shift),
                                 tree))(errors)


def obfuscation_payoffs(params, trees, dir_probs):
    """Exact E[U_A] (all of A's paths) of the A zoo against the calibrated estimator, and exact
    survival probabilities in naive recursive debate against a uniform challenger.

    Liars (vmapped): the obfuscating liar (hidden-flaw AND, candidate 0) with each direction
    policy, and a liar on the stable candidate (-1: the tree's honest candidate). Honest provers
    (vmapped): honest A and the wrong-direction A."""
    cal = CalibratedEstimator()
    ch = UniformChallenger()
    n = dir_probs.shape[0]
    dps = jnp.concatenate([dir_probs, jnp.asarray([[0.0, 0.0, 1.0]])])
    cands = jnp.asarray([0] * n + [-1], jnp.int32)
    honest = honest_prover()

    def per_tree(tree):
        liars = jax.vmap(lambda dp, c: expected_payoff(
            EXACT, params, _liar().replace(dir_probs=dp, cand=c), cal, tree).u_a)(dps, cands)
        honests = jax.vmap(lambda rv: exact_u(EXACT, params, honest.replace(reverse=rv), cal,
                                              tree))(jnp.asarray([False, True]))
        return {
            "liars": liars[:n],
            "stable_liar": liars[n],
            "honest": honests[0],
            "wrong_direction": honests[1],
            "naive_liar": survival_probability(NAIVE_LIAR, ch, tree)[0],
            "naive_honest": survival_probability(naive_debater("honest"), ch, tree)[0],
        }

    return jax.vmap(per_tree)(trees)


@functools.partial(_jit, static_argnums=(3, 4))
def sampled_obfuscation(params, trees, dir_probs, per_tree, per_tree_naive, key):
    """Sampled debates on each tree: U_A of the obfuscating liar vs the calibrated estimator
    [policy, tree, episode] and survival in naive recursive debate [tree, episode]."""
    cal = CalibratedEstimator()
    ch = UniformChallenger()
    k_ped, k_naive = jax.random.split(key)
    n_trees = trees.truth.shape[0]

    def one_policy(dp, kp):
        liar = _liar().replace(dir_probs=dp)

        def one_tree(tree, kt):
            keys = jax.random.split(kt, per_tree)
            return jax.vmap(lambda k: play(SAMPLED, params, liar, cal, tree, k).u_a)(keys)

        return jax.vmap(one_tree)(trees, jax.random.split(kp, n_trees))

    def naive_tree(tree, kt):
        keys = jax.random.split(kt, per_tree_naive)
        return jax.vmap(lambda k: play_naive(NAIVE_LIAR, ch, tree, k).alice_wins
                        .astype(jnp.float32))(keys)

    u = jax.vmap(one_policy)(dir_probs, jax.random.split(k_ped, dir_probs.shape[0]))
    return u, jax.vmap(naive_tree)(trees, jax.random.split(k_naive, n_trees))


@functools.partial(_jit, static_argnums=(3, 4))
def training_signals(params, key, rounds, depth, q):
    """Exact training signals on one hidden-flaw tree of depth ``depth``, for debates descending
    ``rounds`` levels (vmapped): PED (honest vs liar, calibrated B) and naive recursive debate
    (honest vs liar, uniform challenger)."""
    tree = hidden_flaw_tree(key, depth=depth, q=q)
    cal = CalibratedEstimator()
    ch = UniformChallenger()

    def one(n):
        p = params.replace(rounds=n)
        return (exact_u(EXACT, p, honest_prover(), cal, tree),
                expected_payoff(EXACT, p, _liar(), cal, tree).u_a,
                survival_probability(naive_debater("honest"), ch, tree, rounds=n)[0],
                survival_probability(NAIVE_LIAR, ch, tree, rounds=n)[0])

    return jax.vmap(one)(rounds)




def max_node_fbs(tree, fbs32, cand):
    """Max fbs over the internal nodes of ``tree`` for candidate ``cand`` (float32, from a
    lookup rounded to 9 decimals like ``run``'s rho)."""
    return jnp.max(node_fbs_jnp(tree, fbs32)[:, cand])
