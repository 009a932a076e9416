"""The Stackelberg experiment's parts (runs x seeds on trees), exact measurements, warm start."""

from __future__ import annotations

from collections import namedtuple
from operator import itemgetter
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.agents.ped_strategies import honest_prover
from dedebate.core.bits import bit_table
from dedebate.core.pytrees import stack
from dedebate.programs import FAST_COMPILE, TRAINING, jit, program_cache
from dedebate.protocols.prover_estimator import PEDStatic, expected_payoff, ped_params
from dedebate.training import stackelberg as sb
from dedebate.training.exploit import class_exploit_payoff, exploit_payoff
from dedebate.trees.library import and_tree, noisy_evidence_tree
from dedebate.trees.stability import tree_rho

if TYPE_CHECKING:
    from . import Config


Q = 5  # the trees' width q


def make_trees(key, n_trees: int, depth: int, stable: bool = True):
    """Half true, half false roots, q = 5: noisy-evidence trees (Thr_3, fbs <= 2) with an unstable
    hidden-flaw AND candidate, or (not ``stable``) hidden-flaw AND trees (fbs 5 at true claims)."""

    def build(k, root):
        if stable:
            return noisy_evidence_tree(k, depth, Q, 3, (4, 5), (0, 1), root, True)
        return and_tree(k, depth, Q, root, hidden=True)

    k1, k0 = jax.random.split(key)
    t1, t0 = (
        jax.vmap(lambda k, r=root: build(k, r))(jax.random.split(k, n_trees // 2))
        for root, k in ((1, k1), (0, k0))
    )
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b]), t1, t0)


# a schedule: B updates per A update, simultaneous play, B warm-started
Run = namedtuple("Run", "label n_b simultaneous warm")
# runs x seeds on stable or unstable trees, keyed fold_in(run key, key_index)
Part = namedtuple("Part", "name key_index stable runs seeds a_scale")
# a trained part: monitors and carries [runs, seeds, ...], trees [seeds, n_trees], setup info
Trained = namedtuple("Trained", "mon warm trees carry part wall")


def parts(cfg: Config) -> list[Part]:
    """The parts a configuration trains: stable (always), unstable and warm (when asked)."""
    bw, nb, scale = cfg.b_warm_start, cfg.main_n_b, cfg.a_init_scale
    sched = (
        *(Run(f"nB{n}", n, False, bw) for n in cfg.n_b_values),
        Run("simultaneous", 1, True, bw),
    )
    out = [Part("stable", 1, True, sched, cfg.seeds, scale)]
    if cfg.unstable_part:
        out.append(Part("unstable", 2, False, (Run(f"nB{nb}", nb, False, bw),), cfg.seeds, scale))
    if cfg.warm_seeds:
        warm = (Run("cold", nb, False, False), Run("warm", nb, False, True))
        out.append(Part("warm", 3, True, warm, cfg.warm_seeds, cfg.warm_a_init_scale))
    return out


def static(cfg: Config) -> sb.StackelbergStatic:
    """The training's static settings."""
    return sb.StackelbergStatic(cfg.steps, tuple(cfg.hidden_a), tuple(cfg.hidden_b))


def dynamic(cfg: Config, n_b: int, simultaneous: bool = False) -> dict:
    """A run's dynamic numbers: its hparams, the threshold rho^-(d+1) and the convergence band."""
    thr = cfg.rho ** -(cfg.depth + 1)
    return {
        "hp": sb.stackelberg_params(cfg.lr_a, cfg.lr_b, n_b, simultaneous, cfg.rho, cfg.eta),
        "thr": np.float32(thr),
        "band": np.float32(cfg.tol * thr),
    }


def summarise(cfg: Config, mon: sb.StackelbergMonitors) -> dict:
    """:func:`sb.summary` of monitors ``[run, seed, steps]`` at ``main_n_b``'s threshold (numpy)."""
    main = dynamic(cfg, cfg.main_n_b)
    return {k: np.asarray(v) for k, v in sb.summary(mon, main["thr"], main["band"]).items()}


def part_start(cfg: Config, part: Part, key):
    """``(trees [seeds, n_trees], cold carries [seeds])``, seed ``s`` from ``fold_in(key, s)``."""

    def one(k):
        trees = make_trees(jax.random.fold_in(k, 0), cfg.n_trees, cfg.depth, part.stable)
        return trees, sb.init_carry(static(cfg), trees, jax.random.fold_in(k, 1), part.a_scale)

    return jax.vmap(one)(jnp.stack([jax.random.fold_in(key, s) for s in range(part.seeds)]))


