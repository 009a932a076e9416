"""The trees, fbs LPs and exact or sampled payoffs of a Theorem 6.1 report (spec PED 3, 9)."""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents import ped_strategies as ps
from dedebate.programs import FAST_COMPILE, jit
from dedebate.protocols import naive_recursive as nr
from dedebate.protocols.prover_estimator import PEDParams, PEDStatic, expected_payoff, play
from dedebate.trees import hidden_flaw_tree, library, noisy_evidence_tree, unanimous_tree
from dedebate.trees import stability as st

EXACT = PEDStatic(mode="exact")
SAMPLED = PEDStatic(mode="sampled")
SAMPLED_CHUNK = 1 << 18  # sampled debates per policy per compiled call (the numbers depend on it)
NAIVE_LIAR = nr.naive_debater("obfuscating_liar", cand=0)
# the obfuscating liar's direction policies: probabilities of the directions (-1, 0, +1)
DIRECTION_POLICIES = {
    "always +1": (0.0, 0.0, 1.0),
    "always -1": (1.0, 0.0, 0.0),
    "random +-1": (0.5, 0.0, 0.5),
}
noisy = partial(noisy_evidence_tree, unstable_alternative=True)  # candidate 1: an AND
tight = partial(noisy_evidence_tree, depth=4, q=5, t=3, true_counts=(4,), false_counts=(1,))


def lookups(cfg):
    """``(LP lookup, its fbs float32)`` of the noisy, tight and hidden-flaw trees (host)."""
    k, q = jax.random.key(0), cfg.obf_q
    trees = (
        (noisy(k, depth=cfg.noisy_depth), (0, 1, 8, 9)),
        (tight(k), (1, 4)),
        (hidden_flaw_tree(k, depth=cfg.obf_depth, q=q), (0, q - 1, q)),
    )
    lks = [st.lp_lookup(tree.tables, pops) for tree, pops in trees]
    return [(lk, np.round(lk["fbs"], 9).astype(np.float32)) for lk in lks]


def tree_rhos(noisy_keys, unanimous_key, depth: int):
    """rho by LP of the noisy trees (max; NaN if any), the unanimous tree, the AND alternative."""
    cache: dict = {}
    trees = jax.device_get(noisy(noisy_keys, depth=depth))  # one copy, then numpy slices
    tree_list = [jax.tree.map(lambda x, i=i: x[i], trees) for i in range(len(noisy_keys))]
    rho_noisy = float(np.max([st.tree_rho(t, cache=cache) for t in tree_list]))  # NaN if any
    rho_uni = st.tree_rho(unanimous_tree(unanimous_key, depth=2), cache=cache)
    return rho_noisy, rho_uni, st.tree_rho(tree_list[0], cand=1, cache=cache)


def fbs_rows(qs) -> list[dict]:
    """fbs by the LP, its dual and the closed form at the first w bits set (spec 3.2, 3.4)."""
    cases = []
    for q in qs:
        for t in range(1, q + 1):
            tab = library.threshold_table(q, t)
            cases += [("threshold", q, t, w, tab, st.fbs_threshold(q, t, w)) for w in range(q + 1)]
        for w in range(q + 1):
            cases += [
                ("AND", q, q, w, library.and_table(q), st.fbs_and(q, w)),
                ("OR", q, 1, w, library.or_table(q), st.fbs_or(q, w)),
                ("parity", q, 0, w, library.parity_table(q), st.fbs_parity(q)),
                ("dictator", q, 0, w, library.dictator_table(q), 1.0),
            ]
            if q % 2:
                m = (q + 1) // 2
                cases += [("majority", q, m, w, library.majority_table(q), st.fbs_majority(q, w))]
    cols = ("family", "q", "t", "w", "lp", "dual", "closed")
    return [
        dict(zip(cols, (f, q, t, w, st.fbs(tab, 2**w - 1), st.fbs_dual(tab, 2**w - 1), float(c))))
        for f, q, t, w, tab, c in cases
    ]


