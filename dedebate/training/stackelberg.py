"""Stackelberg self-play for prover-estimator debate by exact gradients (spec PED 10.3).

A learned prover A and a learned estimator B play on a batch of claim trees; the objective
``J(A, B) = mean_x E[U_A(x)]`` is the exact expected payoff (spec PED 2.2), so ``grad J`` is exact,
A's discrete choices included. Under the Stackelberg schedule B takes ``n_b`` Adam steps on
``-J``, then A one on ``J``; under simultaneous play both step once at the same point. ``n_b`` and
the schedule are dynamic, so one compiled program runs every ``n_b`` and both schedules, vmapped
over seeds. :func:`make_chunk` trains a chunk of A updates (chunks compose: resume equals
uninterrupted); :class:`StackelbergMonitors` are what spec PED 10.3 lists; :func:`summary` reads
convergence off them. The Stackelberg experiment (``experiments/stackelberg/``) adds B's warm
start from Algorithm 1 and its grid of training runs.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.flatten_util import ravel_pytree

from dedebate.agents.learned import (
    LearnedEstimator,
    LearnedProver,
    init_estimator,
    init_prover,
)
from dedebate.core.bits import bit_table
from dedebate.programs import program_cache
from dedebate.protocols.prover_estimator import PEDParams, PEDStatic, all_paths, play
from dedebate.trees.tree import ClaimTree, truth_code


@dataclasses.dataclass(frozen=True)
class StackelbergStatic:
    """Static sizes of a training run (hashable)."""

    steps: int = 300
    hidden_a: tuple = (16,)
    hidden_b: tuple = (32,)
    settings: PEDStatic = dataclasses.field(default_factory=PEDStatic)

    def __post_init__(self):
        if not isinstance(self.steps, (int, np.integer)) or self.steps < 1:
            raise ValueError(f"steps={self.steps!r}: the number of A updates must be >= 1")
        for name in ("hidden_a", "hidden_b"):
            h = getattr(self, name)
            if not h or any(not isinstance(w, (int, np.integer)) or w < 1 for w in h):
                raise ValueError(f"{name}={h!r}: need a non-empty tuple of widths >= 1")
        if self.settings.mode != "exact":
            raise ValueError("settings.mode: training uses the exact expected rewards ('exact')")
        if self.settings.final_round != "a":
            raise ValueError("settings.final_round: the advantage monitor follows variant (a)")


@struct.dataclass
class StackelbergParams:
    """Dynamic numbers of a training run (vmappable)."""

    lr_a: jax.Array
    lr_b: jax.Array
    n_b: jax.Array  # int32: B updates per A update
    simultaneous: jax.Array  # bool: simultaneous gradient play instead of Stackelberg
    rho: jax.Array
    eta: jax.Array


def stackelberg_params(lr_a=0.05, lr_b=0.05, n_b=5, simultaneous=False, rho=2.0, eta=0.0):
    """Validated :class:`StackelbergParams` (scalars or equal-shape arrays for a vmapped grid)."""
    for name, v in (("lr_a", lr_a), ("lr_b", lr_b)):
        a = np.asarray(v, np.float64)
        if not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ValueError(f"{name}={v!r}: a learning rate must be a finite number > 0")
    nb = np.asarray(n_b)
    if not np.issubdtype(nb.dtype, np.integer) or np.any(nb < 1):
        raise ValueError(f"n_b={n_b!r}: B updates per A update must be integers >= 1")
    r = np.asarray(rho, np.float64)
    if not np.all(np.isfinite(r)) or np.any(r < 1):
        raise ValueError(f"rho={rho!r}: the stability parameter must be a finite number >= 1")
    e = np.asarray(eta, np.float64)
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError(f"eta={eta!r}: the soundness slack must be a finite number >= 0")
    return StackelbergParams(
        jnp.asarray(lr_a, jnp.float32),
        jnp.asarray(lr_b, jnp.float32),
        jnp.asarray(n_b, jnp.int32),
        jnp.asarray(simultaneous, bool),
        jnp.asarray(rho, jnp.float32),
        jnp.asarray(eta, jnp.float32),
    )


@struct.dataclass
class TrainState:
    """Players and Adam states; after :func:`make_train`'s ``train`` the Adam states are over
    each player's flat parameter vector (``jax.flatten_util.ravel_pytree`` order)."""

    prover: LearnedProver
    estimator: LearnedEstimator
    opt_a: optax.OptState
    opt_b: optax.OptState
    step: jax.Array


