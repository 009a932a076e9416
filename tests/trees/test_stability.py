"""rho-stability as fractional block sensitivity: LPs vs closed forms, F(eps) = eps fbs, tree rho."""  # noqa: E501

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedebate.core.bits import bit_table
from dedebate.trees import (
    and_table,
    and_tree,
    dictator_table,
    hidden_flaw_tree,
    majority_table,
    noisy_evidence_tree,
    or_table,
    parity_table,
    threshold_table,
    unanimous_tree,
)
from dedebate.trees.stability import (
    error_shifting_table,
    fbs,
    fbs_and,
    fbs_dual,
    fbs_majority,
    fbs_or,
    fbs_parity,
    fbs_threshold,
    flip_probability,
    node_fbs,
    sensitive_blocks,
    tree_rho,
)

TOL = 1e-7


def _point(w):
    return (1 << w) - 1  # first w bits set


@pytest.mark.parametrize("q", [3, 5, 9])
def test_threshold_closed_form_matches_lp_and_dual(q):
    ts = range(1, q + 1) if q < 9 else (1, 5, 9)
    for t in ts:
        tab = threshold_table(q, t)
        for w in range(q + 1):
            closed = fbs_threshold(q, t, w)
            assert abs(fbs(tab, _point(w)) - closed) < TOL, (q, t, w)
            assert abs(fbs_dual(tab, _point(w)) - closed) < TOL, (q, t, w)


def test_closed_forms_of_the_spec_table():
    assert fbs_threshold(9, 5, 8) == 2 and fbs_threshold(9, 5, 9) == 9 / 5
    assert fbs_threshold(9, 5, 1) == 2 and fbs_threshold(9, 5, 0) == 9 / 5
    assert fbs_threshold(99, 50, 66) == pytest.approx(66 / 17)  # [S-Li] "rho ~ 4"
    for q in (3, 5, 7):
        for w in range(q + 1):
            z = _point(w)
            assert abs(fbs(and_table(q), z) - fbs_and(q, w)) < TOL
            assert abs(fbs(or_table(q), z) - fbs_or(q, w)) < TOL
            assert abs(fbs(majority_table(q), z) - fbs_majority(q, w)) < TOL
            assert abs(fbs(parity_table(q), z) - fbs_parity(q)) < TOL
            assert abs(fbs(dictator_table(q), z) - 1.0) < TOL
    assert fbs_and(5, 5) == 5 and fbs_and(5, 4) == 1 and fbs_or(5, 0) == 5 and fbs_or(5, 1) == 1


def test_packing_is_feasible_and_optimal():
    for tab, z in (
        (threshold_table(5, 3), 0b01111),
        (majority_table(7), 0b1111000),
        (parity_table(4), 0b0101),
    ):
        value, u = fbs(tab, z, return_packing=True)
        blocks = sensitive_blocks(tab, z)
        assert np.all(u >= 0) and np.all(u[np.setdiff1d(np.arange(u.size), blocks)] == 0)
        load = bit_table(int(np.log2(tab.size))).T @ u
        assert np.all(load <= 1 + TOL) and abs(load.max() - 1) < TOL  # a tight coordinate
        assert abs(u.sum() - value) < TOL
        dual, t = fbs_dual(tab, z, return_cover=True)
        assert abs(dual - value) < TOL
        bits = bit_table(int(np.log2(tab.size)))
        assert np.all(bits[blocks] @ t >= 1 - TOL) and abs(t.sum() - value) < TOL


@st.composite
def functions(draw):
    q = draw(st.integers(2, 5))
    table = np.array(draw(st.lists(st.integers(0, 1), min_size=2**q, max_size=2**q)), np.int8)
    z = draw(st.integers(0, 2**q - 1))
    return q, table, z


@settings(max_examples=40, deadline=None)
@given(functions(), st.floats(0.0, 1.0))
def test_flip_probability_is_eps_times_fbs(fz, frac):
    """Spec 3.3: F(eps) = eps * fbs_z(f) for eps <= 1/q, and F(eps) <= min(1, eps fbs) always."""
    q, table, z = fz
    f = fbs(table, z)
    eps = frac / q
    assert abs(flip_probability(table, z, eps) - eps * f) < 1e-7
    big = min(1.0, 4 * eps + 0.3)
    assert flip_probability(table, z, big) <= min(1.0, big * f) + 1e-7


