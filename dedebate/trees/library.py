"""A library of claim trees with known stability (spec PED 3.4, 9.3-9.5).

Noisy-evidence trees (``Thr_5`` of 9, rho = 2, optionally with an unstable AND alternative) and
their unanimous variant (spec 9.4), the obfuscated argument with a hidden flaw and a stable
witness decomposition (spec 9.3), AND proof trees (rho = q, spec 9.5) and random trees. Each
candidate decomposition is a :class:`CandidateRule`; :func:`build_tree` grows a tree from rules
level by level. Every builder takes a typed PRNG key and is pure JAX after host-side argument
checks; a batch of keys gives a batch of trees from one compiled program.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.core.bits import bit_table
from dedebate.programs import FAST_COMPILE, jit
from dedebate.trees.tree import ClaimTree, check_sizes, n_nodes

MAX_RANDOM_TABLE_ENTRIES = 1 << 24


# ---- aggregator tables (host side) ---------------------------------------------------------
def _weights(q: int) -> np.ndarray:
    return bit_table(q).sum(axis=1)


def threshold_table(q: int, t: int) -> np.ndarray:
    """``Thr_t(z) = 1[|z| >= t]`` as an int8 truth table ``[2^q]`` (little-endian codes)."""
    if not isinstance(t, (int, np.integer)) or isinstance(t, bool) or not 1 <= t <= q:
        raise ValueError(f"t={t!r}: a threshold of q={q} bits needs an integer 1 <= t <= {q}")
    return (_weights(q) >= t).astype(np.int8)


def and_table(q: int) -> np.ndarray:
    """AND of q bits as a truth table."""
    return threshold_table(q, q)


def or_table(q: int) -> np.ndarray:
    """OR of q bits as a truth table."""
    return threshold_table(q, 1)


def majority_table(q: int) -> np.ndarray:
    """Majority of q (odd) bits as a truth table."""
    if q % 2 != 1:
        raise ValueError(f"q={q!r}: majority needs an odd number of bits")
    return threshold_table(q, (q + 1) // 2)


def parity_table(q: int) -> np.ndarray:
    """Parity of q bits as a truth table."""
    return (_weights(q) % 2).astype(np.int8)


def dictator_table(q: int, i: int = 0) -> np.ndarray:
    """The dictator ``z_i`` as a truth table."""
    if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or not 0 <= i < q:
        raise ValueError(f"i={i!r}: the dictator of q={q} bits is an integer 0 <= i < {q}")
    return bit_table(q)[:, i].astype(np.int8)


# ---- candidate decomposition rules ----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CandidateRule:
    """How one candidate decomposition splits a claim (hashable, so jit treats it as static).

    * ``kind='threshold'``: ``M_D = Thr_t``; a true claim has ``w`` true children, w uniform on
      ``true_counts``, at uniformly random positions; a false claim likewise with ``false_counts``.
    * ``kind='and'``: ``M_D = AND``; a true claim has all children true, a false one exactly one
      false child at a uniformly random position.

    ``public`` says whether the subclaims' truths are observable by every player (a hidden-flaw AND
    has ``public=False``).
    """

    kind: str
    q: int
    t: int = 0
    true_counts: tuple = ()
    false_counts: tuple = ()
    public: bool = True

    def __post_init__(self):
        if self.kind not in ("threshold", "and"):
            raise ValueError(f"kind={self.kind!r}: allowed values are 'threshold' and 'and'")

    @property
    def name(self) -> str:
        """A short name for reports (``thr5``, ``and``, ``and_hidden``...)."""
        if self.kind == "threshold":
            return f"thr{self.t}"
        return "and" if self.public else "and_hidden"

    def table(self) -> np.ndarray:
        """The rule's ``M_D`` truth table."""
        return threshold_table(self.q, self.t if self.kind == "threshold" else self.q)

    def sample(self, u, truth) -> jax.Array:
        """int8 ``[n, q]`` child patterns for parents' truths ``[n]``, uniforms ``u [n, q + 1]``."""
        q = self.q
        if self.kind == "and":
            pos = jnp.minimum((u[:, 0] * q).astype(jnp.int32), q - 1)
            flaw = (jnp.arange(q)[None, :] == pos[:, None]) & (truth[:, None] == 0)
            return jnp.where(flaw, 0, 1).astype(jnp.int8)
        tc = jnp.asarray(self.true_counts, jnp.int32)
        fc = jnp.asarray(self.false_counts, jnp.int32)
        i_t = jnp.minimum((u[:, 0] * len(self.true_counts)).astype(jnp.int32), tc.size - 1)
        i_f = jnp.minimum((u[:, 0] * len(self.false_counts)).astype(jnp.int32), fc.size - 1)
        w = jnp.where(truth == 1, tc[i_t], fc[i_f])
        # ranks of q i.i.d. uniforms (ties broken by position): a uniform random permutation
        v = u[:, 1:]
        idx = jnp.arange(q)
        before = (v[:, None, :] < v[:, :, None]) | (
            (v[:, None, :] == v[:, :, None]) & (idx[None, :] < idx[:, None])[None]
        )
        ranks = before.sum(axis=-1)
        return (ranks < w[:, None]).astype(jnp.int8)


