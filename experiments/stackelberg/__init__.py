"""Stackelberg self-play for prover-estimator debate (spec PED 7.4, 8.5; docs section 8.5.1)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from scipy import stats

from dedebate.agents.learned import N_CAND, N_CHILD, N_GLOBAL, N_NODE, N_ROOT, N_SEL
from dedebate.agents.ped_strategies import tie_loss
from dedebate.core.pytrees import stack
from dedebate.lab.experiment import (
    ChunkedFn,
    Claim,
    ExperimentResult,
    Training,
    exact_interval,
    mean_interval,
)
from dedebate.lab.params import config_dataclass, param
from dedebate.programs import TRAINING, jit
from dedebate.training import stackelberg as sb
from dedebate.trees.stability import tree_rho

from . import runs
from .figures import plot_schedules
from .figures import sweep_figures as sweep_figures  # the lab's sweep hook
from .runs import Trained, dynamic, summarise, warm_start

NAME = "stackelberg"
TITLE = "Stackelberg self-play: learned prover and estimator toward the A-leading equilibrium"
TYPICAL_SECONDS = 30  # a cold default-size run on two CPU cores (reproduce's order of work)

COMPILE_OPTIONS = TRAINING  # the swept programs' XLA options (long training chunks)


@config_dataclass
class Config:
    depth: int = param(1, "tree depth d (threshold rho^-(d+1))", ge=1, le=2)
    n_trees: int = param(4, "trees per seed (half true roots)", ge=2, le=256, multiple_of=2)
    seeds: int = param(
        6, "training runs per schedule (6/6 converged: exact lower bound > 1/2)", ge=1, le=256
    )
    steps: int = param(150, "A updates per run (monitors keep every one)", ge=2, le=20_000)
    n_b_values: tuple[int, ...] = param(
        (1, 5, 20), "B updates per A update (Stackelberg)", ge=1, le=1000, min_len=1, max_len=8
    )
    main_n_b: int = param(20, "n_B of parts 1-2; one of n_b_values", ge=1, le=1000)
    lr_a: float = param(0.03, "A's Adam step size", gt=0.0, le=10.0)
    lr_b: float = param(0.01, "B's Adam step size", gt=0.0, le=10.0)
    rho: float = param(
        2.0, "stability parameter rho (fbs of the stable candidate)", ge=1.0, le=100.0
    )
    eta: float = param(
        0.0, "soundness slack in the certified bound rho^(d+1)(U_A - eta)", ge=0.0, le=1.0
    )
    tol: float = param(0.1, "relative payoff tolerance around rho^-(d+1)", gt=0.0, lt=1.0)
    hidden_a: tuple[int, ...] = param(
        (16,), "A's MLP widths", ge=1, le=4096, min_len=1, max_len=8, distinct=False
    )
    hidden_b: tuple[int, ...] = param(
        (32,), "B's MLP widths", ge=1, le=4096, min_len=1, max_len=8, distinct=False
    )
    unstable_part: bool = param(True, "run part 2 (only unstable decompositions)")
    chunks: int = param(5, "chunks per run (checkpoint after each); divides steps", ge=1, le=20_000)
    b_warm_start: bool = param(False, "parts 1-3: fit B to Algorithm 1's estimator first")
    a_init_scale: float = param(
        0.0, "parts 1-3: A's output init scale (0: fair coins)", ge=0.0, le=100.0
    )
    exploit_steps: int = param(
        300,
        "Adam steps of each search for a B that exploits a trained A (tabular; B's class; 0: none)",
        ge=0,
        le=100_000,
    )
    exploit_restarts: int = param(
        2, "random starts of each search (per tree for the tabular one)", ge=1, le=64
    )
    warm_seeds: int = param(0, "part 4 (cold vs warm B) seeds, ~20 s each; 0 skips", ge=0, le=256)
    warm_a_init_scale: float = param(2.0, "part 4: A's output-layer init scale", gt=0.0, le=100.0)
    warm_delta: float = param(0.02, "Algorithm 1's delta for the warm start", gt=0.0, le=1.0)
    warm_fit_steps: int = param(300, "Adam steps fitting B to Algorithm 1", ge=1, le=100_000)

    def __post_init__(self):
        if self.main_n_b not in self.n_b_values:
            raise ValueError(f"main_n_b={self.main_n_b}: must be one of {list(self.n_b_values)}")
        if self.steps % self.chunks:
            raise ValueError(f"chunks={self.chunks}: must divide steps={self.steps}")


EXPLOIT_KEY = 100  # host's key folded with this: the starts of the exploiting search
# quick: 16 seeds, so that n_B = 20 tolerates the ~1 in 8 seeds that stall (exact lower bound
# > 1/2 from 13/16 on); quick converged 13/16 at seed 0 (2026-12-06)
SIZES = {
    "quick": {
        "seeds": 16,
        "steps": 150,
        "chunks": 5,
        "n_b_values": (20,),
        "main_n_b": 20,
        "n_trees": 2,
        "unstable_part": False,
        "warm_seeds": 0,
    },
    "full": {"seeds": 32, "steps": 400, "depth": 2, "n_trees": 8, "warm_seeds": 8},
}

# Floats per (seed, tree) by depth: fixed, per unit of A's widths, of B's (all (2q)^d forced paths
# and their gradient); fitted to XLA's count (CPU): 0.86-1.23x at depth 1, 0.95-1.06x at depth 2.
ACTIVATION_FLOATS = {1: (3700, 120, 70), 2: (85_000, 4400, 3150)}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes of a run (float32): players (~10 copies, measured), activations, monitors."""

    def mlp(widths):
        return sum((a + 1) * b for a, b in zip(widths, widths[1:]))

    a, b = list(cfg.hidden_a), list(cfg.hidden_b)
    n_params = sum(mlp([n, *a, 1]) for n in (N_ROOT, N_NODE, N_CAND, N_SEL)) + sum(
        mlp([n, *b, out]) for n, out in ((N_ROOT, 1), (N_CHILD, 1), (N_GLOBAL, 2**runs.Q))
    )
    seeds = max(cfg.seeds, cfg.warm_seeds)
    fixed, per_a, per_b = ACTIVATION_FLOATS[cfg.depth]
    n_runs = (len(cfg.n_b_values) + 1 + cfg.unstable_part) * cfg.seeds + 2 * cfg.warm_seeds
    return {
        "players, gradients and Adam states": 4 * 10 * seeds * n_params,
        "activations": 4 * seeds * cfg.n_trees * (fixed + per_a * sum(a) + per_b * sum(b)),
        "monitors": 4 * (6 + 2 * (cfg.depth + 1)) * cfg.steps * n_runs,
    }


