"""The runs of a stochastic self-play study: instances, training runs, initial state, checks.

A study trains learned pairs (:mod:`dedebate.training.stochastic_selfplay`) on an F2 yes- and
no-instance (:func:`setup`): the main runs, optionally a tail ablation (``vera_grad_mix = 0``)
and one run per extra n_B, every run of an instance from the same seed keys (:func:`seed_keys`).
The main runs' monitors become log rows (:func:`chunk_rows`); trained pairs are measured exactly
(:func:`dedebate.exact.selfplay.measure_pairs`; a run's rows: :func:`host`) and checked by
Monte-Carlo play (:func:`monte_carlo_wins`). :func:`f64_words` /
:func:`words_f64` carry float64 numbers through a float32 trace unrounded (the swept function's
host measurement reads the instances' probabilities from them).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.selfplay_players import AliceParams, BobParams, bob_as_zoo, learned_alice
from dedebate.exact.selfplay import measure_pair, measure_pairs, take
from dedebate.machines.fixtures import f2_target
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import (
    DebateParams,
    debate_static,
    lean_defaults,
    make_vera,
    trial_keys,
)
from dedebate.protocols.stochastic_batch import run_trials
from dedebate.training.stochastic_selfplay import (
    SelfPlayMonitors,
    SelfPlayStatic,
    selfplay_params,
)

CASES = ("yes", "no")
"""The instances of a study, in training order."""

MEASURED = (
    "value",
    "honest_alice_vs_bob",
    "value_vs_honest_bob",
    "gap",
    "tracking",
    "hit",
    "false_alarm",
)
"""Per-seed metrics of :func:`point_metrics`, named ``{instance}/s{seed}/{name}``."""


def setup(cfg):
    """``(instances, params, constants, static, hp)`` of the main run, from the config's fields.

    ``instances = [("yes", fixture), ("no", fixture)]`` (host, float64); the Lean defaults at (K, T)
    and their constants; the :class:`SelfPlayStatic` and the validated :class:`SelfPlayParams`.
    """
    instances = [
        ("yes", f2_target(cfg.T, cfg.p_yes, spread=cfg.spread)),
        ("no", f2_target(cfg.T, cfg.p_no, spread=cfg.spread)),
    ]
    K = instances[0][1].K
    params = lean_defaults(K, cfg.T)
    constants = params.constants(K, cfg.T)
    static = SelfPlayStatic(T=cfg.T, hidden=cfg.hidden, steps=cfg.steps, log_every=cfg.log_every)
    hp = selfplay_params(
        constants,
        lr_a=cfg.lr_a,
        lr_b=cfg.lr_b,
        n_b=cfg.n_b,
        alice_init=cfg.alice_init,
        bob_init=cfg.bob_init,
        vera_grad_mix=cfg.vera_grad_mix,
    )
    return instances, params, constants, static, hp


def seed_keys(key: jax.Array, instance: int, seeds: int) -> jax.Array:
    """The seed keys of one instance: seed s from ``fold_in(fold_in(key, instance), s)``."""
    k = jax.random.fold_in(key, instance)
    return jnp.stack([jax.random.fold_in(k, s) for s in range(seeds)])


def chunk_rows(
    case: str, mon: SelfPlayMonitors, first: int, log_every: int
) -> list[tuple[int, dict]]:
    """``(step, row)`` per period: the seeds' mean, min, max value and mean tracking error."""
    val, trk = np.asarray(mon.value), np.asarray(mon.tracking)
    return [
        (
            first + (j + 1) * log_every,
            {
                "instance": case,
                "value_mean": float(val[:, j].mean()),
                "value_min": float(val[:, j].min()),
                "value_max": float(val[:, j].max()),
                "tracking_mean": float(trk[:, j].mean()),
            },
        )
        for j in range(val.shape[1])
    ]


def monte_carlo_wins(
    T: int,
    fx,
    constants: DebateParams,
    alice: AliceParams,
    bob: BobParams,
    key: jax.Array,
    trials: int,
) -> np.ndarray:
    """Alice's wins per seed (int ``[S]``) in ``trials`` debates of every seed's trained pair."""
    S = int(np.shape(bob.w_dev)[0])
    idx = np.repeat(np.arange(S), trials)
    alices = learned_alice(jax.tree.map(lambda x: np.asarray(x)[idx], alice), constants.b)
    alices = alices.replace(
        unit=np.full(idx.size, constants.b, np.float32), n_samples=np.zeros(idx.size, np.int32)
    )
    zoo = bob_as_zoo(bob, constants.b)
    bobs = jax.tree.map(
        lambda x: (
            np.broadcast_to(np.asarray(x), (S,) + np.shape(x))[idx]
            if np.ndim(x) == 0
            else np.asarray(x)[idx]
        ),
        zoo,
    )
    out = run_trials(
        debate_static(T),
        fx.machine,
        alices,
        bobs,
        make_vera(constants),
        trial_keys(key, idx.size),
        axes=(None, 0, 0, None),
    )
    return np.asarray(out.alice_wins).reshape(S, trials).sum(axis=1)


