"""Training a Flax estimator toward (delta, F)-indistinguishability by online gradient descent.

The network analogue of Algorithm 1 (spec PED 5.3; the rounds are spec PED 5.7): h_theta
replaces the table h; each round evaluates every test's advantage exactly, picks the largest (or a
trained MLP distinguisher's, with ``best_response="family+mlp"``), exits once all are below delta,
and otherwise takes one optimiser step on the linearised indistinguishability loss. Optimisers:
``"sgd"`` with the OGD schedule ``lr / sqrt(t)`` (default) or ``"adam"``. ``delta`` and ``lr``
are dynamic (:class:`NetTrainParams`), so one compiled program is vmapped over seeds, deltas and
learning rates. There is no iteration bound (non-convex in theta); the log reports what is reached.

Chunked API (the caller does the I/O): :func:`make_init` builds the whole state of a run,
:func:`make_chunk` runs the next ``k`` rounds from a state (rounds past ``static.rounds`` are
no-ops, so one compiled chunk serves a run), :func:`make_train` is init + one chunk of
``static.rounds``; :func:`make_init_grid` / :func:`make_chunk_grid` are the jitted grid versions.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import jax
import jax.numpy as jnp
import optax
from flax import struct

from dedebate.estimators.advantage import OIProblem, advantage_weight, advantages
from dedebate.estimators.families import _MLP, mlp_test_input
from dedebate.estimators.network import EstimatorNet
from dedebate.programs import jit, program_cache

Array = jax.Array
OPTIMIZERS = ("sgd", "adam")
BEST_RESPONSES = ("family", "family+mlp")


def _widths_ok(widths) -> bool:
    return (
        isinstance(widths, tuple)
        and len(widths) > 0
        and all(isinstance(w, int) and w >= 1 for w in widths)
    )


@dataclasses.dataclass(frozen=True)
class NetTrainStatic:
    """Static settings (compile-time constants).

    ``rounds``: estimator rounds (scan length); ``hidden``: estimator MLP widths;
    ``optimizer``: "sgd" (lr/sqrt t) or "adam"; ``best_response``: "family" or "family+mlp";
    ``dist_hidden``, ``dist_steps``, ``dist_lr``: the trained MLP distinguisher's widths, Adam
    ascent steps per round and learning rate.
    """

    rounds: int = 300
    hidden: tuple[int, ...] = (32, 32)
    optimizer: str = "sgd"
    best_response: str = "family"
    dist_hidden: tuple[int, ...] = (16,)
    dist_steps: int = 5
    dist_lr: float = 0.05

    def __post_init__(self):
        if not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"rounds={self.rounds!r}: need an integer >= 1")
        if not _widths_ok(self.hidden):
            raise ValueError(f"hidden={self.hidden!r}: need a non-empty tuple of positive ints")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={self.optimizer!r}: allowed values are {OPTIMIZERS}")
        if self.best_response not in BEST_RESPONSES:
            raise ValueError(
                f"best_response={self.best_response!r}: allowed values are {BEST_RESPONSES}"
            )
        if not _widths_ok(self.dist_hidden):
            raise ValueError(
                f"dist_hidden={self.dist_hidden!r}: need a non-empty tuple of positive ints"
            )
        if not isinstance(self.dist_steps, int) or self.dist_steps < 1:
            raise ValueError(f"dist_steps={self.dist_steps!r}: need an integer >= 1")
        if not (self.dist_lr > 0):
            raise ValueError(f"dist_lr={self.dist_lr!r}: need a positive learning rate")


@struct.dataclass
class NetTrainParams:
    """Dynamic numbers (vmappable): the indistinguishability level and the learning rate."""

    delta: Array
    lr: Array


def net_train_params(delta, lr) -> NetTrainParams:
    """Validated :class:`NetTrainParams`."""
    d = jnp.asarray(delta, jnp.float32)
    r = jnp.asarray(lr, jnp.float32)
    if not bool(jnp.all((d > 0) & (d <= 2))):
        raise ValueError(f"delta={delta!r}: every delta must lie in (0, 2]")
    if not bool(jnp.all(r > 0)):
        raise ValueError(f"lr={lr!r}: every learning rate must be positive")
    if d.shape != r.shape:
        raise ValueError(f"delta shape={d.shape}, lr shape={r.shape}: must match")
    return NetTrainParams(delta=d, lr=r)


@struct.dataclass
class NetTrainState:
    """Estimator parameters and optimiser state, the distinguisher's, and the exit bookkeeping.

    The whole state of a run (what a checkpoint holds): ``key`` is the run's typed PRNG key (the
    parameters were initialised from it; no round draws randomness, so it never changes);
    ``round``: rounds run so far (the index t of the next round, capped at ``static.rounds``);
    ``updates``: estimator steps taken; ``done``: the exit test has passed; ``rounds_to_delta``:
    the round at which it first passed (-1 if never). ``dist_params`` / ``dist_opt_state`` are
    ``None`` unless ``best_response="family+mlp"``.
    """

    params: Any
    opt_state: Any
    dist_params: Any
    dist_opt_state: Any
    key: Array
    round: Array
    updates: Array
    done: Array
    rounds_to_delta: Array


@struct.dataclass
class NetTrainLog:
    """Per round: the family's ``max |Adv|`` at the round's h_theta, the trained distinguisher's
    ``|Adv|`` (0 without one), and the test used (-1: no update; F: the distinguisher)."""

    max_adv: Array
    dist_adv: Array
    chosen: Array


def _optimizer(static: NetTrainStatic, lr) -> optax.GradientTransformation:
    if static.optimizer == "adam":
        return optax.adam(lr)
    return optax.sgd(lambda count: lr / jnp.sqrt(count + 1.0))


class _Parts:
    """The pieces shared by the init, chunk and one-shot programs (closures over ``static``)."""

    def __init__(self, static: NetTrainStatic, net=None):
        self.static = static
        self.custom_net = net
        self.dist = _MLP(static.dist_hidden)
        self.use_dist = static.best_response == "family+mlp"
        self.dist_opt = optax.adam(static.dist_lr)

    def net(self, n_z: int):
        if self.custom_net is not None:
            return self.custom_net
        return EstimatorNet(n_z=n_z, hidden=self.static.hidden)

    def init(self, hp: NetTrainParams, key, problem: OIProblem, features: Array) -> NetTrainState:
        """h_theta at the uniform distribution (zero output layer), fresh optimiser states.

        The estimator is initialised from ``key`` (from ``split(key)[0]`` when a distinguisher
        is trained, which takes ``split(key)[1]``); without one the distinguisher fields are
        ``None`` (empty pytrees)."""
        n_z = problem.n_z
        dparams = dstate = None
        k_net = key
        if self.use_dist:
            k_net, k_dist = jax.random.split(key)
            dparams = self.dist.init(
                k_dist, mlp_test_input(features[0], 0, jnp.full((n_z,), 1.0 / n_z), n_z)
            )
            dstate = self.dist_opt.init(dparams)
        params = self.net(n_z).init(k_net, features[:1])
        return NetTrainState(
            params=params,
            opt_state=_optimizer(self.static, hp.lr).init(params),
            dist_params=dparams,
            dist_opt_state=dstate,
            key=key,
            round=jnp.zeros((), jnp.int32),
            updates=jnp.zeros((), jnp.int32),
            done=jnp.zeros((), bool),
            rounds_to_delta=jnp.full((), -1, jnp.int32),
        )

    def final_max_adv(self, state: NetTrainState, family, problem: OIProblem, features: Array):
        """``max_f |Adv_f(h_theta)|`` at the state's parameters (exact, spec 5.1)."""
        h = self.net(problem.n_z).apply(state.params, features)
        return jnp.max(jnp.abs(advantages(family, problem, h)))

    def run_rounds(
        self,
        hp: NetTrainParams,
        state: NetTrainState,
        family,
        problem: OIProblem,
        features: Array,
        n_rounds: int,
    ):
        """Rounds ``state.round, ..., state.round + n_rounds - 1`` (those >= static.rounds are
        no-ops): ``(state, log)``."""
        static, dist, dist_opt, use_dist = self.static, self.dist, self.dist_opt, self.use_dist
        n_z = problem.n_z
        net = self.net(n_z)
        opt = _optimizer(static, hp.lr)

        def predict(params):
            return net.apply(params, features)

        def dist_values(dparams, h):
            def one(feat_x, z, h_x):
                out = dist.apply(dparams, mlp_test_input(feat_x, z, h_x, n_z))
                return jnp.tanh(cast(jax.Array, out))  # apply without mutable: one array

            per_z = jax.vmap(one, in_axes=(None, 0, None))
            return jax.vmap(per_z, in_axes=(0, None, 0))(features, jnp.arange(n_z), h)

        def dist_adv(dparams, h):
            return jnp.sum(dist_values(dparams, h) * advantage_weight(problem, h))

        def train_dist(dparams, dstate, h):
            def step(carry, _):
                p, s = carry
                grads = jax.grad(lambda q: -jnp.abs(dist_adv(q, h)))(p)
                upd, s = dist_opt.update(grads, s, p)
                return (optax.apply_updates(p, upd), s), None

            (dparams, dstate), _ = jax.lax.scan(step, (dparams, dstate), None, static.dist_steps)
            return dparams, dstate

        def round_fn(state: NetTrainState, t):
            in_run = t < static.rounds
            h = predict(state.params)
            adv = advantages(family, problem, h)
            i = jnp.argmax(jnp.abs(adv))
            m_fam = jnp.abs(adv[i])
            if use_dist:
                dparams, dstate = train_dist(
                    state.dist_params, state.dist_opt_state, jax.lax.stop_gradient(h)
                )
                a_d = dist_adv(dparams, h)
            else:
                dparams, dstate, a_d = state.dist_params, state.dist_opt_state, jnp.float32(0)
            pick_d = jnp.abs(a_d) > m_fam
            below = jnp.maximum(m_fam, jnp.abs(a_d)) < hp.delta
            active = in_run & ~(state.done | below)

            sigma = jnp.where(pick_d, jnp.sign(a_d), jnp.sign(adv[i]))
            f_t = family.value_of(i, h)
            if use_dist:
                f_t = jnp.where(pick_d, dist_values(dparams, h), f_t)
            f_t = jax.lax.stop_gradient(f_t)

            def loss(params):
                return sigma * jnp.sum(advantage_weight(problem, predict(params)) * f_t)

            grads = jax.grad(loss)(state.params)
            upd, opt_state = opt.update(grads, state.opt_state, state.params)
            params = optax.apply_updates(state.params, upd)

            def keep(new, old, where):
                return jax.tree_util.tree_map(lambda a, b: jnp.where(where, a, b), new, old)

            new_state = NetTrainState(
                params=keep(params, state.params, active),
                opt_state=keep(opt_state, state.opt_state, active),
                dist_params=keep(dparams, state.dist_params, in_run),
                dist_opt_state=keep(dstate, state.dist_opt_state, in_run),
                key=state.key,
                round=jnp.where(in_run, t + 1, state.round),
                updates=state.updates + active.astype(jnp.int32),
                done=state.done | (in_run & below),
                rounds_to_delta=jnp.where(
                    (state.rounds_to_delta < 0) & in_run & below, t, state.rounds_to_delta
                ),
            )
            chosen = jnp.where(active, jnp.where(pick_d, family.n_tests, i), -1)
            return new_state, NetTrainLog(max_adv=m_fam, dist_adv=jnp.abs(a_d), chosen=chosen)

        ts = state.round + jnp.arange(n_rounds, dtype=jnp.int32)
        return jax.lax.scan(round_fn, state, ts)


