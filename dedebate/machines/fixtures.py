"""Fixture library: machines with a proven Lipschitz constant K and a known P_M(1) (spec DED 9).

All K are in Lean's sense (spec DED 3.3): the oracle o' may move the conditional probability of
every step at every prefix by at most eps, and P[final = 1] must move by at most K * eps. The
proofs use the hybrid identity of spec DED 3.4: ``|dP_M| <= eps * sum_t sup_prefix |Delta_t|``.
Every fixture's machine is an efficient :class:`~dedebate.machines.program.Machine` (state =
transcript + a running sum, O(1) ``prob``), a ``flax.struct`` pytree whose numbers vmap, with an
exact jittable ``output_prob_dp()`` and an equivalent ``step_program()``. :class:`Fixture`
bundles the machine with its name, proven K, closed-form P_M(1) and the argument for K.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.machines.oracles import affine_mean_oracle, check_probabilities
from dedebate.machines.program import DET, ORACLE, StepProgram, make_step_program

MAX_PROGRAM_RULE_BITS = 12


@dataclasses.dataclass(frozen=True, eq=False)
class Fixture:
    """A machine with a proven Lipschitz constant and a known output probability."""

    name: str  # short label ("F2", "majority"...)
    machine: Any  # an efficient Machine (has T, output_prob_dp, step_program)
    K: float  # the proven Lipschitz constant (Lean's definition, spec DED 3.3), float
    # P_M(1) in closed form (float64 from the stored float32 probabilities), or None where only the
    # dynamic program / enumeration gives it
    exact_p1: float | None
    why: str  # the argument for K, one paragraph

    @property
    def T(self) -> int:
        """Number of steps of the machine."""
        return int(self.machine.T)

    def p1(self) -> float:
        """P_M(1): the closed form when there is one, else the exact dynamic program."""
        if self.exact_p1 is not None:
            return float(self.exact_p1)
        return float(self.machine.output_prob_dp())

    def step_program(self) -> StepProgram:
        """The equivalent paper-model step program (spec DED 3.1), for cross-checks."""
        return self.machine.step_program()


# ---------------------------------------------------------------------------------------------------
# F1 / F2: position-only bits, then a final bit that is affine in their mean
# ---------------------------------------------------------------------------------------------------
@struct.dataclass
class SumState:
    """Transcript so far plus a running (weighted) sum of the bits that matter."""

    bits: jax.Array  # int8[T]
    total: jax.Array  # int32 scalar


@struct.dataclass
class MeanFinalMachine:
    """Bits 0..T-2: ``P[y_i = 1] = pi[i]`` (position only). Final bit: ``a + b *
    mean(y_0..y_{T-2})``.

    F1 is ``(a, b) = (p_T, 0)``, F2 is ``(0, 1)``. P_M(1) = a + b * mean(pi). Proven K = 1 + |b|
    (see :data:`WHY_MEAN_FINAL`).
    """

    pi: jax.Array  # float32[T-1]
    a: jax.Array  # float32 scalar
    b: jax.Array  # float32 scalar
    T: int = struct.field(pytree_node=False)

    def init_state(self) -> SumState:
        """The state before step 0 (the empty prefix)."""
        return SumState(bits=jnp.zeros((self.T,), jnp.int8), total=jnp.int32(0))

    def prob(self, state: SumState, t):
        """The step probability ``p_t = P[y_t = 1 | y_<t]``."""
        pos = self.pi[jnp.minimum(t, self.T - 2)]
        fin = jnp.clip(self.a + self.b * state.total.astype(jnp.float32) / (self.T - 1), 0.0, 1.0)
        return jnp.where(t < self.T - 1, pos, fin).astype(jnp.float32)

    def advance(self, state: SumState, t, bit) -> SumState:
        """The state after writing ``y_t = bit``."""
        bit = bit.astype(jnp.int8)
        inc = jnp.where(t < self.T - 1, bit, 0).astype(jnp.int32)
        return SumState(bits=state.bits.at[t].set(bit), total=state.total + inc)

    def bits(self, state: SumState):
        """The transcript written so far."""
        return state.bits

    def output_prob_dp(self):
        """Exact ``P_M(1)``, O(T^2), jittable.

        The distribution of the count of ones (Poisson binomial), then the final step's
        expectation.
        """
        dist0 = jnp.zeros((self.T,), jnp.float32).at[0].set(1.0)

        def step(dist, p):
            return dist * (1.0 - p) + jnp.roll(dist, 1) * p, None

        dist, _ = jax.lax.scan(step, dist0, self.pi)
        k = jnp.arange(self.T, dtype=jnp.float32)
        return jnp.sum(dist * jnp.clip(self.a + self.b * k / (self.T - 1), 0.0, 1.0))

    def step_program(self) -> StepProgram:
        """The equivalent paper-model step program (spec DED 3.1), for cross-checks."""
        T = self.T
        base = np.concatenate([np.asarray(self.pi), [float(self.a)]])
        weight = np.concatenate([np.zeros(T - 1), [float(self.b)]])
        deps = [[] for _ in range(T - 1)] + [list(range(T - 1))]
        return make_step_program([ORACLE] * T, deps, affine_mean_oracle(base, weight))


WHY_MEAN_FINAL = (
    "K = 1 + |b|. Under any o' within eps (every step, every prefix), step i < T-1 still has "
    "P'[y_i=1 | prefix] within eps of pi_i, so each marginal P'[y_i=1] moves by <= eps and the "
    "expected mean moves by <= eps; the final step's probability a + b*mean then moves by <= |b| "
    "eps through the mean and by <= eps directly (its own perturbation). F1 (b=0): K=1; F2 (b=1): "
    "K=2. Uniform +eps attains the bound when nothing clamps."
)


def _check_T(T: int, lo: int = 2) -> int:
    if not isinstance(T, (int, np.integer)) or T < lo:
        raise ValueError(f"T={T!r}: a fixture needs an integer number of steps T >= {lo}")
    return int(T)


def _mean_final(name: str, pi, a: float, b: float) -> Fixture:
    pi32 = check_probabilities("pi", pi)
    if pi32.ndim != 1 or pi32.size < 1:
        raise ValueError(f"pi has shape {pi32.shape}: it needs the T-1 >= 1 position probabilities")
    a32 = np.float32(check_probabilities("a", a))
    b32 = np.float32(b)
    check_probabilities("a + b", np.float64(a32) + np.float64(b32))
    machine = MeanFinalMachine(pi=jnp.asarray(pi32), a=jnp.float32(a32), b=jnp.float32(b32),
                               T=int(pi32.size) + 1)
    p1 = float(np.float64(a32) + np.float64(b32) * pi32.astype(np.float64).mean())
    return Fixture(name=name, machine=machine, K=1.0 + abs(float(b32)), exact_p1=p1,
                   why=WHY_MEAN_FINAL)


def f1(pi, p_final: float) -> Fixture:
    """F1 (spec DED 9): bits 0..T-2 position-only ``pi``, final bit constant ``p_final``.

    P_M(1) = p_final, K = 1.
    """
    return _mean_final("F1", pi, float(p_final), 0.0)


def f2(pi) -> Fixture:
    """F2 (spec DED 9): bits 0..T-2 position-only ``pi``, final bit ~ Bernoulli(mean of them).

    P_M(1) = mean(pi), K = 2.
    """
    return _mean_final("F2", pi, 0.0, 1.0)


def spread_probs(n: int, p: float, spread: float = 0.0) -> np.ndarray:
    """float64 ``[n]``: ``p + spread * linspace(-1, 1, n)`` (mean p), validated in [0, 1]."""
    check_probabilities("p", p)
    if not (spread >= 0.0):
        raise ValueError(f"spread={spread!r}: the spread must be >= 0")
    grid = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return check_probabilities("p +- spread", p + spread * grid)


def f1_target(T: int, p1: float, pi: float = 0.5, spread: float = 0.0) -> Fixture:
    """F1 with ``T`` steps, P_M(1) = ``p1``, earlier bits' probabilities ``pi +- spread``."""
    T = _check_T(T)
    return f1(spread_probs(T - 1, pi, spread), p1)


