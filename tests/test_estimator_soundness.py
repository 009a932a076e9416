"""B built round by round with Algorithm 1 against a fixed A (spec PED 6, 9.6)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from dedebate.agents.ped_strategies import honest_prover
from dedebate.estimators.soundness import construct_estimator
from dedebate.protocols.prover_estimator import PEDSettings, expected_payoff, ped_params
from dedebate.trees.library import hidden_flaw_tree

RHO, ETA = 2.0, 0.2


def test_constructed_estimator_is_sound_against_fixed_prover():
    """Honest A here; the experiment's quick run covers the obfuscating liar, its default size
    also the wrong-direction prover."""
    trees = hidden_flaw_tree(jax.random.split(jax.random.key(5), 2), 2, 2, 0)
    d = trees.depth
    delta = ETA / (2 * d + 3)
    prover = honest_prover()
    rep = construct_estimator(prover, trees, RHO, delta)
    # every stage of Algorithm 1 exited below delta, within the proven step bound
    for s in rep.stages[:-1]:
        n_z = 2 if s.stage == "init" else 2**trees.q
        assert s.max_adv < delta and s.steps <= 36 * n_z / delta**2
    # spec 6.4: init <= r^{d+1} Pr + delta, each round <= 2 delta, final <= delta
    for s in rep.stages:
        assert s.reward <= s.bound + 1e-6, s
    # the protocol's own exact path enumeration gives the same expected payoff
    ep = jax.vmap(lambda est, tr: expected_payoff(PEDSettings(), ped_params(RHO), prover, est,
                                                  tr))(rep.estimator, trees)
    np.testing.assert_allclose(np.asarray(ep.u_a).mean(), rep.u_a, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ep.total_prob), 1.0, atol=1e-5)
    pr = float(np.asarray(ep.a_correct).mean())
    assert pr == pytest.approx(rep.pr_correct)
    assert rep.u_a <= RHO ** -(d + 1) * pr + ETA


def test_validation():
    trees = hidden_flaw_tree(jax.random.split(jax.random.key(0), 2), 1, 2, 0)
    with pytest.raises(ValueError, match="rho=0.5"):
        construct_estimator(honest_prover(), trees, 0.5, 0.1)
    with pytest.raises(ValueError, match="delta=0"):
        construct_estimator(honest_prover(), trees, 2.0, 0.0)
