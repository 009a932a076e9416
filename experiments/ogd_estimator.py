"""The OI estimator construction (spec PED 5-6; issue 6): Algorithm 1, a Flax estimator, soundness.

1. **Algorithm 1** (tabular OGD, spec 5.3) on random problems: |X| contexts, Z = {0,1}^q,
   prediction-dependent tanh tests; for every |Z| and delta, over seeds (one vmapped program per
   (|Z|, step rule)). Checks: T <= 36|Z|/delta^2 (Hazan's step 1/sqrt(|Z| t)) and
   T <= 4.5|Z|/delta^2 (the tight step sqrt(2/(|Z| t))); exit with max|Adv| < delta; the regret
   bound sum_t |Adv_t| <= (3/2) G D sqrt(T) (spec 5.4).
2. **Flax estimator** (spec 10) trained by OGD against the worst test per round, vmapped over
   seeds and learning rates, against the tabular algorithm on the same problems: advantage
   reached, rounds/steps, wall time (measured here, outside the pure core).
3. **Soundness in the debate** (spec 6, 9.6): for fixed provers A (honest, obfuscating liar,
   wrong-direction) on hidden-flaw trees, B is built round by round with Algorithm 1 against the
   spec 6.3 tests with delta = eta/(2d+3); A's exact expected payoff (the protocol's own path
   enumeration, cross-checked against the construction's) must satisfy
   U_A <= rho^-(d+1) Pr[A correct] + eta, and each round's mean reward <= 2 delta.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.estimators.advantage import oi_problem
from dedebate.estimators.families import tanh_family
from dedebate.estimators.ogd import STEP_RULES, OGDStatic, iteration_bound, ogd_solve, summarize
from dedebate.estimators.train import NetTrainStatic, make_train_grid, net_hparams
from dedebate.lab.experiment import Claim, ExperimentResult

NAME = "ogd_estimator"
TITLE = "OI estimator construction: Algorithm 1 bound, Flax estimator, soundness against fixed A"

PROVERS = ("honest", "obfuscating", "wrong_direction")
TRUTHS = ("softmax", "dirichlet", "point")


def _doc(text):
    return {"doc": text}


@dataclasses.dataclass(frozen=True)
class Config:
    n_x: int = dataclasses.field(default=100, metadata=_doc("contexts |X| per problem, >= 2"))
    n_features: int = dataclasses.field(
        default=4, metadata=_doc("context features read by the tests and the network, >= 1"))
    q_values: tuple[int, ...] = dataclasses.field(
        default=(1, 2, 3), metadata=_doc("outcome bits q (|Z| = 2^q) of the sweep, each 1..5"))
    deltas: tuple[float, ...] = dataclasses.field(
        default=(0.1, 0.05, 0.025), metadata=_doc("indistinguishability levels, each in (0, 1]"))
    n_tests: int = dataclasses.field(
        default=40, metadata=_doc("random prediction-dependent tanh tests per problem, >= 1"))
    test_scale: float = dataclasses.field(
        default=3.0, metadata=_doc("weight scale of the tanh tests, > 0"))
    truth: str = dataclasses.field(
        default="softmax", metadata=_doc("truth g: 'softmax', 'dirichlet' or 'point'"))
    seeds: int = dataclasses.field(
        default=4, metadata=_doc("random problems per (|Z|, delta) point, >= 1"))
    step_rules: tuple[str, ...] = dataclasses.field(
        default=("hazan", "tight"), metadata=_doc("Algorithm 1 step rules: 'hazan', 'tight'"))
    trace_len: int = dataclasses.field(
        default=4096, metadata=_doc("advantage-trace buffer length per run, >= 2"))
    net_q: int = dataclasses.field(
        default=2, metadata=_doc("q of the network-vs-tabular comparison, 1..5"))
    net_delta: float = dataclasses.field(
        default=0.05, metadata=_doc("delta of the network-vs-tabular comparison, in (0, 1]"))
    net_lrs: tuple[float, ...] = dataclasses.field(
        default=(1.0, 3.0), metadata=_doc("estimator learning rates (vmapped grid), each > 0"))
    net_rounds: int = dataclasses.field(
        default=300, metadata=_doc("estimator training rounds, >= 1"))
    net_hidden: tuple[int, ...] = dataclasses.field(
        default=(32,), metadata=_doc("estimator MLP hidden widths, each >= 1"))
    net_optimizer: str = dataclasses.field(
        default="sgd", metadata=_doc("'sgd' (lr/sqrt t, OGD) or 'adam'"))
    sound_provers: tuple[str, ...] = dataclasses.field(
        default=PROVERS,
        metadata=_doc("fixed provers A: 'honest', 'obfuscating', 'wrong_direction' ([] skips)"))
    sound_trees: int = dataclasses.field(
        default=4, metadata=_doc("hidden-flaw trees (inputs x, mu uniform), >= 1"))
    sound_depth: int = dataclasses.field(
        default=2, metadata=_doc("tree depth d (rounds k = d..1 plus the human check), 1..4"))
    sound_q: int = dataclasses.field(default=3, metadata=_doc("tree width q, 2..4"))
    sound_rho: float = dataclasses.field(
        default=2.0, metadata=_doc("stability parameter rho >= 1 (reward weights r^k, r = 1/rho)"))
    sound_eta: float = dataclasses.field(
        default=0.2, metadata=_doc("soundness slack eta in (0, 1]; delta = eta / (2d + 3)"))

    def __post_init__(self):
        if self.n_x < 2:
            raise ValueError(f"n_x={self.n_x}: must be >= 2")
        if self.n_features < 1:
            raise ValueError(f"n_features={self.n_features}: must be >= 1")
        if not self.q_values or any(not (1 <= q <= 5) for q in self.q_values):
            raise ValueError(f"q_values={list(self.q_values)}: need a non-empty list, each 1..5")
        if not self.deltas or any(not (0 < d <= 1) for d in self.deltas):
            raise ValueError(f"deltas={list(self.deltas)}: need a non-empty list in (0, 1]")
        if self.n_tests < 1:
            raise ValueError(f"n_tests={self.n_tests}: must be >= 1")
        if not (self.test_scale > 0):
            raise ValueError(f"test_scale={self.test_scale}: must be > 0")
        if self.truth not in TRUTHS:
            raise ValueError(f"truth={self.truth!r}: allowed values are {TRUTHS}")
        if self.seeds < 1:
            raise ValueError(f"seeds={self.seeds}: must be >= 1")
        if not self.step_rules or any(r not in STEP_RULES for r in self.step_rules):
            raise ValueError(f"step_rules={list(self.step_rules)}: each 'hazan' or 'tight'")
        if self.trace_len < 2:
            raise ValueError(f"trace_len={self.trace_len}: must be >= 2")
        if not (1 <= self.net_q <= 5):
            raise ValueError(f"net_q={self.net_q}: must be in 1..5")
        if not (0 < self.net_delta <= 1):
            raise ValueError(f"net_delta={self.net_delta}: must lie in (0, 1]")
        if not self.net_lrs or any(not (lr > 0) for lr in self.net_lrs):
            raise ValueError(f"net_lrs={list(self.net_lrs)}: need a non-empty list of rates > 0")
        if self.net_rounds < 1:
            raise ValueError(f"net_rounds={self.net_rounds}: must be >= 1")
        if not self.net_hidden or any(w < 1 for w in self.net_hidden):
            raise ValueError(f"net_hidden={list(self.net_hidden)}: need widths >= 1")
        if self.net_optimizer not in ("sgd", "adam"):
            raise ValueError(f"net_optimizer={self.net_optimizer!r}: allowed 'sgd', 'adam'")
        if any(p not in PROVERS for p in self.sound_provers):
            raise ValueError(f"sound_provers={list(self.sound_provers)}: each one of {PROVERS}")
        if self.sound_trees < 1:
            raise ValueError(f"sound_trees={self.sound_trees}: must be >= 1")
        if not (1 <= self.sound_depth <= 4):
            raise ValueError(f"sound_depth={self.sound_depth}: must be in 1..4")
        if not (2 <= self.sound_q <= 4):
            raise ValueError(f"sound_q={self.sound_q}: must be in 2..4")
        if not (self.sound_rho >= 1):
            raise ValueError(f"sound_rho={self.sound_rho}: must be >= 1")
        if not (0 < self.sound_eta <= 1):
            raise ValueError(f"sound_eta={self.sound_eta}: must lie in (0, 1]")


SIZES = {
    "quick": {"n_x": 30, "q_values": (2,), "deltas": (0.1, 0.05), "n_tests": 16, "seeds": 2,
              "trace_len": 512, "net_lrs": (3.0,), "net_rounds": 60, "net_hidden": (16,),
              "sound_provers": ("obfuscating",), "sound_trees": 2, "sound_depth": 1,
              "sound_q": 2},
    "full": {"n_x": 1000, "q_values": (1, 2, 3, 4), "deltas": (0.1, 0.05, 0.025, 0.0125),
             "n_tests": 64, "seeds": 16, "trace_len": 16384, "net_lrs": (0.3, 1.0, 3.0, 10.0),
             "net_rounds": 2000, "net_hidden": (64, 64), "sound_trees": 16, "sound_depth": 3},
}


# ---- part 1: Algorithm 1 sweep -----------------------------------------------------------------
def _build_problems(cfg: Config, seed: int, n_z: int):
    """``cfg.seeds`` random problems with |Z| = n_z, stacked: (problems, families, features).

    Drawn on the host with numpy (deterministic in ``seed``; no compilation), the same
    distribution as :func:`dedebate.estimators.advantage.random_oi_problem` and
    :func:`dedebate.estimators.families.random_tanh_family`: standard normal features; truth
    ``softmax(c feat @ W)`` (or Dirichlet rows, or the argmax point mass); tanh weights
    ``N(0, scale^2 / dim)``.
    """
    rng = np.random.default_rng(seed)
    dim = cfg.n_features + 2 * n_z + 2
    problems, families, feats = [], [], []
    for _ in range(cfg.seeds):
        feat = rng.normal(size=(cfg.n_x, cfg.n_features)).astype(np.float32)
        logits = feat @ rng.normal(size=(cfg.n_features, n_z))
        if cfg.truth == "softmax":
            e = np.exp(2.0 * (logits - logits.max(axis=1, keepdims=True)))
            g = e / e.sum(axis=1, keepdims=True)
        elif cfg.truth == "dirichlet":
            g = rng.dirichlet(np.full(n_z, 2.0), size=cfg.n_x)
        else:
            g = np.eye(n_z)[np.argmax(logits, axis=1)]
        mu = np.full(cfg.n_x, 1.0 / cfg.n_x)
        weights = cfg.test_scale * rng.normal(size=(cfg.n_tests, dim)) / np.sqrt(dim)
        problems.append(oi_problem(mu, g))
        families.append(tanh_family(feat, weights, n_z))
        feats.append(jnp.asarray(feat))

    def stack(xs):
        return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *xs)

    return stack(problems), stack(families), jnp.stack(feats)


def _seed(ctx, part: int, index: int) -> list[int]:
    """A numpy seed for host-side data, determined by the run's seed, the part and an index."""
    return [int(ctx.seed), part, index]


