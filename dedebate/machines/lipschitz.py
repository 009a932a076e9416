"""Exact prefix trees, the hybrid Lipschitz bound and empirical Lipschitz estimation (spec DED 3.3).

In the Lean model (spec DED 3.2) a machine is its **prefix tree**: for every step n and every
prefix ``c`` in {0,1}^n (little-endian code) the conditional probability
``levels[n][c] = P[y_n = 1 | y_<n = c]``. An oracle o' is any other tree, and
``dist(o, o') = max over all nodes |p' - p|`` (reachable or not). For T <= 20 the tree has
2^T - 1 nodes and everything below is exact (float64 on the host):

* :func:`tree_output_prob` -- P_M(1) by a forward pass (reach probabilities);
* :func:`tree_influences` -- ``Delta_n(c) = P[final=1 | c, y_n=1] - P[final=1 | c, y_n=0]``;
* :func:`hybrid_bound` -- ``sum_n max_c |Delta_n(c)|``, a valid Lipschitz constant at o (the
  hybrid identity, see :mod:`dedebate.machines.fixtures`), never above T;
* :func:`estimate_lipschitz` -- perturb the tree by eps along several families, clamp to [0, 1],
  recompute P_M exactly, and report the largest ``|dP_M| / dist``.

P_M is multilinear in the node probabilities (each node appears at most once on a path), so the
best perturbation in the eps-box is at a vertex; the adversarial family climbs towards one by
coordinate-wise sign ascent (the partial derivative of a multilinear function does not depend on
its own coordinate).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.machines.program import Machine

MAX_TREE_T = 20
DEFAULT_EPS = (1e-3, 1e-2, 5e-2)


def step_probs(machine: Machine, y: jax.Array) -> jax.Array:
    """The conditional probability of every step along transcript ``y`` (float32[T])."""

    def step(state, t):
        p = machine.prob(state, t)
        return machine.advance(state, t, y[t]), p

    _, ps = jax.lax.scan(step, machine.init_state(), jnp.arange(machine.T))
    return ps


_all_step_probs = jax.jit(jax.vmap(step_probs, in_axes=(None, 0)))


def tree_transcripts(T: int) -> np.ndarray:
    """The 2^(T-1) transcripts (int8[2^(T-1), T], little-endian codes c, last bit 0) whose step
    probabilities give every node of the prefix tree (see :func:`tree_from_step_probs`)."""
    if not isinstance(T, (int, np.integer)) or not (1 <= T <= MAX_TREE_T):
        raise ValueError(f"T={T}: exact prefix trees are limited to 1 <= T <= {MAX_TREE_T}")
    codes = np.arange(2 ** (T - 1), dtype=np.int64)
    return ((codes[:, None] >> np.arange(T)[None, :]) & 1).astype(np.int8)


def tree_from_step_probs(probs) -> list[np.ndarray]:
    """Levels of the prefix tree from the step probabilities of :func:`tree_transcripts`:
    transcript c's step-n probability is node ``c mod 2^n``, and codes ``c < 2^n`` cover level n."""
    probs = np.asarray(probs, np.float64)
    return [probs[: 2**n, n].copy() for n in range(probs.shape[1])]


def prefix_tree(machine: Machine) -> list[np.ndarray]:
    """``levels[n]`` (float64[2^n]): ``P[y_n = 1 | prefix c]`` for every prefix of length n."""
    ys = jnp.asarray(tree_transcripts(machine.T))
    return tree_from_step_probs(_all_step_probs(machine, ys))


def _reach(levels: list[np.ndarray]) -> list[np.ndarray]:
    reach = [np.ones(1)]
    for p in levels[:-1]:
        r = reach[-1]
        reach.append(np.concatenate([r * (1.0 - p), r * p]))
    return reach


def tree_output_prob(levels: list[np.ndarray]) -> float:
    """Exact P_M(1) = sum over final-step prefixes of reach(c) * p_{T-1}(c)."""
    return float(np.sum(_reach(levels)[-1] * levels[-1]))


def _values(levels: list[np.ndarray]) -> list[np.ndarray]:
    """``W[n][c] = P[final = 1 | prefix c of length n]`` (W[T-1] = p_{T-1})."""
    W = [None] * len(levels)
    W[-1] = levels[-1].copy()
    for n in range(len(levels) - 2, -1, -1):
        nxt = W[n + 1]
        half = nxt.size // 2
        W[n] = (1.0 - levels[n]) * nxt[:half] + levels[n] * nxt[half:]
    return W