@struct.dataclass
class StackelbergMonitors:
    """Per-A-update monitors (arrays over steps after ``train``)."""

    u_a: jax.Array
    a_correct: jax.Array
    p_stable: jax.Array
    certified: jax.Array
    calib: jax.Array
    max_adv: jax.Array  # max over the spec 6.3 tests of |Adv| (see payoff_terms)
    adv: jax.Array  # [..., d + 1, 2] the advantages per stage (see payoff_terms)


ADAM = optax.scale_by_adam(b1=0.9, b2=0.99)
"""The Adam direction both players step along (scaled by their step sizes)."""


def payoff_terms(static: StackelbergStatic, rho, prover, estimator, trees: ClaimTree):
    """``(mean_x E[U_A], mean_x P[A correct], adv [d + 1, 2])`` over trees (spec 2.2, 6.3).

    ``E[U_A]`` is the same sum as :func:`dedebate.protocols.prover_estimator.expected_payoff`
    (exact-mode payoff of every forced path weighted by A's probability of it), with one ``vmap``
    over the paths instead of its ``lax.map`` (the test suite checks the two agree).

    ``adv[stage, test]`` are B's realised advantages (spec 5.1, truth minus prediction, ``mu``
    uniform on the trees) against the two spec 6.3 tests of each stage, built from the current A, in
    protocol order (stage 0 = initialisation, stage t = round ``k = d - t + 1``)::

        stage 0, test 0:  r_init = r^(d+1) P_A[a = z]      Adv = r^(d+1) P[A correct] - E[R_init]
        stage t, test 0:  r^k E[s_k] (M_D(y^k, z) - phat_k) Adv = E[r^k s_k (M_D(T(y^k)) - pi_k)]
        stage t, test 1:  the next round's calibration test (weight r^(k-1), A's selection j and
                          expected direction), Adv = E[r^(k-1) s_(k-1) (T(yhat^(k-1)) - phat_(k-1))]
                          (for stage 0: r^d E[s_d] (T(x) - p_d))

    each an expectation over A's paths (the context distribution mu_k that A and B's earlier rounds
    induce), averaged over the trees. With decomposable trees (``M_D(T(y^k)) = T(yhat^k)``) they add
    up to ``E[U_A] = r^(d+1) P[A correct] - sum(adv[:, 0]) + sum(adv[:, 1])`` (spec 6.4).
    """
    params = PEDParams(jnp.asarray(rho, jnp.float32), jnp.int32(-1))
    one = jax.tree_util.tree_map(lambda x: x[0], trees)
    paths = jnp.asarray(all_paths(one))
    d = one.depth
    key = jax.random.key(0)  # unused: exact mode with forced paths draws nothing
    r = 1.0 / jnp.asarray(rho, jnp.float32)
    wk = r ** jnp.arange(d, -1, -1, dtype=jnp.float32)  # r^k at positions t = 0..d (k = d - t)

    def per_tree(t):
        out = jax.vmap(
            lambda f: play(static.settings, params, prover, estimator, t, key, forced=f)
        )(paths)
        w = jnp.exp(out.log_prob)
        truth = t.truth[out.nodes].astype(jnp.float32)  # [paths, d + 1]
        cal = wk * out.directions * (truth - out.phats)

        def md_true(node, cand):
            return t.md(node, cand)[truth_code(t.child_truths(node, cand))].astype(jnp.float32)

        mdt = jax.vmap(jax.vmap(md_true))(out.nodes[:, :d], out.cands)  # [paths, d]
        rew = wk[:d] * out.directions[:, :d] * (mdt - out.pis)
        init = r ** (d + 1) * out.a_correct - out.r_init
        first = jnp.concatenate([init[:, None], rew], axis=1)  # [paths, d + 1]
        adv = jnp.stack([w @ first, w @ cal], axis=-1)  # [d + 1, 2]
        return jnp.sum(w * out.u_a), jnp.sum(w * out.a_correct), adv

    u, acc, adv = jax.vmap(per_tree)(trees)
    return u.mean(), acc.mean(), adv.mean(axis=0)


def payoff(static: StackelbergStatic, rho, prover, estimator, trees: ClaimTree):
    """``(mean_x E[U_A], mean_x P[A correct])`` over a batch of trees (exact, spec 2.2)."""
    u, acc, _ = payoff_terms(static, rho, prover, estimator, trees)
    return u, acc


