"""Test families F ("prover circuits") for outcome indistinguishability (spec PED 5.1, 6.3).

A test is a function ``f(x, z, h(x)) -> [-1, 1]`` of a context x, an outcome z in Z and the
*predicted distribution* h(x) in Delta_Z. A family of F tests (the :class:`Family` interface) is
evaluated all at once on a prediction table ``h: [X, Z]``. Families are ``flax.struct`` pytrees
(they pass through ``jit`` and ``vmap``); per-test parameters carry a leading axis F.
Constructors validate their input on the host.

:class:`TanhFamily`: random prediction-dependent tests ``tanh(w . [feat(x), onehot(z), h(x),
h(x, z), 1])`` (spec PED 5.5, 9.6). :class:`PointwiseFamily`: any pointwise rule (random Flax MLP
distinguishers, the next-round calibration test of spec 6.3). :class:`TableFamily`:
prediction-independent tests (the round reward of spec 6.3). :class:`StackedFamily`: a union.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.bits import bit_table

Array = jax.Array


class Family(Protocol):
    """What every test family implements (spec PED 5.1)."""

    @property
    def n_tests(self) -> int:
        """The number of tests F (static, read from array shapes)."""

    def values(self, h: Array) -> Array:
        """Every test on every (x, z).

        Args:
            h: float32 ``[X, Z]``, the prediction table.

        Returns:
            float32 ``[F, X, Z]``: ``values[f, x, z] = f(x, z, h(x))``.
        """

    def value_of(self, i, h: Array) -> Array:
        """One test on every (x, z).

        Args:
            i: the test's index (may be traced).
            h: float32 ``[X, Z]``, the prediction table.

        Returns:
            float32 ``[X, Z]``: ``f_i(x, z, h(x))``.
        """

    def advantages(self, h: Array, weight: Array) -> Array:
        """``sum_{x,z} weight[x, z] values[f, x, z]`` for every test f.

        Args:
            h: float32 ``[X, Z]``, the prediction table.
            weight: float32 ``[X, Z]``; ``mu[:, None] * (g - h)`` gives ``Adv_f(h)``.

        Returns:
            float32 ``[F]``.
        """

    def pointwise(self, i: int, x: int, z: int, h_x: Array) -> Array:
        """The literal definition of one test at one (context, outcome).

        Args:
            i: the test's index.
            x: the context's index.
            z: the outcome's index.
            h_x: float32 ``[Z]``, the prediction at x.

        Returns:
            float32 scalar ``f_i(x, z, h_x)``.
        """


class _FamilyBase:
    """Default methods shared by all families."""

    values: Callable[[Array], Array]  # every test on every (x, z): [F, X, Z]; each family's own

    def value_of(self, i, h: Array) -> Array:
        """One test on every (x, z): a slice of all values."""
        return jnp.take(self.values(h), i, axis=0)

    def advantages(self, h: Array, weight: Array) -> Array:
        """A product and a sum, which XLA fuses with the tests (no [F, X, Z] buffer)."""
        return jnp.sum(self.values(h) * weight[None], axis=(1, 2))


def _check_features(features, name="features") -> None:
    shape = np.shape(features)
    if len(shape) != 2 or shape[0] < 1:
        raise ValueError(f"{name} shape={shape}: expected a 2-d array [X, d] with X >= 1")
    if not isinstance(features, jax.core.Tracer) and not np.isfinite(features).all():
        raise ValueError(f"{name}: every value must be finite (found NaN or inf)")


def _check_n_z(n_z) -> None:
    if not isinstance(n_z, (int, np.integer)) or n_z < 2:
        raise ValueError(f"n_z={n_z!r}: the outcome set needs an integer size |Z| >= 2")


# ------------------------------------------------------------------------------------------------
# Random prediction-dependent tanh tests. Contexts per block in :meth:`TanhFamily.advantages`
# (a [B, |Z|, F] block of 256 x 16 x 64 floats is 1 MiB, cache sized; 128..1024 measure alike at
# |X| = 10^5, |Z| = 16, F = 64 in bench/ogd.py, 4096 and above are slower).
TANH_BLOCK = 256
# full float32 products (no TF32/bf16 passes on accelerators): advantages pick the test by argmax
_EXACT = jax.lax.Precision.HIGHEST


@struct.dataclass
class TanhFamily(_FamilyBase):
    """``f_i(x, z, h) = tanh(w_i . [feat(x), onehot(z), h(x), h(x, z), 1])``.

    ``weights: [F, d + 2|Z| + 2]`` are the raw weights (for :meth:`pointwise`). The x-part of the
    pre-activation, ``base[i, x] = w_i . [feat(x), ..., 1]`` restricted to the feature and bias
    coordinates, is cached at construction (it does not depend on h), so a step costs one
    ``[X, Z] x [Z, F]`` product plus ``F X Z`` tanh evaluations (done block by block in
    :meth:`advantages`).
    """

    features: Array  # [X, d]
    weights: Array  # [F, d + 2|Z| + 2]
    base: Array  # [F, X] cached feat(x) . w_x + bias
    n_z: int = struct.field(pytree_node=False)

    @property
    def n_tests(self) -> int:
        """The number of tests F."""
        return self.weights.shape[0]

    def _split(self, weights):
        d = self.features.shape[1]
        nz = self.n_z
        w_z = weights[..., d : d + nz]
        w_h = weights[..., d + nz : d + 2 * nz]
        w_hz = weights[..., d + 2 * nz]
        return w_z, w_h, w_hz

    def _values(self, weights, base, h):
        w_z, w_h, w_hz = self._split(weights)
        pre = (
            base[:, :, None]
            + w_z[:, None, :]
            + (h @ w_h.T).T[:, :, None]
            + w_hz[:, None, None] * h[None, :, :]
        )
        return jnp.tanh(pre)

    def values(self, h: Array) -> Array:
        """Every test on every (x, z)."""
        return self._values(self.weights, self.base, h)

    def advantages(self, h: Array, weight: Array) -> Array:
        """The base method's sum, over blocks of :data:`TANH_BLOCK` contexts."""
        # With a[x, f] = base[f, x] + (h w_h_f)(x) (one [X, Z] x [Z, F] product), a block B of
        # contexts has pre-activations pre[x, z, f] = a[x, f] + w_z[f, z] + w_hz[f] h(x, z) ([B, Z,
        # F], cache sized) and adds weight_B @ tanh(pre) (a vector-matrix product contracting the
        # B*Z axis) to the advantages. The test axis F is innermost, so the broadcasts in pre run
        # along contiguous vectors (XLA's CPU loop emitter vectorises the fused broadcast+tanh). No
        # reduce fusion is needed (dedebate turns those off, see dedebate/_xla_flags.py) and no [F,
        # X, Z] tensor is materialised.
        w_z, w_h, w_hz = self._split(self.weights)
        n_x, n_z = h.shape
        n_f = self.n_tests
        blk = min(TANH_BLOCK, n_x)
        n_full, tail = divmod(n_x, blk)
        a = self.base.T + jnp.matmul(h, w_h.T, precision=_EXACT)  # [X, F]
        w_z_t = w_z.T  # [Z, F]
        if tail:
            # The last, partial block is padded to a full one with zero-weight contexts (they add
            # nothing). Only that block is padded: padding the whole [X, F] and [X, Z] arrays
            # copied them on every evaluation (about a third of its time at |X| = 10^5).
            start, pad = n_full * blk, ((0, blk - tail), (0, 0))
            last = [jnp.pad(x[start:], pad) for x in (a, h, weight)]

        def body(b, acc):
            # the padded last block (if any) replaces the slice there (dynamic_slice clamps it
            # in bounds), so every block goes through the same fused product
            blocks = [jax.lax.dynamic_slice_in_dim(x, b * blk, blk, 0) for x in (a, h, weight)]
            if tail:
                blocks = [jnp.where(b < n_full, x, y) for x, y in zip(blocks, last)]
            a_b, h_b, w_b = blocks  # [B, F], [B, Z], [B, Z]
            pre = a_b[:, None, :] + w_z_t[None] + h_b[:, :, None] * w_hz  # [B, Z, F]
            vals = jnp.tanh(pre).reshape(blk * n_z, n_f)
            return acc + jnp.matmul(w_b.reshape(1, blk * n_z), vals, precision=_EXACT)[0]

        return jax.lax.fori_loop(0, n_full + (tail > 0), body, jnp.zeros((n_f,), h.dtype))

    def value_of(self, i, h: Array) -> Array:
        """Test i: the outer sum ``a(x) + w_z(z)`` as a rank-2 product ``[a, 1] @ [1; w_z]``."""
        w_z, w_h, w_hz = self._split(jnp.take(self.weights, i, axis=0))
        a = jnp.take(self.base, i, axis=0) + jnp.matmul(h, w_h, precision=_EXACT)  # [X]
        lhs = jnp.stack([a, jnp.ones_like(a)], axis=1)  # [X, 2]
        rhs = jnp.stack([jnp.ones_like(w_z), w_z], axis=0)  # [2, Z]
        return jnp.tanh(jnp.matmul(lhs, rhs, precision=_EXACT) + w_hz * h)

    def pointwise(self, i: int, x: int, z: int, h_x: Array) -> Array:
        """The literal ``tanh(w_i . phi(x, z, h_x))``."""
        phi = jnp.concatenate(
            [
                self.features[x],
                jax.nn.one_hot(z, self.n_z, dtype=self.features.dtype),
                h_x,
                h_x[z][None],
                jnp.ones((1,), self.features.dtype),
            ]
        )
        return jnp.tanh(self.weights[i] @ phi)