def flip_rows(qs) -> list[dict]:
    """``F(eps)`` by LP against ``eps * fbs`` for thresholds, eps in {0.01, 1/q}, q <= 5."""
    rows = []
    for q in [k for k in qs if k <= 5]:
        for t, w in [(t, w) for t in range(1, q + 1) for w in range(q + 1)]:
            tab, z = library.threshold_table(q, t), 2**w - 1
            f = st.fbs(tab, z)
            for eps in (0.01, 1.0 / q):
                F = st.flip_probability(tab, z, eps)
                rows.append({"q": q, "t": t, "w": w, "eps": eps, "F": F, "eps_fbs": eps * f})
    return rows


def _exact_u(params, prover, estimator, tree):
    return play(EXACT, params, prover, estimator, tree, jax.random.key(0)).u_a


def _params(rho):
    return PEDParams(rho, jnp.asarray(-1, jnp.int32))


def completeness_metrics(cfg, keys, lookup, fbs32, dyn):
    """Honest A against the completeness zoo and error-shifting B; the unstable prover."""
    n_keys = jax.random.split(keys["noisy"], cfg.noisy_trees)
    trees = jax.vmap(lambda k: noisy(k, depth=cfg.noisy_depth))(n_keys)
    rj_keys = jax.random.split(keys["rj"], cfg.random_joints)
    f = jnp.max(jax.vmap(lambda t: jnp.max(st.node_fbs_jnp(t, fbs32)[:, 0]))(trees))
    rho = jnp.maximum(f * dyn["rho_scale"], 1.0)
    margin = (1.0 / rho) ** (cfg.noisy_depth + 1)
    shifts = jax.vmap(lambda t: st.error_shifting_table_jnp(t, lookup))(trees)
    errors = jnp.pad(dyn["shift_errors"], (0, 1), constant_values=1.0)  # the errors, then e = 1
    params, honest = _params(rho), ps.honest_prover()
    provers = jax.tree.map(lambda a, b: jnp.stack([a, b]), honest, ps.unstable_prover(1))
    ests = (ps.HonestEstimator(), ps.RootLiarEstimator(), ps.ConstantEstimator(jnp.float32(0.5)))

    def per_tree(args):
        tree, shift = args
        fixed = jax.tree.map(lambda *x: jnp.stack(x), *[ps.tabulate(e, tree) for e in ests])
        rand = jax.vmap(lambda k: ps.random_joint_estimator(k, tree))(rj_keys)
        zoo = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), fixed, rand)
        u_zoo = jax.vmap(lambda est: _exact_u(params, honest, est, tree))(zoo)
        shifting = jax.vmap(
            lambda pr: jax.vmap(
                lambda e: _exact_u(params, pr, ps.ErrorShiftingEstimator(e, shift), tree)
            )(errors)
        )(provers)
        return u_zoo, shifting[0], shifting[1]

    u_zoo, es, unstable = jax.lax.map(per_tree, (trees, shifts))
    return {"fbs": f, "rho": rho, **completeness_summary(u_zoo, es, unstable, margin)}


def completeness_summary(u_zoo, es, unstable, margin):
    """Over the trees, honest A's U_A: ``u_zoo[tree, B]`` (honest, root liar, constant 1/2,
    the random joints), ``es[tree, e]``; the unstable prover's ``unstable[tree, e]``."""
    c = {
        "honest_min": jnp.min(u_zoo[:, 0]),
        "honest_dev": jnp.max(jnp.abs(u_zoo[:, 0] - margin)),
        "root_liar_min": jnp.min(u_zoo[:, 1]),
        "constant_half_min": jnp.min(u_zoo[:, 2]),
        "random_joint_min": jnp.min(u_zoo[:, 3:]),
        **{f"error_shifting_min/{i}": jnp.min(es[:, i]) for i in range(es.shape[1])},
        "unstable_min": jnp.min(unstable),
        "unstable_max_e1": jnp.max(unstable[:, -1]),
    }
    c["worst_minus_margin"] = jnp.minimum(jnp.min(u_zoo), jnp.min(es)) - margin  # the zoo's min
    return c


