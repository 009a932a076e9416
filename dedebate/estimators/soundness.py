"""Constructing B against a fixed A, round by round, with Algorithm 1 (spec PED 6, Lemma A.4).

A is fixed first; B's strategies are built in protocol order (initialisation, spec 6.1, then
rounds k = d, ..., 1, spec 6.2), each by Algorithm 1 over the contexts that the fixed A and the
earlier rounds of B induce, against the round's reward and the next round's calibration test
(spec 6.3). With every round (delta, F)-indistinguishable, spec 6.4 bounds A's expected payoff by
``r^{d+1} Pr[A correct] + (2d+3) delta``; :func:`construct_estimator` returns that bound beside
the rewards it measures. How contexts, tests and rewards are laid out here is spec 6.6.

The construction is a host-side loop over the d+1 stages (each a jitted Algorithm 1 run). The
calibration tests are :class:`ProverCalibrationFamily` pytrees that carry A, the trees and the
round's estimates as leaves, so a second call with the same static structure reuses every
compiled program.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.agents.ped_strategies import TabularEstimator
from dedebate.core.bits import bit_table
from dedebate.estimators.advantage import OIProblem
from dedebate.estimators.families import PointwiseFamily, stack_families, table_family
from dedebate.estimators.ogd import algorithm1
from dedebate.programs import jit
from dedebate.trees.tree import ClaimTree, truth_code

Array = jax.Array
DIRECTIONS = np.asarray([-1.0, 0.0, 1.0], np.float32)  # numpy: importing starts no JAX backend


@dataclasses.dataclass(frozen=True)
class StageReport:
    """One stage of the construction: Algorithm 1's steps and exit advantage, and A's mean
    expected reward in that stage (over the trees) with the bound spec PED 6.4 gives it."""

    stage: str  # "init", "k=d", ..., "k=1", "final"
    contexts: int
    steps: int
    max_adv: float
    reward: float
    bound: float


@dataclasses.dataclass(frozen=True)
class SoundnessReport:
    estimator: TabularEstimator  # batched over trees
    stages: tuple[StageReport, ...]
    u_a: float  # mean over trees of E[U_A] (this module's propagation)
    pr_correct: float  # mean over trees of Pr[A(x) = L(x)]
    bound: float  # r^{d+1} Pr[A correct] + (2d+3) delta
    delta: float
    rho: float
    depth: int


def _tree_at(trees: ClaimTree, i) -> ClaimTree:
    return jax.tree_util.tree_map(lambda a: a[i], trees)


def _expected_direction(probs) -> Array:
    """E[s] = P(+1) - P(-1) of A's directions, whether or not s = 0 is allowed (spec 2.6)."""
    # Without s = 0 the protocol gives its mass to a fair coin (prover_estimator._directions),
    # which leaves E[s] as it is; renormalising instead would scale every reward by 1/(1 - P(0)).
    return probs.astype(jnp.float32) @ DIRECTIONS


def _direction(prover, views, i, node, phat, k):
    return _expected_direction(prover.direction(_tree_at(views, i), node, phat, k))


@jit
def _init_prep(prover, views, trees):
    """A's answer probabilities and correctness per tree (exact, spec 2.2)."""
    pa = jax.vmap(lambda t: jnp.clip(prover.answer(t).astype(jnp.float32), 0.0, 1.0))(views)
    root = trees.truth[:, 0].astype(jnp.int32)
    return pa, root, root * pa + (1 - root) * (1 - pa)


@jit(static_argnums=(8,))
def _round_prep(prover, views, trees, reach, phat, ti, vi, ci, k):
    """Round k's contexts: A's candidate probabilities, mu_k, truth g, M_D tables, directions."""
    ph = phat[ti, vi]
    cprob = jax.vmap(lambda i, v, p: prover.decompose(_tree_at(views, i), v, p, k))(ti, vi, ph)
    cw = reach[ti, vi] * cprob[jnp.arange(ti.shape[0]), ci]
    kids = jax.vmap(lambda i, v, c: _tree_at(trees, i).child_truths(v, c))(ti, vi, ci)
    g = jax.nn.one_hot(truth_code(kids), 2**trees.q, dtype=jnp.float32)
    md = jax.vmap(lambda i, v, c: _tree_at(trees, i).md(v, c))(ti, vi, ci).astype(jnp.float32)
    s_k = jax.vmap(lambda i, v, p: _direction(prover, views, i, v, p, k))(ti, vi, ph)
    return ph, cw, g, md, s_k


