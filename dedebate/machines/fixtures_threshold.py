"""Threshold-sum fixtures: n oracle verdicts, then whether their signed sum reaches a threshold.

:class:`ThresholdSumMachine` gives majority, AND, OR and the meta-analysis toy; its proven K
(:func:`threshold_lipschitz`) sums each verdict's worst chance of being pivotal.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.machines.fixture_base import Fixture, SumState
from dedebate.machines.oracles import affine_mean_oracle, check_probabilities
from dedebate.machines.program import DET, ORACLE, StepProgram, make_step_program

MAX_PROGRAM_RULE_BITS = 12


@struct.dataclass
class ThresholdSumMachine:
    """n oracle verdicts then a threshold: ``P[y_i = 1] = pi[i]`` (i < n, position only), and the
    final bit is ``1[sum_i w_i y_i >= theta]`` with weights ``w_i = 2 x_i - 1`` in {-1, +1}.

    Majority, AND and OR use ``x = 1`` (all weights +1) with theta = (n+1)/2, n and 1. The
    meta-analysis toy reads the study reports x as its input (see :func:`meta_analysis`).
    T = n + 1.
    """

    pi: jax.Array  # float32[n]
    x: jax.Array  # int8[n]
    theta: jax.Array  # int32 scalar
    T: int = struct.field(pytree_node=False)
    x_is_input: bool = struct.field(pytree_node=False, default=False)

    @property
    def n(self) -> int:
        """Number of votes (``T - 1``)."""
        return self.T - 1

    def weights(self):
        """The vote weights ``w_i = 2 x_i - 1``."""
        return 2 * self.x.astype(jnp.int32) - 1

    def init_state(self) -> SumState:
        """The state before step 0 (the empty prefix)."""
        return SumState(bits=jnp.zeros((self.T,), jnp.int8), total=jnp.int32(0))

    def prob(self, state: SumState, t):
        """The step probability ``p_t = P[y_t = 1 | y_<t]``."""
        vote = self.pi[jnp.minimum(t, self.n - 1)]
        fin = (state.total >= self.theta).astype(jnp.float32)
        return jnp.where(t < self.n, vote, fin).astype(jnp.float32)

    def advance(self, state: SumState, t, bit) -> SumState:
        """The state after writing ``y_t = bit``."""
        bit = bit.astype(jnp.int8)
        w = self.weights()[jnp.minimum(t, self.n - 1)]
        inc = jnp.where(t < self.n, w * bit.astype(jnp.int32), 0)
        return SumState(bits=state.bits.at[t].set(bit), total=state.total + inc)

    def bits(self, state: SumState):
        """The transcript written so far."""
        return state.bits

    def output_prob_dp(self):
        """Exact ``P_M(1)`` by a DP over the running sum (offset n, 2n+1 states), O(n^2)."""
        n = self.n
        dist0 = jnp.zeros((2 * n + 1,), jnp.float32).at[n].set(1.0)

        def step(dist, pw):
            p, w = pw
            return dist * (1.0 - p) + jnp.roll(dist, w) * p, None

        dist, _ = jax.lax.scan(step, dist0, (self.pi, self.weights()))
        sums = jnp.arange(-n, n + 1)
        return jnp.sum(jnp.where(sums >= self.theta, dist, 0.0))

    def step_program(self) -> StepProgram:
        """The equivalent paper-model step program (spec DED 3.1), for cross-checks.

        Votes are ORACLE steps (the meta-analysis screens query the study's report x_i); the final
        step is DET with the threshold truth table over (inputs,) votes.
        """
        n = self.n
        x = np.asarray(self.x, np.int64)
        theta = int(self.theta)
        n_in = n if self.x_is_input else 0
        width = n_in + n
        if width > MAX_PROGRAM_RULE_BITS:
            raise ValueError(
                f"n={n}: the threshold step program's truth table reads {width} bits;"
                f" at most {MAX_PROGRAM_RULE_BITS} are allowed"
            )
        codes = np.arange(2**width)[:, None] >> np.arange(width)[None, :] & 1
        xs = codes[:, :n_in] if n_in else np.broadcast_to(x, (codes.shape[0], n))
        votes = codes[:, n_in:]
        rule = ((votes * (2 * xs - 1)).sum(axis=1) >= theta).astype(np.int8)
        deps = [[i] if n_in else [] for i in range(n)]
        deps.append(list(range(n_in)) + [n_in + i for i in range(n)])
        base = np.concatenate([np.asarray(self.pi), [0.0]])
        oracle = affine_mean_oracle(base, np.zeros(n + 1))
        return make_step_program(
            [ORACLE] * n + [DET], deps, oracle, rule=[None] * n + [rule], x=x if n_in else None
        )


WHY_THRESHOLD = (
    "K = 1 + sum_i M_i, M_i = max over prefix sums s of P[R_i = theta - s - [w_i = +1]], where "
    "R_i = sum_{j>i} w_j y_j under o (a signed Poisson binomial). Hybrid identity: verdict i's "
    "influence at a prefix with sum s is the probability that it is pivotal, i.e. that the later "
    "verdicts land exactly on the one value where y_i decides the threshold; the sup over all "
    "prefixes (every s between the earlier negative and positive weight totals is realised) is "
    "M_i. The final step adds 1. For majority M_i ~ 1/sqrt(2 pi m p(1-p)) with m later votes, so "
    "K = O(sqrt(n)); for AND M_i = prod_{j>i} pi_j; for OR M_i = prod_{j>i} (1 - pi_j)."
)


def threshold_lipschitz(pi, x, theta: int) -> float:
    """The proven K of a threshold-sum machine (see :data:`WHY_THRESHOLD`), exact in float64."""
    pi = np.asarray(pi, np.float64)
    w = 2 * np.asarray(x, np.int64) - 1
    n = pi.size
    # later[i]: distribution of R_i = sum_{j > i} w_j y_j, indexed by value + n.
    later: list[np.ndarray] = [np.empty(0)] * n  # each set below
    dist = np.zeros(2 * n + 1)
    dist[n] = 1.0
    for i in range(n - 1, -1, -1):
        later[i] = dist
        dist = dist * (1.0 - pi[i]) + np.roll(dist, int(w[i])) * pi[i]
    K = 1.0
    for i in range(n):
        lo = -int(np.sum(w[:i] < 0))
        hi = int(np.sum(w[:i] > 0))
        target = np.array([theta - s - (1 if w[i] > 0 else 0) for s in range(lo, hi + 1)])
        ok = (target >= -n) & (target <= n)
        K += float(later[i][target[ok] + n].max()) if ok.any() else 0.0
    return K


def _threshold(name: str, pi, x, theta: int, x_is_input: bool, exact_p1) -> Fixture:
    pi32 = check_probabilities("pi", pi)
    if pi32.ndim != 1 or pi32.size < 1:
        raise ValueError(f"pi has shape {pi32.shape}: a threshold fixture needs n >= 1 verdicts")
    n = int(pi32.size)
    machine = ThresholdSumMachine(
        pi=jnp.asarray(pi32),
        x=jnp.asarray(x, jnp.int8),
        theta=jnp.int32(theta),
        T=n + 1,
        x_is_input=x_is_input,
    )
    p1 = exact_p1(pi32.astype(np.float64)) if exact_p1 is not None else None
    K = threshold_lipschitz(pi32, x, theta)
    return Fixture(name=name, machine=machine, K=K, exact_p1=p1, why=WHY_THRESHOLD)


def majority(pi) -> Fixture:
    """Majority of n (odd) oracle votes, vote i ~ Bernoulli(pi[i]).

    P_M(1) by the sum DP (closed binomial tail when all pi are equal).
    """
    pi = np.atleast_1d(np.asarray(pi, np.float64))
    n = pi.size
    if n % 2 == 0:
        raise ValueError(f"n={n}: majority needs an odd number of votes")
    h = (n + 1) // 2

    def tail(p):
        if np.all(p == p[0]):
            p0 = float(p[0])
            return sum(math.comb(n, k) * p0**k * (1 - p0) ** (n - k) for k in range(h, n + 1))
        return None

    pi32 = check_probabilities("pi", pi)
    return _threshold(
        "majority", pi32, np.ones(n, np.int8), h, False, tail if np.all(pi32 == pi32[0]) else None
    )


def and_fixture(pi) -> Fixture:
    """AND of n oracle verdicts. P_M(1) = prod(pi)."""
    n = np.atleast_1d(pi).size
    return _threshold(
        "AND", np.atleast_1d(pi), np.ones(n, np.int8), n, False, lambda p: float(np.prod(p))
    )


def or_fixture(pi) -> Fixture:
    """OR of n oracle verdicts. P_M(1) = 1 - prod(1 - pi)."""
    n = np.atleast_1d(pi).size
    return _threshold(
        "OR",
        np.atleast_1d(pi),
        np.ones(n, np.int8),
        1,
        False,
        lambda p: float(1.0 - np.prod(1.0 - p)),
    )


def meta_analysis(reports, quality, theta: int) -> Fixture:
    """The meta-analysis toy: study i asks the oracle whether study i is sound.

    Study i reports a positive (``reports[i] = 1``) or negative effect (an input bit the verifier
    can read); step i's oracle probability is ``quality[i]`` and its query is the study's report.
    The conclusion "the effect is real" is ``#sound positive - #sound negative >= theta``. P_M(1) by
    the sum DP.
    """
    x = np.atleast_1d(np.asarray(reports))
    if x.ndim != 1 or not np.isin(x, [0, 1]).all():
        raise ValueError("reports: the study reports must be a 1-D sequence of bits (0 or 1)")
    q = check_probabilities("quality", np.atleast_1d(quality))
    if q.shape != x.shape:
        raise ValueError(f"quality has shape {q.shape}: it needs one entry per study {x.shape}")
    n = x.size
    if not isinstance(theta, (int, np.integer)) or not (-n <= theta <= n + 1):
        raise ValueError(f"theta={theta!r}: the threshold must be an integer in [-{n}, {n + 1}]")
    return _threshold("meta-analysis", q, x.astype(np.int8), int(theta), True, None)
