"""Stackelberg self-play for prover-estimator debate (spec PED 7.4, 8.5), prover side.

A learned prover A leads; a learned estimator B follows with ``n_B`` Adam steps per A step on the
exact expected payoff. Parts: (1) a stable decomposition is available: does A converge to correct
answers, the stable candidate and payoff rho^-(d+1)? (2) only the unstable decomposition: A's
payoff should stay below rho^-(d+1); (3) schedules n_B vs simultaneous play; (4) B warm-started
from Algorithm 1 vs cold. What training achieves is a finding; the gating claims are what a
theorem settles, exactly on the trained players: completeness of the honest A against every
trained B (spec PED 4, Thm 6.1(1)) and chaining (spec 6.3, 6.4). Training runs chunk by chunk
through the lab's chunked driver (checkpoints, resume), each run of each part one row of the
swept function's compiled programs (``point``, ``DYNAMIC``: a chunked point), so a sweep row is
the run's seed-0 pair of part 1, bit for bit. The design and the monitors:
``docs/prover-estimator-debate.md`` section 8.5.1. The training code:
``dedebate.training.stackelberg`` (with ``stackelberg_runs`` and ``stackelberg_warm``).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from dedebate.agents.learned import N_CAND, N_CHILD, N_GLOBAL, N_NODE, N_ROOT, N_SEL
from dedebate.lab.experiment import (
    ChunkedFn,
    Claim,
    ExperimentResult,
    Training,
    mean_interval,
    wilson_interval,
)
from dedebate.lab.params import config_dataclass, param
from dedebate.programs import TRAINING, jit
from dedebate.training import stackelberg as sb
from dedebate.training import stackelberg_runs as runs
from dedebate.training.stackelberg import (
    StackelbergMonitors,
    StackelbergStatic,
    stackelberg_params,
    summary,
)
from dedebate.training.stackelberg_runs import Part, ProvenMeasured, Run, Trained
from dedebate.training.stackelberg_warm import ogd_targets, warm_info_template, warm_start
from dedebate.trees.stability import tree_rho

NAME = "stackelberg"
TITLE = "Stackelberg self-play: learned prover and estimator toward the A-leading equilibrium"
TYPICAL_SECONDS = 27  # a cold default-size run on two CPU cores (reproduce's order of work)
EXACT_TOL = 1e-6  # the exact rows' tolerance: float32 rounding of sums of payoffs ~1/4
LP_TOL = 1e-6  # rounding of the fbs linear programs when checking that the trees are rho-stable

COMPILE_OPTIONS = TRAINING  # the swept programs' XLA options (long training chunks)

def _r(x, n: int) -> list[float]:
    return [round(float(v), n) for v in np.ravel(np.asarray(x, np.float64))]


@config_dataclass
class Config:
    depth: int = param(1, "tree depth d (threshold rho^-(d+1))", ge=1, le=2)
    n_trees: int = param(4, "trees (inputs x) per seed (half true roots)",
                         ge=2, le=256, multiple_of=2)
    seeds: int = param(4, "training runs per schedule", ge=1, le=256)
    steps: int = param(150, "A updates per run (monitors keep every step: runs x seeds x steps)",
                       ge=2, le=20_000)
    n_b_values: tuple[int, ...] = param((1, 5, 20), "B updates per A update (Stackelberg)",
                                        ge=1, le=1000, min_len=1, max_len=8)
    main_n_b: int = param(20, "n_B of parts 1-2; must be one of n_b_values", ge=1, le=1000)
    lr_a: float = param(0.03, "A's Adam step size", gt=0.0)
    lr_b: float = param(0.01, "B's Adam step size", gt=0.0)
    rho: float = param(2.0, "stability parameter rho (fbs of the stable candidate)", ge=1.0)
    eta: float = param(0.0, "soundness slack in the certified bound rho^(d+1)(U_A - eta)",
                       ge=0.0)
    tol: float = param(0.1, "relative payoff tolerance around rho^-(d+1) for converged",
                       gt=0.0, lt=1.0)
    hidden_a: tuple[int, ...] = param((16,), "prover MLP hidden widths",
                                      ge=1, le=4096, min_len=1, max_len=8)
    hidden_b: tuple[int, ...] = param((32,), "estimator MLP hidden widths",
                                      ge=1, le=4096, min_len=1, max_len=8)
    unstable_part: bool = param(True, "run part 2 (only unstable decompositions)")
    chunks: int = param(5, "jitted chunks per part (log + checkpoint after each); divides steps",
                        ge=1, le=20_000)
    b_warm_start: bool = param(False, "parts 1-3: fit B to Algorithm 1's estimator for the "
                               "initial A before training")
    a_init_scale: float = param(0.0, "parts 1-3: A's output-layer init scale (0: fair coins)",
                                ge=0.0)
    warm_seeds: int = param(0, "part 4 (cold vs warm-started B, random initial A) seeds; 0 "
                            "skips it (Algorithm 1 costs ~10-30 s per seed on a CPU)",
                            ge=0, le=256)
    warm_a_init_scale: float = param(2.0, "part 4: A's output-layer init scale", gt=0.0)
    warm_delta: float = param(0.02, "Algorithm 1's delta for the warm start", gt=0.0, le=1.0)
    warm_fit_steps: int = param(300, "Adam steps fitting B to Algorithm 1's estimator",
                                ge=1, le=100_000)

    def __post_init__(self):
        if self.main_n_b not in self.n_b_values:
            raise ValueError(f"main_n_b={self.main_n_b}: must be one of {list(self.n_b_values)}")
        if self.steps % self.chunks:
            raise ValueError(f"chunks={self.chunks}: must divide steps={self.steps}")


# quick: 16 seeds and 150 A updates, so that the n_B = 20 row tolerates the ~1 in 8 seeds that
# stall (at the fair-coin saddle, or late): the Wilson lower bound exceeds 1/2 from 12/16 on (with
# 2 or 4 seeds every seed would have to converge). Probes of 8 seeds at run seeds 0 and 1 each
# converged 7/8, the slowest at A update 123; quick itself converges 14/16.
SIZES = {
    "quick": {"seeds": 16, "steps": 150, "chunks": 5, "n_b_values": (20,), "main_n_b": 20,
              "n_trees": 2, "unstable_part": False, "warm_seeds": 0},
    "full": {"seeds": 32, "steps": 400, "depth": 2, "n_trees": 8, "warm_seeds": 8},
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run, by part (float32; dedebate/lab/memory.py): one training run's seeds at
    once (the largest part), each with both players' parameters P, gradients and Adam moments
    (XLA's chunk program holds ~10 P, measured), the players' activations per tree node, and
    every run's monitors (``6 + 2 (d + 1)`` numbers per A update)."""
    def mlp(widths):
        return sum((a + 1) * b for a, b in zip(widths, widths[1:]))

    Q = 5  # noqa: N806 - the trees' width q (dedebate.training.stackelberg_runs)
    a, b = list(cfg.hidden_a), list(cfg.hidden_b)
    n_params = sum(mlp([n, *a, 1]) for n in (N_ROOT, N_NODE, N_CAND, N_SEL)) + sum(
        mlp([n, *b, out]) for n, out in ((N_ROOT, 1), (N_CHILD, 1), (N_GLOBAL, 2**Q)))
    seeds = max(cfg.seeds, cfg.warm_seeds)
    nodes = (Q ** (cfg.depth + 1) - 1) // (Q - 1)
    runs = (len(cfg.n_b_values) + 1 + cfg.unstable_part) * cfg.seeds + 2 * cfg.warm_seeds
    return {"players, gradients and Adam states": 4 * 10 * seeds * n_params,
            "activations": 4 * 4 * seeds * cfg.n_trees * nodes * (4 * sum(a) + 3 * sum(b)),
            "monitors": 4 * (6 + 2 * (cfg.depth + 1)) * cfg.steps * runs}