def _round_select(prover, views, trees, phat, k, feat, h_x):
    """A's selection distribution at context ``feat = (tree, node, cand)`` given B's joint h_x."""
    i, v, c = (feat[a].astype(jnp.int32) for a in range(3))
    bits = jnp.asarray(bit_table(trees.q), jnp.float32)
    md_x = _tree_at(trees, i).md(v, c).astype(jnp.float32)
    return prover.select(_tree_at(views, i), v, c, h_x @ bits, h_x @ md_x, phat[i, v], k).astype(
        jnp.float32
    )


@struct.dataclass
class ProverCalibrationFamily(PointwiseFamily):
    """The next round's calibration test (spec PED 6.3, test 2) against a fixed A, as a pytree.

    The same test as :func:`dedebate.estimators.families.calibration_family` (one test, weight
    ``params = [scale]``)::

        f(xx, z, P) = scale * sum_j sel_j(xx, P) * E[s_{k-1}](x, y_j, m_j) * (z_j - m_j)

    with ``m = P @ bits``, but A's selection and direction are read from the leaves ``prover``,
    ``views``, ``trees`` and ``phat`` instead of closures, so jit keys its compiled programs on
    the static fields only (``k``, ``init``, ``n_z`` and the treedefs).

    * ``init=True`` (spec 6.1): contexts ``shared[x] = (tree,)``, q = 1, ``sel = 1`` and A's
      round-``k`` (``k = d``) direction at the root given ``m``;
    * ``init=False`` (spec 6.2, round k): contexts ``shared[x] = (tree, node, cand)``, A's
      selection at round ``k`` given B's joint and ``phat``, and A's round-``(k-1)`` direction on
      child j given ``m_j``.

    ``fn`` is unused (``None``): the test is :meth:`fn_ctx`.
    """

    prover: Any = None
    views: Any = None
    trees: Any = None
    phat: Any = None  # [n_trees, n_nodes] this round's estimates (None for init)
    k: int = struct.field(pytree_node=False, default=0)
    init: bool = struct.field(pytree_node=False, default=False)

    def _select(self, feat, h_x):
        if self.init:
            return jnp.ones((1,), jnp.float32)
        return _round_select(self.prover, self.views, self.trees, self.phat, self.k, feat, h_x)

    def _next_direction(self, feat, j, m):
        if self.init:
            return _direction(self.prover, self.views, feat[0].astype(jnp.int32), 0, m, self.k)
        i, v, c = (feat[a].astype(jnp.int32) for a in range(3))
        child = _tree_at(self.trees, i).child(v, c, j)
        return _direction(self.prover, self.views, i, child, m, self.k - 1)

    def fn_ctx(self, p, feat_x, z, h_x):
        """The test with weight ``p`` at context ``feat_x``, outcome z, prediction ``h_x``."""
        q = self.n_z.bit_length() - 1
        bits = jnp.asarray(bit_table(q), jnp.float32)
        marg = h_x @ bits
        sel = self._select(feat_x, h_x)
        s = jax.vmap(self._next_direction, in_axes=(None, 0, 0))(feat_x, jnp.arange(q), marg)
        return p * jnp.sum(sel * s * (bits[z] - marg))

    def _values(self, params, h):
        zs = jnp.arange(self.n_z)
        per_z = jax.vmap(self.fn_ctx, in_axes=(None, None, 0, None))  # over z
        per_x = jax.vmap(per_z, in_axes=(None, 0, None, 0))  # over contexts
        per_f = jax.vmap(per_x, in_axes=(0, None, None, None))  # over tests
        return per_f(params, self.shared, zs, h)

    def pointwise(self, i: int, x: int, z: int, h_x: Array) -> Array:
        """Test ``i`` at context ``x``, outcome ``z`` and prediction ``h_x``."""
        return self.fn_ctx(self.params[i], self.shared[x], z, h_x)


