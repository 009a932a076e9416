"""The prover-estimator zoos played against each other, exactly and by sampling (spec PED 9).

Pure JAX over stacked trees, the computations a report on Theorem 6.1 is made of: honest A against
the completeness zoo and error-shifting B (spec 4, 9.2, 9.5), the A zoo against the calibrated
estimator and in naive recursive debate (spec 9.3; exact and sampled), and the training signals of
both protocols by depth (spec 7.3); the ``*_metrics`` functions summarise them per section of a
report. Payoffs are exact expectations (spec 2.2) unless a name says "sampled".
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

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
from dedebate.programs import FAST_COMPILE, jit
from dedebate.protocols.naive_recursive import (
    UniformChallenger,
    naive_debater,
    play_naive,
    survival_probability,
)
from dedebate.protocols.prover_estimator import (
    PEDParams,
    PEDStatic,
    expected_payoff,
    play,
)
from dedebate.trees import hidden_flaw_tree
from dedebate.trees.stability import error_shifting_table_jnp, node_fbs_jnp

EXACT = PEDStatic(mode="exact")
SAMPLED = PEDStatic(mode="sampled")
NAIVE_LIAR = naive_debater("obfuscating_liar", cand=0)
"""The obfuscating liar of naive recursive debate (hidden-flaw AND, candidate 0)."""


def _liar():
    """The obfuscating liar (its direction policy ``dir_probs`` is vmapped over)."""
    return obfuscating_liar()


def exact_u(settings, params, prover, estimator, tree):
    """Exact expected payoff of a prover with deterministic path choices (spec 2.2)."""
    return play(settings, params, prover, estimator, tree, jax.random.key(0)).u_a


def completeness_payoffs(params, trees, shifts, errors, rj_keys):
    """Exact completeness payoffs on each tree ``[N]`` (``lax.map``), a dict of float32 arrays.

    Honest A (stable candidate) against the completeness zoo (``honest``, ``root_liar``,
    ``constant_half`` ``[N]``, ``random_joint`` ``[N, R]``, vmapped as one batch) and against
    error-shifting B for each root error (``error_shifting`` ``[N, E]``); and an honest-answer
    prover on the unstable candidate (1) against error-shifting B (``unstable`` ``[N, E]``).
    """
    honest = honest_prover()
    unstable = unstable_prover(1)

    def per_tree(args):
        tree, shift = args
        fixed = [
            tabulate(est, tree)
            for est in (HonestEstimator(), RootLiarEstimator(), ConstantEstimator(jnp.float32(0.5)))
        ]
        fixed = jax.tree.map(lambda *x: jnp.stack(x), *fixed)
        rand = jax.vmap(lambda k: random_joint_estimator(k, tree))(rj_keys)
        zoo = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), fixed, rand)
        u_zoo = jax.vmap(lambda est: exact_u(EXACT, params, honest, est, tree))(zoo)

        provers = jax.tree.map(lambda a, b: jnp.stack([a, b]), honest, unstable)
        shifting = jax.vmap(
            lambda pr: jax.vmap(
                lambda e: exact_u(EXACT, params, pr, ErrorShiftingEstimator(e, shift), tree)
            )(errors)
        )(provers)
        return {
            "honest": u_zoo[0],
            "root_liar": u_zoo[1],
            "constant_half": u_zoo[2],
            "random_joint": u_zoo[3:],
            "error_shifting": shifting[0],
            "unstable": shifting[1],
        }

    return jax.lax.map(per_tree, (trees, shifts))


def error_shift_payoffs(params, prover, tree, shift, errors):
    """U_A of ``prover`` against error-shifting B for each root error (e = 0 is honest B)."""
    return jax.vmap(
        lambda e: exact_u(EXACT, params, prover, ErrorShiftingEstimator(e, shift), tree)
    )(errors)


def obfuscation_payoffs(params, trees, dir_probs):
    """Exact E[U_A] of the A zoo against the calibrated estimator, and naive-debate survival.

    Liars (vmapped): the obfuscating liar (hidden-flaw AND, candidate 0) with each direction policy
    (``liars`` [N, P]) and a liar on the stable candidate; honest provers: honest A and the
    wrong-direction A (spec 9.3); ``naive_liar`` / ``naive_honest``: survival against a uniform
    challenger. Float32 arrays over the N trees.
    """
    cal = CalibratedEstimator()
    ch = UniformChallenger()
    n = dir_probs.shape[0]
    dps = jnp.concatenate([dir_probs, jnp.asarray([[0.0, 0.0, 1.0]])])
    cands = jnp.asarray([0] * n + [-1], jnp.int32)
    honest = honest_prover()

    def per_tree(tree):
        liars = jax.vmap(
            lambda dp, c: (
                expected_payoff(EXACT, params, _liar().replace(dir_probs=dp, cand=c), cal, tree).u_a
            )
        )(dps, cands)
        honests = jax.vmap(
            lambda rv: exact_u(EXACT, params, honest.replace(reverse=rv), cal, tree)
        )(jnp.asarray([False, True]))
        return {
            "liars": liars[:n],
            "stable_liar": liars[n],
            "honest": honests[0],
            "wrong_direction": honests[1],
            "naive_liar": survival_probability(NAIVE_LIAR, ch, tree)[0],
            "naive_honest": survival_probability(naive_debater("honest"), ch, tree)[0],
        }

    return jax.vmap(per_tree)(trees)


@jit(static_argnums=(3, 4), options=FAST_COMPILE)
def sampled_obfuscation(params, trees, dir_probs, per_tree, per_tree_naive, key):
    """``(u [P, N, per_tree], survived [N, per_tree_naive])``: the liar's sampled debates."""
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
        return jax.vmap(
            lambda k: play_naive(NAIVE_LIAR, ch, tree, k).alice_wins.astype(jnp.float32)
        )(keys)

    u = jax.vmap(one_policy)(dir_probs, jax.random.split(k_ped, dir_probs.shape[0]))
    return u, jax.vmap(naive_tree)(trees, jax.random.split(k_naive, n_trees))