def f2_target(T: int, p1: float, spread: float = 0.0) -> Fixture:
    """F2 with ``T`` steps and P_M(1) = mean(pi) = ``p1``.

    The stochastic protocol needs P_M(1) >= 2/3 or <= 1/3.
    """
    T = _check_T(T)
    return f2(spread_probs(T - 1, p1, spread))


# ---------------------------------------------------------------------------------------------------
# F3: the cascade (only K = T holds)
# ---------------------------------------------------------------------------------------------------
@struct.dataclass
class CascadeMachine:
    """F3: ``P[y_0 = 1] = p0``; for t >= 1, ``P[y_t = 1 | y] = (1 - r) y_{t-1} + r q``.

    Each bit copies the previous one except with probability r, when it is redrawn as
    Bernoulli(q). P_M(1) = q + (1 - r)^(T-1) (p0 - q).
    """

    p0: jax.Array
    q: jax.Array
    r: jax.Array
    T: int = struct.field(pytree_node=False)

    def init_state(self) -> jax.Array:
        """The state before step 0 (the empty prefix)."""
        return jnp.zeros((self.T,), jnp.int8)

    def prob(self, bits, t):
        """The step probability ``p_t = P[y_t = 1 | y_<t]``."""
        prev = bits[jnp.maximum(t - 1, 0)].astype(jnp.float32)
        return jnp.where(t == 0, self.p0, (1.0 - self.r) * prev + self.r * self.q).astype(
            jnp.float32)

    def advance(self, bits, t, bit):
        """The state after writing ``y_t = bit``."""
        return bits.at[t].set(bit.astype(jnp.int8))

    def bits(self, bits):
        """The transcript written so far."""
        return bits

    def output_prob_dp(self):
        """Exact ``P_M(1)`` by the two-state DP ``m_t = (1 - r) m_{t-1} + r q``."""

        def step(m, _):
            return (1.0 - self.r) * m + self.r * self.q, None

        m, _ = jax.lax.scan(step, jnp.asarray(self.p0, jnp.float32), None, length=self.T - 1)
        return m

    def tight_lipschitz(self) -> float:
        """The exact hybrid sum ``sum_{j<T} (1 - r)^j`` (tends to T as r -> 0)."""
        r = float(self.r)
        return float(self.T) if r == 0.0 else (1.0 - (1.0 - r) ** self.T) / r

    def step_program(self) -> StepProgram:
        """The equivalent paper-model step program (spec DED 3.1), for cross-checks."""
        T = self.T
        p0, q, r = float(self.p0), float(self.q), float(self.r)
        base = np.array([p0] + [r * q] * (T - 1))
        weight = np.array([0.0] + [1.0 - r] * (T - 1))
        deps = [[]] + [[t - 1] for t in range(1, T)]
        return make_step_program([ORACLE] * T, deps, affine_mean_oracle(base, weight))


