"""Players of the stochastic-oracle debate (spec DED 5.1, 9): honest players and adversary zoos.

Honest players are Lean's (spec DED 5.1): honest Alice claims her estimate ``count / N_A`` from
``N_A = samples(c, q)`` oracle answers; honest Bob is the checker ``bob s b q``: he continues iff
``|p - count / N_B| < tau_B`` (strict). The protocol draws the counts exactly
(:func:`dedebate.protocols.stochastic.play`).

Adversaries are unbounded in theory: they read the true step probability ``pi`` from the view and
are not query-metered (``n_samples = 0`` unless they use honest estimates). Each zoo is a single
pytree class with a dynamic ``kind`` selector and dynamic parameters, so a whole zoo (stacked with
:func:`stack`) vmaps through one compiled program.

Alice zoo (soundness, spec DED 9): always claims 1; claims ``pi + delta`` for delta in
{s, 0.95 tau_B, b, 2b}; just under s (``0.99 s``) everywhere; honest except at the last step
(claims 1 there, or ``pi + 0.95 tau_B``); an **optimised** per-step lie ``pi + lies[t]`` from a three-parameter family (found by
:func:`optimise_alice`).

Bob zoo (completeness): aborts at step 0; at a uniformly random step (hazard ``1 / (T - t)``);
never; whenever the previous bit was 1; an **optimised** Bob aborting with probability
``sigmoid(w[t] + w_dev |p - pi| / tau_V + w_prev prev_bit)`` (found by :func:`optimise_bob`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.protocols.stochastic import (
    DebateConstants,
    StepView,
    checker_accepts,
    checker_interval,
)

# ---- kinds ----------------------------------------------------------------------------------------
A_HONEST, A_ALWAYS_ONE, A_SHIFT, A_LIE_LAST, A_PER_STEP, A_HONEST_SHIFT = range(6)
"""A_HONEST_SHIFT claims ``count / N_A + delta`` (her honest estimate shifted): at
``delta = tau_B`` Bob's strict comparison meets exact ties, which the exact DP and the Monte
Carlo must decide alike."""
B_HONEST, B_ABORT_FIRST, B_RANDOM_STEP, B_NEVER, B_AFTER_ONE, B_LEARNED = range(6)


def _honest_estimate(count, n):
    return count.astype(jnp.float32) / jnp.maximum(n, 1).astype(jnp.float32)


# ---- honest players ------------------------------------------------------------------------------
@struct.dataclass
class HonestAlice:
    """Lean's honest Alice(c, q): claims ``count / N_A`` (``honest_estimate``: exactly that, which
    the protocol's ``bob_draw="lazy"`` mode relies on)."""

    n_samples: jax.Array  # int32
    samples: bool = struct.field(pytree_node=False, default=True)
    honest_estimate: bool = struct.field(pytree_node=False, default=True)

    def claim(self, view: StepView, count, u):
        return _honest_estimate(count, self.n_samples)

    def coin_share(self, view: StepView, p, z):
        return z


@struct.dataclass
class HonestBob:
    """Lean's honest Bob ``bob s b q``: continues iff ``|p - count / N_B| < tau_B``."""

    n_samples: jax.Array  # int32
    tau: jax.Array  # float32
    samples: bool = struct.field(pytree_node=False, default=True)

    def cont(self, view: StepView, p, count, u):
        return checker_accepts(p, count, self.n_samples, self.tau)

    def continue_interval(self, p):
        """The counts Bob continues on, ``[k_lo, k_hi]``, and a flag that the interval was
        certified (see :func:`dedebate.protocols.stochastic.checker_interval`); used by the
        protocol's ``bob_draw="decision"`` mode, which draws the decision, not the count."""
        return checker_interval(p, self.n_samples, self.tau)

    def coin_share(self, view: StepView, p, z):
        return z


def honest_alice(constants: DebateConstants) -> HonestAlice:
    return HonestAlice(n_samples=jnp.int32(constants.n_alice))


def honest_bob(constants: DebateConstants) -> HonestBob:
    return HonestBob(n_samples=jnp.int32(constants.n_bob), tau=jnp.float32(constants.tau_bob))


# ---- zoos ------------------------------------------------------------------------------------------
@struct.dataclass
class ZooAlice:
    """One Alice from the soundness zoo, selected by ``kind`` (see the module docstring).

    ``delta``: the shift of A_SHIFT / A_LIE_LAST; ``lies[t]``: A_PER_STEP's shift at step t;
    ``n_samples``: honest-estimate samples (A_HONEST, A_LIE_LAST), else 0; ``coin``: her share of
    the two-party coin, a fixed value in [0, 1), or negative for an honest uniform share.
    """

    kind: jax.Array  # int32
    delta: jax.Array  # float32
    lies: jax.Array  # float32[T]
    n_samples: jax.Array  # int32
    coin: jax.Array  # float32
    samples: bool = struct.field(pytree_node=False, default=True)

    def claim(self, view: StepView, count, u):
        honest = _honest_estimate(count, self.n_samples)
        last = view.t == view.T - 1
        out = jnp.where(self.kind == A_ALWAYS_ONE, 1.0, honest)
        out = jnp.where(self.kind == A_SHIFT, view.pi + self.delta, out)
        out = jnp.where(self.kind == A_LIE_LAST, jnp.where(last, view.pi + self.delta, honest),
                        out)
        lie = self.lies[jnp.clip(view.t, 0, self.lies.shape[0] - 1)]
        out = jnp.where(self.kind == A_PER_STEP, view.pi + lie, out)
        out = jnp.where(self.kind == A_HONEST_SHIFT, honest + self.delta, out)
        return out.astype(jnp.float32)

    def coin_share(self, view: StepView, p, z):
        return jnp.where(self.coin < 0, z, self.coin)


