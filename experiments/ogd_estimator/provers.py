"""Soundness check: B built against each fixed prover A, and A's exact payoff (spec PED 6, 9.6).

:func:`soundness_trees` draws the hidden-flaw trees; :func:`against_fixed_prover` builds B round
by round with Algorithm 1 (:func:`~dedebate.estimators.soundness.construct_estimator`) against
one of :data:`PROVERS` and measures A's expected payoff by the protocol's own path enumeration
(an independent check of the construction's number); :func:`stage_rows` tabulates the stages.
"""

from __future__ import annotations

import jax

from dedebate.agents.ped_strategies import honest_prover, obfuscating_liar, wrong_direction_prover
from dedebate.estimators.soundness import SoundnessReport, construct_estimator
from dedebate.programs import jit
from dedebate.protocols.prover_estimator import PEDStatic, expected_payoff, ped_params
from dedebate.trees.library import hidden_flaw_tree

PROVERS = {
    "honest": honest_prover,
    "obfuscating": obfuscating_liar,
    "wrong_direction": wrong_direction_prover,
}
"""The fixed provers A by name (builders of no arguments)."""
TREE_KEY = 300
"""The trees come from ``split(fold_in(key, TREE_KEY), n_trees)``."""


def soundness_trees(key, n_trees: int, depth: int, q: int):
    """Hidden-flaw claim trees for the soundness check."""
    return hidden_flaw_tree(
        jax.random.split(jax.random.fold_in(key, TREE_KEY), n_trees), depth, q, 0
    )


def against_fixed_prover(name: str, trees, rho: float, delta: float):
    """``(report, payoff)``: B built against the fixed prover ``name``; A's exact payoffs."""
    prover = PROVERS[name]()
    rep = construct_estimator(prover, trees, rho, delta)
    ep = jit(
        jax.vmap(lambda est, tr: expected_payoff(PEDStatic(), ped_params(rho), prover, est, tr))
    )(rep.estimator, trees)
    return rep, jax.block_until_ready(ep)


def stage_rows(name: str, report: SoundnessReport, delta: float) -> list[dict]:
    """One table row per stage of a construction."""
    return [
        {
            "prover": name,
            "stage": s.stage,
            "contexts": s.contexts,
            "steps": s.steps,
            "max_adv": s.max_adv,
            "reward": s.reward,
            "bound": s.bound,
            "delta": delta,
        }
        for s in report.stages
    ]