def tanh_family(features, weights, n_z: int) -> TanhFamily:
    """A float32 :class:`TanhFamily` of weights ``[F, d + 2|Z| + 2]``, h-free part cached."""
    _check_features(features)
    _check_n_z(n_z)
    d = np.shape(features)[1]
    shape = np.shape(weights)
    if len(shape) != 2 or shape[1] != d + 2 * n_z + 2 or shape[0] < 1:
        raise ValueError(
            f"weights shape={tuple(shape)}: expected [F, d + 2|Z| + 2] = [F, {d + 2 * n_z + 2}]"
            " with F >= 1"
        )
    if isinstance(features, jax.core.Tracer) or isinstance(weights, jax.core.Tracer):
        features = jnp.asarray(features, jnp.float32)
        weights = jnp.asarray(weights, jnp.float32)
        base = weights[:, :d] @ features.T + weights[:, -1:]
    else:  # concrete inputs: the cached product on the host (no compilation)
        features = np.asarray(features, np.float32)
        weights = np.asarray(weights, np.float32)
        if not np.isfinite(weights).all():
            raise ValueError("weights: every value must be finite (found NaN or inf)")
        base = weights[:, :d] @ features.T + weights[:, -1:]
    return TanhFamily(
        features=jnp.asarray(features),
        weights=jnp.asarray(weights),
        base=jnp.asarray(base, jnp.float32),
        n_z=int(n_z),
    )