WHY_CASCADE = (
    "K = T. Only the trivial hybrid bound is safe: under o, flipping y_t changes P[final=1] by "
    "exactly (1-r)^(T-1-t) at every prefix, so the hybrid sum is sum_j (1-r)^j = (1-(1-r)^T)/r, "
    "and the uniform shift +eps attains it (m'_t - m_t = (1-r)(m'_{t-1} - m_{t-1}) + eps). As "
    "r -> 0 this tends to T, so no constant below (1-(1-r)^T)/r holds, and none independent of r "
    "below T; for r <= 1/T it exceeds (1-1/e) T > T/2."
)


def f3_cascade(T: int, p0: float, q: float, noise: float) -> Fixture:
    """F3 cascade (spec DED 9): ``pi_t(y) = (1 - noise) y_{t-1} + noise q``, ``pi_0 = p0``."""
    T = _check_T(T)
    p0_, q_, r_ = (np.float32(check_probabilities(n, v)) for n, v in
                   (("p0", p0), ("q", q), ("noise", noise)))
    m = CascadeMachine(p0=jnp.float32(p0_), q=jnp.float32(q_), r=jnp.float32(r_), T=T)
    p0d, qd, rd = float(p0_), float(q_), float(r_)
    p1 = qd + (1.0 - rd) ** (T - 1) * (p0d - qd)
    return Fixture(name="F3", machine=m, K=float(T), exact_p1=p1, why=WHY_CASCADE)


def f3_target(T: int, p1: float, noise: float | None = None) -> Fixture:
    """F3 with P_M(1) = ``p1`` (``p0 = q = p1``); default noise ``1/(2T)`` keeps K above 0.78 T."""
    T = _check_T(T)
    return f3_cascade(T, p1, p1, 1.0 / (2 * T) if noise is None else noise)


