"""Self-play training of the stochastic debate's learned Alice and Bob (spec PED 8.5, 10).

The zero-sum game "Alice maximises P[out = 1]" is trained by alternating Adam updates (b2 =
0.99) on the differentiable DP value of :mod:`dedebate.exact.selfplay`, with Vera replaced by a
named smooth surrogate (:func:`vera_surrogate`; never reported). Bob, the follower, takes ``n_b``
steps per Alice step. :func:`make_chunk` runs monitor periods from a :class:`SelfPlayCarry`
(chunks compose bit for bit, so a checkpointed run repeats an uninterrupted one);
:func:`make_train` is the whole run as one pure function; the ``*_grid`` functions are their
jitted seed-vmapped forms. Static sizes: :class:`SelfPlayStatic`; dynamic numbers:
:class:`SelfPlayParams`. Players: :mod:`dedebate.agents.selfplay_players`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.scipy.special import ndtr

from dedebate.agents.selfplay_players import AliceParams, BobParams, init_alice, init_bob
from dedebate.exact.selfplay import dp_value, policy_nodes, reach_levels, split_levels
from dedebate.programs import FAST_COMPILE, jit, program_cache
from dedebate.protocols.stochastic import DebateParams


@dataclasses.dataclass(frozen=True)
class SelfPlayStatic:
    """Static sizes (hashable): T steps, Alice's hidden width, Alice updates, the monitor stride
    and Adam's second-moment decay."""

    T: int
    hidden: int = 16
    steps: int = 300
    log_every: int = 10
    adam_b2: float = 0.99

    def __post_init__(self):
        if not (isinstance(self.T, int) and 2 <= self.T <= 16):
            raise ValueError(f"T={self.T!r}: the differentiable DP needs an integer 2 <= T <= 16")
        for name, lo in (("hidden", 1), ("steps", 1), ("log_every", 1)):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= lo):
                raise ValueError(f"{name}={v!r}: must be an integer >= {lo}")
        periods(self.steps, self.log_every)
        if not (isinstance(self.adam_b2, float) and 0.0 <= self.adam_b2 < 1.0):
            raise ValueError(
                f"adam_b2={self.adam_b2!r}: Adam's second-moment decay must be a float in [0, 1)"
            )


@struct.dataclass
class SelfPlayParams:
    """Dynamic numbers (vmappable): step sizes, Bob updates per Alice update (the follower's n_B,
    spec PED 8.5; a traced loop bound, so one compiled program serves every n_B), Alice's claim
    unit and Bob's deviation scale, Vera, initialisation and surrogate settings."""

    lr_a: jax.Array
    lr_b: jax.Array
    n_b: jax.Array  # int32
    unit: jax.Array  # Alice's claim unit (b)
    scale: jax.Array  # Bob's deviation feature scale (the must-abort threshold b)
    n_vera: jax.Array  # float32
    tau_vera: jax.Array
    alice_init: jax.Array  # typical size of Alice's initial lies |p - pi|, in units of b
    bob_init: jax.Array  # Bob's initial abort logit
    vera_grad_mix: jax.Array  # weight of the heavy-tailed gradient term of vera_surrogate


def selfplay_params(
    constants: DebateParams,
    lr_a=0.01,
    lr_b=0.05,
    n_b=5,
    alice_init=1.0,
    bob_init=-2.0,
    vera_grad_mix=1.0,
) -> SelfPlayParams:
    """Validated :class:`SelfPlayParams` (float32, ``n_b`` int32); b is Alice's claim unit.

    Step sizes and ``alice_init`` (in units of b) finite and > 0, ``n_b`` an integer >= 1,
    ``vera_grad_mix`` (the weight of :func:`vera_surrogate`'s heavy-tailed gradient) >= 0.
    """
    if not (isinstance(n_b, (int, np.integer)) and n_b >= 1):
        raise ValueError(f"n_b={n_b!r}: Bob updates per Alice update must be an integer >= 1")
    for name, v in (("lr_a", lr_a), ("lr_b", lr_b), ("alice_init", alice_init)):
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"{name}={v!r}: must be a finite number > 0")
    if not np.isfinite(bob_init):
        raise ValueError(f"bob_init={bob_init!r}: must be a finite number")
    if not (np.isfinite(vera_grad_mix) and vera_grad_mix >= 0):
        raise ValueError(f"vera_grad_mix={vera_grad_mix!r}: must be a finite number >= 0")
    f = jnp.float32
    return SelfPlayParams(
        lr_a=f(lr_a),
        lr_b=f(lr_b),
        n_b=jnp.int32(n_b),
        unit=f(constants.b),
        scale=f(constants.b),
        n_vera=f(constants.n_vera),
        tau_vera=f(constants.tau_vera),
        alice_init=f(alice_init),
        bob_init=f(bob_init),
        vera_grad_mix=f(vera_grad_mix),
    )


