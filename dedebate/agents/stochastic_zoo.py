"""The stochastic debate's zoo as one batch of debates, and its Monte-Carlo measurement.

A zoo cell (one K, T and set of constants) stacks every debate the completeness and soundness
rows of spec DED 9 need: the Alice zoo (with an optimised Alice) against honest Bob on a
no-instance, and honest Alice against the Bob zoo (with honest Bob and an optimised Bob) on a
yes-instance. :func:`zoo_stats` plays ``trials`` debates per row as one pure function (one lane
axis, optionally in batches that do not change the numbers); :func:`cell_metrics` turns its
counts into rates with 95% Wilson intervals, usable inside a jitted sweep.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.stochastic_players import (
    A_HONEST,
    A_PER_STEP,
    B_HONEST,
    B_LEARNED,
    alice_lies_from_params,
    bob_logits_from_params,
    completeness_zoo,
    soundness_zoo,
    stack,
    zoo_alice,
    zoo_bob,
)
from dedebate.core.stats import Z95, wilson_jnp
from dedebate.programs import FAST_COMPILE, cpu_only, jit, program_cache
from dedebate.protocols.stochastic import (
    DebateParams,
    DebateStatic,
    make_vera,
    play,
    play_fast,
    trial_keys,
)
from dedebate.protocols.stochastic_batch import replay_chunk, replay_unresolved

OPTIMISED = "optimised (ES on exact acceptance)"
# Planned memory of one debate in a batch at T steps (its machine, players and play-loop carry
# gathered per lane, and XLA's temporaries): LANE_BYTES_PER_STEP * T + LANE_BYTES_FIXED.
LANE_BYTES_PER_STEP, LANE_BYTES_FIXED = 64, 4096
FAST_WORK = 1 << 22
"""Debate steps (lanes x T) of a zoo cell from which :func:`zoo_stats` plays fast and replays
in-program; below, playing the exact :func:`play` alone (one program to compile, not two) costs
less in all (measured on a CPU: docs/accelerators.md)."""


def lane_bytes(T: int) -> int:
    """Planned bytes per debate of a batch: ``LANE_BYTES_PER_STEP * T + LANE_BYTES_FIXED``."""
    return LANE_BYTES_PER_STEP * T + LANE_BYTES_FIXED


def alice_members(consts: DebateParams, theta_alice) -> tuple[list[str], list]:
    """The soundness zoo of spec DED 9 plus the optimised per-step liar."""
    names, members = soundness_zoo(consts)
    names.append(OPTIMISED)
    members.append(zoo_alice(consts, A_PER_STEP, lies=alice_lies_from_params(theta_alice, consts)))
    return names, members


def bob_members(consts: DebateParams, theta_bob) -> tuple[list[str], list]:
    """``(names, players)``: the completeness zoo (spec DED 9), honest and optimised Bob."""
    names, members = completeness_zoo(consts)
    names.append("honest")
    members.append(zoo_bob(consts, B_HONEST))
    w, w_dev, w_prev = bob_logits_from_params(theta_bob, consts)
    names.append(OPTIMISED)
    members.append(zoo_bob(consts, B_LEARNED, w=w, w_dev=float(w_dev), w_prev=float(w_prev)))
    return names, members


def member_names(consts: DebateParams) -> tuple[list[str], list[str]]:
    """The names of :func:`alice_members` and :func:`bob_members`, without building players."""
    alices, bobs = soundness_zoo(consts)[0], completeness_zoo(consts)[0]
    return alices + [OPTIMISED], bobs + ["honest", OPTIMISED]


def zoo_cell(consts: DebateParams, m_no, m_yes, theta_a, theta_b):
    """``(dynamic, alice names, bob names)``: every debate of a (K, T, constants) cell.

    ``dynamic`` holds ``alice``, ``bob``, ``machine`` (one row per debate kind: the Alice members on
    ``m_no`` first, then the Bob members on ``m_yes``) and the shared ``vera``.
    """
    a_names, alices = alice_members(consts, theta_a)
    b_names, bobs = bob_members(consts, theta_b)
    ma, mb = len(alices), len(bobs)
    dyn = {
        "alice": stack(alices + [zoo_alice(consts, A_HONEST)] * mb),
        "bob": stack([zoo_bob(consts, B_HONEST)] * ma + bobs),
        "machine": stack([m_no] * ma + [m_yes] * mb),
        "vera": make_vera(consts),
    }
    return dyn, a_names, b_names


def zoo_stats(
    spec: DebateStatic,
    d,
    key,
    trials: int,
    ma: int,
    hh: int,
    max_lanes: int = 0,
    fast: bool | None = None,
) -> dict:
    """The Monte-Carlo measurement of one zoo cell (pure JAX).

    ``trials`` debates per row with common random numbers per side: every soundness row (the first
    ``ma``) uses the keys ``trial_keys(fold_in(key, 0), trials)``, every completeness row
    ``trial_keys(fold_in(key, 1), trials)``. The rows x trials debates run as one lane axis,
    ``max_lanes`` at a time (0: all; the last batch padded with repeats); the numbers do not depend
    on the batch size. With ``fast`` (None: from :data:`FAST_WORK` debate steps), every lane plays
    :func:`play_fast` and the few it leaves unresolved replay the exact :func:`play` in-program;
    without, every lane plays :func:`play`: the same outcomes either way. Returns int32 ``wins`` and
    ``aborts`` per row, the honest-vs-honest row (``hh``) mean queries of Alice (with
    ``queries_alice_sd``) and Bob and mean ``rounds``, and ``queries_vera_max`` / ``_mean``.
    """
    rows = d["alice"].kind.shape[0]
    n = rows * trials
    width = n if max_lanes <= 0 else min(n, max_lanes)
    batches = -(-n // width)
    keys = [trial_keys(jax.random.fold_in(key, s), trials) for s in (0, 1)]
    if fast is None:
        fast = n * spec.T >= FAST_WORK

    def lane(fn, i):
        r, t = i // trials, i % trials
        k = jax.random.wrap_key_data(
            jnp.where(r >= ma, jax.random.key_data(keys[1][t]), jax.random.key_data(keys[0][t])),
            impl=jax.random.key_impl(key),
        )
        take = functools.partial(jax.tree.map, lambda x: x[r])
        return fn(spec, take(d["machine"]), take(d["alice"]), take(d["bob"]), d["vera"], k)

    def exact(i):
        return _fields(lane(play, i))

    def first(i):
        if not fast:
            return exact(i)
        out, unresolved = lane(play_fast, i)
        return _fields(out), unresolved

    idx = jnp.arange(batches * width) % n
    if batches == 1:
        outs = jax.vmap(first)(idx)
    else:
        outs = jax.lax.map(jax.vmap(first), idx.reshape(batches, width))
        outs = jax.tree.map(lambda x: x.reshape(-1), outs)
    outs = jax.tree.map(lambda x: x[:n], outs)
    if fast:
        out, unresolved = outs
        outs = replay_unresolved(
            exact, out, unresolved, replay_chunk(width), spec.bob_draw == "lazy"
        )
    verdict, aborted, qa, qb, qv, rounds = (x.reshape(rows, trials) for x in outs)
    h = ma + hh
    return {
        "wins": jnp.sum(verdict, axis=1, dtype=jnp.int32),
        "aborts": jnp.sum(aborted, axis=1, dtype=jnp.int32),
        "queries_alice": jnp.mean(qa[h]),
        "queries_alice_sd": jnp.std(qa[h], ddof=1),
        "queries_bob": jnp.mean(qb[h]),
        "rounds": jnp.mean(rounds[h].astype(jnp.float32)),
        "queries_vera_max": jnp.max(qv),
        "queries_vera_mean": jnp.mean(qv),
    }


def _fields(out):
    c = out.costs
    return out.alice_wins, out.aborted, c.alice_queries, c.bob_queries, c.verifier_queries, c.rounds


# XLA options of the zoo's programs on a JAX platform: FAST_COMPILE on a CPU (a shorter compile,
# programs as fast; wins, aborts and counts bit-identical, float32 query means may differ in the
# last digits; figures in docs/performance.md, "Stochastic debate"), XLA's defaults elsewhere.
compile_options = cpu_only(FAST_COMPILE)


@program_cache
def _zoo_stats_jit(platform: str):
    return jit(zoo_stats, static_argnums=(0, 3, 4, 5, 6), options=compile_options(platform))


def measure_cell(
    spec: DebateStatic, d, key, trials: int, ma: int, hh: int, max_lanes: int = 0
) -> dict:
    """:func:`zoo_stats` compiled (once per static arguments) and brought to the host."""
    cell = {k: d[k] for k in ("alice", "bob", "machine", "vera")}
    out = _zoo_stats_jit(jax.default_backend())(spec, cell, key, trials, ma, hh, max_lanes)
    return jax.tree.map(np.asarray, out)


def cell_metrics(st: dict, trials: int, ma: int, hh: int, name: str) -> dict:
    """A cell's rates from :func:`zoo_stats` (pure jnp, for a sweep row), prefixed by ``name``.

    ``honest_completeness``, ``completeness_min`` (over the Bob rows) and ``soundness_max`` (over
    the Alice rows), each with 95% Wilson ``_lo`` / ``_hi`` (of that member alone, not adjusted for
    picking the worst); ``holds`` (1 where the point estimates give completeness_min >= 3/5 and
    soundness_max <= 2/5); ``queries_alice`` (with a normal 95% interval), ``queries_bob``,
    ``rounds``, ``queries_vera_max`` / ``_mean``, summed ``aborts`` and each row's ``alice{i}_wins``
    / ``bob{j}_wins``.
    """
    wins = st["wins"]
    c_min, s_max = jnp.min(wins[ma:]), jnp.max(wins[:ma])
    m = {}
    for metric, count in (
        ("honest_completeness", wins[ma + hh]),
        ("completeness_min", c_min),
        ("soundness_max", s_max),
    ):
        v, lo, hi = wilson_jnp(count, trials)
        m[f"{name}/{metric}"], m[f"{name}/{metric}_lo"], m[f"{name}/{metric}_hi"] = v, lo, hi
    m[f"{name}/holds"] = ((5 * c_min >= 3 * trials) & (5 * s_max <= 2 * trials)).astype(jnp.float32)
    mean = st["queries_alice"]
    half = Z95 * st["queries_alice_sd"] / math.sqrt(trials)
    m[f"{name}/queries_alice"] = mean
    m[f"{name}/queries_alice_lo"], m[f"{name}/queries_alice_hi"] = mean - half, mean + half
    for k in ("queries_bob", "rounds", "queries_vera_max", "queries_vera_mean"):
        m[f"{name}/{k}"] = st[k]
    m[f"{name}/aborts"] = jnp.sum(st["aborts"])
    for i in range(wins.shape[0]):
        m[f"{name}/{'alice' if i < ma else 'bob'}{i if i < ma else i - ma}_wins"] = wins[i]
    return m
