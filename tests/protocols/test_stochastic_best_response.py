"""Exact best responses of the stochastic-oracle debate (dedebate/exact/best_response.py): equal
to a brute force over every strategy at tiny sizes, never beaten by a zoo member, and within the
proven bounds at Lean's counts, which the threshold factor of the budget frontier breaks."""

import itertools

import numpy as np
import pytest

from dedebate.agents.stochastic_players import (
    A_HONEST_SHIFT,
    A_LIE_LAST,
    B_NEVER,
    completeness_zoo,
    honest_alice,
    honest_bob,
    soundness_zoo,
    zoo_alice,
    zoo_bob,
)
from dedebate.exact import acceptance_exact, checker_prob, claim_law, real
from dedebate.exact.best_response import _alice_candidates, alice_best_response, bob_best_response
from dedebate.machines.fixtures import fixture_for_k
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import lean_defaults, make_vera

P_YES, P_NO = 2 / 3, 0.33333


def tiny(T: int):
    """Lean's constants for K = 1 scaled to a few samples each (N_A 4, N_B 2, N_V 11 at T = 2)."""
    return lean_defaults(1.0, T).constants(1.0, T).scaled(1e-4)


def yes_no(K: int, T: int):
    return fixture_for_k(K, T, P_YES)[1], fixture_for_k(K, T, P_NO)[1]


@pytest.mark.parametrize("kind", [None, A_HONEST_SHIFT, A_LIE_LAST])
def test_bob_best_response_is_the_least_over_every_bob_strategy(kind):
    """T = 2: every Bob that decides per prefix and claim (2^15 of them against honest Alice's
    five claims) played out by enumeration; the least equals the DP's best response. Also against
    an Alice whose claims are shifted by 0.3, and one who lies (by 0.3) at the last step only."""
    T, c = 2, tiny(2)
    m_yes = yes_no(2, T)[0]  # F2: the last step's probability depends on the first bit
    levels, vera = prefix_tree(m_yes), make_vera(c)
    alice = honest_alice(c) if kind is None else zoo_alice(c, kind, delta=0.3)
    nodes = [(0, 0), (1, 0), (1, 1)]  # (step, little-endian prefix code)
    laws = [claim_law(alice, t, T, float(levels[t][code])) for t, code in nodes]
    oks = [
        checker_prob(p, int(c.n_vera), real(c.tau_vera), float(levels[t][code]))
        for (t, code), (p, _) in zip(nodes, laws)
    ]
    sizes = [p.size for p, _ in laws]
    tables = np.array(list(itertools.product((0, 1), repeat=sum(sizes))), bool)  # 1: abort
    abort = np.split(tables, np.cumsum(sizes)[:-1], axis=1)

    def node(i, v0, v1):
        w, ok, coin = laws[i][1], oks[i], np.clip(laws[i][0], 0.0, 1.0)
        v0, v1 = np.asarray(v0)[..., None], np.asarray(v1)[..., None]  # per table
        return np.where(abort[i], ok, coin * v1 + (1 - coin) * v0) @ w

    values = node(0, node(1, 0.0, 1.0), node(2, 0.0, 1.0))
    assert tables.shape[0] == 2 ** sum(sizes) >= 2**3
    assert bob_best_response(m_yes, alice, vera, levels) == pytest.approx(values.min(), abs=1e-14)
    never = acceptance_exact(m_yes, alice, zoo_bob(c, B_NEVER), vera, levels)
    assert values.min() < never  # some Bob gains over never aborting: the minimum is no default


def test_alice_best_response_is_the_sup_over_every_claim():
    """T = 3: Alice's claims on a fine grid and a nanometre either side of every step of Bob's and
    Vera's windows, best per prefix: never above the DP's sup, and within 1e-7 of it."""
    T, c = 3, lean_defaults(1.0, 3).constants(1.0, 3).scaled(1e-3)  # N_B 16, N_V 106
    m_no = yes_no(2, T)[1]  # F2: the last step's probability depends on the earlier bits
    levels, vera, bob = prefix_tree(m_no), make_vera(c), honest_bob(c)
    checkers = [(int(c.n_bob), real(c.tau_bob)), (int(c.n_vera), real(c.tau_vera))]
    steps = np.concatenate([np.arange(n + 1) / n + s * tau for n, tau in checkers for s in (-1, 1)])
    grid = np.concatenate([np.linspace(-0.2, 1.2, 2801), steps - 1e-9, steps + 1e-9])
    V = None
    for t in range(T - 1, -1, -1):
        v0, v1 = (np.zeros(2**t), np.ones(2**t)) if V is None else np.split(V, 2)
        V = np.empty(2**t)
        for code, pi in enumerate(levels[t]):
            keep, ok = (checker_prob(grid, n, tau, float(pi)) for n, tau in checkers)
            coin = np.clip(grid, 0.0, 1.0)
            go = coin * v1[code] + (1 - coin) * v0[code]
            V[code] = np.max(keep * go + (1 - keep) * ok)
    sup = alice_best_response(m_no, bob, vera, levels)
    assert V[0] - 1e-12 <= sup <= V[0] + 1e-7
    assert sup > acceptance_exact(m_no, honest_alice(c), bob, vera, levels) + 0.01  # lying pays