def vera_surrogate(p, pi, n_vera, tau_vera, grad_mix=0.0):
    """Training surrogate for Vera's acceptance (named approximation; only training curves use it).

    Value: the normal approximation of the binomial checker, ``Phi((tau - d)/sd) -
    Phi((-tau - d)/sd)`` with ``d = p - pi`` and ``sd = sqrt((pi (1 - pi) + 1/N) / N)`` (the 1/N
    floor keeps it smooth at pi in {0, 1}). Gradient: that value's, plus ``grad_mix`` times the
    gradient of the heavy-tailed window ``1 / (1 + (d / tau)^2)`` (a straight-through term: it
    changes no value). Without it Vera's window (width ~tau, edges ~sd) gives Alice no gradient
    once her lies exceed tau, and self-play can stall at "Alice lies, Bob always aborts".
    """
    sd = jnp.sqrt((pi * (1.0 - pi) + 1.0 / n_vera) / n_vera)
    d = p - pi
    value = ndtr((tau_vera - d) / sd) - ndtr((-tau_vera - d) / sd)
    tail = 1.0 / (1.0 + (d / tau_vera) ** 2)
    return value + grad_mix * (tail - jax.lax.stop_gradient(tail))


def surrogate_value(alice: AliceParams, bob: BobParams, inputs: dict, hp: SelfPlayParams):
    """The training objective: ``P[out = 1]`` by :func:`dp_value` with :func:`vera_surrogate`."""
    p, a = policy_nodes(alice, bob, inputs, hp.unit, hp.scale)
    vera = vera_surrogate(p, inputs["pi"], hp.n_vera, hp.tau_vera, hp.vera_grad_mix)
    return dp_value(split_levels(p), split_levels(a), split_levels(vera))


def tracking_error(alice: AliceParams, bob: BobParams, inputs: dict, hp: SelfPlayParams):
    """Alice's reach-weighted mean ``|p - pi|`` over the steps played (jnp, for monitors)."""
    p, a = policy_nodes(alice, bob, inputs, hp.unit, hp.scale)
    reach = jnp.concatenate(reach_levels(split_levels(p), split_levels(a)))
    return jnp.sum(reach * jnp.abs(p - inputs["pi"])) / jnp.sum(reach)


@struct.dataclass
class SelfPlayMonitors:
    """Per logged Alice update: surrogate acceptance and Alice's reach-weighted tracking error."""

    value: jax.Array
    tracking: jax.Array


def periods(steps: int, log_every: int) -> int:
    """Monitor periods of ``steps`` Alice updates, ``log_every`` each (ValueError unless whole)."""
    if steps % log_every:
        raise ValueError(f"steps={steps}: must be a multiple of log_every={log_every}")
    return steps // log_every


def n_periods(static: SelfPlayStatic) -> int:
    """Monitor periods of a run (``static.steps`` updates, ``static.log_every`` per period)."""
    return periods(static.steps, static.log_every)


def chunk_lengths(periods: int, chunks: int) -> tuple[int, ...]:
    """``periods`` split into ``chunks`` consecutive chunks, longer first (two lengths at most)."""
    if not (isinstance(chunks, int) and 1 <= chunks <= periods):
        raise ValueError(
            f"chunks={chunks!r}: must be an integer in [1, {periods}] (the number of "
            "monitor periods)"
        )
    q, r = divmod(periods, chunks)
    return tuple(q + 1 if i < r else q for i in range(chunks))


