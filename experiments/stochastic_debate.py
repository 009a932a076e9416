"""Stochastic-oracle debate (Theorem 6.2, Figure 1) measured against its proven bounds (spec DED 5).

For fixtures with Lipschitz constant K in {1, 2, 4} (F1: K = 1; F2: K = 2; the F3 cascade with
noise r = 1/4, whose exact hybrid sum (1 - (3/4)^T) / (1/4) < 4, declared K = 4) and T steps:

* **completeness**: the minimum over the Bob zoo (aborts at step 0 / at a random step / never /
  after every 1 / honest / an optimised Bob) of honest Alice's win rate when P_M(1) = 2/3;
* **soundness**: the maximum over the Alice zoo (always 1; pi + delta for delta in
  {s, 0.95 tau_B, b, 2b, 0.99 s}; honest except the last step; an optimised Alice) of the
  acceptance rate when P_M(1) = ``p_no`` <= 1/3;

each with a 95% Wilson interval, against the general formulas of spec DED 5.3 (with the Lean
defaults: >= 0.6402 and <= 0.3956) -- and, with the paper's own constants (spec DED 5.4), against
the paper's 3/5 and 2/5. The optimised adversaries (three- and four-parameter families, see
:mod:`dedebate.agents.stochastic_players`) are found by an evolution strategy on the *exact*
acceptance (:mod:`dedebate.exact.acceptance`) at the smallest T, and evaluated by
Monte Carlo at every T (the families are defined for any T).

Costs: Vera's oracle queries, as the play loop counts them where her samples are drawn, never
exceed N_V (Lean's formula, computed on the host apart from the debate's constants) and do not
depend on T (a gating row per K); honest Alice's charged queries are fitted to
``c K^2 T ln(200 T)`` (Lean: c = 5000; a consistency check).

Beyond the paper (empirical, labelled as such): per K, the smallest common scale factor on
(N_A, N_B, N_V) for which completeness >= 3/5 and soundness <= 2/5 still hold against the whole
zoo (optimised Alice re-optimised at each factor) by the exact DP at ``scale_T``, then checked by
Monte Carlo at the largest T.

Sweepable (``dedebate sweep``, e.g. ``configs/sweeps/stochastic_scale.yaml``; contract in
:mod:`dedebate.lab.experiment`): :func:`point` measures one point -- Lean constants with the
common factor ``scale`` on (N_A, N_B, N_V), instances at ``p_yes`` / ``p_no`` -- as ONE pure
function of its dynamic numbers and key, so a grid over ``DYNAMIC = (scale, p_yes, p_no)`` x seeds
is one compiled program per static group (Ks, Ts, trials, es_*). ``run`` ignores ``scale``.
Every Monte-Carlo number -- the report's rows, the scale search's and a sweep's -- comes from the
one pure measurement :func:`zoo_stats` (``vmap(play)`` over the zoo's rows x trials), so a report
row and a sweep row at the same point and key agree bit for bit. ``configs/sweeps/
budget_frontier.yaml`` maps the scale-factor frontier for every K and T; :func:`sweep_figures`
draws it against Lean's proven counts.
"""

from __future__ import annotations

import dataclasses
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
    alice_zoo,
    bob_logits_from_params,
    bob_zoo,
    honest_alice,
    honest_bob,
    optimise_alice,
    optimise_bob,
    stack,
    zoo_alice,
    zoo_bob,
)
from dedebate.core.samples import hoeffding_samples
from dedebate.core.stats import Z95, wilson_jnp
from dedebate.exact import acceptance_exact
from dedebate.lab.devices import lanes_for_memory
from dedebate.lab.experiment import (
    Claim,
    ExperimentResult,
    consistency_rows,
    strict_max,
    wilson_interval,
)
from dedebate.lab.params import config_dataclass, param
from dedebate.machines.fixtures import f1_target, f2_target, f3_cascade
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import (
    DebateConstants,
    debate_spec,
    lean_defaults,
    make_vera,
    paper_constants,
    play,
    trial_keys,
)

NAME = "stochastic_debate"
TITLE = "Stochastic-oracle debate (Thm 6.2): completeness/soundness vs proven bounds, query costs"

CASCADE_NOISE = 0.25  # F3 with r = 1/4: exact hybrid sum (1 - (3/4)^T) * 4 < 4


@config_dataclass
class Config:
    Ks: tuple[int, ...] = param((1, 2, 4), "Lipschitz constants: F1 (K=1), F2 (K=2), F3 cascade "
                                "with r = 1/4 (K=4)", choices=(1, 2, 4), min_len=1, max_len=8)
    Ts: tuple[int, ...] = param((8, 64, 256), "numbers of steps T",
                                ge=4, le=4096, min_len=1, max_len=16)
    trials: int = param(2000, "Monte-Carlo debates per (K, T, constants, zoo member), run in "
                        "batches of max_lanes", ge=100, le=2_000_000)
    p_yes: float = param(2 / 3, "P_M(1) of the completeness instances (2/3: the boundary)",
                         ge=2 / 3, le=1.0)
    p_no: float = param(0.33333, "P_M(1) of the soundness instances (just below 1/3)",
                        ge=0.0, le=1 / 3)
    paper: bool = param(True, "also run the paper's own constants (spec DED 5.4) side by side")
    es_generations: int = param(6, "evolution-strategy generations of the optimised adversaries",
                                ge=0, le=1000)
    es_population: int = param(8, "evolution-strategy population", ge=2, le=1024, multiple_of=2)
    scale_factors: tuple[float, ...] = param(
        (1.0, 0.5, 0.25, 0.125, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256),
        "common factors on (N_A, N_B, N_V) tried by the scale search; empty: skip the search",
        gt=0.0, le=1.0, max_len=64)
    scale_T: int = param(8, "steps of the exact-DP scale-factor search", ge=4, le=12)
    max_lanes: int = param(16384, "debates per compiled batch (bounds memory; the numbers do "
                           "not depend on it); 0: as many as fit in the device's memory "
                           "(batch_lanes; 16384 on a CPU)", ge=0, le=262_144)
    scale: float = param(1.0, "sweeps only (point, dedebate sweep): common factor on the Lean "
                         "(N_A, N_B, N_V) of the point; a dynamic sweep axis. run ignores it "
                         "(its search uses scale_factors)", gt=0.0, le=1.0)

    def __post_init__(self):
        if 0 < self.max_lanes < 256:
            raise ValueError(f"max_lanes={self.max_lanes}: must be 0 (from the device's memory) "
                             "or in [256, 262144]")