def error_shift_metrics(key, lookup, fbs32, dyn):
    """U_A against error-shifting B on the tight tree (e = 0, the errors, 1); the control."""
    tree = tight(key)
    f = jnp.max(st.node_fbs_jnp(tree, fbs32)[:, 0])
    shift = st.error_shifting_table_jnp(tree, lookup)
    errors = jnp.pad(dyn["shift_errors"], 1, constant_values=(0.0, 1.0))  # e = 0, the errors, 1
    rho = jnp.maximum(f * dyn["rho_scale"], 1.0)

    def u_a(r, e):
        return _exact_u(_params(r), ps.honest_prover(), ps.ErrorShiftingEstimator(e, shift), tree)

    rhos = jnp.stack([rho, dyn["control_rho"]])
    u, u_ctrl = jax.vmap(jax.vmap(u_a, (None, 0)), (0, None))(rhos, errors)
    return {
        "fbs": f,
        "rho": rho,
        "honest": u[0],
        **{f"u/{i - 1}": u[i] for i in range(1, errors.shape[0])},
        "control_u": u_ctrl[-1],
    }


def obfuscation_metrics(cfg, key, fbs32, scale):
    """The A zoo against the calibrated B on hidden-flaw trees; naive-debate survival."""
    q, depth, n = cfg.obf_q, cfg.obf_depth, len(DIRECTION_POLICIES)
    hidden = jax.vmap(lambda k: hidden_flaw_tree(k, depth=depth, q=q))
    trees = hidden(jax.random.split(key, cfg.obf_trees))
    f = jnp.max(st.node_fbs_jnp(jax.tree.map(lambda x: x[0], trees), fbs32)[:, 1])
    rho = jnp.maximum(f * scale, 1.0)
    margin = rho ** -(depth + 1)
    params, honest = _params(rho), ps.honest_prover()
    cal, ch = ps.CalibratedEstimator(), nr.UniformChallenger()
    # the liar with each direction policy (hidden-flaw AND), then a liar on the stable candidate
    dps = jnp.asarray([*DIRECTION_POLICIES.values(), (0.0, 0.0, 1.0)], jnp.float32)
    cands = jnp.asarray([0] * n + [-1], jnp.int32)

    def per_tree(tree):
        def liar_u(dp, c):
            liar = ps.obfuscating_liar().replace(dir_probs=dp, cand=c)
            return expected_payoff(EXACT, params, liar, cal, tree).u_a

        def honest_u(reverse):
            return _exact_u(params, dataclasses.replace(honest, reverse=reverse), cal, tree)

        return (
            jax.vmap(liar_u)(dps, cands),
            jax.vmap(honest_u)(jnp.asarray([False, True])),
            nr.survival_probability(NAIVE_LIAR, ch, tree)[0],
            nr.survival_probability(nr.naive_debater("honest"), ch, tree)[0],
        )

    liars, honests, naive_liar, naive_honest = jax.vmap(per_tree)(trees)
    naive = 1.0 - q**-depth  # the naive liar's survival on every tree
    summary = obfuscation_summary(liars, honests, naive_liar, naive_honest, margin, naive)
    return {"fbs": f, "rho": rho, **summary}


def obfuscation_summary(liars, honests, naive_liar, naive_honest, margin, naive):
    """Over the trees: ``liars[tree, policy]`` (the direction policies, then the liar on the
    stable candidate), ``honests[tree, reverse]``, the naive debaters' survival."""
    n = liars.shape[1] - 1
    liar_abs = jnp.max(jnp.abs(liars[:, :n]), axis=0)
    o = {
        **{f"liar_max_abs/{i}": liar_abs[i] for i in range(n)},
        "liar_max": jnp.max(liars[:, :n]),
        "stable_liar_max": jnp.max(liars[:, n]),
        "wrong_direction_max": jnp.max(honests[:, 1]),
        "honest_min": jnp.min(honests[:, 0]),
        "honest_dev": jnp.max(jnp.abs(honests[:, 0] - margin)),
        "naive_liar_mean": jnp.mean(naive_liar),
        "naive_liar_dev": jnp.max(jnp.abs(naive_liar - naive)),
        "naive_honest_min": jnp.min(naive_honest),
    }
    o["ped_gap"] = o["honest_min"] - o["liar_max"]
    o["naive_gap"] = o["naive_honest_min"] - jnp.max(naive_liar)
    return o