def prover_calibration_family(
    prover, views, trees, phat, shared, k: int, init: bool, scale: float
) -> ProverCalibrationFamily:
    """Validated :class:`ProverCalibrationFamily` (``q = 1`` for init, ``trees.q`` for rounds)."""
    shape = np.shape(shared)
    if len(shape) != 2 or shape[0] < 1:
        raise ValueError(f"shared shape={shape}: expected a 2-d array [X, d] with X >= 1")
    if not (0 < scale <= 1):
        raise ValueError(f"scale={scale!r}: the reward weight r^k must lie in (0, 1]")
    q = 1 if init else int(trees.q)
    return ProverCalibrationFamily(
        params=jnp.asarray([scale], jnp.float32),
        shared=jnp.asarray(shared, jnp.float32),
        fn=None,  # type: ignore[arg-type]  # unused: the test is fn_ctx
        n_z=2**q,
        prover=prover,
        views=views,
        trees=trees,
        phat=phat,
        k=int(k),
        init=bool(init),
    )


@jit(static_argnums=(8,))
def _propagate(prover, views, trees, reach, phat, shared, h, cw, k):
    """A's path probabilities and B's selected marginals, to the next level."""
    ti, vi, ci = (shared[:, a].astype(jnp.int32) for a in range(3))
    sel = jax.vmap(lambda f, hx: _round_select(prover, views, trees, phat, k, f, hx))(shared, h)
    marg = h @ jnp.asarray(bit_table(trees.q), jnp.float32)
    child = jax.vmap(lambda i, v, c: _tree_at(trees, i).children(v, c))(ti, vi, ci)
    reach = reach.at[ti[:, None], child].add(cw[:, None] * sel)
    phat = phat.at[ti[:, None], child].set(jnp.clip(marg, 0.0, 1.0))
    return reach, phat


@jit
def _final_reward(prover, views, trees, reach, phat, ti, vi):
    """Sum over leaves of reach * E[s_0] * (T(yhat^0) - phat_0), per context."""
    ph = phat[ti, vi]
    s_0 = jax.vmap(lambda i, v, p: _direction(prover, views, i, v, p, 0))(ti, vi, ph)
    return reach[ti, vi] * s_0 * (trees.truth[ti, vi].astype(jnp.float32) - ph)


