"""The OI estimator construction (spec PED 5-6): Algorithm 1, a Flax estimator, soundness.

1. **Algorithm 1** (tabular OGD, spec 5.3) on random problems: |X| contexts, Z = {0,1}^q,
   prediction-dependent tanh tests; for every |Z| and delta, over seeds (one vmapped program per
   (|Z|, step rule)). Checks: T <= 36|Z|/delta^2 (Hazan's step 1/sqrt(|Z| t)) and
   T <= 4.5|Z|/delta^2 (the tight step sqrt(2/(|Z| t))); exit with max|Adv| < delta (recomputed
   in float64 numpy); the regret bound sum_t |Adv_t| <= (3/2) G D sqrt(T) (spec 5.4). A finding
   (no theorem bounds it): whether the exit h is also delta-indistinguishable for
   ``FRESH_FACTOR`` times as many fresh tests of the same distribution, drawn with another key.
2. **Flax estimator** (spec 10) trained by OGD against the worst test per round, vmapped over
   seeds and learning rates, against the tabular algorithm on the same problems: advantage
   reached, rounds/steps, wall time (measured here, outside the pure core). Trained in chunks of
   ``net_checkpoint_every`` rounds; the whole training state (parameters, optimiser states,
   round, key, distinguisher state and the advantage log so far) is saved with Orbax after every
   chunk by the lab's chunked driver (``run_chunks``), and a resumed run (``resume=true``)
   continues from the newest checkpoint with exactly the numbers of an uninterrupted run.
3. **Soundness in the debate** (spec 6, 9.6): for fixed provers A (honest, obfuscating liar,
   wrong-direction) on hidden-flaw trees, B is built round by round with Algorithm 1 against the
   spec 6.3 tests with delta = eta/(2d+3); A's exact expected payoff (the protocol's own path
   enumeration, cross-checked against the construction's) must satisfy
   U_A <= rho^-(d+1) Pr[A correct] + eta, and each round's mean reward <= 2 delta.

Sweepable (``DYNAMIC``, :func:`point`): part 1 is one function, :func:`algorithm1`'s ``solve(dynamic,
key)``, of the deltas and the tests' scale; ``dedebate sweep`` vmaps it over deltas x seeds (one
compile per static group, ``configs/sweeps/ogd_steps.yaml``) and ``run`` evaluates it as the
one-point case at ``ctx.key``: the report's Algorithm 1 rows (steps, exit advantage, regret) are its
metrics. Inside it the problems' randomness is drawn in JAX and shaped into problems by
:func:`~dedebate.estimators.random_problems.problem_arrays` (float64 numpy, through ``jax.pure_callback``: the numbers the host gives).
Host only, outside the swept function: the float64 recomputation of the exit advantages and the
fresh tests (a check on ``solve``'s exit h), part 2 (the Flax training: a chunked, checkpointed
host loop through ``run_chunks``, and its tabular comparison) and part 3 (a round-by-round
construction with host control flow).

Randomness: every random problem, network initialisation and tree comes from typed JAX keys
folded from ``ctx.key`` (part 1: ``fold_in(key, 100)``, its fresh tests 110, part 2: 200/201,
part 3: 300).

Run order: compilation dominates at the quick and default sizes, so parts 1 and 2 build their
problems and compile their programs on two worker threads while part 3 runs on the main thread;
then parts 1 and 2 run. The numbers do not depend on the order (each part has its own keys).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.core.stats import nan_last
from dedebate.estimators.ogd import (
    STEP_RULES,
    OGDStatic,
    iteration_bound,
    solve_block,
    solve_grid,
)
from dedebate.estimators.random_problems import TRUTHS, build_problems, traced_problems
from dedebate.estimators.tanh_recheck import exit_advantages, fresh_tanh_draw, fresh_tanh_weights
from dedebate.estimators.train import (
    BEST_RESPONSES,
    NetTrainLog,
    NetTrainStatic,
    grid_programs,
    net_hparams,
)
from dedebate.lab.aot import compiled
from dedebate.lab.driver import run_chunks
from dedebate.lab.experiment import (
    Claim,
    ExperimentResult,
    consistency_rows,
    strict_max,
    strict_min,
)
from dedebate.lab.params import config_dataclass, param

NAME = "ogd_estimator"
TITLE = "OI estimator construction: Algorithm 1 bound, Flax estimator, soundness against fixed A"

PROVERS = ("honest", "obfuscating", "wrong_direction")
FRESH_FACTOR = 4
"""The generalisation finding draws ``FRESH_FACTOR * n_tests`` fresh tanh tests per problem."""
FRESH_KEY = 110
"""Fresh tests come from ``fold_in(fold_in(ctx.key, FRESH_KEY), q)`` (the sweep's problems and
training tests from ``fold_in(fold_in(ctx.key, 100), q)``): independent of what Algorithm 1 saw."""
RECOMPUTE_TOL = 1e-4
"""float64 numpy recomputation of an exit advantage vs Algorithm 1's float32 one."""


