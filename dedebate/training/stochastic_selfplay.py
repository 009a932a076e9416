"""Self-play for the stochastic-oracle debate: learned Alice and Bob (spec DED 5).

**Game** (spec DED 5.1, Lean-normative). At every prefix y (length t) Alice claims a real p for
``pi(y) = P[y_t = 1 | y]``; Bob aborts with probability ``a``; on continue the protocol draws
``y_t ~ Bernoulli(clamp01(p))``; on abort the output is Vera's verdict, the exact binomial checker
``vera(p) = P[|p - X/N_V| < tau_V]``, ``X ~ Binomial(N_V, pi)``. Without an abort the output is
the last bit. Alice maximises ``P[out = 1]``, Bob minimises it (zero-sum, spec DED 4 "game
reading"); yes-instances (P_M(1) >= 2/3) and no-instances (P_M(1) <= 1/3) are the same game on
different machines.

**Players** (plain pytrees, memoryless like Lean's):

* Alice (:class:`AliceParams`): a tanh MLP on the features an unbounded Alice sees at the prefix
  (step t/(T-1), the true pi, the previous bit, the fraction of ones so far) giving the claim
  ``p = pi + b * mlp(features)`` (the lie in units of the must-abort threshold b) --
  deterministic given the prefix, any real claim reachable (honesty is ``mlp = 0``).
* Bob (:class:`BobParams`): exactly the ``B_LEARNED`` family of
  :class:`dedebate.agents.stochastic_players.ZooBob`: abort probability
  ``sigmoid(w[t] + w_dev |p - e| / b + w_prev * prev_bit)`` where ``e`` is Bob's estimate of
  pi. Bob uses the **expected** estimate ``e = E[count / N_B] = pi`` (the N_B -> infinity limit;
  an idealised Bob, stronger than honest Bob's sampled estimate). So a trained Bob *is* a ZooBob
  (:func:`bob_as_zoo`), and the repository's exact DP and ``play`` evaluate it unchanged.

**Exact value by DP over prefixes** (small T). With ``V_T = last bit``::

    V_t(c) = (1 - a) (clamp01(p) V_{t+1}(c + 2^t) + (1 - clamp01(p)) V_{t+1}(c)) + a * vera(p)

over the little-endian prefix codes c of :func:`dedebate.machines.lipschitz.prefix_tree`
(:func:`dp_value`, differentiable; the policies are evaluated once on the flat array of all
2^T - 1 prefixes). Training uses it with a **named surrogate** for Vera (:func:`vera_surrogate`:
the normal approximation of the binomial checker, smooth in p, plus an optional heavy-tailed
straight-through gradient term so that Alice's gradient sees Vera beyond its window); every
reported number uses the exact binomial Vera in float64 on the host (:func:`evaluate`).

**Training** (spec PED 8.5, 10 conventions): alternating Adam updates (b2 = 0.99) on the DP
acceptance, Bob (the follower) takes ``n_b`` steps per Alice step; one jitted ``train(inputs,
hp, key)`` (``lax.scan`` over Alice steps, monitors every ``log_every``) vmapped over seeds
(:func:`make_train`, :func:`train_grid`; one compiled program serves every instance with the
same T). The same run in pieces, for checkpoints: :func:`init_carry` then :func:`make_chunk`
(:class:`SelfPlayCarry` between them; :func:`init_grid`, :func:`chunk_grid` vmapped over seeds,
bit-equal to :func:`train_grid`). :func:`make_train_bob` trains Bob alone against a fixed Alice.

**Measurements** (host, float64, :func:`evaluate`): the exact acceptance of the trained pair;
reach probabilities of every prefix under the pair; Alice's reach-weighted mean ``|p - pi|``;
Bob's abort probability at probe deviations ``|p - pi| >= b`` ("hit") and ``< s`` ("false
alarm"), reach-weighted; the exact acceptance against honest Bob (``checker_prob`` with N_B,
tau_B); exploitability: Bob's exact best response to the trained Alice (per prefix: abort iff
Vera's verdict is below the continuation value) and Alice's best response to the trained Bob over
a claim grid (a lower bound on her best response).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.scipy.special import ndtr

from dedebate.agents.stochastic_players import B_LEARNED, ZooBob
from dedebate.exact import checker_prob
from dedebate.protocols.stochastic import DebateConstants, StepView

N_FEATURES = 4
# Small scans whose compile time dominates: XLA CPU backend optimisation level 1 compiles faster
# (as in dedebate.protocols.prover_estimator).
COMPILE_OPTIONS = {"xla_backend_optimization_level": 1}


# =================================================================================================
# Prefix-tree node features (shared by the DP and by the players in play)
# =================================================================================================
def node_features(t, pi, prev, ones, T: int):
    """Alice's features at a prefix: ``[t/(T-1), pi, prev_bit, ones/max(t, 1)]`` (float32)."""
    t = jnp.asarray(t, jnp.float32)
    return jnp.stack(jnp.broadcast_arrays(
        t / max(T - 1, 1), jnp.asarray(pi, jnp.float32), jnp.asarray(prev, jnp.float32),
        jnp.asarray(ones, jnp.float32) / jnp.maximum(t, 1.0)), axis=-1)


