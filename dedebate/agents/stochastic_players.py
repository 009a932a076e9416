"""Players of the stochastic-oracle debate (spec DED 5.1, 9): honest players and adversary zoos.

Honest players are Lean's: Alice claims her estimate ``count / N_A`` (correctly rounded to
float32) from ``N_A`` oracle answers; Bob continues iff ``|p - count / N_B| < tau_B`` (strict).
Adversaries are unbounded in theory: they read the true step probability ``pi`` from the view and
are not query-metered. Each zoo is one pytree class with a dynamic ``kind`` selector, so a whole
zoo (stacked with :func:`stack`) vmaps through one compiled program. The zoos are those of spec
DED 9; their optimised members come from an evolution-strategy search over small families of lies
(:func:`optimise_alice`) and abort rules (:func:`optimise_bob`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.dyadic import ratio_f32
from dedebate.core.pytrees import stack  # noqa: F401 (re-exported: batches of players)
from dedebate.protocols.stochastic import (
    DebateParams,
    StepView,
    checker_accepts,
    checker_interval,
)

# ---- kinds ---------------------------------------------------------------------------------------
A_HONEST, A_ALWAYS_ONE, A_SHIFT, A_LIE_LAST, A_PER_STEP, A_HONEST_SHIFT = range(6)
"""A_HONEST_SHIFT claims ``count / N_A + delta`` (her honest estimate shifted): at
``delta = tau_B`` Bob's strict comparison meets exact ties, which the exact DP and the Monte
Carlo must decide alike."""
B_HONEST, B_ABORT_FIRST, B_RANDOM_STEP, B_NEVER, B_AFTER_ONE, B_LEARNED = range(6)


def _honest_estimate(count, n):
    # correctly rounded by integer division and assembled from its bits: the same float32 in every
    # program (a float division may become a product by the reciprocal, or fuse into her shift)
    return ratio_f32(count, n)


# ---- honest players ------------------------------------------------------------------------------
@struct.dataclass
class HonestAlice:
    """Lean's honest Alice(c, q): claims ``count / N_A``."""

    n_samples: jax.Array  # int32 N_A
    # the protocol draws counts for her (static)
    samples: bool = struct.field(pytree_node=False, default=True)
    # her claim is exactly the estimate, which the protocol's bob_draw="lazy" mode relies on
    # (static)
    honest_estimate: bool = struct.field(pytree_node=False, default=True)

    def claim(self, view: StepView, count, u):
        """Alice's claim at this step: the estimate ``count / N_A``."""
        return _honest_estimate(count, self.n_samples)

    def coin_share(self, view: StepView, p, z):
        """The player's share of the two-party coin (spec DED 5.4): the fresh uniform ``z``."""
        return z


@struct.dataclass
class HonestBob:
    """Lean's honest Bob ``bob s b q``: continues iff ``|p - count / N_B| < tau_B``."""

    n_samples: jax.Array  # int32
    tau: jax.Array  # float32
    samples: bool = struct.field(pytree_node=False, default=True)

    def cont(self, view: StepView, p, count, u):
        """Whether Bob continues at this step: iff ``|p - count / N_B| < tau_B``."""
        return checker_accepts(p, count, self.n_samples, self.tau)

    def continue_interval(self, p):
        """``(k_lo, k_hi, certified)``: the counts Bob continues on (``bob_draw="decision"`` mode).

        That mode draws the decision, not the count (see
        :func:`dedebate.protocols.stochastic_interface.checker_interval`).
        """
        return checker_interval(p, self.n_samples, self.tau)

    def coin_share(self, view: StepView, p, z):
        """The player's share of the two-party coin (spec DED 5.4): the fresh uniform ``z``."""
        return z


def honest_alice(constants: DebateParams) -> HonestAlice:
    """Honest Alice with ``N_A`` from the debate's constants."""
    return HonestAlice(n_samples=jnp.int32(constants.n_alice))


def honest_bob(constants: DebateParams) -> HonestBob:
    """Honest Bob with ``N_B`` and ``tau_B`` from the debate's constants."""
    return HonestBob(n_samples=jnp.int32(constants.n_bob), tau=jnp.float32(constants.tau_bob))