# numbers to point(); main_n_b is a vmapped loop count (masked beyond a row's own n_B)
DYNAMIC = ("lr_a", "lr_b", "main_n_b", "rho", "eta", "tol")


def exact_tol(depth: int, trees: int = 1) -> float:
    """The exact rows' tolerance, a bound on float32 rounding: each side of a row sums up to
    ``(2 q)^d`` paths (two candidates) of payoffs of ``d + 3`` terms of size <= 1, then averages
    over ``trees`` trees, a sum of n terms erring by at most ``n u sum|x|`` (``u = 2^-24``)."""
    return 2 * ((2 * runs.Q) ** depth + depth + 3 + trees - 1) * (depth + 3) * 2.0**-24


LP_TOL = 1e-6  # rounding of the fbs linear programs when checking that the trees are rho-stable
FINALS = ("u_a", "a_correct", "p_stable", "max_adv", "calib", "certified")  # also logged per seed


def point(cfg: Config):
    """``(dynamic, ChunkedFn)``: part 1 at ``main_n_b``, seeds-vmapped training in ``chunks``
    chunks; the row is seed 0's summary."""
    if cfg.b_warm_start:
        raise ValueError("b_warm_start=True: the host's warm start is not sweepable")
    static = runs.static(cfg)

    def init(dyn, key):
        trees, carry = runs.part_start(cfg, runs.parts(cfg)[0], jax.random.fold_in(key, 1))
        return {"trees": trees, "carry": carry}

    def chunk(dyn, state, n):
        carry, mon = jax.vmap(sb.make_chunk(static, n), in_axes=(None, 0, 0))(
            dyn["hp"], state["trees"], state["carry"]
        )
        return {**state, "carry": carry}, mon

    def finish(dyn, _state, mon):
        return {k: v[0] for k, v in sb.summary(mon, dyn["thr"], dyn["band"]).items()}

    chunks = (cfg.steps // cfg.chunks,) * cfg.chunks
    fn = ChunkedFn(init=init, chunk=chunk, chunks=chunks, finish=finish, axis=1)
    return dynamic(cfg, cfg.main_n_b), fn


def training(cfg: Config, key) -> Training:
    """Every run of every part as a row of :func:`point`'s programs (warm Bs fitted first)."""
    rows: dict[str, dict] = {}  # row name -> its dynamic
    starts: dict[str, dict] = {}  # row name -> its initial state
    setup: dict = {}  # part name -> its warm start's info
    for p in runs.parts(cfg):
        names = {f"{p.name}/{r.label}": r for r in p.runs}
        rows |= {n: dynamic(cfg, r.n_b, r.simultaneous) for n, r in names.items()}
        if p.name == "stable" and not cfg.b_warm_start:
            continue  # the lab starts these rows at the point's init
        k = jax.random.fold_in(key, p.key_index)
        trees, cold = jit(lambda k, p=p: runs.part_start(cfg, p, k))(k)
        if any(r.warm for r in p.runs):
            fit = (cfg.rho, cfg.warm_delta, cfg.warm_fit_steps)
            warm, setup[p.name] = warm_start(runs.static(cfg), trees, cold, *fit)
        starts |= {n: {"trees": trees, "carry": warm if r.warm else cold} for n, r in names.items()}
    order, length = list(rows), cfg.steps // cfg.chunks

    def log_rows(name, c, mon):  # one row per A update, at step (row, A update)
        start, out = (order.index(name) * cfg.chunks + c) * length, []
        for t in range(length):
            row = {f"{name}/a_update": c * length + t}
            for f in FINALS:
                for s, v in enumerate(np.asarray(getattr(mon, f))[:, t]):
                    row[f"{name}/seed{s}/{'payoff' if f == 'u_a' else f}"] = float(v)
            out.append((start + t, row))
        return out

    cold_cfg = dataclasses.replace(cfg, b_warm_start=False)
    return Training(rows=rows, starts=starts, log_rows=log_rows, setup=setup, cfg=cold_cfg)


def trained_parts(cfg: Config, measured) -> dict[str, Trained]:
    """Each part's :class:`Trained` from the lab's trained rows, stacked over its runs."""
    state, mons, out = measured["state"], measured["monitors"], {}
    for p in runs.parts(cfg):
        names = [f"{p.name}/{r.label}" for r in p.runs]
        out[p.name] = Trained(
            mon=stack([mons[n] for n in names]),
            warm=measured["setup"].get(p.name),
            trees=state[names[0]]["trees"],
            carry=stack([state[n]["carry"] for n in names]),
            part=p,
            wall=sum(measured["wall_s"][n] for n in names),
        )
    return out


def host(cfg: Config, _seed, key, measured):
    """The proven rows' numbers, exact on every trained pair: ``(max fbs, a row per pair)``."""
    search_key = jax.random.fold_in(key, EXPLOIT_KEY)  # no training key: a part's index is 1..3
    return runs.measure_proven(cfg, trained_parts(cfg, measured).values(), search_key)


def _r(x, n: int) -> list[float]:
    return [round(float(v), n) for v in np.ravel(np.asarray(x, np.float64))]


def _per_seed(**columns) -> list[dict]:  # one table row per seed
    n = len(next(iter(columns.values())))
    return [
        {"seed": s, **{k: np.asarray(v)[s].tolist() for k, v in columns.items()}} for s in range(n)
    ]


def labels(cfg: Config) -> list[str]:
    """Part 1's schedules as tables and figures name them."""
    return [f"n_B = {n}" for n in cfg.n_b_values] + ["simultaneous"]


def stable_rows(cfg: Config, t: Trained):
    """Parts 1 and 3 (findings): ``(claims, tables, metrics)`` of part 1's trained runs."""
    mon, thr, seeds, steps = t.mon, cfg.rho ** -(cfg.depth + 1), cfg.seeds, cfg.steps
    n_seeds, n_trees = np.shape(t.trees.truth)[:2]
    cache: dict = {}  # every tree of every seed (the trees differ by seed)
    rho_tree = max(
        tree_rho(tr, cand=tr.honest_cand, cache=cache)
        for tr in (
            jax.tree.map(lambda x, i=i, j=j: x[i, j], t.trees)
            for i in range(n_seeds)
            for j in range(n_trees)
        )
    )
    summary = summarise(cfg, mon)
    conv = summary["converged_at"]  # [schedule, seed]
    done, names = conv < steps, labels(cfg)
    im, ib = cfg.n_b_values.index(cfg.main_n_b), cfg.n_b_values.index(max(cfg.n_b_values))
    k, kb, ks = (int(done[i].sum()) for i in (im, ib, -1))
    conv_iv, best_iv = exact_interval(k, seeds), exact_interval(kb, seeds)
    table = [[kb, seeds - kb], [ks, seeds - ks]]
    p_more = float(stats.fisher_exact(table, alternative="greater").pvalue)
    u_fin = mon.u_a[im, :, -1]
    _, ulo, uhi = fin_iv = mean_interval(u_fin)
    fracs = {lab: float(done[i].mean()) for i, lab in enumerate(names)}
    med = {lab: float(np.median(conv[i])) for i, lab in enumerate(names)}
    warm_note = f"; warm B, initial max|Adv| {_r(t.warm['adv_warm'], 4)}" if t.warm else ""
    claims = [
        Claim(
            f"Stable candidate available (n_B = {cfg.main_n_b}): A converges to correct answers, "
            f"the stable decomposition at the root and payoff within {cfg.tol:.0%} of "
            "rho^-(d+1), against the B it trained with",
            "spec PED 7.4, 8.5; no proven rate",
            "fraction of seeds > 1/2",
            *conv_iv,
            passed=conv_iv[1] > 0.5,
            finding=True,
            note=(
                f"{k}/{seeds} seeds; A updates needed {[int(c) for c in conv[im] if c < steps]} "
                f"of {steps}; tree fbs max {rho_tree:.3f}; final values in the table" + warm_note
            ),
        ),
        Claim(
            f"Stable candidate (n_B = {cfg.main_n_b}): final mean E[U_A] against the trained B "
            f"near rho^-(d+1) = {thr:g}",
            "spec PED 7.4 (practical reading)",
            f"95% interval within [{thr * (1 - cfg.tol):.4f}, {thr * (1 + cfg.tol):.4f}]",
            *fin_iv,
            passed=bool(ulo >= thr * (1 - cfg.tol) and uhi <= thr * (1 + cfg.tol)),
            finding=True,
            note=f"per seed {_r(u_fin, 4)}; 95% Student t interval over seeds",
        ),
        Claim(
            f"Several B updates per A update (n_B = {max(cfg.n_b_values)}) converge more often "
            "than simultaneous gradient play (one-sided Fisher exact test at 0.05)",
            "spec PED 8.5 (recommendation; no proven rate)",
            f"> simultaneous ({ks}/{seeds}): p < 0.05",
            *best_iv,
            passed=p_more < 0.05,  # on the counts, not their point estimates (1/6 vs 1/6 passed)
            finding=True,
            note=f"p = {p_more:.3g}; converged fraction / median A updates to converge (steps = "
            "never): " + "; ".join(f"{lab}: {fracs[lab]:.2f} / {med[lab]:g}" for lab in names),
        ),
    ]
    tables = {
        "stable": [
            {"schedule": lab, **row}
            for i, lab in enumerate(names)
            for row in _per_seed(
                converged_at=conv[i],
                converged=done[i],
                **{f"final_{f}": getattr(mon, f)[i, :, -1] for f in FINALS},
            )
        ],
        "schedules": [
            {
                "part": "stable",
                "schedule": lab,
                "converged": int(done[i].sum()),
                "final_u_a_mean": float(mon.u_a[i, :, -1].mean()),
            }
            for i, lab in enumerate(names)
        ],
    }
    metrics = {
        "point": {k: v[im, 0].item() for k, v in summary.items()},  # the run's sweep row
        "stable": {
            "fraction_converged": fracs,
            "median_updates_to_converge": med,
            "wall_s": t.wall,
            "tree_rho": rho_tree,
            "final_max_adv_mean": float(mon.max_adv[im, :, -1].mean()),
        },
    }
    return claims, tables, metrics


def unstable_rows(cfg: Config, mon, wall: float):
    """Part 2 (a finding): A's payoff over its last updates is below rho^-(d+1)."""
    thr, tail = cfg.rho ** -(cfg.depth + 1), max(1, cfg.steps // 10)
    u_tail = mon.u_a[0, :, -tail:].mean(axis=-1)
    _, _, hi = tail_iv = mean_interval(u_tail)
    claim = Claim(
        f"Only the unstable hidden-flaw AND decomposition (fbs 5 at true claims, rho = "
        f"{cfg.rho:g}): A's payoff over its last {tail} updates is below rho^-(d+1) = {thr:g}",
        "spec PED 8.7, 9.5",
        f"< {thr:g}",
        *tail_iv,
        passed=bool(hi < thr),
        finding=True,
        note=(
            f"mean E[U_A] over the last {tail} A updates, per seed {_r(u_tail, 4)}; max "
            f"{_r(mon.u_a[0].max(axis=-1), 4)}; P[A correct] at the end "
            f"{_r(mon.a_correct[0, :, -1], 3)}, B's max|Adv| {_r(mon.max_adv[0, :, -1], 3)} (a "
            "training that failed would pass this row too)"
        ),
    )
    table = _per_seed(
        tail_u_a=u_tail,
        final_a_correct=mon.a_correct[0, :, -1],
        final_max_adv=mon.max_adv[0, :, -1],
    )
    return [claim], {"unstable": table}, {"unstable": {"wall_s": wall}}


def warm_rows(cfg: Config, mon, info: dict, wall: float, setup_wall: float):
    """Part 4 (a finding): cold vs Algorithm-1 warm-started B."""
    n, conv = cfg.warm_seeds, summarise(cfg, mon)["converged_at"]  # [cold, warm] x seeds
    cold, warm = info["adv_cold"], info["adv_warm"]
    k_c, k_w = (int((conv[i] < cfg.steps).sum()) for i in range(2))
    claim = Claim.exact(
        f"Warm start (n_B = {cfg.main_n_b}): B fitted to Algorithm 1's estimator for a random "
        f"initial A starts with a smaller realised max|Adv| against A's spec 6.3 tests than the "
        f"cold (uniform) B",
        "spec PED 5.3, 6.3 (warm start); no proven rate",
        "< cold, every seed",
        float(warm.max()),
        passed=bool(np.all(warm < cold)),
        note=(
            f"initial max|Adv| cold {_r(cold, 4)} vs warm {_r(warm, 4)}; converged cold "
            f"{k_c}/{n}, warm {k_w}/{n}"
        ),
        finding=True,
    )
    table = _per_seed(
        adv_cold=cold,
        adv_warm=warm,
        **{k: info[k] for k in ("fit_kl", "ogd_max_adv", "ogd_steps")},
        converged_at_cold=conv[0],
        converged_at_warm=conv[1],
        final_u_a_cold=mon.u_a[0, :, -1],
        final_u_a_warm=mon.u_a[1, :, -1],
    )
    metrics = {
        "converged_cold": k_c,
        "converged_warm": k_w,
        "wall_s": wall,
        "setup_wall_s": setup_wall,
        "adv_cold_mean": float(cold.mean()),
        "adv_warm_mean": float(warm.mean()),
    }
    return [claim], {"warm": table}, {"warm": metrics}


def proven_rows(cfg: Config, rho_max: float, rows: list[dict]):
    """The gating rows (completeness, given fbs <= rho; chaining) from :func:`host`'s exact
    numbers (a NaN fails): ``(claims, tables, metrics)``."""
    thr, premise = cfg.rho ** -(cfg.depth + 1), rho_max <= cfg.rho + LP_TOL
    tol, chain_tol = exact_tol(cfg.depth), exact_tol(cfg.depth, cfg.n_trees)  # chain: a mean
    tie = tie_loss(cfg.rho, cfg.depth)  # what honest A's float32 tie rule may cost (PED 2.3)
    honest: dict = {}  # the honest A's payoffs against each stable run's trained Bs
    for r in rows:
        if r["part"] != "unstable":
            honest.setdefault(f"{r['part']}/{r['run']}", []).append(r["honest_u_a_min"])
    per_run = {run: float(np.min(u)) for run, u in honest.items()}
    honest_min = float(np.min(list(per_run.values())))
    chain_max = float(np.max([r["chain_abs_err"] for r in rows]))
    claims = [
        Claim.exact(
            f"Completeness against the trained estimators: the honest A (spec 2.3) earns >= "
            f"rho^-(d+1) = {thr:g} against every trained B on the rho-stable trees (every "
            f"stable part, seed and schedule)",
            "spec PED 4, Thm 6.1(1)",
            f">= {thr:.6g}",
            honest_min,
            passed=bool(premise and honest_min >= thr - tol - tie),
            note=(
                f"min over {sum(map(len, honest.values()))} trained Bs x {cfg.n_trees} trees; "
                f"max fbs {rho_max:.6f} ({'holds' if premise else 'FAILS'}); per run "
                + ", ".join(f"{run} {u:.6f}" for run, u in per_run.items())
            ),
        ),
        Claim.exact(
            "Chaining at the end of training: each trained pair's E[U_A] (protocol rewards) equals "
            "r^(d+1) P[A correct] - sum Adv(round-reward tests) + sum Adv(calibration tests) of "
            "the trained B against the trained A's spec 6.3 tests",
            "spec PED 6.3, 6.4",
            f"max |difference| <= {chain_tol:.2g}",
            chain_max,
            passed=bool(chain_max <= chain_tol),
            note=f"max over {len(rows)} trained pairs; an identity for every pair on decomposable "
            "trees (spec 6.4), so it checks the implementation: the advantage monitors against "
            "the protocol's payoff",
        ),
    ]
    searches = {  # the row key, who B is, and how the search found it
        "exploited_u_a": (
            "the strongest B a search finds",
            f"tabular Bs (one per tree, may encode its hidden truths; Adam, "
            f"{cfg.exploit_restarts} starts x {cfg.exploit_steps} steps)",
        ),
        "class_exploited_u_a": (
            "the strongest B of its trained class a search finds",
            f"Bs of the trained class (the {tuple(cfg.hidden_b)} MLP of the public view; Adam from "
            f"the trained B and {cfg.exploit_restarts} fresh starts x {cfg.exploit_steps} steps)",
        ),
    }
    for key, (who, how) in searches.items():
        found = np.array([r[key] for r in rows if r.get(key) is not None], np.float64)
        if not found.size:  # not searched (exploit_steps = 0); a failed search is a NaN
            continue
        k = int(np.sum(found >= thr * (1 - cfg.tol)))  # a NaN counts as below
        claims.append(
            Claim(
                f"Stable candidate (n_B = {cfg.main_n_b}): A's payoff against {who} stays at "
                f">= (1 - {cfg.tol:.0%}) rho^-(d+1) (the equilibrium of 7.4, not only against its "
                "trained B)",
                "spec PED 7.4; no proven rate",
                "fraction of seeds > 1/2",
                *exact_interval(k, found.size),
                passed=exact_interval(k, found.size)[1] > 0.5,
                finding=True,
                note=f"{k}/{found.size} seeds at >= {thr * (1 - cfg.tol):.4f}; per seed "
                f"{_r(found, 4)}: the least of the trained B's and of {how}",
            )
        )
    metrics = {"honest_min_per_run": per_run, "tree_rho_max": rho_max}
    return claims, {"proven": rows}, {"proven": metrics}


def report(cfg: Config, measured, host) -> ExperimentResult:
    """Each part's rows, the proven rows (``host``'s numbers) and the schedules' figure."""
    res = trained_parts(cfg, measured)
    out = [stable_rows(cfg, res["stable"])]
    if "unstable" in res:
        out.append(unstable_rows(cfg, res["unstable"].mon, res["unstable"].wall))
    if "warm" in res:
        w = res["warm"]
        out.append(warm_rows(cfg, w.mon, w.warm, w.wall, measured["wall_s"]["setup"]))
    out.append(proven_rows(cfg, *host))
    thr = cfg.rho ** -(cfg.depth + 1)
    return ExperimentResult(
        claims=[c for claims, _, _ in out for c in claims],
        metrics={k: v for _, _, metrics in out for k, v in metrics.items()},
        tables={k: v for _, tables, _ in out for k, v in tables.items()},
        figures={"schedules": plot_schedules(cfg, res["stable"].mon, labels(cfg), thr)},
    )