@struct.dataclass
class ZooBob:
    """One Bob from the completeness zoo, selected by ``kind`` (see the module docstring).

    A_LEARNED's abort probability is ``sigmoid(w[t] + w_dev |p - pi| / tau_V + w_prev prev)``;
    ``n_samples`` and ``tau`` serve B_HONEST; ``coin`` as for :class:`ZooAlice`.
    """

    kind: jax.Array  # int32
    w: jax.Array  # float32[T]
    w_dev: jax.Array  # float32
    w_prev: jax.Array  # float32
    tau_vera: jax.Array  # float32 (scale of the deviation feature)
    n_samples: jax.Array  # int32
    tau: jax.Array  # float32
    coin: jax.Array  # float32
    samples: bool = struct.field(pytree_node=False, default=True)

    def abort_prob(self, view: StepView, p):
        """Probability of aborting at this step (the honest kind is not covered: it samples)."""
        t = view.t
        first = (t == 0).astype(jnp.float32)
        rand = 1.0 / jnp.maximum(view.T - t, 1).astype(jnp.float32)
        after_one = ((view.prev_bit == 1) & (t > 0)).astype(jnp.float32)
        z = (self.w[jnp.clip(t, 0, self.w.shape[0] - 1)]
             + self.w_dev * jnp.abs(p - view.pi) / self.tau_vera
             + self.w_prev * view.prev_bit.astype(jnp.float32))
        learned = jax.nn.sigmoid(z)
        out = jnp.where(self.kind == B_ABORT_FIRST, first, 0.0)
        out = jnp.where(self.kind == B_RANDOM_STEP, rand, out)
        out = jnp.where(self.kind == B_AFTER_ONE, after_one, out)
        out = jnp.where(self.kind == B_LEARNED, learned, out)
        return out

    def cont(self, view: StepView, p, count, u):
        honest = checker_accepts(p, count, self.n_samples, self.tau)
        adv = u >= self.abort_prob(view, p)
        return jnp.where(self.kind == B_HONEST, honest, adv)

    def coin_share(self, view: StepView, p, z):
        return jnp.where(self.coin < 0, z, self.coin)


def zoo_alice(constants: DebateConstants, kind: int, delta: float = 0.0, lies=None,
              coin: float = -1.0) -> ZooAlice:
    """One zoo Alice (``lies``: length-T per-step shifts for A_PER_STEP)."""
    T = constants.T
    lies = np.zeros(T, np.float32) if lies is None else np.asarray(lies, np.float32)
    if lies.shape != (T,):
        raise ValueError(f"lies has shape {lies.shape}: it needs one shift per step (T={T})")
    uses = kind in (A_HONEST, A_LIE_LAST, A_HONEST_SHIFT)
    return ZooAlice(kind=jnp.int32(kind), delta=jnp.float32(delta), lies=jnp.asarray(lies),
                    n_samples=jnp.int32(constants.n_alice if uses else 0),
                    coin=jnp.float32(coin))


def zoo_bob(constants: DebateConstants, kind: int, w=None, w_dev: float = 0.0,
            w_prev: float = 0.0, coin: float = -1.0) -> ZooBob:
    """One zoo Bob (``w``: length-T logits for B_LEARNED)."""
    T = constants.T
    w = np.full(T, -30.0, np.float32) if w is None else np.asarray(w, np.float32)
    if w.shape != (T,):
        raise ValueError(f"w has shape {w.shape}: it needs one logit per step (T={T})")
    return ZooBob(kind=jnp.int32(kind), w=jnp.asarray(w), w_dev=jnp.float32(w_dev),
                  w_prev=jnp.float32(w_prev), tau_vera=jnp.float32(constants.tau_vera),
                  n_samples=jnp.int32(constants.n_bob if kind == B_HONEST else 0),
                  tau=jnp.float32(constants.tau_bob), coin=jnp.float32(coin))


