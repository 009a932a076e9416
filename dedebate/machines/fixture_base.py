"""What a fixture is: a machine with a proven Lipschitz constant K and a known P_M(1) (spec DED 9).

:class:`Fixture` bundles the machine with its name, K, closed-form P_M(1) and the argument for K;
:class:`SumState` is the state of the machines that keep a running sum of their bits.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from flax import struct

from dedebate.machines.program import StepProgram


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


@struct.dataclass
class SumState:
    """Transcript so far plus a running (weighted) sum of the bits that matter."""

    bits: jax.Array  # int8[T]
    total: jax.Array  # int32 scalar


def _check_T(T: int, lo: int = 2) -> int:
    if not isinstance(T, (int, np.integer)) or T < lo:
        raise ValueError(f"T={T!r}: a fixture needs an integer number of steps T >= {lo}")
    return int(T)
