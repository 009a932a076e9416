"""Deterministic step programs and their configuration view (spec DED 3.1, 6, 7).

Everything the deterministic protocols (Figures 3 and 4) need from a machine: a host check that
``y_t`` is a function of ``y_{I(t)}`` (no COIN step, a 0/1 oracle), the local rule
``g_t(a_{I(t)})`` on any tape, one simulation of M (optionally with flipped answers, how a liar
builds a locally consistent transcript from a wrong oracle answer), the local-consistency bits of
a claimed transcript, numpy reference versions of these, and :class:`ConfigMachine`, the same
program seen as S-bit configurations with a one-step transition making at most one oracle query.
:func:`random_programs` builds populations of random deterministic programs for the experiments.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.machines.oracles import HashedOracle, PositionOracle, TableOracle
from dedebate.machines.program import COIN, DET, MAX_RULE_BITS, ORACLE, StepProgram


def clog2(k: int) -> int:
    """``ceil(log2 k)`` for an integer ``k >= 1``: the bits of an index in ``[0, k)``."""
    return max(0, int(k - 1).bit_length())


# -- host-side validation --------------------------------------------------------------------------
def check_deterministic(program: StepProgram) -> None:
    """Raise ``ValueError`` unless every step of ``program`` is a function of its relevant bits.

    Spec DED 6-7 need a deterministic oracle and no fair coins: COIN steps are rejected, and the
    oracle must be a :class:`TableOracle` / :class:`PositionOracle` with 0/1 entries or a
    :class:`HashedOracle` built with ``deterministic=True``. Works on batched programs too.
    """
    kind = np.asarray(program.kind)
    if (kind == COIN).any():
        t = int(np.argwhere(kind == COIN)[0][-1])
        raise ValueError(
            f"kind[{t}]=COIN: deterministic debate (spec DED 6-7) allows only DET and ORACLE steps"
        )
    oracle = program.oracle
    if isinstance(oracle, (TableOracle, PositionOracle)):
        vals = np.asarray(oracle.table if isinstance(oracle, TableOracle) else oracle.probs)
        bad = ~np.isin(vals, [0.0, 1.0])
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"oracle entry {idx}={float(vals[idx])!r}: a deterministic oracle answers 0 or 1"
            )
    elif isinstance(oracle, HashedOracle):
        if not oracle.deterministic:
            raise ValueError(
                "oracle=HashedOracle(deterministic=False): deterministic debate "
                "needs hashed_oracle(..., deterministic=True)"
            )
    else:
        raise TypeError(
            f"oracle={type(oracle).__name__}: deterministic debate supports "
            "TableOracle/PositionOracle with 0/1 entries or a deterministic "
            "HashedOracle"
        )


# -- the machine's local rule and its one honest run -----------------------------------------------
def local_bit(program: StepProgram, tape: jax.Array, t: jax.Array) -> jax.Array:
    """``g_t(tape_{I(t)})``: the bit step t's rule writes given the tape (spec DED 6)."""
    return (program.local_prob(tape, t) >= 0.5).astype(jnp.int8)


def run_program(program: StepProgram, flip: jax.Array | None = None) -> jax.Array:
    """Simulate M once (``lax.scan`` over T steps): the int8 transcript ``[T]``.

    With ``flip`` (bool ``[T]``; None: the honest run y) step t writes ``g_t(...) XOR flip[t]`` and
    later steps read the flipped bit: the transcript of the machine whose answers at the flipped
    steps were wrong, which is locally consistent everywhere except at those steps.
    """
    n, T = program.n_inputs, program.T
    flip = jnp.zeros((T,), jnp.int8) if flip is None else flip.astype(jnp.int8)

    def step(tape, t):
        bit = local_bit(program, tape, t) ^ flip[t]
        return tape.at[n + t].set(bit), None

    tape, _ = jax.lax.scan(step, program.init_state(), jnp.arange(T))
    return tape[n:]


def consistency(program: StepProgram, a: jax.Array) -> jax.Array:
    """Local consistency of a claimed transcript ``a [T]``: bool ``a_t == g_t(a_{I(t)})`` per t."""
    tape = jnp.concatenate([program.x.astype(jnp.int8), a.astype(jnp.int8)])
    ts = jnp.arange(program.T)
    return jax.vmap(lambda t: local_bit(program, tape, t))(ts) == a.astype(jnp.int8)