SIZES = {
    "quick": {"Ks": (2,), "Ts": (8,), "trials": 400, "paper": True, "es_generations": 2,
              "es_population": 4, "scale_factors": (1.0, 0.25), "max_lanes": 4096},
    "full": {"Ts": (8, 16, 64, 256, 1024), "trials": 20000, "es_generations": 20,
             "es_population": 16, "max_lanes": 0,
             "scale_factors": tuple(2.0 ** -i for i in range(13))},
}

# Planned memory of one debate in a batch at T steps (its machine, players and play-loop carry
# gathered per lane, and XLA's temporaries): LANE_BYTES_PER_STEP * T + LANE_BYTES_FIXED.
LANE_BYTES_PER_STEP, LANE_BYTES_FIXED = 64, 4096


def batch_lanes(max_lanes: int, T: int) -> int:
    """Debates per compiled batch at ``T`` steps: ``max_lanes``, or where it is 0 as many as fit
    in the device's memory (:func:`dedebate.lab.devices.lanes_for_memory`: 16384 on a CPU, at
    most 262144). :func:`zoo_stats` gives the same numbers for every batch size."""
    if max_lanes > 0:
        return max_lanes
    return lanes_for_memory(LANE_BYTES_PER_STEP * T + LANE_BYTES_FIXED, default=16384, lo=256,
                            hi=262_144)


# ---- fixtures ----------------------------------------------------------------------------------
def fixture(K: int, T: int, p1: float):
    """(name, machine, declared K) with P_M(1) = p1."""
    if K == 1:
        return "F1", f1_target(T, p1, pi=0.5, spread=0.3).machine, 1.0
    if K == 2:
        return "F2", f2_target(T, p1, spread=0.2).machine, 2.0
    fx = f3_cascade(T, p1, p1, CASCADE_NOISE)
    tight = fx.machine.tight_lipschitz()
    if tight > 4.0:
        raise AssertionError(f"cascade hybrid sum {tight} exceeds the declared K = 4")
    return "F3(r=1/4)", fx.machine, 4.0


# ---- Monte Carlo over a zoo: ONE pure function for run, the scale search and sweeps ---------
def zoo_cell(consts: DebateConstants, m_no, m_yes, theta_a, theta_b):
    """Host side of one (K, T, constants) cell: every debate's players and machine, stacked.

    Rows ``0 .. ma-1``: the Alice zoo (spec DED 9, plus the optimised Alice ``theta_a``) against
    honest Bob on ``m_no`` (soundness); rows ``ma ..``: honest Alice against the Bob zoo (with
    honest Bob and the optimised Bob ``theta_b``) on ``m_yes`` (completeness). Returns
    ``(dynamic, alice names, bob names)``; ``dynamic`` holds ``alice``, ``bob``, ``machine``
    (one row each) and the shared ``vera``."""
    a_names, alices = _alice_members(consts, theta_a)
    b_names, bobs = _bob_members(consts, theta_b)
    ma, mb = len(alices), len(bobs)
    dyn = {
        "alice": stack(alices + [zoo_alice(consts, A_HONEST)] * mb),
        "bob": stack([zoo_bob(consts, B_HONEST)] * ma + bobs),
        "machine": stack([m_no] * ma + [m_yes] * mb),
        "vera": make_vera(consts),
    }
    return dyn, a_names, b_names


