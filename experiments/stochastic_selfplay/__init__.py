"""Stochastic debate self-play: learned Alice and Bob against the Lean bounds (docs: DED 5.7)."""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.agents.selfplay_players import N_FEATURES, bob_as_zoo, learned_alice
from dedebate.agents.stochastic_zoo import lane_bytes
from dedebate.exact.selfplay import (
    against_honest_bob,
    honest_alice_against,
    level_inputs,
    measure_pair,
    measure_pairs,
    take,
)
from dedebate.lab.experiment import (
    ChunkedFn,
    Claim,
    ExperimentResult,
    Training,
    consistency_rows,
    exact_interval,
    mean_interval,
    strict_max,
    strict_min,
)
from dedebate.lab.params import config_dataclass, param
from dedebate.machines.fixtures import f2_target
from dedebate.machines.lipschitz import prefix_tree
from dedebate.programs import FAST_COMPILE
from dedebate.protocols.stochastic import debate_static, lean_defaults, make_vera, trial_keys
from dedebate.protocols.stochastic_batch import run_trials
from dedebate.training import stochastic_selfplay as sp

from .figures import guaranteed_sides, plot_training
from .figures import sweep_figures as sweep_figures  # the lab's sweep hook

NAME = "stochastic_selfplay"
TITLE = "Stochastic debate self-play: learned Alice and Bob vs the Lean bounds"
TYPICAL_SECONDS = 17  # a cold default-size run on two CPU cores (reproduce's order of work)
COMPILE_OPTIONS = FAST_COMPILE  # the swept programs' XLA options (small scans, compile-bound)

CASES = ("yes", "no")  # the instances, in training order
RATES = ("lr_a", "lr_b", "n_b", "alice_init", "bob_init", "vera_grad_mix")  # selfplay_params'
MC_KEY = 100  # fold_in(key, MC_KEY): the Monte-Carlo debates (training: fold_in(key, instance))
MEASURED = ("value", "value_vs_honest_bob", "gap", "gap_ub", "tracking", "hit", "false_alarm")


@config_dataclass
class Config:
    T: int = param(6, "steps of the F2 fixture (K = 2)", ge=3, le=10)
    p_yes: float = param(0.75, "P_M(1) of the yes-instance", ge=2 / 3, le=0.95)
    p_no: float = param(0.25, "P_M(1) of the no-instance", ge=0.05, le=1 / 3)
    spread: float = param(0.2, "F2 position probabilities p +- spread (in [0, 1])", ge=0, le=0.5)
    seeds: int = param(8, "self-play runs per instance", ge=2, le=256)
    steps: int = param(1000, "Alice updates per run", ge=10, le=100_000)
    n_b: int = param(5, "Bob updates per Alice update", ge=1, le=1000)
    n_b_sweep: tuple[int, ...] = param(
        (1, 20), "n_B values for the schedule row (distinct, != n_b)", ge=1, le=1000, max_len=8
    )
    hidden: int = param(16, "Alice's MLP width", ge=1, le=4096)
    lr_a: float = param(0.01, "Alice's Adam step size", gt=0.0, le=10.0)
    lr_b: float = param(0.05, "Bob's Adam step size", gt=0.0, le=10.0)
    alice_init: float = param(1.0, "typical initial lie |p - pi| in units of b", gt=0.0, le=100.0)
    bob_init: float = param(-2.0, "Bob's initial abort logit", ge=-100.0, le=100.0)
    vera_grad_mix: float = param(1.0, "weight of Vera's heavy-tailed gradient", ge=0.0, le=100.0)
    ablate_tail: bool = param(True, "also train with vera_grad_mix = 0 (reported in metrics)")
    gap_tol: float = param(0.05, "exploitability gap counted as converged", gt=0.0, lt=1.0)
    mc_trials: int = param(2000, "Monte-Carlo debates per seed and instance", ge=0, le=1_000_000)
    log_every: int = param(20, "Alice updates between logged monitors", ge=1, le=100_000)
    chunks: int = param(5, "chunks per training run, <= steps / log_every", ge=1, le=100_000)
    checkpoint_every: int = param(5, "chunks between checkpoints (all rows)", ge=1, le=100_000)

    def __post_init__(self):
        if not (self.p_yes + self.spread <= 1 and self.p_no - self.spread >= 0):
            raise ValueError(f"spread={self.spread}: need p_yes + spread <= 1, p_no - spread >= 0")
        if self.n_b in self.n_b_sweep:
            raise ValueError(f"n_b_sweep={list(self.n_b_sweep)}: need values != n_b={self.n_b}")
        sp.chunk_lengths(sp.periods(self.steps, self.log_every), self.chunks)  # raises if unfit