def _numpy_program(program: StepProgram):
    """The program's arrays flattened to one batch axis, for the numpy reference below."""
    check_deterministic(program)
    kind = np.asarray(program.kind)
    batch = kind.shape[:-1]
    B = int(np.prod(batch)) if batch else 1
    T, L = program.T, program.L
    arr = {
        "batch": batch,
        "B": B,
        "kind": kind.reshape(B, T),
        "deps": np.asarray(program.deps).reshape(B, T, L),
        "mask": np.asarray(program.dep_mask).reshape(B, T, L),
        "rule": np.asarray(program.rule).reshape(B, T, -1),
        "x": np.asarray(program.x).reshape(B, program.n_inputs),
    }
    oracle = program.oracle
    if isinstance(oracle, TableOracle):
        arr["table"], arr["l"] = np.asarray(oracle.table).reshape(B, -1), oracle.l
    elif isinstance(oracle, PositionOracle):
        arr["probs"] = np.asarray(oracle.probs).reshape(B, T)
    else:
        raise TypeError(
            f"oracle={type(oracle).__name__}: the numpy reference supports "
            "TableOracle and PositionOracle"
        )
    return arr


def _numpy_rule(program: StepProgram, arr, tape: np.ndarray, t: int) -> np.ndarray:
    """``g_t(tape_{I(t)})`` per row (numpy): DET ``rule[t, code(r)]``, ORACLE ``pi(r) >= 1/2``."""
    rows = np.arange(arr["B"])
    R = program.R
    rel = np.where(arr["mask"][:, t], tape[rows[:, None], arr["deps"][:, t]], 0)
    det = arr["rule"][rows, t, (rel[:, :R] << np.arange(R)).sum(-1)]
    if "table" in arr:
        lb = arr["l"]
        orc = arr["table"][rows, (rel[:, :lb] << np.arange(lb)).sum(-1)] >= 0.5
    else:
        orc = arr["probs"][:, t] >= 0.5
    return np.where(arr["kind"][:, t] == DET, det, orc).astype(np.int64)


def simulate_numpy(program: StepProgram, flip=None) -> np.ndarray:
    """Reference int8 run ``[..., T]`` of deterministic programs in numpy (no JAX code).

    The program may be batched (leading axes) with a :class:`TableOracle` or
    :class:`PositionOracle`; ``flip`` flips answers during the run, as :func:`run_program` does.
    """
    arr = _numpy_program(program)
    T, n, B = program.T, program.n_inputs, arr["B"]
    flip = (
        np.zeros((B, T), np.int64)
        if flip is None
        else np.broadcast_to(np.asarray(flip, np.int64), arr["batch"] + (T,)).reshape(B, T)
    )
    tape = np.zeros((B, n + T), np.int64)
    tape[:, :n] = arr["x"]
    for t in range(T):
        tape[:, n + t] = _numpy_rule(program, arr, tape, t) ^ flip[:, t]
    return tape[:, n:].astype(np.int8).reshape(arr["batch"] + (T,))


def local_bits_numpy(program: StepProgram, a) -> np.ndarray:
    """Reference int8 ``g_t(a_{I(t)})`` for every step of transcripts ``a [..., T]`` (numpy)."""
    a = np.asarray(a)
    if np.ndim(program.kind) == 1 and a.ndim > 1:
        program = jax.tree.map(
            lambda v: np.broadcast_to(np.asarray(v), a.shape[:-1] + np.shape(v)), program
        )
    arr = _numpy_program(program)
    T, B = program.T, arr["B"]
    a = np.broadcast_to(np.asarray(a, np.int64), arr["batch"] + (T,)).reshape(B, T)
    tape = np.concatenate([arr["x"].astype(np.int64), a], axis=1)
    out = np.stack([_numpy_rule(program, arr, tape, t) for t in range(T)], axis=1)
    return out.astype(np.int8).reshape(arr["batch"] + (T,))