def node_rounds(tree: ClaimTree) -> np.ndarray:
    """The round ``k = d - level`` in which the protocol decomposes each internal node."""
    sizes = np.diff([tree.level_offset(lev) for lev in range(tree.depth + 1)])
    return (tree.depth - np.repeat(np.arange(tree.depth), sizes)).astype(np.int32)


def _monitors(static, hp, prover, estimator, trees, u, acc, adv) -> StackelbergMonitors:
    one = jax.tree_util.tree_map(lambda x: x[0], trees)
    honest, depth, q = one.honest_cand, one.depth, one.q
    bits = jnp.asarray(bit_table(q), jnp.float32)
    ks = jnp.asarray(node_rounds(one))

    def per_tree(t):
        view = t.public()
        p_d = estimator.initial(view)
        stable = prover.decompose(view, jnp.int32(0), p_d, depth)[honest]

        def node_err(v):
            truth = t.truth[v].astype(jnp.float32)
            logits = estimator.joint(view, v, honest, truth, ks[v])
            marg = jax.nn.softmax(logits) @ bits
            return jnp.max(jnp.abs(marg - t.child_truths(v, honest).astype(jnp.float32)))

        errs = jax.vmap(node_err)(jnp.arange(t.n_internal))
        return stable, jnp.maximum(jnp.abs(p_d - t.truth[0]), errs.max())

    stable, calib = jax.vmap(per_tree)(trees)
    certified = hp.rho ** (depth + 1) * (u - hp.eta)
    return StackelbergMonitors(
        u, acc, stable.mean(), certified, calib.max(), jnp.max(jnp.abs(adv)), adv
    )


def init_state(static: StackelbergStatic, q: int, key) -> TrainState:
    """A fresh :class:`TrainState`: Flax-initialised players and their Adam states."""
    ka, kb = jax.random.split(key)
    prover = init_prover(ka, static.hidden_a)
    estimator = init_estimator(kb, q, static.hidden_b)
    return TrainState(
        prover, estimator, ADAM.init(prover.params), ADAM.init(estimator.params), jnp.int32(0)
    )


def adam_step(params, opt, grads, lr, sign):
    """One Adam step: ``params + sign * lr * adam(grads)`` (sign +1 ascends, -1 descends)."""
    upd, opt = ADAM.update(grads, opt, params)
    params = jax.tree_util.tree_map(lambda p, u: p + sign * lr * u, params, upd)
    return params, opt


@struct.dataclass
class Carry:
    """The training state between A updates, as flat arrays (what a checkpoint saves):
    each player's parameter vector (``ravel_pytree`` order of a fresh player), Adam states and
    the number of A updates done."""

    a_flat: jax.Array
    b_flat: jax.Array
    opt_a: optax.OptState
    opt_b: optax.OptState
    step: jax.Array


@program_cache
def _layout(static: StackelbergStatic, q: int):
    """Host side, cached: template players, unravel functions, init scales and sizes."""
    # Template players have zero parameters; the unravel functions are those of their flat parameter
    # vectors; per-entry init scales are LeCun uniform sqrt(3 / fan_in) for hidden kernels, 0 for
    # biases and output kernels (as in dedebate.agents.learned), plus the same LeCun scale on output
    # kernels only (for a non-uniform initial A).
    shapes_a = jax.eval_shape(lambda: init_prover(jax.random.key(0), static.hidden_a))
    shapes_b = jax.eval_shape(lambda: init_estimator(jax.random.key(0), q, static.hidden_b))
    out = []
    for shapes, n_hidden in ((shapes_a, len(static.hidden_a)), (shapes_b, len(static.hidden_b))):
        zeros = jax.tree_util.tree_map(lambda x: np.zeros(x.shape, np.float32), shapes.params)
        with jax.ensure_compile_time_eval():  # also when first called inside a trace
            flat, unravel = ravel_pytree(zeros)

        def scale(path, x, n=n_hidden, output=False):
            keys = [getattr(k, "key", None) for k in path]
            layer = int(str(keys[-2]).split("_")[-1])
            if keys[-1] == "kernel" and (layer == n if output else layer < n):
                return np.full(x.shape, np.sqrt(3.0 / x.shape[0]), np.float32)
            return np.zeros(x.shape, np.float32)

        def flat_of(tree):
            return np.concatenate([x.ravel() for x in jax.tree_util.tree_leaves(tree)])

        scale_flat = flat_of(jax.tree_util.tree_map_with_path(scale, zeros))
        out_flat = flat_of(
            jax.tree_util.tree_map_with_path(functools.partial(scale, output=True), zeros)
        )
        out.append((shapes.replace(params=zeros), unravel, scale_flat, int(flat.size), out_flat))
    return tuple(out)


