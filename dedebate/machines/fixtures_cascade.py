"""F3 (spec DED 9): the cascade, where each bit copies the previous one but for noise; only K = T
holds (the trivial hybrid bound)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.machines.fixture_base import Fixture, _check_T
from dedebate.machines.oracles import affine_mean_oracle, check_probabilities
from dedebate.machines.program import ORACLE, StepProgram, make_step_program


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
            jnp.float32
        )

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
        deps: list[list[int]] = [[]] + [[t - 1] for t in range(1, T)]
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
    p0_, q_, r_ = (
        np.float32(check_probabilities(n, v)) for n, v in (("p0", p0), ("q", q), ("noise", noise))
    )
    m = CascadeMachine(p0=jnp.float32(p0_), q=jnp.float32(q_), r=jnp.float32(r_), T=T)
    p0d, qd, rd = float(p0_), float(q_), float(r_)
    p1 = qd + (1.0 - rd) ** (T - 1) * (p0d - qd)
    return Fixture(name="F3", machine=m, K=float(T), exact_p1=p1, why=WHY_CASCADE)


def f3_target(T: int, p1: float, noise: float | None = None) -> Fixture:
    """F3 with P_M(1) = ``p1`` (``p0 = q = p1``); default noise ``1/(2T)`` keeps K above 0.78 T."""
    T = _check_T(T)
    return f3_cascade(T, p1, p1, 1.0 / (2 * T) if noise is None else noise)