# ---- zoos ----------------------------------------------------------------------------------------
@struct.dataclass
class ZooAlice:
    """One Alice from the soundness zoo (spec DED 9), selected by ``kind``.

    Kinds: A_HONEST; A_ALWAYS_ONE; A_SHIFT (``pi + delta``, delta in {s, 0.95 tau_B, b, 2b}, or just
    under s everywhere); A_LIE_LAST (honest except at the last step, where she claims 1 or
    ``pi + delta``); A_PER_STEP (``pi + lies[t]``, the optimised lie); A_HONEST_SHIFT (her estimate
    plus ``delta``).
    """

    kind: jax.Array  # int32 selector
    delta: jax.Array  # float32 shift of A_SHIFT / A_LIE_LAST / A_HONEST_SHIFT
    lies: jax.Array  # float32 [T], A_PER_STEP's shift at each step
    n_samples: jax.Array  # int32 honest-estimate samples (kinds that use the estimate), else 0
    # float32 share of the two-party coin, a fixed value in [0, 1), or negative for an honest
    # uniform share
    coin: jax.Array
    samples: bool = struct.field(pytree_node=False, default=True)

    def claim(self, view: StepView, count, u):
        """Alice's claim at this step, by her kind."""
        honest = _honest_estimate(count, self.n_samples)
        last = view.t == view.T - 1
        out = jnp.where(self.kind == A_ALWAYS_ONE, 1.0, honest)
        out = jnp.where(self.kind == A_SHIFT, view.pi + self.delta, out)
        out = jnp.where(self.kind == A_LIE_LAST, jnp.where(last, view.pi + self.delta, honest), out)
        lie = self.lies[jnp.clip(view.t, 0, self.lies.shape[0] - 1)]
        out = jnp.where(self.kind == A_PER_STEP, view.pi + lie, out)
        out = jnp.where(self.kind == A_HONEST_SHIFT, honest + self.delta, out)
        return out.astype(jnp.float32)

    def coin_share(self, view: StepView, p, z):
        """Her coin share: ``coin`` if non-negative, else the honest ``z`` (spec DED 5.4)."""
        return jnp.where(self.coin < 0, z, self.coin)


@struct.dataclass
class ZooBob:
    """One Bob from the completeness zoo (spec DED 9), selected by ``kind``.

    Kinds: B_HONEST; B_ABORT_FIRST (aborts at step 0); B_RANDOM_STEP (at a uniformly random step,
    hazard ``1 / (T - t)``); B_NEVER; B_AFTER_ONE (whenever the previous bit was 1); B_LEARNED
    (aborts with probability ``sigmoid(w[t] + w_dev |p - pi| / tau_vera + w_prev prev_bit)``;
    ``tau_vera`` is tau_V for the zoo's optimised Bob, b for a self-play Bob).
    """

    kind: jax.Array  # int32 selector
    w: jax.Array  # float32 [T] abort logits of B_LEARNED
    w_dev: jax.Array  # float32 weight of |p - pi| / tau_vera
    w_prev: jax.Array  # float32 weight of the previous bit
    tau_vera: jax.Array  # float32 the deviation's scale (tau_V; b for a self-play Bob)
    n_samples: jax.Array  # int32 N_B for B_HONEST
    tau: jax.Array  # float32 tau_B for B_HONEST
    coin: jax.Array  # float32: as for ZooAlice
    samples: bool = struct.field(pytree_node=False, default=True)

    def abort_prob(self, view: StepView, p):
        """Probability of aborting at this step (the honest kind is not covered: it samples)."""
        t = view.t
        first = (t == 0).astype(jnp.float32)
        rand = 1.0 / jnp.maximum(view.T - t, 1).astype(jnp.float32)
        after_one = ((view.prev_bit == 1) & (t > 0)).astype(jnp.float32)
        z = (
            self.w[jnp.clip(t, 0, self.w.shape[0] - 1)]
            + self.w_dev * jnp.abs(p - view.pi) / self.tau_vera
            + self.w_prev * view.prev_bit.astype(jnp.float32)
        )
        learned = jax.nn.sigmoid(z)
        out = jnp.where(self.kind == B_ABORT_FIRST, first, 0.0)
        out = jnp.where(self.kind == B_RANDOM_STEP, rand, out)
        out = jnp.where(self.kind == B_AFTER_ONE, after_one, out)
        out = jnp.where(self.kind == B_LEARNED, learned, out)
        return out

    def cont(self, view: StepView, p, count, u):
        """Whether Bob continues at this step, by his kind."""
        honest = checker_accepts(p, count, self.n_samples, self.tau)
        adv = u >= self.abort_prob(view, p)
        return jnp.where(self.kind == B_HONEST, honest, adv)

    def coin_share(self, view: StepView, p, z):
        """His coin share: ``coin`` if non-negative, else the honest ``z`` (spec DED 5.4)."""
        return jnp.where(self.coin < 0, z, self.coin)