# ---------------------------------------------------------------------------------------------------
# Threshold sums: majority, AND, OR, meta-analysis
# ---------------------------------------------------------------------------------------------------
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
            raise ValueError(f"n={n}: the threshold step program's truth table reads {width} bits;"
                             f" at most {MAX_PROGRAM_RULE_BITS} are allowed")
        codes = np.arange(2**width)[:, None] >> np.arange(width)[None, :] & 1
        xs = codes[:, :n_in] if n_in else np.broadcast_to(x, (codes.shape[0], n))
        votes = codes[:, n_in:]
        rule = ((votes * (2 * xs - 1)).sum(axis=1) >= theta).astype(np.int8)
        deps = [[i] if n_in else [] for i in range(n)]
        deps.append(list(range(n_in)) + [n_in + i for i in range(n)])
        base = np.concatenate([np.asarray(self.pi), [0.0]])
        oracle = affine_mean_oracle(base, np.zeros(n + 1))
        return make_step_program([ORACLE] * n + [DET], deps, oracle,
                                 rule=[None] * n + [rule], x=x if n_in else None)


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
    later = [None] * n
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
    machine = ThresholdSumMachine(pi=jnp.asarray(pi32), x=jnp.asarray(x, jnp.int8),
                                  theta=jnp.int32(theta), T=n + 1, x_is_input=x_is_input)
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
    return _threshold("majority", pi32, np.ones(n, np.int8), h, False,
                      tail if np.all(pi32 == pi32[0]) else None)


def and_fixture(pi) -> Fixture:
    """AND of n oracle verdicts. P_M(1) = prod(pi)."""
    n = np.atleast_1d(pi).size
    return _threshold("AND", np.atleast_1d(pi), np.ones(n, np.int8), n, False,
                      lambda p: float(np.prod(p)))


def or_fixture(pi) -> Fixture:
    """OR of n oracle verdicts. P_M(1) = 1 - prod(1 - pi)."""
    n = np.atleast_1d(pi).size
    return _threshold("OR", np.atleast_1d(pi), np.ones(n, np.int8), 1, False,
                      lambda p: float(1.0 - np.prod(1.0 - p)))


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


def standard_fixtures(T: int = 16, high: bool = True) -> list[Fixture]:
    """One of each fixture with T steps: F1-F3 with P_M(1) >= 2/3 if ``high`` else <= 1/3."""
    T = _check_T(T, 4)
    n = T - 1
    p = 0.75 if high else 0.25
    rng = np.random.default_rng(12345)
    spread = np.round(rng.uniform(0.3, 0.9, n), 3)
    maj_n = n if n % 2 else n - 1
    reports = (np.arange(n) % 3 != 2).astype(np.int8)
    fx = [
        f1_target(T, p, pi=0.5, spread=0.3),
        f2_target(T, p, spread=0.2),
        f3_target(T, p),
        majority(np.full(maj_n, 0.6)),
        and_fixture(np.round(rng.uniform(0.85, 0.99, n), 3)),
        or_fixture(np.round(rng.uniform(0.01, 0.15, n), 3)),
        meta_analysis(reports, spread, theta=max(1, n // 4)),
    ]
    return fx


CASCADE_NOISE = 0.25  # F3 with r = 1/4: exact hybrid sum (1 - (3/4)^T) * 4 < 4


def fixture_for_k(K: int, T: int, p1: float) -> tuple[str, Any, float]:
    """``(name, machine, K)``: the stochastic debate's instance of Lipschitz constant K.

    K is 1 (F1), 2 (F2) or 4 (the F3 cascade with noise r = 1/4, whose exact hybrid sum
    ``(1 - (3/4)^T) / (1/4)`` stays below 4).
    """
    if K == 1:
        return "F1", f1_target(T, p1, pi=0.5, spread=0.3).machine, 1.0
    if K == 2:
        return "F2", f2_target(T, p1, spread=0.2).machine, 2.0
    fx = f3_cascade(T, p1, p1, CASCADE_NOISE)
    tight = fx.machine.tight_lipschitz()
    if tight > 4.0:
        raise AssertionError(f"cascade hybrid sum {tight} exceeds the declared K = 4")
    return "F3(r=1/4)", fx.machine, 4.0