@struct.dataclass
class SelfPlayCarry:
    """The training state between chunks (what a checkpoint saves): both players, their Adam
    states (``optax.inject_hyperparams(adam)``, so the step sizes travel with them), the number of
    Alice updates done and the typed PRNG key the run was initialised from (training after the
    initialisation is deterministic: the key is kept only to identify the run)."""

    alice: AliceParams
    bob: BobParams
    opt_a: optax.OptState
    opt_b: optax.OptState
    step: jax.Array  # int32
    key: jax.Array  # typed PRNG key


def _optimisers(static: SelfPlayStatic, hp: SelfPlayParams):
    opt_a = optax.inject_hyperparams(optax.adam)(learning_rate=hp.lr_a, b2=static.adam_b2)
    opt_b = optax.inject_hyperparams(optax.adam)(learning_rate=hp.lr_b, b2=static.adam_b2)
    return opt_a, opt_b


def init_carry(static: SelfPlayStatic, hp: SelfPlayParams, key) -> SelfPlayCarry:
    """Initial :class:`SelfPlayCarry` (pure, vmappable over ``key``): Alice from ``split(key)[0]``
    (:func:`init_alice`), Bob from ``split(key)[1]`` (:func:`init_bob`), fresh Adam states.
    """
    ka, kb = jax.random.split(key)
    alice = init_alice(ka, static.hidden, hp.alice_init)
    bob = init_bob(kb, static.T, hp.bob_init)
    opt_a, opt_b = _optimisers(static, hp)
    return SelfPlayCarry(alice, bob, opt_a.init(alice), opt_b.init(bob), jnp.int32(0), key)


def make_chunk(static: SelfPlayStatic, periods: int):
    """``chunk(inputs, hp, carry) -> (carry, SelfPlayMonitors[periods])`` (pure): ``periods``
    monitor periods of ``static.log_every`` alternating updates each -- Bob (minimising) ``n_b``
    Adam steps, then Alice (maximising) one Adam step, on the surrogate exact DP value -- with the
    monitors measured after each period. Chunks compose: ``chunk_k(chunk_m(c))`` makes the same
    updates as ``chunk_{m+k}(c)`` (a resumed run repeats the uninterrupted one).
    """
    if not (isinstance(periods, int) and periods >= 1):
        raise ValueError(f"periods={periods!r}: a chunk needs an integer >= 1 monitor periods")

    def chunk(inputs, hp: SelfPlayParams, carry: SelfPlayCarry):
        opt_a, opt_b = _optimisers(static, hp)
        grad_b = jax.grad(lambda b, a: surrogate_value(a, b, inputs, hp))
        grad_a = jax.grad(lambda a, b: -surrogate_value(a, b, inputs, hp))

        def bob_step(_, c):
            b, s, a = c
            u, s = opt_b.update(grad_b(b, a), s, b)
            return optax.apply_updates(b, u), s, a

        def outer(c, _):
            a, b, sa, sb = c
            b, sb, _ = jax.lax.fori_loop(0, hp.n_b, bob_step, (b, sb, a))
            u, sa = opt_a.update(grad_a(a, b), sa, a)
            a = optax.apply_updates(a, u)
            return (a, b, sa, sb), None

        def period(c, _):
            c, _ = jax.lax.scan(outer, c, None, length=static.log_every)
            a, b = c[0], c[1]
            mon = SelfPlayMonitors(
                value=surrogate_value(a, b, inputs, hp), tracking=tracking_error(a, b, inputs, hp)
            )
            return c, mon

        # The Adam states' stored hyperparameters are rebuilt here (same values): XLA then sees
        # b1, b2, eps as compile-time constants, as in one uninterrupted program (carried in as
        # runtime arrays they change Adam's bias correction in the last bits).
        sa = carry.opt_a._replace(hyperparams=opt_a.init(carry.alice).hyperparams)
        sb = carry.opt_b._replace(hyperparams=opt_b.init(carry.bob).hyperparams)
        c0 = (carry.alice, carry.bob, sa, sb)
        (a, b, sa, sb), mons = jax.lax.scan(period, c0, None, length=periods)
        return SelfPlayCarry(a, b, sa, sb, carry.step + periods * static.log_every, carry.key), mons

    return chunk