def parts(cfg: Config) -> list[Part]:
    """The parts the configuration trains (part 1 always; 2 and 4 when asked)."""
    stable_runs = tuple(Run(f"nB{n}", n, False, cfg.b_warm_start) for n in cfg.n_b_values) + (
        Run("simultaneous", 1, True, cfg.b_warm_start),)
    out = [Part("stable", 1, True, stable_runs, cfg.seeds, cfg.a_init_scale)]
    if cfg.unstable_part:
        out.append(Part("unstable", 2, False,
                        (Run(f"nB{cfg.main_n_b}", cfg.main_n_b, False, cfg.b_warm_start),),
                        cfg.seeds, cfg.a_init_scale))
    if cfg.warm_seeds:
        out.append(Part("warm", 3, True, (Run("cold", cfg.main_n_b, False, False),
                                          Run("warm", cfg.main_n_b, False, True)),
                        cfg.warm_seeds, cfg.warm_a_init_scale))
    return out


def _static(cfg: Config) -> StackelbergStatic:
    return StackelbergStatic(steps=cfg.steps, hidden_a=tuple(cfg.hidden_a),
                             hidden_b=tuple(cfg.hidden_b))


DYNAMIC = ("lr_a", "lr_b", "main_n_b", "rho", "eta", "tol")
"""Config fields that enter :func:`point` only as numbers (``main_n_b`` is a vmapped loop count:
every row of a group runs to the group's largest n_B, masked beyond its own). The others set
shapes, trip counts or compile-time constants: static. ``n_b_values`` must hold every swept
``main_n_b``."""


