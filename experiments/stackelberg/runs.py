"""The Stackelberg experiment's parts (runs x seeds on a family of trees), exact measurements."""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.ped_strategies import honest_prover
from dedebate.programs import TRAINING, jit, program_cache
from dedebate.protocols.prover_estimator import PEDStatic, expected_payoff, ped_params
from dedebate.training import stackelberg as sb
from dedebate.trees.library import and_tree, noisy_evidence_tree
from dedebate.trees.stability import tree_rho

if TYPE_CHECKING:
    from . import Config


def stack(xs):
    """Stack equal-structure pytrees along a new leading axis."""
    return jax.tree.map(lambda *a: jnp.stack(a), *xs)


def _halves(build, key, n_trees: int):
    k1, k0 = jax.random.split(key)
    h = n_trees // 2
    t1, t0 = build(jax.random.split(k1, h), 1), build(jax.random.split(k0, h), 0)
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b]), t1, t0)


def stable_trees(key, n_trees: int, depth: int):
    """Noisy-evidence trees (q = 5, Thr_3, fbs <= 2) with an unstable hidden-flaw AND candidate."""

    def build(keys, root):
        args = (depth, 5, 3, (4, 5), (0, 1), root, True)
        if isinstance(keys, jax.core.Tracer):  # traced: the library builds one key at a time
            return jax.vmap(lambda k: noisy_evidence_tree(k, *args))(keys)
        return noisy_evidence_tree(keys, *args)

    return _halves(build, key, n_trees)


def unstable_trees(key, n_trees: int, depth: int):
    """Hidden-flaw AND trees (q = 5): only the unstable decomposition (fbs 5 at true claims)."""
    return _halves(lambda ks, root: and_tree(ks, depth, 5, root, hidden=True), key, n_trees)


class Run(NamedTuple):
    """A schedule: its label, B updates per A update, simultaneous play, B warm-started."""

    label: str
    n_b: int
    simultaneous: bool
    warm: bool


class Part(NamedTuple):
    """``runs`` x ``seeds`` on stable or unstable trees, keyed ``fold_in(run key, key_index)``."""

    name: str
    key_index: int
    stable: bool
    runs: tuple
    seeds: int
    a_scale: float


class Trained(NamedTuple):
    """A trained part: monitors and carries ``[runs, seeds, ...]``, trees ``[seeds, n_trees]``."""

    mon: sb.StackelbergMonitors
    warm: dict | None
    trees: object
    carry: object
    part: Part
    wall: float


class ProvenMeasured(NamedTuple):
    """The exact numbers the proven rows read (:func:`measure_proven`)."""

    honest_min: float
    per_run: dict[str, float]
    excess_max: float
    rho_max: float
    n_stable: int
    chain_max: float
    n_pairs: int
    trained_u_min: float
    trained_u_max: float


def parts(cfg: Config) -> list[Part]:
    """The parts a configuration trains: stable (always), unstable and warm (when asked)."""
    bw, nb = cfg.b_warm_start, cfg.main_n_b
    sched = [Run(f"nB{n}", n, False, bw) for n in cfg.n_b_values] + [
        Run("simultaneous", 1, True, bw)
    ]
    out = [Part("stable", 1, True, tuple(sched), cfg.seeds, cfg.a_init_scale)]
    if cfg.unstable_part:
        unstable = (Run(f"nB{nb}", nb, False, bw),)
        out.append(Part("unstable", 2, False, unstable, cfg.seeds, cfg.a_init_scale))
    if cfg.warm_seeds:
        warm = (Run("cold", nb, False, False), Run("warm", nb, False, True))
        out.append(Part("warm", 3, True, warm, cfg.warm_seeds, cfg.warm_a_init_scale))
    return out


def static(cfg: Config) -> sb.StackelbergStatic:
    """The training's static settings."""
    return sb.StackelbergStatic(
        steps=cfg.steps, hidden_a=tuple(cfg.hidden_a), hidden_b=tuple(cfg.hidden_b)
    )


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


def point_metrics(cfg: Config, mon: sb.StackelbergMonitors) -> dict:
    """The sweep row of a run: the summary of part 1's seed 0 at schedule ``main_n_b``."""
    im = cfg.n_b_values.index(cfg.main_n_b)
    return {k: v[im, 0].item() for k, v in summarise(cfg, mon).items()}


