"""Learned Alice and Bob for the stochastic-oracle debate, trained by self-play (spec DED 5,
training conventions of spec PED 8.5 / 10).

On a small F2 fixture (K = 2, T steps; P_M(1) = ``p_yes`` >= 2/3 and ``p_no`` <= 1/3), a learned
Alice (MLP claim ``p = pi + b * mlp(t, pi, prev bit, fraction of ones)``) and a learned Bob (abort
logit ``w[t] + w_dev |p - pi| / b + w_prev prev``, i.e. ZooBob ``B_LEARNED`` reading the expected
estimate pi) play the zero-sum game "Alice maximises P[out = 1]" with alternating Adam updates,
n_B Bob steps per Alice step, on the exact DP value (:mod:`dedebate.training.stochastic_selfplay`;
Vera's training surrogate is named there). Every reported number is exact (float64 DP with the
exact binomial Vera), with intervals over seeds, and the learned pairs are also played with
:func:`dedebate.protocols.stochastic.run_trials` (Monte Carlo, Wilson interval) as a check.

Rows and their pass criteria (fixed before the results were seen). The two proven rows and the
Monte-Carlo check are claims; the self-play outcome, tracking, abort targeting, schedule and
convergence rows are *findings* (``finding=True``): measured answers to the issue's questions,
reported in full with their criterion but not gating the run, because no theorem says self-play
must find the honest equilibrium.

* proven (spec DED 5.3): honest Alice vs every trained Bob >= the completeness bound at the
  instance; every trained Alice vs honest Bob <= 1 - the soundness bound at the instance;
* self-play outcome vs the Lean bounds: the trained pair's acceptance, worst seed, >= 0.6402 on
  the yes-instance and <= 0.3956 on the no-instance (not a theorem about learned pairs: it asks
  whether self-play reaches the protocol's guaranteed side);
* Monte Carlo agrees with the exact DP: the pooled Monte-Carlo acceptance against the seeds'
  mean exact value (score test; a Monte-Carlo row of the report's family-wise policy);
* claims track the truth: Alice's reach-weighted mean |p - pi| has its 95% upper bound (over
  seeds) below b (the must-abort threshold);
* Bob's aborts target real deviations: Youden's J = hit - false alarm (abort probability at probe
  deviations in [b, 4b] minus at [0, s), reach-weighted over visited prefixes) has its 95% lower
  bound (over seeds) >= 0.5;
* schedules (descriptive): training again with each n_B of ``n_b_sweep`` (same seeds), the
  largest n_B leaves no more no-instance seeds on the wrong side (acceptance > 1/2) than the
  smallest -- the spec PED 8.5 recommendation "several follower updates per leader update" taken
  as the criterion (this row was added after a diagnostic run at T = 6 had shown it failing);
* convergence: the exploitability gap (Alice's grid best response to the trained Bob minus Bob's
  exact best response to the trained Alice) is <= ``gap_tol`` for more than half of the seeds
  (Wilson lower bound > 1/2).

Training runs (per instance: the main run, the tail ablation, each n_B of the sweep) go in
``chunks`` jitted chunks each (:func:`dedebate.training.stochastic_selfplay.chunk_grid`, bit-equal
to one uninterrupted program), driven by the lab's chunked driver
(:func:`dedebate.lab.driver.run_chunks`); after each chunk the main run's monitors are logged (at
explicit steps, one clock over all training runs), and every ``checkpoint_every`` chunks (and
after the last) the whole training state -- players, Adam states, update counters, init keys,
monitors -- is an Orbax checkpoint.
``resume=true`` continues from the newest one and reproduces the uninterrupted run's numbers
exactly; the exact evaluation after training is recomputed (deterministic).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.stochastic_players import honest_alice
from dedebate.exact import acceptance_exact
from dedebate.lab.driver import run_chunks
from dedebate.lab.experiment import (
    Claim,
    ExperimentResult,
    mean_interval,
    strict_max,
    strict_min,
    wilson_interval,
)
from dedebate.lab.params import config_dataclass, param
from dedebate.machines.fixtures import f2_target
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import (
    debate_spec,
    lean_defaults,
    make_vera,
    run_trials,
    trial_keys,
)
from dedebate.training.stochastic_selfplay import (
    COMPILE_OPTIONS,  # noqa: F401  (the swept program's XLA options: lab contract)
    Monitors,
    SelfPlayStatic,
    bob_as_zoo,
    carry_axes,
    chunk_grid,
    chunk_lengths,
    evaluate,
    hparams,
    init_carry,
    init_grid,
    learned_alice,
    level_inputs,
    make_chunk,
    n_periods,
    take,
)

NAME = "stochastic_selfplay"
TITLE = "Stochastic debate self-play: learned Alice and Bob vs the Lean bounds"

COMPLETENESS_W = 0.6402  # spec DED 5.3 with the defaults at P_M(1) = 2/3 (rounded down)
SOUNDNESS_W = 0.3956  # 1 - 0.6044 (rounded up)


@config_dataclass
class Config:
    T: int = param(6, "steps of the F2 fixture (K = 2)", ge=3, le=10)
    p_yes: float = param(0.75, "P_M(1) of the yes-instance", ge=2 / 3, le=0.95)
    p_no: float = param(0.25, "P_M(1) of the no-instance", ge=0.05, le=1 / 3)
    spread: float = param(0.2, "F2 position probabilities p +- spread (all in [0, 1])", ge=0.0)
    seeds: int = param(8, "self-play runs per instance", ge=2, le=256)
    steps: int = param(1000, "Alice updates per run", ge=10, le=100_000)
    n_b: int = param(5, "Bob updates per Alice update", ge=1, le=1000)
    n_b_sweep: tuple[int, ...] = param(
        (1, 20), "further n_B values trained for the schedule row (distinct, != n_b; empty: "
        "skip the row)", ge=1, le=1000, max_len=8)
    hidden: int = param(16, "Alice's MLP width", ge=1, le=4096)
    lr_a: float = param(0.01, "Alice's Adam step size", gt=0.0)
    lr_b: float = param(0.05, "Bob's Adam step size", gt=0.0)
    alice_init: float = param(1.0, "typical initial lie |p - pi| in units of b", gt=0.0)
    bob_init: float = param(-2.0, "Bob's initial abort logit")
    vera_grad_mix: float = param(1.0, "weight of the heavy-tailed gradient term of Vera's "
                                 "training surrogate", ge=0.0)
    ablate_tail: bool = param(True, "also train with vera_grad_mix = 0 (reported in metrics)")
    gap_tol: float = param(0.05, "exploitability gap counted as converged", gt=0.0, lt=1.0)
    mc_trials: int = param(2000, "Monte-Carlo debates per seed and instance (0: skip)",
                           ge=0, le=1_000_000)
    log_every: int = param(20, "Alice updates between logged monitors", ge=1, le=100_000)
    chunks: int = param(5, "jitted chunks per training run (log + checkpoint chance after each), "
                        "at most ceil(steps / log_every)", ge=1, le=100_000)
    checkpoint_every: int = param(
        5, "save the training state every this many chunks (counted over all training runs; the "
        "last chunk is always saved; an Orbax save costs ~0.2-1 s)", ge=1, le=100_000)

    def __post_init__(self):
        if not (self.p_yes + self.spread <= 1 and self.p_no - self.spread >= 0):
            raise ValueError(f"spread={self.spread}: need 0 <= spread, p_yes + spread <= 1 and "
                             "p_no - spread >= 0")
        if self.n_b in self.n_b_sweep or len(set(self.n_b_sweep)) != len(self.n_b_sweep):
            raise ValueError(f"n_b_sweep={list(self.n_b_sweep)}: need distinct integers >= 1, "
                             f"none equal to n_b={self.n_b}")
        periods = -(-self.steps // self.log_every)
        if self.chunks > periods:
            raise ValueError(f"chunks={self.chunks}: must be <= ceil(steps / log_every) = "
                             f"{periods} (each chunk runs >= 1 monitor period)")


SIZES = {
    "quick": {"T": 4, "seeds": 4, "steps": 300, "mc_trials": 0, "ablate_tail": False,
              "n_b_sweep": ()},
    "full": {"T": 10, "seeds": 32, "steps": 3000, "mc_trials": 20000, "checkpoint_every": 1},
}


def _runs(cfg: Config, hp) -> list[tuple[str, str, object]]:
    """The training runs ``(instance, run name, hparams)`` in training order: per instance the
    main run (n_b), the tail ablation (vera_grad_mix = 0) and each n_B of the sweep."""
    out = []
    for case in ("yes", "no"):
        out.append((case, "main", hp))
        if cfg.ablate_tail:
            out.append((case, "ablation", hp.replace(vera_grad_mix=jnp.float32(0))))
        out.extend((case, f"n_b_{n}", hp.replace(n_b=jnp.int32(n))) for n in cfg.n_b_sweep)
    return out


def setup(cfg: Config):
    """``(instances, params, constants, static, hp)`` of a config: the F2 yes- and no-instances
    ``[("yes", fixture), ("no", fixture)]``, the Lean defaults at (K, T) and their constants, the
    static sizes and the validated hyperparameters of the main run (host, float64 fixtures)."""
    instances = [("yes", f2_target(cfg.T, cfg.p_yes, spread=cfg.spread)),
                 ("no", f2_target(cfg.T, cfg.p_no, spread=cfg.spread))]
    K = instances[0][1].K
    params = lean_defaults(K, cfg.T)
    constants = params.constants(K, cfg.T)
    static = SelfPlayStatic(T=cfg.T, hidden=cfg.hidden, steps=cfg.steps, log_every=cfg.log_every)
    hp = hparams(constants, lr_a=cfg.lr_a, lr_b=cfg.lr_b, n_b=cfg.n_b, alice_init=cfg.alice_init,
                 bob_init=cfg.bob_init, vera_grad_mix=cfg.vera_grad_mix)
    return instances, params, constants, static, hp


def _chunk_rows(case: str, mon, first: int, log_every: int) -> list[tuple[int, dict]]:
    """The main run's monitors of one chunk, one row per monitor period, at steps ``first + (j
    + 1) * log_every`` (the instance label tells the two instances' rows apart)."""
    val, trk = np.asarray(mon.value), np.asarray(mon.tracking)
    return [(first + (j + 1) * log_every,
             {"instance": case, "value_mean": float(val[:, j].mean()),
              "value_min": float(val[:, j].min()), "value_max": float(val[:, j].max()),
              "tracking_mean": float(trk[:, j].mean())}) for j in range(val.shape[1])]


def initial_state(cfg: Config, key, static, hp) -> dict:
    """The training state before the first chunk (also the template a checkpoint is restored
    against): ``{instance: {run: carry}}`` with every run's initial carry (:func:`init_grid`;
    seed s of instance i from ``fold_in(fold_in(key, i), s)``, the same for every run of the
    instance)."""
    state = {}
    for i, case in enumerate(("yes", "no")):
        k = jax.random.fold_in(key, i)
        keys = jnp.stack([jax.random.fold_in(k, s) for s in range(cfg.seeds)])
        for c, name, h in _runs(cfg, hp):
            if c == case:
                state.setdefault(case, {})[name] = init_grid(static)(h, keys)
    return state


def initial_monitors(cfg: Config, static, hp) -> dict:
    """Zero monitors ``[seeds, periods]`` per training run (track ``instance/run``)."""
    z = np.zeros((cfg.seeds, n_periods(static)), np.float32)
    return {f"{case}/{name}": Monitors(z, z) for case, name, _ in _runs(cfg, hp)}


def _train_all(cfg: Config, ctx, static, inputs, hp):
    """Every training run, chunk by chunk (:func:`chunk_grid`, vmapped over seeds, through
    ``run_chunks``), with the state saved every ``checkpoint_every`` chunks and after the last;
    ``resume`` continues from the newest checkpoint, bit-equal to an uninterrupted run. Chunk
    ``g`` is chunk ``g % chunks`` of run ``r = g // chunks``; the main runs' rows go at step ``r
    * U + Alice updates`` (``U`` updates per run: one clock over the runs). Returns the driver's
    :class:`~dedebate.lab.driver.Chunked` (state ``{instance: {run: carry}}``, monitors per
    ``instance/run``) and wall seconds per run (this attempt's chunks only)."""
    runs = _runs(cfg, hp)
    lengths = chunk_lengths(n_periods(static), cfg.chunks)
    starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    per_run = n_periods(static) * cfg.log_every

    def chunk(state, g):
        r, c = divmod(g, cfg.chunks)
        case, name, h = runs[r]
        carry, mon = chunk_grid(static, lengths[c])(inputs[case], h, state[case][name])
        return {**state, case: {**state[case], name: carry}}, {f"{case}/{name}": mon}

    def rows(g, _state, mon):
        r, c = divmod(g, cfg.chunks)
        case, name, _ = runs[r]
        if name != "main":
            return []
        return _chunk_rows(case, mon[f"{case}/{name}"], r * per_run + starts[c] * cfg.log_every,
                           cfg.log_every)

    init = initial_state(cfg, ctx.key, static, hp)
    done = run_chunks(ctx, "stochastic self-play training", init, chunk, len(runs) * cfg.chunks,
                      monitors=initial_monitors(cfg, static, hp), axis=1,
                      every=cfg.checkpoint_every, keep=2, log_rows=rows)
    walls = {}
    for r, (case, name, _) in enumerate(runs):
        wk = f"{'train' if name == 'main' else name}_{case}"
        walls[wk] = sum(done.wall_s[r * cfg.chunks:(r + 1) * cfg.chunks])
    return done, walls


# ---- the swept function: one self-play point, exact measurements ---------------------------------
DYNAMIC = ("p_yes", "p_no", "spread", "lr_a", "lr_b", "n_b", "alice_init", "bob_init",
           "vera_grad_mix", "gap_tol")
"""Config fields that enter :func:`point` only as numbers: the instances' P_M(1) and spread (the
F2 fixture's float32 prefix probabilities for training, and its float64 bit pattern for the host
measurement; the prefix tree's shape depends on T only), the hyperparameters of the main run
(``n_b`` is a traced ``fori_loop`` bound: one program serves every n_B, and under ``vmap`` a row
waits for the group's largest n_B) and ``gap_tol``. Static, one compile per value: ``T``,
``hidden``, ``steps``, ``log_every`` (shapes, scan lengths) and ``seeds`` (pairs trained per
instance). ``n_b_sweep``, ``ablate_tail``, ``mc_trials``, ``chunks`` and ``checkpoint_every`` do
not enter :func:`point` (run only: the schedule, ablation and Monte-Carlo rows)."""

MEASURED = ("value", "honest_alice_vs_bob", "value_vs_honest_bob", "gap", "tracking", "hit",
            "false_alarm")
"""Per-seed metrics of :func:`point_metrics`, named ``{instance}/s{seed}/{name}``."""

CASES = ("yes", "no")


def measure_pairs(fx, levels, constants, alice, bob) -> tuple[list[dict], list[float]]:
    """Exact measurements (host, float64) of the trained pairs ``(alice[S], bob[S])`` on fixture
    ``fx`` (prefix tree ``levels``): per seed :func:`evaluate`'s dict and honest Alice's exact
    acceptance against the trained Bob. The report's numbers and the swept function's (through
    ``jax.pure_callback``) both come from here."""
    seeds = int(np.shape(bob.w_dev)[0])
    vera = make_vera(constants)
    ev = [evaluate(levels, take(alice, s), take(bob, s), constants) for s in range(seeds)]
    honest = [acceptance_exact(fx.machine, honest_alice(constants),
                               bob_as_zoo(take(bob, s), constants.b), vera, levels)
              for s in range(seeds)]
    return ev, honest


def point_metrics(measured: dict, gap_tol: float) -> dict[str, float]:
    """The swept metrics from :func:`measure_pairs` per instance (``measured[case] = (ev,
    honest)``; pure numpy, float64): per seed :data:`MEASURED`; per instance the trained pair's
    acceptance (``value_mean``, ``value_min``, ``value_max``), the exploitability gap
    (``gap_mean``, ``gap_max``) and ``converged_frac`` (share of seeds with gap <= ``gap_tol``);
    the proven rows' values ``honest_alice_vs_bob_min`` (yes-instance) and
    ``alice_vs_honest_bob_max`` (no-instance)."""
    out = {}
    for case in CASES:
        ev, honest = measured[case]
        per = [{**e, "honest_alice_vs_bob": h} for e, h in zip(ev, honest)]
        for s, e in enumerate(per):
            out.update({f"{case}/s{s}/{m}": float(e[m]) for m in MEASURED})
        val = np.array([e["value"] for e in per])
        gap = np.array([e["gap"] for e in per])
        out |= {f"{case}/value_mean": float(val.mean()), f"{case}/value_min": float(val.min()),
                f"{case}/value_max": float(val.max()), f"{case}/gap_mean": float(gap.mean()),
                f"{case}/gap_max": float(gap.max()),
                f"{case}/converged_frac": float(np.mean(gap <= gap_tol))}
    out["honest_alice_vs_bob_min"] = float(strict_min(np.array(measured["yes"][1])))
    out["alice_vs_honest_bob_max"] = float(strict_max(np.array(
        [e["value_vs_honest_bob"] for e in measured["no"][0]])))
    return out


def _bits(x: float) -> np.ndarray:
    """A float64 as two uint32 words (travels through a float32 trace unrounded)."""
    return np.array([x], np.float64).view(np.uint32)


def _unbits(w) -> float:
    return float(np.ascontiguousarray(np.asarray(w, np.uint32)).view(np.float64)[0])


def _measure_host(cfg: Config, words, players) -> dict[str, np.ndarray]:
    """The host side of :func:`point`: the row's float64 (p_yes, p_no, spread, gap_tol) from
    their bit patterns, the fixtures as :func:`setup` builds them, :func:`measure_pairs` and
    :func:`point_metrics`; float32 (JAX's float without x64) scalars."""
    p_yes, p_no, spread, gap_tol = (_unbits(w) for w in np.asarray(words))
    row = dataclasses.replace(cfg, p_yes=p_yes, p_no=p_no, spread=spread, gap_tol=gap_tol)
    instances, _, constants, _, _ = setup(row)
    measured = {case: measure_pairs(fx, prefix_tree(fx.machine), constants, *players[case])
                for case, fx in instances}
    dt = jax.dtypes.canonicalize_dtype(np.float64)
    return {k: np.asarray(v, dt) for k, v in point_metrics(measured, gap_tol).items()}


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)``; ``fn(dynamic, key)`` trains the main run's pairs and
    returns :func:`point_metrics` of them.

    Per instance i (``yes``, ``no``), seed s of ``cfg.seeds`` starts from ``fold_in(fold_in(key,
    i), s)`` (:func:`init_carry`) and makes all ``steps`` Alice updates in one
    :func:`~dedebate.training.stochastic_selfplay.make_chunk` of every monitor period, vmapped over
    seeds with :func:`carry_axes` -- the functions :func:`run` composes chunk by chunk through
    the checkpointed driver (chunks compose bit for bit,
    ``test_chunked_training_is_bit_equal_to_one_program``). The exact measurements are the
    report's host code (:func:`measure_pairs`, float64 with the exact binomial Vera, through
    ``jax.pure_callback``, one host call per row; float32 in the row). ``run`` stores the same
    dict (float64) as ``metrics["point"]``.

    Why ``run`` cannot simply call ``fn``: its training must stop after every chunk to log the
    monitors and save Orbax checkpoints (resume), which one compiled ``fn`` cannot. And a sweep
    row equals ``run``'s ``metrics["point"]`` only to float32 training's last bits (~1e-7 in the
    players, checked to 1e-5 in the metrics), not bit for bit: under the sweep's ``vmap`` the
    rates are per-row vectors (Adam's stored hyperparameters, the n_B ``while`` loop and with it
    Bob's Adam count become batched), which XLA vectorises differently from the run's scalar
    hyperparameters. Not in ``fn`` (run only): the tail ablation, the n_B schedule runs, the
    Monte-Carlo check and the monitors' log rows."""
    instances, _, _, static, hp = setup(cfg)
    dynamic = {"inputs": {case: jax.tree.map(np.asarray, level_inputs(prefix_tree(fx.machine)))
                          for case, fx in instances},
               "hp": jax.tree.map(np.asarray, hp),
               "words": np.stack([_bits(x) for x in (cfg.p_yes, cfg.p_no, cfg.spread,
                                                     cfg.gap_tol)])}
    axes = carry_axes(static)
    init = jax.vmap(functools.partial(init_carry, static), in_axes=(None, 0), out_axes=axes)
    train = jax.vmap(make_chunk(static, n_periods(static)), in_axes=(None, None, axes),
                     out_axes=(axes, 0))
    names = list(point_metrics({c: ([dict.fromkeys(MEASURED + ("value",), 0.0)] * cfg.seeds,
                                    [0.0] * cfg.seeds) for c in CASES}, 0.0))
    shapes = {k: jax.ShapeDtypeStruct((), jax.dtypes.canonicalize_dtype(np.float64))
              for k in names}

    def fn(dyn, key):
        players = {}
        for i, case in enumerate(CASES):
            k = jax.random.fold_in(key, i)
            keys = jnp.stack([jax.random.fold_in(k, s) for s in range(cfg.seeds)])
            carry, _ = train(dyn["inputs"][case], dyn["hp"], init(dyn["hp"], keys))
            players[case] = (carry.alice, carry.bob)
        return jax.pure_callback(functools.partial(_measure_host, cfg), shapes, dyn["words"],
                                 players, vmap_method="sequential")

    return dynamic, fn


def sweep_figures(rows) -> dict:
    """The learning-rate sweep (``configs/sweeps/selfplay_rates.yaml``): per instance the trained
    pair's acceptance and the exploitability gap (means over seeds and sweep seeds) against
    Alice's step size, one line per Bob step size, with the Lean bounds drawn."""
    import matplotlib.pyplot as plt

    if not rows or "lr_a" not in rows[0]:
        return {}
    lr_b = sorted({float(r["lr_b"]) for r in rows}) if "lr_b" in rows[0] else [None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for b in lr_b:
        sel = [r for r in rows if b is None or float(r["lr_b"]) == b]
        xs = sorted({float(r["lr_a"]) for r in sel})
        lab = "lr_b fixed" if b is None else f"lr_b = {b:g}"
        for ax, metric in ((axes[0], "value_mean"), (axes[1], "gap_mean")):
            for case, ls in (("yes", "-"), ("no", "--")):
                ys = [np.mean([float(r[f"{case}/{metric}"]) for r in sel
                               if float(r["lr_a"]) == x]) for x in xs]
                ax.plot(xs, ys, "o" + ls, label=f"{case}, {lab}")
    axes[0].axhline(COMPLETENESS_W, color="g", ls=":", label="completeness 0.6402")
    axes[0].axhline(SOUNDNESS_W, color="r", ls=":", label="soundness 0.3956")
    axes[0].set_ylabel("trained pair's P[out = 1] (exact, mean over seeds)")
    axes[1].set_ylabel("exploitability gap (mean over seeds)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("Alice's step size lr_a")
        ax.legend(fontsize=7)
    fig.suptitle("Stochastic debate self-play: outcome against the learning rates")
    fig.tight_layout()
    return {"selfplay_rates": fig}


def _monte_carlo(cfg, fx, constants, alice, bob, key):
    """Play every seed's trained pair ``mc_trials`` times; returns per-seed win counts."""
    S, n = cfg.seeds, cfg.mc_trials
    idx = np.repeat(np.arange(S), n)
    alices = learned_alice(jax.tree.map(lambda x: np.asarray(x)[idx], alice), constants.b)
    alices = alices.replace(unit=np.full(idx.size, constants.b, np.float32),
                            n_samples=np.zeros(idx.size, np.int32))
    zoo = bob_as_zoo(bob, constants.b)
    bobs = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (S,) + np.shape(x))[idx]
                        if np.ndim(x) == 0 else np.asarray(x)[idx], zoo)
    out = run_trials(debate_spec(cfg.T), fx.machine, alices, bobs, make_vera(constants),
                     trial_keys(key, idx.size), axes=(None, 0, 0, None))
    wins = np.asarray(out.alice_wins).reshape(S, n).sum(axis=1)
    return wins


def _plot(cfg, mons, labels):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for lab, mon in zip(labels, mons):
        x = (np.arange(mon.value.shape[1]) + 1) * cfg.log_every
        for ax, arr in ((axes[0], np.asarray(mon.value)), (axes[1], np.asarray(mon.tracking))):
            line, = ax.plot(x, arr.mean(axis=0), label=f"{lab} (mean)")
            ax.plot(x, arr.T, color=line.get_color(), alpha=0.25, lw=0.8)
    axes[0].axhline(COMPLETENESS_W, color="g", ls="--", label="completeness 0.6402")
    axes[0].axhline(SOUNDNESS_W, color="r", ls="--", label="soundness 0.3956")
    axes[0].set_ylabel("P[out = 1] (training objective)")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("reach-weighted mean |p - pi|")
    for ax in axes:
        ax.set_xlabel("Alice update")
        ax.legend(fontsize=7)
    fig.suptitle(f"Stochastic debate self-play, F2 T={cfg.T} (thin lines: seeds)")
    fig.tight_layout()
    return fig


@dataclasses.dataclass
class Measured:
    """What the gating rows read (:func:`proven_claims`), measured by :func:`run` on the
    trained players.

    ``comp``: the completeness bound at the yes-instance; ``sound_acc``: 1 - the soundness
    bound at the no-instance; ``setting``: the instance, for the notes; ``honest_vs_bob``: per
    seed, honest Alice's exact acceptance against the trained Bob (yes-instance);
    ``alice_vs_honest``: per seed, the trained Alice's exact acceptance against honest Bob
    (no-instance)."""

    comp: float
    sound_acc: float
    setting: str
    honest_vs_bob: np.ndarray
    alice_vs_honest: np.ndarray


def proven_claims(m: Measured) -> list[Claim]:
    """The proven gating rows from the measured numbers ``m`` (pure): honest Alice vs every
    trained Bob >= the completeness bound, every trained Alice vs honest Bob <= 1 - the
    soundness bound (spec DED 5.3; worst seed, exact). A value that is not finite (or no seed)
    fails its row."""
    claims, comp, sound_acc, setting = [], m.comp, m.sound_acc, m.setting
    h = np.asarray(m.honest_vs_bob)
    h_min = strict_min(h)
    claims.append(Claim.exact(
        "Honest Alice vs every self-play-trained Bob wins at least the completeness bound",
        "spec DED 5.3 (Lean completeness'), exact DP", f">= {comp:.4f}", h_min,
        bool(h_min >= comp),
        note=f"worst seed; per seed {np.round(h, 4).tolist()}; bound at w = 2/3: 0.6402; {setting}"))
    v = np.asarray(m.alice_vs_honest)
    v_max = strict_max(v)
    claims.append(Claim.exact(
        "Every self-play-trained Alice vs honest Bob is accepted at most 1 - the soundness bound",
        "spec DED 5.3 (Lean soundness'), exact DP", f"<= {sound_acc:.4f}", v_max,
        bool(v_max <= sound_acc),
        note=f"worst seed; per seed {np.round(v, 4).tolist()}; bound at w = 2/3: 0.3956"))
    return claims


def mc_claims(mc: dict[str, tuple[float, float, float]]) -> list[Claim]:
    """Per instance, the gating Monte-Carlo row (pure): ``mc[case] = (exact mean over seeds,
    Monte-Carlo wins pooled over seeds, debates)``; the score test of "the Monte-Carlo
    acceptance equals the exact mean" (a non-finite number or no debate fails the row)."""
    claims = []
    for case, (exact_mean, wins, n) in mc.items():
        claims.append(Claim.proportion(
            f"Monte-Carlo play of the trained pairs ({case}) agrees with the exact DP",
            "dedebate.protocols.stochastic.run_trials vs exact DP", "==", exact_mean, wins, n,
            note=(f"{wins}/{n} debates pooled over seeds (the score test at the seeds' mean "
                  "exact value is conservative for a pool of binomials)"),
            bound=f"contains the exact mean {exact_mean:.4f}"))
    return claims


def run(cfg: Config, ctx) -> ExperimentResult:
    claims, tables, metrics = [], {}, {}
    instances, params, constants, static, hp = setup(cfg)
    K = instances[0][1].K
    results, mons = {}, []
    levels = {case: prefix_tree(fx.machine) for case, fx in instances}
    inputs = {case: level_inputs(levels[case]) for case in levels}
    trained, walls = _train_all(cfg, ctx, static, inputs, hp)
    with ctx.progress(2 * (1 + int(cfg.mc_trials > 0)), "stochastic self-play: evaluation") as bar:
        for i, (case, fx) in enumerate(instances):
            key = jax.random.fold_in(ctx.key, i)
            lv = levels[case]
            alice, bob = trained.state[case]["main"].alice, trained.state[case]["main"].bob
            mons.append(trained.monitors[f"{case}/main"])
            with ctx.stopwatch(f"evaluate_{case}") as lap:
                ev, honest = measure_pairs(fx, lv, constants, alice, bob)
                res = {"fixture": fx, "p1": fx.p1(), "ev": ev, "honest_alice": honest, "sweep": {}}
                for name in [n for c, n, _ in _runs(cfg, hp) if c == case and n != "main"]:
                    a1, b1 = trained.state[case][name].alice, trained.state[case][name].bob
                    evs = [evaluate(lv, take(a1, s), take(b1, s), constants, full=False)
                           for s in range(cfg.seeds)]
                    if name == "ablation":
                        res["ablation"] = evs
                    else:
                        res["sweep"][int(name.removeprefix("n_b_"))] = evs
            walls[f"evaluate_{case}"] = lap.seconds
            bar.update(1)
            if cfg.mc_trials > 0:
                with ctx.stopwatch(f"monte_carlo_{case}") as lap:
                    res["mc_wins"] = _monte_carlo(cfg, fx, constants, alice, bob,
                                                  jax.random.fold_in(key, 7))
                walls[f"monte_carlo_{case}"] = lap.seconds
                bar.update(1)
            results[case] = res
            for s, e in enumerate(ev):
                tables.setdefault("seeds", []).append(
                    {"instance": case, "seed": s, "honest_alice_vs_bob": honest[s],
                     **{k: float(v) for k, v in e.items()}})

    S = cfg.seeds
    yes, no = results["yes"], results["no"]
    comp = params.completeness(K, cfg.T, yes["p1"])
    sound_acc = 1.0 - params.soundness(K, cfg.T, 1.0 - no["p1"])
    setting = (f"F2 (K = {K:g}), T = {cfg.T}, P_M(1) = {yes['p1']:.4f} / {no['p1']:.4f}, "
               f"{S} seeds x {cfg.steps} Alice updates, n_B = {cfg.n_b}")

    def arr(res, k):
        return np.array([e[k] for e in res["ev"]])

    # ---- proven bounds against the learned adversaries (gating) -------------------------------
    claims.extend(proven_claims(Measured(
        comp=comp, sound_acc=sound_acc, setting=setting,
        honest_vs_bob=np.array(yes["honest_alice"]),
        alice_vs_honest=arr(no, "value_vs_honest_bob"))))
    # ---- self-play outcome vs the Lean bounds ---------------------------------------------------
    for case, res, want_hi in (("yes", yes, True), ("no", no, False)):
        vals = arr(res, "value")
        m, lo, hi = mean_interval(vals)
        worst = vals.min() if want_hi else vals.max()
        ok = worst >= COMPLETENESS_W if want_hi else worst <= SOUNDNESS_W
        claims.append(Claim(
            f"Self-play on the {case}-instance: the trained pair's acceptance is on the protocol's "
            "guaranteed side (worst seed)", "spec DED 5.3 bounds (not a theorem "
            "for learned pairs)", f">= {COMPLETENESS_W}" if want_hi else f"<= {SOUNDNESS_W}",
            worst, worst, worst, bool(ok), finding=True,
            note=(f"worst seed; mean {m:.4f} [{lo:.4f}, {hi:.4f}] over seeds; per seed "
                  f"{np.round(vals, 4).tolist()}; P_M(1) = {res['p1']:.4f}")))
    # ---- Monte Carlo check (gating) -------------------------------------------------------------
    if cfg.mc_trials > 0:
        claims.extend(mc_claims({
            case: (float(arr(res, "value").mean()), int(res["mc_wins"].sum()), S * cfg.mc_trials)
            for case, res in (("yes", yes), ("no", no))}))
    # ---- tracking -------------------------------------------------------------------------------
    for case, res, who in (("yes", yes, "winning"), ("no", no, "lying")):
        trk = arr(res, "tracking")
        m, lo, hi = mean_interval(trk)
        claims.append(Claim(
            f"The {who} Alice's claims track the truth ({case}-instance): reach-weighted mean "
            "|p - pi| below b", "descriptive; criterion fixed in advance",
            f"95% upper < b = {constants.b:g}", m, lo, hi, passed=bool(hi < constants.b), finding=True,
            note=(f"per seed {np.round(trk, 5).tolist()}; tau_V = {constants.tau_vera:g}, "
                  f"s = {constants.s:g}; largest |p - pi| at a visited prefix per seed "
                  f"{np.round(arr(res, 'max_dev_visited'), 4).tolist()}")))
    # ---- Bob's abort targeting ------------------------------------------------------------------
    for case, res in (("yes", yes), ("no", no)):
        hit, fa = arr(res, "hit"), arr(res, "false_alarm")
        j = hit - fa
        m, lo, hi = mean_interval(j)
        claims.append(Claim(
            f"The trained Bob's aborts target real deviations ({case}-instance): "
            "P[abort | |p - pi| in [b, 4b]] - P[abort | |p - pi| < s]",
            "descriptive; criterion fixed in advance", "95% lower >= 0.5",
            m, lo, hi, passed=bool(lo >= 0.5), finding=True,
            note=(f"hit rate mean {hit.mean():.4f} (per seed {np.round(hit, 3).tolist()}), "
                  f"false alarm mean {fa.mean():.4f} (per seed {np.round(fa, 4).tolist()}); "
                  f"false alarm at |p - pi| <= c: {arr(res, 'false_alarm_c').mean():.4f}; "
                  "reach-weighted over visited prefixes")))
    # ---- schedules: n_B ----------------------------------------------------------------------------
    if cfg.n_b_sweep:
        def wrong(evs, case):
            return int(sum((e["value"] > 0.5) != (case == "yes") for e in evs))

        sched = {cfg.n_b: {c: wrong(results[c]["ev"], c) for c in results}}
        for n_b in cfg.n_b_sweep:
            sched[n_b] = {c: wrong(results[c]["sweep"][n_b], c) for c in results}
        lo_nb, hi_nb = min(sched), max(sched)
        k_hi, k_lo = sched[hi_nb]["no"], sched[lo_nb]["no"]
        f, lo, hi = wilson_interval(k_hi, S)
        claims.append(Claim(
            f"More Bob updates per Alice update (n_B = {hi_nb} vs {lo_nb}) do not leave more "
            "no-instance seeds on the wrong side (acceptance > 1/2)",
            "spec PED 8.5 recommendation, transferred (criterion: the recommendation itself)",
            f"<= n_B = {lo_nb} fraction ({k_lo}/{S})", f, lo, hi, passed=k_hi <= k_lo, finding=True,
            note=("wrong-side seeds (yes / no) per n_B: " + "; ".join(
                f"n_B = {n}: {sched[n]['yes']} / {sched[n]['no']}" for n in sorted(sched))
                + f" of {S}; same seeds and initialisations for every n_B")))
        metrics["wrong_side_by_n_b"] = {str(n): sched[n] for n in sorted(sched)}
        tables["n_b_sweep"] = [
            {"instance": c, "n_b": n, "seed": s, **{k: float(v) for k, v in e.items()}}
            for c in results for n in cfg.n_b_sweep for s, e in enumerate(results[c]["sweep"][n])]
    # ---- convergence ----------------------------------------------------------------------------
    for case, res in (("yes", yes), ("no", no)):
        gap = arr(res, "gap")
        k = int((gap <= cfg.gap_tol).sum())
        f, lo, hi = wilson_interval(k, S)
        claims.append(Claim(
            f"Self-play converges ({case}-instance): exploitability gap <= {cfg.gap_tol:g}",
            "descriptive; criterion fixed in advance",
            "fraction of seeds, Wilson lower > 1/2", f, lo, hi, passed=bool(lo > 0.5), finding=True,
            note=(f"{k}/{S} seeds; gap per seed {np.round(gap, 4).tolist()} (Alice's grid best "
                  "response, a lower bound, minus Bob's exact best response); Bob's best "
                  f"response value per seed {np.round(arr(res, 'bob_best_response'), 4).tolist()}")))

    metrics |= {"K": K, "T": cfg.T, "constants": dataclasses.asdict(constants),
               "completeness_bound_instance": comp, "soundness_acceptance_bound_instance":
               sound_acc, "wall_s": walls}
    # the swept function's metrics of this run (point(), float64 here; a sweep row holds them
    # rounded to float32)
    metrics["point"] = point_metrics(
        {case: (res["ev"], res["honest_alice"]) for case, res in results.items()}, cfg.gap_tol)
    for case, res in results.items():
        summary = {k: float(arr(res, k).mean()) for k in res["ev"][0]}
        summary["p1"] = res["p1"]
        summary["wrong_side_seeds"] = int(sum(
            (e["value"] > 0.5) != (case == "yes") for e in res["ev"]))
        if "ablation" in res:
            ab = res["ablation"]
            summary["ablation_no_tail"] = {
                "value_per_seed": [round(e["value"], 4) for e in ab],
                "tracking_per_seed": [round(e["tracking"], 4) for e in ab],
                "wrong_side_seeds": int(sum((e["value"] > 0.5) != (case == "yes") for e in ab))}
        if "mc_wins" in res:
            summary["mc_wins_per_seed"] = res["mc_wins"].tolist()
        metrics[case] = summary
    plots = [ctx.save_figure(_plot(cfg, mons, ["yes", "no"]), "stochastic_selfplay")]
    return ExperimentResult(claims=claims, metrics=metrics, tables=tables, plots=plots)
