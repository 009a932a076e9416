"""F1 and F2 (spec DED 9): position-only bits, then a final bit affine in their mean.

One machine, :class:`MeanFinalMachine`, with final probability ``a + b * mean``: F1 is ``b = 0``
(K = 1), F2 ``(a, b) = (0, 1)`` (K = 2); :func:`f1_target` and :func:`f2_target` build them for a
given number of steps and P_M(1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.machines.fixture_base import Fixture, SumState, _check_T
from dedebate.machines.oracles import affine_mean_oracle, check_probabilities
from dedebate.machines.program import ORACLE, StepProgram, make_step_program


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
        deps: list[list[int]] = [[] for _ in range(T - 1)] + [list(range(T - 1))]
        return make_step_program([ORACLE] * T, deps, affine_mean_oracle(base, weight))


WHY_MEAN_FINAL = (
    "K = 1 + |b|. Under any o' within eps (every step, every prefix), step i < T-1 still has "
    "P'[y_i=1 | prefix] within eps of pi_i, so each marginal P'[y_i=1] moves by <= eps and the "
    "expected mean moves by <= eps; the final step's probability a + b*mean then moves by <= |b| "
    "eps through the mean and by <= eps directly (its own perturbation). F1 (b=0): K=1; F2 (b=1): "
    "K=2. Uniform +eps attains the bound when nothing clamps."
)


def _mean_final(name: str, pi, a: float, b: float) -> Fixture:
    pi32 = check_probabilities("pi", pi)
    if pi32.ndim != 1 or pi32.size < 1:
        raise ValueError(f"pi has shape {pi32.shape}: it needs the T-1 >= 1 position probabilities")
    a32 = np.float32(check_probabilities("a", a))
    b32 = np.float32(b)
    check_probabilities("a + b", np.float64(a32) + np.float64(b32))
    machine = MeanFinalMachine(
        pi=jnp.asarray(pi32), a=jnp.float32(a32), b=jnp.float32(b32), T=int(pi32.size) + 1
    )
    p1 = float(np.float64(a32) + np.float64(b32) * pi32.astype(np.float64).mean())
    return Fixture(
        name=name, machine=machine, K=1.0 + abs(float(b32)), exact_p1=p1, why=WHY_MEAN_FINAL
    )


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