def _solve_grid(static: OGDStatic):
    """Algorithm 1 vmapped over problems (axis 0) and deltas (axis 1): one compiled program."""
    over_delta = jax.vmap(ogd_solve, in_axes=(None, None, None, 0))
    over_both = jax.vmap(over_delta, in_axes=(None, 0, 0, None))
    summ = jax.vmap(jax.vmap(summarize, in_axes=(None, None, 0, 0)), in_axes=(None, 0, 0, None))

    def run(families, problems, deltas):
        states = over_both(static, families, problems, deltas)
        return states, summ(static, problems, states, deltas)

    return jax.jit(run)


def _sweep(cfg: Config, ctx):
    rows, traces = [], {}
    deltas = jnp.asarray(cfg.deltas, jnp.float32)
    with ctx.progress(len(cfg.q_values) * len(cfg.step_rules), "Algorithm 1 sweep") as bar:
        for q in cfg.q_values:
            n_z = 2**q
            problems, families, _ = _build_problems(cfg, _seed(ctx, 1, q), n_z)
            for rule in cfg.step_rules:
                static = OGDStatic(step_rule=rule, trace_len=cfg.trace_len)
                t0 = time.perf_counter()
                states, summ = jax.block_until_ready(
                    _solve_grid(static)(families, problems, deltas))
                wall = time.perf_counter() - t0
                for s in range(cfg.seeds):
                    for j, delta in enumerate(cfg.deltas):
                        row = {
                            "q": q, "n_z": n_z, "delta": delta, "seed": s, "step_rule": rule,
                            "steps": int(summ.steps[s, j]),
                            "max_adv": float(summ.max_adv[s, j]),
                            "converged": bool(summ.converged[s, j]),
                            "bound": float(iteration_bound(rule, n_z, delta)),
                            "bound_hazan": float(iteration_bound("hazan", n_z, delta)),
                            "bound_tight": float(iteration_bound("tight", n_z, delta)),
                            "regret_sum": float(summ.regret_sum[s, j]),
                            "regret_bound": float(summ.regret_bound[s, j]),
                            "circuit_size": int(summ.circuit_size[s, j]),
                            "z_over_delta2": n_z / delta**2,
                        }
                        rows.append(row)
                        if s == 0:
                            traces[(rule, q, delta)] = np.asarray(states.trace[s, j])
                ctx.log({"q": q, "step_rule": rule, "wall_s_incl_compile": wall,
                         "max_steps": max(r["steps"] for r in rows[-cfg.seeds * len(cfg.deltas):])})
                bar.update(1)
    return rows, traces