def level_codes(T: int) -> list[dict]:
    """Per level t: ``prev`` (last bit of the prefix, 0 at t = 0) and ``ones`` of every code."""
    out = []
    for t in range(T):
        codes = np.arange(2**t, dtype=np.int64)
        prev = ((codes >> (t - 1)) & 1) if t > 0 else np.zeros_like(codes)
        ones = np.array([int(c).bit_count() for c in codes], np.int64)
        out.append({"prev": prev.astype(np.int32), "ones": ones.astype(np.int32)})
    return out


# =================================================================================================
# Players
# =================================================================================================
@struct.dataclass
class AliceParams:
    """Alice's MLP (features -> hidden (tanh) -> 1); claim ``pi + unit * out``."""

    w1: jax.Array  # [N_FEATURES, H]
    b1: jax.Array  # [H]
    w2: jax.Array  # [H]
    b2: jax.Array  # []


@struct.dataclass
class BobParams:
    """Bob's abort logit ``w[t] + w_dev |p - pi| / scale + w_prev prev`` (ZooBob B_LEARNED)."""

    w: jax.Array  # [T]
    w_dev: jax.Array  # []
    w_prev: jax.Array  # []


def init_alice(key: jax.Array, hidden: int, init_scale: float = 1.0) -> AliceParams:
    """Random Alice: Glorot-like first layer; the output layer's scale ``init_scale`` sets the
    typical initial lie (in units of the claim unit)."""
    k1, k2, k3 = jax.random.split(key, 3)
    return AliceParams(
        w1=jax.random.normal(k1, (N_FEATURES, hidden)) / jnp.sqrt(N_FEATURES),
        b1=jnp.zeros((hidden,)),
        w2=jax.random.normal(k2, (hidden,)) * init_scale / jnp.sqrt(hidden),
        b2=jax.random.normal(k3, ()) * init_scale)


def init_bob(key: jax.Array, T: int, init_logit: float = -2.0) -> BobParams:
    """Bob starting almost deviation-blind: logits ``init_logit`` + N(0, 0.1^2) per step,
    ``w_dev, w_prev ~ N(0, 0.1^2)``."""
    k1, k2, k3 = jax.random.split(key, 3)
    return BobParams(w=init_logit + 0.1 * jax.random.normal(k1, (T,)),
                     w_dev=0.1 * jax.random.normal(k2, ()),
                     w_prev=0.1 * jax.random.normal(k3, ()))


def alice_claim(params: AliceParams, feats: jax.Array, pi: jax.Array, unit) -> jax.Array:
    """``p = pi + unit * mlp(feats)`` (any real; the coin clamps it). The lie is measured in
    ``unit`` (the must-abort threshold b), so one optimiser step moves claims on the scale where
    the protocol's thresholds live while any lie stays reachable."""
    h = jnp.tanh(feats @ params.w1 + params.b1)
    return pi + unit * (h @ params.w2 + params.b2)


def bob_logit(params: BobParams, t, dev_abs, prev, scale) -> jax.Array:
    return (params.w[t] + params.w_dev * dev_abs / scale
            + params.w_prev * jnp.asarray(prev, jnp.float32))


def bob_abort(params: BobParams, t, dev_abs, prev, scale) -> jax.Array:
    """Bob's abort probability (``ZooBob.abort_prob`` of kind B_LEARNED)."""
    return jax.nn.sigmoid(bob_logit(params, t, dev_abs, prev, scale))