SIZES = {
    "quick": dict(T=4, seeds=4, steps=300, mc_trials=0, ablate_tail=False, n_b_sweep=()),
    "full": dict(T=10, seeds=32, steps=3000, mc_trials=20000, checkpoint_every=1),
}


def memory_bytes(cfg: Config) -> dict[str, int]:
    """Peak bytes (float32; XLA holds ~3 copies of Alice's activations and gradients)."""
    rows = 1 + cfg.ablate_tail + len(cfg.n_b_sweep)
    lane = 4 * (N_FEATURES + 2) * cfg.hidden + lane_bytes(cfg.T)
    return {
        "Alice's activations and gradients": 3 * 4 * 2 * cfg.seeds * 2**cfg.T * cfg.hidden,
        "monitors": 2 * 2 * 4 * cfg.seeds * -(-cfg.steps // cfg.log_every) * rows,
        "Monte-Carlo lanes": cfg.seeds * cfg.mc_trials * lane,
    }


def setup(cfg):
    """``(fixtures by instance, Lean's defaults, their constants, static, hyperparameters)``."""
    fxs = {c: f2_target(cfg.T, p, spread=cfg.spread) for c, p in zip(CASES, (cfg.p_yes, cfg.p_no))}
    K = fxs["yes"].K
    params = lean_defaults(K, cfg.T)
    constants = params.constants(K, cfg.T)
    static = sp.SelfPlayStatic(T=cfg.T, hidden=cfg.hidden, steps=cfg.steps, log_every=cfg.log_every)
    hp = sp.selfplay_params(constants, **{k: getattr(cfg, k) for k in RATES})
    return fxs, params, constants, static, hp


def point_metrics(measured: dict, gap_tol: float) -> dict[str, float]:
    """The float64 metrics of the main pairs ``measured[case] = (ev, honest)`` (a sweep row's)."""
    out: dict[str, float] = {}
    for case in CASES:
        ev, honest = measured[case]
        for s, (e, h) in enumerate(zip(ev, honest)):
            out |= {f"{case}/s{s}/{m}": float(e[m]) for m in MEASURED}
            out[f"{case}/s{s}/honest_alice_vs_bob"] = float(h)
        val, gap, gap_ub = (np.array([e[k] for e in ev]) for k in ("value", "gap", "gap_ub"))
        out |= {
            f"{case}/value_mean": float(val.mean()),
            f"{case}/value_min": float(val.min()),
            f"{case}/value_max": float(val.max()),
            f"{case}/gap_mean": float(gap.mean()),
            f"{case}/gap_max": float(gap.max()),
            f"{case}/converged_frac": float(np.mean(gap_ub <= gap_tol)),
        }
    out["honest_alice_vs_bob_min"] = strict_min(measured["yes"][1])
    vs_honest = [e["value_vs_honest_bob"] for e in measured["no"][0]]
    out["alice_vs_honest_bob_max"] = strict_max(vs_honest)
    return out


# point's numeric fields (n_b is a traced loop bound: a vmapped row waits for its group's largest)
DYNAMIC = ("p_yes", "p_no", "spread", *RATES, "gap_tol")


def point(cfg: Config):
    """``(dynamic, ChunkedFn)``: both instances' main runs, every seed, in ``chunks`` chunks."""
    fxs, _, _, static, hp = setup(cfg)
    levels = [jax.tree.map(np.asarray, level_inputs(prefix_tree(f.machine))) for f in fxs.values()]
    words = np.array([cfg.p_yes, cfg.p_no, cfg.spread, cfg.gap_tol], np.float64)
    dynamic = {
        "inputs": jax.tree.map(lambda *x: np.stack(x), *levels),
        "hp": jax.tree.map(np.asarray, hp),
        "words": words.view(np.uint32).reshape(4, 2),
    }
    axes = sp.carry_axes(static)
    init = functools.partial(sp.init_carry, static)
    for _ in CASES:  # seeds, then instances
        init = jax.vmap(init, in_axes=(None, 0), out_axes=axes)

    def measure(dyn, players):  # on the host, one row: its words' float64 numbers
        words = np.ascontiguousarray(dyn["words"]).view(np.float64)[:, 0].tolist()
        p_yes, p_no, spread, tol = words
        row = dataclasses.replace(cfg, p_yes=p_yes, p_no=p_no, spread=spread, gap_tol=tol)
        fxs, _, constants, _, _ = setup(row)
        measured = {
            case: measure_pairs(fx, prefix_tree(fx.machine), constants, *players[case])
            for case, fx in fxs.items()
        }
        return point_metrics(measured, tol)

    def start(dyn, key):
        ks = [jax.random.fold_in(key, i) for i in range(len(CASES))]
        keys = [jnp.stack([jax.random.fold_in(k, s) for s in range(cfg.seeds)]) for k in ks]
        return init(dyn["hp"], jnp.stack(keys))

    def chunk(dyn, carry, periods):
        train = sp.make_chunk(static, periods)
        for in_axes in ((None, None, axes), (0, None, axes)):  # seeds, then instances
            train = jax.vmap(train, in_axes=in_axes, out_axes=(axes, 0))
        return train(dyn["inputs"], dyn["hp"], carry)

    def finish(_dyn, carry, _mon):  # the trained players, measured on the host (measure)
        return {c: (take(carry.alice, i), take(carry.bob, i)) for i, c in enumerate(CASES)}

    chunks = sp.chunk_lengths(sp.n_periods(static), cfg.chunks)
    fn = ChunkedFn(start, chunk, chunks, finish, axis=2, measure=measure)
    return dynamic, fn


def training(cfg: Config, _key) -> Training:
    """The main row, the tail ablation and one row per extra n_B through point's programs."""
    dynamic, fn = point(cfg)
    hp = dynamic["hp"]
    rows = {"main": dynamic}
    if cfg.ablate_tail:
        rows["ablation"] = {**dynamic, "hp": hp.replace(vera_grad_mix=np.float32(0))}
    rows |= {f"n_b_{n}": {**dynamic, "hp": hp.replace(n_b=np.int32(n))} for n in cfg.n_b_sweep}
    starts = np.cumsum((0, *fn.chunks)).tolist()

    def log_rows(name, c, mon):
        val, trk = np.asarray(mon.value), np.asarray(mon.tracking)
        out = []
        for j in range(val.shape[2]) if name == "main" else ():
            for i, case in enumerate(CASES):
                v = val[i, :, j]
                row = {"instance": case, "value_mean": float(v.mean()), "value_min": float(v.min())}
                row |= {"value_max": float(v.max()), "tracking_mean": float(trk[i, :, j].mean())}
                out.append(((starts[c] + j + 1) * cfg.log_every, row))
        return out

    return Training(rows=rows, every=cfg.checkpoint_every, log_rows=log_rows)


def host(cfg, _seed, key, measured) -> dict:
    """Per instance, the exact measurements of every row's pairs and the Monte-Carlo wins."""
    fxs, _, constants, _, _ = setup(cfg)
    dev, results, seeds = jax.devices()[0], {}, range(cfg.seeds)

    def put(tree, i):  # like the swept measurement's arrays, so it reuses their programs
        return jax.tree.map(lambda x: jax.device_put(np.asarray(x)[i], dev), tree)

    for i, (case, fx) in enumerate(fxs.items()):
        lv = prefix_tree(fx.machine)
        pairs = {n: (put(c.alice, i), put(c.bob, i)) for n, c in measured["state"].items()}
        alice, bob = pairs.pop("main")
        ev, honest = measure_pairs(fx, lv, constants, alice, bob)
        res = {"p1": fx.p1(), "ev": ev, "honest_alice": honest}
        res["rows"] = {  # the other rows: the cheap measurements
            n: [measure_pair(lv, take(a, s), take(b, s), constants, full=False) for s in seeds]
            for n, (a, b) in pairs.items()
        }
        if cfg.mc_trials > 0:
            k_mc = jax.random.fold_in(jax.random.fold_in(key, MC_KEY), i)  # not a seed's key
            res["mc_wins"] = _mc_wins(cfg, fx, constants, alice, bob, k_mc)
        results[case] = res
    # The Lean bounds hold for every strategy: every row's players, trained on either instance
    # (the main run's yes-instance Bobs are measured above already; its no-instance Alices are
    # measured again here, by the DP over players, and order_checks compares the two)
    (yes, no), (i_yes, i_no) = fxs.values(), (CASES.index("yes"), CASES.index("no"))
    lv_yes, lv_no = prefix_tree(yes.machine), prefix_tree(no.machine)
    bobs, alices = list(results["yes"]["honest_alice"]), []
    for n, c in measured["state"].items():
        for i in range(len(CASES)):
            if n != "main" or i != i_yes:
                bobs += honest_alice_against(yes, lv_yes, constants, put(c.bob, i))
            vs_honest = against_honest_bob(lv_no, constants, put(c.alice, i), put(c.bob, i))
            alices += vs_honest
            if n == "main" and i == i_no:  # measure_pairs' values too: order_checks compares
                results["no"]["main_vs_honest_bob"] = vs_honest
    results["yes"]["every_bob"], results["no"]["every_alice"] = bobs, alices
    return results


def _mc_wins(cfg, fx, constants, alice, bob, key) -> np.ndarray:
    """Alice's wins per seed in ``mc_trials`` debates of each seed's trained pair."""
    idx = jnp.repeat(jnp.arange(cfg.seeds), cfg.mc_trials)  # each seed's lanes, on the device
    alices = learned_alice(jax.tree.map(lambda x: jnp.asarray(x)[idx], alice), constants.b)
    alices = alices.replace(  # type: ignore[attr-defined]  # flax's struct.dataclass adds it
        unit=jnp.full(idx.size, constants.b, jnp.float32), n_samples=jnp.zeros(idx.size, jnp.int32)
    )
    bobs = jax.tree.map(
        lambda x: jnp.asarray(x)[idx] if np.ndim(x) else jnp.full(idx.size, np.asarray(x)),
        bob_as_zoo(bob, constants.b),
    )
    keys = trial_keys(jax.random.fold_in(key, 7), idx.size)
    static, vera = debate_static(cfg.T), make_vera(constants)
    out = run_trials(static, fx.machine, alices, bobs, vera, keys, axes=(None, 0, 0, None))
    wins = jnp.sum(out.alice_wins.reshape(cfg.seeds, -1), axis=1, dtype=jnp.int32)  # on device
    return np.asarray(jax.device_get(wins), np.int64)  # one int per seed to the host


def proven_claims(comp, sound_acc, setting, honest_vs_bob, alice_vs_honest, sides, main):
    """The gating rows: the Lean bounds against every trained Bob and Alice (the worst);
    ``main``: the main run's values (yes-instance Bobs, no-instance Alices), shown per seed."""
    h, v = np.asarray(honest_vs_bob), np.asarray(alice_vs_honest)
    h_min, v_max = strict_min(h), strict_max(v)
    of = "every row (main, ablation, n_B sweep), trained on either instance, every seed"
    per_seed = [np.round(np.asarray(m), 4).tolist() for m in main]
    return [
        Claim.exact(
            "Honest Alice vs every self-play-trained Bob (on the yes-instance) wins >= "
            "completeness",
            "spec DED 5.3 (Lean completeness'), exact DP",
            f">= {comp:.4f}",
            h_min,
            h_min >= comp,
            f"worst of {h.size} Bobs ({of}); main run on the yes-instance per seed {per_seed[0]}; "
            f"2/3-majority bound {sides[0]:.4f}; " + setting,
        ),
        Claim.exact(
            "Every self-play-trained Alice vs honest Bob (on the no-instance) is accepted at "
            "most 1 - the soundness bound",
            "spec DED 5.3 (Lean soundness'), exact DP",
            f"<= {sound_acc:.4f}",
            v_max,
            v_max <= sound_acc,
            f"worst of {v.size} Alices ({of}); main run on the no-instance per seed "
            f"{per_seed[1]}; 2/3-majority bound {sides[1]:.4f}",
        ),
    ]


def mc_claims(mc: dict[str, tuple[float, float, float]]) -> list[Claim]:
    """The Monte-Carlo rows ``mc[case] = (exact mean over seeds, pooled wins, debates)``."""
    return [
        Claim.proportion(
            f"Monte-Carlo play of the trained pairs ({case}) agrees with the exact DP",
            "dedebate.protocols.stochastic_batch.run_trials vs exact DP",
            "==",
            exact_mean,
            wins,
            n,
            note=f"{wins}/{n} debates pooled over seeds (conservative for a pool of binomials)",
            bound=f"contains the exact mean {exact_mean:.4f}",
        )
        for case, (exact_mean, wins, n) in mc.items()
    ]


def order_checks(results: dict) -> dict[str, tuple[bool, str]]:
    """Per instance, the exact values every seed's pair must put in order, however training
    went: Bob's best response <= the pair's value <= Alice's best response <= its bound; and
    each main-run Alice's value against honest Bob by measure_pairs and by against_honest_bob."""
    keys, out = ("bob_best_response", "value", "alice_best_response", "alice_best_response_ub"), {}
    for case, res in results.items():
        vals = np.array([[e[k] for k in keys] for e in res["ev"]], np.float64)
        bad = [s for s, v in enumerate(vals) if not np.all(v[:-1] <= v[1:] + 1e-9)]  # NaN: bad
        name = f"{case}: Bob's best response <= value <= Alice's best response <= its bound"
        out[name] = (not bad, f"out of order at seeds {bad}" if bad else f"{len(vals)} seeds")
        if "main_vs_honest_bob" in res:  # the per-seed DP of the pairs, and the one over players
            two = [e["value_vs_honest_bob"] for e in res["ev"]], res["main_vs_honest_bob"]
            name = f"{case}: each trained Alice against honest Bob, measured two ways, is equal"
            out[name] = (two[0] == two[1], f"measure_pairs {two[0]}, against_honest_bob {two[1]}")
    return out


def seed_values(res: dict, k: str) -> np.ndarray:
    """Metric ``k`` of an instance's measured pairs, per seed."""
    return np.array([e[k] for e in res["ev"]])


def wrong_side(evs: list[dict], case: str) -> int:
    """The seeds whose pair accepts on the wrong side of 1/2 for ``case`` (NaN: wrong side)."""
    return int(sum(not (e["value"] > 0.5 if case == "yes" else e["value"] <= 0.5) for e in evs))


def schedule_claim(evs: dict, S: int) -> tuple[Claim, dict]:
    """The n_B finding from ``evs[n_b][case]``, the seeds' measurements (a NaN: not met)."""
    sched = {n: {c: wrong_side(e, c) for c, e in evs[n].items()} for n in evs}
    lo_nb, hi_nb = min(sched), max(sched)
    k_hi, k_lo = sched[hi_nb]["no"], sched[lo_nb]["no"]
    finite = all(np.isfinite(e["value"]) for n in evs for e in evs[n]["no"])
    per_n = {str(n): sched[n] for n in sorted(sched)}
    counts = "; ".join(f"n_B = {n}: {v['yes']} / {v['no']}" for n, v in per_n.items())
    claim = Claim(
        f"More Bob updates per Alice update (n_B = {hi_nb} vs {lo_nb}) do not leave more "
        "no-instance seeds on the wrong side (acceptance > 1/2), on the counts",
        "spec PED 8.5 recommendation, transferred (criterion: the recommendation itself)",
        f"<= n_B = {lo_nb} fraction ({k_lo}/{S})",
        *exact_interval(k_hi, S),
        passed=finite and k_hi <= k_lo,  # a NaN counts as wrong side: on both sides
        finding=True,
        note=f"wrong-side seeds (yes / no) per n_B: {counts} of {S}; same seeds and "
        "initialisations for every n_B" + ("" if finite else "; NOT MET: a value is NaN"),
    )
    return claim, per_n


def findings(results: dict, constants, gap_tol: float, sides) -> dict[str, list[Claim]]:
    """Per kind of finding (outcome, tracking, targeting, convergence) its row per instance."""
    out: dict[str, list] = {k: [] for k in ("outcome", "tracking", "targeting", "convergence")}
    b, desc = constants.b, "descriptive; criterion fixed in advance"
    for case, who in (("yes", "winning"), ("no", "lying")):
        res, yes = results[case], case == "yes"
        keys = ("value", "tracking", "gap", "gap_ub", "hit", "false_alarm")
        val, trk, gap, gap_ub, hit, fa = (seed_values(res, k) for k in keys)
        worst = val.min() if yes else val.max()
        m, lo, hi = mean_interval(val, support=(0.0, 1.0))
        out["outcome"].append(
            Claim.exact(
                f"Self-play on the {case}-instance: the trained pair's acceptance is on the "
                "protocol's guaranteed side (worst seed)",
                "spec DED 5.3 bounds (not a theorem for learned pairs)",
                f">= {sides[0]:.4f}" if yes else f"<= {sides[1]:.4f}",
                worst,
                worst >= sides[0] if yes else worst <= sides[1],
                f"worst seed; mean {m:.4f} [{lo:.4f}, {hi:.4f}] over seeds; per seed "
                f"{np.round(val, 4).tolist()}; P_M(1) = {res['p1']:.4f}",
                finding=True,
            )
        )
        trk_i = mean_interval(trk, support=(0.0, math.inf))  # |p - pi|: claims are any real
        aim_i = mean_interval(hit - fa, support=(-1.0, 1.0))
        k = int((gap_ub <= gap_tol).sum())
        conv_i = exact_interval(k, len(gap))
        rows = {
            "tracking": (
                f"The {who} Alice's claims track the truth ({case}-instance): reach-weighted mean "
                "|p - pi| below b",
                f"95% upper < b = {b:g}",
                trk_i,
                trk_i[2] < b,
                f"per seed {np.round(trk, 5).tolist()}; tau_V = {constants.tau_vera:g}, s = "
                f"{constants.s:g}; largest |p - pi| at a visited prefix per seed "
                f"{np.round(seed_values(res, 'max_dev_visited'), 4).tolist()}",
            ),
            "targeting": (
                f"The trained Bob's aborts target real deviations ({case}-instance): abort "
                "probability at |p - pi| in [b, 4b] minus in [0, s), reach-weighted",
                "95% lower >= 0.5",
                aim_i,
                aim_i[1] >= 0.5,
                f"hit rate mean {hit.mean():.4f} (per seed {np.round(hit, 3).tolist()}), false "
                f"alarm mean {fa.mean():.4f} (per seed {np.round(fa, 4).tolist()}), at "
                f"|p - pi| <= c: {seed_values(res, 'false_alarm_c').mean():.4f}",
            ),
            "convergence": (
                f"Self-play converges ({case}-instance): exploitability gap <= {gap_tol:g}",
                "fraction of seeds, exact (Clopper-Pearson) lower > 1/2",
                conv_i,
                conv_i[1] > 0.5,
                f"{k}/{len(gap)} seeds; gap (Alice's best response's upper bound - Bob's) per seed "
                f"{gap_ub.round(4).tolist()} (lower bound within {max(gap_ub - gap):.1e}); Bob's "
                f"best response per seed {seed_values(res, 'bob_best_response').round(4).tolist()}",
            ),
        }
        for kind, (claim, bound, (m, lo, hi), ok, note) in rows.items():
            out[kind].append(Claim(claim, desc, bound, m, lo, hi, bool(ok), note, finding=True))
    return out


def report(cfg: Config, measured, results) -> ExperimentResult:
    """The rows, tables, metrics and training curves of the measured pairs (``host``'s)."""
    fxs, params, constants, _, _ = setup(cfg)
    K, S = fxs["yes"].K, cfg.seeds
    sides = guaranteed_sides(cfg.T, K)
    yes, no = results["yes"], results["no"]
    comp = params.completeness(K, cfg.T, yes["p1"])
    sound_acc = 1.0 - params.soundness(K, cfg.T, 1.0 - no["p1"])
    setting = f"F2 (K = {K:g}), T = {cfg.T}, P_M(1) = {yes['p1']:.4f} / {no['p1']:.4f}, {S} seeds"
    setting += f" x {cfg.steps} Alice updates, n_B = {cfg.n_b}"
    alice_vs_honest = seed_values(no, "value_vs_honest_bob")
    main_run = (yes["honest_alice"], alice_vs_honest)
    claims = proven_claims(
        comp, sound_acc, setting, yes["every_bob"], no["every_alice"], sides, main_run
    )
    found = findings(results, constants, cfg.gap_tol, sides)
    claims += found["outcome"] + consistency_rows(order_checks(results))
    if cfg.mc_trials > 0:
        mean = {c: float(seed_values(r, "value").mean()) for c, r in results.items()}
        n = S * cfg.mc_trials
        claims += mc_claims({c: (mean[c], int(r["mc_wins"].sum()), n) for c, r in results.items()})
    claims += found["tracking"] + found["targeting"]
    tables: dict[str, list[dict]] = {}
    metrics: dict = {}
    tables["seeds"] = [
        {"instance": c, "seed": s, "honest_alice_vs_bob": r["honest_alice"][s]}
        | {k: float(v) for k, v in e.items()}
        for c, r in results.items()
        for s, e in enumerate(r["ev"])
    ]
    if cfg.n_b_sweep:  # the main pairs at n_b, the other rows at n_b_sweep (each must be there)
        evs = {n: {c: r["rows"][f"n_b_{n}"] for c, r in results.items()} for n in cfg.n_b_sweep}
        evs[cfg.n_b] = {c: r["ev"] for c, r in results.items()}
        claim, metrics["wrong_side_by_n_b"] = schedule_claim(evs, S)
        claims.append(claim)
        tables["n_b_sweep"] = [
            {"instance": c, "n_b": n, "seed": s, **{k: float(v) for k, v in e.items()}}
            for c in results
            for n in cfg.n_b_sweep
            for s, e in enumerate(evs[n][c])
        ]
    claims += found["convergence"]
    main = {c: (r["ev"], r["honest_alice"]) for c, r in results.items()}
    metrics |= {
        "K": K,
        "T": cfg.T,
        "constants": dataclasses.asdict(constants),
        "completeness_bound_instance": comp,
        "soundness_acceptance_bound_instance": sound_acc,
        "wall_s": {"train" if k == "main" else k: v for k, v in measured["wall_s"].items()},
        "point": point_metrics(main, cfg.gap_tol),  # float64, as in a sweep row
    }
    for case, res in results.items():
        summary: dict = {k: float(seed_values(res, k).mean()) for k in res["ev"][0]}
        summary |= {"p1": res["p1"], "wrong_side_seeds": wrong_side(res["ev"], case)}
        if cfg.ablate_tail:
            ab = res["rows"]["ablation"]
            ps = {f"{k}_per_seed": [round(e[k], 4) for e in ab] for k in ("value", "tracking")}
            summary["ablation_no_tail"] = ps | {"wrong_side_seeds": wrong_side(ab, case)}
        if cfg.mc_trials > 0:
            summary["mc_wins_per_seed"] = res["mc_wins"].tolist()
        metrics[case] = summary
    mons = [take(measured["monitors"]["main"], i) for i in range(len(CASES))]
    figures = {NAME: plot_training(cfg, mons, list(CASES), constants.b)}
    return ExperimentResult(claims=claims, metrics=metrics, tables=tables, figures=figures)