def test_flip_probability_spec_check_points():
    for q in (3, 5):
        for t in (1, (q + 1) // 2, q):
            tab = threshold_table(q, t)
            for w in range(q + 1):
                for eps in (0.01, 1 / q):
                    assert (
                        abs(flip_probability(tab, _point(w), eps) - eps * fbs_threshold(q, t, w))
                        < 1e-7
                    )


def test_tree_rho():
    k = jax.random.key(0)
    assert tree_rho(noisy_evidence_tree(k, depth=2)) == pytest.approx(2.0, abs=TOL)
    assert tree_rho(unanimous_tree(k, depth=2)) == pytest.approx(1.8, abs=TOL)
    assert tree_rho(and_tree(k, depth=2, q=4)) == pytest.approx(4.0, abs=TOL)
    h = hidden_flaw_tree(k, depth=3, q=4)
    assert tree_rho(h) == pytest.approx(2.0, abs=TOL)  # stable witnesses, Thr_3 of 4
    assert tree_rho(h, cand=0) == pytest.approx(4.0, abs=TOL)  # the obfuscated AND
    nf = node_fbs(h)
    truth = np.asarray(h.truth)[: h.n_internal]
    assert np.allclose(nf[truth == 1, 0], 4.0) and np.allclose(nf[truth == 0, 0], 1.0)


def test_error_shifting_table_shifts_error_by_one_over_fbs():
    tree = noisy_evidence_tree(jax.random.key(1), depth=2, unstable_alternative=True)
    shift = error_shifting_table(tree)
    nf = node_fbs(tree)
    bits = bit_table(9)
    truth = np.asarray(tree.truth)
    for v in range(tree.n_internal):
        for c in range(2):
            row = shift[v, c].astype(np.float64)
            assert abs(row.sum() - 1) < 1e-6
            kids = truth[np.asarray(tree.children(v, c))]
            md = np.asarray(tree.md(v, c))
            code = int((kids << np.arange(9)).sum())
            assert abs(row @ (md != md[code]) - 1) < 1e-6  # all mass flips M_D
            err = row @ np.abs(bits - kids[None, :])  # per-child marginal error
            assert abs(err.max() - 1 / nf[v, c]) < 1e-6


def test_bad_inputs():
    with pytest.raises(ValueError, match="2\\^q entries"):
        fbs(np.zeros(6, np.int8), 0)
    with pytest.raises(ValueError, match="only 0 and 1"):
        fbs(np.full(8, 2), 0)
    with pytest.raises(ValueError, match="z=9"):
        fbs(threshold_table(3, 2), 9)
    with pytest.raises(ValueError, match="eps=1.5"):
        flip_probability(threshold_table(3, 2), 0, 1.5)
    with pytest.raises(ValueError, match="q=13"):
        fbs(np.zeros(2**13, np.int8), 0)
    with pytest.raises(ValueError, match=r"\(q, t, w\)=\(3, 4, 0\)"):
        fbs_threshold(3, 4, 0)
    with pytest.raises(ValueError, match="cand=2"):
        tree_rho(and_tree(jax.random.key(0), depth=2, q=4), cand=2)
    # tables and codes that used to be truncated to integers, and closed forms off the integers
    with pytest.raises(ValueError, match="only 0 and 1"):
        fbs(np.array([0.5, 1.7, 0.2, 1.9]), 0)
    with pytest.raises(ValueError, match="one row"):
        fbs(np.zeros((2, 2), np.int8), 0)
    for z in (2.7, "1", float("nan"), True):
        with pytest.raises(ValueError, match="an integer"):
            fbs(threshold_table(3, 2), z)
    with pytest.raises(ValueError, match="integers"):
        fbs_threshold(5, 2.5, 3)
    for q in (0, -3, 2.5):
        with pytest.raises(ValueError, match=f"q={q}"):
            fbs_parity(q)
    with pytest.raises(ValueError, match="cand=0.5"):
        tree_rho(and_tree(jax.random.key(0), depth=2, q=4), cand=0.5)
    for bad in (-1, 3, 1.5, True):  # -1 read the last bit; True was bit 1
        with pytest.raises(ValueError, match="the dictator of q=3 bits"):
            dictator_table(3, bad)
    with pytest.raises(ValueError, match="t=True"):
        threshold_table(3, True)


def test_the_lp_cache_tells_apart_functions_whose_tables_share_bytes():
    """An int32 table of q = 2 has the bytes of an int8 table of q = 4: with one cache shared
    between two trees, each function still gets its own fbs."""
    and2 = np.array([0, 0, 0, 1], np.int32)  # AND of 2 bits: fbs 2 at 11 (code 3)
    g = np.frombuffer(and2.tobytes(), np.int8).copy()  # q = 4: 1 only at code 12, fbs 1 at 3
    wide = and_tree(jax.random.key(0), depth=1, q=2)
    wide = dataclasses.replace(wide, tables=jnp.asarray(np.stack([and2] * 2)))
    narrow = and_tree(jax.random.key(0), depth=1, q=4)
    truth = np.asarray(narrow.truth).copy()
    truth[1:5] = (1, 1, 0, 0)  # the root's children at code 3
    narrow = dataclasses.replace(narrow, truth=jnp.asarray(truth), tables=jnp.asarray(g[None]))
    cache: dict = {}
    assert node_fbs(narrow, cache)[0, 0] == pytest.approx(1.0)
    assert node_fbs(wide, cache)[0, 0] == pytest.approx(2.0)


def test_tree_rho_is_admissible_but_counts_nodes_only_other_candidates_reach():
    """The documented example: on ``hidden_flaw_tree(q=4)`` the max over honest A's nodes is 4/3
    and tree_rho is 2 (nodes under the AND candidate)."""
    tree = hidden_flaw_tree(jax.random.key(0), depth=3, q=4)
    c, per_node = tree.honest_cand, node_fbs(tree)
    reached, frontier = [0], [0]
    for _ in range(tree.depth - 1):
        frontier = [int(k) for v in frontier for k in np.asarray(tree.children(v, c))]
        reached += frontier
    assert per_node[reached, c].max() == pytest.approx(4 / 3, abs=1e-12)
    assert tree_rho(tree) == pytest.approx(2.0, abs=1e-12)