def bob_as_zoo(params: BobParams, scale: float) -> ZooBob:
    """The trained Bob as a :class:`ZooBob` of kind ``B_LEARNED`` (no oracle samples), for
    :func:`dedebate.exact.acceptance_exact` and
    :func:`dedebate.protocols.stochastic.play`."""
    return ZooBob(kind=jnp.int32(B_LEARNED), w=jnp.asarray(params.w, jnp.float32),
                  w_dev=jnp.asarray(params.w_dev, jnp.float32),
                  w_prev=jnp.asarray(params.w_prev, jnp.float32),
                  tau_vera=jnp.float32(scale), n_samples=jnp.int32(0), tau=jnp.float32(0.0),
                  coin=jnp.float32(-1.0))


@struct.dataclass
class LearnedAlice:
    """The trained Alice as a player of :func:`dedebate.protocols.stochastic.play` (reads the
    true pi from the view, draws no oracle samples)."""

    params: AliceParams
    unit: jax.Array  # float32
    n_samples: jax.Array  # int32 (0)
    samples: bool = struct.field(pytree_node=False, default=False)

    def claim(self, view: StepView, count, u):
        f = node_features(view.t, view.pi, view.prev_bit, view.ones, view.T)
        return alice_claim(self.params, f, view.pi, self.unit).astype(jnp.float32)

    def coin_share(self, view: StepView, p, z):
        return z


def learned_alice(params: AliceParams, unit: float) -> LearnedAlice:
    return LearnedAlice(params=params, unit=jnp.float32(unit), n_samples=jnp.int32(0))


# =================================================================================================
# Vera and the differentiable DP
# =================================================================================================
def vera_surrogate(p, pi, n_vera, tau_vera, grad_mix=0.0):
    """Training surrogate for Vera's acceptance (named approximation, never reported).

    Value: the normal approximation of the binomial checker, ``Phi((tau - d)/sd) -
    Phi((-tau - d)/sd)`` with ``d = p - pi`` and ``sd = sqrt((pi (1 - pi) + 1/N) / N)`` (the 1/N
    floor keeps it smooth at pi in {0, 1}). Gradient: that value's, plus ``grad_mix`` times the
    gradient of the heavy-tailed window ``1 / (1 + (d / tau)^2)`` (a straight-through term: it
    changes no value). Without it Vera's window (width ~tau, edges ~sd) gives Alice no gradient
    once her lies exceed tau, and self-play can stall at "Alice lies, Bob always aborts"."""
    sd = jnp.sqrt((pi * (1.0 - pi) + 1.0 / n_vera) / n_vera)
    d = p - pi
    value = ndtr((tau_vera - d) / sd) - ndtr((-tau_vera - d) / sd)
    tail = 1.0 / (1.0 + (d / tau_vera) ** 2)
    return value + grad_mix * (tail - jax.lax.stop_gradient(tail))


def dp_value(p_levels, abort_levels, vera_levels):
    """``P[out = 1]`` by backward DP over the prefix tree (spec DED 5.1), differentiable.

    Each argument is a list over steps t of arrays of shape [2^t] (little-endian prefix codes):
    Alice's claim, Bob's abort probability and Vera's acceptance at that claim. Works for jnp and
    numpy inputs (dtype preserved)."""
    xp = jnp if any(isinstance(x, jax.Array) for x in (p_levels[0], abort_levels[0],
                                                        vera_levels[0])) else np
    T = len(p_levels)
    V = None
    for t in range(T - 1, -1, -1):
        p, a, v = p_levels[t], abort_levels[t], vera_levels[t]
        coin = xp.clip(p, 0.0, 1.0)
        if V is None:
            v0, v1 = 0.0, 1.0
        else:
            half = V.shape[0] // 2
            v0, v1 = V[:half], V[half:]
        V = (1.0 - a) * (coin * v1 + (1.0 - coin) * v0) + a * v
    return V[0]


def reach_levels(p_levels, abort_levels):
    """Probability of reaching each prefix *and playing its step* (no abort before), per level."""
    xp = jnp if isinstance(p_levels[0], jax.Array) else np
    r = xp.ones((1,), dtype=p_levels[0].dtype)
    out = [r]
    for t in range(len(p_levels) - 1):
        coin = xp.clip(p_levels[t], 0.0, 1.0)
        go = r * (1.0 - abort_levels[t])
        r = xp.concatenate([go * (1.0 - coin), go * coin])
        out.append(r)
    return out