def _dynamic(cfg: Config, n_b: int, simultaneous: bool = False) -> dict:
    """The dynamic numbers of a training run at ``n_b`` B updates per A update (or
    simultaneous play): its hparams, the threshold rho^-(d+1) and the convergence band."""
    thr = cfg.rho ** -(cfg.depth + 1)
    return {"hp": stackelberg_params(cfg.lr_a, cfg.lr_b, n_b, simultaneous, cfg.rho, cfg.eta),
            "thr": np.float32(thr), "band": np.float32(cfg.tol * thr)}


def point_metrics(cfg: Config, mon: StackelbergMonitors) -> dict:
    """:func:`summary` of part 1's monitors ``[schedule, seed, steps]`` at schedule ``main_n_b``,
    seed 0: the sweep row of a run (what :func:`point`'s ``fn`` computes at the run's key)."""
    main = _dynamic(cfg, cfg.main_n_b)
    im = cfg.n_b_values.index(cfg.main_n_b)
    return {k: np.asarray(v)[im, 0].item()
            for k, v in summary(mon, main["thr"], main["band"]).items()}


def _chunked(cfg: Config) -> ChunkedFn:
    """Part 1's training at one schedule as a :class:`ChunkedFn`: ``init`` draws every seed's
    trees and initial players as :func:`train_parts` does (part key ``fold_in(key, 1)``, seed
    ``s`` from ``fold_in(., s)``), ``chunk`` is ``chunks`` chunks of :func:`sb.make_chunk`
    (seeds vmapped), ``finish`` is :func:`summary` of seed 0's monitors."""
    static = _static(cfg)
    length, a_scale = cfg.steps // cfg.chunks, float(cfg.a_init_scale)

    def init(dyn, key):
        part = jax.random.fold_in(key, 1)
        keys = jax.numpy.stack([jax.random.fold_in(part, s) for s in range(cfg.seeds)])

        def one(k):
            trees = runs.stable_trees(jax.random.fold_in(k, 0), cfg.n_trees, cfg.depth)
            return {"trees": trees,
                    "carry": sb.init_carry(static, trees, jax.random.fold_in(k, 1), a_scale)}

        return jax.vmap(one)(keys)

    def chunk(dyn, state, n):
        carry, mon = jax.vmap(sb.make_chunk(static, n), in_axes=(None, 0, 0))(
            dyn["hp"], state["trees"], state["carry"])
        return {**state, "carry": carry}, mon

    def finish(dyn, _state, mon):
        return {k: v[0] for k, v in summary(mon, dyn["thr"], dyn["band"]).items()}

    return ChunkedFn(init=init, chunk=chunk, chunks=(length,) * cfg.chunks, finish=finish,
                     axis=1)


def point(cfg: Config):
    """One sweep point ``(dynamic, ChunkedFn)``: part 1's ``seeds`` pairs at schedule
    ``main_n_b``, trained chunk by chunk (:func:`_chunked`); the row is :func:`summary` of seed
    0's monitors (:func:`point_metrics`). A run trains every run of every part through these
    compiled programs (:func:`training`, one row per call), so a row swept one per call is the
    run's seed-0 pair, bit for bit (a sweep wants ``params.seeds=1``: the other seeds
    train for nothing). Algorithm 1's warm start runs on the host: not sweepable.

    Args:
        cfg: the Config (``b_warm_start`` must be False).

    Returns:
        ``(dynamic, ChunkedFn)``: the row's dynamic numbers (:func:`_dynamic`) and the chunked
        training.
    """
    if cfg.b_warm_start:
        raise ValueError("b_warm_start=True: Algorithm 1 runs on the host, outside the swept "
                         "function; a sweep trains a cold B (b_warm_start=false)")
    return _dynamic(cfg, cfg.main_n_b), _chunked(cfg)