def threshold_rule(q: int, t: int, true_counts, false_counts, public: bool = True) -> CandidateRule:
    """``M_D = Thr_t`` with the given true-children counts (validated: ``M_D(T(y)) = T(yhat)``)."""
    threshold_table(q, t)
    for name, counts in (("true_counts", true_counts), ("false_counts", false_counts)):
        if any(not isinstance(w, (int, np.integer)) or isinstance(w, bool) for w in counts):
            raise ValueError(f"{name}={counts!r}: counts of true children are integers")
    if not isinstance(public, (bool, np.bool_)):
        raise ValueError(f"public={public!r}: need a bool")
    tc = tuple(int(w) for w in true_counts)
    fc = tuple(int(w) for w in false_counts)
    if not tc or any(not t <= w <= q for w in tc):
        raise ValueError(f"true_counts={true_counts!r}: need counts with {t} <= w <= {q}")
    if not fc or any(not 0 <= w < t for w in fc):
        raise ValueError(f"false_counts={false_counts!r}: need counts with 0 <= w < {t}")
    return CandidateRule("threshold", int(q), int(t), tc, fc, bool(public))


def and_rule(q: int, public: bool) -> CandidateRule:
    """``M_D = AND``: true claims have all children true, false ones exactly one false child.

    The false child sits at a uniformly random position (hidden when ``public`` is False: the
    obfuscated argument).
    """
    return CandidateRule("and", int(q), public=bool(public))


def _check_root_truth(root_truth) -> int:
    if not isinstance(root_truth, (int, np.integer, bool)) or root_truth not in (0, 1):
        raise ValueError(f"root_truth={root_truth!r}: the root's truth must be 0 or 1")
    return int(root_truth)


def build_tree(
    key, rules, depth: int, root_truth=1, root_oracle: bool = True, honest_cand: int = 0
) -> ClaimTree:
    """Grow a complete claim tree level by level from candidate rules (jit-compiled, vmappable).

    Level ``k + 1`` is the concatenation over level-k nodes v (in order) and candidates c of the
    sampled child patterns, which is exactly the breadth-first layout of :class:`ClaimTree`.
    """
    rules = tuple(rules)
    if not rules:
        raise ValueError("rules=(): at least one candidate decomposition is needed")
    q = rules[0].q
    if any(r.q != q for r in rules):
        raise ValueError(f"rules: all candidates need the same width q, got {[r.q for r in rules]}")
    n_cand = len(rules)
    check_sizes(q, depth, n_cand)
    if not isinstance(honest_cand, (int, np.integer)) or not 0 <= honest_cand < n_cand:
        raise ValueError(f"honest_cand={honest_cand!r}: need 0 <= honest_cand < {n_cand}")
    return _grow(
        key, rules, int(depth), _check_root_truth(root_truth), bool(root_oracle), int(honest_cand)
    )


