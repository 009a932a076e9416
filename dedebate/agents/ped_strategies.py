"""Scripted strategies for prover-estimator debate (spec PED 2.3, 4, 9.3).

Each implements :class:`~dedebate.protocols.prover_estimator_interface.Prover` or ``Estimator``:
a ``flax.struct`` pytree whose dynamic numbers are leaves (the protocol vmaps over them) and whose
modes are static fields. Here: the honest players, the soundness and completeness zoos, and
tabular estimators.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.scipy.special import xlogy

from dedebate.core.bits import bit_table
from dedebate.trees.stability import error_shifting_table
from dedebate.trees.tree import ClaimTree, truth_code

DIRECTION_VALUES = (-1.0, 0.0, 1.0)
ANSWER_MODES = ("truth", "lie", "one", "zero")
DIRECTION_MODES = ("honest", "reversed", "fixed")
SELECT_MODES = ("honest", "uniform", "first")


def _one_hot(i, n: int) -> jax.Array:
    return (jnp.arange(n) == i).astype(jnp.float32)


TIE_TOLERANCE = 2.0**-21
"""Errors within this of the largest count as tied in honest A's selection (docs: PED 2.3)."""


def tie_loss(rho, depth: int) -> float:
    """The most the tie rule costs honest A against spec PED 4's bounds (docs: PED 2.3)."""
    return TIE_TOLERANCE * sum(float(rho) ** -k for k in range(depth))


def first_max(x: jax.Array, tol: float) -> jax.Array:
    """The first index whose value is within ``tol`` of the largest (float32 rounding's ties)."""
    return jnp.argmax(x >= jnp.max(x) - tol)


def _point_logits(code, n: int) -> jax.Array:
    return jnp.where(jnp.arange(n) == code, 0.0, -jnp.inf).astype(jnp.float32)


def _check_probability(name: str, p) -> None:
    a = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise ValueError(f"{name}={p!r}: a probability must lie in [0, 1]")


