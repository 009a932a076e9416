"""Parts of Stackelberg training runs (spec PED 7.4, 8.5) and the exact terms measured on them.

A :class:`Part` is a batch of training runs (``runs``, each a :class:`Run` schedule, x
``seeds``) on one family of trees: :func:`stable_trees` (noisy-evidence trees with an unstable
hidden-flaw AND alternative) or :func:`unstable_trees` (only the hidden-flaw AND decomposition).
:func:`part_start` draws every seed's trees and initial players (seed ``s`` from ``fold_in(key,
s)``: trees from ``fold_in(., 0)``, players from ``fold_in(., 1)``, the same for every run:
paired). :func:`measure_proven` measures on the trained players what the theorems settle
(completeness of the honest prover against every trained estimator, spec PED 4; chaining, spec
6.4), exactly (path enumeration).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.ped_strategies import honest_prover
from dedebate.programs import TRAINING, jit, program_cache
from dedebate.protocols.prover_estimator import (
    PEDStatic,
    expected_payoff,
    ped_params,
)
from dedebate.training.stackelberg import (
    StackelbergMonitors,
    StackelbergStatic,
    init_carry,
    payoff_terms,
    players,
    stackelberg_params,
    summary,
)
from dedebate.trees.library import and_tree, noisy_evidence_tree
from dedebate.trees.stability import tree_rho
from dedebate.trees.tree import ClaimTree

if TYPE_CHECKING:
    from . import Config


def stack(xs):
    """Stack a sequence of equal-structure pytrees along a new leading axis."""
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *xs)


def _batch(build, keys, *args):
    """``build(keys, *args)``: the compiled batch of trees, or vmapped inside a trace."""
    if isinstance(keys, jax.core.Tracer):
        return jax.vmap(lambda k: build(k, *args))(keys)
    return build(keys, *args)


def _halves(build, key, n_trees: int):
    k1, k0 = jax.random.split(key)
    h = n_trees // 2
    t1, t0 = build(jax.random.split(k1, h), 1), build(jax.random.split(k0, h), 0)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), t1, t0)


def stable_trees(key, n_trees: int, depth: int) -> ClaimTree:
    """Noisy-evidence trees with a stable candidate (q = 5, M_D = Thr_3; true claims 4-5 true
    children, false 0-1: fbs <= 2) and an unstable hidden-flaw AND alternative (fbs = 5).
    """
    return _halves(
        lambda ks, root: _batch(noisy_evidence_tree, ks, depth, 5, 3, (4, 5), (0, 1), root, True),
        key,
        n_trees,
    )


def unstable_trees(key, n_trees: int, depth: int) -> ClaimTree:
    """Hidden-flaw AND trees (q = 5): only the unstable decomposition (fbs 5 at true claims)."""
    return _halves(lambda ks, root: and_tree(ks, depth, 5, root, hidden=True), key, n_trees)


class Run(NamedTuple):
    """One training schedule of a part: its ``label`` (in log keys and tables), B's updates per
    A update ``n_b``, ``simultaneous`` play (one B step alongside each A step) and whether B is
    ``warm``-started from Algorithm 1's estimator before training."""

    label: str
    n_b: int
    simultaneous: bool
    warm: bool


@dataclasses.dataclass(frozen=True)
class Part:
    """A batch of training runs: ``runs`` (:class:`Run`) x ``seeds`` on
    :func:`stable_trees` (``stable``) or :func:`unstable_trees`, A's output layer drawn at
    ``a_scale`` (0: fair coins); its key is ``fold_in(run key, key_index)``."""

    name: str
    key_index: int
    stable: bool
    runs: tuple
    seeds: int
    a_scale: float


@program_cache
def init_grid(static: StackelbergStatic, a_scale: float):
    """``jit(vmap over seeds (init_carry))``: ``(trees [seeds], keys [seeds]) -> carries``."""
    return jit(jax.vmap(lambda t, k: init_carry(static, t, k, a_scale)))


def part_start(static: StackelbergStatic, part: Part, key, n_trees: int, depth: int):
    """``(trees [seeds, n_trees], carries [seeds])``: a part's trees and cold players, every seed's.

    Seed ``s`` uses ``fold_in(key, s)``: trees from ``fold_in(., 0)``, players from
    ``fold_in(., 1)``.
    """
    build = stable_trees if part.stable else unstable_trees
    seed_keys = [jax.random.fold_in(key, s) for s in range(part.seeds)]
    trees = stack([build(jax.random.fold_in(k, 0), n_trees, depth) for k in seed_keys])
    init_keys = jnp.stack([jax.random.fold_in(k, 1) for k in seed_keys])
    return trees, init_grid(static, float(part.a_scale))(trees, init_keys)