def zoo_stats(spec, d, key, trials: int, ma: int, hh: int, max_lanes: int = 0):
    """The Monte-Carlo measurement of one cell (pure JAX; ``d`` from :func:`zoo_cell`, extra
    entries ignored): ``trials`` debates per row with common random numbers per side (every
    soundness row uses the keys ``trial_keys(fold_in(key, 0), trials)``, every completeness row
    ``trial_keys(fold_in(key, 1), trials)``). The rows x trials debates run as one lane axis,
    ``max_lanes`` at a time (0: all at once; the last batch padded with repeats; the numbers do
    not depend on it). Returns ``wins`` (int32, per row: debates with output 1), ``aborts``
    (int32, per row), the honest-vs-honest row ``ma + hh``'s mean queries of Alice (with its
    standard deviation) and Bob and mean rounds, and Vera's largest and mean measured queries
    over all debates (the samples her draws used, counted by the play loop)."""
    rows = d["alice"].kind.shape[0]
    n = rows * trials
    width = n if max_lanes <= 0 else min(n, max_lanes)
    batches = -(-n // width)
    keys = [trial_keys(jax.random.fold_in(key, s), trials) for s in (0, 1)]

    def lane(i):
        r, t = i // trials, i % trials
        k = jax.random.wrap_key_data(jnp.where(r >= ma, jax.random.key_data(keys[1][t]),
                                               jax.random.key_data(keys[0][t])),
                                     impl=jax.random.key_impl(key))
        take = functools.partial(jax.tree.map, lambda x: x[r])
        out = play(spec, take(d["machine"]), take(d["alice"]), take(d["bob"]), d["vera"], k)
        c = out.costs
        return (out.alice_wins, out.aborted, c.alice_queries, c.bob_queries, c.verifier_queries,
                c.rounds)

    idx = jnp.arange(batches * width) % n
    if batches == 1:
        outs = jax.vmap(lane)(idx)
    else:
        outs = jax.lax.map(jax.vmap(lane), idx.reshape(batches, width))
        outs = jax.tree.map(lambda x: x.reshape(-1), outs)
    verdict, aborted, qa, qb, qv, rounds = (x[:n].reshape(rows, trials) for x in outs)
    h = ma + hh
    return {"wins": jnp.sum(verdict, axis=1, dtype=jnp.int32),
            "aborts": jnp.sum(aborted, axis=1, dtype=jnp.int32),
            "queries_alice": jnp.mean(qa[h]), "queries_alice_sd": jnp.std(qa[h], ddof=1),
            "queries_bob": jnp.mean(qb[h]), "rounds": jnp.mean(rounds[h].astype(jnp.float32)),
            "queries_vera_max": jnp.max(qv), "queries_vera_mean": jnp.mean(qv)}


_zoo_stats_jit = jax.jit(zoo_stats, static_argnums=(0, 3, 4, 5, 6))


def measure_cell(spec, d, key, trials: int, ma: int, hh: int, max_lanes: int = 0):
    """:func:`zoo_stats` compiled and brought to the host (numpy), as :func:`run` measures each
    cell."""
    out = _zoo_stats_jit(spec, {k: d[k] for k in ("alice", "bob", "machine", "vera")}, key,
                         trials, ma, hh, max_lanes)
    return jax.tree.map(np.asarray, out)


# ---- exact objectives for the optimised adversaries ----------------------------------------------
def _opt_alice(machine, consts: DebateConstants, cfg: Config, seed: int, levels=None):
    bob, vera = honest_bob(consts), make_vera(consts)
    levels = prefix_tree(machine) if levels is None else levels

    def acceptance(lies):
        return np.array([acceptance_exact(machine, zoo_alice(consts, A_PER_STEP, lies=li), bob,
                                          vera, levels) for li in lies])

    return optimise_alice(acceptance, consts, generations=cfg.es_generations,
                          population=cfg.es_population, seed=seed)


def _opt_bob(machine, consts: DebateConstants, cfg: Config, seed: int, levels=None):
    alice, vera = honest_alice(consts), make_vera(consts)
    levels = prefix_tree(machine) if levels is None else levels

    def alice_win(w, w_dev, w_prev):
        return np.array([acceptance_exact(
            machine, alice, zoo_bob(consts, B_LEARNED, w=w[i], w_dev=float(w_dev[i]),
                                    w_prev=float(w_prev[i])), vera, levels)
            for i in range(w.shape[0])])

    return optimise_bob(alice_win, consts, generations=max(1, cfg.es_generations // 2),
                        population=cfg.es_population, seed=seed)


def _alice_members(consts, theta_alice):
    names, members = alice_zoo(consts)
    names.append("optimised (ES on exact acceptance)")
    members.append(zoo_alice(consts, A_PER_STEP, lies=alice_lies_from_params(theta_alice,
                                                                             consts)))
    return names, members


def _bob_members(consts, theta_bob):
    names, members = bob_zoo(consts)
    names.append("honest")
    members.append(zoo_bob(consts, B_HONEST))
    w, w_dev, w_prev = bob_logits_from_params(theta_bob, consts)
    names.append("optimised (ES on exact acceptance)")
    members.append(zoo_bob(consts, B_LEARNED, w=w, w_dev=float(w_dev), w_prev=float(w_prev)))
    return names, members


def _exact_zoo(machine, consts, theta_alice, theta_bob, p_levels):
    """Exact soundness (max acceptance over the Alice zoo) and completeness (min win over the Bob
    zoo) on small-T machines ``p_levels = (machine_no, levels_no, machine_yes, levels_yes)``."""
    m_no, l_no, m_yes, l_yes = p_levels
    vera = make_vera(consts)
    _, alices = _alice_members(consts, theta_alice)
    _, bobs = _bob_members(consts, theta_bob)
    acc = [acceptance_exact(m_no, a, honest_bob(consts), vera, l_no) for a in alices]
    win = [acceptance_exact(m_yes, honest_alice(consts), b, vera, l_yes) for b in bobs]
    return max(acc), min(win)


@functools.lru_cache(maxsize=256)
def adversaries(K: int, t_opt: int, ki: int, scale: float, p_yes: float, p_no: float,
                 generations: int, population: int):
    """The optimised Alice and Bob (host, deterministic; seed = K's index ``ki``): evolution
    strategies on the exact acceptance at ``t_opt`` steps, with Lean's constants times
    ``scale`` and the instances at ``p_no`` / ``p_yes``. :func:`run` uses ``scale = 1`` and the
    smallest T (at most 12); :func:`point` the same T and its own scale."""
    _, m_no, K_decl = fixture(K, t_opt, p_no)
    _, m_yes, _ = fixture(K, t_opt, p_yes)
    consts = lean_defaults(K_decl, t_opt).constants(K_decl, t_opt).scaled(scale)
    es = Config(Ks=(K,), Ts=(t_opt,), es_generations=generations, es_population=population)
    return _opt_alice(m_no, consts, es, seed=ki), _opt_bob(m_yes, consts, es, seed=ki)


# ---- plots ------------------------------------------------------------------------------------------
def _plot_acceptance(rows, cfg):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for K in cfg.Ks:
        for side, marker in (("completeness", "o"), ("soundness", "s")):
            rs = [r for r in rows if r["K"] == K and r["side"] == side and r["constants"] == "lean"]
            if not rs:
                continue
            T = [r["T"] for r in rs]
            v = np.array([r["value"] for r in rs])
            err = np.array([[r["value"] - r["lo"] for r in rs], [r["hi"] - r["value"] for r in rs]])
            ax.errorbar(T, v, yerr=err, marker=marker, capsize=3,
                        label=f"K={K} {side} ({'min over Bob zoo' if side == 'completeness' else 'max over Alice zoo'})")
    ax.axhline(0.6402, color="g", ls="--", lw=1, label="Lean completeness bound 0.6402")
    ax.axhline(0.3956, color="r", ls="--", lw=1, label="Lean soundness bound 0.3956")
    ax.axhline(0.6, color="g", ls=":", lw=1, label="3/5")
    ax.axhline(0.4, color="r", ls=":", lw=1, label="2/5")
    ax.set_xscale("log")
    ax.set_xlabel("T (steps)")
    ax.set_ylabel("P[output 1]")
    ax.set_title("Stochastic debate, Lean constants: worst zoo member vs proven bounds (95% CI)")
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    return fig


def _plot_queries(qrows, fit):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for K in sorted({r["K"] for r in qrows}):
        rs = sorted([r for r in qrows if r["K"] == K], key=lambda r: r["T"])
        T = np.array([r["T"] for r in rs], np.float64)
        ax.plot(T, [r["alice"] for r in rs], "o-", label=f"K={K} Alice (prover)")
        ax.plot(T, [r["bob"] for r in rs], "^-", label=f"K={K} Bob (prover)")
        ax.plot(T, [r["vera_max"] for r in rs], "s--", label=f"K={K} Vera (max over trials)")
        ax.plot(T, fit["c"] * K * K * T * np.log(200 * T), "k:", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("T (steps)")
    ax.set_ylabel("oracle queries per debate")
    ax.set_title(f"Queries: prover ~ {fit['c']:.0f} K^2 T ln(200T) (dotted), verifier <= N_V")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ---- beyond the paper ----------------------------------------------------------------------------
def _mc_zoo(K, T, consts, theta_a, theta_b, key, cfg):
    """Monte-Carlo (completeness min, soundness max) counts over the zoos at T (by
    :func:`zoo_stats`, as every other Monte-Carlo number of this experiment)."""
    _, m_no, _ = fixture(K, T, cfg.p_no)
    _, m_yes, _ = fixture(K, T, cfg.p_yes)
    d, a_names, b_names = zoo_cell(consts, m_no, m_yes, theta_a, theta_b)
    ma = len(a_names)
    st = measure_cell(debate_spec(T), d, key, cfg.trials, ma, b_names.index("honest"),
                      batch_lanes(cfg.max_lanes, T))
    return int(st["wins"][ma:].min()), int(st["wins"][:ma].max())


def _scale_factor_claim(cfg, K, ki, key_k, theta_b, scale_rows) -> Claim:
    """The smallest common factor on (N_A, N_B, N_V) keeping completeness >= 3/5 and soundness
    <= 2/5 against the zoo: exact DP at ``scale_T`` (optimised Alice re-optimised at each
    factor), then Monte Carlo at the largest T up the ladder of factors until the point
    estimates hold there too."""
    sT, Tmax = cfg.scale_T, max(cfg.Ts)
    _, ms_no, K_decl = fixture(K, sT, cfg.p_no)
    _, ms_yes, _ = fixture(K, sT, cfg.p_yes)
    levels = (ms_no, prefix_tree(ms_no), ms_yes, prefix_tree(ms_yes))
    base = lean_defaults(K_decl, sT).constants(K_decl, sT)
    es = dataclasses.replace(cfg, es_generations=max(1, cfg.es_generations // 2))
    thetas, f_exact = {}, None
    for f in sorted(cfg.scale_factors, reverse=True):
        consts = base.scaled(f)
        opt = _opt_alice(ms_no, consts, es, seed=100 + ki, levels=levels[1])
        sound, comp = _exact_zoo(ms_no, consts, opt.params["theta"], theta_b, levels)
        sound = max(sound, opt.value)
        ok = comp >= 3 / 5 and sound <= 2 / 5
        scale_rows.append({"K": K, "factor": f, "method": f"exact DP, T={sT}",
                           "completeness_min": comp, "soundness_max": sound, "holds": ok,
                           "n_alice": consts.n_alice, "n_bob": consts.n_bob,
                           "n_vera": consts.n_vera})
        if not ok:
            break
        thetas[f], f_exact = opt.params["theta"], f
    lean_full = lean_defaults(K_decl, Tmax).constants(K_decl, Tmax)
    paper = paper_constants(K_decl, Tmax)
    title = (f"beyond the paper (EMPIRICAL, not a guarantee), K={K}: smallest common scale factor "
             "on (N_A, N_B, N_V) keeping completeness >= 3/5 and soundness <= 2/5 vs the zoo")
    if f_exact is None:
        return _finding(Claim.exact(title, "empirical finding", "some factor <= 1",
                                    math.nan, passed=False,
                                    note=f"factor 1 already fails the exact check at T={sT}"))
    key = jax.random.fold_in(key_k, 99)
    for f in sorted(x for x in cfg.scale_factors if x >= f_exact):
        consts = lean_full.scaled(f)
        theta_a = thetas.get(f, thetas[f_exact])
        wc, ws = _mc_zoo(K, Tmax, consts, theta_a, theta_b, key, cfg)
        c_v, c_lo, c_hi = wilson_interval(wc, cfg.trials)
        s_v, s_lo, s_hi = wilson_interval(ws, cfg.trials)
        ok = c_v >= 3 / 5 and s_v <= 2 / 5
        scale_rows.append({"K": K, "factor": f, "method": f"Monte Carlo, T={Tmax}",
                           "completeness_min": c_v, "soundness_max": s_v, "holds": ok,
                           "n_alice": consts.n_alice, "n_bob": consts.n_bob,
                           "n_vera": consts.n_vera})
        if ok:
            return _finding(Claim.exact(
                title, "empirical finding", "exact at scale_T and MC at T_max", f,
                passed=True,
                note=(f"exact DP at T={sT}: smallest factor {f_exact:g}; Monte Carlo at "
                      f"T={Tmax} ({cfg.trials} debates/member): completeness min {c_v:.3f} "
                      f"[{c_lo:.3f}, {c_hi:.3f}], soundness max {s_v:.3f} [{s_lo:.3f}, "
                      f"{s_hi:.3f}]; N_A {consts.n_alice} vs Lean {lean_full.n_alice} "
                      f"(x{lean_full.n_alice / consts.n_alice:.1f} fewer) vs paper "
                      f"{paper.n_alice} (x{paper.n_alice / consts.n_alice:.0f} fewer); N_V "
                      f"{consts.n_vera} vs Lean {lean_full.n_vera} vs paper {paper.n_vera}")))
    return _finding(Claim.exact(title, "empirical finding",
                                "exact at scale_T and MC at T_max", 1.0, passed=False,
                                note=f"exact DP at T={sT} allowed {f_exact:g}, but no factor held "
                                     f"by Monte Carlo at T={Tmax}"))


def _finding(row: Claim) -> Claim:
    """The scale-factor row is a measured finding (no theorem settles it): it does not gate."""
    return dataclasses.replace(row, finding=True)


@dataclasses.dataclass
class Cell:
    """One (K, T, constants) cell as measured by :func:`run` (the input of :func:`cell_claims`):
    the fixtures' P_M(1) (``p_yes``, ``p_no``), the bounds at them, the zoos' member names and
    win counts (``wins_a``: each Alice member's acceptances vs honest Bob on the no-instance;
    ``wins_b``: honest Alice's wins vs each Bob member on the yes-instance), ``trials`` debates
    per member."""

    K: int
    T: int
    fixture: str
    constants: str
    p_yes: float
    p_no: float
    comp_bound: float
    sound_bound: float
    a_names: list[str]
    b_names: list[str]
    wins_a: np.ndarray
    wins_b: np.ndarray
    trials: int


def cell_claims(c: Cell) -> list[Claim]:
    """The cell's two gating Monte-Carlo rows (pure): completeness, the worst Bob member's
    honest-Alice win rate >= the completeness bound, and soundness, the worst Alice member's
    acceptance rate <= 1 - the soundness bound (Lean's at the instance, or the paper's 3/5 and
    2/5), each Bonferroni over its zoo's members. A lying Alice above the bound, a Bob that beats
    honest Alice, a NaN count (``argmax``/``argmin`` pick it) or no trials fail the row."""
    wins_a, wins_b, a_names, b_names, n = c.wins_a, c.wins_b, c.a_names, c.b_names, c.trials
    worst_a = int(np.argmax(wins_a))
    worst_b = int(np.argmin(wins_b))
    claims = []
    tag = f"K={c.K} ({c.fixture}), T={c.T}, {c.constants} constants"
    if c.constants == "lean":
        src_c = "spec DED 5.3, Lean completeness'"
        src_s = "spec DED 5.3, Lean soundness'"
    else:
        src_c = src_s = "spec DED 5.4 (paper's Figure 1 constants) [SECONDARY]"
    comp_bound, sound_bound, p_yes, p_no = c.comp_bound, c.sound_bound, c.p_yes, c.p_no
    claims.append(Claim.proportion(
        f"completeness, {tag}: min over the Bob zoo of honest Alice's win rate",
        src_c, ">=", comp_bound, wins_b[worst_b], n,
        f"P_M(1)={p_yes:.4f}; worst Bob: {b_names[worst_b]}; {n} debates per "
        f"member; p-value Bonferroni over the {len(b_names)} members; per "
        f"member: " + ", ".join(
            f"{nm}={w / n:.3f}" for nm, w in zip(b_names, wins_b)),
        members=len(b_names), bound=f">= {comp_bound:.4f}"))
    claims.append(Claim.proportion(
        f"soundness, {tag}: max over the Alice zoo of the acceptance rate",
        src_s, "<=", sound_bound, wins_a[worst_a], n,
        f"P_M(1)={p_no:.4f}; worst Alice: {a_names[worst_a]}; {n} debates per "
        f"member; p-value Bonferroni over the {len(a_names)} members; per "
        f"member: " + ", ".join(
            f"{nm}={w / n:.3f}" for nm, w in zip(a_names, wins_a)),
        members=len(a_names), bound=f"<= {sound_bound:.4f}"))
    return claims


# ---- the experiment -------------------------------------------------------------------------------


def run(cfg: Config, ctx) -> ExperimentResult:
    claims, rows, qrows, scale_rows = [], [], [], []
    T0 = min(cfg.Ts)
    n_units = len(cfg.Ks) * (len(cfg.Ts) * (2 if cfg.paper else 1) + 1)
    with ctx.progress(n_units, "K x T x constants") as bar:
        for ki, K in enumerate(cfg.Ks):
            key_k = jax.random.fold_in(ctx.key, ki)
            # -- optimised adversaries: ES on the exact acceptance at the smallest T -------------
            t_opt = min(T0, 12)
            opt_a, opt_b = adversaries(K, t_opt, ki, 1.0, float(cfg.p_yes), float(cfg.p_no),
                                        cfg.es_generations, cfg.es_population)
            theta_a, theta_b = opt_a.params["theta"], opt_b.params["theta"]
            ctx.log({"K": K, "es_alice_best_exact_acceptance": opt_a.value,
                     "es_bob_best_exact_alice_win": opt_b.value, "es_T": t_opt})
            for ti, T in enumerate(cfg.Ts):
                spec = debate_spec(T)
                fname, m_no, K_decl = fixture(K, T, cfg.p_no)
                _, m_yes, _ = fixture(K, T, cfg.p_yes)
                p_no = float(m_no.output_prob_dp())
                p_yes = float(m_yes.output_prob_dp())
                lp = lean_defaults(K_decl, T)
                sets = [("lean", lp.constants(K_decl, T))]
                if cfg.paper:
                    sets.append(("paper", paper_constants(K_decl, T)))
                for ci, (cname, consts) in enumerate(sets):
                    key = jax.random.fold_in(key_k, 1000 * ti + ci)
                    # soundness: Alice zoo vs honest Bob on P_M(1) = p_no; completeness: honest
                    # Alice vs the Bob zoo on P_M(1) = p_yes -- one pure measurement (zoo_stats)
                    d, a_names, b_names = zoo_cell(consts, m_no, m_yes, theta_a, theta_b)
                    ma, hh = len(a_names), b_names.index("honest")
                    st = measure_cell(spec, d, key, cfg.trials, ma, hh,
                                      batch_lanes(cfg.max_lanes, T))
                    wins_a, wins_b = st["wins"][:ma], st["wins"][ma:]
                    worst_a = int(np.argmax(wins_a))
                    worst_b = int(np.argmin(wins_b))
                    n = cfg.trials
                    if cname == "lean":
                        comp_bound = lp.completeness(K_decl, T, p_yes)
                        sound_bound = 1 - lp.soundness(K_decl, T, 1 - p_no)
                    else:
                        comp_bound, sound_bound = 3 / 5, 2 / 5
                    claims.extend(cell_claims(Cell(
                        K=K, T=T, fixture=fname, constants=cname, p_yes=p_yes, p_no=p_no,
                        comp_bound=comp_bound, sound_bound=sound_bound, a_names=a_names,
                        b_names=b_names, wins_a=wins_a, wins_b=wins_b, trials=n)))
                    for side, w, nm, bound in (("completeness", wins_b[worst_b], b_names[worst_b],
                                                comp_bound),
                                               ("soundness", wins_a[worst_a], a_names[worst_a],
                                                sound_bound)):
                        v, lo, hi = wilson_interval(w, n)
                        rows.append({"K": K, "T": T, "fixture": fname, "constants": cname,
                                     "side": side, "value": v, "lo": lo, "hi": hi,
                                     "bound": bound, "worst": nm, "trials": n})
                    # costs: honest vs honest (Alice, Bob, rounds); Vera's queries as the play
                    # loop counted them, over every debate of the cell
                    qrow = {"K": K, "T": T, "constants": cname,
                            "n_alice": consts.n_alice, "n_bob": consts.n_bob,
                            "n_vera": consts.n_vera,
                            "alice": float(st["queries_alice"]),
                            "bob": float(st["queries_bob"]),
                            "vera_max": float(st["queries_vera_max"]),
                            "vera_mean": float(st["queries_vera_mean"]),
                            "aborts": int(st["aborts"].sum()),
                            "rounds": float(st["rounds"])}
                    qrows.append(qrow)
                    ctx.log({k: v for k, v in qrow.items() if k != "constants"}
                            | {"lean": cname == "lean"})
                    bar.update(1)
                    bar.set_postfix(K=K, T=T, constants=cname)
            # -- beyond the paper: smallest common scale factor (exact DP, then MC) ----------------
            if cfg.scale_factors:
                claims.append(_scale_factor_claim(cfg, K, ki, key_k, theta_b, scale_rows))
            bar.update(1)

    # -- verifier and prover costs: consistency checks ---------------------------------------------
    claims.extend(vera_claims(cfg.Ks, cfg.Ts, qrows))
    checks, fit = cost_checks(cfg.Ks, cfg.Ts, qrows)
    claims.extend(consistency_rows(checks))
    lean_q = [r for r in qrows if r["constants"] == "lean"]
    plots = [ctx.save_figure(_plot_acceptance(rows, cfg), "acceptance_vs_T")]
    if qrows:
        plots.append(ctx.save_figure(_plot_queries(lean_q, fit), "queries_vs_T"))
    metrics = {"fit": fit, "n_claims": len(claims),
               "consistency_checks": {k: {"holds": bool(ok), "detail": d}
                                      for k, (ok, d) in checks.items()},
               "worst": {f"K{r['K']}_T{r['T']}_{r['constants']}_{r['side']}": r["value"]
                         for r in rows}}
    return ExperimentResult(claims=claims, metrics=metrics,
                            tables={"acceptance": rows, "queries": qrows, "scale": scale_rows},
                            plots=plots)


def lean_n_vera(K: float, T: int) -> int:
    """Vera's sample count from Lean's formula on the host, ``samples((s - c) / 2, v)``
    (:func:`dedebate.core.samples.hoeffding_samples`) at Lean's defaults for (K, T): the
    reference the measured queries are held against, computed apart from the debate's
    constants."""
    lp = lean_defaults(K, T)
    return hoeffding_samples((lp.s - lp.c) / 2, lp.v)


def vera_claims(Ks, Ts, qrows) -> list[Claim]:
    """Per K, the gating row of spec DED 5.3's verifier cost: the largest number of oracle
    samples Vera's draws used in one debate, as the play loop counted them at the draw site
    (``vera_max`` of the Lean rows of ``qrows``, over every debate and T), is at most N_V from
    Lean's formula on the host (:func:`lean_n_vera`), and N_V does not depend on T. A count
    above N_V, a missing or non-finite count, or an N_V that moves with T fails the row."""
    out = []
    for K in Ks:
        rs = [r for r in qrows if r["K"] == K and r["constants"] == "lean"]
        n_vs = sorted({lean_n_vera(float(K), int(r["T"])) for r in rs})
        vmax = strict_max(r["vera_max"] for r in rs)
        ok = bool(rs) and len(n_vs) == 1 and math.isfinite(vmax) and vmax <= n_vs[0]
        aborts = sum(int(r.get("aborts", 0)) for r in rs)
        out.append(Claim.exact(
            f"K={K}: verifier queries per debate, counted by the play loop, <= N_V, "
            "independent of T", "spec DED 5.3 (query complexity), Lean samples((s-c)/2, v)",
            f"<= {n_vs[0] if len(n_vs) == 1 else n_vs}", vmax, ok,
            f"largest count over every debate of the zoos at T in {list(Ts)} ({aborts} "
            f"aborts judged); N_V = {n_vs} from Lean's formula on the host"))
    return out


def cost_checks(Ks, Ts, qrows):
    """Consistency checks on the costs (not paper claims: they hold by construction when the
    accounting is right). Returns ``({name: (holds, detail)}, fit)``: per K, the N_V the debates
    were given equals Lean's formula (:func:`lean_n_vera`); and the least-squares c of honest
    Alice's charged queries ~ c K^2 T ln(200T) is 5000 within 1% (slope 1 within 1%). Vera's
    measured queries are a gating row (:func:`vera_claims`)."""
    checks = {}
    for K in Ks:
        rs = [r for r in qrows if r["K"] == K and r["constants"] == "lean"]
        bad = [(r["T"], r["n_vera"]) for r in rs
               if r["n_vera"] != lean_n_vera(float(K), int(r["T"]))]
        checks[f"K={K}: the N_V given to Vera is Lean's samples((s-c)/2, v)"] = (
            bool(rs) and not bad,
            f"(T, N_V) differing from the formula: {bad}" if bad else
            f"N_V = {sorted({r['n_vera'] for r in rs})} for T in {list(Ts)}")
    lean_q = [r for r in qrows if r["constants"] == "lean"]
    x = np.array([r["K"] ** 2 * r["T"] * math.log(200 * r["T"]) for r in lean_q])
    y = np.array([r["alice"] for r in lean_q])
    c = float(np.sum(x * y) / np.sum(x * x)) if lean_q else math.nan
    if len(lean_q) >= 2 and np.ptp(np.log(x)) > 0:
        slope = float(np.polyfit(np.log(x), np.log(y), 1)[0])
    else:
        slope = 1.0
    checks["honest Alice's queries = c K^2 T ln(200T) with c ~= 5000"] = (
        abs(c / 5000 - 1) < 0.01 and abs(slope - 1) < 0.01,
        f"least-squares c = {c:.1f} over {len(lean_q)} (K, T) points; log-log slope {slope:.4f}")
    return checks, {"c": c, "loglog_slope": slope}


# ---- sweepable point (dedebate sweep; contract: dedebate/lab/experiment.py) ---------------------
DYNAMIC = ("scale", "p_yes", "p_no")
"""Config fields that enter :func:`point` only as numbers: the sample-count scale factor (through
the int32 counts N_A, N_B, N_V of the players and Vera) and the instances' P_M(1) (through the
machines' probabilities). Everything else (Ks, Ts, trials, es_*) is static: one compile each."""

def _cell_dynamic(cfg: Config, ki: int, K: int, T: int):
    """Host side of one (K, T) cell of a point: :func:`zoo_cell` with Lean's constants x
    ``scale``, the instances at ``p_no`` / ``p_yes`` and the adversaries of :func:`adversaries`
    (found at the smallest T of ``Ts``, at most 12, as in :func:`run`), plus the scaled counts
    and the Lean bounds. Returns ``(dynamic, ma, index of honest Bob among the Bob rows)``."""
    _, m_no, K_decl = fixture(K, T, cfg.p_no)
    _, m_yes, _ = fixture(K, T, cfg.p_yes)
    lp = lean_defaults(K_decl, T)
    consts = lp.constants(K_decl, T).scaled(cfg.scale)
    opt_a, opt_b = adversaries(K, min(min(cfg.Ts), 12), ki, float(cfg.scale),
                                float(cfg.p_yes), float(cfg.p_no), cfg.es_generations,
                                cfg.es_population)
    dyn, a_names, b_names = zoo_cell(consts, m_no, m_yes, opt_a.params["theta"],
                                     opt_b.params["theta"])
    p_yes = float(m_yes.output_prob_dp())
    p_no = float(m_no.output_prob_dp())
    dyn["counts"] = np.array([consts.n_alice, consts.n_bob, consts.n_vera], np.int32)
    dyn["bounds"] = np.array([lp.completeness(K_decl, T, p_yes),
                              1 - lp.soundness(K_decl, T, 1 - p_no)], np.float32)
    return dyn, len(a_names), b_names.index("honest")


def cell_metrics(st, d, trials: int, ma: int, hh: int, name: str):
    """A sweep row's metrics of one (K, T) cell from :func:`zoo_stats` ``st`` (pure jnp), each
    rate with its 95% Wilson interval; ``holds``: 1 where the point estimates meet the paper's
    completeness >= 3/5 and soundness <= 2/5 (in integers: 5 wins >= 3 trials, ...)."""
    wins = st["wins"]
    c_min, s_max = jnp.min(wins[ma:]), jnp.max(wins[:ma])
    m = {}
    for metric, count in (("honest_completeness", wins[ma + hh]),
                          ("completeness_min", c_min), ("soundness_max", s_max)):
        v, lo, hi = wilson_jnp(count, trials)
        m[f"{name}/{metric}"], m[f"{name}/{metric}_lo"], m[f"{name}/{metric}_hi"] = v, lo, hi
    m[f"{name}/holds"] = ((5 * c_min >= 3 * trials) & (5 * s_max <= 2 * trials)).astype(
        jnp.float32)
    mean = st["queries_alice"]  # honest Alice vs honest Bob: mean queries, normal 95% interval
    half = Z95 * st["queries_alice_sd"] / math.sqrt(trials)
    m[f"{name}/queries_alice"] = mean
    m[f"{name}/queries_alice_lo"], m[f"{name}/queries_alice_hi"] = mean - half, mean + half
    m[f"{name}/queries_vera_max"] = st["queries_vera_max"]
    for i, n in enumerate(("n_alice", "n_bob", "n_vera")):
        m[f"{name}/{n}"] = d["counts"][i]
    m[f"{name}/lean_completeness_bound"] = d["bounds"][0]
    m[f"{name}/lean_soundness_bound"] = d["bounds"][1]
    return m


def point(cfg: Config):
    """One sweep point: ``(dynamic, fn)`` with ``fn(dynamic, key) -> metrics`` (pure JAX).

    For every (K, T) in ``Ks x Ts`` (cell ``c``, key ``fold_in(key, c)``), with Lean's default
    constants (spec DED 5.2) times ``scale`` on (N_A, N_B, N_V), ``trials`` debates per zoo
    member; metrics named ``K{K}_T{T}/...``:

    * ``honest_completeness``: honest Alice vs honest Bob, P[out = 1] at P_M(1) = p_yes;
    * ``completeness_min``: the min over the Bob zoo (spec DED 9, honest and optimised Bob
      included) of honest Alice's win rate at p_yes (interval: that member's);
    * ``soundness_max``: the max over the Alice zoo (with the optimised Alice) of the
      acceptance at p_no (interval: that member's);
    * each with ``_lo``/``_hi``, its 95% Wilson interval; ``holds`` (1 where completeness_min
      >= 3/5 and soundness_max <= 2/5); ``queries_alice`` (honest vs honest, mean with a normal
      95% interval), ``queries_vera_max`` (measured by the play loop; proven <= N_V);
    * ``n_alice``, ``n_bob``, ``n_vera`` (the scaled counts) and ``lean_completeness_bound``,
      ``lean_soundness_bound`` (spec DED 5.3 at the exact P_M; proven for scale = 1 only).

    The numbers come from :func:`zoo_stats`, the pure measurement :func:`run` reports from (a
    point at ``scale = 1`` with the run's cell key gives the run's counts). The optimised
    adversaries are re-found on the host for each point (:func:`adversaries` with the point's
    scale, at the smallest T as in ``run``; no dependence on the seed); ``max_lanes`` bounds the
    debates per batch as in ``run``; ``paper``, ``scale_factors`` and ``scale_T`` are not
    used."""
    cells, dynamic = [], {}
    for ki, K in enumerate(cfg.Ks):
        for T in cfg.Ts:
            name = f"K{K}_T{T}"
            dynamic[name], ma, hh = _cell_dynamic(cfg, ki, K, T)
            cells.append((name, debate_spec(T), ma, hh, batch_lanes(cfg.max_lanes, T)))
    trials = cfg.trials

    def fn(dyn, key):
        out = {}
        for c, (name, spec, ma, hh, lanes) in enumerate(cells):
            d = dyn[name]
            st = zoo_stats(spec, d, jax.random.fold_in(key, c), trials, ma, hh, lanes)
            out.update(cell_metrics(st, d, trials, ma, hh, name))
        return out

    return dynamic, fn


# ---- sweep figures (dedebate sweep calls this after a sweep; contract: lab/experiment.py) -----
def frontier(rows) -> list[dict]:
    """The budget frontier of a sweep over ``scale`` (e.g. ``configs/sweeps/budget_frontier.yaml``)
    from its ``sweep.csv`` rows: per (K, T) cell (and per value of any other swept axis than
    ``Ks`` / ``Ts``, which the cell names carry), going
    down the factors from the largest, the smallest factor before the first at which the mean
    over seeds of ``completeness_min`` falls below 3/5 or that of ``soundness_max`` rises above
    2/5 (``None``: the largest factor already fails). Each entry also holds the frontier's counts
    (N_A, N_B, N_V) and Lean's proven counts (spec DED 5.2) at (K, T)."""
    groups: dict[tuple, dict[float, list[dict]]] = {}
    for r in rows:
        others = tuple(sorted((k, str(v)) for k, v in r.items()
                              if "/" not in k
                              and k not in ("point", "seed", "group", "scale", "Ks", "Ts")))
        for k in r:
            if k.endswith("/completeness_min") and r[k] is not None:  # None: another K's row
                cell = k.split("/")[0]
                groups.setdefault((cell, others), {}).setdefault(float(r["scale"]), []).append(r)
    out = []
    for (cell, others), by_f in groups.items():
        K, T = (int(x) for x in cell[1:].split("_T"))
        lean = lean_defaults(float(K), T).constants(float(K), T)

        def mean(rs, m, cell=cell):
            return float(np.mean([float(r[f"{cell}/{m}"]) for r in rs]))

        best, tried = None, []
        for f in sorted(by_f, reverse=True):
            c, snd = mean(by_f[f], "completeness_min"), mean(by_f[f], "soundness_max")
            tried.append({"factor": f, "completeness_min": c, "soundness_max": snd})
            if not (c >= 3 / 5 and snd <= 2 / 5):
                break
            best = f
        e = {"K": K, "T": T, "others": dict(others), "factor": best, "tried": tried,
             "lean": (lean.n_alice, lean.n_bob, lean.n_vera),
             "seeds": len(by_f[max(by_f)])}
        if best is not None:
            rs = by_f[best]
            e["counts"] = tuple(int(rs[0][f"{cell}/{n}"]) for n in ("n_alice", "n_bob", "n_vera"))
        out.append(e)
    return sorted(out, key=lambda e: (sorted(e["others"].items()), e["K"], e["T"]))


def sweep_figures(rows) -> dict:
    """``{"budget_frontier": figure}`` when the sweep went over ``scale`` (else ``{}``): per count
    (N_A, N_B, N_V), Lean's proven count (solid) and the empirical frontier's (dashed, labelled
    with its factor) against T, one colour per K; a cross marks a cell where factor 1 fails."""
    fr = [e for e in frontier(rows) if not e["others"]]
    if not rows or "scale" not in rows[0] or not fr:
        return {}
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    colors = {1: "tab:blue", 2: "tab:orange", 4: "tab:green"}
    for i, (ax, label) in enumerate(zip(axes, ("N_A (Alice)", "N_B (Bob)", "N_V (Vera)"))):
        for K in sorted({e["K"] for e in fr}):
            es = sorted((e for e in fr if e["K"] == K), key=lambda e: e["T"])
            col = colors.get(K)
            T = [e["T"] for e in es]
            ax.plot(T, [e["lean"][i] for e in es], "o-", color=col,
                    label=f"K={K} Lean (proven)")
            ok = [e for e in es if e["factor"] is not None]
            ax.plot([e["T"] for e in ok], [e["counts"][i] for e in ok], "s--", color=col,
                    label=f"K={K} frontier (empirical)")
            for e in ok:
                ax.annotate(f"x{e['factor']:g}", (e["T"], e["counts"][i]), fontsize=6,
                            textcoords="offset points", xytext=(3, -9))
            bad = [e for e in es if e["factor"] is None]
            ax.plot([e["T"] for e in bad], [e["lean"][i] for e in bad], "x", color="k", ms=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("T (steps)")
        ax.set_title(label, fontsize=9)
    axes[0].set_ylabel("oracle samples per estimate")
    axes[0].legend(fontsize=6)
    seeds = max(e["seeds"] for e in fr)
    fig.suptitle("Smallest common factor on (N_A, N_B, N_V) keeping completeness >= 3/5 and "
                 f"soundness <= 2/5 vs the zoo (mean of {seeds} seed(s)) against Lean's counts",
                 fontsize=9)
    fig.tight_layout()
    return {"budget_frontier": fig}