def zoo_alice(
    constants: DebateParams, kind: int, delta: float = 0.0, lies=None, coin: float = -1.0
) -> ZooAlice:
    """A zoo Alice of an ``A_*`` ``kind``; ``coin`` in [0, 1) fixes her share (< 0: honest)."""
    T = constants.T
    lies = np.zeros(T, np.float32) if lies is None else np.asarray(lies, np.float32)
    if lies.shape != (T,):
        raise ValueError(f"lies has shape {lies.shape}: it needs one shift per step (T={T})")
    uses = kind in (A_HONEST, A_LIE_LAST, A_HONEST_SHIFT)
    return ZooAlice(
        kind=jnp.int32(kind),
        delta=jnp.float32(delta),
        lies=jnp.asarray(lies),
        n_samples=jnp.int32(constants.n_alice if uses else 0),
        coin=jnp.float32(coin),
    )


def zoo_bob(
    constants: DebateParams,
    kind: int,
    w=None,
    w_dev: float = 0.0,
    w_prev: float = 0.0,
    coin: float = -1.0,
) -> ZooBob:
    """One zoo Bob of a ``B_*`` ``kind``; ``coin`` in [0, 1) fixes his share (negative: honest)."""
    T = constants.T
    w = np.full(T, -30.0, np.float32) if w is None else np.asarray(w, np.float32)
    if w.shape != (T,):
        raise ValueError(f"w has shape {w.shape}: it needs one logit per step (T={T})")
    return ZooBob(
        kind=jnp.int32(kind),
        w=jnp.asarray(w),
        w_dev=jnp.float32(w_dev),
        w_prev=jnp.float32(w_prev),
        tau_vera=jnp.float32(constants.tau_vera),
        n_samples=jnp.int32(constants.n_bob if kind == B_HONEST else 0),
        tau=jnp.float32(constants.tau_bob),
        coin=jnp.float32(coin),
    )


def soundness_zoo(constants: DebateParams) -> tuple[list[str], list[ZooAlice]]:
    """The soundness zoo of spec DED 9 (without the optimised member).

    Its last three members claim Alice's own estimate, as is and shifted by ``-+0.1 tau_B``:
    at small sample counts the estimate's noise alone lifts the acceptance above 2/5 (K = 2,
    T = 8, factor 1/16: 0.4022 by the exact DP), which no lie of the other members does.
    """
    s, b, tau_b = constants.s, constants.b, constants.tau_bob
    members = [
        ("always 1", A_ALWAYS_ONE, 0.0),
        ("+s", A_SHIFT, s),
        ("+0.95 tau_B", A_SHIFT, 0.95 * tau_b),
        ("+b", A_SHIFT, b),
        ("+2b", A_SHIFT, 2 * b),
        ("+0.99 s (just under s)", A_SHIFT, 0.99 * s),
        ("honest, last +1", A_LIE_LAST, 1.0),
        ("honest, last +0.95 tau_B", A_LIE_LAST, 0.95 * tau_b),
        ("honest estimate", A_HONEST, 0.0),
        ("honest estimate -0.1 tau_B", A_HONEST_SHIFT, -0.1 * tau_b),
        ("honest estimate +0.1 tau_B", A_HONEST_SHIFT, 0.1 * tau_b),
    ]
    return ([m[0] for m in members], [zoo_alice(constants, k, d) for _, k, d in members])


THRESHOLDS = (0.8, 0.9, 1.0, 1.1)
"""The threshold Bobs' ``theta``: each aborts where Alice's claim is more than ``theta tau_V``
from the truth, where Vera may reject an honest claim; below Lean's budgets the zoo's strongest
(docs/doubly-efficient-debate.md, section 9)."""

THRESHOLD_SHARPNESS = 60.0  # abort logit per tau_V of deviation past the threshold


def completeness_zoo(constants: DebateParams) -> tuple[list[str], list[ZooBob]]:
    """The completeness zoo of spec DED 9 (without the optimised member), and the threshold
    Bobs (:data:`THRESHOLDS`)."""
    members = [
        ("aborts at step 0", B_ABORT_FIRST),
        ("aborts at a random step", B_RANDOM_STEP),
        ("never aborts", B_NEVER),
        ("aborts after every 1", B_AFTER_ONE),
    ]
    names, bobs = [m[0] for m in members], [zoo_bob(constants, k) for _, k in members]
    w = THRESHOLD_SHARPNESS
    for theta in THRESHOLDS:
        names.append(f"aborts past {theta:g} tau_V")
        logits = np.full(constants.T, -w * theta, np.float32)
        bobs.append(zoo_bob(constants, B_LEARNED, w=logits, w_dev=w, w_prev=0.0))
    return names, bobs


# ---- optimised adversaries (evolution strategy) --------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SearchResult:
    """The strongest attack an evolution strategy found."""

    params: dict  # its parameters
    # its value as measured during the search (Alice: acceptance; Bob: honest Alice's lowest win
    # rate)
    value: float
    history: list  # the best value after each generation