@program_cache
def init_grid(static: sb.StackelbergStatic, a_scale: float):
    """``jit(vmap over seeds (sb.init_carry))``: ``(trees, keys) -> carries``."""
    return jit(jax.vmap(lambda t, k: sb.init_carry(static, t, k, a_scale)))


def part_start(static: sb.StackelbergStatic, part: Part, key, n_trees: int, depth: int):
    """``(trees [seeds, n_trees], cold carries [seeds])``, seed ``s`` from ``fold_in(key, s)``."""
    build = stable_trees if part.stable else unstable_trees
    keys = [jax.random.fold_in(key, s) for s in range(part.seeds)]
    trees = stack([build(jax.random.fold_in(k, 0), n_trees, depth) for k in keys])
    init_keys = jnp.stack([jax.random.fold_in(k, 1) for k in keys])
    return trees, init_grid(static, float(part.a_scale))(trees, init_keys)


@program_cache
def proof_grid(static: sb.StackelbergStatic, rho: float):
    """``jit(vmap)`` over pairs: ``(u_honest [pairs, trees], u [pairs], chain [pairs])``, exact."""
    settings, params, honest = PEDStatic(), ped_params(rho), honest_prover()

    def one(prover, estimator, trees):
        def per_tree(t):
            h = expected_payoff(settings, params, honest, estimator, t)
            own = expected_payoff(settings, params, prover, estimator, t)
            return h.u_a, own.u_a, own.a_correct

        u_h, u, acc = jax.vmap(per_tree)(trees)
        _, _, adv = sb.payoff_terms(static, rho, prover, estimator, trees)
        d = jax.tree.map(lambda x: x[0], trees).depth
        r = 1.0 / jnp.float32(rho)
        chain = r ** (d + 1) * acc.mean() - adv[:, 0].sum() + adv[:, 1].sum()  # spec 6.4
        return u_h, u.mean(), chain

    return jit(jax.vmap(one), options=TRAINING)


def measure_proven(cfg: Config, trained) -> tuple[ProvenMeasured, list[dict]]:
    """The proven rows' numbers on every trained pair (a NaN propagates) and their table."""
    st, thr = static(cfg), cfg.rho ** -(cfg.depth + 1)
    rows, cache, per_run, rhos, errs, honest, own = [], {}, {}, [0.0], [0.0], [], []
    for t in trained:
        p, n = t.part, len(t.part.runs)
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), t.carry)
        trees = jax.tree.map(lambda x, n=n: jnp.concatenate([x] * n), t.trees)
        a, b = jax.vmap(lambda tr, c: sb.players(st, tr, c))(trees, flat)
        out = proof_grid(st, float(cfg.rho))(a, b, trees)
        u_h, u, chain = (np.asarray(x).reshape((n, -1) + x.shape[1:]) for x in out)
        err = np.abs(u.astype(np.float64) - chain.astype(np.float64))
        errs.append(err.max())
        if p.stable:
            idx = np.ndindex(p.seeds, cfg.n_trees)
            rhos += [tree_rho(jax.tree.map(itemgetter(i), t.trees), cache=cache) for i in idx]
            honest.append(u_h.ravel())
            own.append(u.ravel())
            per_run |= {f"{p.name}/{r.label}": float(u_h[i].min()) for i, r in enumerate(p.runs)}
        rows += [
            {
                "part": p.name,
                "run": r.label,
                "seed": s,
                "honest_u_a_min": float(u_h[i, s].min()) if p.stable else float("nan"),
                "trained_u_a": float(u[i, s]),
                "chain_u_a": float(chain[i, s]),
                "chain_abs_err": float(err[i, s]),
            }
            for i, r in enumerate(p.runs)
            for s in range(p.seeds)
        ]
    honest, own = np.concatenate(honest), np.concatenate(own)
    return ProvenMeasured(
        honest_min=float(honest.min()),
        per_run=per_run,
        excess_max=float(np.max([0.0, float(honest.max()) - thr])),
        rho_max=float(np.max(rhos)),
        n_stable=len(honest) // cfg.n_trees,
        chain_max=float(np.max(errs)),
        n_pairs=len(rows),
        trained_u_min=float(own.min()),
        trained_u_max=float(own.max()),
    ), rows