def random_tanh_family(key, features, n_z: int, n_tests: int, scale: float = 2.0) -> TanhFamily:
    """``n_tests`` random tanh tests with weights ``N(0, scale^2 / dim)`` (spec PED 5.5 [CHK]).

    The weight on ``h(x, z)`` and on ``h(x)`` makes every test prediction-dependent.
    """
    _check_features(features)
    if not isinstance(n_tests, (int, np.integer)) or n_tests < 1:
        raise ValueError(f"n_tests={n_tests!r}: need an integer >= 1")
    if not (0 < scale < np.inf):
        raise ValueError(f"scale={scale!r}: the weight scale must be positive and finite")
    dim = np.shape(features)[1] + 2 * n_z + 2
    weights = scale * jax.random.normal(key, (n_tests, dim), jnp.float32) / np.sqrt(dim)
    return tanh_family(features, weights, n_z)


# ------------------------------------------------------------------------------------------------
# Generic pointwise families (MLP distinguishers, calibration tests).


@struct.dataclass
class PointwiseFamily(_FamilyBase):
    """Tests from a pointwise rule ``fn(params_i, feat_x, z, h_x) -> [-1, 1]``.

    ``params`` is a pytree whose leaves have a leading test axis F; ``shared: [X, d]`` are the
    per-context inputs (features of x, and the fixed prover's outputs where a test reads them).
    ``values`` vmaps ``fn`` over tests, contexts and the |Z| outcomes.
    """

    params: Any
    shared: Array  # [X, d]
    fn: Callable = struct.field(pytree_node=False)
    n_z: int = struct.field(pytree_node=False)

    @property
    def n_tests(self) -> int:
        """The number of tests F."""
        return jax.tree_util.tree_leaves(self.params)[0].shape[0]

    def _values(self, params, h):
        zs = jnp.arange(self.n_z)
        per_z = jax.vmap(self.fn, in_axes=(None, None, 0, None))  # over z
        per_x = jax.vmap(per_z, in_axes=(None, 0, None, 0))  # over contexts
        per_f = jax.vmap(per_x, in_axes=(0, None, None, None))  # over tests
        return per_f(params, self.shared, zs, h)

    def values(self, h: Array) -> Array:
        """Every test on every (x, z): ``fn`` vmapped over tests, contexts and outcomes."""
        return self._values(self.params, h)

    def value_of(self, i, h: Array) -> Array:
        """One test on every (x, z)."""
        p = jax.tree_util.tree_map(lambda a: jnp.take(a, i, axis=0)[None], self.params)
        return self._values(p, h)[0]

    def pointwise(self, i: int, x: int, z: int, h_x: Array) -> Array:
        """``fn(params_i, shared[x], z, h_x)``."""
        p = jax.tree_util.tree_map(lambda a: a[i], self.params)
        return self.fn(p, self.shared[x], z, h_x)