def test_best_responses_bound_every_zoo_member_and_cross_the_frontier():
    """K = 1, T = 8: at Lean's counts (factor 1) the best responses stay within the proven bounds;
    at 1/8 of them every zoo member is weaker than the best response, and Bob's breaks 3/5 (the
    frontier's step: 1/4 holds)."""
    T, lp = 8, lean_defaults(1.0, 8)
    m_yes, m_no = yes_no(1, T)
    l_yes, l_no = prefix_tree(m_yes), prefix_tree(m_no)
    p_yes, p_no = float(m_yes.output_prob_dp()), float(m_no.output_prob_dp())

    def best(f):
        c = lp.constants(1.0, T).scaled(f)
        vera = make_vera(c)
        bob = bob_best_response(m_yes, honest_alice(c), vera, l_yes)
        return c, vera, bob, alice_best_response(m_no, honest_bob(c), vera, l_no)

    _, _, bob, alice = best(1.0)
    assert bob >= lp.completeness(1.0, T, p_yes) and alice <= 1 - lp.soundness(1.0, T, 1 - p_no)
    assert best(0.25)[2] > 3 / 5
    c, vera, bob, alice = best(0.125)
    assert bob < 3 / 5 and alice < 2 / 5  # Bob breaks completeness, Alice cannot break soundness
    bobs = [
        acceptance_exact(m_yes, honest_alice(c), b, vera, l_yes) for b in completeness_zoo(c)[1]
    ]
    alices = [acceptance_exact(m_no, a, honest_bob(c), vera, l_no) for a in soundness_zoo(c)[1]]
    assert bob <= min(bobs) and alice >= max(alices)
    assert min(bobs) < 3 / 5  # the threshold Bobs found it too (0.5875 vs the best 0.5858)


def test_bad_input_is_refused():
    c = tiny(2)
    m_yes = yes_no(1, 2)[0]
    with pytest.raises(TypeError, match=r"bob of type ZooBob: Alice's best response needs"):
        alice_best_response(m_yes, zoo_bob(c, B_NEVER), make_vera(c))
    big = fixture_for_k(1, 21, P_YES)[1]
    with pytest.raises(
        ValueError, match=r"T=21: the exact DP enumerates prefixes, allowed T <= 20"
    ):
        bob_best_response(big, honest_alice(c), make_vera(c))


def test_alice_candidates_are_the_limits_at_interval_ends_and_the_values_at_steps():
    """Checkers whose steps are exact dyadic numbers and meet (N 16 and 32, tau 1/64: Bob's low
    end moves where Vera's high end does): each candidate claim is valued as the checkers' limit
    from inside its interval, or at a step as the checkers are there (computed exactly)."""
    checkers = [(16, 1 / 64), (32, 1 / 64)]
    pi = 0.4
    p, keep, ok = _alice_candidates(pi, checkers)
    k = (p.size + 1) // 3  # the intervals (one more than the steps): left ends, right ends
    side = np.concatenate([np.full(k, 1e-9), np.full(k, -1e-9), np.zeros(p.size - 2 * k)])
    for (n, tau), got in zip(checkers, (keep, ok)):
        np.testing.assert_array_equal(got, checker_prob(p + side, n, tau, pi))
    steps = p[2 * k :]
    assert np.isin(np.arange(1, 64, 2) / 64, steps).sum() >= 20  # they meet


def test_bobs_best_response_to_claims_above_one_is_no_better_than_never_aborting():
    """Alice shifts every claim up by 0.05, past 1 at a root of 0.97: Bob's best response is a
    least over Bobs, never aborting among them, so it is at most that Bob's acceptance (up to
    float64 round-off of a few terms). A Bob's coin is the claim clipped to [0, 1]; an
    unclipped coin of 1.02 put 0.656 above never aborting's 0.650."""
    from dedebate.agents.stochastic_players import A_SHIFT
    from dedebate.protocols.stochastic import Vera

    c = tiny(2)
    m_yes = yes_no(2, 2)[0]
    levels = [np.array([0.97]), np.array([0.3, 0.6])]
    alice, vera = zoo_alice(c, A_SHIFT, delta=0.05), Vera(n_samples=11, tau=0.5)
    never = acceptance_exact(m_yes, alice, zoo_bob(c, B_NEVER), vera, levels)
    assert bob_best_response(m_yes, alice, vera, levels) <= never + 1e-12


def test_a_claim_above_one_is_rejected_by_honest_bob_and_vera():
    """T = 1, root 0.9, Alice claims 0.9 + 0.2 = 1.1: no count fraction k / n <= 1 lies within
    tau_bob = 0.035 or tau_vera = 0.015 of it, so honest Bob aborts and Vera rejects: acceptance
    exactly 0 (a Bob checking the claim clipped to 1 accepted 0.81)."""
    from types import SimpleNamespace

    from dedebate.agents.stochastic_players import A_SHIFT

    c = tiny(2)
    assert real(c.tau_bob) < 0.1 and real(c.tau_vera) < 0.1
    alice = zoo_alice(c, A_SHIFT, delta=0.2)
    machine = SimpleNamespace(T=1)
    levels = [np.array([0.9])]
    assert acceptance_exact(machine, alice, honest_bob(c), make_vera(c), levels) == 0.0