def num_deps(program: StepProgram) -> jax.Array:
    """``|I(t)|``, the number of relevant positions of each step: int32 ``[T]``."""
    return jnp.sum(program.dep_mask, axis=-1).astype(jnp.int32)


# -- configurations (spec DED 7) -------------------------------------------------------------------
@struct.dataclass
class ConfigMachine:
    """A step program seen as S-bit configurations with a one-step transition (spec DED 7).

    Layout::

        C = [ counter c (w_c bits, little-endian) | input x (n bits) | buffer (W bits) ]

    The counter is the number of steps done (0..T), ``w_c = bit_length(T) = ceil(log2(T + 1))``.
    Buffer slot ``s mod W`` holds ``y_s`` for the last W steps ``s in [c - W, c - 1]``; slots of
    steps before 0 are zero. ``W = T`` stores the whole transcript (``S = w_c + n + T``, the
    full-tape machine); a program whose steps read only the last ``w_dep`` steps runs with any
    ``W >= w_dep`` (a register machine with ``S << T``). ``Step`` computes ``y_c`` from the buffer
    and input region, writes it into slot ``c mod W`` and increments c; configurations with
    ``c >= T`` are halting fixed points, so T is padded to ``T_pad = 2^m``, ``m = ceil(log2 T)``.
    ``Acc(C) = [c == T and y_{T-1} == 1]``. A configuration is well-formed iff ``c <= T``, its input
    region equals x and buffer slots of steps before 0 are zero.
    """

    program: StepProgram  # the deterministic step program
    # int32 [T, L]: cfg_deps[t, j] is the configuration position holding tape position
    # deps[t, j], so the program's own local rule is evaluated on a configuration
    cfg_deps: jax.Array
    # T: steps; T_pad: 2^m; m: rounds of binary search; n: input bits; W: buffer width; w_c:
    # counter bits; S: configuration bits (all static)
    T: int = struct.field(pytree_node=False)
    T_pad: int = struct.field(pytree_node=False)
    m: int = struct.field(pytree_node=False)
    n: int = struct.field(pytree_node=False)
    W: int = struct.field(pytree_node=False)
    w_c: int = struct.field(pytree_node=False)
    S: int = struct.field(pytree_node=False)

    # layout helpers
    def counter(self, cfg: jax.Array) -> jax.Array:
        """The step counter c of a configuration."""
        w = jnp.left_shift(jnp.int32(1), jnp.arange(self.w_c, dtype=jnp.int32))
        return jnp.sum(cfg[: self.w_c].astype(jnp.int32) * w)

    def _counter_bits(self, c: jax.Array) -> jax.Array:
        return ((c >> jnp.arange(self.w_c, dtype=jnp.int32)) & 1).astype(jnp.int8)

    def _buffer(self, cfg: jax.Array) -> jax.Array:
        return cfg[self.w_c + self.n :]

    def init(self) -> jax.Array:
        """``C_0 = Init(x)``: counter 0, the input, an all-zero buffer."""
        return jnp.concatenate(
            [
                jnp.zeros((self.w_c,), jnp.int8),
                self.program.x.astype(jnp.int8),
                jnp.zeros((self.W,), jnp.int8),
            ]
        )

    def well_formed(self, cfg: jax.Array) -> jax.Array:
        """``c <= T``, input region == x, buffer slots ``j >= c`` zero while ``c < W``."""
        c = self.counter(cfg)
        inp = cfg[self.w_c : self.w_c + self.n]
        ok_inp = jnp.all(inp == self.program.x.astype(jnp.int8))
        slots = jnp.arange(self.W)
        ok_buf = jnp.all(jnp.where(slots >= c, self._buffer(cfg) == 0, True))
        return (c <= self.T) & ok_inp & ok_buf

    def acc(self, cfg: jax.Array) -> jax.Array:
        """``Acc(C) = [c == T and y_{T-1} == 1]``."""
        return (self.counter(cfg) == self.T) & (self._buffer(cfg)[(self.T - 1) % self.W] == 1)

    def step(self, cfg: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(next configuration, queried)``: one transition ``Step^O(C)``, O(L + w_c) work.

        At most one oracle query; halting configurations (``c >= T``) are fixed points and make
        none.
        """
        c = self.counter(cfg)
        halted = c >= self.T
        tc = jnp.minimum(c, self.T - 1)
        bit = local_bit(dataclasses.replace(self.program, deps=self.cfg_deps), cfg, tc)
        pos = self.w_c + self.n + tc % self.W
        cfg = cfg.at[pos].set(jnp.where(halted, cfg[pos], bit))
        cnt = self._counter_bits(jnp.where(halted, c, c + 1))
        cfg = jax.lax.dynamic_update_slice(cfg, cnt, (0,))
        queried = (~halted) & (self.program.kind[tc] == ORACLE)
        return cfg, queried

    def step_n(self, cfg: jax.Array, k: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(configuration, oracle queries)``: ``Step^k(C)`` for a traced k (``fori_loop``)."""

        def body(_, carry):
            c, q = carry
            c, qq = self.step(c)
            return c, q + qq.astype(jnp.int32)

        return jax.lax.fori_loop(0, k, body, (cfg, jnp.int32(0)))

    def from_transcript(self, a: jax.Array, i: jax.Array) -> jax.Array:
        """The configuration after i steps of transcript ``a`` (counter ``min(i, T)``)."""
        c = jnp.minimum(i, self.T)
        j = jnp.arange(self.W)
        s = c - 1 - jnp.mod(c - 1 - j, self.W)  # the step whose bit lives in slot j
        buf = jnp.where(s >= 0, a[jnp.clip(s, 0, self.T - 1)], 0).astype(jnp.int8)
        return jnp.concatenate([self._counter_bits(c), self.program.x.astype(jnp.int8), buf])


def max_dep_distance(program: StepProgram) -> int:
    """The largest ``t - s`` over steps t reading an earlier step s."""
    deps = np.asarray(program.deps)
    mask = np.asarray(program.dep_mask)
    t = np.arange(program.T)[:, None]
    s = deps - program.n_inputs
    dist = np.where(mask & (s >= 0), t - s, 0)
    return int(dist.max()) if dist.size else 0


def config_machine(program: StepProgram, window: int | None = None) -> ConfigMachine:
    """The :class:`ConfigMachine` view of a deterministic program (batched programs allowed).

    ``window`` is the buffer width W (None: ``W = T``, the whole transcript); it must cover every
    dependency distance, so that ``Step`` can read ``y_{I(c)}`` from the buffer.
    """
    check_deterministic(program)
    T, n = program.T, program.n_inputs
    need = max_dep_distance(program)
    W = T if window is None else int(window)
    if W < max(1, need):
        raise ValueError(
            f"window={window}: a step reads the bit {need} steps back, so the "
            f"configuration buffer needs window >= {max(1, need)}"
        )
    if W > T:
        raise ValueError(f"window={window}: at most T={T} (W = T stores the whole transcript)")
    w_c = int(T).bit_length()
    deps = np.asarray(program.deps).astype(np.int64)
    pos = np.where(deps < n, w_c + deps, w_c + n + np.mod(deps - n, W))
    m = clog2(T)
    return ConfigMachine(
        program=program,
        cfg_deps=jnp.asarray(pos, jnp.int32),
        T=T,
        T_pad=2**m,
        m=m,
        n=n,
        W=W,
        w_c=w_c,
        S=w_c + n + W,
    )


# -- populations of random deterministic machines --------------------------------------------------
def random_programs(
    seed: int,
    batch: int,
    T: int,
    n_inputs: int = 0,
    n_deps=3,
    dep_window: int | None = 8,
    oracle_frac: float = 0.3,
    complement_pairs: bool = True,
) -> StepProgram:
    """``batch`` random deterministic step programs, stacked on axis 0 (numpy leaves).

    Machine i's step t reads ``min(l_i, n + min(t, dep_window))`` distinct positions drawn uniformly
    from the inputs and the last ``dep_window`` steps, where ``l_i = n_deps`` (an int) or
    ``n_deps[i % len(n_deps)]`` (a sequence; slots beyond l_i are masked, ``L = max l_i``). Each
    step is ORACLE with probability ``oracle_frac``, else DET with a uniformly random truth table;
    the oracle is a random 0/1 :class:`TableOracle` over the L slots and x is uniform. The last step
    is DET. With ``complement_pairs`` member ``2i + 1`` is member ``2i`` with the last truth table
    negated (``l`` indexed by the pair), so exactly half the population outputs 1.
    """
    if T < 1:
        raise ValueError(f"T={T}: a program needs at least one step")
    if batch < 1 or (complement_pairs and batch % 2):
        raise ValueError(
            f"batch={batch}: need a positive (and, with complement_pairs, even) number of machines"
        )
    ls = np.atleast_1d(np.asarray(n_deps, dtype=np.int64))
    if ls.ndim != 1 or ls.size == 0 or (ls < 1).any() or (ls > MAX_RULE_BITS).any():
        raise ValueError(f"n_deps={n_deps}: each count must lie in 1..{MAX_RULE_BITS}")
    if n_inputs < 0:
        raise ValueError(f"n_inputs={n_inputs}: must be >= 0")
    if dep_window is not None and dep_window < 1:
        raise ValueError(f"dep_window={dep_window}: must be >= 1 (or None for all earlier steps)")
    if not 0.0 <= oracle_frac <= 1.0:
        raise ValueError(f"oracle_frac={oracle_frac}: a fraction in [0, 1]")
    rng = np.random.default_rng(seed)
    base = batch // 2 if complement_pairs else batch
    L, n = int(ls.max()), n_inputs
    win = T if dep_window is None else dep_window
    t = np.arange(T)
    k_t = n + np.minimum(t, win)  # number of candidate positions of step t
    # Draw L distinct candidates per (machine, step); rows with k_t <= L take all candidates.
    cand = np.floor(rng.random((base, T, L)) * np.maximum(k_t, 1)[None, :, None]).astype(np.int64)
    small = k_t <= L
    cand[:, small, :] = np.arange(L)[None, None, :]
    for _ in range(1000):
        srt = np.sort(cand, axis=-1)
        dup = (srt[..., 1:] == srt[..., :-1]).any(-1) & ~small[None, :]
        if not dup.any():
            break
        redraw = np.floor(
            rng.random((int(dup.sum()), L)) * np.broadcast_to(k_t, dup.shape)[dup][:, None]
        ).astype(np.int64)
        cand[dup] = redraw
    else:  # pragma: no cover - astronomically unlikely
        raise RuntimeError("could not draw distinct dependencies")
    l_i = ls[np.arange(base) % ls.size]
    mask = np.arange(L)[None, None, :] < np.minimum(k_t[None, :], l_i[:, None])[:, :, None]
    tt = t[None, :, None]
    deps = np.where(cand < n, cand, n + tt - 1 - (cand - n))
    deps = np.where(mask, deps, 0).astype(np.int32)
    kind = np.where(rng.random((base, T)) < oracle_frac, ORACLE, DET).astype(np.int8)
    kind[:, -1] = DET
    rule = rng.integers(0, 2, size=(base, T, 2**L), dtype=np.int8)
    table = rng.integers(0, 2, size=(base, 2**L)).astype(np.float32)
    x = rng.integers(0, 2, size=(base, n), dtype=np.int8)
    if complement_pairs:
        neg = rule.copy()
        neg[:, -1, :] = 1 - neg[:, -1, :]

        def pair(u, v):
            return np.stack([u, v], axis=1).reshape((batch,) + u.shape[1:])

        deps, mask, kind, table, x = (pair(v, v) for v in (deps, mask, kind, table, x))
        rule = pair(rule, neg)
    # Causality (the StepProgram invariant): every unmasked dep points at an input or earlier step.
    assert (~mask | (deps < n + t[None, :, None])).all()
    return StepProgram(
        kind=jnp.asarray(kind),
        deps=jnp.asarray(deps),
        dep_mask=jnp.asarray(mask),
        rule=jnp.asarray(rule),
        x=jnp.asarray(x),
        oracle=TableOracle(table=jnp.asarray(table), l=L),
        n_inputs=n,
        T=T,
        L=L,
        R=L,
    )


def index_tree(tree, i):
    """Member i of a pytree batched on axis 0 (host-side helper for tests and reports)."""
    return jax.tree.map(lambda v: v[i], tree)
