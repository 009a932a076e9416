"""The prover-estimator zoos played against each other, exactly and by sampling (spec PED 2.2, 4,
7.3, 9.2, 9.3).

Pure JAX over stacked trees, the computations a report on Theorem 6.1 is made of:
:func:`completeness_payoffs` (honest A against the completeness zoo of estimators and
error-shifting B; spec 4, 9.2, 9.5), :func:`error_shift_payoffs` (per root error, spec 4),
:func:`obfuscation_payoffs` (the A zoo against the calibrated estimator, and survival in naive
recursive debate; spec 9.3), :func:`sampled_obfuscation` (the same liars in sampled debates),
:func:`training_signals` (U(honest) - U(liar) of both protocols by depth; spec 7.3) and
:func:`max_node_fbs`. :func:`completeness_metrics`, :func:`error_shift_metrics` and
:func:`obfuscation_metrics` summarise them per section of a report;
:func:`sampled_obfuscation_chunks` runs the sampled debates in bounded-memory chunks and
:func:`training_signal_rows` gives the training signals as table rows.

Payoffs are exact expectations (spec 2.2) unless a name says "sampled".
"""

from __future__ import annotations

import functools

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
from dedebate.protocols.naive_recursive import (
    UniformChallenger,
    naive_debater,
    play_naive,
    survival_probability,
)
from dedebate.protocols.prover_estimator import (
    COMPILE_OPTIONS,
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


_jit = functools.partial(jax.jit, compiler_options=COMPILE_OPTIONS)


def _liar():
    """The obfuscating liar (its direction policy ``dir_probs`` is vmapped over)."""
    return obfuscating_liar()


def exact_u(settings, params, prover, estimator, tree):
    """Exact expected payoff of a prover with deterministic path choices (spec 2.2).

    Args:
        settings: the static half (:class:`~dedebate.protocols.prover_estimator.PEDStatic`).
        params: the protocol's numbers (:class:`~dedebate.protocols.prover_estimator.PEDParams`).
        prover: the prover A (its path choices deterministic, so one play is exact).
        estimator: the estimator B.
        tree: the claim tree.

    Returns:
        float32 scalar: A's payoff U_A.
    """
    return play(settings, params, prover, estimator, tree, jax.random.key(0)).u_a


def completeness_payoffs(params, trees, shifts, errors, rj_keys):
    """Completeness payoffs on each tree (``lax.map``), exact.

    Honest A (stable candidate) against the completeness zoo (the tabulated honest, root-liar,
    constant-1/2 and random-joint estimators, vmapped as one batch) and against error-shifting B
    for each root error; and an honest-answer prover on the unstable candidate (1) against
    error-shifting B.

    Args:
        params: the protocol's numbers.
        trees: stacked claim trees ``[N, ...]``.
        shifts: per tree, error-shifting B's shift (stacked ``[N, ...]``).
        errors: float32 ``[E]`` root errors of error-shifting B.
        rj_keys: typed keys ``[R]`` of the random-joint estimators.

    Returns:
        Dict of float32 arrays over trees: ``honest``, ``root_liar``, ``constant_half`` ``[N]``,
        ``random_joint`` ``[N, R]``, ``error_shifting`` and ``unstable`` ``[N, E]``.
    """
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
    """U_A of ``prover`` against error-shifting B for each root error (e = 0 is honest B).

    Args:
        params: the protocol's numbers.
        prover: the prover A.
        tree: the claim tree.
        shift: error-shifting B's shift on this tree.
        errors: float32 ``[E]`` root errors.

    Returns:
        float32 ``[E]``: the exact payoffs (spec 4).
    """
    return jax.vmap(lambda e: exact_u(EXACT, params, prover, ErrorShiftingEstimator(e, shift),
                                 tree))(errors)


def obfuscation_payoffs(params, trees, dir_probs):
    """Exact E[U_A] (all of A's paths) of the A zoo against the calibrated estimator, and exact
    survival probabilities in naive recursive debate against a uniform challenger.

    Liars (vmapped): the obfuscating liar (hidden-flaw AND, candidate 0) with each direction
    policy, and a liar on the stable candidate (-1: the tree's honest candidate). Honest provers
    (vmapped): honest A and the wrong-direction A (spec 9.3).

    Args:
        params: the protocol's numbers.
        trees: stacked hidden-flaw trees ``[N, ...]``.
        dir_probs: float32 ``[P, 3]`` direction policies of the obfuscating liar.

    Returns:
        Dict of float32 arrays over trees: ``liars`` ``[N, P]``, ``stable_liar``, ``honest``,
        ``wrong_direction``, ``naive_liar`` and ``naive_honest`` (survival probabilities) ``[N]``.
    """
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
    """Sampled debates of the obfuscating liar on each tree (jitted).

    Args:
        params: the protocol's numbers.
        trees: stacked hidden-flaw trees ``[N, ...]``.
        dir_probs: float32 ``[P, 3]`` direction policies.
        per_tree: sampled prover-estimator debates per policy and tree (static).
        per_tree_naive: sampled naive recursive debates per tree (static).
        key: a typed PRNG key.

    Returns:
        ``(u, survived)``: U_A against the calibrated estimator, float32
        ``[P, N, per_tree]``, and the liar's wins in naive recursive debate against a uniform
        challenger, float32 ``[N, per_tree_naive]``.
    """
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
    """Exact training signals on one hidden-flaw tree, by the number of rounds (spec 7.3).

    Args:
        params: the protocol's numbers (its ``rounds`` is replaced).
        key: a typed PRNG key for the tree.
        rounds: int32 ``[R]`` levels the debates descend (vmapped).
        depth: the tree's depth (static).
        q: the hidden-flaw tree's parameter q (static).

    Returns:
        Four float32 ``[R]`` arrays: PED's U_A of honest A and of the obfuscating liar against
        the calibrated estimator, and the survival probabilities of the honest and lying
        debaters of naive recursive debate against a uniform challenger.
    """
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
    """Max fbs over the internal nodes of ``tree`` for candidate ``cand``.

    Args:
        tree: a claim tree.
        fbs32: its LP lookup's fbs, rounded to 9 decimals like ``run``'s rho (float32).
        cand: the candidate.

    Returns:
        float32 scalar: the largest fractional block sensitivity (spec PED 3.2).
    """
    return jnp.max(node_fbs_jnp(tree, fbs32)[:, cand])


# ---- per-section summaries of a Theorem 6.1 report (pure JAX, inside a swept function) -----------
def _params(rho):
    return PEDParams(rho, jnp.asarray(-1, jnp.int32))


def completeness_metrics(trees, lookup, fbs32, scale, shift_errors, rj_keys, depth):
    """Completeness on noisy-evidence trees: the protocol's rho and honest A's worst payoffs.

    Args:
        trees: stacked noisy-evidence trees (candidate 1 the unstable alternative).
        lookup: their :func:`~dedebate.trees.stability.lp_lookup`; ``fbs32`` its rounded fbs.
        scale: the protocol's rho as a multiple of the trees' fbs (clamped at 1).
        shift_errors: root errors of error-shifting B (float32 ``[E]``; e = 1 is appended).
        rj_keys: keys of the random-joint estimators.
        depth: the trees' depth d.

    Returns:
        float32 scalars: ``fbs``, ``rho``, ``margin = rho^-(d+1)``, the min over trees of honest
        A's payoff against each estimator (``honest_min``, ``root_liar_min``,
        ``constant_half_min``, ``random_joint_min``, ``error_shifting_min/i``), ``honest_dev``,
        ``unstable_min``, ``unstable_max_e1`` and ``worst_minus_margin`` (>= 0: completeness).
    """
    f = jnp.max(jax.vmap(lambda t: max_node_fbs(t, fbs32, 0))(trees))
    rho = jnp.maximum(f * scale, 1.0)
    margin = (1.0 / rho) ** (depth + 1)
    shifts = jax.vmap(lambda t: error_shifting_table_jnp(t, lookup))(trees)
    errors = jnp.concatenate([shift_errors, jnp.ones((1,), jnp.float32)])
    comp = completeness_payoffs(_params(rho), trees, shifts, errors, rj_keys)
    es = comp["error_shifting"]
    c = {"fbs": f, "rho": rho, "margin": margin, "honest_min": jnp.min(comp["honest"]),
         "honest_dev": jnp.max(jnp.abs(comp["honest"] - margin)),
         "root_liar_min": jnp.min(comp["root_liar"]),
         "constant_half_min": jnp.min(comp["constant_half"]),
         "random_joint_min": jnp.min(comp["random_joint"]),
         **{f"error_shifting_min/{i}": jnp.min(es[:, i]) for i in range(es.shape[1])},
         "unstable_min": jnp.min(comp["unstable"]),
         "unstable_max_e1": jnp.max(comp["unstable"][:, -1])}
    c["worst_minus_margin"] = jnp.min(jnp.stack(
        [c["honest_min"], c["root_liar_min"], c["constant_half_min"],
         c["random_joint_min"], jnp.min(es)])) - margin
    return c


def error_shift_metrics(tree, lookup, fbs32, scale, shift_errors, control_rho):
    """Tight error shifting on one tree, and the negative control (rho below the true fbs).

    Args:
        tree: the tight error-shifting tree; ``lookup`` its LP lookup, ``fbs32`` its rounded fbs.
        scale: the protocol's rho as a multiple of the tree's fbs (clamped at 1).
        shift_errors: root errors of error-shifting B (float32 ``[E]``; e = 0 is prepended and
            e = 1 appended).
        control_rho: the negative control's rho.

    Returns:
        float32 scalars ``fbs``, ``rho``, ``honest`` (e = 0), ``u/i`` (U_A at root error i) and
        ``control_u`` (e = 1 at ``control_rho``).
    """
    f = max_node_fbs(tree, fbs32, 0)
    shift = error_shifting_table_jnp(tree, lookup)
    errors = jnp.concatenate([shift_errors, jnp.ones((1,), jnp.float32)])
    errors0 = jnp.concatenate([jnp.zeros((1,), jnp.float32), errors])
    rho = jnp.maximum(f * scale, 1.0)
    u, u_ctrl = jax.vmap(lambda r: error_shift_payoffs(_params(r), honest_prover(), tree, shift,
                                                       errors0))(jnp.stack([rho, control_rho]))
    return {"fbs": f, "rho": rho, "honest": u[0],
            **{f"u/{i}": u[i + 1] for i in range(errors.shape[0])}, "control_u": u_ctrl[-1]}


def obfuscation_metrics(trees, fbs32, scale, dir_probs, q, depth):
    """Obfuscation on hidden-flaw trees: the A zoo against the calibrated estimator, exactly, and
    survival in naive recursive debate.

    Args:
        trees: stacked hidden-flaw trees; ``fbs32`` their rounded LP fbs.
        scale: the protocol's rho as a multiple of the trees' fbs (clamped at 1).
        dir_probs: float32 ``[P, 3]`` direction policies of the obfuscating liar.
        q: the trees' width; depth: their depth d.

    Returns:
        float32 scalars ``fbs``, ``rho``, ``margin``, ``liar_max_abs/i`` (policy i),
        ``liar_max``, ``stable_liar_max``, ``wrong_direction_max``, ``honest_min``,
        ``honest_dev``, ``naive_liar_mean``, ``naive_liar_dev`` (max |survival - (1 - q^-d)|),
        ``naive_honest_min``, ``ped_gap`` and ``naive_gap`` (min honest - max liar payoff).
    """
    f = max_node_fbs(jax.tree.map(lambda x: x[0], trees), fbs32, 1)
    rho = jnp.maximum(f * scale, 1.0)
    margin = rho ** -(depth + 1)
    ex = obfuscation_payoffs(_params(rho), trees, jnp.asarray(dir_probs))
    liar_abs = jnp.max(jnp.abs(ex["liars"]), axis=0)
    o = {"fbs": f, "rho": rho, "margin": margin,
         **{f"liar_max_abs/{i}": liar_abs[i] for i in range(dir_probs.shape[0])},
         "liar_max": jnp.max(ex["liars"]), "stable_liar_max": jnp.max(ex["stable_liar"]),
         "wrong_direction_max": jnp.max(ex["wrong_direction"]),
         "honest_min": jnp.min(ex["honest"]),
         "honest_dev": jnp.max(jnp.abs(ex["honest"] - margin)),
         "naive_liar_mean": jnp.mean(ex["naive_liar"]),
         "naive_liar_dev": jnp.max(jnp.abs(ex["naive_liar"] - (1.0 - q ** -depth))),
         "naive_honest_min": jnp.min(ex["naive_honest"])}
    o["ped_gap"] = o["honest_min"] - o["liar_max"]
    o["naive_gap"] = o["naive_honest_min"] - jnp.max(ex["naive_liar"])
    return o


def sampled_obfuscation_chunks(params, trees, dir_probs, episodes, naive_episodes, key,
                               chunk_debates):
    """:func:`sampled_obfuscation` in chunks of at most ``chunk_debates`` debates per policy
    (one compiled program for every chunk: bounded memory), collected on the host.

    Args:
        params: the protocol's numbers; trees: stacked trees; dir_probs: ``[P, 3]`` policies.
        episodes: sampled PED debates per policy; naive_episodes: sampled naive debates (both
            spread over the trees and rounded up to whole chunks).
        key: typed PRNG key (chunk 0 uses it, chunk c > 0 ``fold_in(key, c)``).
        chunk_debates: the most debates per policy of one call.

    Returns:
        ``(us, surv)``: float64 U_A ``[policy, tree, episode]`` and 0/1 naive survival
        ``[tree, episode]`` (numpy).
    """
    n_trees = trees.truth.shape[0]
    per_tree, per_tree_n = -(-episodes // n_trees), -(-naive_episodes // n_trees)
    chunk = max(1, chunk_debates // n_trees)
    n_chunks = max(-(-per_tree // chunk), -(-per_tree_n // chunk))
    parts = []
    for c in range(n_chunks):
        ck = key if c == 0 else jax.random.fold_in(key, c)
        parts.append(jax.device_get(sampled_obfuscation(
            params, trees, dir_probs, -(-per_tree // n_chunks), -(-per_tree_n // n_chunks), ck)))
    return (np.concatenate([np.asarray(p[0], np.float64) for p in parts], axis=-1),
            np.concatenate([np.asarray(p[1]) for p in parts], axis=-1))


def training_signal_rows(params, key, depths, q) -> list[dict]:
    """:func:`training_signals` as table rows, one per depth, against the expected powers.

    Args:
        params: the protocol's numbers (``params.rho`` is read as a Python float for the powers).
        key: typed PRNG key of the hidden-flaw tree (depth ``max(depths)``).
        depths: the debates' depths d (ints).
        q: the tree's width.

    Returns:
        Rows ``depth``, ``ped_honest``, ``ped_liar``, ``ped_delta``, ``naive_honest``,
        ``naive_liar``, ``naive_delta``, ``rho_power = rho^-(d+1)``, ``q_power = q^-d`` (floats).
    """
    d = np.asarray(depths, np.int32)
    u_h, u_l, s_h, s_l = (np.asarray(x, np.float64).tolist() for x in training_signals(
        params, key, jnp.asarray(d), int(d.max()), q))
    rho = float(params.rho)
    return [{"depth": dd, "ped_honest": u_h[i], "ped_liar": u_l[i], "ped_delta": u_h[i] - u_l[i],
             "naive_honest": s_h[i], "naive_liar": s_l[i], "naive_delta": s_h[i] - s_l[i],
             "rho_power": rho ** -(dd + 1), "q_power": float(q) ** -dd}
            for i, dd in enumerate(d.tolist())]
