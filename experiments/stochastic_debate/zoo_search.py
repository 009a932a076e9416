"""The stochastic debate's optimised adversaries and sample-budget search, on the exact DP.

The optimised Alice and Bob of the zoos are found by an evolution strategy whose objective is the
exact acceptance (:func:`dedebate.exact.acceptance.acceptance_exact`, float64 on the host) at a
small T; the families are defined for any T, so the same parameters are then played by Monte
Carlo at every T. :func:`exact_scale_search` walks common factors on (N_A, N_B, N_V) down while
the exact zoo still meets completeness >= 3/5 and soundness <= 2/5 (spec DED 5.4); everything
here runs on the host, outside any jitted sweep.
"""

from __future__ import annotations

import numpy as np

from dedebate.agents.stochastic_players import (
    A_PER_STEP,
    B_LEARNED,
    SearchResult,
    honest_alice,
    honest_bob,
    optimise_alice,
    optimise_bob,
    zoo_alice,
    zoo_bob,
)
from dedebate.agents.stochastic_zoo import alice_members, bob_members
from dedebate.exact.acceptance import acceptance_exact
from dedebate.machines.fixtures import fixture_for_k
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import DebateParams, lean_defaults, make_vera


def optimise_alice_exact(
    machine, consts: DebateParams, generations: int, population: int, seed: int, levels=None
) -> SearchResult:
    """``(params, acceptance)``: the per-step liar maximising exact acceptance vs honest Bob."""
    bob, vera = honest_bob(consts), make_vera(consts)
    levels = prefix_tree(machine) if levels is None else levels

    def acceptance(lies):
        return np.array(
            [
                acceptance_exact(machine, zoo_alice(consts, A_PER_STEP, lies=li), bob, vera, levels)
                for li in lies
            ]
        )

    return optimise_alice(
        acceptance, consts, generations=generations, population=population, seed=seed
    )


def optimise_bob_exact(
    machine, consts: DebateParams, generations: int, population: int, seed: int, levels=None
) -> SearchResult:
    """``(params, win)``: the learned-abort Bob minimising honest Alice's exact win probability."""
    alice, vera = honest_alice(consts), make_vera(consts)
    levels = prefix_tree(machine) if levels is None else levels

    def alice_win(w, w_dev, w_prev):
        return np.array(
            [
                acceptance_exact(
                    machine,
                    alice,
                    zoo_bob(
                        consts, B_LEARNED, w=w[i], w_dev=float(w_dev[i]), w_prev=float(w_prev[i])
                    ),
                    vera,
                    levels,
                )
                for i in range(w.shape[0])
            ]
        )

    return optimise_bob(
        alice_win, consts, generations=generations, population=population, seed=seed
    )


def adversaries(
    K: int,
    t_opt: int,
    seed: int,
    scale: float,
    p_yes: float,
    p_no: float,
    generations: int,
    population: int,
) -> tuple[SearchResult, SearchResult]:
    """The zoos' optimised Alice and Bob (host, deterministic)."""
    _, m_no, K_decl = fixture_for_k(K, t_opt, p_no)
    _, m_yes, _ = fixture_for_k(K, t_opt, p_yes)
    consts = lean_defaults(K_decl, t_opt).constants(K_decl, t_opt).scaled(scale)
    return (
        optimise_alice_exact(m_no, consts, generations, population, seed),
        optimise_bob_exact(m_yes, consts, max(1, generations // 2), population, seed),
    )


def exact_zoo(consts: DebateParams, theta_alice, theta_bob, p_levels) -> tuple[float, float]:
    """Exact soundness and completeness over the zoos on small-T machines."""
    m_no, l_no, m_yes, l_yes = p_levels
    vera = make_vera(consts)
    _, alices = alice_members(consts, theta_alice)
    _, bobs = bob_members(consts, theta_bob)
    acc = [acceptance_exact(m_no, a, honest_bob(consts), vera, l_no) for a in alices]
    win = [acceptance_exact(m_yes, honest_alice(consts), b, vera, l_yes) for b in bobs]
    return max(acc), min(win)


def exact_scale_search(
    K: int,
    seed: int,
    theta_bob,
    *,
    scale_T: int,
    p_yes: float,
    p_no: float,
    factors,
    generations: int,
    population: int,
):
    """Down the factors from the largest, until the exact zoo fails the paper's criteria.

    At each factor on Lean's (N_A, N_B, N_V) at ``scale_T`` steps, the optimised Alice is
    re-optimised (:func:`optimise_alice_exact`); the zoo holds when its exact completeness is
    >= 3/5 and its soundness (including the re-optimised Alice's value) <= 2/5.
    """
    _, ms_no, K_decl = fixture_for_k(K, scale_T, p_no)
    _, ms_yes, _ = fixture_for_k(K, scale_T, p_yes)
    levels = (ms_no, prefix_tree(ms_no), ms_yes, prefix_tree(ms_yes))
    base = lean_defaults(K_decl, scale_T).constants(K_decl, scale_T)
    rows, thetas, f_exact = [], {}, None
    for f in sorted(factors, reverse=True):
        consts = base.scaled(f)
        opt = optimise_alice_exact(ms_no, consts, generations, population, seed, levels=levels[1])
        sound, comp = exact_zoo(consts, opt.params["theta"], theta_bob, levels)
        sound = max(sound, opt.value)
        ok = comp >= 3 / 5 and sound <= 2 / 5
        rows.append(
            {
                "K": K,
                "factor": f,
                "method": f"exact DP, T={scale_T}",
                "completeness_min": comp,
                "soundness_max": sound,
                "holds": ok,
                "n_alice": consts.n_alice,
                "n_bob": consts.n_bob,
                "n_vera": consts.n_vera,
            }
        )
        if not ok:
            break
        thetas[f], f_exact = opt.params["theta"], f
    return rows, thetas, f_exact