def _sweep_claims(cfg: Config, rows) -> list[Claim]:
    claims = []
    for rule in cfg.step_rules:
        const = {"hazan": 36.0, "tight": 4.5}[rule]
        eta = {"hazan": "1/sqrt(|Z| t)", "tight": "sqrt(2/(|Z| t))"}[rule]
        for q in cfg.q_values:
            sel = [r for r in rows if r["step_rule"] == rule and r["q"] == q]
            norm = max(r["steps"] * r["delta"] ** 2 / r["n_z"] for r in sel)
            worst = max(sel, key=lambda r: r["steps"] / r["bound"])
            claims.append(Claim.exact(
                f"Algorithm 1 ({rule} step {eta}), |Z| = {2**q}: T <= {const:g} |Z| / delta^2",
                "spec PED 5.5 (paper eq. (4))", f"T delta^2/|Z| <= {const:g}", norm,
                passed=all(r["steps"] <= r["bound"] and r["converged"] for r in sel),
                note=(f"{len(sel)} runs (deltas {list(cfg.deltas)}, {cfg.seeds} seeds); largest "
                      f"T = {worst['steps']} at delta = {worst['delta']:g} vs bound "
                      f"{worst['bound']:.0f} (tight 4.5|Z|/delta^2 = {worst['bound_tight']:.0f})")))
        sel = [r for r in rows if r["step_rule"] == rule]
        ratio = max(r["max_adv"] / r["delta"] for r in sel)
        claims.append(Claim.exact(
            f"Algorithm 1 ({rule}): exit with max_f |Adv_f| < delta", "spec PED 5.3, 5.5",
            "max|Adv|/delta < 1", ratio, passed=ratio < 1.0,
            note=f"largest exit advantage / delta over {len(sel)} runs"))
        reg = max(r["regret_sum"] / r["regret_bound"] for r in sel if r["steps"] > 0)
        claims.append(Claim.exact(
            f"Algorithm 1 ({rule}): OGD regret sum_t |Adv_t| <= (3/2) G D sqrt(T)",
            "spec PED 5.4 (Hazan Thm 3.1)", "ratio <= 1", reg, passed=reg <= 1.0,
            note="largest ratio over runs that took a step"))
    return claims