# =================================================================================================
# Static problem description and training
# =================================================================================================
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
        if not (isinstance(self.adam_b2, float) and 0.0 <= self.adam_b2 < 1.0):
            raise ValueError(f"adam_b2={self.adam_b2!r}: Adam's second-moment decay must be a "
                             "float in [0, 1)")


@struct.dataclass
class SelfPlayHParams:
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


def hparams(constants: DebateConstants, lr_a=0.01, lr_b=0.05, n_b=5, alice_init=1.0,
            bob_init=-2.0, vera_grad_mix=1.0) -> SelfPlayHParams:
    """Validated hyperparameters; Vera's (N_V, tau_V) and Bob's scale b from ``constants``."""
    if not (isinstance(n_b, (int, np.integer)) and n_b >= 1):
        raise ValueError(f"n_b={n_b!r}: Bob updates per Alice update must be an integer >= 1")
    for name, v in (("lr_a", lr_a), ("lr_b", lr_b),
                    ("alice_init", alice_init)):
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"{name}={v!r}: must be a finite number > 0")
    if not np.isfinite(bob_init):
        raise ValueError(f"bob_init={bob_init!r}: must be a finite number")
    if not (np.isfinite(vera_grad_mix) and vera_grad_mix >= 0):
        raise ValueError(f"vera_grad_mix={vera_grad_mix!r}: must be a finite number >= 0")
    f = jnp.float32
    return SelfPlayHParams(lr_a=f(lr_a), lr_b=f(lr_b), n_b=jnp.int32(n_b), unit=f(constants.b),
                           scale=f(constants.b), n_vera=f(constants.n_vera), tau_vera=f(constants.tau_vera),
                           alice_init=f(alice_init), bob_init=f(bob_init),
                           vera_grad_mix=f(vera_grad_mix))


def level_inputs(levels: list[np.ndarray]) -> dict:
    """Device inputs of one instance as flat node arrays (node of prefix code c at step t has
    index ``2^t - 1 + c``): ``pi``, ``t``, ``prev``, ``ones`` (each [2^T - 1])."""
    T = len(levels)
    codes = level_codes(T)
    cat = np.concatenate
    return {"pi": jnp.asarray(cat([np.asarray(lv) for lv in levels]), jnp.float32),
            "t": jnp.asarray(cat([np.full(2**t, t) for t in range(T)]), jnp.int32),
            "prev": jnp.asarray(cat([c["prev"] for c in codes]), jnp.int32),
            "ones": jnp.asarray(cat([c["ones"] for c in codes]), jnp.int32)}


def split_levels(x):
    """Flat node array [2^T - 1] -> list of per-level arrays [2^t] (static slices)."""
    n = x.shape[0] + 1
    T = n.bit_length() - 1
    return [x[2**t - 1: 2 ** (t + 1) - 1] for t in range(T)]


def policy_nodes(alice: AliceParams, bob: BobParams, inputs: dict, unit, scale):
    """Flat over all prefixes: Alice's claim p and Bob's abort probability at p."""
    pi, t = inputs["pi"], inputs["t"]
    T = bob.w.shape[-1]
    p = alice_claim(alice, node_features(t, pi, inputs["prev"], inputs["ones"], T), pi, unit)
    return p, bob_abort(bob, t, jnp.abs(p - pi), inputs["prev"], scale)


def policy_levels(alice: AliceParams, bob: BobParams, inputs: dict, unit, scale):
    """:func:`policy_nodes` split per level: lists of claims and abort probabilities."""
    p, a = policy_nodes(alice, bob, inputs, unit, scale)
    return split_levels(p), split_levels(a)


def surrogate_value(alice: AliceParams, bob: BobParams, inputs: dict, hp: SelfPlayHParams):
    """The training objective: ``P[out = 1]`` by :func:`dp_value` with :func:`vera_surrogate`."""
    p, a = policy_nodes(alice, bob, inputs, hp.unit, hp.scale)
    vera = vera_surrogate(p, inputs["pi"], hp.n_vera, hp.tau_vera, hp.vera_grad_mix)
    return dp_value(split_levels(p), split_levels(a), split_levels(vera))


def tracking_error(alice: AliceParams, bob: BobParams, inputs: dict, hp: SelfPlayHParams):
    """Reach-weighted mean ``|p - pi|`` over the steps played (jnp, for monitors)."""
    p, a = policy_nodes(alice, bob, inputs, hp.unit, hp.scale)
    reach = jnp.concatenate(reach_levels(split_levels(p), split_levels(a)))
    return jnp.sum(reach * jnp.abs(p - inputs["pi"])) / jnp.sum(reach)


