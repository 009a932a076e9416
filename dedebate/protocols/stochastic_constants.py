"""Parameters of the stochastic-oracle debate (spec DED 5.1-5.4), on the host in float64.

:class:`LeanParams` ``(c, s, b, q, v)`` validates the protocol's inequalities and gives the
proven win probabilities (spec DED 5.3); :func:`lean_defaults` (spec DED 5.2) and
:func:`paper_constants` (spec DED 5.4) build a :class:`DebateParams`: the sample counts
``N_A, N_B, N_V`` as exact Python ints and the thresholds ``tau_B, tau_V``. The counts enter
jitted code as int32 leaves of the players (not as shapes), so one compiled program vmaps over K
and over sample-count scalings.
"""

from __future__ import annotations

import dataclasses
import fractions
import math

import numpy as np

from dedebate.core.samples import hoeffding_samples

INT32_MAX = 2**31 - 1
MAX_COUNT = 2**30 - 1  # the largest count the exact checker decides (core/dyadic.checker_bounds)


@dataclasses.dataclass(frozen=True)
class DebateParams:
    """What one debate needs: sample counts (exact ints) and thresholds, with provenance.

    ``n_alice, n_bob, n_vera``: oracle samples per honest estimate; ``tau_bob``: honest Bob
    continues iff ``|p - est| < tau_bob``; ``tau_vera``: Vera accepts iff ``|p - est| < tau_vera``.
    """

    name: str
    K: float
    T: int
    n_alice: int
    n_bob: int
    n_vera: int
    tau_bob: float
    tau_vera: float
    s: float  # middle threshold (Lean's s; paper: 3/(8d)), used to size adversaries' lies
    b: float  # must-abort threshold (Lean's b; paper: 3/(4d))

    def __post_init__(self):
        for name in ("n_alice", "n_bob", "n_vera"):
            n = getattr(self, name)
            if not 1 <= n <= MAX_COUNT:
                raise ValueError(f"{name}={n}: a sample count must be in [1, 2^30 - 1]")

    def scaled(self, factor: float) -> DebateParams:
        """Same thresholds, counts x ``factor`` (rounded up, >= 1), named ``<name> x<factor>``."""
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"factor={factor!r}: the scale factor must be a positive number")
        n = [max(1, math.ceil(factor * x)) for x in (self.n_alice, self.n_bob, self.n_vera)]
        return dataclasses.replace(
            self, name=f"{self.name} x{factor:g}", n_alice=n[0], n_bob=n[1], n_vera=n[2]
        )


