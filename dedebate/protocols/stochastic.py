"""Figure 1 / Theorem 6.2: stochastic-oracle debate, the Lean-normative protocol (spec DED 5).

**Protocol** (spec DED 5.1, Lean ``Debate/Protocol.lean``). Alice argues for output 1, Bob for 0,
Vera judges. From the empty prefix, for steps n = 0 .. T-1:

1. Alice states a real number p (her claim for ``pi = P[y_n = 1 | prefix]``);
2. Bob continues or aborts, seeing p but *not* the bit about to be drawn;
3. continue: the protocol draws ``y_n = 1[u < clamp01(p)]`` (a trusted Bernoulli(clamp01(p)) coin,
   or optionally the paper's two-party coin ``u = frac(z_A + z_B)``) and appends it;
   abort: the debate stops and its output is Vera's verdict on (prefix, p), once.

Without an abort the output is the last bit. Honest players are Lean's checkers (spec DED 5.1):
an estimate from N oracle samples compared with the claim by a **strict** ``|p - est| < tau``
(``true`` = continue / accept). Dishonest Alice may say any real p; Bob and Vera compare the raw p,
only the coin clamps it.

**Parameters.** :class:`LeanParams` ``(c, s, b, q, v)`` with its validator and the proven win
probabilities (spec DED 5.3); :func:`lean_defaults` (the default, spec DED 5.2) and
:func:`paper_constants` (spec DED 5.4). Both give a :class:`DebateConstants`: the sample counts
``N_A, N_B, N_V`` computed on the host in float64 (exact Python ints) and the thresholds
``tau_B, tau_V``. The counts enter jitted code as int32 *leaves* of the players (not as shapes),
so one compiled program vmaps over K and over sample-count scalings; they never become floats.

**Play** (:func:`play`): one debate, pure, a ``lax.scan`` over chunks of steps with a ``stopped``
mask (steps after an abort, and padding steps past T, are masked no-ops), vmappable over trials,
machines and parameters. Honest estimates are exact in distribution: the protocol draws
``count ~ Binomial(N, pi)`` for each role whose player asks for samples
(:mod:`dedebate.core.binomial`, memory independent of N), or N real Bernoulli calls in the named
``estimator="calls"`` mode (for black-box samplers; O(N) work, O(1) memory). Vera judges once, in
the iteration after the abort (the scan runs T + 1 iterations), from the stored abort state.
:func:`run_trials` is the fast host driver: it plays every lane without the binomial sampler's
rare exact fall-back loops and replays exactly the few lanes that needed one (equal to
``vmap(play)``).

**Decision mode** (``DebateSpec(bob_draw="decision")``, not the default): a checker Bob
(``continue_interval``, e.g. honest Bob) only uses his count to decide, so the protocol draws the
decision: abort with probability ``P[count outside his accepted interval]``, by one 32-bit draw
where Hoeffding certifies that probability below 2^-24, computing the binomial tails only on the
rare bits that need them, and by drawing his count as usual elsewhere (lies near his threshold).
Exact in distribution like the default, with other uniforms (so other per-key outcomes); faster
for honest Bobs (one BTRS draw per step, not two; `dedebate bench stochastic` measures it).

**Lazy mode** (``DebateSpec(bob_draw="lazy")``, not the default): for honest Alice (claim
``count / N_A``) against a checker Bob with the trusted coin, the coin is drawn first (it is
Bernoulli(pi), as ``E[count / N_A] = pi``) and Alice's count and Bob's decision only where
Hoeffding cannot certify that Bob continues: all but a 2^-24 share of steps at Lean's and the
paper's counts cost one 32-bit word. Exact in distribution (the law of coin, abort and Alice's
claim on an abort is unchanged); see :mod:`dedebate.protocols.stochastic_lazy`. Much faster than
the default mode, as almost every step costs one word (`dedebate bench stochastic` measures it).

**Randomness.** The trial key is split per role with ``fold_in``: Alice's and Bob's estimates, the
coin, and each player's own strategy randomness (adversaries: not query-metered). Each role draws
its uniforms per chunk of steps (``fold_in(role_key, chunk)``) and step t uses its own slot; Vera's
count comes from the unused tail of the estimate stream Alice no longer uses after the abort
(fresh uniforms: the stream is consumed up to stopping times). A trial's result depends only on
its key (batched = looped).

**Costs** (``outcome.costs``, measured, spec DED 5.3 "Query complexity"): ``alice_queries`` =
N_A per step Alice plays (0 for players that draw no samples), ``bob_queries`` likewise;
``verifier_queries`` is counted by the play loop where Vera's count is drawn (the N of that draw:
N_V once on an abort, so a check against Lean's N_V measures the protocol rather than restating
it); ``rounds`` = steps played.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.binomial import (
    DEFAULT_WINDOW,
    decide_outside,
    decision_gate,
    stream_binomial,
    stream_binomial_fast,
    stream_length,
    uniform_stream,
)
from dedebate.core.samples import hoeffding_samples
from dedebate.protocols.stochastic_lazy import play_lazy
from dedebate.protocols.stochastic_scan import (
    ROLE_ALICE,
    ROLE_ALICE_EST,
    ROLE_BOB,
    ROLE_BOB_EST,
    ROLE_COIN,
    Outcome,
    StepView,
    checker_accepts,
    scan_debate,
)

INT32_MAX = 2**31 - 1


# =================================================================================================
# Parameters (host side, float64)
# =================================================================================================
@dataclasses.dataclass(frozen=True)
class DebateConstants:
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

    def scaled(self, factor: float) -> DebateConstants:
        """The same thresholds with every sample count multiplied by ``factor`` (rounded up)."""
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"factor={factor!r}: the scale factor must be a positive number")
        n = [max(1, math.ceil(factor * x)) for x in (self.n_alice, self.n_bob, self.n_vera)]
        return dataclasses.replace(self, name=f"{self.name} x{factor:g}", n_alice=n[0],
                                   n_bob=n[1], n_vera=n[2])


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
            raise ValueError(f"(c, s, b)=({self.c}, {self.s}, {self.b}): Lean's Params need "
                             "0 < c < s < b")
        if not (0 < self.q <= self.v <= 1):
            raise ValueError(f"(q, v)=({self.q}, {self.v}): Lean's Params need 0 < q <= v <= 1")

    # -- sample counts (spec DED 5.2 "Derived quantities") ---------------------------------------
    @property
    def n_alice(self) -> int:
        return hoeffding_samples(self.c, self.q)

    @property
    def n_bob(self) -> int:
        return hoeffding_samples((self.b - self.s) / 2, self.q)

    @property
    def n_vera(self) -> int:
        return hoeffding_samples((self.s - self.c) / 2, self.v)

    @property
    def tau_bob(self) -> float:
        return (self.s + self.b) / 2

    @property
    def tau_vera(self) -> float:
        return (self.c + self.s) / 2

    # -- guarantees (spec DED 5.3) --------------------------------------------------------------
    def completeness(self, K: float, T: int, p1: float) -> float:
        """Lean ``completeness'``: honest Alice and Vera against any Bob win with probability
        ``>= (1 - v) (P_M(1) - K c - (1 - (1-q)^T))``."""
        return (1 - self.v) * (p1 - K * self.c - (1 - (1 - self.q) ** T))

    def soundness(self, K: float, T: int, p0: float) -> float:
        """Lean ``soundness'``: honest Bob and Vera against any Alice output 0 with probability
        ``>= (1 - v) (1-q)^T (P_M(0) - K b)``."""
        return (1 - self.v) * (1 - self.q) ** T * (p0 - K * self.b)

    def check(self, K: float, T: int, w: float = 2 / 3, d: float = 3 / 5) -> tuple[float, float]:
        """Validate Lean's ``Params`` inequalities for (K, T, w, d) and return the two guaranteed
        win probabilities at the majority w: ``(completeness, soundness)`` (P[out=1] when
        P_M(1) >= w, P[out=0] when P_M(0) >= w). Raises ``ValueError`` naming the failure."""
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

    def constants(self, K: float, T: int, name: str = "lean") -> DebateConstants:
        """The sample counts and thresholds these parameters give (K and T for provenance)."""
        counts = (self.n_alice, self.n_bob, self.n_vera)
        if max(counts) > INT32_MAX:
            raise ValueError(f"sample counts {counts}: exceed int32 (2^31 - 1); use smaller K")
        return DebateConstants(name=name, K=float(K), T=int(T), n_alice=counts[0],
                               n_bob=counts[1], n_vera=counts[2], tau_bob=self.tau_bob,
                               tau_vera=self.tau_vera, s=self.s, b=self.b)


def _check_KT(K, T):
    if not (isinstance(K, (int, float, np.integer, np.floating)) and K > 0 and math.isfinite(K)):
        raise ValueError(f"K={K!r}: the Lipschitz constant must be a positive number")
    if not (isinstance(T, (int, np.integer)) and T >= 1):
        raise ValueError(f"T={T!r}: the number of steps must be an integer >= 1")


def lean_defaults(K: float, T: int) -> LeanParams:
    """Lean's ``Params.defaults k t`` (spec DED 5.2): c = 1/(100K), s = 2/(100K), b = 5/(100K),
    q = 1/(100T), v = 1/100."""
    _check_KT(K, T)
    return LeanParams(c=1 / (100 * K), s=2 / (100 * K), b=5 / (100 * K), q=1 / (100 * T),
                      v=1 / 100)


def paper_constants(K: float, T: int) -> DebateConstants:
    """The paper's Figure 1 constants (spec DED 5.4, [SECONDARY], natural log): d = ceil(150K),
    R = ceil(192 d^2 ln(100T)) samples for Alice and Bob, r = ceil(192 d^2 ln 100) for Vera,
    Bob aborts iff |p - est| >= 1/(2d), Vera rejects iff |p - est| >= 1/(4d). The paper claims
    completeness 3/5 and soundness 2/5 (no Lean proof)."""
    _check_KT(K, T)
    d = math.ceil(150 * K)
    R = math.ceil(192 * d * d * math.log(100 * T))
    r = math.ceil(192 * d * d * math.log(100))
    if R > INT32_MAX:
        raise ValueError(f"R={R} (K={K}, T={T}): the paper's sample count exceeds int32")
    return DebateConstants(name="paper", K=float(K), T=int(T), n_alice=R, n_bob=R, n_vera=r,
                           tau_bob=1 / (2 * d), tau_vera=1 / (4 * d), s=3 / (8 * d),
                           b=3 / (4 * d))


# =================================================================================================
# What players see and implement
# =================================================================================================
class AlicePlayer(Protocol):
    """Alice: ``n_samples`` (int32, 0 = draws none) oracle samples per step, then ``claim``.

    ``samples`` (static) says whether the protocol must draw counts for her at all.
    ``claim(view, count, u)`` -> p (float32, any real); ``count`` ~ Binomial(n_samples, pi) at
    this prefix, ``u`` a fresh uniform of her own. ``coin_share(view, p, z)`` -> her share of the
    two-party coin (honest: ``z``, a fresh uniform).
    """

    samples: bool
    n_samples: jax.Array

    def claim(self, view: StepView, count: jax.Array, u: jax.Array) -> jax.Array: ...

    def coin_share(self, view: StepView, p: jax.Array, z: jax.Array) -> jax.Array: ...


class BobPlayer(Protocol):
    """Bob: like Alice; ``cont(view, p, count, u)`` -> True to continue, False to abort."""

    samples: bool
    n_samples: jax.Array

    def cont(self, view: StepView, p: jax.Array, count: jax.Array, u: jax.Array) -> jax.Array: ...

    def coin_share(self, view: StepView, p: jax.Array, z: jax.Array) -> jax.Array: ...


def two_party_coin(z_a: jax.Array, z_b: jax.Array) -> jax.Array:
    """The paper's coin by cross-examination (spec DED 5.4, steps 2b-2d): ``frac(z_A + z_B)``.
    Uniform on [0, 1) whenever one share is uniform and independent of the other."""
    return jnp.mod(jnp.asarray(z_a, jnp.float32) + jnp.asarray(z_b, jnp.float32), 1.0)


def checker_interval(p: jax.Array, n: jax.Array, tau: jax.Array):
    """The counts the checker accepts: ``(k_lo, k_hi, certified)`` with
    ``checker_accepts(p, k, n, tau)`` iff ``k_lo <= k <= k_hi`` (empty when ``k_lo > k_hi``).

    In float32, ``p - count/n`` is monotone in the count, so the accepted set is an interval; each
    end is found by evaluating the checker itself on five counts around ``n (p -+ tau)``.
    ``certified`` is false if the five counts did not bracket an end (not expected; callers
    then fall back to drawing the count)."""
    n = jnp.asarray(n, jnp.int32)
    p = jnp.asarray(p, jnp.float32)
    tau = jnp.asarray(tau, jnp.float32)
    nf = jnp.maximum(n, 1).astype(jnp.float32)
    offs = jnp.arange(-2, 3, dtype=jnp.int32)

    def around(x):
        g = jnp.floor(jnp.clip(x * nf, -4.0, nf + 4.0)).astype(jnp.int32)
        return jnp.clip(g + offs, 0, n)

    def diff(k):
        return p - k.astype(jnp.float32) / nf

    lo = around(p - tau)
    lo_ok = diff(lo) < tau  # false ... true
    k_lo = jnp.min(jnp.where(lo_ok, lo, n + 1))
    cert_lo = (~lo_ok[0] | (lo[0] == 0)) & (lo_ok[-1] | (lo[-1] == n))
    hi = around(p + tau)
    hi_ok = diff(hi) > -tau  # true ... false
    k_hi = jnp.max(jnp.where(hi_ok, hi, -1))
    cert_hi = (hi_ok[0] | (hi[0] == 0)) & (~hi_ok[-1] | (hi[-1] == n))
    return k_lo, k_hi, cert_lo & cert_hi


@struct.dataclass
class Vera:
    """The verifier: Lean's ``vera c s v``, the checker with ``N_V`` samples and ``tau_V``."""

    n_samples: jax.Array  # int32
    tau: jax.Array  # float32