@struct.dataclass
class Monitors:
    """Per logged Alice update: surrogate acceptance and Alice's reach-weighted tracking error."""

    value: jax.Array
    tracking: jax.Array


def n_periods(static: SelfPlayStatic) -> int:
    """Monitor periods of a run: ``ceil(steps / log_every)`` (a run makes ``n_periods *
    log_every`` Alice updates, one monitor after each period)."""
    return -(-static.steps // static.log_every)


def chunk_lengths(periods: int, chunks: int) -> tuple[int, ...]:
    """Split ``periods`` monitor periods into ``chunks`` consecutive pieces as evenly as possible
    (the longer ones first; at most two distinct lengths, so at most two compiled chunks)."""
    if not (isinstance(chunks, int) and 1 <= chunks <= periods):
        raise ValueError(f"chunks={chunks!r}: must be an integer in [1, {periods}] (the number of "
                         "monitor periods)")
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


def _optimisers(static: SelfPlayStatic, hp: SelfPlayHParams):
    opt_a = optax.inject_hyperparams(optax.adam)(learning_rate=hp.lr_a, b2=static.adam_b2)
    opt_b = optax.inject_hyperparams(optax.adam)(learning_rate=hp.lr_b, b2=static.adam_b2)
    return opt_a, opt_b


def init_carry(static: SelfPlayStatic, hp: SelfPlayHParams, key) -> SelfPlayCarry:
    """Initial :class:`SelfPlayCarry` (pure, vmappable over ``key``): Alice from ``split(key)[0]``
    (:func:`init_alice`), Bob from ``split(key)[1]`` (:func:`init_bob`), fresh Adam states."""
    ka, kb = jax.random.split(key)
    alice = init_alice(ka, static.hidden, hp.alice_init)
    bob = init_bob(kb, static.T, hp.bob_init)
    opt_a, opt_b = _optimisers(static, hp)
    return SelfPlayCarry(alice, bob, opt_a.init(alice), opt_b.init(bob), jnp.int32(0), key)


def make_chunk(static: SelfPlayStatic, periods: int):
    """``chunk(inputs, hp, carry) -> (carry, Monitors[periods])`` (pure): ``periods`` monitor
    periods of ``static.log_every`` alternating updates each -- Bob (minimising) ``n_b`` Adam
    steps, then Alice (maximising) one Adam step, on the surrogate exact DP value -- with the
    monitors measured after each period. Chunks compose: ``chunk_k(chunk_m(c))`` makes the same
    updates as ``chunk_{m+k}(c)`` (a resumed run repeats the uninterrupted one)."""
    if not (isinstance(periods, int) and periods >= 1):
        raise ValueError(f"periods={periods!r}: a chunk needs an integer >= 1 monitor periods")

    def chunk(inputs, hp: SelfPlayHParams, carry: SelfPlayCarry):
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
            mon = Monitors(value=surrogate_value(a, b, inputs, hp),
                           tracking=tracking_error(a, b, inputs, hp))
            return c, mon

        # The Adam states' stored hyperparameters are rebuilt here (same values): XLA then sees
        # b1, b2, eps as compile-time constants, as in one uninterrupted program (carried in as
        # runtime arrays they change Adam's bias correction in the last bits).
        sa = carry.opt_a._replace(hyperparams=opt_a.init(carry.alice).hyperparams)
        sb = carry.opt_b._replace(hyperparams=opt_b.init(carry.bob).hyperparams)
        c0 = (carry.alice, carry.bob, sa, sb)
        (a, b, sa, sb), mons = jax.lax.scan(period, c0, None, length=periods)
        return SelfPlayCarry(a, b, sa, sb, carry.step + periods * static.log_every,
                             carry.key), mons

    return chunk


def make_train(static: SelfPlayStatic):
    """``train(inputs, hp, key) -> (alice, bob, Monitors[n_periods])``: the whole run as one pure
    function (:func:`init_carry`, then one :func:`make_chunk` of every monitor period); jit and
    vmap it over seeds and instances."""
    chunk = make_chunk(static, n_periods(static))

    def train(inputs, hp: SelfPlayHParams, key):
        carry, mons = chunk(inputs, hp, init_carry(static, hp, key))
        return carry.alice, carry.bob, mons

    return train


def make_train_bob(steps: int):
    """``train_bob(inputs, hp, alice, bob) -> bob``: Bob alone, ``steps`` Adam steps minimising
    the surrogate DP value against a fixed Alice (an approximate best response in Bob's family)."""

    def train_bob(inputs, hp: SelfPlayHParams, alice: AliceParams, bob: BobParams):
        opt = optax.adam(hp.lr_b)
        grad_b = jax.grad(lambda b: surrogate_value(alice, b, inputs, hp))

        def step(c, _):
            b, s = c
            u, s = opt.update(grad_b(b), s, b)
            return (optax.apply_updates(b, u), s), None

        (bob, _), _ = jax.lax.scan(step, (bob, opt.init(bob)), None, length=steps)
        return bob

    return train_bob


@functools.cache
def train_grid(static: SelfPlayStatic):
    """``jit(vmap over seeds (train))``: ``(inputs, hp, keys[S])`` (one compiled program serves
    every instance of the same T)."""
    train = make_train(static)
    over_seeds = jax.vmap(train, in_axes=(None, None, 0))
    return jax.jit(over_seeds, compiler_options=COMPILE_OPTIONS)


_SHARED = ("count", "hyperparams", "step")


@functools.cache
def carry_axes(static: SelfPlayStatic) -> SelfPlayCarry:
    """The vmap axes of a seed-batched :class:`SelfPlayCarry`: ``None`` for the leaves every seed
    shares (Adam's update counts and stored hyperparameters, the update counter), 0 for the
    rest. :func:`train_grid`'s vmap keeps the shared leaves unbatched; so must the chunks, to
    compute exactly what it computes (a per-seed Adam count makes XLA evaluate the bias
    correction ``b^count`` with a vectorised power, different in the last bits)."""
    f32 = jax.ShapeDtypeStruct((), jnp.float32)
    hp = SelfPlayHParams(**{f.name: jax.ShapeDtypeStruct((), jnp.int32) if f.name == "n_b"
                            else f32 for f in dataclasses.fields(SelfPlayHParams)})
    shapes = jax.eval_shape(lambda h, k: init_carry(static, h, k), hp,
                            jax.ShapeDtypeStruct((), jax.random.key(0).dtype))

    def axis(path, _):
        names = {getattr(k, "name", getattr(k, "key", None)) for k in path}
        return None if names & set(_SHARED) else 0

    return jax.tree_util.tree_map_with_path(axis, shapes)


@functools.cache
def init_grid(static: SelfPlayStatic):
    """``jit(vmap over seeds (init_carry))``: ``(hp, keys[S]) -> SelfPlayCarry[S]`` (batched
    as :func:`carry_axes` says)."""
    return jax.jit(jax.vmap(functools.partial(init_carry, static), in_axes=(None, 0),
                            out_axes=carry_axes(static)), compiler_options=COMPILE_OPTIONS)


@functools.cache
def chunk_grid(static: SelfPlayStatic, periods: int):
    """``jit(vmap over seeds (chunk))``: ``(inputs, hp, carry[S]) -> (carry[S], Monitors[S,
    periods])``: the chunked form of :func:`train_grid` (chunks after :func:`init_grid` give
    the same numbers, bit for bit)."""
    axes = carry_axes(static)
    return jax.jit(jax.vmap(make_chunk(static, periods), in_axes=(None, None, axes),
                            out_axes=(axes, 0)), compiler_options=COMPILE_OPTIONS)


# =================================================================================================
# Exact evaluation on the host (float64)
# =================================================================================================
_policy_nodes = jax.jit(policy_nodes)


def probe_deviations(constants: DebateConstants, n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Probe deviations for Bob's abort targeting: ``n`` values in ``[b, 4b]`` (must abort) and
    ``n`` values in ``[0, s)`` (honest Bob must not abort)."""
    s, b = constants.s, constants.b
    return np.linspace(b, 4 * b, n), np.linspace(0.0, s, n, endpoint=False)


def evaluate(levels: list[np.ndarray], alice: AliceParams, bob: BobParams,
             constants: DebateConstants, n_grid: int = 801, full: bool = True) -> dict:
    """Exact measurements of one trained pair on one instance (float64, exact binomial Vera);
    see the module docstring. Returns plain floats; ``full=False``: only ``value``,
    ``tracking``, ``max_dev_visited``, ``p_abort`` and ``w_dev``."""
    T = len(levels)
    inputs = level_inputs(levels)
    scale = float(constants.b)
    p32, a32 = _policy_nodes(alice, bob, inputs, jnp.float32(scale), jnp.float32(scale))
    ps = split_levels(np.asarray(p32, np.float64))
    aborts = split_levels(np.asarray(a32, np.float64))
    pis = [np.asarray(lv, np.float64) for lv in levels]
    n_v, tau_v = int(constants.n_vera), float(constants.tau_vera)
    veras = [checker_prob(p, n_v, tau_v, pi) for p, pi in zip(ps, pis)]
    value = float(dp_value(ps, aborts, veras))
    reach = reach_levels(ps, aborts)
    mass = sum(float(r.sum()) for r in reach)
    dev = [np.abs(p - pi) for p, pi in zip(ps, pis)]
    tracking = sum(float((r * d).sum()) for r, d in zip(reach, dev)) / mass
    max_dev = max(float(np.max(np.where(r > 1e-9, d, 0.0))) for r, d in zip(reach, dev))
    abort_path = sum(float((r * a).sum()) for r, a in zip(reach, aborts))  # P[abort]
    light = {"value": value, "tracking": tracking, "max_dev_visited": max_dev,
             "p_abort": abort_path, "w_dev": float(bob.w_dev)}
    if not full:
        return light
    # Bob at probe deviations, reach-weighted over the visited prefixes.
    hi_dev, lo_dev = probe_deviations(constants)
    codes = level_codes(T)
    bob_np = jax.tree.map(lambda x: np.asarray(x, np.float64), bob)

    def abort_at(t, d, prev):
        z = bob_np.w[t] + bob_np.w_dev * d / scale + bob_np.w_prev * prev
        return 1.0 / (1.0 + np.exp(-z))

    def probe(devs):
        tot = 0.0
        for t in range(T):
            a = abort_at(t, devs[None, :], codes[t]["prev"][:, None]).mean(axis=1)
            tot += float((reach[t] * a).sum())
        return tot / mass

    hit, false_alarm = probe(hi_dev), probe(lo_dev)
    false_c = probe(np.linspace(0.0, constants.s / 2, 8))  # |dev| <= c (Lean c = s/2)
    # Against honest Bob (exact binomial checker with N_B, tau_B).
    cont_h = [checker_prob(p, int(constants.n_bob), float(constants.tau_bob), pi)
              for p, pi in zip(ps, pis)]
    value_vs_honest_bob = float(dp_value(ps, [1.0 - c for c in cont_h], veras))
    # Bob's exact best response to this Alice (per prefix: abort iff Vera < continuation).
    V = None
    for t in range(T - 1, -1, -1):
        coin = np.clip(ps[t], 0.0, 1.0)
        v0, v1 = (0.0, 1.0) if V is None else (V[: V.size // 2], V[V.size // 2:])
        V = np.minimum(coin * v1 + (1.0 - coin) * v0, veras[t])
    bob_br = float(V[0])
    # Alice's best response to this Bob over a claim grid (lower bound on her best response).
    grid = np.unique(np.concatenate([np.linspace(-1.0, 1.0, n_grid),
                                     np.linspace(-2 * tau_v, 2 * tau_v, n_grid)]))
    V = None
    for t in range(T - 1, -1, -1):
        pi = pis[t][:, None]
        p = pi + grid[None, :]
        a = abort_at(t, np.abs(grid)[None, :], codes[t]["prev"][:, None])
        coin = np.clip(p, 0.0, 1.0)
        v0, v1 = (0.0, 1.0) if V is None else (V[: V.size // 2, None], V[V.size // 2:, None])
        vera = checker_prob(p, n_v, tau_v, pi)
        V = ((1.0 - a) * (coin * v1 + (1.0 - coin) * v0) + a * vera).max(axis=1)
    alice_br = float(V[0])
    return {**light, "hit": hit, "false_alarm": false_alarm,
            "false_alarm_c": false_c, "value_vs_honest_bob": value_vs_honest_bob,
            "bob_best_response": bob_br, "alice_best_response": alice_br,
            "gap": alice_br - bob_br}


def take(tree, *idx):
    """Index every leaf of a stacked pytree (host helper)."""
    return jax.tree.map(lambda x: x[idx], tree)