def make_init(static: NetTrainStatic, net=None):
    """``init(hp, key, problem, features) -> NetTrainState`` (``net`` default: ``EstimatorNet``)."""
    return _Parts(static, net).init


def make_chunk(static: NetTrainStatic, n_rounds: int, net=None):
    """Return ``chunk(hp, state, family, problem, features) -> (state, log, max_adv)``: the next
    ``n_rounds`` rounds from ``state`` (pure; rounds past ``static.rounds`` are no-ops with
    ``chosen = -1``), their :class:`NetTrainLog` and ``max_f |Adv_f|`` after them.

    Running chunks back to back from :func:`make_init`'s state is the same computation as
    :func:`make_train`; a state restored from a checkpoint continues exactly where it stopped.
    """
    if not isinstance(n_rounds, int) or n_rounds < 1:
        raise ValueError(f"n_rounds={n_rounds!r}: rounds per chunk must be an integer >= 1")
    parts = _Parts(static, net)

    def chunk(
        hp: NetTrainParams, state: NetTrainState, family, problem: OIProblem, features: Array
    ):
        state, log = parts.run_rounds(hp, state, family, problem, features, n_rounds)
        return state, log, parts.final_max_adv(state, family, problem, features)

    return chunk


def make_train(static: NetTrainStatic, net=None):
    """Return ``train(hp, key, family, problem, features) -> (state, log, final_max_adv)``.

    A pure function of its arguments (the problem data too, so one compiled program serves many
    problems of one shape). ``features: [X, d]`` is what the estimator (and a trained
    distinguisher) reads about each context; a family's own inputs are inside the family.
    """
    parts = _Parts(static, net)
    chunk = make_chunk(static, static.rounds, net)

    def train(hp: NetTrainParams, key, family, problem: OIProblem, features: Array):
        return chunk(hp, parts.init(hp, key, problem, features), family, problem, features)

    return train