def f64_words(x: float) -> np.ndarray:
    """A float64 as uint32 ``[2]`` (travels through a float32 trace unrounded)."""
    return np.array([x], np.float64).view(np.uint32)


def words_f64(w) -> float:
    """The float64 of :func:`f64_words`."""
    return float(np.ascontiguousarray(np.asarray(w, np.uint32)).view(np.float64)[0])


def point_metrics(measured: dict, gap_tol: float) -> dict[str, float]:
    """The float64 metrics of a study's main runs, as a sweep row holds them.

    Per seed :data:`MEASURED` (``{instance}/s{seed}/{name}``); per instance ``value_mean/min/max``,
    ``gap_mean/max`` and ``converged_frac`` (gap <= ``gap_tol``); ``honest_alice_vs_bob_min`` (yes)
    and ``alice_vs_honest_bob_max`` (no), not finite when a seed is not.
    """
    out = {}
    for case in CASES:
        ev, honest = measured[case]
        per = [{**e, "honest_alice_vs_bob": h} for e, h in zip(ev, honest)]
        for s, e in enumerate(per):
            out.update({f"{case}/s{s}/{m}": float(e[m]) for m in MEASURED})
        val = np.array([e["value"] for e in per])
        gap = np.array([e["gap"] for e in per])
        out |= {
            f"{case}/value_mean": float(val.mean()),
            f"{case}/value_min": float(val.min()),
            f"{case}/value_max": float(val.max()),
            f"{case}/gap_mean": float(gap.mean()),
            f"{case}/gap_max": float(gap.max()),
            f"{case}/converged_frac": float(np.mean(gap <= gap_tol)),
        }
    out["honest_alice_vs_bob_min"] = _fail_closed(min, measured["yes"][1])
    out["alice_vs_honest_bob_max"] = _fail_closed(
        max, [e["value_vs_honest_bob"] for e in measured["no"][0]]
    )
    return out


def measure_host(cfg, words, players) -> dict[str, np.ndarray]:
    """The host measurement of a swept point (a ``jax.pure_callback`` target)."""
    p_yes, p_no, spread, gap_tol = (words_f64(w) for w in np.asarray(words))
    row = dataclasses.replace(cfg, p_yes=p_yes, p_no=p_no, spread=spread, gap_tol=gap_tol)
    instances, _, constants, _, _ = setup(row)
    measured = {
        case: measure_pairs(fx, prefix_tree(fx.machine), constants, *players[case])
        for case, fx in instances
    }
    dt = jax.dtypes.canonicalize_dtype(np.float64)
    return {k: np.asarray(v, dt) for k, v in point_metrics(measured, gap_tol).items()}


def _case(carry, i):
    """Instance ``i``'s players ``(alice, bob)`` of a trained row, on the device."""
    # device arrays like those the swept measurement gets, so it reuses their programs
    dev = jax.devices()[0]
    return tuple(
        jax.tree.map(lambda x: jax.device_put(np.asarray(x)[i], dev), p)
        for p in (carry.alice, carry.bob)
    )


def host(cfg, _seed, key, measured) -> dict:
    """Per instance: the main pairs' exact measurements and honest Alice against them, the
    other rows' cheap measurements and (``mc_trials``) the Monte-Carlo wins (host, float64)."""
    instances, _, constants, _, _ = setup(cfg)
    state, results = measured["state"], {}
    for i, (case, fx) in enumerate(instances):
        lv, (alice, bob) = prefix_tree(fx.machine), _case(state["main"], i)
        ev, honest = measure_pairs(fx, lv, constants, alice, bob)
        res = {"p1": fx.p1(), "ev": ev, "honest_alice": honest, "sweep": {}}
        for name in [n for n in state if n != "main"]:
            a1, b1 = _case(state[name], i)
            evs = [
                measure_pair(lv, take(a1, s), take(b1, s), constants, full=False)
                for s in range(cfg.seeds)
            ]
            if name == "ablation":
                res["ablation"] = evs
            else:
                res["sweep"][int(name.removeprefix("n_b_"))] = evs
        if cfg.mc_trials > 0:
            res["mc_wins"] = monte_carlo_wins(
                cfg.T,
                fx,
                constants,
                alice,
                bob,
                jax.random.fold_in(jax.random.fold_in(key, i), 7),
                cfg.mc_trials,
            )
        results[case] = res
    return results


def _fail_closed(pick, values) -> float:
    """``pick`` (min or max) of floats, NaN when there is none or one is NaN."""
    xs = [float(v) for v in values]
    return math.nan if not xs or any(math.isnan(v) for v in xs) else pick(xs)