def make_train(static: SelfPlayStatic):
    """``train(inputs, hp, key) -> (alice, bob, SelfPlayMonitors[n_periods])``: the whole run as
    one pure function (:func:`init_carry`, then one :func:`make_chunk` of every monitor period);
    jit and vmap it over seeds and instances.
    """
    chunk = make_chunk(static, n_periods(static))

    def train(inputs, hp: SelfPlayParams, key):
        carry, mons = chunk(inputs, hp, init_carry(static, hp, key))
        return carry.alice, carry.bob, mons

    return train


def make_train_bob(steps: int):
    """``train_bob(inputs, hp, alice, bob) -> bob``: Bob alone, ``steps`` Adam steps minimising
    the surrogate DP value against a fixed Alice (an approximate best response in Bob's family).
    """

    def train_bob(inputs, hp: SelfPlayParams, alice: AliceParams, bob: BobParams):
        opt = optax.adam(hp.lr_b)
        grad_b = jax.grad(lambda b: surrogate_value(alice, b, inputs, hp))

        def step(c, _):
            b, s = c
            u, s = opt.update(grad_b(b), s, b)
            return (optax.apply_updates(b, u), s), None

        (bob, _), _ = jax.lax.scan(step, (bob, opt.init(bob)), None, length=steps)
        return bob

    return train_bob


@program_cache
def train_grid(static: SelfPlayStatic):
    """``jit(vmap over seeds (train))``: ``(inputs, hp, keys[S])`` (one compiled program serves
    every instance of the same T).
    """
    train = make_train(static)
    over_seeds = jax.vmap(train, in_axes=(None, None, 0))
    return jit(over_seeds, options=FAST_COMPILE)


_SHARED = ("count", "hyperparams", "step")


@program_cache
def carry_axes(static: SelfPlayStatic) -> SelfPlayCarry:
    """The vmap axes of a seed-batched :class:`SelfPlayCarry`: ``None`` for the leaves every seed
    shares (Adam's update counts and stored hyperparameters, the update counter), 0 for the
    rest. :func:`train_grid`'s vmap keeps the shared leaves unbatched; so must the chunks, to
    compute exactly what it computes (a per-seed Adam count makes XLA evaluate the bias
    correction ``b^count`` with a vectorised power, different in the last bits).
    """
    f32 = jax.ShapeDtypeStruct((), jnp.float32)
    shapes_of_hp: dict[str, Any] = {
        f.name: jax.ShapeDtypeStruct((), jnp.int32) if f.name == "n_b" else f32
        for f in dataclasses.fields(SelfPlayParams)
    }
    hp = SelfPlayParams(**shapes_of_hp)
    shapes = jax.eval_shape(
        lambda h, k: init_carry(static, h, k), hp, jax.ShapeDtypeStruct((), jax.random.key(0).dtype)
    )

    def axis(path, _):
        names = {getattr(k, "name", getattr(k, "key", None)) for k in path}
        return None if names & set(_SHARED) else 0

    return jax.tree_util.tree_map_with_path(axis, shapes)


@program_cache
def init_grid(static: SelfPlayStatic):
    """``jit(vmap over seeds (init_carry))``: ``(hp, keys[S]) -> SelfPlayCarry[S]`` (batched
    as :func:`carry_axes` says).
    """
    return jit(
        jax.vmap(
            functools.partial(init_carry, static), in_axes=(None, 0), out_axes=carry_axes(static)
        ),
        options=FAST_COMPILE,
    )


@program_cache
def chunk_grid(static: SelfPlayStatic, periods: int):
    """``jit(vmap over seeds (chunk))``: ``(inputs, hp, carry[S]) -> (carry[S], SelfPlayMonitors[S,
    periods])``: the chunked form of :func:`train_grid` (chunks after :func:`init_grid` give
    the same numbers, bit for bit).
    """
    axes = carry_axes(static)
    return jit(
        jax.vmap(make_chunk(static, periods), in_axes=(None, None, axes), out_axes=(axes, 0)),
        options=FAST_COMPILE,
    )