@program_cache
def proof_grid(static: sb.StackelbergStatic, rho: float):
    """``jit(vmap)`` over pairs: ``(u_honest [pairs, trees], u [pairs], chain [pairs], u per
    tree [pairs, trees])``, exact."""
    settings, params, honest = PEDStatic(), ped_params(rho), honest_prover()

    def one(prover, estimator, trees):
        def per_tree(t):
            h = expected_payoff(settings, params, honest, estimator, t)
            own = expected_payoff(settings, params, prover, estimator, t)
            return h.u_a, own.u_a, own.a_correct

        u_h, u, acc = jax.vmap(per_tree)(trees)
        _, _, adv = sb.payoff_terms(static, rho, prover, estimator, trees)
        r = 1.0 / jnp.float32(rho)
        chain = r ** (trees.depth + 1) * acc.mean() - adv[:, 0].sum() + adv[:, 1].sum()  # spec 6.4
        return u_h, u.mean(), chain, u

    return jit(jax.vmap(one), options=TRAINING)


@program_cache
def exploit_grid(static: sb.StackelbergStatic, rho: float, restarts: int, steps: int):
    """``jit(vmap)`` over seeds: ``(tabular [seeds, trees], class [seeds])``, the least payoffs
    :func:`dedebate.training.exploit.exploit_payoff` and ``class_exploit_payoff`` find."""

    def one(prover, trees, b_flat, key):
        k_table, k_class = jax.random.split(key)  # apart: split(key, n)[1] is fold_in(key, 1)
        table = exploit_payoff(static, rho, prover, trees, k_table, restarts, steps)
        within = class_exploit_payoff(static, rho, prover, trees, b_flat, k_class, restarts, steps)
        return table, within

    return jit(jax.vmap(one), options=FAST_COMPILE)  # compile-bound at the default size


def measure_proven(cfg: Config, trained, key) -> tuple[float, list[dict]]:
    """``(max fbs of the rho-stable trees, a row per trained pair)``, exact (a NaN propagates);
    the main stable run's rows also hold A's payoff against the strongest Bs found (``key``):
    tabular, and of the trained class (None where not searched)."""
    st, rows, rhos = static(cfg), [], [0.0]
    cache: dict = {}  # tree_rho's, shared by every tree
    for t in trained:
        p, n = t.part, len(t.part.runs)
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), t.carry)
        trees = jax.tree.map(lambda x, n=n: jnp.concatenate([x] * n), t.trees)
        a, b = jax.vmap(lambda tr, c: sb.players(st, tr, c))(trees, flat)
        out = proof_grid(st, float(cfg.rho))(a, b, trees)
        u_h, u, chain, u_tree = (np.asarray(x).reshape((n, -1) + x.shape[1:]) for x in out)
        exploited, in_class = np.full((n, p.seeds), np.nan), np.full((n, p.seeds), np.nan)
        searched = np.zeros(n, bool)  # the runs whose Bs were searched (a NaN result stays NaN)
        if p.stable:
            idx, host_trees = np.ndindex(p.seeds, cfg.n_trees), jax.device_get(t.trees)
            rhos += [tree_rho(jax.tree.map(itemgetter(i), host_trees), cache=cache) for i in idx]
        if p.name == "stable" and cfg.exploit_steps:  # part 1's main schedule
            i = next(j for j, r in enumerate(p.runs) if r.label == f"nB{cfg.main_n_b}")
            program = exploit_grid(st, float(cfg.rho), cfg.exploit_restarts, cfg.exploit_steps)
            lo, hi = i * p.seeds, (i + 1) * p.seeds
            a_i = jax.tree.map(lambda x, lo=lo, hi=hi: x[lo:hi], a)
            b_i = flat.b_flat[lo:hi]
            table, within = program(a_i, t.trees, b_i, jax.random.split(key, p.seeds))
            # per tree, the lesser of the search's table and the trained B's (a table too); the
            # trained B's own mean bounds it, whatever the rounding of the two means
            least = np.minimum(np.asarray(table, np.float64), u_tree[i]).mean(axis=1)
            exploited[i] = np.minimum(least, u[i])
            in_class[i] = np.minimum(np.asarray(within, np.float64), u[i])  # the trained B too
            searched[i] = True
        rows += [
            {
                "part": p.name,
                "run": r.label,
                "seed": s,
                "honest_u_a_min": float(u_h[i, s].min()) if p.stable else float("nan"),
                "trained_u_a": float(u[i, s]),
                "chain_u_a": float(chain[i, s]),
                "chain_abs_err": abs(float(u[i, s]) - float(chain[i, s])),
                "exploited_u_a": float(exploited[i, s]) if searched[i] else None,
                "class_exploited_u_a": float(in_class[i, s]) if searched[i] else None,
            }
            for i, r in enumerate(p.runs)
            for s in range(p.seeds)
        ]
    return float(np.max(rhos)), rows