@jit(static_argnums=(3, 4), options=FAST_COMPILE)
def sampled_obfuscation(params, trees, dir_probs, per_tree, per_tree_naive, key):
    """``(u [P, N, per_tree], survived [N, per_tree_naive])``: the liar's sampled debates."""
    cal, ch = ps.CalibratedEstimator(), nr.UniformChallenger()
    k_ped, k_naive = jax.random.split(key)

    def sample(play_one, key, n):  # n debates on each tree: a key per tree, split per debate
        def one_tree(tree, kt):
            return jax.vmap(lambda k: play_one(tree, k))(jax.random.split(kt, n))

        return jax.vmap(one_tree)(trees, jax.random.split(key, trees.truth.shape[0]))

    def one_policy(dp, kp):
        liar = ps.obfuscating_liar().replace(dir_probs=dp)
        return sample(lambda t, k: play(SAMPLED, params, liar, cal, t, k).u_a, kp, per_tree)

    def naive(t, k):
        return nr.play_naive(NAIVE_LIAR, ch, t, k).alice_wins.astype(jnp.float32)

    u = jax.vmap(one_policy)(dir_probs, jax.random.split(k_ped, dir_probs.shape[0]))
    return u, sample(naive, k_naive, per_tree_naive)


def sampled_debates(cfg, params, tree_key, key):
    """:func:`sampled_obfuscation` on the hidden-flaw trees, ``SAMPLED_CHUNK`` debates per policy
    a chunk (chunk c > 0: ``fold_in(fold_in(key, 2), c)``): numpy ``us [policy, tree, episode]``,
    ``surv``."""
    n = cfg.obf_trees
    trees = hidden_flaw_tree(jax.random.split(tree_key, n), depth=cfg.obf_depth, q=cfg.obf_q)
    dps = jnp.asarray(list(DIRECTION_POLICIES.values()), jnp.float32)
    per_tree, per_tree_n = -(-cfg.obf_episodes // n), -(-cfg.naive_episodes // n)
    n_chunks = -(-max(per_tree, per_tree_n) // max(1, SAMPLED_CHUNK // n))
    sizes = (-(-per_tree // n_chunks), -(-per_tree_n // n_chunks))
    later = jax.random.fold_in(key, 2)  # chunk 0 splits key into its children 0 and 1
    keys = [key] + [jax.random.fold_in(later, c) for c in range(1, n_chunks)]
    parts = [jax.device_get(sampled_obfuscation(params, trees, dps, *sizes, k)) for k in keys]
    us, surv = zip(*parts)
    return np.concatenate(us, axis=-1).astype(np.float64), np.concatenate(surv, axis=-1)


@jit(static_argnums=(3, 4), options=FAST_COMPILE)
def training_signals(params, key, rounds, depth, q):
    """float32 ``[R]`` U_A of honest A / the liar, naive survival of honest / liar (spec 7.3)."""
    tree = hidden_flaw_tree(key, depth=depth, q=q)
    cal, ch = ps.CalibratedEstimator(), nr.UniformChallenger()

    def one(n):
        p = params.replace(rounds=n)
        return (
            _exact_u(p, ps.honest_prover(), cal, tree),
            expected_payoff(EXACT, p, ps.obfuscating_liar(), cal, tree).u_a,
            nr.survival_probability(nr.naive_debater("honest"), ch, tree, rounds=n)[0],
            nr.survival_probability(NAIVE_LIAR, ch, tree, rounds=n)[0],
        )

    return jax.vmap(one)(rounds)


def training_signal_rows(params, key, depths, q) -> list[dict]:
    """:func:`training_signals` as rows per depth, with ``rho^-(d+1)`` and ``q^-d``."""
    d = np.asarray(depths, np.int32)
    signals = training_signals(params, key, jnp.asarray(d), int(d.max()), q)
    u_h, u_l, s_h, s_l = (np.asarray(x, np.float64).tolist() for x in signals)
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