def templates(static: StackelbergStatic, q: int):
    """``(prover0, estimator0, unravel_a, unravel_b)``: zero-parameter players, unravels."""
    (a0, unravel_a, *_), (b0, unravel_b, *_) = _layout(static, q)
    return a0, b0, unravel_a, unravel_b


def _q(trees: ClaimTree) -> int:
    return jax.tree_util.tree_map(lambda x: x[0], trees).q


def init_carry(static: StackelbergStatic, trees: ClaimTree, key, a_out_scale=0.0) -> Carry:
    """Initial :class:`Carry` (pure, vmappable): each player's flat parameters from one uniform
    draw, ``scale * U[-1, 1]`` (LeCun uniform hidden kernels; zero biases and output layers, so
    A starts with fair coins and B with the uniform joint). One random call per player keeps
    compilation cheap (Flax's per-layer init inside jit compiled for ~8 s on the loaded CPU).

    ``a_out_scale > 0`` also draws A's output kernels, LeCun uniform times ``a_out_scale``: a
    random non-uniform initial prover (an extra draw, so ``a_out_scale = 0`` is unchanged).
    """
    (_, _, scale_a, n_a, out_a), (_, _, scale_b, n_b, _) = _layout(static, _q(trees))
    ka, kb = jax.random.split(key)
    af = jnp.asarray(scale_a) * jax.random.uniform(ka, (n_a,), minval=-1.0, maxval=1.0)
    bf = jnp.asarray(scale_b) * jax.random.uniform(kb, (n_b,), minval=-1.0, maxval=1.0)
    ko = jax.random.fold_in(key, 2)  # not under ka, whose uniforms drew af
    af = af + a_out_scale * jnp.asarray(out_a) * jax.random.uniform(
        ko, (n_a,), minval=-1.0, maxval=1.0
    )
    return Carry(af, bf, ADAM.init(af), ADAM.init(bf), jnp.int32(0))


def players(static: StackelbergStatic, trees: ClaimTree, carry: Carry):
    """The players a carry holds."""
    a0, b0, unravel_a, unravel_b = templates(static, _q(trees))
    return a0.replace(params=unravel_a(carry.a_flat)), b0.replace(params=unravel_b(carry.b_flat))


def make_chunk(static: StackelbergStatic, length: int):
    """``chunk(hp, trees, carry) -> (carry, StackelbergMonitors over length A updates)`` (pure).

    One A update is an inner ``fori_loop`` of ``n_b + 1`` iterations (1 under simultaneous play),
    each taking the joint gradient ``(dJ/dA, dJ/dB)`` once: B descends on iterations ``< n_b``
    (every iteration under simultaneous play), A ascends on the last. A single gradient site and
    flat parameter vectors keep the compiled program small. Chunks compose:
    ``chunk_k(chunk_m(c))`` equals ``chunk_{m+k}(c)`` (resume equals uninterrupted).
    """
    if not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length={length!r}: a chunk needs >= 1 A updates")

    def select(flag, new, old):
        return jax.tree_util.tree_map(lambda x, y: jnp.where(flag, x, y), new, old)

    def chunk(hp: StackelbergParams, trees: ClaimTree, carry: Carry):
        a0, b0, unravel_a, unravel_b = templates(static, _q(trees))

        def objective(af, bf):
            u, acc, adv = payoff_terms(
                static,
                hp.rho,
                a0.replace(params=unravel_a(af)),
                b0.replace(params=unravel_b(bf)),
                trees,
            )
            return u, (acc, adv)

        grad_both = jax.value_and_grad(objective, argnums=(0, 1), has_aux=True)

        def outer(c: Carry, _):
            n_iter = jnp.where(hp.simultaneous, 1, hp.n_b + 1)

            def inner(i, x):
                af, bf, oa, ob, u, acc, adv = x
                (u_i, (acc_i, adv_i)), (ga, gb) = grad_both(af, bf)
                last = i == n_iter - 1
                b_moves = hp.simultaneous | (i < hp.n_b)
                bf2, ob2 = adam_step(bf, ob, gb, hp.lr_b, -1.0)
                af2, oa2 = adam_step(af, oa, ga, hp.lr_a, 1.0)
                bf, ob = select(b_moves, (bf2, ob2), (bf, ob))
                af, oa = select(last, (af2, oa2), (af, oa))
                return (
                    af,
                    bf,
                    oa,
                    ob,
                    jnp.where(last, u_i, u),
                    jnp.where(last, acc_i, acc),
                    jnp.where(last, adv_i, adv),
                )

            d = jax.tree_util.tree_map(lambda x: x[0], trees).depth
            af, bf, oa, ob, u, acc, adv = jax.lax.fori_loop(
                0,
                n_iter,
                inner,
                (
                    c.a_flat,
                    c.b_flat,
                    c.opt_a,
                    c.opt_b,
                    jnp.float32(0),
                    jnp.float32(0),
                    jnp.zeros((d + 1, 2), jnp.float32),
                ),
            )
            # monitors at the (A, B) the A update saw (B before its simultaneous step)
            b_seen = jnp.where(hp.simultaneous, c.b_flat, bf)
            mon = _monitors(
                static,
                hp,
                a0.replace(params=unravel_a(c.a_flat)),
                b0.replace(params=unravel_b(b_seen)),
                trees,
                u,
                acc,
                adv,
            )
            return Carry(af, bf, oa, ob, c.step + 1), mon

        return jax.lax.scan(outer, carry, None, length=length)

    return chunk