@struct.dataclass
class EstimatorTarget:
    """A tabular estimator: ``p_d``, the joint ``[tree, node, cand, 2^q]``, its ``phat``."""

    p_d: jax.Array
    joint: jax.Array
    phat: jax.Array


def ogd_target(static, trees, carry, rho: float, delta: float):
    """``(EstimatorTarget, report)``: Algorithm 1's estimator against ``carry``'s A (one seed)."""
    from dedebate.estimators.soundness import construct_estimator

    prover, _ = sb.players(static, trees, carry)
    rep = construct_estimator(prover, trees, rho, delta, fast_compile=True)
    n_int = trees.n_internal
    logits = np.asarray(rep.estimator.logits)[:, :n_int]  # [trees, n_int, cand, 2^q]
    with np.errstate(invalid="ignore"):
        h = np.exp(logits - logits.max(axis=-1, keepdims=True))
    h = h / h.sum(axis=-1, keepdims=True)
    p_d = np.asarray(rep.estimator.p0, np.float32)
    marg = h @ np.asarray(bit_table(trees.q), np.float32)  # [trees, n_int, cand, q]
    # phat of every node in index order: p_d at the root, then the children of (node, cand)
    phat = np.concatenate([p_d[:, None], marg.reshape(len(p_d), -1)], axis=1)[:, :n_int]
    return EstimatorTarget(jnp.asarray(p_d), jnp.asarray(h, jnp.float32), jnp.asarray(phat)), rep


def fit_estimator(static, trees, carry, target, steps: int = 300, lr: float = 0.03):
    """``(carry, loss)``: B fitted to ``target`` by Adam on KL(p_d) + mean KL(joint) (A kept)."""
    n_int, n_cand = trees.n_internal, trees.n_cand
    ks = jnp.asarray(sb.node_rounds(trees))  # each node's round k (levels to the leaves)
    _, b0, _, unravel_b = sb.templates(static, trees.q)
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

    def body(_, x):
        bf, opt = x
        return sb.adam_step(bf, opt, jax.grad(loss)(bf), lr, -1.0)

    bf, _ = jax.lax.fori_loop(0, steps, body, (carry.b_flat, sb.ADAM.init(carry.b_flat)))
    return carry.replace(b_flat=bf, opt_b=sb.ADAM.init(bf)), loss(bf)


def warm_start(static, trees, carries, rho: float, delta: float, steps: int):
    """``(carries, info)``: each seed's B fitted to Algorithm 1's estimator for its initial A."""
    pairs = [jax.tree.map(itemgetter(s), (trees, carries)) for s in range(len(carries.step))]
    fits = [ogd_target(static, t, c, rho, delta) for t, c in pairs]
    stages = [[st for st in rep.stages if st.stage != "final"] for _, rep in fits]
    fit = jit(jax.vmap(lambda t, c, g: fit_estimator(static, t, c, g, steps)), options=TRAINING)
    fitted, kl = fit(trees, carries, stack([target for target, _ in fits]))
    adv = jit(jax.vmap(lambda t, c: sb.advantage_at(static, float(rho), t, c)[2]), options=TRAINING)
    return fitted, {
        "adv_cold": np.abs(np.asarray(adv(trees, carries))).max(axis=(-2, -1)),
        "adv_warm": np.abs(np.asarray(adv(trees, fitted))).max(axis=(-2, -1)),
        "fit_kl": np.asarray(kl),
        "ogd_steps": np.asarray([[st.steps for st in ss] for ss in stages], np.int32),
        "ogd_max_adv": np.asarray([max(st.max_adv for st in ss) for ss in stages], np.float32),
    }