def make_vera(constants: DebateConstants) -> Vera:
    return Vera(n_samples=jnp.int32(constants.n_vera), tau=jnp.float32(constants.tau_vera))


# =================================================================================================
# Play
# =================================================================================================
@dataclasses.dataclass(frozen=True)
class DebateSpec:
    """Static structure of a debate (hashable; a jit static argument).

    * ``T`` -- steps (must equal ``machine.T``);
    * ``chunk`` -- steps whose randomness is drawn at once (memory per trial ~ 12 * chunk floats);
    * ``window`` -- binomial candidates classified per draw (:mod:`dedebate.core.binomial`);
    * ``two_party_coin`` -- the paper's coin ``u = frac(z_A + z_B)`` instead of the trusted one;
    * ``estimator`` -- ``"binomial"`` (exact count draws, default) or ``"calls"`` (N real
      Bernoulli calls per estimate, in blocks of ``call_block``; for black-box samplers);
    * ``bob_draw`` -- ``"count"`` (default: Bob's count is drawn and shown to his ``cont``) or
      ``"decision"`` (for checker Bobs with ``continue_interval``, e.g. honest Bob: his decision
      is drawn directly, exact in distribution, see :func:`play`; other uniforms than "count")
      or ``"lazy"`` (honest Alice vs a checker Bob, trusted coin: the coin first, Alice's count
      and Bob's decision only where they can matter, see
      :mod:`dedebate.protocols.stochastic_lazy`; exact in distribution, one 32-bit word per step
      but for a ``2^-lazy_gate_log2`` share of the steps);
    * ``lazy_gate_log2`` -- G of the lazy mode, in [0, 24] (24: default; smaller values send
      more steps down the exact rare path, e.g. to test it).
    """

    T: int
    chunk: int = 64
    window: int = DEFAULT_WINDOW
    two_party_coin: bool = False
    estimator: str = "binomial"
    call_block: int = 1024
    bob_draw: str = "count"
    lazy_gate_log2: int = 24

    def __post_init__(self):
        if not (isinstance(self.T, int) and self.T >= 1):
            raise ValueError(f"T={self.T!r}: the number of steps must be an integer >= 1")
        if not (isinstance(self.chunk, int) and self.chunk >= 1):
            raise ValueError(f"chunk={self.chunk!r}: must be an integer >= 1")
        if not (isinstance(self.window, int) and 1 <= self.window <= 16):
            raise ValueError(f"window={self.window!r}: must be an integer in [1, 16]")
        if self.estimator not in ("binomial", "calls"):
            raise ValueError(f"estimator={self.estimator!r}: allowed are 'binomial' (exact "
                             "count draws) and 'calls' (N real Bernoulli calls)")
        if self.bob_draw not in ("count", "decision", "lazy"):
            raise ValueError(f"bob_draw={self.bob_draw!r}: allowed are 'count' (draw Bob's "
                             "count), 'decision' (draw a checker Bob's decision) and 'lazy' "
                             "(honest Alice vs a checker Bob: draw only what can matter)")
        if self.bob_draw in ("decision", "lazy") and self.estimator != "binomial":
            raise ValueError(f"bob_draw={self.bob_draw!r} needs estimator='binomial'")
        if self.bob_draw == "lazy" and self.two_party_coin:
            raise ValueError("bob_draw='lazy' needs the trusted coin (two_party_coin=False)")
        if not (isinstance(self.lazy_gate_log2, int) and 0 <= self.lazy_gate_log2 <= 24):
            raise ValueError(f"lazy_gate_log2={self.lazy_gate_log2!r}: must be an integer in "
                             "[0, 24]")
        if not (isinstance(self.call_block, int) and self.call_block >= 1):
            raise ValueError(f"call_block={self.call_block!r}: must be an integer >= 1")

    @property
    def steps_per_chunk(self) -> int:
        """Steps per chunk: at most ``chunk``, balanced so that the T + 1 iterations (T steps and
        Vera's) need little padding."""
        n = -(-(self.T + 1) // self.chunk)
        return -(-(self.T + 1) // n)


def debate_spec(T: int, **kw) -> DebateSpec:
    return DebateSpec(T=int(T), **kw)


def _calls_count(key: jax.Array, n: jax.Array, p: jax.Array, block: int) -> jax.Array:
    """``n`` real Bernoulli(p) calls counted in blocks of ``block`` (O(n) work, O(block) memory)."""
    nb = (n + block - 1) // block

    def body(i, acc):
        u = jax.random.uniform(jax.random.fold_in(key, i), (block,))
        valid = i * block + jnp.arange(block) < n
        return acc + jnp.sum(valid & (u < p)).astype(jnp.int32)

    return jax.lax.fori_loop(0, nb, body, jnp.int32(0))


def _slots(resolve: bool):
    """Exact counts for the estimate slots (leading axis of every argument): returns
    ``(counts, new pointers, unresolved)`` (``resolve=False``: the window classification only,
    see :func:`dedebate.core.binomial.stream_binomial_fast`)."""

    def draw(streams, ns, ps):
        if resolve:
            ks, st = stream_binomial(streams, ns, ps)
            return ks, st.ptr, jnp.bool_(False)
        ks, st, un = stream_binomial_fast(streams, ns, ps)
        return ks, st.ptr, un

    @jax.custom_batching.custom_vmap
    def draw_slots(streams, ns, ps):
        return jax.vmap(draw)(streams, ns, ps)

    @draw_slots.def_vmap
    def draw_slots_vmap(axis_size, in_batched, streams, ns, ps):
        # Flatten (batch, slot) into one lane axis: XLA on CPU vectorises along the minor axis,
        # and a minor slot axis of size 2 would run several times slower.
        def flat(x, batched):
            x = x if batched else jnp.broadcast_to(x, (axis_size,) + x.shape)
            return x.reshape((-1,) + x.shape[2:])

        streams = jax.tree.map(flat, streams, in_batched[0])
        ns, ps = flat(ns, in_batched[1]), flat(ps, in_batched[2])
        out = jax.vmap(draw)(streams, ns, ps)
        return tuple(x.reshape(axis_size, -1) for x in out), (True, True, True)

    return draw_slots


_DRAW_SLOTS = {True: _slots(True), False: _slots(False)}


def _where_tree(c, a, b):
    return jax.tree.map(lambda x, y: jnp.where(c, x, y), a, b)


def play(spec: DebateSpec, machine: Any, alice: AlicePlayer, bob: BobPlayer, vera: Vera,
         key: jax.Array) -> Outcome:
    """Play one debate on ``machine`` (spec DED 5.1); see the module docstring.

    ``alice`` and ``bob`` implement :class:`AlicePlayer` / :class:`BobPlayer`; ``vera`` carries
    N_V and tau_V. Every argument except ``spec`` is a pytree, so ``vmap`` works over trials
    (keys), machines, players (e.g. adversary parameters, sample counts) and Vera.
    """
    return _play(spec, machine, alice, bob, vera, key, True)[0]


def play_fast(spec: DebateSpec, machine: Any, alice: AlicePlayer, bob: BobPlayer, vera: Vera,
              key: jax.Array) -> tuple[Outcome, jax.Array]:
    """:func:`play` without the rare exact fall-back loops of the binomial draws: returns
    ``(outcome, unresolved)``; where ``unresolved`` is true the outcome is invalid and the trial
    must be replayed with :func:`play` (same key: the replay is the exact result). Everywhere
    else the outcome equals :func:`play`'s. :func:`run_trials` does this bookkeeping."""
    return _play(spec, machine, alice, bob, vera, key, False)


def _play(spec: DebateSpec, machine: Any, alice: AlicePlayer, bob: BobPlayer, vera: Vera,
          key: jax.Array, resolve: bool) -> tuple[Outcome, jax.Array]:
    """The debate (see :func:`play`).

    ``alice`` and ``bob`` implement :class:`AlicePlayer` / :class:`BobPlayer`; ``vera`` carries
    N_V and tau_V. Every argument except ``spec`` is a pytree, so ``vmap`` works over trials
    (keys), machines, players (e.g. adversary parameters, sample counts) and Vera.

    Vera judges in the iteration after the abort (so the scan runs T + 1 iterations), drawing her
    count in the estimate slot Alice no longer uses: one binomial draw site serves everyone.
    """
    if spec.bob_draw == "lazy":
        return play_lazy(spec, machine, alice, bob, vera, key, resolve)
    if machine.T != spec.T:
        raise ValueError(f"machine.T={machine.T} but spec.T={spec.T}: they must agree")
    T, C, W = spec.T, spec.steps_per_chunk, spec.window
    L = stream_length(C, W)
    role = [jax.random.fold_in(key, r) for r in range(6)]
    decide = spec.bob_draw == "decision" and bob.samples
    if decide and not hasattr(bob, "continue_interval"):
        raise ValueError(f"bob_draw='decision' needs a checker Bob with continue_interval "
                         f"(e.g. HonestBob), not {type(bob).__name__}")
    # Estimate slots: slot 0 = Alice's estimate (if she samples), then Vera's after an abort;
    # slot 1 = Bob's estimate (if he samples). In "decision" mode the fast path draws no count
    # for Bob, and the exact path uses his count only where the decision is not drawn directly.
    slot_roles = [ROLE_ALICE_EST] + ([ROLE_BOB_EST] if bob.samples and (resolve or not decide)
                                     else [])
    n_alice = jnp.asarray(alice.n_samples, jnp.int32) if alice.samples else jnp.int32(0)
    n_bob = jnp.asarray(bob.n_samples, jnp.int32) if bob.samples else jnp.int32(0)
    n_vera = jnp.asarray(vera.n_samples, jnp.int32)

    def chunk_body(carry, ci):
        ck = [jax.random.fold_in(k, ci) for k in role]
        coin = jax.random.uniform(ck[ROLE_COIN], (C,))
        ua = jax.random.uniform(ck[ROLE_ALICE], (C, 2))  # [claim randomness, coin share]
        ub = jax.random.uniform(ck[ROLE_BOB], (C, 2))
        if spec.estimator == "binomial":
            streams = [uniform_stream(ck[r], L, W) for r in slot_roles]
            stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *streams)
        if decide:  # Bob's decision: 32 bits per step (+ a uniform on the rare exact path)
            bob_bits = jax.random.bits(jax.random.fold_in(ck[ROLE_BOB_EST], 2), (C,), jnp.uint32)
            bob_u2 = jax.random.uniform(jax.random.fold_in(ck[ROLE_BOB_EST], 3), (C,))

        def step(c, j):
            (state, stopped, last, rounds, prev, ones, p_ab, pi_ab, t_ab, vera_due, vera_ok,
             vera_n, unres, ptrs) = c
            t = ci * C + j
            active = (t < T) & ~stopped
            ts = jnp.minimum(t, T - 1)
            pi = jnp.clip(machine.prob(state, ts), 0.0, 1.0).astype(jnp.float32)
            view = StepView(t=ts, pi=pi, prev_bit=prev, ones=ones, state=state, T=T)
            # ---- estimates: exact counts for the roles that sample (and Vera, when due) ----
            n0 = jnp.where(vera_due, n_vera, jnp.where(active, n_alice, 0))
            p0 = jnp.where(vera_due, pi_ab, pi)
            two = len(slot_roles) == 2
            ns = jnp.stack([n0] + ([jnp.where(active, n_bob, 0)] if two else []))
            ps = jnp.stack([p0] + ([pi] if two else []))
            if spec.estimator == "binomial":
                ks, ptrs, un = _DRAW_SLOTS[resolve](stacked.replace(ptr=ptrs), ns, ps)
                unres = unres | jnp.any(un)
            else:
                ks = jnp.stack([_calls_count(jax.random.fold_in(ck[r], j), ns[i], ps[i],
                                             spec.call_block) for i, r in enumerate(slot_roles)])
            count_a = ks[0]
            count_b = ks[1] if len(slot_roles) == 2 else jnp.int32(0)
            vera_n = vera_n + jnp.where(vera_due, ns[0], 0)  # the samples her draw used
            vera_ok = jnp.where(vera_due, checker_accepts(p_ab, count_a, vera.n_samples,
                                                          vera.tau), vera_ok)
            # ---- Alice claims, Bob continues or aborts, the coin ----
            p = jnp.asarray(alice.claim(view, count_a, ua[j, 0]), jnp.float32)
            if decide:
                cont, unres = _bob_decision(view, p, bob, n_bob, active, bob_bits[j], bob_u2[j],
                                            count_b, ub[j, 0], unres, resolve)
            else:
                cont = jnp.asarray(bob.cont(view, p, count_b, ub[j, 0]), bool)
            if spec.two_party_coin:
                za = alice.coin_share(view, p, ua[j, 1])
                zb = bob.coin_share(view, p, ub[j, 1])
                u = two_party_coin(za, zb)
            else:
                u = coin[j]
            bit = (u < jnp.clip(p, 0.0, 1.0)).astype(jnp.int32)
            go = active & cont
            abort = active & ~cont
            state = _where_tree(go, machine.advance(state, ts, bit), state)
            last = jnp.where(go, bit, last)
            prev = jnp.where(go, bit, prev)
            ones = ones + jnp.where(go, bit, 0)
            rounds = rounds + active.astype(jnp.int32)
            p_ab = jnp.where(abort, p, p_ab)
            pi_ab = jnp.where(abort, pi, pi_ab)
            t_ab = jnp.where(abort, t, t_ab)
            return (state, stopped | abort, last, rounds, prev, ones, p_ab, pi_ab, t_ab, abort,
                    vera_ok, vera_n, unres, ptrs), None

        ptr0 = jnp.zeros((len(slot_roles),), jnp.int32)
        carry, _ = jax.lax.scan(step, carry + (ptr0,), jnp.arange(C))
        return carry[:-1], None

    return scan_debate(chunk_body, machine, T, C, alice, bob, vera)


def _bob_decision(view, p, bob, n_bob, active, bits, u2, count, u, unres, resolve):
    """A checker Bob's decision drawn directly (``bob_draw="decision"``): he aborts iff his count
    X ~ Binomial(N_B, pi) falls outside the interval he accepts, an event of probability
    ``P_out``. Where Hoeffding certifies ``P_out <= 2^-24`` (the gate), one draw of 32 bits
    decides it (:func:`dedebate.core.binomial.decide_outside`), computing ``P_out`` only on the
    rare bits below 2^8; elsewhere (a lie near his threshold) his ``count``, drawn from his
    own stream as in "count" mode, decides. Both branches are exact in distribution, and the
    branch is a function of the state, so the decision is. Without ``resolve`` the rare and
    ungated steps only mark ``unres`` (``count`` is then not drawn)."""
    k_lo, k_hi, cert = bob.continue_interval(p)
    gate = cert & decision_gate(n_bob, view.pi, k_lo, k_hi)
    outside, rare = decide_outside(bits, u2, n_bob, view.pi, k_lo, k_hi, active & gate,
                                   resolve=resolve)
    if not resolve:
        return jnp.bool_(True), unres | (active & (~gate | rare))
    by_count = jnp.asarray(bob.cont(view, p, count, u), bool)
    return jnp.where(gate, ~outside, by_count), unres


def play_trials(spec: DebateSpec, machine: Any, alice: AlicePlayer, bob: BobPlayer, vera: Vera,
                keys: jax.Array) -> Outcome:
    """``vmap(play)`` over a batch of trial keys (the other arguments shared)."""
    return jax.vmap(play, in_axes=(None, None, None, None, None, 0))(
        spec, machine, alice, bob, vera, keys)


play_trials_jit = jax.jit(play_trials, static_argnums=0)


# XLA options of the replay programs (the exact play of the few unresolved lanes): they run
# briefly, so compiling them with fewer LLVM optimisations (about a fifth less compile time on a
# CPU) costs nothing; the values are the same.
REPLAY_COMPILE_OPTIONS = {"xla_backend_optimization_level": 1}


@functools.cache
def _batched(fast: bool, axes: tuple):
    fn = play_fast if fast else play
    return jax.jit(jax.vmap(fn, in_axes=(None,) + axes + (0,)), static_argnums=0,
                   compiler_options=None if fast else REPLAY_COMPILE_OPTIONS)


# One unbatched trial: the lazy mode's exact draws sit behind a lax.cond, which skips them only
# for an unbatched trial, so run_trials replays that mode's (rare) unresolved trials one by one.
_play_one = jax.jit(play, static_argnums=0, compiler_options=REPLAY_COMPILE_OPTIONS)


def _bucket(n: int) -> int:
    return max(8, 1 << (n - 1).bit_length())


def _take(tree, idx: np.ndarray):
    """Rows ``idx`` of every leaf, gathered on the host (no per-shape compilation); typed keys
    go through their raw key data."""

    def take(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            impl = jax.random.key_impl(x)
            return jax.random.wrap_key_data(np.asarray(jax.random.key_data(x))[idx], impl=impl)
        return np.asarray(x)[idx]

    return jax.tree.map(take, tree)


def run_trials(spec: DebateSpec, machine: Any, alice: AlicePlayer, bob: BobPlayer, vera: Vera,
               keys: jax.Array, axes: tuple = (None, None, None, None),
               max_lanes: int = 16384) -> Outcome:
    """Host driver: all trials of a batch, exact, fast.

    ``keys`` has one key per lane; ``axes[i]`` is 0 if ``(machine, alice, bob, vera)[i]`` is
    batched along its leading axis like the keys (e.g. a stacked zoo), None if shared. Runs
    :func:`play_fast` on every lane (in slices of at most ``max_lanes``, padded to a power of
    two, so one compiled program serves many batch sizes), then replays the rare unresolved
    lanes with the exact :func:`play` (compiled only when first needed; one lane at a time in
    the lazy mode, whose exact draws an unbatched trial skips on one-word steps) and merges: the
    result equals ``vmap(play)``.
    """
    axes = tuple(axes)
    if len(axes) != 4 or any(a not in (0, None) for a in axes):
        raise ValueError(f"axes={axes!r}: need four entries, each 0 (batched) or None (shared)")
    args = (machine, alice, bob, vera)
    n = int(keys.shape[0])
    width = min(_bucket(n), max_lanes)  # few distinct shapes: few compilations
    outs, flags = [], []
    for start in range(0, n, width):
        idx = np.arange(start, start + width) % n  # pad the last slice with repeats
        sl = [_take(a, idx) if ax == 0 else a for a, ax in zip(args, axes)]
        out, un = _batched(True, axes)(spec, *sl, _take(keys, idx))
        stop = min(width, n - start)
        outs.append(jax.tree.map(lambda x, stop=stop: np.asarray(x)[:stop], out))
        flags.append(np.asarray(un)[:stop])
    out = jax.tree.map(lambda *xs: np.concatenate(xs), *outs)
    bad = np.nonzero(np.concatenate(flags))[0]
    if spec.bob_draw == "lazy":
        for i in bad:
            sl = [_take(a, i) if ax == 0 else a for a, ax in zip(args, axes)]
            exact = _play_one(spec, *sl, _take(keys, i))
            out = jax.tree.map(lambda o, e, i=i: _set_rows(o, np.array([i]), np.asarray(e)[None]),
                               out, exact)
        bad = bad[:0]
    for start in range(0, bad.size, width):
        chunk = bad[start:start + width]
        idx = np.resize(chunk, _bucket(chunk.size))
        sl = [_take(a, idx) if ax == 0 else a for a, ax in zip(args, axes)]
        exact = _batched(False, axes)(spec, *sl, _take(keys, idx))
        out = jax.tree.map(lambda o, e, rows=chunk: _set_rows(o, rows, np.asarray(e)[:rows.size]),
                           out, exact)
    return jax.tree.map(jnp.asarray, out)


def _set_rows(o: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    o = o.copy()
    o[rows] = values
    return o


def trial_keys(key: jax.Array, n: int, offset: int = 0) -> jax.Array:
    """Keys of trials ``offset .. offset + n - 1``: ``fold_in(key, i)``, so a trial's key does not
    depend on how many trials ran beside it."""
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(offset + jnp.arange(n))