@config_dataclass
class Config:
    n_x: int = param(100, "contexts |X| per random problem", ge=2, le=20_000)
    n_features: int = param(4, "context features read by the tests and the network",
                            ge=1, le=1024)
    q_values: tuple[int, ...] = param((1, 2, 3), "outcome bits q of the sweep (|Z| = 2^q)",
                                      ge=1, le=5, min_len=1, max_len=16)
    deltas: tuple[float, ...] = param((0.1, 0.05, 0.025), "indistinguishability levels",
                                      gt=0.0, le=1.0, min_len=1, max_len=16)
    n_tests: int = param(40, "random prediction-dependent tanh tests per problem", ge=1, le=4096)
    test_scale: float = param(3.0, "weight scale of the tanh tests", gt=0.0)
    truth: str = param("softmax", "truth g", choices=TRUTHS)
    seeds: int = param(4, "random problems per (|Z|, delta) point", ge=1, le=256)
    step_rules: tuple[str, ...] = param(
        ("hazan", "tight"), "Algorithm 1 step rules: hazan: eta_t = 1/sqrt(|Z| t) "
        "(T <= 36|Z|/delta^2); tight: sqrt(2/(|Z| t)) (T <= 4.5|Z|/delta^2)",
        choices=tuple(STEP_RULES), min_len=1, max_len=len(STEP_RULES))
    trace_len: int = param(4096, "advantage-trace buffer length per run", ge=2, le=65_536)
    net_q: int = param(2, "q of the network-vs-tabular comparison", ge=1, le=5)
    net_delta: float = param(0.05, "delta of the network-vs-tabular comparison", gt=0.0, le=1.0)
    net_lrs: tuple[float, ...] = param((1.0, 3.0), "estimator learning rates (one vmapped grid)",
                                       gt=0.0, min_len=1, max_len=64)
    net_rounds: int = param(300, "estimator training rounds", ge=1, le=100_000)
    net_hidden: tuple[int, ...] = param((32,), "estimator MLP hidden widths",
                                        ge=1, le=4096, min_len=1, max_len=8)
    net_optimizer: str = param("sgd", "sgd (lr / sqrt(t), OGD) or adam", choices=("sgd", "adam"))
    net_best_response: str = param(
        "family", "family: each round the test of F with the largest |Adv|; family+mlp: also an "
        "MLP distinguisher trained by Adam ascent on |Adv|, warm-started across rounds",
        choices=BEST_RESPONSES)
    net_checkpoint_every: int = param(
        100, "estimator rounds per chunk: the training state is checkpointed (Orbax) after every "
        "chunk", ge=1, le=100_000)
    sound_provers: tuple[str, ...] = param(PROVERS, "fixed provers A ([] skips the part)",
                                           choices=PROVERS, max_len=len(PROVERS))
    sound_trees: int = param(4, "hidden-flaw trees (inputs x, mu uniform)", ge=1, le=1024)
    sound_depth: int = param(2, "tree depth d (rounds k = d..1 plus the human check)",
                             ge=1, le=4)
    sound_q: int = param(3, "tree width q", ge=2, le=4)
    sound_rho: float = param(2.0, "stability parameter rho (reward weights r^k, r = 1/rho)",
                             ge=1.0)
    sound_eta: float = param(0.2, "soundness slack eta; delta = eta / (2d + 3)", gt=0.0, le=1.0)


SIZES = {
    "quick": {"n_x": 30, "q_values": (2,), "deltas": (0.1, 0.05), "n_tests": 16, "seeds": 2,
              "trace_len": 512, "net_lrs": (3.0,), "net_rounds": 60, "net_hidden": (16,),
              "net_checkpoint_every": 20,
              "sound_provers": ("obfuscating",), "sound_trees": 2, "sound_depth": 1,
              "sound_q": 2},
    "full": {"n_x": 1000, "q_values": (1, 2, 3, 4), "deltas": (0.1, 0.05, 0.025, 0.0125),
             "n_tests": 64, "seeds": 16, "trace_len": 16384, "net_lrs": (0.3, 1.0, 3.0, 10.0),
             "net_rounds": 2000, "net_hidden": (64, 64), "net_checkpoint_every": 500,
             "sound_trees": 16, "sound_depth": 3},
}


# ---- part 1: Algorithm 1, the swept function ----------------------------------------------------
DYNAMIC = ("deltas", "test_scale")
"""Config fields that enter :func:`point` only as numbers: the indistinguishability levels (an
array of ``len(deltas)``; the points of one sweep group need equally many) and the tests' weight
scale (float32 in the swept function; 3.0, the default, is exact). Everything else of part 1 is a
shape or a choice (``q_values``, ``n_x``, ``n_features``, ``n_tests``, ``seeds``, ``truth``,
``step_rules``, ``trace_len``): static, one compile per value. Parts 2 and 3 are not swept."""

PER_RUN = ("steps", "max_adv", "converged", "regret_sum", "regret_bound", "circuit_size")
"""Metrics of :func:`point` per Algorithm 1 run, named ``Z{|Z|}/{rule}/d{j}/s{s}/{metric}`` for
``deltas[j]`` and problem ``s`` of ``cfg.seeds``."""