class _MLP(nn.Module):
    """A small MLP distinguisher body: tanh hidden layers and a scalar output."""

    hidden: tuple[int, ...]

    @nn.compact
    def __call__(self, u):
        for width in self.hidden:
            u = jnp.tanh(nn.Dense(width)(u))
        return nn.Dense(1)(u)[0]


def mlp_test_input(feat_x, z, h_x, n_z):
    """What an MLP distinguisher reads: ``[feat(x), onehot(z), h(x), h(x, z)]`` as one vector."""
    return jnp.concatenate([feat_x, jax.nn.one_hot(z, n_z, dtype=feat_x.dtype), h_x, h_x[z][None]])


def random_mlp_family(
    key, shared, n_z: int, n_tests: int, hidden: tuple[int, ...] = (16,), out_scale: float = 2.0
) -> PointwiseFamily:
    """Random Flax MLP distinguishers ``tanh(out_scale * MLP(feat(x), onehot(z), h(x), h(x,z)))``.

    ``shared: [X, d]`` may include columns holding the fixed prover A's outputs on each context,
    so the distinguisher "evaluates A" (spec PED 6.1, 6.2: F may call A).
    """
    _check_features(shared, "shared")
    _check_n_z(n_z)
    if not isinstance(n_tests, (int, np.integer)) or n_tests < 1:
        raise ValueError(f"n_tests={n_tests!r}: need an integer >= 1")
    if not hidden or any((not isinstance(w, (int, np.integer))) or w < 1 for w in hidden):
        raise ValueError(f"hidden={hidden!r}: need a non-empty tuple of positive widths")
    shared = jnp.asarray(shared, jnp.float32)
    model = _MLP(tuple(int(w) for w in hidden))
    dummy = mlp_test_input(shared[0], 0, jnp.full((n_z,), 1.0 / n_z), n_z)
    keys = jax.random.split(key, n_tests)
    params = jax.vmap(lambda k: model.init(k, dummy))(keys)

    def fn(p, feat_x, z, h_x):
        out = cast(jax.Array, model.apply(p, mlp_test_input(feat_x, z, h_x, n_z)))  # no mutable
        return jnp.tanh(out_scale * out)

    return PointwiseFamily(params=params, shared=shared, fn=fn, n_z=int(n_z))