def _grid(fn, data_axes, state_axis):
    """Jitted vmap of ``fn(hp, seeded, *data)`` over seeds, then over the hp grid (hp axis 0)."""
    # seeded and data on axis 0 as given for the seeds; seeded on state_axis for the grid.
    over_seeds = jax.vmap(fn, in_axes=(None, 0, *data_axes))
    return jit(jax.vmap(over_seeds, in_axes=(0, state_axis, *([None] * len(data_axes)))))


def make_train_grid(static: NetTrainStatic, batched_data: bool = False):
    """:func:`make_train` over G (delta, lr) pairs and S seeds, one jitted program ``[G, S]``."""
    d = 0 if batched_data else None
    return _grid(make_train(static), (d, d, d), None)


def make_init_grid(static: NetTrainStatic, batched_data: bool = False):
    """:func:`make_init` over the grid, jit-compiled."""
    d = 0 if batched_data else None
    return _grid(make_init(static), (d, d), None)


def make_chunk_grid(static: NetTrainStatic, n_rounds: int, batched_data: bool = False):
    """:func:`make_chunk` over the grid, jit-compiled."""
    d = 0 if batched_data else None
    return _grid(make_chunk(static, n_rounds), (d, d, d), 0)


@program_cache
def grid_programs(static: NetTrainStatic, chunk_len: int):
    """``(init_grid, chunk_grid)`` with one problem per seed, built once per process."""
    return (
        make_init_grid(static, batched_data=True),
        make_chunk_grid(static, chunk_len, batched_data=True),
    )