class Trained(NamedTuple):
    """One part after training: monitors ``[runs, seeds, steps]``, warm-start info, trees
    ``[seeds, n_trees]``, final carries ``[runs, seeds]``, the part and its wall seconds."""

    mon: StackelbergMonitors
    warm: dict
    trees: object
    carry: object
    part: Part
    wall: float


def monitor_rows(part: Part, mon: StackelbergMonitors, start: int) -> list[tuple[int, dict]]:
    """Per-seed monitor curves of one chunk, one row per A update, keys ``PART/RUN/seedS/NAME``."""
    names = {
        "u_a": "payoff",
        "a_correct": "a_correct",
        "p_stable": "p_stable",
        "certified": "certified",
        "max_adv": "max_adv",
        "calib": "calib",
    }
    rows = []
    for t in range(mon.u_a.shape[-1]):
        row = {}
        for i, run in enumerate(part.runs):
            for s in range(part.seeds):
                for field, label in names.items():
                    row[f"{part.name}/{run.label}/seed{s}/{label}"] = float(
                        getattr(mon, field)[i, s, t]
                    )
        rows.append((start + t, row))
    return rows


@program_cache
def proof_grid(static: StackelbergStatic, rho: float):
    """``jit(vmap)`` over trained pairs: ``(u_honest [pairs, trees], u [pairs], chain [pairs])``.

    All exact (path enumeration, spec PED 2.2): ``u_honest`` is E[U_A] of the honest A (spec 2.3)
    against the trained B by :func:`expected_payoff` (>= rho^-(d+1) on a rho-stable tree,
    spec PED 4, Thm 6.1(1)); ``u`` the trained A's mean E[U_A] against the trained B; ``chain`` the
    same payoff rebuilt from B's realised advantages against the spec 6.3 tests
    (:func:`payoff_terms`), ``r^(d+1) P[A correct] - sum adv[:, 0] + sum adv[:, 1]``, equal to ``u``
    on decomposable trees (spec 6.4 chaining).
    """
    settings, params, honest = PEDStatic(), ped_params(rho), honest_prover()

    def one(prover, estimator, trees):
        def per_tree(t):
            h = expected_payoff(settings, params, honest, estimator, t)
            own = expected_payoff(settings, params, prover, estimator, t)
            return h.u_a, own.u_a, own.a_correct

        u_h, u, acc = jax.vmap(per_tree)(trees)
        _, _, adv = payoff_terms(static, rho, prover, estimator, trees)
        d = jax.tree_util.tree_map(lambda x: x[0], trees).depth
        r = 1.0 / jnp.float32(rho)
        chain = r ** (d + 1) * acc.mean() - adv[:, 0].sum() + adv[:, 1].sum()
        return u_h, u.mean(), chain

    return jit(jax.vmap(one), options=TRAINING)


def proof_terms(static: StackelbergStatic, rho: float, trees, carries):
    """``(u_honest [runs, seeds, n_trees], u [runs, seeds], chain [runs, seeds])`` (numpy)."""
    runs = jax.tree_util.tree_leaves(carries)[0].shape[0]
    flat = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), carries)
    tr = jax.tree_util.tree_map(lambda x: jnp.concatenate([x] * runs), trees)
    a, b = jax.vmap(lambda t, c: players(static, t, c))(tr, flat)
    out = proof_grid(static, float(rho))(a, b, tr)
    return tuple(np.asarray(x).reshape((runs, -1) + x.shape[1:]) for x in out)


@dataclasses.dataclass
class ProvenMeasured:
    """The exact numbers the proven rows read, measured on the trained players.

    ``honest_min``: the honest A's smallest E[U_A] over every trained B and rho-stable tree
    (``per_run``: per run); ``excess_max``: its largest excess over rho^-(d+1); ``rho_max``: the
    largest fbs of the stable candidate over those trees' nodes (the theorem's premise);
    ``n_stable``: trained Bs on those trees; ``chain_max``: the largest |E[U_A] - chaining sum|
    over ``n_pairs`` trained pairs; ``trained_u_min/max``: the trained A's E[U_A] against the
    same Bs (for contrast); ``wall``: seconds of the measurement (for a note)."""

    honest_min: float
    per_run: dict[str, float]
    excess_max: float
    rho_max: float
    n_stable: int
    chain_max: float
    n_pairs: int
    trained_u_min: float
    trained_u_max: float
    wall: float = 0.0