def _compiled(fn, n_static: int):
    """Wrap a tree builder ``fn(key, *static)``: compiled for concrete keys, inline when traced."""
    # Called with one concrete key: one compiled program; with a batch of keys (shape [n]): one
    # compiled, vmapped program returning a batch of trees (stacked arrays); with a traced key
    # (inside a caller's jit or vmap): traced inline. Compiled calls use FAST_COMPILE, which
    # compiles these small programs faster; JAX accepts compiler options only on a top-level jit,
    # hence the inline path.
    static = tuple(range(1, 1 + n_static))
    single = jit(fn, static_argnums=static, options=FAST_COMPILE)
    batch = jit(
        lambda keys, *a: jax.vmap(lambda k: fn(k, *a))(keys),
        static_argnums=static,
        options=FAST_COMPILE,
    )

    @functools.wraps(fn)
    def call(key, *args):
        if isinstance(key, jax.core.Tracer):
            return fn(key, *args)
        return single(key, *args) if jnp.ndim(key) == 0 else batch(key, *args)

    return call


def _grow_impl(key, rules, depth, root_truth, root_oracle, honest_cand) -> ClaimTree:
    q, n_cand = rules[0].q, len(rules)
    level = jnp.full((1,), root_truth, jnp.int8)
    truths, knowns = [level], [jnp.full((1,), root_oracle)]
    public = jnp.asarray([r.public for r in rules])
    # one draw of uniforms for the whole tree (a single RNG call keeps compilation fast)
    sizes = [n_nodes(q, k, n_cand) - n_nodes(q, k - 1, n_cand) if k else 1 for k in range(depth)]
    u_all = jax.random.uniform(key, (sum(sizes), n_cand, q + 1))
    start = 0
    for k in range(depth):
        u = u_all[start : start + sizes[k]]
        start += sizes[k]
        pats = jnp.stack([r.sample(u[:, c], level) for c, r in enumerate(rules)], axis=1)
        level = pats.reshape(-1)
        truths.append(level)
        knowns.append(jnp.broadcast_to(public[None, :, None], pats.shape).reshape(-1))
    n = n_nodes(q, depth, n_cand)
    tables = jnp.asarray(np.stack([r.table() for r in rules]), jnp.int8)
    agg = jnp.broadcast_to(jnp.arange(n_cand, dtype=jnp.int32)[None, :], (n, n_cand))
    return ClaimTree(
        truth=jnp.concatenate(truths).astype(jnp.int8),
        known=jnp.concatenate(knowns),
        agg=agg,
        tables=tables,
        q=q,
        depth=depth,
        n_cand=n_cand,
        honest_cand=honest_cand,
        cand_names=tuple(r.name for r in rules),
    )


# ---- the library -----------------------------------------------------------------------------
def noisy_evidence_tree(
    key,
    depth: int = 3,
    q: int = 9,
    t: int = 5,
    true_counts=(8, 9),
    false_counts=(0, 1),
    root_truth=1,
    unstable_alternative: bool = False,
) -> ClaimTree:
    """Noisy-evidence threshold tree (spec 9.4): Thr_5 of 9, rho = 2 with the default counts.

    ``unstable_alternative`` also gives each claim candidate 1, an AND decomposition with a hidden
    flaw (fbs = q at true claims); the honest prover uses candidate 0.
    """
    rules = [threshold_rule(q, t, true_counts, false_counts, public=True)]
    if unstable_alternative:
        rules.append(and_rule(q, public=False))
    return build_tree(key, rules, depth, root_truth, root_oracle=True, honest_cand=0)


def unanimous_tree(key, depth: int = 3, q: int = 9, t: int = 5, root_truth=1) -> ClaimTree:
    """Unanimous-children variant (spec 9.4): q or 0 true children, fbs q / (q - t + 1) at true
    nodes and q / t at false ones (9/5 at both for the defaults)."""
    return noisy_evidence_tree(key, depth, q, t, (q,), (0,), root_truth)