# ------------------------------------------------------------------------------------------------
# Prediction-independent tables and the spec 6.3 protocol tests.


@struct.dataclass
class TableFamily(_FamilyBase):
    """Tests that ignore the prediction: ``values[f, x, z] = table[f, x, z]``."""

    table: Array  # [F, X, Z]

    @property
    def n_tests(self) -> int:
        """The number of tests F."""
        return self.table.shape[0]

    def values(self, h: Array) -> Array:
        """The table, in h's dtype."""
        return self.table.astype(h.dtype)

    def value_of(self, i, h: Array) -> Array:
        """Row i of the table, in h's dtype."""
        return jnp.take(self.table, i, axis=0).astype(h.dtype)

    def pointwise(self, i: int, x: int, z: int, h_x: Array) -> Array:
        """``table[i, x, z]``."""
        return self.table[i, x, z]


def table_family(table) -> TableFamily:
    """A validated float32 :class:`TableFamily` of ``[F, X, Z]`` test values in [-1, 1]."""
    table = np.asarray(table, np.float32)
    if table.ndim != 3 or min(table.shape) < 1:
        raise ValueError(f"table shape={table.shape}: expected [F, X, Z] with all sizes >= 1")
    if not np.all(np.abs(table) <= 1.0):
        raise ValueError("table values: tests must take values in [-1, 1]")
    return TableFamily(table=jnp.asarray(table))


def round_reward_family(direction, md_table, phat, scale: float = 1.0) -> TableFamily:
    """The round's own reward as a test (spec PED 6.3, test 1).

    ``r_k(xx, z, P) = scale * s(xx) * (M_D(x, y, z) - phat)`` with ``scale = r^k``, the fixed
    prover's direction ``s = A^k(x, yhat, phat) in {-1, +1}`` per context, ``md_table[x, z] =
    M_D(x, y, z) in {0,1}`` and the previous estimate ``phat[x] in [0, 1]``. It does not read the
    prediction P.
    """
    direction = np.asarray(direction, np.float32)
    md_table = np.asarray(md_table, np.float32)
    phat = np.asarray(phat, np.float32)
    n_x = md_table.shape[0] if md_table.ndim == 2 else -1
    if md_table.ndim != 2 or not np.all((md_table == 0) | (md_table == 1)):
        raise ValueError(f"md_table shape={md_table.shape}: expected a 0/1 table [X, |Z|]")
    if direction.shape != (n_x,) or not np.all(np.abs(direction) <= 1):
        raise ValueError(f"direction shape={direction.shape}: expected [X={n_x}] values in [-1, 1]")
    if phat.shape != (n_x,) or not np.all((phat >= 0) & (phat <= 1)):
        raise ValueError(f"phat shape={phat.shape}: expected [X={n_x}] probabilities in [0, 1]")
    if not (0 < scale <= 1):
        raise ValueError(f"scale={scale!r}: the reward weight r^k must lie in (0, 1]")
    table = scale * direction[:, None] * (md_table - phat[:, None])
    return table_family(table[None])