def _strict(fn, values) -> float:
    """``fn`` (min or max) of floats that fails closed: NaN if empty or any is NaN."""
    xs = [float(v) for v in values]
    return math.nan if not xs or any(math.isnan(v) for v in xs) else fn(xs)


def measure_proven(static: StackelbergStatic, rho: float, thr: float, trained):
    """``(ProvenMeasured, rows)``: what the proven rows read, exact on the trained players.

    * completeness (spec PED 4, Thm 6.1(1)): on the rho-stable trees of the stable parts the
      honest A's E[U_A] against every trained B (min over runs, seeds and trees);
    * chaining (spec 6.4): every trained pair's E[U_A] against r^(d+1) P[A correct] minus B's
      advantages on the round-reward tests plus those on the calibration tests (spec 6.3).
    """
    rows, cache, n_stable = [], {}, 0
    rho_max, honest_min, excess_max = 0.0, np.inf, 0.0
    per_run, chain_max, trained_u = {}, 0.0, []
    for part, trees, carries in trained:
        u_h, u, chain = proof_terms(static, rho, trees, carries)
        err = np.abs(u.astype(np.float64) - chain.astype(np.float64))
        chain_max = _strict(max, [chain_max, float(err.max())])
        if part.stable:
            for s in range(part.seeds):
                for i in range(u_h.shape[-1]):
                    t = jax.tree_util.tree_map(lambda x, s=s, i=i: x[s, i], trees)
                    rho_max = _strict(max, [rho_max, tree_rho(t, cache=cache)])
            n_stable += u_h.shape[0] * u_h.shape[1]
            honest_min = _strict(min, [honest_min, float(u_h.min())])
            excess_max = _strict(max, [excess_max, float(u_h.max()) - thr])
            trained_u.append(u.ravel())
        for i, run in enumerate(part.runs):
            if part.stable:
                per_run[f"{part.name}/{run.label}"] = float(u_h[i].min())
            for s in range(part.seeds):
                rows.append(
                    {
                        "part": part.name,
                        "run": run.label,
                        "seed": s,
                        "honest_u_a_min": float(u_h[i, s].min()) if part.stable else float("nan"),
                        "trained_u_a": float(u[i, s]),
                        "chain_u_a": float(chain[i, s]),
                        "chain_abs_err": float(err[i, s]),
                    }
                )
    tu = [float(x) for x in np.concatenate(trained_u)] if trained_u else []
    return ProvenMeasured(
        honest_min=honest_min,
        per_run=per_run,
        excess_max=excess_max,
        rho_max=rho_max,
        n_stable=n_stable,
        chain_max=chain_max,
        n_pairs=len(rows),
        trained_u_min=_strict(min, tu),
        trained_u_max=_strict(max, tu),
    ), rows


def dynamic(cfg: Config, n_b: int, simultaneous: bool = False) -> dict:
    """The dynamic numbers of a training run at ``n_b`` B updates per A update (or
    simultaneous play): its hparams, the threshold rho^-(d+1) and the convergence band."""
    thr = cfg.rho ** -(cfg.depth + 1)
    return {
        "hp": stackelberg_params(cfg.lr_a, cfg.lr_b, n_b, simultaneous, cfg.rho, cfg.eta),
        "thr": np.float32(thr),
        "band": np.float32(cfg.tol * thr),
    }


def point_metrics(cfg: Config, mon: StackelbergMonitors) -> dict:
    """:func:`summary` of part 1's monitors ``[schedule, seed, steps]`` at schedule ``main_n_b``,
    seed 0: the sweep row of a run (what :func:`point`'s ``fn`` computes at the run's key)."""
    main = dynamic(cfg, cfg.main_n_b)
    im = cfg.n_b_values.index(cfg.main_n_b)
    return {
        k: np.asarray(v)[im, 0].item() for k, v in summary(mon, main["thr"], main["band"]).items()
    }