def hidden_flaw_tree(
    key,
    depth: int = 3,
    q: int = 4,
    root_truth=0,
    stable_t: int | None = None,
    stable_true_counts=None,
    stable_false_counts=None,
) -> ClaimTree:
    """Obfuscated argument (spec 9.3), the primality analogue; ``honest_cand = 1``.

    * candidate 0 (``and_hidden``): AND of q subclaims; a false claim has exactly one false child
      at a uniformly random position that no player can observe;
    * candidate 1 (``thr``): a stable threshold decomposition into checkable witness claims
      (threshold ``stable_t``, default ``ceil((q + 1) / 2)``; unanimous counts by default);
    * the root's truth is public (the Miller-Rabin "root oracle").
    """
    t = (q + 2) // 2 if stable_t is None else stable_t
    tc = (q,) if stable_true_counts is None else stable_true_counts
    fc = (0,) if stable_false_counts is None else stable_false_counts
    rules = [and_rule(q, public=False), threshold_rule(q, t, tc, fc, public=True)]
    return build_tree(key, rules, depth, root_truth, root_oracle=True, honest_cand=1)


def and_tree(key, depth: int = 3, q: int = 4, root_truth=1, hidden: bool = False) -> ClaimTree:
    """AND proof tree (spec 9.5): rho = q at true claims (a proof needing every step)."""
    return build_tree(
        key, [and_rule(q, public=not hidden)], depth, root_truth, root_oracle=True, honest_cand=0
    )


def random_tree(key, depth: int = 2, q: int = 3, n_cand: int = 1, root_truth=None) -> ClaimTree:
    """Random claim tree with a random consistent ``M_D`` per (node, candidate).

    Child truths are i.i.d. uniform, and each ``M_D`` table is uniformly random conditioned on
    ``M_D(T(y)) = T(yhat)``. All truths are public.
    """
    check_sizes(q, depth, n_cand)
    n_int = n_nodes(q, depth - 1, n_cand)
    if n_int * n_cand * 2**q > MAX_RANDOM_TABLE_ENTRIES:
        raise ValueError(
            f"depth={depth!r}: a random tree with q={q}, n_cand={n_cand} needs "
            f"{n_int * n_cand * 2**q} table entries; at most {MAX_RANDOM_TABLE_ENTRIES} allowed"
        )
    root = None if root_truth is None else _check_root_truth(root_truth)
    return _random_tree(key, int(depth), int(q), int(n_cand), root)


def _random_tree_impl(key, depth, q, n_cand, root_truth) -> ClaimTree:
    n = n_nodes(q, depth, n_cand)
    n_int = n_nodes(q, depth - 1, n_cand)
    k_root, k_bits, k_tab = jax.random.split(key, 3)
    if root_truth is None:
        root = jax.random.bernoulli(k_root).astype(jnp.int8).reshape(1)
    else:
        root = jnp.full((1,), root_truth, jnp.int8)
    rest = jax.random.bernoulli(k_bits, 0.5, (n - 1,)).astype(jnp.int8)
    truth = jnp.concatenate([root, rest])
    b = q * n_cand
    v = jnp.arange(n_int)[:, None, None]
    idx = v * b + 1 + jnp.arange(n_cand)[None, :, None] * q + jnp.arange(q)[None, None, :]
    weights = (1 << jnp.arange(q)).astype(jnp.int32)
    codes = jnp.sum(truth[idx].astype(jnp.int32) * weights, axis=-1)  # [n_int, C]
    tables = jax.random.bernoulli(k_tab, 0.5, (n_int, n_cand, 2**q)).astype(jnp.int8)
    hit = jnp.arange(2**q)[None, None, :] == codes[..., None]
    tables = jnp.where(hit, truth[:n_int, None, None], tables).reshape(n_int * n_cand, 2**q)
    agg = jnp.arange(n_int * n_cand, dtype=jnp.int32).reshape(n_int, n_cand)
    agg = jnp.concatenate([agg, jnp.zeros((n - n_int, n_cand), jnp.int32)])
    return ClaimTree(
        truth=truth,
        known=jnp.ones((n,), bool),
        agg=agg,
        tables=tables,
        q=q,
        depth=depth,
        n_cand=n_cand,
        honest_cand=0,
        cand_names=tuple(f"random{c}" for c in range(n_cand)),
    )


_grow = _compiled(_grow_impl, 5)
_random_tree = _compiled(_random_tree_impl, 4)