def construct_estimator(
    prover,
    trees: ClaimTree,
    rho: float,
    delta: float,
    step_rule: str = "hazan",
    trace_len: int = 512,
    fast_compile: bool = False,
) -> SoundnessReport:
    """Build B against ``prover`` on a batch of trees, round by round (spec PED 6).

    Rewards are weighted by powers of ``r = 1/rho``; every round targets ``delta``. Returns a
    :class:`SoundnessReport`: B as a :class:`TabularEstimator` batched over trees, one
    :class:`StageReport` per stage, A's mean expected payoff ``u_a``, ``pr_correct`` and the bound
    ``r^{d+1} Pr[A correct] + (2d+3) delta``.
    """
    if not (rho >= 1):
        raise ValueError(f"rho={rho!r}: the stability parameter must be >= 1")
    if not (0 < delta <= 1):
        raise ValueError(f"delta={delta!r}: must lie in (0, 1]")
    if jnp.ndim(trees.truth) != 2:
        raise ValueError("trees: expected a batch of trees (truth of shape [n_trees, n_nodes])")
    n_trees, n_nodes = trees.truth.shape
    q, n_cand = trees.q, trees.n_cand
    d = trees.depth  # variant (a): d consistency rounds, then the human check
    r = 1.0 / rho
    n_z = 2**q
    views = trees if prover.sees_truth else jax.vmap(lambda t: t.public())(trees)
    run: dict[str, Any] = {
        "step_rule": step_rule,
        "trace_len": trace_len,
        "fast_compile": fast_compile,
    }
    stages: list[StageReport] = []

    # ---- initialisation (spec 6.1) ---------------------------------------------------------
    pa, root_truth, pr_correct = _init_prep(prover, views, trees)
    w_init = r ** (d + 1)
    r_init = table_family(np.asarray(w_init * jnp.stack([1.0 - pa, pa], axis=1))[None])

    tree_ids = jnp.arange(n_trees, dtype=jnp.float32)[:, None]
    calib = prover_calibration_family(prover, views, trees, None, tree_ids, d, True, scale=r**d)
    problem = OIProblem(
        mu=jnp.full((n_trees,), 1.0 / n_trees, jnp.float32),
        g=jax.nn.one_hot(root_truth, 2, dtype=jnp.float32),
    )
    state, summ = algorithm1(stack_families(r_init, calib), problem, delta, **run)
    p_d = np.clip(np.asarray(state.h[:, 1]), 0.0, 1.0)
    pa_np = np.asarray(pa)
    e_init = w_init * (pa_np * p_d + (1 - pa_np) * (1 - p_d))
    stages.append(
        StageReport(
            "init",
            n_trees,
            int(summ.steps),
            float(summ.max_adv),
            float(e_init.mean()),
            float(w_init * np.mean(pr_correct) + delta),
        )
    )

    # ---- consistency rounds k = d..1 (spec 6.2, 6.3) -----------------------------------------
    reach = jnp.zeros((n_trees, n_nodes), jnp.float32).at[:, 0].set(1.0)
    phat = jnp.zeros((n_trees, n_nodes), jnp.float32).at[:, 0].set(jnp.asarray(p_d))
    logits = np.full((n_trees, n_nodes, n_cand, n_z), -np.inf, np.float32)
    for k in range(d, 0, -1):
        level = d - k
        lo, hi = trees.level_offset(level), trees.level_offset(level + 1)
        grid = np.meshgrid(np.arange(n_trees), np.arange(lo, hi), np.arange(n_cand), indexing="ij")
        ti, vi, ci = (a.reshape(-1).astype(np.int32) for a in grid)
        ph, cw, g, md, s_k = _round_prep(
            prover,
            views,
            trees,
            reach,
            phat,
            jnp.asarray(ti),
            jnp.asarray(vi),
            jnp.asarray(ci),
            k,
        )
        mu = cw / n_trees
        shared = jnp.asarray(np.stack([ti, vi, ci], axis=1), jnp.float32)
        table = np.asarray(r**k * s_k[:, None] * (md - ph[:, None]))
        family = stack_families(
            table_family(table[None]),
            prover_calibration_family(
                prover, views, trees, phat, shared, k, False, scale=r ** (k - 1)
            ),
        )
        state, summ = algorithm1(family, OIProblem(mu=mu, g=g), delta, **run)
        h = np.clip(np.asarray(state.h), 0.0, 1.0)
        pi = np.sum(h * np.asarray(md), axis=1)
        e_k = float(np.sum(np.asarray(mu) * r**k * np.asarray(s_k) * (pi - np.asarray(ph))))
        stages.append(
            StageReport(
                f"k={k}", int(ti.shape[0]), int(summ.steps), float(summ.max_adv), e_k, 2.0 * delta
            )
        )
        with np.errstate(divide="ignore"):
            logits[ti, vi, ci] = np.log(h)
        reach, phat = _propagate(prover, views, trees, reach, phat, shared, jnp.asarray(h), cw, k)

    # ---- final human check, variant (a): R_0 = s_0 (T(yhat^0) - phat_0) -----------------------
    lo, hi = trees.level_offset(d), trees.level_offset(d + 1)
    ti, vi = (
        a.reshape(-1).astype(np.int32)
        for a in np.meshgrid(np.arange(n_trees), np.arange(lo, hi), indexing="ij")
    )
    e_0 = (
        float(
            np.sum(
                np.asarray(
                    _final_reward(
                        prover,
                        views,
                        trees,
                        reach,
                        phat,
                        jnp.asarray(ti),
                        jnp.asarray(vi),
                    )
                )
            )
        )
        / n_trees
    )
    stages.append(StageReport("final", int(ti.shape[0]), 0, float("nan"), e_0, delta))

    u_a = float(sum(s.reward for s in stages))
    estimator = TabularEstimator(p0=jnp.asarray(p_d), logits=jnp.asarray(logits))
    bound = float(w_init * np.mean(pr_correct) + (2 * d + 3) * delta)
    return SoundnessReport(
        estimator=estimator,
        stages=tuple(stages),
        u_a=u_a,
        pr_correct=float(np.mean(pr_correct)),
        bound=bound,
        delta=float(delta),
        rho=float(rho),
        depth=d,
    )