def algorithm1(cfg: Config):
    """Part 1 as a pure function: ``(dynamic, solve)``; ``solve(dynamic, key)`` (pure JAX plus
    the host callback of :func:`_traced_problems`) returns ``(metrics, extras)``.

    For every q of ``q_values`` the problems come from ``fold_in(fold_in(key, 100), q)``; for
    every step rule, Algorithm 1 runs on each problem and delta (one vmapped while loop).
    ``metrics`` (scalars): ``Z{|Z|}/{rule}/d{j}/s{s}/{m}`` for m in :data:`PER_RUN`; per
    (|Z|, rule, delta j) over the problems ``.../d{j}/steps_mean``, ``steps_max``, ``bound``
    (the proven bound for the rule, float32) and ``steps_over_bound_max``; ``d{j}/delta``.
    ``extras`` (arrays, for the report only): per q the problems and their tests; per
    ``(q, rule)`` the exit h ``[S, J, X, Z]`` and seed 0's advantage trace ``[J, trace_len]``."""
    dynamic = {"deltas": np.asarray(cfg.deltas, np.float32),
               "test_scale": np.asarray(cfg.test_scale, np.float32)}

    def solve(dyn, key):
        deltas = dyn["deltas"]
        metrics, extras = {}, {}
        for j in range(len(cfg.deltas)):
            metrics[f"d{j}/delta"] = deltas[j]
        for q in cfg.q_values:
            n_z = 2**q
            problems, families = traced_problems(
                cfg, jax.random.fold_in(jax.random.fold_in(key, 100), q), n_z, dyn["test_scale"])
            extras[str(q)] = {"problems": problems, "families": families}
            for rule in cfg.step_rules:
                states, summ = solve_block(OGDStatic(step_rule=rule, trace_len=cfg.trace_len),
                                            families, problems, deltas)
                extras[f"{q}/{rule}"] = {"h": states.h, "trace": states.trace[0]}
                per_run = {"steps": summ.steps, "max_adv": summ.max_adv,
                           "converged": summ.converged.astype(jnp.int32),
                           "regret_sum": summ.regret_sum, "regret_bound": summ.regret_bound,
                           "circuit_size": summ.circuit_size}
                bound = iteration_bound(rule, n_z, deltas)
                for j in range(len(cfg.deltas)):
                    pre = f"Z{n_z}/{rule}/d{j}"
                    steps = summ.steps[:, j]
                    metrics[f"{pre}/steps_mean"] = jnp.mean(steps.astype(jnp.float32))
                    metrics[f"{pre}/steps_max"] = jnp.max(steps)
                    metrics[f"{pre}/bound"] = bound[j]
                    metrics[f"{pre}/steps_over_bound_max"] = jnp.max(steps / bound[j])
                    for s in range(cfg.seeds):
                        for m in PER_RUN:
                            metrics[f"{pre}/s{s}/{m}"] = per_run[m][s, j]
        return metrics, extras

    return dynamic, solve


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)``; ``fn(dynamic, key)`` is the ``metrics`` of
    :func:`algorithm1`'s ``solve`` (the report's Algorithm 1 rows read the same metrics)."""
    dynamic, solve = algorithm1(cfg)
    return dynamic, lambda dyn, key: solve(dyn, key)[0]


def _algorithm1_program(cfg: Config, ctx, pool=None):
    """The run's Algorithm 1: ``jit(vmap(solve))`` on a run axis of one at ``ctx.key`` (the
    one-point case of a sweep), compiled (on ``pool`` if given): ``(future, inputs)``."""
    dynamic, solve = algorithm1(cfg)
    one = (jax.tree.map(lambda x: np.asarray(x)[None], dynamic), ctx.key[None])
    return compiled(_run_program(cfg), *one, pool=pool), one


@functools.cache
def _run_program(cfg: Config):
    return jax.jit(jax.vmap(algorithm1(cfg)[1]))


def sweep_figures(rows):
    """The Algorithm 1 sweep (``configs/sweeps/ogd_steps.yaml``): measured steps (mean over
    problems and seeds) and the proven bound against 1/delta^2, one line per |Z|, one panel
    per step rule."""
    import matplotlib.pyplot as plt

    series: dict[tuple[str, int], dict[float, list[float]]] = {}
    for r in rows:
        for k, v in r.items():
            parts = k.split("/")
            if len(parts) == 4 and parts[3] == "steps_mean" and isinstance(v, (int, float)):
                delta = float(r[f"{parts[2]}/delta"])
                series.setdefault((parts[1], int(parts[0][1:])), {}).setdefault(
                    delta, []).append(float(v))
    rules = sorted({rule for rule, _ in series})
    if not rules:
        return {}
    fig, axes = plt.subplots(1, len(rules), figsize=(6 * len(rules), 4.5), squeeze=False)
    for ax, rule in zip(axes[0], rules):
        for n_z in sorted(z for r_, z in series if r_ == rule):
            pts = sorted(series[(rule, n_z)].items(), reverse=True)
            x = np.asarray([1.0 / d**2 for d, _ in pts])
            (line,) = ax.plot(x, [max(float(np.mean(v)), 0.8) for _, v in pts], "o-",
                              label=f"|Z| = {n_z}: measured T")
            ax.plot(x, [iteration_bound(rule, n_z, d) for d, _ in pts], "--",
                    color=line.get_color(), label=f"|Z| = {n_z}: proven bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("1 / delta^2")
        ax.set_ylabel("steps T (mean; T = 0 drawn at 0.8)")
        ax.set_title(f"Algorithm 1, {rule} step: measured vs proven")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return {"algorithm1_steps_vs_bound": fig}


def algorithm1_rows(cfg: Config, ctx, prepared=None):
    """Part 1's rows, from the metrics of :func:`algorithm1` at ``ctx.key`` (the sweep's
    function) and the float64 recomputation of :func:`~dedebate.estimators.tanh_recheck.exit_advantages` on its exit h; logged at
    steps ``len(sound_provers)`` on (after part 3's)."""
    rows, traces = [], {}
    step = len(cfg.sound_provers)
    future, inputs = _algorithm1_program(cfg, ctx) if prepared is None else prepared
    with ctx.stopwatch("algorithm1_compile_wait"):
        exe, compile_s = future.result()
    with ctx.stopwatch("algorithm1") as lap:
        metrics, extras = jax.block_until_ready(exe(*inputs))
    m = {k: np.asarray(v)[0] for k, v in metrics.items()}
    with ctx.progress(len(cfg.q_values) * len(cfg.step_rules), "Algorithm 1 sweep") as bar:
        for q in cfg.q_values:
            n_z = 2**q
            built = jax.tree.map(lambda x: np.asarray(x)[0], extras[str(q)])
            problems, families = built["problems"], built["families"]
            fresh = fresh_tanh_weights(cfg, fresh_tanh_draw(
                cfg, jax.random.fold_in(jax.random.fold_in(ctx.key, FRESH_KEY), q), n_z,
                FRESH_FACTOR), n_z)
            for rule in cfg.step_rules:
                ex = extras[f"{q}/{rule}"]
                gen = exit_advantages(cfg.deltas, families, problems, np.asarray(ex["h"])[0], fresh)
                for s in range(cfg.seeds):
                    for j, delta in enumerate(cfg.deltas):
                        run = {k: m[f"Z{n_z}/{rule}/d{j}/s{s}/{k}"] for k in PER_RUN}
                        row = {
                            "q": q, "n_z": n_z, "delta": delta, "seed": s, "step_rule": rule,
                            "steps": int(run["steps"]),
                            "max_adv": float(run["max_adv"]),
                            "converged": bool(run["converged"]),
                            "bound": float(iteration_bound(rule, n_z, delta)),
                            "bound_hazan": float(iteration_bound("hazan", n_z, delta)),
                            "bound_tight": float(iteration_bound("tight", n_z, delta)),
                            "regret_sum": float(run["regret_sum"]),
                            "regret_bound": float(run["regret_bound"]),
                            "circuit_size": int(run["circuit_size"]),
                            "z_over_delta2": n_z / delta**2,
                            **{k: v[s][j] for k, v in gen.items()},
                        }
                        rows.append(row)
                        if s == 0:
                            traces[(rule, q, delta)] = np.asarray(ex["trace"])[0, j]
                timing = {"wall_s": lap.seconds, "compile_s": compile_s} if step == len(
                    cfg.sound_provers) else {}
                ctx.log({"q": q, "step_rule": rule, **timing,
                         "max_steps": max(r["steps"] for r in rows[-cfg.seeds * len(cfg.deltas):])},
                        step=step)
                step += 1
                bar.update(1)
    return rows, traces


def algorithm1_claims(cfg: Config, rows) -> list[Claim]:
    claims = []
    for rule in cfg.step_rules:
        const = {"hazan": 36.0, "tight": 4.5}[rule]
        eta = {"hazan": "1/sqrt(|Z| t)", "tight": "sqrt(2/(|Z| t))"}[rule]
        for q in cfg.q_values:
            sel = [r for r in rows if r["step_rule"] == rule and r["q"] == q]
            norm = strict_max(r["steps"] * r["delta"] ** 2 / r["n_z"] for r in sel)
            worst = max(sel, key=lambda r: r["steps"] / r["bound"])
            claims.append(Claim.exact(
                f"Algorithm 1 ({rule} step {eta}), |Z| = {2**q}: T <= {const:g} |Z| / delta^2",
                "spec PED 5.5 (paper eq. (4))", f"T delta^2/|Z| <= {const:g}", norm,
                passed=all(r["steps"] <= r["bound"] and r["converged"] for r in sel),
                note=(f"{len(sel)} runs (deltas {list(cfg.deltas)}, {cfg.seeds} seeds); largest "
                      f"T = {worst['steps']} at delta = {worst['delta']:g} vs bound "
                      f"{worst['bound']:.0f} (tight 4.5|Z|/delta^2 = {worst['bound_tight']:.0f})")))
        sel = [r for r in rows if r["step_rule"] == rule]
        ratio = strict_max(r["max_adv"] / r["delta"] for r in sel)
        # Algorithm 1's own stopping rule: a consistency check, not a paper claim (it adds a
        # failing row only if it does not hold)
        claims.extend(consistency_rows({
            f"Algorithm 1 ({rule}) exits with max_f |Adv_f| < delta": (
                ratio < 1.0, f"largest exit advantage / delta {ratio:.4g} over {len(sel)} runs")}))
        reg = strict_max(r["regret_sum"] / r["regret_bound"] for r in sel if r["steps"] > 0)
        claims.append(Claim.exact(
            f"Algorithm 1 ({rule}): OGD regret sum_t |Adv_t| <= (3/2) G D sqrt(T)",
            "spec PED 5.4 (Hazan Thm 3.1)", "ratio <= 1", reg, passed=reg <= 1.0,
            note="largest ratio over runs that took a step"))
        claims.extend(generalisation_claims(rule, sel))
    return claims


def generalisation_claims(rule: str, sel) -> list[Claim]:
    """Algorithm 1's exit advantage measured independently, from sweep rows ``sel`` of one step
    rule (with the columns of :func:`~dedebate.estimators.tanh_recheck.exit_advantages`).

    A consistency check: the exit advantage over the training tests, recomputed in float64 numpy,
    agrees with Algorithm 1's (to ``RECOMPUTE_TOL``; a row only if it does not). A finding: is the
    exit h also (delta, F')-indistinguishable for fresh tests F' of the same distribution, drawn
    with another key, ``FRESH_FACTOR`` times as many as it was fit to? No theorem bounds the
    advantage of a test Algorithm 1 never saw, so this does not gate; its criterion, stated before
    measuring, is ``max_f' |Adv_f'(h)| < delta`` in every run."""
    gap = strict_max(abs(r["max_adv_numpy"] - r["max_adv"]) for r in sel)
    claims = consistency_rows({
        f"Algorithm 1 ({rule}) exit advantage recomputed in float64 numpy agrees": (
            gap <= RECOMPUTE_TOL, f"largest |numpy - Algorithm 1| = {gap:.3g} over {len(sel)} "
                                  f"runs (tolerance {RECOMPUTE_TOL:g})")})
    ratio = strict_max(r["fresh_max_adv"] / r["delta"] for r in sel)
    share = strict_min(r["fresh_share_below_delta"] for r in sel)
    n_fresh = sorted({r["fresh_tests"] for r in sel})
    worst = max(sel, key=lambda r: nan_last(r["fresh_max_adv"] / r["delta"]), default=None)
    where = "" if worst is None else (
        f"; largest at |Z| = {worst['n_z']}, delta = {worst['delta']:g}: fresh max|Adv| "
        f"{worst['fresh_max_adv']:.4g} vs training {worst['max_adv']:.4g}")
    claims.append(dataclasses.replace(Claim.exact(
        f"Algorithm 1 ({rule}) generalises: its exit h is (delta, F')-indistinguishable for "
        f"{'/'.join(map(str, n_fresh))} fresh tests F' drawn with another key",
        "finding (no theorem bounds an unseen test's advantage; spec PED 5.1, 5.5)",
        "criterion: fresh max|Adv| / delta < 1", ratio, passed=ratio < 1.0,
        note=(f"{len(sel)} runs; largest fresh max|Adv| / delta {ratio:.4g}; smallest share of "
              f"fresh tests with |Adv| < delta {share:.4g}{where}")),
        finding=True))
    return claims


# ---- part 2: network vs tabular -------------------------------------------------------------------
@dataclasses.dataclass
class NetRun:
    """The network training of part 2: final state and per-round log (axes ``[G, S, ...]``:
    learning rates x seeds), ``max|Adv|`` at the end, where it started (0, or the rounds restored
    from a checkpoint), timings of this process (compilation; the chunks it ran) and the first
    step after its logged rows."""

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


def net_problems(cfg: Config, ctx):
    return build_problems(cfg, jax.random.fold_in(ctx.key, 201), 2**cfg.net_q)


def train_network(cfg: Config, ctx, pool=None, first_step: int = 0) -> NetRun | None:
    """Train the Flax estimators (grid lrs x seeds, one compiled chunk program) in chunks of
    ``cfg.net_checkpoint_every`` rounds through the lab's chunked driver (``run_chunks``): after
    each chunk the whole state and the log so far are an Orbax checkpoint and a row is logged at
    step ``first_step + rounds done``; with ``ctx.resume`` the newest checkpoint is restored and
    training continues from it. With ``pool``, only start compiling the chunk program there
    (returns None)."""
    problems, families, feats = net_problems(cfg, ctx)
    static = NetTrainStatic(rounds=cfg.net_rounds, hidden=tuple(cfg.net_hidden),
                            optimizer=cfg.net_optimizer, best_response=cfg.net_best_response)
    hp = net_hparams([cfg.net_delta] * len(cfg.net_lrs), list(cfg.net_lrs))
    keys = jax.random.split(jax.random.fold_in(ctx.key, 200), cfg.seeds)
    chunk_len = min(cfg.net_checkpoint_every, cfg.net_rounds)
    n_chunks = math.ceil(cfg.net_rounds / chunk_len)
    g, s, padded = len(cfg.net_lrs), cfg.seeds, n_chunks * chunk_len
    init, chunk_fn = grid_programs(static, chunk_len)
    state0 = init(hp, keys, problems, feats)
    if pool is not None:  # only start compiling the chunk program
        compiled(chunk_fn, hp, state0, families, problems, feats, pool=pool)
        return None
    nan = np.full((g, s, padded), np.nan, np.float32)
    monitors = {"net": NetTrainLog(max_adv=nan, dist_adv=nan,
                                   chosen=np.full((g, s, padded), -1, np.int32))}
    init_state = {"train": state0, "final_max_adv": np.full((g, s), np.nan, np.float32)}
    program = {}  # the compiled chunk, fetched when there is a chunk left to run

    def chunk(state, c):
        if not program:
            with ctx.stopwatch("network_compile_wait") as lap:
                program["exe"], program["compile_s"] = compiled(
                    chunk_fn, hp, state["train"], families, problems, feats).result()
            program["wait_s"] = lap.seconds
        train, log, final = program["exe"](hp, state["train"], families, problems, feats)
        return {"train": train, "final_max_adv": final}, {"net": log}

    def rows(c, state, _mon):
        rounds_done = min((c + 1) * chunk_len, cfg.net_rounds)
        final = np.asarray(state["final_max_adv"])
        return [(first_step + rounds_done,
                 {"net_round": rounds_done, "net_max_adv_worst": float(np.max(final)),
                  "net_max_adv_best": float(np.min(final))})]

    done = run_chunks(ctx, "Flax estimator training (chunks)", init_state, chunk, n_chunks,
                      monitors=monitors, axis=2, keep=2, log_rows=rows, first_step=first_step)
    r = cfg.net_rounds
    log = done.monitors["net"]
    return NetRun(state=done.state["train"], max_adv=log.max_adv[:, :, :r],
                  dist_adv=log.dist_adv[:, :, :r], chosen=log.chosen[:, :, :r],
                  final_max_adv=np.asarray(done.state["final_max_adv"]),
                  resumed_from=min(done.restored * chunk_len, r),
                  compile_s=program.get("compile_s", 0.0),
                  wall_s=sum(done.wall_s) - program.get("wait_s", 0.0), chunks_run=done.ran,
                  next_step=done.next_step)


def _tabular(cfg: Config, ctx, pool=None):
    """Part 2's tabular runs (Algorithm 1, hazan step, on the network's problems; the delta axis
    holds net_delta in every entry): ``(future of the compiled program, its inputs)``."""
    problems, families, _ = net_problems(cfg, ctx)
    args = (families, problems, jnp.full((len(cfg.deltas),), cfg.net_delta, jnp.float32))
    return compiled(solve_grid(OGDStatic(trace_len=cfg.trace_len)), *args, pool=pool), args


def _network(cfg: Config, ctx, first_step: int, tabular=None):
    """Network (grid over lrs x seeds, one program) vs tabular (over seeds) on the same
    problems; ``tabular``: :func:`_tabular`'s result (computed here if None)."""
    n_z = 2**cfg.net_q
    net = train_network(cfg, ctx, first_step=first_step)
    future, args = _tabular(cfg, ctx) if tabular is None else tabular
    tab_exe, tab_compile = future.result()
    with ctx.stopwatch("tabular_first_call"):
        jax.block_until_ready(tab_exe(*args))
    with ctx.stopwatch("tabular") as lap:
        _, tab_summ = jax.block_until_ready(tab_exe(*args))
    tab_wall = lap.seconds
    state = net.state
    rows = []
    tab_max_adv = np.asarray(tab_summ.max_adv[:, 0])  # per seed
    tab_steps = np.asarray(tab_summ.steps[:, 0])
    for s in range(cfg.seeds):
        for g, lr in enumerate(cfg.net_lrs):
            rows.append({
                "seed": s, "lr": lr, "delta": cfg.net_delta, "n_z": n_z,
                "net_final_max_adv": float(net.final_max_adv[g, s]),
                "net_rounds_to_delta": int(state.rounds_to_delta[g, s]),
                "net_updates": int(state.updates[g, s]),
                "tab_steps": int(tab_steps[s]), "tab_max_adv": float(tab_max_adv[s]),
                "net_trace": net.max_adv[g, s],
            })
    timing = {"net_wall_s": net.wall_s, "net_compile_s": net.compile_s,
              "net_chunks_run": net.chunks_run, "net_resumed_from_round": net.resumed_from,
              "net_runs": cfg.seeds * len(cfg.net_lrs), "tab_wall_s": tab_wall,
              "tab_compile_s": tab_compile, "tab_runs": cfg.seeds * len(cfg.deltas)}
    ctx.log(timing, step=net.next_step)
    best_lr = min(cfg.net_lrs, key=lambda lr: nan_last(strict_max(
        r["net_final_max_adv"] for r in rows if r["lr"] == lr)))
    best = [r for r in rows if r["lr"] == best_lr]
    worst = strict_max(r["net_final_max_adv"] for r in best)
    reached = [r["net_rounds_to_delta"] for r in best]
    resumed = (f"; resumed at round {net.resumed_from}" if net.resumed_from else "")
    claim = dataclasses.replace(Claim.exact(
        f"Flax estimator trained by OGD reaches max|Adv| < delta = {cfg.net_delta:g} "
        f"(|Z| = {n_z}, best lr = {best_lr:g})",
        "network analogue of spec PED 5.3; no proven bound", f"< {cfg.net_delta:g}",
        worst, passed=worst < cfg.net_delta,
        note=(f"{cfg.seeds} seeds; best response: {cfg.net_best_response}, "
              f"{cfg.net_optimizer}; rounds to delta {reached} (of {cfg.net_rounds}; -1 = not "
              f"reached); tabular steps {[r['tab_steps'] for r in best]}; wall s after "
              f"compilation: network {net.wall_s:.3f} for {timing['net_runs']} runs "
              f"({net.chunks_run} chunks of {min(cfg.net_checkpoint_every, cfg.net_rounds)} "
              f"rounds{resumed}), tabular {tab_wall:.3f} for {timing['tab_runs']} runs")),
        finding=True)  # no theorem bounds the network's training: a measured finding
    return rows, claim, timing


def soundness_claims(cfg: Config, name: str, u_proto: float, pr: float, u_construct: float,
                     stages) -> list[Claim]:
    """The two gating rows of part 3 for the fixed prover ``name`` (pure), from the measured
    numbers: ``u_proto``, A's exact payoff by path enumeration against the constructed B;
    ``pr``, Pr[A correct]; ``u_construct``, the payoff the construction reports; ``stages``,
    the construction's stages (``.stage``, ``.steps``, ``.max_adv``, ``.reward``).

    * U_A <= rho^-(d+1) Pr[A correct] + eta (spec PED 6.4, Lemma A.4), with the enumeration
      agreeing with the construction to 1e-4 and Algorithm 1 exiting below delta at every stage;
    * the per-round mean reward E[R_k] <= 2 delta (eq. (11)), worst over k.
    A paying liar, a disagreeing construction, a round above 2 delta or a NaN fails its row."""
    d, rho = cfg.sound_depth, cfg.sound_rho
    delta = cfg.sound_eta / (2 * d + 3)
    bound = rho ** -(d + 1) * pr + cfg.sound_eta
    agree = abs(u_proto - u_construct) <= 1e-4
    rounds = [s for s in stages if s.stage.startswith("k=")]
    worst_round = strict_max(s.reward for s in rounds)
    exits = all(s.max_adv < delta for s in stages if s.stage != "final")
    return [Claim.exact(
        f"Soundness vs fixed A = {name}: U_A <= rho^-(d+1) Pr[A correct] + eta",
        "spec PED 6.4, 9.6 (Lemma A.4)", f"<= {bound:.4f}", u_proto,
        passed=u_proto <= bound and agree and exits,
        note=(f"d = {d}, q = {cfg.sound_q}, rho = {rho:g}, eta = {cfg.sound_eta:g}, "
              f"delta = eta/(2d+3) = {delta:.4f}; {cfg.sound_trees} hidden-flaw trees; "
              f"Pr[A correct] = {pr:.3f}; exact path enumeration {u_proto:.6f} vs "
              f"construction {u_construct:.6f}; Algorithm 1 steps per stage "
              f"{[s.steps for s in stages if s.stage != 'final']}")),
        Claim.exact(
        f"Soundness vs fixed A = {name}: per-round mean reward <= 2 delta",
        "spec PED 6.4 eq. (11)", f"<= {2 * delta:.4f}", worst_round,
        passed=worst_round <= 2 * delta,
        note="largest E[R_k] over k = d..1; " + ", ".join(
            f"{s.stage}: {s.reward:.4f}" for s in stages))]


# ---- part 3: soundness against fixed provers -----------------------------------------------------
def _soundness(cfg: Config, ctx):
    from dedebate.agents.ped_strategies import (
        honest_prover,
        obfuscating_liar,
        wrong_direction_prover,
    )
    from dedebate.estimators.soundness import construct_estimator
    from dedebate.protocols.prover_estimator import PEDSettings, expected_payoff, ped_params
    from dedebate.trees.library import hidden_flaw_tree

    makers = {"honest": honest_prover, "obfuscating": obfuscating_liar,
              "wrong_direction": wrong_direction_prover}
    trees = hidden_flaw_tree(jax.random.split(jax.random.fold_in(ctx.key, 300), cfg.sound_trees),
                             cfg.sound_depth, cfg.sound_q, 0)
    d = cfg.sound_depth
    delta = cfg.sound_eta / (2 * d + 3)
    rho = cfg.sound_rho

    def construct(name):
        """B against the fixed prover ``name`` and A's exact payoff by path enumeration."""
        prover = makers[name]()
        rep = construct_estimator(prover, trees, rho, delta)
        ep = jax.jit(jax.vmap(lambda est, tr: expected_payoff(
            PEDSettings(), ped_params(rho), prover, est, tr)))(rep.estimator, trees)
        return rep, jax.block_until_ready(ep)

    claims, rows = [], []
    # one thread per prover (the constructions are independent; mostly compilation, which runs
    # without the GIL); results are reported in order on this thread
    with (ctx.progress(len(cfg.sound_provers), "soundness: B vs fixed A") as bar,
          concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(cfg.sound_provers)),
                                                thread_name_prefix="ogd-sound") as pool):
        built = [pool.submit(construct, name) for name in cfg.sound_provers]
        for step, (name, fut) in enumerate(zip(cfg.sound_provers, built)):
            rep, ep = fut.result()
            u_proto = float(ep.u_a.mean())
            pr = float(ep.a_correct.mean())
            claims.extend(soundness_claims(cfg, name, u_proto, pr, rep.u_a, rep.stages))
            for s in rep.stages:
                rows.append({"prover": name, "stage": s.stage, "contexts": s.contexts,
                             "steps": s.steps, "max_adv": s.max_adv, "reward": s.reward,
                             "bound": s.bound, "delta": delta})
            ctx.log({"prover": name, "u_a": u_proto, "bound": rho ** -(d + 1) * pr + cfg.sound_eta,
                     "pr_correct": pr}, step=step)
            bar.update(1)
    return rows, claims