def tree_influences(levels: list[np.ndarray]) -> list[np.ndarray]:
    """``Delta[n][c] = W[n+1][c + 2^n] - W[n+1][c]`` (the last step's influence is 1)."""
    W = _values(levels)
    out = []
    for n in range(len(levels) - 1):
        half = W[n + 1].size // 2
        out.append(W[n + 1][half:] - W[n + 1][:half])
    out.append(np.ones_like(levels[-1]))
    return out


def tree_gradient(levels: list[np.ndarray]) -> list[np.ndarray]:
    """``dP_M / dp_n(c) = reach_n(c) * Delta_n(c)``."""
    return [r * d for r, d in zip(_reach(levels), tree_influences(levels))]


def hybrid_bound(levels: list[np.ndarray]) -> float:
    """``sum_n max_c |Delta_n(c)|``: P_M moves by at most this times dist(o, o') (exact, at o)."""
    return float(sum(np.max(np.abs(d)) for d in tree_influences(levels)))


def _perturb(levels, signs, eps):
    return [np.clip(p + eps * s, 0.0, 1.0) for p, s in zip(levels, signs)]


def _dist(a, b) -> float:
    return float(max(np.max(np.abs(x - y)) for x, y in zip(a, b)))


@dataclasses.dataclass(frozen=True)
class LipschitzEstimate:
    """The largest ``|P_M(o') - P_M(o)| / dist(o, o')`` found, overall and per family."""

    best: float
    family: str
    eps: float
    by_family: dict[str, float]
    hybrid: float
    p1: float


def _sign(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, 1.0, -1.0)


def estimate_lipschitz(machine_or_levels, key: jax.Array, eps=DEFAULT_EPS, n_random: int = 8,
                       ascent_iters: int = 10) -> LipschitzEstimate:
    """Empirical Lipschitz constant at o (spec DED 3.3, Lean's definition).

    Families (each in both directions +/-, each for every eps, probabilities clamped to [0, 1]):

    * ``uniform`` -- every node shifted by the same sign;
    * ``per-step`` -- one sign per step n, the sign of the summed gradient over level n;
    * ``adversarial`` -- one sign per prefix (per query in the Lean model), starting from the sign
      of dP_M/dp at o and re-signed from the gradient at the perturbed point until it stops
      changing (coordinate sign ascent on the multilinear P_M);
    * ``random`` -- ``n_random`` i.i.d. Rademacher sign patterns over all prefixes.

    The ratio uses the realised distance ``dist(o, o')`` (<= eps after clamping).
    """
    levels = (machine_or_levels if isinstance(machine_or_levels, list)
              else prefix_tree(machine_or_levels))
    for e in eps:
        if not (0.0 < float(e) <= 1.0):
            raise ValueError(f"eps={e!r}: perturbation sizes must lie in (0, 1]")
    if n_random < 0 or ascent_iters < 1:
        raise ValueError(f"n_random={n_random}, ascent_iters={ascent_iters}: need n_random >= 0 "
                         "and ascent_iters >= 1")
    p_base = tree_output_prob(levels)
    grad = tree_gradient(levels)
    best = {"uniform": 0.0, "per-step": 0.0, "adversarial": 0.0, "random": 0.0}
    where = {}

    def consider(family, signs, e):
        pert = _perturb(levels, signs, e)
        d = _dist(pert, levels)
        if d <= 0.0:
            return pert, 0.0
        ratio = abs(tree_output_prob(pert) - p_base) / d
        if ratio > best[family]:
            best[family] = ratio
            where[family] = float(e)
        return pert, ratio

    n_nodes = sum(p.size for p in levels)
    rand = np.asarray(jax.random.rademacher(key, (max(n_random, 1), n_nodes)), np.float64)
    offsets = np.cumsum([0] + [p.size for p in levels])
    for e in eps:
        e = float(e)
        for direction in (1.0, -1.0):
            consider("uniform", [np.full_like(p, direction) for p in levels], e)
            consider("per-step", [np.full_like(p, direction * _sign(np.sum(g)))
                                  for p, g in zip(levels, grad)], e)
            signs = [direction * _sign(g) for g in grad]
            for _ in range(ascent_iters):
                pert, _ = consider("adversarial", signs, e)
                new = [direction * _sign(g) for g in tree_gradient(pert)]
                if all(np.array_equal(a, b) for a, b in zip(new, signs)):
                    break
                signs = new
        for i in range(n_random):
            consider("random", [rand[i, offsets[n]:offsets[n + 1]] for n in range(len(levels))],
                     e)
    fam = max(best, key=best.get)
    return LipschitzEstimate(best=best[fam], family=fam, eps=where.get(fam, float("nan")),
                             by_family=dict(best), hybrid=hybrid_bound(levels), p1=p_base)