def make_train(static: StackelbergStatic):
    """The whole training run as one pure function: :func:`init_carry`, then one
    :func:`make_chunk` of all ``static.steps`` A updates; jit it and vmap it over seeds (``key``,
    ``trees``) and over grid points (``hp``).
    """
    chunk = make_chunk(static, static.steps)

    def train(hp: StackelbergParams, trees: ClaimTree, key):
        carry, mon = chunk(hp, trees, init_carry(static, trees, key))
        a, b = players(static, trees, carry)
        return TrainState(a, b, carry.opt_a, carry.opt_b, carry.step), mon

    return train


def first_converged(flags: np.ndarray) -> np.ndarray:
    """Host side: per run, the first step from which every later flag is True (``steps``: never)."""
    f = np.asarray(flags, bool)
    steps = f.shape[-1]
    # trailing run of True: index of the last False + 1
    rev = np.flip(f, axis=-1)
    trailing = np.where(rev.all(axis=-1), steps, np.argmin(rev, axis=-1))
    return steps - trailing


def summary(mon: StackelbergMonitors, thr, band) -> dict:
    """The monitors that matter of training runs (pure JAX, any leading axes).

    A run converges at the first A update from which, to the end, P[A correct] >= 0.95, P[stable] >=
    0.95 and ``|E U_A - thr| <= band``. Keys: ``converged_at`` (``steps``: never), ``converged``
    (0/1), ``final_u_a``, ``final_u_a_rel`` (over ``thr``), ``final_a_correct``, ``final_p_stable``,
    ``final_max_adv`` (B's realised max|Adv| against A's spec 6.3 tests), ``final_calib``,
    ``final_certified``.
    """
    ok = (mon.a_correct >= 0.95) & (mon.p_stable >= 0.95) & (jnp.abs(mon.u_a - thr) <= band)
    steps = ok.shape[-1]
    rev = jnp.flip(ok, axis=-1).astype(jnp.int32)  # trailing run of 1s: index of the last 0
    at = steps - jnp.where(rev.all(axis=-1), steps, jnp.argmin(rev, axis=-1)).astype(jnp.int32)
    u = mon.u_a[..., -1]
    return {
        "converged_at": at,
        "converged": (at < steps).astype(jnp.int32),
        "final_u_a": u,
        "final_u_a_rel": u / thr,
        "final_a_correct": mon.a_correct[..., -1],
        "final_p_stable": mon.p_stable[..., -1],
        "final_max_adv": mon.max_adv[..., -1],
        "final_calib": mon.calib[..., -1],
        "final_certified": mon.certified[..., -1],
    }


def advantage_at(static: StackelbergStatic, rho, trees: ClaimTree, carry: Carry):
    """The exact payoff terms of the players in ``carry``."""
    a, b = players(static, trees, carry)
    return payoff_terms(static, rho, a, b, trees)