@jit(static_argnums=(3, 4), options=FAST_COMPILE)
def training_signals(params, key, rounds, depth, q):
    """float32 ``[R]`` U_A of honest A / the liar, naive survival of honest / liar (spec 7.3)."""
    tree = hidden_flaw_tree(key, depth=depth, q=q)
    cal = CalibratedEstimator()
    ch = UniformChallenger()

    def one(n):
        p = params.replace(rounds=n)
        return (
            exact_u(EXACT, p, honest_prover(), cal, tree),
            expected_payoff(EXACT, p, _liar(), cal, tree).u_a,
            survival_probability(naive_debater("honest"), ch, tree, rounds=n)[0],
            survival_probability(NAIVE_LIAR, ch, tree, rounds=n)[0],
        )

    return jax.vmap(one)(rounds)


def max_node_fbs(tree, fbs32, cand):
    """Max fbs over the internal nodes of ``tree`` for candidate ``cand``."""
    return jnp.max(node_fbs_jnp(tree, fbs32)[:, cand])


# ---- per-section summaries of a Theorem 6.1 report (pure JAX, inside a swept function) -----------
def _params(rho):
    return PEDParams(rho, jnp.asarray(-1, jnp.int32))


def completeness_metrics(trees, lookup, fbs32, scale, shift_errors, rj_keys, depth):
    """Completeness on noisy-evidence trees: the protocol's rho and honest A's worst payoffs.

    float32 ``fbs``, ``rho``, ``margin = rho^-(d+1)``, the min over trees against each estimator
    (``honest_min``, ``root_liar_min``, ``constant_half_min``, ``random_joint_min``,
    ``error_shifting_min/i``), ``honest_dev``, ``unstable_min``, ``unstable_max_e1`` and
    ``worst_minus_margin`` (>= 0: completeness).
    """
    f = jnp.max(jax.vmap(lambda t: max_node_fbs(t, fbs32, 0))(trees))
    rho = jnp.maximum(f * scale, 1.0)
    margin = (1.0 / rho) ** (depth + 1)
    shifts = jax.vmap(lambda t: error_shifting_table_jnp(t, lookup))(trees)
    errors = jnp.concatenate([shift_errors, jnp.ones((1,), jnp.float32)])
    comp = completeness_payoffs(_params(rho), trees, shifts, errors, rj_keys)
    es = comp["error_shifting"]
    c = {
        "fbs": f,
        "rho": rho,
        "margin": margin,
        "honest_min": jnp.min(comp["honest"]),
        "honest_dev": jnp.max(jnp.abs(comp["honest"] - margin)),
        "root_liar_min": jnp.min(comp["root_liar"]),
        "constant_half_min": jnp.min(comp["constant_half"]),
        "random_joint_min": jnp.min(comp["random_joint"]),
        **{f"error_shifting_min/{i}": jnp.min(es[:, i]) for i in range(es.shape[1])},
        "unstable_min": jnp.min(comp["unstable"]),
        "unstable_max_e1": jnp.max(comp["unstable"][:, -1]),
    }
    c["worst_minus_margin"] = (
        jnp.min(
            jnp.stack(
                [
                    c["honest_min"],
                    c["root_liar_min"],
                    c["constant_half_min"],
                    c["random_joint_min"],
                    jnp.min(es),
                ]
            )
        )
        - margin
    )
    return c


