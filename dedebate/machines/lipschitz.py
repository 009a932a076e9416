"""Exact prefix trees, the hybrid Lipschitz bound, empirical Lipschitz estimates (spec DED 3.4).

In the Lean model a machine is its prefix tree: ``levels[n][c] = P[y_n = 1 | y_<n = c]`` for every
step n and prefix code c. For T <= 20 everything here is exact (float64 on the host): the output
probability by a forward pass, the influences ``Delta_n(c)``, the hybrid bound
``sum_n max_c |Delta_n(c)|`` (a valid Lipschitz constant at o, never above T) and an empirical
lower bound on K from perturbing the tree along several families (spec DED 3.4); the ``*_jnp``
versions run jitted on a padded level matrix.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.machines.program import Machine
from dedebate.programs import jit

MAX_TREE_T = 20
DEFAULT_EPS = (1e-3, 1e-2, 5e-2)


def step_probs(machine: Machine, y: jax.Array) -> jax.Array:
    """The conditional probability of every step along transcript ``y``."""

    def step(state, t):
        p = machine.prob(state, t)
        return machine.advance(state, t, y[t]), p

    _, ps = jax.lax.scan(step, machine.init_state(), jnp.arange(machine.T))
    return ps


_all_step_probs = jit(jax.vmap(step_probs, in_axes=(None, 0)))


def tree_transcripts(T: int) -> np.ndarray:
    """int8 ``[2^(T-1), T]``: row c, the little-endian code c, last bit 0: every node."""
    if not isinstance(T, (int, np.integer)) or not (1 <= T <= MAX_TREE_T):
        raise ValueError(f"T={T}: exact prefix trees are limited to 1 <= T <= {MAX_TREE_T}")
    codes = np.arange(2 ** (T - 1), dtype=np.int64)
    return ((codes[:, None] >> np.arange(T)[None, :]) & 1).astype(np.int8)


def tree_from_step_probs(probs) -> list[np.ndarray]:
    """Levels of the prefix tree (T float64 arrays ``[2^n]``) from :func:`tree_transcripts`' probs.

    Transcript c's step-n probability is node ``c mod 2^n``, and codes ``c < 2^n`` cover level n.
    """
    probs = np.asarray(probs, np.float64)
    return [probs[: 2**n, n].copy() for n in range(probs.shape[1])]


def prefix_tree(machine: Machine) -> list[np.ndarray]:
    """``levels[n][c] = P[y_n = 1 | prefix c]`` (float64 ``[2^n]``) for every prefix (T <= 20)."""
    ys = jnp.asarray(tree_transcripts(machine.T))
    return tree_from_step_probs(_all_step_probs(machine, ys))


def _reach(levels: list[np.ndarray]) -> list[np.ndarray]:
    reach = [np.ones(1)]
    for p in levels[:-1]:
        r = reach[-1]
        reach.append(np.concatenate([r * (1.0 - p), r * p]))
    return reach


def tree_output_prob(levels: list[np.ndarray]) -> float:
    """Exact ``P_M(1) = sum over final-step prefixes c of reach(c) * p_{T-1}(c)``."""
    return float(np.sum(_reach(levels)[-1] * levels[-1]))


def _values(levels: list[np.ndarray]) -> list[np.ndarray]:
    """``W[n][c] = P[final = 1 | prefix c of length n]`` (W[T-1] = p_{T-1})."""
    W = [levels[-1].copy()]
    for n in range(len(levels) - 2, -1, -1):
        nxt = W[0]
        half = nxt.size // 2
        W.insert(0, (1.0 - levels[n]) * nxt[:half] + levels[n] * nxt[half:])
    return W


def tree_influences(levels: list[np.ndarray]) -> list[np.ndarray]:
    """``Delta[n][c] = W[n+1][c + 2^n] - W[n+1][c]``, W the probability of output 1 from a node.

    The last step's influence is 1.
    """
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

    best: float  # the largest ratio
    family: str  # the family that found it
    eps: float  # the perturbation size at which it was found
    by_family: dict[str, float]  # the largest ratio per family
    hybrid: float  # hybrid_bound (an upper bound)
    p1: float  # P_M(1) at o


def _sign(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, 1.0, -1.0)


def estimate_lipschitz(
    machine_or_levels, key: jax.Array, eps=DEFAULT_EPS, n_random: int = 8, ascent_iters: int = 10
) -> LipschitzEstimate:
    """Empirical Lipschitz constant at o (spec DED 3.3, Lean's definition).

    Families (each in both directions +/-, each for every eps, probabilities clamped to [0, 1]):

    * ``uniform`` -- every node shifted by the same sign;
    * ``per-step`` -- one sign per step n, the sign of the summed gradient over level n;
    * ``adversarial`` -- one sign per prefix (per query in the Lean model), starting from the sign
      of dP_M/dp at o and re-signed from the gradient at the perturbed point until it stops
      changing (coordinate sign ascent on the multilinear P_M, spec DED 3.4);
    * ``random`` -- ``n_random`` i.i.d. Rademacher sign patterns over all prefixes.

    The ratio uses the realised distance ``dist(o, o')`` (<= eps after clamping).
    """
    levels = (
        machine_or_levels if isinstance(machine_or_levels, list) else prefix_tree(machine_or_levels)
    )
    for e in eps:
        if not (0.0 < float(e) <= 1.0):
            raise ValueError(f"eps={e!r}: perturbation sizes must lie in (0, 1]")
    if n_random < 0 or ascent_iters < 1:
        raise ValueError(
            f"n_random={n_random}, ascent_iters={ascent_iters}: need n_random >= 0 "
            "and ascent_iters >= 1"
        )
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
        if not np.isnan(best[family]) and not ratio <= best[family]:  # a NaN ratio sticks
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
            consider(
                "per-step",
                [np.full_like(p, direction * _sign(np.sum(g))) for p, g in zip(levels, grad)],
                e,
            )
            signs = [direction * _sign(g) for g in grad]
            for _ in range(ascent_iters):
                pert, _ = consider("adversarial", signs, e)
                new = [direction * _sign(g) for g in tree_gradient(pert)]
                if all(np.array_equal(a, b) for a, b in zip(new, signs)):
                    break
                signs = new
        for i in range(n_random):
            consider(
                "random", [rand[i, offsets[n] : offsets[n + 1]] for n in range(len(levels))], e
            )
    nan = [f for f in best if np.isnan(best[f])]  # no bound can pass a NaN estimate
    fam = nan[0] if nan else max(best, key=lambda f: best[f])
    return LipschitzEstimate(
        best=best[fam],
        family=fam,
        eps=where.get(fam, float("nan")),
        by_family=dict(best),
        hybrid=hybrid_bound(levels),
        p1=p_base,
    )


# --------------------------------------------------------------------------------------------------
# The same estimate in jnp (float32), for jitted / vmapped code
# --------------------------------------------------------------------------------------------------
# A tree is a padded matrix P float32[T, N], N = 2^(T-1): row n holds level n in its first 2^n
# entries (prefix codes c < 2^n), zeros after. Every pass over the levels is one lax.scan, so the
# compiled program does not grow with T.
def _level_mask(T: int) -> np.ndarray:
    return np.arange(2 ** (T - 1))[None, :] < (2 ** np.arange(T))[:, None]


def tree_matrix_jnp(probs: jax.Array) -> jax.Array:
    """The padded level matrix from the step probabilities of :func:`tree_transcripts`."""
    probs = jnp.asarray(probs, jnp.float32)
    return jnp.where(_level_mask(probs.shape[1]), probs.T, 0.0)


def _reach_mat(P: jax.Array) -> jax.Array:
    T, N = P.shape
    idx = jnp.arange(N)

    def step(r, xs):
        p, n = xs
        half = jnp.left_shift(1, n)
        base = idx & (half - 1)
        rb, pb = r[base], p[base]
        nxt = jnp.where(idx < half, rb * (1.0 - pb), rb * pb)
        return jnp.where(idx < 2 * half, nxt, 0.0), r

    _, R = jax.lax.scan(step, (idx == 0).astype(P.dtype), (P, jnp.arange(T)))
    return R


def _influence_mat(P: jax.Array) -> jax.Array:
    T, N = P.shape
    idx = jnp.arange(N)

    def step(W, xs):  # W = W[n + 1] (valid on c < 2^(n+1))
        p, n = xs
        half = jnp.left_shift(1, n)
        hi = W[jnp.minimum(idx + half, N - 1)]
        valid = idx < half
        return (jnp.where(valid, (1.0 - p) * W + p * hi, 0.0), jnp.where(valid, hi - W, 0.0))

    _, D = jax.lax.scan(step, P[T - 1], (P[:-1], jnp.arange(T - 1)), reverse=True)
    return jnp.concatenate([D, jnp.ones((1, N), P.dtype)])


def _sign_jnp(x):
    return jnp.where(x >= 0, 1.0, -1.0).astype(jnp.float32)


PERTURBATION_FAMILIES = ("uniform", "per-step", "adversarial", "random")
"""The sign-pattern families of perturbations over which the Lipschitz ratio is maximised."""


def estimate_lipschitz_jnp(
    P: jax.Array, key: jax.Array, eps: jax.Array, n_random: int = 8, ascent_iters: int = 10
) -> dict[str, jax.Array]:
    """:func:`estimate_lipschitz` in jnp float32 (jittable, vmappable) on a padded level matrix.

    The same families, eps and random sign patterns (from ``key``). The ascent runs all
    ``ascent_iters`` steps (a converged sign pattern repeats its ratio, so the maximum equals the
    host loop's early exit). To stay accurate in float32 at small eps, the change of P_M is formed
    without cancellation by the hybrid identity: ``dP = sum_n sum_c reach'_n(c) dp_n(c) Delta_n(c)``
    (reach under the perturbed tree, influences under the base tree), with ``dp = min(eps, 1 - p)``
    or ``-min(eps, p)``. Returns float32 ``best``, ``best_eps`` (as the host: the first family in
    :data:`PERTURBATION_FAMILIES` with the largest ratio, and the first eps where it got it), one
    entry per family, ``hybrid`` and ``p1``.
    """
    P = jnp.asarray(P, jnp.float32)
    T, N = P.shape
    mask = _level_mask(T)
    eps = jnp.atleast_1d(jnp.asarray(eps, jnp.float32))
    R0, D0 = _reach_mat(P), _influence_mat(P)
    G0 = R0 * D0
    n_nodes = 2**T - 1
    node = np.minimum((2 ** np.arange(T))[:, None] - 1 + np.arange(N)[None, :], n_nodes - 1)
    rand = jax.random.rademacher(key, (max(n_random, 1), n_nodes))

    def ratio(S, e):
        dp = jnp.where(mask, jnp.where(S > 0, jnp.minimum(e, 1.0 - P), -jnp.minimum(e, P)), 0.0)
        Pp = P + dp
        dist = jnp.max(jnp.abs(dp))
        change = jnp.sum(_reach_mat(Pp) * dp * D0)
        safe = jnp.where(dist > 0.0, dist, 1.0)
        return jnp.where(dist > 0.0, jnp.abs(change) / safe, 0.0), Pp

    directions = jnp.asarray([1.0, -1.0], jnp.float32)[:, None, None]
    fixed = jnp.concatenate(
        [  # uniform +-, per-step +-
            jnp.broadcast_to(directions, (2, T, N)),
            jnp.broadcast_to(directions * _sign_jnp(jnp.sum(G0, axis=1))[None, :, None], (2, T, N)),
        ]
    )

    def one_eps(e):
        r = jax.vmap(lambda S: ratio(S, e)[0])(fixed)

        def ascent(_, carry):  # both directions at once
            S, b = carry
            r, Pp = jax.vmap(lambda s: ratio(s, e))(S)
            G = jax.vmap(lambda q: _reach_mat(q) * _influence_mat(q))(Pp)
            return directions * _sign_jnp(G), jnp.maximum(b, r)

        _, adv = jax.lax.fori_loop(
            0, ascent_iters, ascent, (directions * _sign_jnp(G0)[None], jnp.zeros((2,)))
        )
        rnd = jax.lax.fori_loop(
            0,
            n_random,
            lambda i, b: jnp.maximum(b, ratio(rand[i][node].astype(jnp.float32), e)[0]),
            jnp.float32(0.0),
        )
        return jnp.stack([jnp.maximum(r[0], r[1]), jnp.maximum(r[2], r[3]), jnp.max(adv), rnd])

    table = jax.lax.map(one_eps, eps).T  # [families, eps]
    fam = jnp.argmax(jnp.max(table, axis=1))
    out = {f: jnp.max(table[i]) for i, f in enumerate(PERTURBATION_FAMILIES)}
    out["best"] = jnp.max(table)
    out["best_eps"] = eps[jnp.argmax(table[fam])]
    out["hybrid"] = jnp.sum(jnp.max(jnp.abs(D0), axis=1))
    out["p1"] = jnp.sum(R0[-1] * P[-1])
    return out