def evolution_strategy(
    objective: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    sigma: float,
    generations: int,
    population: int,
    lr: float,
    seed: int = 0,
) -> tuple[np.ndarray, float, list]:
    """``(best point [D], best value, best per generation)``: antithetic ES maximising objective.

    ``objective`` maps ``[P, D] -> [P]``; rank-normalised fitness; the best point ever evaluated is
    kept.
    """
    rng = np.random.default_rng(seed)
    x = np.asarray(x0, np.float64)
    best_x, best_v = x.copy(), float(objective(x[None])[0])
    history = [best_v]
    half = max(1, population // 2)
    for _ in range(generations):
        eps = rng.standard_normal((half, x.size))
        pts = np.concatenate([x + sigma * eps, x - sigma * eps])
        vals = np.asarray(objective(pts), np.float64)
        i = int(np.argmax(vals))
        if vals[i] > best_v:
            best_v, best_x = float(vals[i]), pts[i].copy()
        ranks = np.empty_like(vals)
        ranks[np.argsort(vals)] = np.arange(vals.size)
        ranks = ranks / max(1, vals.size - 1) - 0.5
        grad = (ranks[:half] - ranks[half:]) @ eps / (half * sigma)
        x = x + lr * sigma * grad
        history.append(best_v)
    return best_x, best_v, history


def alice_lies_from_params(theta: np.ndarray, constants: DebateParams) -> np.ndarray:
    """The optimised Alice's lie family: float ``[..., T]`` lies from ``theta [..., 3]``, any T.

    ``lies[t] = tau_B tanh(theta_0 + theta_1 t / (T - 1))`` for t < T - 1 (lies up to Bob's
    threshold, growing or shrinking along the debate) and ``lies[T-1] = tau_B theta_2`` (any lie at
    the last step).
    """
    T = constants.T
    theta = np.asarray(theta, np.float64)
    ramp = np.arange(T) / max(T - 1, 1)
    lies = constants.tau_bob * np.tanh(theta[..., :1] + theta[..., 1:2] * ramp)
    lies[..., T - 1] = constants.tau_bob * theta[..., 2]
    return lies.astype(np.float32)


def bob_logits_from_params(theta: np.ndarray, constants: DebateParams):
    """The optimised Bob's family: ``(w [..., T], w_dev, w_prev)`` from ``theta [..., 4]``.

    Abort logit ``theta_0 + theta_1 t / (T-1)`` plus ``theta_2 |p - pi| / tau_V`` plus
    ``theta_3 prev_bit``.
    """
    T = constants.T
    theta = np.asarray(theta, np.float64)
    ramp = np.arange(T) / max(T - 1, 1)
    w = theta[..., :1] + theta[..., 1:2] * ramp
    return w.astype(np.float32), theta[..., 2].astype(np.float32), theta[..., 3].astype(np.float32)


def optimise_alice(
    acceptance: Callable[[np.ndarray], np.ndarray],
    constants: DebateParams,
    generations: int = 20,
    population: int = 16,
    sigma: float = 0.4,
    lr: float = 0.5,
    seed: int = 0,
) -> SearchResult:
    """Search the lie family (:func:`alice_lies_from_params`) for the largest acceptance.

    ``acceptance`` maps ``lies [P, T]`` to their acceptance against honest Bob and Vera (exact for
    small T, or Monte Carlo with common random numbers). Starts from "0.8 tau_B everywhere, honest
    last step"; ``params["lies"]`` of the :class:`SearchResult` is the best lie vector.
    """
    x0 = np.array([np.arctanh(0.8), 0.0, 0.0])
    best, value, hist = evolution_strategy(
        lambda th: acceptance(alice_lies_from_params(th, constants)),
        x0,
        sigma,
        generations,
        population,
        lr,
        seed,
    )
    return SearchResult(
        params={"theta": best, "lies": alice_lies_from_params(best, constants)},
        value=value,
        history=hist,
    )


def optimise_bob(
    alice_win: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    constants: DebateParams,
    generations: int = 20,
    population: int = 16,
    sigma: float = 1.0,
    lr: float = 0.5,
    seed: int = 0,
) -> SearchResult:
    """Search the abort family (:func:`bob_logits_from_params`) for honest Alice's lowest win rate.

    ``alice_win`` maps ``(w [P, T], w_dev [P], w_prev [P])`` to her win rate against each Bob.
    Starts from "almost never abort".
    """
    x0 = np.array([-4.0, 0.0, 0.0, 0.0])

    def objective(x):
        return -np.asarray(alice_win(*bob_logits_from_params(x, constants)))

    best, value, hist = evolution_strategy(objective, x0, sigma, generations, population, lr, seed)
    w, w_dev, w_prev = bob_logits_from_params(best, constants)
    return SearchResult(
        params={"theta": best, "w": w, "w_dev": float(w_dev), "w_prev": float(w_prev)},
        value=-value,
        history=[-h for h in hist],
    )
