"""Theorem 7.2 (spec DED 8): stochastic debate with a witness on the MA^O meta-analysis task."""

import math

import jax
import numpy as np
import pytest

from dedebate.agents.stochastic_players import (
    completeness_zoo,
    honest_alice,
    honest_bob,
    soundness_zoo,
)
from dedebate.core.bits import bit_table
from dedebate.exact import acceptance_exact
from dedebate.machines.lipschitz import hybrid_bound, prefix_tree, tree_output_prob
from dedebate.protocols.stochastic import (
    debate_static,
    lean_defaults,
    make_vera,
    trial_keys,
)
from dedebate.protocols.witness import meta_analysis_task, no_task, witness_debate, yes_task
from tests.fakes import LIGHT_COMPILE


def test_instances_are_in_and_out_of_the_language():
    yes, no = yes_task(), no_task()
    assert yes.membership() == "yes" and yes.output_probs().max() >= 2 / 3
    assert no.membership() == "no" and no.output_probs().max() <= 1 / 3
    assert yes.T == 7 and yes.witnesses().shape == (64, 6)
    # the honest witness selects the four strong positive studies
    np.testing.assert_array_equal(yes.honest_witness(), [1, 1, 1, 1, 0, 0])
    with pytest.raises(ValueError, match="witness selects"):
        yes.fixture([1, 0])
    with pytest.raises(ValueError, match="reports"):
        meta_analysis_task([1, 2], [0.5, 0.5], 1)


def test_completeness_with_the_honest_witness():
    task = yes_task()
    K = task.lipschitz()
    T = task.T
    lp = lean_defaults(K, T)
    c = lp.constants(K, T)
    w = task.honest_witness()
    fx = task.fixture(w)
    p1 = fx.p1()
    assert p1 == pytest.approx(task.output_prob(w), abs=1e-6)  # two independent computations
    bound = lp.completeness(K, T, p1)
    assert bound >= 3 / 5
    lv = prefix_tree(fx.machine)
    _, bobs = completeness_zoo(c)
    for b in bobs + [honest_bob(c)]:
        assert acceptance_exact(fx.machine, honest_alice(c), b, make_vera(c), lv) >= bound


def test_soundness_whatever_witness_a_lying_alice_picks():
    """Every (witness, zoo Alice) pair: the exact acceptance stays below Theorem 6.2's bound for
    that witness's machine, so the best choice for Alice does too; Monte Carlo through
    ``witness_debate`` agrees with the exact value at her best witness."""
    task = no_task()
    K, T = task.lipschitz(), task.T
    lp = lean_defaults(K, T)
    c = lp.constants(K, T)
    vera, bob = make_vera(c), honest_bob(c)
    names, alices = soundness_zoo(c)
    keep = [names.index(x) for x in ("+s", "+0.95 tau_B", "+0.99 s (just under s)")]
    # (the strongest members; the others are caught outright: tests/protocols/test_stochastic.py)
    names, alices = [names[i] for i in keep], [alices[i] for i in keep]
    ws = task.witnesses()
    best = (-1.0, None, None)
    for i, w in enumerate(ws):
        fx = task.fixture(w)
        lv = prefix_tree(fx.machine)
        bound = 1 - lp.soundness(K, T, 1 - task.output_prob(w))
        for j, a in enumerate(alices):
            acc = acceptance_exact(fx.machine, a, bob, vera, lv)
            assert acc <= bound, (w, names[j])
            if acc > best[0]:
                best = (acc, i, j)
    acc, wi, aj = best
    assert acc <= 2 / 5
    # Monte Carlo through the per-trial wrapper: Alice sends witness wi, then plays member aj
    n = 1500
    machines = task.machines(ws)
    keys = trial_keys(jax.random.key(0), n)
    play_w = jax.jit(
        jax.vmap(witness_debate, in_axes=(None, None, 0, None, None, None, 0)),
        static_argnums=0,
        compiler_options=LIGHT_COMPILE,
    )
    idx, out = play_w(debate_static(T), machines, np.full(n, wi), alices[aj], bob, vera, keys)
    assert np.all(np.asarray(idx) == wi)
    mc = float(np.mean(np.asarray(out.alice_wins)))
    assert abs(mc - acc) < 4 * math.sqrt(max(acc * (1 - acc), 1e-3) / n)


@pytest.mark.parametrize("make", [yes_task, no_task], ids=["yes", "no"])
def test_every_witness_machine_agrees_with_the_prefix_tree(make):
    """Over every witness, two independent float64 computations from the same float32 machine
    probabilities: ``P[M(x, w) = 1]`` by the signed-sum DP against the prefix tree's, and
    ``K* = max_w K(M(x, w))`` by the threshold formula against the tree's exact hybrid bound
    (equal: WHY_THRESHOLD); rows are little-endian bit tables, as documented."""
    task = make()
    ws = task.witnesses()
    np.testing.assert_array_equal(ws, bit_table(task.n))
    trees = [prefix_tree(task.fixture(w).machine) for w in ws]
    # float64 sums of at most 2^T terms in other orders: 1e-12 is thousands of ulp
    np.testing.assert_allclose(
        task.output_probs(), [tree_output_prob(t) for t in trees], atol=1e-12
    )
    assert task.lipschitz() == pytest.approx(max(hybrid_bound(t) for t in trees), abs=1e-12)


def test_membership_at_the_thresholds_themselves():
    """Spec DED 8: yes when the best witness has P >= 2/3, no when it has P <= 1/3."""
    for probs, want in (([0.1, 2 / 3], "yes"), ([0.1, 1 / 3], "no"), ([0.1, 0.5], "gap")):
        task = yes_task()
        task.__dict__["_probs"] = np.array(probs)  # the cached exact probabilities
        assert task.membership() == want, probs