def calibration_family(
    select_fn: Callable, direction_fn: Callable, shared, q: int, scale: float = 1.0
) -> PointwiseFamily:
    """The next round's calibration test (spec PED 6.3, test 2), from a fixed prover A.

    With the marginals ``m = P @ bits`` of the joint prediction P over ``Z = {0,1}^q`` (``bits``
    is :func:`dedebate.core.bits.bit_table`, code z little-endian)::

        f(xx, z, P) = scale * sum_j sel_j(xx, P) * A(x, y_j, m_j) * (z_j - m_j)

    where ``sel = select_fn(shared[x], P)`` is A's selection distribution over the q subclaims (a
    one-hot vector for a deterministic A; it may read P but never z, spec 2.4) and
    ``A = direction_fn(shared[x], j, m_j) in [-1, 1]`` is A's expected next-round direction on
    subclaim j given its estimate ``m_j``. Values lie in [-1, 1] for ``scale <= 1``. Under B's own
    prediction ``sum_z P(z) f(xx, z, P) = 0`` for every P (``E_P[z_j] = m_j``): the identity the
    soundness proof uses.
    """
    _check_features(shared, "shared")
    if not isinstance(q, (int, np.integer)) or not (1 <= q <= 12):
        raise ValueError(f"q={q!r}: the calibration test needs an integer 1 <= q <= 12")
    if not (0 < scale <= 1):
        raise ValueError(f"scale={scale!r}: the reward weight r^k must lie in (0, 1]")
    bits = jnp.asarray(bit_table(int(q)), jnp.float32)
    n_z = 2**q
    js = jnp.arange(q)

    def fn(p, feat_x, z, h_x):
        marg = h_x @ bits
        sel = select_fn(feat_x, h_x)
        s = jax.vmap(direction_fn, in_axes=(None, 0, 0))(feat_x, js, marg)
        return p * jnp.sum(sel * s * (bits[z] - marg))

    params = jnp.asarray([scale], jnp.float32)
    return PointwiseFamily(params=params, shared=jnp.asarray(shared, jnp.float32), fn=fn, n_z=n_z)


# ------------------------------------------------------------------------------------------------
@struct.dataclass
class StackedFamily(_FamilyBase):
    """The union of several families; test ``i`` indexes them in order."""

    families: tuple

    @property
    def n_tests(self) -> int:
        """The number of tests F, summed over the members."""
        return sum(f.n_tests for f in self.families)

    def values(self, h: Array) -> Array:
        """The members' values, concatenated along the test axis."""
        return jnp.concatenate([f.values(h) for f in self.families], axis=0)

    def advantages(self, h: Array, weight: Array) -> Array:
        """The members' advantages (each by its own method), concatenated."""
        return jnp.concatenate([f.advantages(h, weight) for f in self.families])

    def value_of(self, i, h: Array) -> Array:
        """Test i, read from the member that holds it (``lax.switch``; ``i`` may be traced)."""
        sizes = [f.n_tests for f in self.families]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        which = jnp.clip(
            jnp.searchsorted(jnp.asarray(offsets[1:]), i, side="right"), 0, len(sizes) - 1
        )

        def branch(fam, offset, size):
            return lambda: fam.value_of(jnp.clip(i - offset, 0, size - 1), h)

        branches = [branch(f, int(o), n) for f, o, n in zip(self.families, offsets[:-1], sizes)]
        return jax.lax.switch(which, branches)

    def pointwise(self, i: int, x: int, z: int, h_x: Array) -> Array:
        """Test i's literal definition, from the member that holds it."""
        for f in self.families:
            if i < f.n_tests:
                return f.pointwise(i, x, z, h_x)
            i -= f.n_tests
        raise IndexError(i)


def stack_families(*families) -> StackedFamily:
    """Union of families over the same contexts and outcomes."""
    if not families or not all(isinstance(f, _FamilyBase) for f in families):
        raise ValueError(f"families={families!r}: need one or more families to stack")
    return StackedFamily(families=tuple(families))