def _row(p: Part, r: Run) -> str:
    return f"{p.name}/{r.label}"


def training(cfg: Config, key) -> Training:
    """Every run of every part (:func:`parts`) as a row of :func:`point`'s compiled programs (no
    run pays for another's n_B): part 1's rows start from the init program at the run's key (the
    sweep row's pairs), the others' from :func:`runs.part_start` at ``fold_in(key, key_index)``;
    a warm run's B is first fitted to Algorithm 1's estimator for the initial A (``setup``: the
    fits' numbers by part)."""
    static, rows, starts, setup = _static(cfg), {}, {}, {}
    for p in parts(cfg):
        rows |= {_row(p, r): _dynamic(cfg, r.n_b, r.simultaneous) for r in p.runs}
        setup[p.name] = warm_info_template(p.seeds, cfg.depth)
        if p.name == "stable" and not cfg.b_warm_start:
            continue
        if p.name == "stable":
            first = jit(_chunked(cfg).init)(None, key)
            trees, carry = first["trees"], first["carry"]
        else:
            trees, carry = runs.part_start(static, p, jax.random.fold_in(key, p.key_index),
                                           cfg.n_trees, cfg.depth)
        fitted = carry
        if any(r.warm for r in p.runs):
            targets, steps, max_adv = ogd_targets(static, trees, carry, cfg.rho, cfg.warm_delta)
            fitted, info = warm_start(static, trees, carry, targets, cfg.rho, cfg.warm_fit_steps)
            setup[p.name] = {**info, "ogd_steps": steps, "ogd_max_adv": max_adv}
        starts |= {_row(p, r): {"trees": trees, "carry": fitted if r.warm else carry}
                   for r in p.runs}
    order = list(rows)
    length = cfg.steps // cfg.chunks

    def log_rows(name, c, mon):
        part = next(p for p in parts(cfg) if name.startswith(p.name + "/"))
        run = next(r for r in part.runs if _row(part, r) == name)
        one = jax.tree.map(lambda x: np.asarray(x)[None], mon)
        start = (order.index(name) * cfg.chunks + c) * length
        return [(step, {**row, f"{name}/a_update": step - start + c * length})
                for step, row in runs.monitor_rows(dataclasses.replace(part, runs=(run,)), one,
                                                   start)]

    return Training(rows=rows, starts=starts, log_rows=log_rows, setup=setup,
                    cfg=dataclasses.replace(cfg, b_warm_start=False))


def trained_parts(cfg: Config, measured) -> dict[str, Trained]:
    """Each part's :class:`Trained` from the lab's trained rows: monitors and final carries
    stacked over its runs, its trees, warm-start numbers and wall seconds."""
    state, mons, out = measured["state"], measured["monitors"], {}
    for p in parts(cfg):
        names = [_row(p, r) for r in p.runs]
        out[p.name] = Trained(
            mon=jax.tree.map(lambda *m: np.stack([np.asarray(x) for x in m]),
                             *[mons[n] for n in names]),
            warm=jax.tree.map(np.asarray, measured["setup"][p.name]),
            trees=state[names[0]]["trees"],
            carry=jax.tree.map(lambda *x: jax.numpy.asarray(np.stack([np.asarray(a) for a in x])),
                               *[state[n]["carry"] for n in names]),
            part=p, wall=sum(measured["wall_s"][n] for n in names))
    return out


def host(cfg: Config, _seed, _key, measured) -> tuple[ProvenMeasured, list[dict]]:
    """The proven rows' numbers, measured exactly on every trained pair, and their table."""
    return runs.measure_proven(_static(cfg), float(cfg.rho), cfg.rho ** -(cfg.depth + 1), [
        (t.part, t.trees, t.carry) for t in trained_parts(cfg, measured).values()])