def stack(players: Sequence) -> object:
    """Stack players of one class into a batch (leading axis) for ``vmap`` (on the host)."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *players)


def alice_zoo(constants: DebateConstants) -> tuple[list[str], list[ZooAlice]]:
    """The soundness zoo of spec DED 9 (without the optimised member)."""
    s, b, tau_b = constants.s, constants.b, constants.tau_bob
    members = [
        ("always 1", A_ALWAYS_ONE, 0.0),
        ("+s", A_SHIFT, s),
        ("+0.95 tau_B", A_SHIFT, 0.95 * tau_b),
        ("+b", A_SHIFT, b),
        ("+2b", A_SHIFT, 2 * b),
        ("+0.99 s (just under s)", A_SHIFT, 0.99 * s),
        ("honest, last claims 1", A_LIE_LAST, 1.0),
        ("honest, last +0.95 tau_B", A_LIE_LAST, 0.95 * tau_b),
    ]
    return ([m[0] for m in members], [zoo_alice(constants, k, d) for _, k, d in members])


def bob_zoo(constants: DebateConstants) -> tuple[list[str], list[ZooBob]]:
    """The completeness zoo of spec DED 9 (without the optimised member)."""
    members = [
        ("aborts at step 0", B_ABORT_FIRST),
        ("aborts at a random step", B_RANDOM_STEP),
        ("never aborts", B_NEVER),
        ("aborts after every 1", B_AFTER_ONE),
    ]
    return [m[0] for m in members], [zoo_bob(constants, k) for _, k in members]


# ---- optimised adversaries (evolution strategy) ---------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SearchResult:
    """The strongest attack an evolution strategy found: its parameters, its value as measured
    during the search (Alice: acceptance; Bob: honest Alice's lowest win rate), and the best
    value after each generation."""

    params: dict
    value: float
    history: list


def evolution_strategy(objective: Callable[[np.ndarray], np.ndarray], x0: np.ndarray,
                       sigma: float, generations: int, population: int, lr: float,
                       seed: int = 0) -> tuple[np.ndarray, float, list]:
    """Maximise ``objective`` (batched: [P, D] -> [P]) by an antithetic evolution strategy with
    rank-normalised fitness (OpenAI-ES); also keeps the best point ever evaluated."""
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


def alice_lies_from_params(theta: np.ndarray, constants: DebateConstants) -> np.ndarray:
    """The optimised Alice's lie family, three parameters for any T:
    ``lies[t] = tau_B tanh(theta_0 + theta_1 t / (T - 1))`` for t < T - 1 (lies up to Bob's
    threshold, growing or shrinking along the debate) and ``lies[T-1] = tau_B theta_2`` (any lie
    at the last step). ``theta``: [..., 3] -> lies [..., T]."""
    T = constants.T
    theta = np.asarray(theta, np.float64)
    ramp = np.arange(T) / max(T - 1, 1)
    lies = constants.tau_bob * np.tanh(theta[..., :1] + theta[..., 1:2] * ramp)
    lies[..., T - 1] = constants.tau_bob * theta[..., 2]
    return lies.astype(np.float32)


def bob_logits_from_params(theta: np.ndarray, constants: DebateConstants):
    """The optimised Bob's family, four parameters: abort logit ``theta_0 + theta_1 t / (T-1)``
    plus ``theta_2 |p - pi| / tau_V`` plus ``theta_3 prev_bit``. Returns ``(w [..., T],
    w_dev [...], w_prev [...])``."""
    T = constants.T
    theta = np.asarray(theta, np.float64)
    ramp = np.arange(T) / max(T - 1, 1)
    w = theta[..., :1] + theta[..., 1:2] * ramp
    return w.astype(np.float32), theta[..., 2].astype(np.float32), theta[..., 3].astype(
        np.float32)


def optimise_alice(acceptance: Callable[[np.ndarray], np.ndarray], constants: DebateConstants,
                   generations: int = 20, population: int = 16, sigma: float = 0.4,
                   lr: float = 0.5, seed: int = 0) -> SearchResult:
    """Search the lie family (:func:`alice_lies_from_params`) for the largest acceptance.

    ``acceptance(lies[P, T]) -> [P]``: the acceptance probability of each lie vector against
    honest Bob and Vera (exact for small T, or Monte Carlo with common random numbers). Starts
    from "0.8 tau_B everywhere, honest last step".
    """
    x0 = np.array([np.arctanh(0.8), 0.0, 0.0])
    best, value, hist = evolution_strategy(
        lambda th: acceptance(alice_lies_from_params(th, constants)), x0, sigma, generations,
        population, lr, seed)
    return SearchResult(params={"theta": best, "lies": alice_lies_from_params(best, constants)},
                        value=value, history=hist)


def optimise_bob(alice_win: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
                 constants: DebateConstants, generations: int = 20, population: int = 16,
                 sigma: float = 1.0, lr: float = 0.5, seed: int = 0) -> SearchResult:
    """Search the abort family (:func:`bob_logits_from_params`) for the lowest win rate of
    honest Alice. ``alice_win(w[P, T], w_dev[P], w_prev[P]) -> [P]``. Starts from "almost never
    abort"; ``value`` is the lowest win rate found."""
    x0 = np.array([-4.0, 0.0, 0.0, 0.0])

    def objective(x):
        return -np.asarray(alice_win(*bob_logits_from_params(x, constants)))

    best, value, hist = evolution_strategy(objective, x0, sigma, generations, population, lr,
                                           seed)
    w, w_dev, w_prev = bob_logits_from_params(best, constants)
    return SearchResult(params={"theta": best, "w": w, "w_dev": float(w_dev),
                                "w_prev": float(w_prev)},
                        value=-value, history=[-h for h in hist])