# ---- plots -----------------------------------------------------------------------------------------
def _plot_trace(cfg: Config, traces, net_rows):
    import matplotlib.pyplot as plt

    q = cfg.net_q if cfg.net_q in cfg.q_values else cfg.q_values[-1]
    delta = min(cfg.deltas)
    fig, ax = plt.subplots(figsize=(7, 4))
    for rule in cfg.step_rules:
        tr = traces[(rule, q, delta)]
        tr = tr[~np.isnan(tr)]
        ax.plot(np.arange(len(tr)), tr, label=f"tabular, {rule} step")
    ax.axhline(delta, color="k", ls="--", label=f"delta = {delta:g}")
    ax.set_xlabel("step t")
    ax.set_ylabel("max_f |Adv_f(h_t)|")
    ax.set_title(f"Algorithm 1 advantage trace (|Z| = {2**q}, seed 0)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig2, ax2 = plt.subplots(figsize=(7, 4))
    for r in net_rows[: len(cfg.net_lrs)]:
        ax2.plot(r["net_trace"], label=f"network, lr = {r['lr']:g}")
    ax2.axhline(cfg.net_delta, color="k", ls="--", label=f"delta = {cfg.net_delta:g}")
    ax2.set_xlabel("round")
    ax2.set_ylabel("max_f |Adv_f(h_theta)|")
    ax2.set_yscale("log")
    ax2.set_title(f"Flax estimator advantage trace (|Z| = {2**cfg.net_q}, seed 0)")
    ax2.legend()
    fig2.tight_layout()
    return fig, fig2


def _plot_steps(cfg: Config, rows):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = np.asarray(sorted({r["z_over_delta2"] for r in rows}))
    for rule, marker in zip(cfg.step_rules, ("o", "s")):
        sel = [r for r in rows if r["step_rule"] == rule]
        ax.scatter([r["z_over_delta2"] for r in sel], [max(r["steps"], 0.8) for r in sel],
                   marker=marker, alpha=0.6, label=f"T, {rule} step")
    ax.plot(xs, 36 * xs, "k-", label="36 |Z|/delta^2 (hazan bound)")
    ax.plot(xs, 4.5 * xs, "k--", label="4.5 |Z|/delta^2 (tight bound)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("|Z| / delta^2")
    ax.set_ylabel("steps T (T = 0 drawn at 0.8)")
    ax.set_title("Algorithm 1 steps vs the proven bound")
    ax.legend()
    fig.tight_layout()
    return fig


def run(cfg: Config, ctx) -> ExperimentResult:
    with concurrent.futures.ThreadPoolExecutor(max_workers=2,
                                               thread_name_prefix="ogd-compile") as pool:
        # parts 1 and 2 build their problems and compile on the workers while part 3 runs
        # (the workers only submit compilations, they never wait, so two cannot deadlock)
        prepared = pool.submit(_algorithm1_program, cfg, ctx, pool)
        net_ready = pool.submit(train_network, cfg, ctx, pool)
        tab_ready = pool.submit(_tabular, cfg, ctx, pool)
        sound_rows, sound_claims = [], []
        with ctx.stopwatch("soundness"):
            if cfg.sound_provers:
                sound_rows, sound_claims = _soundness(cfg, ctx)
        with ctx.stopwatch("wait_for_compilation"):
            prepared, tabular, _ = prepared.result(), tab_ready.result(), net_ready.result()
        with ctx.stopwatch("algorithm1_rows"):
            rows, traces = algorithm1_rows(cfg, ctx, prepared)
        with ctx.stopwatch("network"):
            net_rows, net_claim, net_timing = _network(
                cfg, ctx, len(cfg.sound_provers) + len(cfg.q_values) * len(cfg.step_rules),
                tabular)
    claims = [*algorithm1_claims(cfg, rows), net_claim, *sound_claims]
    fig_trace, fig_net = _plot_trace(cfg, traces, net_rows)
    plots = [ctx.save_figure(fig_trace, "advantage_trace"),
             ctx.save_figure(fig_net, "network_advantage_trace"),
             ctx.save_figure(_plot_steps(cfg, rows), "steps_vs_bound")]
    net_table = [{k: v for k, v in r.items() if k != "net_trace"} for r in net_rows]
    metrics = {
        "max_steps": max(r["steps"] for r in rows),
        "max_steps_over_hazan_bound": max(r["steps"] / r["bound_hazan"] for r in rows),
        "max_steps_over_tight_bound": max(r["steps"] / r["bound_tight"] for r in rows),
        "max_exit_adv_over_delta": max(r["max_adv"] / r["delta"] for r in rows),
        "network": net_table,
        "network_timing": net_timing,
    }
    return ExperimentResult(claims=claims, metrics=metrics,
                            tables={"algorithm1": rows, "network": net_table,
                                    "soundness": sound_rows},
                            plots=plots)