# ==== provers (A) =================================================================================
@struct.dataclass
class ScriptedProver:
    """A prover assembled from fixed components (the honest A and the soundness zoo)."""

    # float32 [3], the distribution over (-1, 0, +1) of the 'fixed' direction mode
    dir_probs: jax.Array
    # int32, the candidate decomposition it always uses (-1: the tree's honest candidate)
    cand: jax.Array
    reverse: jax.Array  # bool, whether honest directions are flipped
    # static; 'truth' (a = T(root)), 'lie' (a = 1 - T(root)), 'one', 'zero'. A root whose truth the
    # prover cannot see reads as a coin flip
    answer_mode: str = struct.field(pytree_node=False, default="truth")
    # static; 'honest' (s = +1 if T(yhat) = 1 else -1, spec 2.3; reversed where reverse) or 'fixed'
    # (dir_probs)
    direction_mode: str = struct.field(pytree_node=False, default="honest")
    # static; 'honest' (argmax_i |m_i - T(y_i)|, first within TIE_TOLERANCE), 'uniform', 'first'
    select_mode: str = struct.field(pytree_node=False, default="honest")
    # static; whether it is handed the full tree
    sees_truth: bool = struct.field(pytree_node=False, default=True)

    @property
    def deterministic(self) -> bool:
        """Decompositions and selections are one-hot (lets exact mode skip random draws)."""
        return self.select_mode != "uniform"

    def answer(self, tree: ClaimTree) -> jax.Array:
        """A's root answer, by ``answer_mode``."""
        t = tree.truth[0].astype(jnp.float32)
        p = {"truth": t, "lie": 1.0 - t, "one": jnp.float32(1.0), "zero": jnp.float32(0.0)}
        return jnp.where(t < 0, 0.5, p[self.answer_mode]).astype(jnp.float32)

    def direction(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """A's direction at a claim, fixed before B speaks (spec 2.4.1), by ``direction_mode``."""
        if self.direction_mode == "fixed":
            return self.dir_probs.astype(jnp.float32)
        up = (tree.truth[node] == 1) != self.reverse
        return jnp.where(up, _one_hot(2, 3), _one_hot(0, 3))

    def decompose(self, tree: ClaimTree, node, phat, k) -> jax.Array:
        """A's choice of candidate decomposition: one-hot on ``cand``."""
        return _one_hot(jnp.where(self.cand < 0, tree.honest_cand, self.cand), tree.n_cand)

    def select(self, tree: ClaimTree, node, cand, marginals, pi, phat, k) -> jax.Array:
        """A's selection, by ``select_mode``."""
        q = tree.q
        if self.select_mode == "uniform":
            return jnp.full((q,), 1.0 / q, jnp.float32)
        if self.select_mode == "first":
            return _one_hot(0, q)
        err = jnp.abs(marginals - tree.child_truths(node, cand).astype(jnp.float32))
        return _one_hot(first_max(err, TIE_TOLERANCE), q)


def scripted_prover(
    answer_mode="truth",
    direction_mode="honest",
    cand=None,
    select_mode="honest",
    sees_truth=True,
    dir_probs=(0.0, 0.0, 1.0),
) -> ScriptedProver:
    """Validated constructor of :class:`ScriptedProver`."""
    for name, value, allowed in (
        ("answer_mode", answer_mode, ANSWER_MODES),
        ("direction_mode", direction_mode, DIRECTION_MODES),
        ("select_mode", select_mode, SELECT_MODES),
    ):
        if value not in allowed:
            raise ValueError(f"{name}={value!r}: allowed values are {allowed}")
    if not sees_truth and (direction_mode != "fixed" or select_mode == "honest"):
        raise ValueError(
            f"sees_truth=False: direction_mode={direction_mode!r} and select_mode={select_mode!r} "
            "need the truth of subclaims; use direction_mode='fixed' and select_mode 'uniform' or "
            "'first'"
        )
    if cand is not None and (not isinstance(cand, (int, np.integer)) or cand < 0):
        raise ValueError(f"cand={cand!r}: a candidate index must be an integer >= 0 (or None)")
    d = np.asarray(dir_probs, dtype=np.float64)
    if d.shape != (3,):
        raise ValueError(f"dir_probs={dir_probs!r}: need 3 probabilities for s = -1, 0, +1")
    _check_probability("dir_probs", d)
    if abs(d.sum() - 1.0) > 1e-6:
        raise ValueError(f"dir_probs={dir_probs!r}: the probabilities must sum to 1")
    mode = "honest" if direction_mode == "reversed" else direction_mode
    return ScriptedProver(
        jnp.asarray(d, jnp.float32),
        jnp.asarray(-1 if cand is None else cand, jnp.int32),
        jnp.asarray(direction_mode == "reversed"),
        answer_mode,
        mode,
        select_mode,
        bool(sees_truth),
    )


def honest_prover(cand=None) -> ScriptedProver:
    """Honest A (spec 2.3): a = T(x), honest directions, the stable decomposition, argmax error."""
    return scripted_prover("truth", "honest", cand, "honest", True)


def wrong_direction_prover(cand=None) -> ScriptedProver:
    """Honest A except that every direction is reversed (always bets the wrong way)."""
    return scripted_prover("truth", "reversed", cand, "honest", True)


def lie_then_honest_prover(cand=None) -> ScriptedProver:
    """The simplest liar: a = 1 - T(x), then honest directions, decomposition and selection."""
    return scripted_prover("lie", "honest", cand, "honest", True)


def unstable_prover(cand: int = 1) -> ScriptedProver:
    """Honest answers and selections, but on an unstable candidate decomposition (spec 9.5)."""
    return scripted_prover("truth", "honest", cand, "honest", True)


def obfuscating_liar(dir_probs=(0.0, 0.0, 1.0), cand: int = 0, select_mode="uniform"):
    """The obfuscating liar of spec 9.3.

    It claims the opposite of the (public) root truth, defends it with the hidden-flaw AND
    decomposition and, unable to see where the flaw is, recurses on a uniformly random subclaim.
    """
    return scripted_prover("lie", "fixed", cand, select_mode, False, dir_probs)


# ==== estimators (B) ==============================================================================
@struct.dataclass
class HonestEstimator:
    """Honest B (spec 2.3): ``p_d = T(x)`` and the point mass on ``T(y^k)``."""

    sees_truth: bool = struct.field(pytree_node=False, default=True)

    def initial(self, tree: ClaimTree) -> jax.Array:
        """B's initial estimate ``p_d``: ``T(x)``."""
        return tree.truth[0].astype(jnp.float32)

    def joint(self, tree: ClaimTree, node, cand, phat, k) -> jax.Array:
        """B's joint: the point mass on ``T(y^k)``."""
        return _point_logits(truth_code(tree.child_truths(node, cand)), 2**tree.q)


@struct.dataclass
class RootLiarEstimator:
    """Lies at the root (``p_d = 1 - T(x)``), honest below."""

    sees_truth: bool = struct.field(pytree_node=False, default=True)

    def initial(self, tree: ClaimTree) -> jax.Array:
        """B's initial estimate ``p_d``: ``1 - T(x)``."""
        return 1.0 - tree.truth[0].astype(jnp.float32)

    def joint(self, tree: ClaimTree, node, cand, phat, k) -> jax.Array:
        """B's joint: the point mass on ``T(y^k)``."""
        return _point_logits(truth_code(tree.child_truths(node, cand)), 2**tree.q)


@struct.dataclass
class ConstantEstimator:
    """Knows nothing: ``p_d = p`` and the product of Bernoulli(p) over the q subclaims."""

    p: jax.Array
    sees_truth: bool = struct.field(pytree_node=False, default=False)

    def initial(self, tree: ClaimTree) -> jax.Array:
        """B's initial estimate ``p_d``: ``p``."""
        return self.p.astype(jnp.float32)

    def joint(self, tree: ClaimTree, node, cand, phat, k) -> jax.Array:
        """B's joint: the product of Bernoulli(p) over the q subclaims."""
        ones = jnp.asarray(bit_table(tree.q).sum(axis=1), jnp.float32)
        return (xlogy(ones, self.p) + xlogy(tree.q - ones, 1.0 - self.p)).astype(jnp.float32)


def constant_estimator(p: float = 0.5) -> ConstantEstimator:
    """A :class:`ConstantEstimator`."""
    _check_probability("p", p)
    return ConstantEstimator(jnp.asarray(p, jnp.float32))


@struct.dataclass
class TabularEstimator:
    """An estimator given as tables (ignores phat and the round).

    A tabular B such as Algorithm 1 produces (spec 5.3), and the form of the random-joint zoo
    member.
    """

    p0: jax.Array  # float32 p_d
    # float32 [n_internal, n_cand, 2^q]; the joint at (node, cand) is softmax(logits[node, cand])
    logits: jax.Array
    sees_truth: bool = struct.field(pytree_node=False, default=False)

    def initial(self, tree: ClaimTree) -> jax.Array:
        """B's initial estimate ``p_d``: ``p0``."""
        return self.p0.astype(jnp.float32)

    def joint(self, tree: ClaimTree, node, cand, phat, k) -> jax.Array:
        """B's joint: ``logits[node, cand]``."""
        return self.logits[node, cand].astype(jnp.float32)


def tabulate(estimator, tree: ClaimTree) -> TabularEstimator:
    """The table of an estimator whose joint does not depend on ``phat`` or the round.

    For honest, root-liar, constant and random estimators: its ``p_d`` and its logits at every
    (internal claim, candidate). Pure JAX; lets one compiled debate vmap over a whole zoo of such
    estimators.
    """
    view = tree if estimator.sees_truth else tree.public()
    nodes = jnp.arange(tree.n_internal)
    cands = jnp.arange(tree.n_cand)
    logits = jax.vmap(
        lambda v: jax.vmap(
            lambda c: estimator.joint(view, v, c, jnp.float32(0.5), 0).astype(jnp.float32)
        )(cands)
    )(nodes)
    return TabularEstimator(jnp.asarray(estimator.initial(view), jnp.float32), logits)


def random_joint_estimator(key, tree: ClaimTree, scale: float = 2.0) -> TabularEstimator:
    """A fixed random estimator: ``p_d ~ U[0, 1]`` and i.i.d. Gaussian logits per (claim,
    candidate).

    Pure JAX, so a batch is ``jax.vmap`` over keys (inside a jit).
    """
    if not (np.isfinite(scale) and scale >= 0):
        raise ValueError(f"scale={scale!r}: the logit scale must be a finite number >= 0")
    k0, k1 = jax.random.split(key)
    shape = (tree.n_internal, tree.n_cand, 2**tree.q)
    return TabularEstimator(jax.random.uniform(k0), scale * jax.random.normal(k1, shape))


@struct.dataclass
class ErrorShiftingEstimator:
    """The tight completeness adversary of spec 4.

    It lies at the root by ``e`` and, at a claim whose estimate is off by
    ``e_k = |phat_k - T(yhat^k)|``, puts mass ``1 - e_k`` on the true child vector ``z*`` and
    ``e_k u_B / fbs`` on each flip pattern ``z* XOR B`` of an optimal fbs packing ``u``. Every
    consistency reward is then 0 and the errors shrink by fbs per level.
    """

    e: jax.Array  # float32 root error
    shift: jax.Array  # float32 [n_internal, n_cand, 2^q], from error_shifting_table
    sees_truth: bool = struct.field(pytree_node=False, default=True)

    def initial(self, tree: ClaimTree) -> jax.Array:
        """B's initial estimate ``p_d``: ``|T(x) - e|``, off by ``e``."""
        t = tree.truth[0].astype(jnp.float32)
        return jnp.abs(t - self.e)

    def joint(self, tree: ClaimTree, node, cand, phat, k) -> jax.Array:
        """B's joint: ``1 - e_k`` on ``z*`` and ``e_k u_B / fbs`` on each ``z* XOR B``."""
        err = jnp.clip(jnp.abs(phat - tree.truth[node].astype(jnp.float32)), 0.0, 1.0)
        code = truth_code(tree.child_truths(node, cand))
        probs = (1.0 - err) * _one_hot(code, 2**tree.q) + err * self.shift[node, cand]
        return jnp.log(probs)


def error_shifting_estimator(tree: ClaimTree, e, cache: dict | None = None):
    """Build the error-shifting B for one tree (host LPs for the packings) with root error e."""
    _check_probability("e", e)
    shift = jnp.asarray(error_shifting_table(tree, cache))
    return ErrorShiftingEstimator(jnp.asarray(e, jnp.float32), shift)


@struct.dataclass
class CalibratedEstimator:
    """Calibrated B for hidden-flaw trees (spec 9.3); it sees only public truths.

    * ``p_d`` = the public root truth (root oracle), 1/2 if hidden;
    * a decomposition whose subclaims are all public: the point mass on their truths;
    * a hidden-flaw AND decomposition: "all true" with probability ``phat`` and "exactly one false,
      uniformly placed" with probability ``1 - phat``. Each child's marginal is then
      ``1 - (1 - phat)/q`` and ``pi = phat``: every consistency term is 0.
    """

    sees_truth: bool = struct.field(pytree_node=False, default=False)

    def initial(self, tree: ClaimTree) -> jax.Array:
        """B's initial estimate ``p_d``: the public root truth, 1/2 if hidden."""
        t = tree.truth[0].astype(jnp.float32)
        return jnp.where(t < 0, 0.5, t)

    def joint(self, tree: ClaimTree, node, cand, phat, k) -> jax.Array:
        """B's joint, as the class docstring says."""
        q = tree.q
        n = 2**q
        kids = tree.child_truths(node, cand)
        public = jnp.all(kids >= 0)
        all_true = n - 1
        one_false = all_true - (1 << jnp.arange(q))
        probs = phat * _one_hot(all_true, n) + (1.0 - phat) / q * jnp.sum(
            jax.nn.one_hot(one_false, n), axis=0
        )
        mixture = jnp.log(probs)
        point = _point_logits(truth_code(jnp.clip(kids, 0, 1)), n)
        return jnp.where(public, point, mixture).astype(jnp.float32)
