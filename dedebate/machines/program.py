"""Oracle machines as pure data: step programs and the prefix model (spec DED 3.1, 3.2).

Every machine implements the scan-friendly sequential-sampler interface :class:`Machine`, which
is all the stochastic protocol (spec DED 5) and the samplers here need. :class:`StepProgram` is
the general paper-model machine: a fixed dependency table over the tape ``[x, y]``, a kind per
step (DET, ORACLE, COIN) and a truth table per DET step; its state is the whole tape. Fixtures
with structure (:mod:`dedebate.machines.fixtures`) implement the same interface with a small
state and state an equivalent :class:`StepProgram` for cross-checking. The samplers draw
transcripts step by step (``y_t = 1[u_t < p_t]``) and compute their exact probabilities.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.machines.oracles import AffineMeanOracle, Oracle, PositionOracle
from dedebate.programs import jit

DET, ORACLE, COIN = 0, 1, 2
KIND_NAMES = {DET: "DET", ORACLE: "ORACLE", COIN: "COIN"}
MAX_RULE_BITS = 12


class Machine(Protocol):
    """The sequential-sampler interface every machine implements.

    * ``machine.T`` -- the number of steps (a static int); the output is the last bit ``y[T-1]``;
    * ``machine.init_state()`` -- the state before step 0 (a pytree of fixed shape);
    * ``machine.prob(state, t)`` -- ``p_t = P[y_t = 1 | y_<t]`` as a float32 scalar in [0, 1];
    * ``machine.advance(state, t, bit)`` -- the state after writing ``y_t = bit``;
    * ``machine.bits(state)`` -- the transcript ``y`` (int8[T]) written so far (zeros beyond).
    """

    T: int

    def init_state(self) -> Any:
        """The state before step 0 (the empty prefix).

        Returns:
            The initial state pytree (of fixed shape).
        """

    def prob(self, state: Any, t: jax.Array) -> jax.Array:
        """The step probability ``p_t = P[y_t = 1 | y_<t]``.

        Args:
            state: the state before step t.
            t: int32 step index.

        Returns:
            float32 scalar in ``[0, 1]``.
        """

    def advance(self, state: Any, t: jax.Array, bit: jax.Array) -> Any:
        """The state after writing ``y_t = bit``.

        Args:
            state: the state before step t.
            t: int32 step index.
            bit: the bit written, 0 or 1.

        Returns:
            The new state (same structure).
        """

    def bits(self, state: Any) -> jax.Array:
        """The transcript written so far.

        Args:
            state: the current state.

        Returns:
            int8 ``[T]``, zeros beyond the steps written.
        """


@struct.dataclass
class StepProgram:
    """A T-step oblivious oracle program (spec DED 3.1, "engineering model for JAX").

    Tape positions ``0..n-1`` hold the input x; position ``n + t`` holds step t's bit y_t.

    * ``kind[t]`` in {DET, ORACLE, COIN};
    * ``deps[t, :L]`` with ``dep_mask[t, :L]``: the relevant index set I(t), fixed in advance and
      pointing only at inputs or earlier steps, so a verifier can recompute it from t;
    * DET: ``y_t = rule[t, code(y_{deps[t, :R]})]`` (little-endian code of the first R deps);
    * ORACLE: ``y_t ~ Bernoulli(oracle.prob(y_{deps[t]}, dep_mask[t], t))`` (a fixed bit when the
      oracle is deterministic); the query string z_t is the masked dependency bits;
    * COIN: ``y_t ~ Bernoulli(1/2)``.

    Build with :func:`make_step_program`, which validates everything on the host.
    """

    kind: jax.Array  # int8[T]
    deps: jax.Array  # int32[T, L]
    dep_mask: jax.Array  # bool[T, L]
    rule: jax.Array  # int8[T, 2^R]
    x: jax.Array  # int8[n]
    oracle: Oracle
    n_inputs: int = struct.field(pytree_node=False)
    T: int = struct.field(pytree_node=False)
    L: int = struct.field(pytree_node=False)
    R: int = struct.field(pytree_node=False)

    # -- sequential-sampler interface -------------------------------------------------------------
    def init_state(self) -> jax.Array:
        """The tape before step 0: the input x followed by T zeros."""
        return jnp.concatenate([self.x.astype(jnp.int8), jnp.zeros((self.T,), jnp.int8)])

    def relevant_bits(self, tape: jax.Array, t: jax.Array) -> jax.Array:
        """The bits ``a_{I(t)}`` read from ``tape`` (masked slots read as 0)."""
        return jnp.where(self.dep_mask[t], tape[self.deps[t]], 0).astype(jnp.int8)

    def local_prob(self, tape: jax.Array, t: jax.Array) -> jax.Array:
        """``P[y_t = 1 | y_{I(t)} = tape_{I(t)}]`` on any tape (honest or claimed).

        float32: the rule's bit for DET, 1/2 for COIN, the oracle's ``pi`` for ORACLE.
        """
        rel = self.relevant_bits(tape, t)
        weights = jnp.left_shift(jnp.int32(1), jnp.arange(self.R, dtype=jnp.int32))
        code = jnp.sum(rel[: self.R].astype(jnp.int32) * weights)
        det = self.rule[t, code].astype(jnp.float32)
        orc = self.oracle.prob(rel, self.dep_mask[t], t)
        kind = self.kind[t]
        return jnp.where(kind == DET, det, jnp.where(kind == ORACLE, orc, 0.5)).astype(jnp.float32)

    def prob(self, tape: jax.Array, t: jax.Array) -> jax.Array:
        """The step probability ``p_t = P[y_t = 1 | y_<t]``."""
        return self.local_prob(tape, t)

    def advance(self, tape: jax.Array, t: jax.Array, bit: jax.Array) -> jax.Array:
        """The state after writing ``y_t = bit``."""
        return tape.at[self.n_inputs + t].set(bit.astype(jnp.int8))

    def bits(self, tape: jax.Array) -> jax.Array:
        """The transcript written so far."""
        return tape[self.n_inputs :]


def make_step_program(
    kind,
    deps,
    oracle: Oracle,
    rule=None,
    x=None,
    rule_bits: int | None = None,
) -> StepProgram:
    """Validate and build a :class:`StepProgram` on the host (padded to ``L`` dependency slots).

    ``deps``: T ragged index lists into the tape ``[x, y]``; step t may only read inputs (``< n``)
    or earlier steps (``n .. n + t - 1``). ``rule``: for DET steps, T truth tables of length
    ``2^len(deps[t])`` (None for other steps); ``rule_bits``: their stored width R (default: the
    widest).
    """
    kind = np.asarray(kind, dtype=np.int64)
    if kind.ndim != 1 or kind.size == 0:
        raise ValueError(f"kind has shape {kind.shape}: a program needs a non-empty 1-D kind list")
    bad = ~np.isin(kind, [DET, ORACLE, COIN])
    if bad.any():
        t = int(np.argmax(bad))
        raise ValueError(f"kind[{t}]={kind[t]}: allowed kinds are DET=0, ORACLE=1, COIN=2")
    T = int(kind.size)
    x = np.zeros((0,), np.int8) if x is None else np.asarray(x)
    if x.ndim != 1 or not np.isin(x, [0, 1]).all():
        raise ValueError("x: the input must be a 1-D sequence of bits (0 or 1)")
    n = int(x.size)
    if len(deps) != T:
        raise ValueError(f"deps has {len(deps)} rows: it needs one index list per step (T={T})")
    L = max(1, max((len(d) for d in deps), default=1))
    det_lens = [len(deps[t]) for t in range(T) if kind[t] == DET]
    R = int(rule_bits if rule_bits is not None else max(det_lens, default=0))
    if R < max(det_lens, default=0):
        raise ValueError(
            f"rule_bits={rule_bits!r}: a DET step reads {max(det_lens)} bits; the stored width "
            "must be at least that"
        )
    if R > MAX_RULE_BITS:
        raise ValueError(
            f"a DET step reads {R} bits: truth tables allow at most {MAX_RULE_BITS} dependencies"
        )
    deps_arr = np.zeros((T, L), np.int32)
    mask = np.zeros((T, L), bool)
    for t, d in enumerate(deps):
        d = list(d)
        for j, idx in enumerate(d):
            if not (0 <= idx < n + t):
                raise ValueError(
                    f"deps[{t}][{j}]={idx}: step {t} may read only inputs 0..{n - 1} or earlier "
                    f"steps {n}..{n + t - 1} (the dependency table must be fixed and causal)"
                )
        deps_arr[t, : len(d)] = d
        mask[t, : len(d)] = True
    table = np.zeros((T, 2**R), np.int8)
    for t in range(T):
        if kind[t] != DET:
            continue
        if rule is None or rule[t] is None:
            raise ValueError(f"rule[{t}] is missing: DET step {t} needs a truth table")
        r = np.asarray(rule[t])
        width = 2 ** len(deps[t])
        if r.shape != (width,) or not np.isin(r, [0, 1]).all():
            raise ValueError(
                f"rule[{t}] has shape {r.shape}: DET step {t} reads {len(deps[t])} bits and needs "
                f"a 0/1 table of length {width}"
            )
        # Extend to 2^R entries: higher (unused) code bits are always 0, so tile.
        table[t] = np.tile(r, 2**R // width)
    per_step = {PositionOracle: ("probs",), AffineMeanOracle: ("base", "weight")}
    for field in per_step.get(type(oracle), ()):
        shape = np.shape(getattr(oracle, field))
        if shape != (T,):  # a shorter table would read its last entry at the later steps
            raise ValueError(
                f"oracle.{field} has shape {shape}: a per-step oracle of T={T} steps needs ({T},)"
            )
    return StepProgram(
        kind=jnp.asarray(kind, jnp.int8),
        deps=jnp.asarray(deps_arr),
        dep_mask=jnp.asarray(mask),
        rule=jnp.asarray(table),
        x=jnp.asarray(x, jnp.int8),
        oracle=oracle,
        n_inputs=n,
        T=T,
        L=L,
        R=R,
    )


# -- sampling --------------------------------------------------------------------------------------
def step_uniforms(key: jax.Array, T: int) -> jax.Array:
    """The uniforms ``u_t = uniform(fold_in(key, t))`` a transcript drawn with ``key`` uses.

    Step t's randomness does not depend on T.
    """
    return jax.vmap(lambda t: jax.random.uniform(jax.random.fold_in(key, t)))(jnp.arange(T))


def transcript_from_uniforms(machine: Machine, u: jax.Array) -> jax.Array:
    """The transcript with ``y_t = 1[u_t < p_t]``, by a ``lax.scan`` over steps.

    With ``u_t`` i.i.d. uniform on [0, 1) this is exactly a draw from M (``u < p`` is
    Bernoulli(clamp01(p)), Lean's clamp).
    """

    def step(state, tu):
        t, ut = tu
        bit = (ut < machine.prob(state, t)).astype(jnp.int8)
        return machine.advance(state, t, bit), None

    state, _ = jax.lax.scan(step, machine.init_state(), (jnp.arange(machine.T), u))
    return machine.bits(state)


def sample_transcript(machine: Machine, key: jax.Array) -> jax.Array:
    """Draw one transcript ``y ~ M`` (int8 ``[T]``) by a ``lax.scan`` over steps.

    Step t uses ``u_t`` from ``jax.random.fold_in(key, t)`` (:func:`step_uniforms`) and sets
    ``y_t = u_t < p_t``, so the same key gives the same transcript under vmap and in a loop. Equal
    to ``transcript_from_uniforms(machine, step_uniforms(key, T))``, which compiles faster when many
    machine classes share one batch of uniforms.
    """

    def step(state, t):
        p = machine.prob(state, t)
        u = jax.random.uniform(jax.random.fold_in(key, t))
        bit = (u < p).astype(jnp.int8)
        return machine.advance(state, t, bit), None

    state, _ = jax.lax.scan(step, machine.init_state(), jnp.arange(machine.T))
    return machine.bits(state)


MC_CHUNK = 50_000
"""Transcripts per chunk of :func:`count_ones`; fixed, since each chunk draws from its own key."""


def count_ones(machine: Machine, key: jax.Array, trials: int) -> jax.Array:
    """int32: the transcripts whose last bit is 1 among ``trials`` (static) drawn from ``machine``.

    Chunk i of :data:`MC_CHUNK` transcripts uses the uniforms of ``split(fold_in(key, i), chunk)``
    (:func:`step_uniforms`, :func:`transcript_from_uniforms`); the full chunks run in a
    ``fori_loop``, so memory is one chunk's whatever ``trials`` is. Pure and vmappable.
    """

    def ones(k, n):
        u = jax.vmap(step_uniforms, in_axes=(0, None))(jax.random.split(k, n), machine.T)
        ys = jax.vmap(transcript_from_uniforms, in_axes=(None, 0))(machine, u)
        return jnp.sum(ys[:, -1].astype(jnp.int32))

    full, rest = divmod(trials, MC_CHUNK)
    total = jnp.int32(0)
    if full:
        total = jax.lax.fori_loop(
            0, full, lambda i, acc: acc + ones(jax.random.fold_in(key, i), MC_CHUNK), total
        )
    if rest:
        total = total + ones(jax.random.fold_in(key, full), rest)
    return total


def sample_transcripts(machine: Machine, keys: jax.Array) -> jax.Array:
    """Vmapped :func:`sample_transcript`."""
    return jax.vmap(sample_transcript, in_axes=(None, 0))(machine, keys)


def transcript_log_prob(machine: Machine, y: jax.Array) -> jax.Array:
    """``log P_M[y]`` of a complete transcript."""

    def step(carry, t):
        state, logp = carry
        p = machine.prob(state, t)
        bit = y[t]
        q = jnp.where(bit == 1, p, 1.0 - p)
        return (machine.advance(state, t, bit), logp + jnp.log(q)), None

    (_, logp), _ = jax.lax.scan(
        step, (machine.init_state(), jnp.float32(0.0)), jnp.arange(machine.T)
    )
    return logp


MAX_ENUM_T = 20


def exact_output_prob(machine: Machine) -> jax.Array:
    """Exact ``P_M(1) = P[y_{T-1} = 1]`` by enumerating all 2^T transcripts (spec DED 9).

    The sum runs over transcripts whose last bit is 1, each weighted by the product of its step
    probabilities; exact up to float32 rounding; allowed for ``T <= 20``.
    """
    if machine.T > MAX_ENUM_T:
        raise ValueError(f"T={machine.T}: exact enumeration is limited to T <= {MAX_ENUM_T}")
    return _exact_output_prob(machine)


@jit
def _exact_output_prob(machine: Machine) -> jax.Array:
    T = machine.T
    codes = jnp.arange(2 ** (T - 1), dtype=jnp.int32)
    prefixes = ((codes[:, None] >> jnp.arange(T - 1, dtype=jnp.int32)[None, :]) & 1).astype(
        jnp.int8
    )
    ys = jnp.concatenate([prefixes, jnp.ones((codes.size, 1), jnp.int8)], axis=1)
    logp = jax.vmap(transcript_log_prob, in_axes=(None, 0))(machine, ys)
    return jnp.sum(jnp.exp(logp))
