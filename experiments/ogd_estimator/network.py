"""The Flax estimator against tabular Algorithm 1 on the same random problems (spec PED 5.3, 10).

:func:`net_problems` draws the problems; :func:`net_training` sets the training grid (learning
rates x seeds) up as an initial state and a compiled-once chunk program for a chunked host driver
(the driver, with its checkpoints and logging, is the caller's); :func:`net_run` reads the
driver's result into a :class:`NetRun`; :func:`comparison_rows` pairs every network run with the
tabular run on its problem. ``spec`` is any object with the ``net_*`` fields of the OGD
experiment's config, ``seeds``, ``deltas`` and the fields
:mod:`.problems` reads.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.estimators.train import NetTrainLog, NetTrainStatic, grid_programs, net_train_params

from .problems import build_problems

PROBLEM_KEY = 201
"""The problems come from ``fold_in(key, PROBLEM_KEY)``."""
INIT_KEY = 200
"""The seeds' network initialisations come from ``split(fold_in(key, INIT_KEY), seeds)``."""


def net_problems(spec, key):
    """The comparison's ``spec.seeds`` random problems with |Z| = 2^net_q."""
    return build_problems(spec, jax.random.fold_in(key, PROBLEM_KEY), 2**spec.net_q)


@dataclasses.dataclass(frozen=True)
class NetTraining:
    """A training grid ready for a chunked driver: ``chunk_fn(hp, state, *data)`` runs
    ``chunk_len`` rounds of every (lr, seed) run and returns ``(state, log, final max|Adv|)``;
    ``init_state`` and ``monitors`` are the driver's state and monitor templates (time axis 2)."""

    chunk_fn: Any
    hp: Any
    data: tuple
    chunk_len: int
    n_chunks: int
    init_state: dict
    monitors: dict


def net_training(spec, key) -> NetTraining:
    """The Flax estimators' training grid (learning rates x seeds, one compiled chunk program)."""
    problems, families, feats = net_problems(spec, key)
    static = NetTrainStatic(
        rounds=spec.net_rounds,
        hidden=tuple(spec.net_hidden),
        optimizer=spec.net_optimizer,
        best_response=spec.net_best_response,
    )
    hp = net_train_params([spec.net_delta] * len(spec.net_lrs), list(spec.net_lrs))
    keys = jax.random.split(jax.random.fold_in(key, INIT_KEY), spec.seeds)
    chunk_len = min(spec.net_checkpoint_every, spec.net_rounds)
    n_chunks = math.ceil(spec.net_rounds / chunk_len)
    g, s, padded = len(spec.net_lrs), spec.seeds, n_chunks * chunk_len
    init, chunk_fn = grid_programs(static, chunk_len)
    data = (families, problems, feats)
    nan = np.full((g, s, padded), np.nan, np.float32)
    monitors = {
        "net": NetTrainLog(max_adv=nan, dist_adv=nan, chosen=np.full((g, s, padded), -1, np.int32))
    }
    init_state = {
        "train": init(hp, keys, problems, feats),
        "final_max_adv": np.full((g, s), np.nan, np.float32),
    }
    return NetTraining(chunk_fn, hp, data, chunk_len, n_chunks, init_state, monitors)


@dataclasses.dataclass
class NetRun:
    """The network training: final state and per-round log (axes ``[G, S, ...]``: learning rates
    x seeds), ``max|Adv|`` at the end, where it started (0, or the rounds restored from a
    checkpoint), timings of this process (compilation; the chunks it ran) and the first log step
    after its rows."""

    state: object
    max_adv: np.ndarray  # [G, S, rounds]
    dist_adv: np.ndarray  # [G, S, rounds]
    chosen: np.ndarray  # [G, S, rounds]
    final_max_adv: np.ndarray  # [G, S]
    resumed_from: int
    compile_s: float
    wall_s: float
    chunks_run: int
    next_step: int


def net_run(
    spec, training: NetTraining, done, compile_s: float = 0.0, wait_s: float = 0.0
) -> NetRun:
    """A :class:`NetRun` from a chunked driver's result."""
    r = spec.net_rounds
    log = done.monitors["net"]
    return NetRun(
        state=done.state["train"],
        max_adv=log.max_adv[:, :, :r],
        dist_adv=log.dist_adv[:, :, :r],
        chosen=log.chosen[:, :, :r],
        final_max_adv=np.asarray(done.state["final_max_adv"]),
        resumed_from=min(done.restored * training.chunk_len, r),
        compile_s=compile_s,
        wall_s=sum(done.wall_s) - wait_s,
        chunks_run=done.ran,
        next_step=done.next_step,
    )


def tabular_inputs(spec, key) -> tuple:
    """Inputs of the tabular comparison, ``solve_grid``'s ``(families, problems, deltas)``."""
    problems, families, _ = net_problems(spec, key)
    return families, problems, jnp.full((len(spec.deltas),), spec.net_delta, jnp.float32)


def comparison_rows(spec, net: NetRun, tab_summary) -> list[dict]:
    """One row per (seed, learning rate): the network's result beside the tabular run's."""
    tab_max_adv = np.asarray(tab_summary.max_adv[:, 0])
    tab_steps = np.asarray(tab_summary.steps[:, 0])
    rows = []
    for s in range(spec.seeds):
        for g, lr in enumerate(spec.net_lrs):
            rows.append(
                {
                    "seed": s,
                    "lr": lr,
                    "delta": spec.net_delta,
                    "n_z": 2**spec.net_q,
                    "net_final_max_adv": float(net.final_max_adv[g, s]),
                    "net_rounds_to_delta": int(net.state.rounds_to_delta[g, s]),
                    "net_updates": int(net.state.updates[g, s]),
                    "tab_steps": int(tab_steps[s]),
                    "tab_max_adv": float(tab_max_adv[s]),
                    "net_trace": net.max_adv[g, s],
                }
            )
    return rows
