"""Prover-estimator debate (spec PED 2), one episode as a ``lax.scan`` over rounds.

After the initialisation (A answers, B states ``p_d``), each consistency round k has A fix a
direction ``s_k``, decompose the claim, B state a joint ``P_k`` over the q answers, the reward
``R_k = r^k s_k (M_D(y^k, z^k) - phat_k)`` with ``z^k ~ P_k``, and A select the subclaim to
recurse on (spec 2.1); a human check ends it, in variant (a) or (b) (spec 2.6). The number of
levels is a dynamic parameter, so one compiled program plays every length up to the tree's
depth. Mode ``"exact"`` replaces every judge sample and A's direction and answer by its
expectation (spec 2.2); ``"sampled"`` draws everything. :func:`expected_payoff` sums exact-mode
payoffs over every path with A's path probabilities: the full expectation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.bits import bit_table
from dedebate.protocols.costs import Costs
from dedebate.protocols.prover_estimator_interface import Estimator, Prover
from dedebate.trees.tree import ClaimTree

MAX_ENUMERATED_PATHS = 1 << 21


@dataclasses.dataclass(frozen=True)
class PEDStatic:
    """Static protocol options (hashable; pass as a static argument to ``jit``)."""

    # "exact" (judge samples, A's direction and root answer replaced by expectations; A's
    # decompositions and selections still drawn or forced) or "sampled"
    mode: str = "exact"
    # "a" (the human checks the claim reached) or "b" (B also estimates the pieces of the last claim
    # and the human checks the selected piece) (spec 2.6)
    final_round: str = "a"
    # in variant (b), the weight of the human check: "one" (the paper's "lose eps_0") or "rho"
    # (which closes the completeness telescoping)
    final_weight: str = "one"
    # allow the direction s = 0; otherwise its mass goes to a fair coin between -1 and +1
    allow_zero_direction: bool = False

    def __post_init__(self):
        if self.mode not in ("exact", "sampled"):
            raise ValueError(f"mode={self.mode!r}: allowed values are 'exact' and 'sampled'")
        if self.final_round not in ("a", "b"):
            raise ValueError(f"final_round={self.final_round!r}: allowed values are 'a' and 'b'")
        if self.final_weight not in ("one", "rho"):
            raise ValueError(f"final_weight={self.final_weight!r}: allowed values are 'one', 'rho'")
        if self.allow_zero_direction not in (True, False):
            raise ValueError(f"allow_zero_direction={self.allow_zero_direction!r}: need a bool")


@struct.dataclass
class PEDParams:
    """Dynamic protocol numbers (vmappable)."""

    # float32 >= 1, the stability parameter; rewards grow by rho per round (r = 1/rho)
    rho: jax.Array
    # int32, how many levels of the tree the debate descends (-1: all of them). A debate shorter
    # than the tree keeps scanning as a masked no-op and the human judges the claim it stopped at
    rounds: jax.Array


def ped_params(rho, rounds=None) -> PEDParams:
    """Validated :class:`PEDParams`: finite ``rho >= 1``, ``rounds >= 1`` (None: the whole tree)."""
    a = np.asarray(rho, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a < 1):
        raise ValueError(f"rho={rho!r}: the stability parameter must be a finite number >= 1")
    if rounds is None:
        rounds = -1
    else:
        b = np.asarray(rounds)
        if not np.issubdtype(b.dtype, np.integer) or np.any(b < 1):
            raise ValueError(f"rounds={rounds!r}: the number of rounds must be an integer >= 1")
    return PEDParams(jnp.asarray(rho, jnp.float32), jnp.asarray(rounds, jnp.int32))


@struct.dataclass
class PEDOutcome:
    """One prover-estimator debate; rewards are A's (zero-sum: ``U_B = -u_a``), no verdict field.

    Arrays over rounds have ``tree.depth`` entries in protocol order (k = d, d-1, ...); entries past
    ``costs.rounds`` (the levels descended) are masked (reward 0); ``costs``: docs/outcomes.md.
    """

    u_a: jax.Array  # float32: r_init + sum(r_rounds) + r_final
    r_init: jax.Array  # float32: the initialisation reward
    r_rounds: jax.Array  # float32 [depth]: the consistency rewards
    r_final: jax.Array  # float32: the human check's reward
    answer: jax.Array  # float32: A's answer (its probability of 1 in exact mode)
    a_correct: jax.Array  # float32: (expected) 1 iff A's answer is the truth
    p_d: jax.Array  # float32: B's initial estimate
    nodes: jax.Array  # int32 [depth + 1]: the claims visited; the last is the one the human judged
    cands: jax.Array  # int32 [depth]: A's decompositions
    sels: jax.Array  # int32 [depth]: A's selections
    directions: jax.Array  # float32 [depth + 1]: E[s] (exact) or the sampled s; last: final check
    phats: jax.Array  # float32 [depth + 1]: the estimates phat_k under debate
    pis: jax.Array  # float32 [depth]: pi_k = E_{z ~ P_k} M_D(y^k, z)
    log_prob: jax.Array  # float32: of A's drawn or forced choices (sampled: answer, directions too)
    costs: Costs


def _safe_log(p):
    return jnp.log(jnp.maximum(p, 0.0))


def sample_index(u, probs) -> jax.Array:
    """The first int32 i with ``cumsum(probs)[i] > u * sum(probs)`` (never one of probability 0)."""
    c = jnp.cumsum(probs)
    return jnp.sum(c <= u * c[-1]).astype(jnp.int32)


def _directions(probs, settings: PEDStatic):
    """Directions over (-1, 0, +1); without ``s = 0`` its mass goes to a fair coin (2.6)."""
    # E[s], hence every exact reward, is unchanged.
    probs = probs.astype(jnp.float32)
    if not settings.allow_zero_direction:
        half = 0.5 * probs[1]
        probs = jnp.stack([probs[0] + half, jnp.float32(0.0), probs[2] + half])
    return probs


def play(
    settings: PEDStatic,
    params: PEDParams,
    prover: Prover,
    estimator: Estimator,
    tree: ClaimTree,
    key,
    forced=None,
) -> PEDOutcome:
    """Play one prover-estimator debate on ``tree`` (spec 2.1); pure and vmappable.

    The debate descends ``n = params.rounds`` levels (all by default). Variant (a): ``d = n``,
    consistency rounds ``k = d..1``, the human judges the claim reached. Variant (b): ``d = n - 1``,
    consistency rounds ``k = d..0`` (B also estimates the pieces of the last claim), the human
    checks the selected piece with weight 1 or rho (``settings.final_weight``). A's direction is
    fixed before B speaks and its selection never sees the sample ``z^k`` (spec 2.4.1, 2.4.2).
    ``key`` is unused in exact mode with forced paths or a deterministic prover. ``forced`` (int32
    ``[tree.depth, 2]``) fixes A's (candidate, selection) per round, its probability under A's
    strategy in ``log_prob``; entries past ``n`` must be 0 (other entries there get probability 0,
    so that enumerating all paths counts each debate once).
    """
    depth = tree.depth
    exact = settings.mode == "exact"
    dirs = jnp.asarray([-1.0, 0.0, 1.0], jnp.float32)
    bits = jnp.asarray(bit_table(tree.q), jnp.float32)
    r = 1.0 / params.rho
    n = jnp.where(params.rounds < 0, depth, jnp.minimum(params.rounds, depth)).astype(jnp.int32)
    d = n if settings.final_round == "a" else n - 1
    view_a = tree if prover.sees_truth else tree.public()
    view_b = tree if estimator.sees_truth else tree.public()
    # All of an episode's randomness in one draw: per round (direction, candidate, z, selection),
    # then (answer, zhat, final direction); each used by an inverse-CDF draw (exact in law). In
    # exact mode a prover that declares ``deterministic = True`` (one-hot decompositions and
    # selections) takes its argmax choices and no random numbers are drawn.
    argmax_path = exact and bool(getattr(prover, "deterministic", False))
    if argmax_path or (exact and forced is not None):
        uni = jnp.zeros((depth + 1, 4), jnp.float32)
    else:
        uni = jax.random.uniform(key, (depth + 1, 4))

    # ---- initialisation -------------------------------------------------------------------
    pa = jnp.clip(prover.answer(view_a).astype(jnp.float32), 0.0, 1.0)
    p_d = jnp.clip(estimator.initial(view_b).astype(jnp.float32), 0.0, 1.0)
    truth_root = tree.truth[0].astype(jnp.float32)
    w_init = r ** (d + 1).astype(jnp.float32)
    if exact:
        r_init = w_init * (pa * p_d + (1.0 - pa) * (1.0 - p_d))
        answer = pa
        a_correct = truth_root * pa + (1.0 - truth_root) * (1.0 - pa)
        logp0 = jnp.float32(0.0)
    else:
        a = (uni[depth, 0] < pa).astype(jnp.float32)
        zhat = (uni[depth, 1] < p_d).astype(jnp.float32)
        r_init = w_init * (a == zhat).astype(jnp.float32)
        answer = a
        a_correct = (a == truth_root).astype(jnp.float32)
        logp0 = jnp.where(a == 1, _safe_log(pa), _safe_log(1.0 - pa))

    # ---- consistency rounds k = d, d-1, ..., d - n + 1 ------------------------------------
    ts = jnp.arange(depth, dtype=jnp.int32)
    if forced is None:
        forced_arr = jnp.zeros((depth, 2), jnp.int32)
    else:
        forced_arr = jnp.asarray(forced, jnp.int32).reshape(depth, 2)

    def step(carry, xs):
        node, phat, logp = carry
        t, u, f = xs
        k = d - t
        active = t < n
        # A's direction is fixed from (yhat^k, phat_k) before B speaks (spec 2.4.1).
        dprob = _directions(prover.direction(view_a, node, phat, k), settings)
        cprob = prover.decompose(view_a, node, phat, k).astype(jnp.float32)
        if forced is not None:
            c = f[0]
        elif argmax_path:
            c = jnp.argmax(cprob).astype(jnp.int32)
        else:
            c = sample_index(u[1], cprob)
        lp = _safe_log(cprob[c])
        logits = estimator.joint(view_b, node, c, phat, k).astype(jnp.float32)
        joint = jax.nn.softmax(logits)
        marg = joint @ bits
        md = tree.md(node, c).astype(jnp.float32)
        pi = joint @ md
        weight = r ** k.astype(jnp.float32)
        if exact:
            s = dprob @ dirs
            reward = weight * s * (pi - phat)
        else:
            si = sample_index(u[0], dprob)
            s = dirs[si]
            lp = lp + _safe_log(dprob[si])
            z = sample_index(u[2], joint)
            reward = weight * s * (md[z] - phat)
        # Selection sees P_k (marginals, pi) but never the sampled z^k (spec 2.4.2).
        sprob = prover.select(view_a, node, c, marg, pi, phat, k).astype(jnp.float32)
        if forced is not None:
            j = f[1]
        elif argmax_path:
            j = jnp.argmax(sprob).astype(jnp.int32)
        else:
            j = sample_index(u[3], sprob)
        lp = lp + _safe_log(sprob[j])
        # past the last round: a masked no-op (a forced path must choose 0 there)
        idle_lp = 0.0 if forced is None else jnp.where(jnp.all(f == 0), 0.0, -jnp.inf)
        logp = logp + jnp.where(active, lp, idle_lp)
        nxt = jnp.where(active, tree.child(node, c, j), node)
        phat_next = jnp.where(active, marg[j], phat)
        out = (node, c, j, s, phat, pi, jnp.where(active, reward, 0.0))
        return (nxt, phat_next, logp), out

    (node_f, phat_f, logp), (nodes, cands, sels, ss, phats, pis, rewards) = jax.lax.scan(
        step, (jnp.int32(0), p_d, logp0), (ts, uni[:depth], forced_arr)
    )

    # ---- final human check ----------------------------------------------------------------
    k_last = d - n
    dprob = _directions(prover.direction(view_a, node_f, phat_f, k_last), settings)
    truth_f = tree.truth[node_f].astype(jnp.float32)  # the judge's oracle, not a player's view
    w_final = (
        params.rho if (settings.final_round == "b" and settings.final_weight == "rho") else 1.0
    )
    if exact:
        s_f = dprob @ dirs
    else:
        si = sample_index(uni[depth, 2], dprob)
        s_f = dirs[si]
        logp = logp + _safe_log(dprob[si])
    r_final = w_final * s_f * (truth_f - phat_f)

    u_a = r_init + rewards.sum() + r_final
    zero = jnp.int32(0)
    return PEDOutcome(
        u_a=u_a,
        r_init=r_init,
        r_rounds=rewards,
        r_final=r_final,
        answer=answer,
        a_correct=a_correct,
        p_d=p_d,
        nodes=jnp.concatenate([nodes, node_f[None]]),
        cands=cands,
        sels=sels,
        directions=jnp.concatenate([ss, s_f[None]]),
        phats=jnp.concatenate([phats, phat_f[None]]),
        pis=pis,
        log_prob=logp,
        costs=Costs(
            alice_queries=zero,
            bob_queries=zero,
            verifier_queries=jnp.int32(1),
            bits_read=zero,
            rounds=n,
        ),
    )


@struct.dataclass
class ExpectedPayoff:
    """Exact expectation over the judge's samples and all of A's randomness."""

    u_a: jax.Array  # float32, E[U_A]
    a_correct: jax.Array  # float32, the probability that A's answer is the truth
    total_prob: jax.Array  # float32, the sum of A's path probabilities (1 up to rounding)


def all_paths(tree: ClaimTree) -> np.ndarray:
    """Every (candidate, selection) sequence: int32 ``[(C q)^D, D, 2]`` (C candidates, depth D)."""
    b, depth = tree.branching, tree.depth
    n = b**depth
    if n > MAX_ENUMERATED_PATHS:
        raise ValueError(
            f"tree.depth={depth}: enumerating {n} paths (q={tree.q}, n_cand={tree.n_cand}) exceeds "
            f"{MAX_ENUMERATED_PATHS}; use sampled episodes instead"
        )
    codes = np.arange(n, dtype=np.int64)[:, None]
    digits = (codes // (b ** np.arange(depth - 1, -1, -1))[None, :]) % b
    return np.stack([digits // tree.q, digits % tree.q], axis=-1).astype(np.int32)


def expected_payoff(
    settings: PEDStatic,
    params: PEDParams,
    prover: Prover,
    estimator: Estimator,
    tree: ClaimTree,
    batch_size: int = 4096,
) -> ExpectedPayoff:
    """``E[U_A]`` exactly: the exact-mode payoff of every path weighted by A's probability of it.

    Independent of :func:`play`'s sampling, so it checks the sampled mode and the path draws.
    """
    exact = dataclasses.replace(settings, mode="exact")
    paths = jnp.asarray(all_paths(tree))
    key = jax.random.key(0)  # unused in exact mode with forced paths

    def one(f):
        out = play(exact, params, prover, estimator, tree, key, forced=f)
        w = jnp.exp(out.log_prob)
        pos = w > 0
        return (jnp.where(pos, w * out.u_a, 0.0), jnp.where(pos, w * out.a_correct, 0.0), w)

    u, ac, w = jax.lax.map(one, paths, batch_size=min(batch_size, paths.shape[0]))
    return ExpectedPayoff(u_a=u.sum(), a_correct=ac.sum(), total_prob=w.sum())