def unstable_claim(cfg: Config, mon2: StackelbergMonitors, wall2: float, thr, tables,
                   metrics) -> Claim:
    """Part 2 (a finding): with only the unstable decomposition, A's trained payoff stays below
    rho^-(d+1) (mean over the last tenth of training, per seed); adds its table and metrics."""
    tail = max(1, cfg.steps // 10)
    u_tail = mon2.u_a[0, :, -tail:].mean(axis=-1)
    m2, lo2, hi2 = mean_interval(u_tail)
    tables["unstable"] = [{"seed": s, "tail_u_a": float(u_tail[s]),
                           "final_a_correct": float(mon2.a_correct[0, s, -1]),
                           "final_max_adv": float(mon2.max_adv[0, s, -1])}
                          for s in range(cfg.seeds)]
    metrics["unstable"] = {"tail_u_a_mean": m2, "wall_s": wall2}
    return Claim(
        f"Only the unstable hidden-flaw AND decomposition (fbs 5 at true claims, rho = "
        f"{cfg.rho:g}): A's trained payoff stays below rho^-(d+1) = {thr:g}",
        "spec PED 8.7, 9.5", f"< {thr:g}", m2, lo2, hi2,
        passed=bool(hi2 < thr), finding=True,
        note=(f"mean E[U_A] over the last {tail} A updates, per seed "
              f"{_r(u_tail, 4)}; max over training per seed "
              f"{_r(mon2.u_a[0].max(axis=-1), 4)}; P[A correct] final "
              f"{_r(mon2.a_correct[0, :, -1], 3)}; n_B = {cfg.main_n_b};"
              f" wall {wall2:.1f} s"))


def warm_claim(cfg: Config, mon: StackelbergMonitors, info: dict, wall: float, thr, tables,
               metrics, setup_wall: float) -> Claim:
    """Part 4 (a finding): cold vs Algorithm-1 warm-started B against the same random initial
    A; adds its table and metrics."""
    n = cfg.warm_seeds
    band = _dynamic(cfg, cfg.main_n_b)["band"]  # first converged A update of [cold, warm]:
    conv = np.asarray(summary(mon, np.float32(thr), band)["converged_at"])
    cold, warm = info["adv_cold"], info["adv_warm"]
    k_c, k_w = (int((conv[i] < cfg.steps).sum()) for i in range(2))
    tables["warm"] = [{"seed": s, "adv_cold": float(cold[s]), "adv_warm": float(warm[s]),
                       "fit_kl": float(info["fit_kl"][s]),
                       "ogd_max_adv": float(info["ogd_max_adv"][s]),
                       "ogd_steps": info["ogd_steps"][s].tolist(),
                       "converged_at_cold": int(conv[0, s]), "converged_at_warm": int(conv[1, s]),
                       "final_u_a_cold": float(mon.u_a[0, s, -1]),
                       "final_u_a_warm": float(mon.u_a[1, s, -1])} for s in range(n)]
    metrics["warm"] = {"converged_cold": k_c, "converged_warm": k_w, "wall_s": wall,
                       "setup_wall_s": setup_wall,
                       "adv_cold_mean": float(cold.mean()), "adv_warm_mean": float(warm.mean())}
    return Claim.exact(
        f"Warm start (n_B = {cfg.main_n_b}): B fitted to Algorithm 1's estimator for a random "
        f"initial A starts with a smaller realised max|Adv| against A's spec 6.3 tests than the "
        f"cold (uniform) B", "spec PED 5.3, 6.3 (warm start); no proven rate",
        "< cold, every seed", float(warm.max()), passed=bool(np.all(warm < cold)),
        note=(f"{n} seeds; initial max|Adv| cold {_r(cold, 4)} vs warm "
              f"{_r(warm, 4)} (Algorithm 1 exit "
              f"{_r(info['ogd_max_adv'], 5)} < delta = {cfg.warm_delta:g}; fit KL "
              f"{_r(info['fit_kl'], 5)}); convergence (A init scale "
              f"{cfg.warm_a_init_scale:g}): cold {k_c}/{n} at {conv[0].tolist()}, warm {k_w}/{n} "
              f"at {conv[1].tolist()} (steps = never, of {cfg.steps}); final E[U_A] cold "
              f"{_r(mon.u_a[0, :, -1], 4)}, warm "
              f"{_r(mon.u_a[1, :, -1], 4)}; set-up wall {setup_wall:.1f} s (Algorithm 1: a "
              "host loop, compiles per seed)"), finding=True)


def proven_claims(cfg: Config, m: ProvenMeasured) -> list[Claim]:
    """The gating rows, what a theorem settles, from the measured numbers ``m`` (pure):

    * completeness: the honest A earns >= rho^-(d+1) - ``EXACT_TOL`` against every trained B,
      on trees whose stable candidate has fbs <= rho + ``LP_TOL`` (the premise; the row fails
      when it does not hold);
    * chaining: max |E[U_A] - chaining sum| <= ``EXACT_TOL`` over every trained pair.
    A number that is not finite fails its row.
    """
    thr = cfg.rho ** -(cfg.depth + 1)
    honest_min, rho_max, chain_max = m.honest_min, m.rho_max, m.chain_max
    premise = rho_max <= cfg.rho + LP_TOL
    claims = [Claim.exact(
        f"Completeness against the trained estimators: the honest A (spec 2.3) earns >= "
        f"rho^-(d+1) = {thr:g} against every trained B on the rho-stable trees of part 1 "
        f"(every seed, every schedule)", "spec PED 4, Thm 6.1(1)", f">= {thr:.6g}",
        honest_min, passed=bool(premise and honest_min >= thr - EXACT_TOL),
        note=(f"min over {m.n_stable} trained Bs x {cfg.n_trees} trees of E[U_A] (exact, path "
              f"enumeration; float32 tolerance {EXACT_TOL:g}); min per run "
              + ", ".join(f"{k} {v:.6f}" for k, v in m.per_run.items())
              + f"; largest excess over the bound {m.excess_max:.4f} (spec 4: B's root error "
              f"pays A); trees rho-stable: max fbs of the stable candidate over all their nodes "
              f"{rho_max:.6f} <= rho = {cfg.rho:g} ({'holds' if premise else 'FAILS'}); for "
              f"contrast the trained A against the same Bs: mean E[U_A] over trees, min "
              f"{m.trained_u_min:.4f}, max {m.trained_u_max:.4f}"))]
    claims.append(Claim.exact(
        "Chaining at the end of training: each trained pair's E[U_A] (protocol rewards) equals "
        "r^(d+1) P[A correct] - sum Adv(round-reward tests) + sum Adv(calibration tests) of the "
        "trained B against the trained A's spec 6.3 tests", "spec PED 6.3, 6.4",
        f"max |difference| <= {EXACT_TOL:g}", chain_max, passed=bool(chain_max <= EXACT_TOL),
        note=(f"max over {m.n_pairs} trained pairs (every part, run and seed), exact; the left "
              "side sums the protocol's rewards (expected_payoff), the right rebuilds them from "
              "A's directions, B's phat and pi and the truth tables M_D(T(y^k)) (payoff_terms), "
              "so it checks the reward weights r^k, the signs and decomposability (both sides "
              "share play()'s pi and phat)")))
    return claims


def sweep_figures(rows):
    """``stackelberg_rates``: A updates to convergence (mean over seeds; a seed that never
    converges counts as ``steps``) and the converged fraction against A's learning rate (or B's,
    when only it is swept), one line per ``main_n_b`` (and other swept rate)."""
    import matplotlib.pyplot as plt

    if not rows:
        return {}
    x_axis = "lr_a" if "lr_a" in rows[0] else "lr_b" if "lr_b" in rows[0] else None
    if x_axis is None:
        return {}
    other = [a for a in ("main_n_b", "lr_b" if x_axis == "lr_a" else None, "tol")
             if a and a in rows[0]]
    lines: dict = {}
    for r in rows:
        lines.setdefault(tuple(r[a] for a in other), {}).setdefault(float(r[x_axis]), []).append(r)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for label, pts in sorted(lines.items()):
        xs = sorted(pts)
        name = ", ".join(f"{a} = {v:g}" for a, v in zip(other, label)) or "all"
        axes[0].plot(xs, [np.mean([r["converged_at"] for r in pts[x]]) for x in xs], "o-",
                     label=name)
        axes[1].plot(xs, [np.mean([r["converged"] for r in pts[x]]) for x in xs], "o-",
                     label=name)
    axes[0].set_ylabel("A updates to convergence (mean; never = steps)")
    axes[1].set_ylabel("converged fraction")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel(f"{x_axis} (Adam step size)")
        ax.legend(fontsize=8)
    fig.suptitle("Stackelberg self-play: convergence against n_B and the learning rates")
    fig.tight_layout()
    return {"stackelberg_rates": fig}


def _plot(cfg, mon, labels, thr):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    x = np.arange(cfg.steps)
    for i, lab in enumerate(labels):
        for ax, arr in ((axes[0], mon.u_a[i]), (axes[1], mon.a_correct[i]),
                        (axes[2], mon.max_adv[i])):
            m = arr.mean(axis=0)
            lo, hi = np.quantile(arr, 0.1, axis=0), np.quantile(arr, 0.9, axis=0)
            ax.plot(x, m, label=lab)
            ax.fill_between(x, lo, hi, alpha=0.2)
    axes[0].axhline(thr, color="k", ls="--", label="rho^-(d+1)")
    axes[0].axhspan(thr * (1 - cfg.tol), thr * (1 + cfg.tol), color="k", alpha=0.08,
                    label=f"rho^-(d+1) (1 +- {cfg.tol:g}): the final payoff's band")
    axes[0].set_ylabel("mean E[U_A]")
    axes[1].set_ylabel("P[A correct]")
    axes[2].set_ylabel("B's realised max|Adv| (spec 6.3 tests)")
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("A update")
        ax.legend(fontsize=8)
    fig.suptitle(f"Stackelberg vs simultaneous play (mean, 10-90% band over {cfg.seeds} seeds)")
    fig.tight_layout()
    return fig


def stable_claims(cfg: Config, t: Trained, labels: list[str], tables, metrics) -> list[Claim]:
    """Parts 1 and 3 (findings) from part 1's trained runs ``t`` (schedules ``labels``): at
    ``main_n_b`` most seeds converge and the final payoff is near rho^-(d+1); the most B updates
    per A update converge at least as often as simultaneous play. Adds the per-seed table, the
    run's sweep row (``point``) and the part's metrics."""
    d, mon, wall = cfg.depth, t.mon, t.wall
    thr = cfg.rho ** -(d + 1)
    tree = jax.tree.map(lambda x: x[0, 0], t.trees)
    rho_tree = tree_rho(tree, cand=tree.honest_cand)
    main = _dynamic(cfg, cfg.main_n_b)
    sm = {k: np.asarray(v) for k, v in summary(mon, main["thr"], main["band"]).items()}
    conv = sm["converged_at"]  # [schedule, seed]
    tables["stable"] = [{"schedule": lab, "seed": s, "converged_at": int(conv[i, s]),
                         "converged": bool(sm["converged"][i, s]),
                         **{k: float(sm[k][i, s]) for k in (
                             "final_u_a", "final_a_correct", "final_p_stable", "final_max_adv",
                             "final_calib", "final_certified")}}
                        for i, lab in enumerate(labels) for s in range(cfg.seeds)]
    im = cfg.n_b_values.index(cfg.main_n_b)
    metrics["point"] = point_metrics(cfg, mon)  # the sweep row of this run (point()'s fn)
    k = int((conv[im] < cfg.steps).sum())
    frac, lo, hi = wilson_interval(k, cfg.seeds)
    steps_needed = [int(c) for c in conv[im] if c < cfg.steps]
    warm_note = ""
    if cfg.b_warm_start:
        warm_note = (f"; B warm-started from Algorithm 1 (delta = {cfg.warm_delta:g}, A init "
                     f"scale {cfg.a_init_scale:g}), initial max|Adv| "
                     f"{_r(t.warm['adv_warm'], 4)}")
    claims = [Claim(
        f"Stable candidate available (n_B = {cfg.main_n_b}): A converges to correct answers, "
        f"the stable decomposition and payoff within {cfg.tol:g} of rho^-(d+1)",
        "spec PED 7.4, 8.5; no proven rate", "fraction of seeds > 1/2",
        frac, lo, hi, passed=lo > 0.5, finding=True,
        note=(f"{k}/{cfg.seeds} seeds; A updates needed {steps_needed} of {cfg.steps}; d = {d},"
              f" q = 5, rho = {cfg.rho:g} (tree fbs max {rho_tree:.3f}), "
              f"{cfg.n_trees} trees/seed; final certified rho^(d+1)(U_A - eta) = "
              f"{_r(mon.certified[im, :, -1], 3)}; B's final realised max|Adv| "
              f"against A's spec 6.3 tests {_r(mon.max_adv[im, :, -1], 4)} "
              f"(calibration proxy {_r(mon.calib[im, :, -1], 3)})"
              + warm_note))]
    u_fin = mon.u_a[im, :, -1]
    m, ulo, uhi = mean_interval(u_fin)
    claims.append(Claim(
        f"Stable candidate (n_B = {cfg.main_n_b}): final mean E[U_A] near rho^-(d+1) = "
        f"{thr:g}", "spec PED 7.4 (practical reading)",
        f"in [{thr * (1 - cfg.tol):.4f}, {thr * (1 + cfg.tol):.4f}]", m, ulo, uhi,
        passed=bool(ulo >= thr * (1 - cfg.tol) and uhi <= thr * (1 + cfg.tol)), finding=True,
        note=f"per seed {_r(u_fin, 4)}; 95% Student t interval over seeds"))
    # part 3: schedules
    fracs = {lab: float((conv[i] < cfg.steps).mean()) for i, lab in enumerate(labels)}
    med = {lab: float(np.median(conv[i])) for i, lab in enumerate(labels)}
    best_nb = max(cfg.n_b_values)
    ib = cfg.n_b_values.index(best_nb)
    kb, ks = int((conv[ib] < cfg.steps).sum()), int((conv[-1] < cfg.steps).sum())
    fb, blo, bhi = wilson_interval(kb, cfg.seeds)
    claims.append(Claim(
        f"Several B updates per A update (n_B = {best_nb}) converge at least as often as "
        "simultaneous gradient play", "spec PED 8.5 (recommendation; no proven rate)",
        f">= simultaneous ({ks}/{cfg.seeds})", fb, blo, bhi, passed=kb >= ks, finding=True,
        note=("converged fraction / median A updates to converge (steps = never) per "
              "schedule: " + "; ".join(f"{lab}: {fracs[lab]:.2f} / {med[lab]:g}"
                                       for lab in labels) + f"; wall {wall:.1f} s incl. "
              "compile for all schedules and seeds")))
    metrics["stable"] = {"fraction_converged": fracs, "median_updates_to_converge": med,
                         "wall_s": wall, "threshold": thr, "tree_rho": rho_tree,
                         "final_max_adv_mean": float(mon.max_adv[im, :, -1].mean())}
    return claims


def report(cfg: Config, measured, host) -> ExperimentResult:
    """Each part's rows from the trained runs, the proven rows measured exactly on every
    trained pair (``host``: :func:`host`'s; :func:`proven_claims`) and the schedules' figure."""
    thr = cfg.rho ** -(cfg.depth + 1)
    labels = [f"n_B = {n}" for n in cfg.n_b_values] + ["simultaneous"]
    tables, metrics = {}, {}
    res = trained_parts(cfg, measured)
    mon = res["stable"].mon
    claims = stable_claims(cfg, res["stable"], labels, tables, metrics)
    tables["schedules"] = [
        {"part": "stable", "schedule": lab,
         "converged": sum(r["converged_at"] < cfg.steps
                          for r in tables["stable"][i * cfg.seeds:(i + 1) * cfg.seeds]),
         "final_u_a_mean": float(mon.u_a[i, :, -1].mean())} for i, lab in enumerate(labels)]
    if "unstable" in res:
        claims.append(unstable_claim(cfg, res["unstable"].mon, res["unstable"].wall, thr, tables,
                                     metrics))
    if "warm" in res:
        claims.append(warm_claim(cfg, res["warm"].mon, res["warm"].warm, res["warm"].wall, thr,
                                 tables, metrics, measured["wall_s"]["setup"]))
    m, tables["proven"] = host
    metrics["proven"] = {"honest_u_a_min": m.honest_min, "honest_min_per_run": m.per_run,
                         "tree_rho_max": m.rho_max, "chain_abs_err_max": m.chain_max}
    claims.extend(proven_claims(cfg, m))
    return ExperimentResult(claims=claims, metrics=metrics, tables=tables,
                            figures={"schedules": _plot(cfg, mon, labels, thr)})