@dataclasses.dataclass(frozen=True)
class LeanParams:
    """Lean's ``Params`` numbers (spec DED 5.1): c (Alice's accuracy), s (middle threshold), b
    (Bob's must-abort threshold), q (Alice's and Bob's per-step failure), v (Vera's failure).

    Construction checks ``0 < c < s < b`` and ``0 < q <= v <= 1``; :meth:`check` adds the
    inequalities that involve K, T and the majority w, and :meth:`completeness` /
    :meth:`soundness` are the proven win probabilities of spec DED 5.3.
    """

    c: float
    s: float
    b: float
    q: float
    v: float

    def __post_init__(self):
        for name in ("c", "s", "b", "q", "v"):
            x = getattr(self, name)
            if not isinstance(x, (int, float)) or not math.isfinite(x):
                raise ValueError(f"{name}={x!r}: must be a finite number")
        if not (0 < self.c < self.s < self.b):
            raise ValueError(
                f"(c, s, b)=({self.c}, {self.s}, {self.b}): Lean's Params need 0 < c < s < b"
            )
        if not (0 < self.q <= self.v <= 1):
            raise ValueError(f"(q, v)=({self.q}, {self.v}): Lean's Params need 0 < q <= v <= 1")

    # -- sample counts (spec DED 5.2 "Derived quantities") ---------------------------------------
    @property
    def n_alice(self) -> int:
        """Alice's samples: ``hoeffding_samples(c, q)``."""
        return hoeffding_samples(self.c, self.q)

    @property
    def n_bob(self) -> int:
        """Bob's samples: ``hoeffding_samples((b - s) / 2, q)``."""
        return hoeffding_samples((self.b - self.s) / 2, self.q)

    @property
    def n_vera(self) -> int:
        """Vera's samples: ``hoeffding_samples((s - c) / 2, v)``."""
        return hoeffding_samples((self.s - self.c) / 2, self.v)

    @property
    def tau_bob(self) -> float:
        """Honest Bob's ``tau_B = (s + b) / 2``: he continues iff ``|p - est| < tau_B``."""
        return (self.s + self.b) / 2

    @property
    def tau_vera(self) -> float:
        """Vera's threshold ``tau_V = (c + s) / 2``: she accepts iff ``|p - est| < tau_V``."""
        return (self.c + self.s) / 2

    # -- guarantees (spec DED 5.3) --------------------------------------------------------------
    def completeness(self, K: float, T: int, p1: float) -> float:
        """Lean ``completeness'``: honest Alice and Vera win w.p. >=
        ``(1 - v) (p1 - K c - (1 - (1-q)^T))``.
        """
        return (1 - self.v) * (p1 - K * self.c - (1 - (1 - self.q) ** T))

    def soundness(self, K: float, T: int, p0: float) -> float:
        """Lean ``soundness'``: honest Bob and Vera output 0 w.p. >=
        ``(1 - v) (1-q)^T (p0 - K b)``.
        """
        return (1 - self.v) * (1 - self.q) ** T * (p0 - K * self.b)

    def check(self, K: float, T: int, w: float = 2 / 3, d: float = 3 / 5) -> tuple[float, float]:
        """``(completeness, soundness)`` once Lean's ``Params`` inequalities hold (spec DED 5.3).

        The guaranteed P[out=1] when P_M(1) >= w and P[out=0] when P_M(0) >= w, for win probability
        d; a failing inequality raises a ValueError naming it.
        """
        if not (K > 0 and math.isfinite(K)):
            raise ValueError(f"K={K!r}: the Lipschitz constant must be a positive number")
        if not (isinstance(T, (int, np.integer)) and T >= 1):
            raise ValueError(f"T={T!r}: the number of steps must be an integer >= 1")
        if not (0 < w <= 1):
            raise ValueError(f"w={w!r}: the majority must lie in (0, 1]")
        if not K * self.b <= w:
            raise ValueError(f"K*b={K * self.b:g} > w={w:g}: Lean's Params need k*b <= w")
        comp_lin = (1 - self.v) * (w - K * self.c - self.q * T)
        sound_lin = (1 - self.v) * (1 - self.q * T) * (w - K * self.b)
        if not d <= comp_lin:
            raise ValueError(f"d={d:g} > (1-v)(w - K c - q T)={comp_lin:g}: completeness fails")
        if not d <= sound_lin:
            raise ValueError(f"d={d:g} > (1-v)(1 - q T)(w - K b)={sound_lin:g}: soundness fails")
        return self.completeness(K, T, w), self.soundness(K, T, w)

    def constants(self, K: float, T: int, name: str = "lean") -> DebateParams:
        """The sample counts and thresholds these parameters give."""
        counts = (self.n_alice, self.n_bob, self.n_vera)
        if max(counts) > MAX_COUNT:
            raise ValueError(f"sample counts {counts}: exceed 2^30 - 1; use smaller K")
        return DebateParams(
            name=name,
            K=float(K),
            T=int(T),
            n_alice=counts[0],
            n_bob=counts[1],
            n_vera=counts[2],
            tau_bob=self.tau_bob,
            tau_vera=self.tau_vera,
            s=self.s,
            b=self.b,
        )


def _check_KT(K, T):
    if not (isinstance(K, (int, float, np.integer, np.floating)) and K > 0 and math.isfinite(K)):
        raise ValueError(f"K={K!r}: the Lipschitz constant must be a positive number")
    if not (isinstance(T, (int, np.integer)) and T >= 1):
        raise ValueError(f"T={T!r}: the number of steps must be an integer >= 1")


def lean_defaults(K: float, T: int) -> LeanParams:
    """Lean's ``Params.defaults k t`` (spec DED 5.2).

    c, s, b = 1, 2, 5 / (100K); q = 1/(100T); v = 1/100.
    """
    _check_KT(K, T)
    return LeanParams(c=1 / (100 * K), s=2 / (100 * K), b=5 / (100 * K), q=1 / (100 * T), v=1 / 100)


def paper_constants(K: float, T: int) -> DebateParams:
    """The paper's Figure 1 constants (spec DED 5.4, [SECONDARY], natural log), named ``"paper"``.

    d = ceil(150K), R = ceil(192 d^2 ln(100T)) samples for Alice and Bob, r = ceil(192 d^2 ln 100)
    for Vera, Bob aborts iff |p - est| >= 1/(2d), Vera rejects iff |p - est| >= 1/(4d). The paper
    claims completeness 3/5 and soundness 2/5 (no Lean proof).
    """
    _check_KT(K, T)
    # d = ceil(150 K) for K as written: 150 x 0.14 is 21 (the float product, 21.000000000000004,
    # would round up to 22)
    d = math.ceil(150 * fractions.Fraction(K).limit_denominator(10**9))
    R = math.ceil(192 * d * d * math.log(100 * T))
    r = math.ceil(192 * d * d * math.log(100))
    if R > MAX_COUNT:
        raise ValueError(f"R={R} (K={K}, T={T}): the paper's sample count exceeds 2^30 - 1")
    return DebateParams(
        name="paper",
        K=float(K),
        T=int(T),
        n_alice=R,
        n_bob=R,
        n_vera=r,
        tau_bob=1 / (2 * d),
        tau_vera=1 / (4 * d),
        s=3 / (8 * d),
        b=3 / (4 * d),
    )