# ---- part 2: network vs tabular -------------------------------------------------------------------
def _timed(fn, *args):
    """(result, seconds including compilation, seconds of a second call after compilation)."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, first, time.perf_counter() - t0


def _network(cfg: Config, ctx):
    """Network (grid over lrs x seeds, one program) vs tabular (over seeds, one program)."""
    n_z = 2**cfg.net_q
    problems, families, feats = _build_problems(cfg, _seed(ctx, 2, cfg.net_q), n_z)
    static = NetTrainStatic(rounds=cfg.net_rounds, hidden=tuple(cfg.net_hidden),
                            optimizer=cfg.net_optimizer)
    hp = net_hparams([cfg.net_delta] * len(cfg.net_lrs), list(cfg.net_lrs))
    keys = jax.random.split(jax.random.fold_in(ctx.key, 200), cfg.seeds)
    grid = make_train_grid(static, batched_data=True)
    ogd_static = OGDStatic(trace_len=cfg.trace_len)
    tab_solve = jax.jit(jax.vmap(lambda f, p: ogd_solve(ogd_static, f, p, cfg.net_delta)))
    with ctx.progress(2, "network vs tabular") as bar:
        (state, log, final), net_first, net_wall = _timed(grid, hp, keys, families, problems,
                                                          feats)
        bar.update(1)
        tab, tab_first, tab_wall = _timed(tab_solve, families, problems)
        bar.update(1)
    rows = []
    tab_max_adv = np.max(np.abs(np.asarray(tab.adv)), axis=-1)  # per seed
    for s in range(cfg.seeds):
        for g, lr in enumerate(cfg.net_lrs):
            rows.append({
                "seed": s, "lr": lr, "delta": cfg.net_delta, "n_z": n_z,
                "net_final_max_adv": float(final[g, s]),
                "net_rounds_to_delta": int(state.rounds_to_delta[g, s]),
                "net_updates": int(state.updates[g, s]),
                "tab_steps": int(tab.steps[s]), "tab_max_adv": float(tab_max_adv[s]),
                "net_trace": np.asarray(log.max_adv[g, s]),
            })
    timing = {"net_wall_s": net_wall, "net_wall_incl_compile_s": net_first,
              "net_runs": cfg.seeds * len(cfg.net_lrs), "tab_wall_s": tab_wall,
              "tab_wall_incl_compile_s": tab_first, "tab_runs": cfg.seeds}
    ctx.log(timing)
    best_lr = min(cfg.net_lrs, key=lambda lr: max(
        r["net_final_max_adv"] for r in rows if r["lr"] == lr))
    best = [r for r in rows if r["lr"] == best_lr]
    worst = max(r["net_final_max_adv"] for r in best)
    reached = [r["net_rounds_to_delta"] for r in best]
    claim = Claim.exact(
        f"Flax estimator trained by OGD reaches max|Adv| < delta = {cfg.net_delta:g} "
        f"(|Z| = {n_z}, best lr = {best_lr:g})",
        "issue 6 (network analogue of spec PED 5.3); no proven bound", f"< {cfg.net_delta:g}",
        worst, passed=worst < cfg.net_delta,
        note=(f"{cfg.seeds} seeds; rounds to delta {reached} (of {cfg.net_rounds}; -1 = not "
              f"reached); tabular steps {[r['tab_steps'] for r in best]}; wall s after "
              f"compilation: network {net_wall:.3f} for {timing['net_runs']} runs "
              f"({cfg.net_rounds} rounds each), tabular {tab_wall:.3f} for {cfg.seeds} runs"))
    return rows, claim, timing


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
    claims, rows = [], []
    with ctx.progress(len(cfg.sound_provers), "soundness: B vs fixed A") as bar:
        for name in cfg.sound_provers:
            prover = makers[name]()
            rep = construct_estimator(prover, trees, rho, delta)
            ep = jax.jit(jax.vmap(lambda est, tr, a=prover: expected_payoff(
                PEDSettings(), ped_params(rho), a, est, tr)))(rep.estimator, trees)
            u_proto = float(ep.u_a.mean())
            pr = float(ep.a_correct.mean())
            bound = rho ** -(d + 1) * pr + cfg.sound_eta
            agree = abs(u_proto - rep.u_a) <= 1e-4
            rounds = [s for s in rep.stages if s.stage.startswith("k=")]
            worst_round = max(s.reward for s in rounds)
            exits = all(s.max_adv < delta for s in rep.stages if s.stage != "final")
            claims.append(Claim.exact(
                f"Soundness vs fixed A = {name}: U_A <= rho^-(d+1) Pr[A correct] + eta",
                "spec PED 6.4, 9.6 (Lemma A.4)", f"<= {bound:.4f}", u_proto,
                passed=u_proto <= bound and agree and exits,
                note=(f"d = {d}, q = {cfg.sound_q}, rho = {rho:g}, eta = {cfg.sound_eta:g}, "
                      f"delta = eta/(2d+3) = {delta:.4f}; {cfg.sound_trees} hidden-flaw trees; "
                      f"Pr[A correct] = {pr:.3f}; exact path enumeration {u_proto:.6f} vs "
                      f"construction {rep.u_a:.6f}; Algorithm 1 steps per stage "
                      f"{[s.steps for s in rep.stages if s.stage != 'final']}")))
            claims.append(Claim.exact(
                f"Soundness vs fixed A = {name}: per-round mean reward <= 2 delta",
                "spec PED 6.4 eq. (11)", f"<= {2 * delta:.4f}", worst_round,
                passed=worst_round <= 2 * delta,
                note="largest E[R_k] over k = d..1; " + ", ".join(
                    f"{s.stage}: {s.reward:.4f}" for s in rep.stages)))
            for s in rep.stages:
                rows.append({"prover": name, "stage": s.stage, "contexts": s.contexts,
                             "steps": s.steps, "max_adv": s.max_adv, "reward": s.reward,
                             "bound": s.bound, "delta": delta})
            ctx.log({"prover": name, "u_a": u_proto, "bound": bound, "pr_correct": pr})
            bar.update(1)
    return rows, claims


# ---- plots -----------------------------------------------------------------------------------------
def _plot_trace(cfg: Config, traces, net_rows):
    import matplotlib

    matplotlib.use("Agg")
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
    import matplotlib

    matplotlib.use("Agg")
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
    t0 = time.perf_counter()
    rows, traces = _sweep(cfg, ctx)
    claims = _sweep_claims(cfg, rows)
    t_sweep = time.perf_counter() - t0
    net_rows, net_claim, net_timing = _network(cfg, ctx)
    claims.append(net_claim)
    t_net = time.perf_counter() - t0 - t_sweep
    sound_rows, sound_claims = [], []
    if cfg.sound_provers:
        sound_rows, sound_claims = _soundness(cfg, ctx)
    claims.extend(sound_claims)
    t_sound = time.perf_counter() - t0 - t_sweep - t_net
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
        "wall_s": {"sweep": t_sweep, "network": t_net, "soundness": t_sound},
    }
    return ExperimentResult(claims=claims, metrics=metrics,
                            tables={"algorithm1": rows, "network": net_table,
                                    "soundness": sound_rows},
                            plots=plots)