def error_shift_metrics(tree, lookup, fbs32, scale, shift_errors, control_rho):
    """Tight error shifting on one tree, and the negative control: ``fbs``, ``rho``, ``u/i``.

    ``honest`` (e = 0) and ``u/i``, U_A at root error i (e = 0 prepended, 1 appended);
    ``control_u``: e = 1 at ``control_rho``.
    """
    f = max_node_fbs(tree, fbs32, 0)
    shift = error_shifting_table_jnp(tree, lookup)
    errors = jnp.concatenate([shift_errors, jnp.ones((1,), jnp.float32)])
    errors0 = jnp.concatenate([jnp.zeros((1,), jnp.float32), errors])
    rho = jnp.maximum(f * scale, 1.0)
    u, u_ctrl = jax.vmap(
        lambda r: error_shift_payoffs(_params(r), honest_prover(), tree, shift, errors0)
    )(jnp.stack([rho, control_rho]))
    return {
        "fbs": f,
        "rho": rho,
        "honest": u[0],
        **{f"u/{i}": u[i + 1] for i in range(errors.shape[0])},
        "control_u": u_ctrl[-1],
    }


def obfuscation_metrics(trees, fbs32, scale, dir_probs, q, depth):
    """Obfuscation on hidden-flaw trees: the A zoo against the calibrated B; naive survival.

    float32 ``fbs``, ``rho``, ``margin``, ``liar_max_abs/i`` (policy i), ``liar_max``,
    ``stable_liar_max``, ``wrong_direction_max``, ``honest_min``, ``honest_dev``,
    ``naive_liar_mean``, ``naive_liar_dev`` (max |survival - (1 - q^-d)|), ``naive_honest_min``,
    ``ped_gap`` and ``naive_gap`` (min honest - max liar payoff).
    """
    f = max_node_fbs(jax.tree.map(lambda x: x[0], trees), fbs32, 1)
    rho = jnp.maximum(f * scale, 1.0)
    margin = rho ** -(depth + 1)
    ex = obfuscation_payoffs(_params(rho), trees, jnp.asarray(dir_probs))
    liar_abs = jnp.max(jnp.abs(ex["liars"]), axis=0)
    o = {
        "fbs": f,
        "rho": rho,
        "margin": margin,
        **{f"liar_max_abs/{i}": liar_abs[i] for i in range(dir_probs.shape[0])},
        "liar_max": jnp.max(ex["liars"]),
        "stable_liar_max": jnp.max(ex["stable_liar"]),
        "wrong_direction_max": jnp.max(ex["wrong_direction"]),
        "honest_min": jnp.min(ex["honest"]),
        "honest_dev": jnp.max(jnp.abs(ex["honest"] - margin)),
        "naive_liar_mean": jnp.mean(ex["naive_liar"]),
        "naive_liar_dev": jnp.max(jnp.abs(ex["naive_liar"] - (1.0 - q**-depth))),
        "naive_honest_min": jnp.min(ex["naive_honest"]),
    }
    o["ped_gap"] = o["honest_min"] - o["liar_max"]
    o["naive_gap"] = o["naive_honest_min"] - jnp.max(ex["naive_liar"])
    return o


def sampled_obfuscation_chunks(
    params, trees, dir_probs, episodes, naive_episodes, key, chunk_debates
):
    """:func:`sampled_obfuscation` in chunks of ``chunk_debates`` debates per policy (host).

    One compiled program serves every chunk (bounded memory); chunk c > 0 uses ``fold_in(key, c)``.
    Returns numpy ``(us [policy, tree, episode], surv [tree, episode])``.
    """
    n_trees = trees.truth.shape[0]
    per_tree, per_tree_n = -(-episodes // n_trees), -(-naive_episodes // n_trees)
    chunk = max(1, chunk_debates // n_trees)
    n_chunks = max(-(-per_tree // chunk), -(-per_tree_n // chunk))
    parts = []
    for c in range(n_chunks):
        ck = key if c == 0 else jax.random.fold_in(key, c)
        parts.append(
            jax.device_get(
                sampled_obfuscation(
                    params,
                    trees,
                    dir_probs,
                    -(-per_tree // n_chunks),
                    -(-per_tree_n // n_chunks),
                    ck,
                )
            )
        )
    return (
        np.concatenate([np.asarray(p[0], np.float64) for p in parts], axis=-1),
        np.concatenate([np.asarray(p[1]) for p in parts], axis=-1),
    )


def training_signal_rows(params, key, depths, q) -> list[dict]:
    """:func:`training_signals` as rows per depth, with ``rho^-(d+1)`` and ``q^-d``."""
    d = np.asarray(depths, np.int32)
    u_h, u_l, s_h, s_l = (
        np.asarray(x, np.float64).tolist()
        for x in training_signals(params, key, jnp.asarray(d), int(d.max()), q)
    )
    rho = float(params.rho)
    return [
        {
            "depth": dd,
            "ped_honest": u_h[i],
            "ped_liar": u_l[i],
            "ped_delta": u_h[i] - u_l[i],
            "naive_honest": s_h[i],
            "naive_liar": s_l[i],
            "naive_delta": s_h[i] - s_l[i],
            "rho_power": rho ** -(dd + 1),
            "q_power": float(q) ** -dd,
        }
        for i, dd in enumerate(d.tolist())
    ]
