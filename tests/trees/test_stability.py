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
    child_codes,
    dictator_table,
    hidden_flaw_tree,
    majority_table,
    noisy_evidence_tree,
    or_table,
    parity_table,
    random_tree,
    threshold_table,
    unanimous_tree,
)
from dedebate.trees.stability import (
    child_codes_jnp,
    error_shifting_table,
    error_shifting_table_jnp,
    fbs,
    fbs_and,
    fbs_dictator,
    fbs_dual,
    fbs_majority,
    fbs_or,
    fbs_parity,
    fbs_threshold,
    flip_probability,
    lp_lookup,
    node_fbs,
    node_fbs_jnp,
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


def _fbs_brute(table, z):
    """fbs_z by scipy directly, blocks and sensitivity enumerated with python ints."""
    from scipy.optimize import linprog

    table = [int(x) for x in np.asarray(table)]
    q = len(table).bit_length() - 1
    sens = [b for b in range(1, 2**q) if table[z ^ b] != table[z]]
    if not sens:
        return 0.0
    a_ub = [[float((b >> i) & 1) for b in sens] for i in range(q)]
    res = linprog([-1.0] * len(sens), A_ub=a_ub, b_ub=[1.0] * q, bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


def _code(bits):
    return sum(int(b) << i for i, b in enumerate(bits))


def test_dictator_closed_form_and_majority_needs_odd_q():
    """fbs_dictator() is the LP's value at every point of every dictator; majority needs odd q."""
    for q in (2, 3, 4):
        for i in range(q):
            for z in range(2**q):
                assert abs(fbs(dictator_table(q, i), z) - fbs_dictator()) < TOL
    assert fbs_dictator() == 1.0
    for q in (2, 4, 6):
        with pytest.raises(ValueError, match="odd"):
            fbs_majority(q, 1)


def test_node_fbs_of_a_random_tree_is_the_lp_at_each_nodes_own_table_and_children():
    """Per-node M_D: node_fbs[v, c] is a separate LP on md(v, c); the jitted lookups agree."""
    # LPs with 0/1 data solved by HiGHS: values agree to ~1e-9, checked at TOL = 1e-7
    tree = random_tree(jax.random.key(5), depth=2, q=3, n_cand=2)
    truth = np.asarray(tree.truth)
    nf = node_fbs(tree)
    assert nf.shape == (tree.n_internal, 2)
    codes = np.zeros((tree.n_internal, 2), np.int64)
    for v in range(tree.n_internal):
        for c in range(2):
            codes[v, c] = _code(truth[v * 6 + 1 + c * 3 + np.arange(3)])
            want = _fbs_brute(np.asarray(tree.md(v, c)), int(codes[v, c]))
            assert abs(nf[v, c] - want) < TOL, (v, c)
    assert len({tuple(np.asarray(tree.md(v, 0))) for v in range(tree.n_internal)}) > 1
    assert np.array_equal(np.asarray(child_codes_jnp(tree)), codes)
    assert np.array_equal(child_codes(tree), codes)
    lookup = lp_lookup(tree.tables, range(4))
    assert np.allclose(np.asarray(node_fbs_jnp(tree, lookup["fbs"])), nf, atol=TOL, rtol=0)
    host = error_shifting_table(tree)
    jitted = np.asarray(error_shifting_table_jnp(tree, lookup))
    assert np.allclose(jitted, host, atol=1e-6, rtol=0)  # both float32 of the same u / fbs
    # with one cache shared by tree_rho and the error-shifting table, the table is unchanged
    cache: dict = {}
    assert tree_rho(tree, cache=cache) == pytest.approx(nf[:, 0].max(), abs=TOL)
    assert np.array_equal(error_shifting_table(tree, cache), host)


def test_lp_lookup_rows_are_the_packing_at_each_solved_code_and_nan_elsewhere():
    """lp_lookup: fbs and u / fbs (float32: 1e-6) at the asked popcounts, NaN at other codes."""
    tables = np.stack([threshold_table(4, 2), and_table(4), parity_table(4)])
    lookup = lp_lookup(tables, (1, 4))
    for a in range(3):
        for z in range(16):
            row = lookup["rel"][lookup["row"][a, z]]
            if bin(z).count("1") in (1, 4):
                v, u = fbs(tables[a], z, return_packing=True)
                assert lookup["fbs"][a, z] == v
                assert abs(v - _fbs_brute(tables[a], z)) < TOL
                assert np.allclose(row, u / v, atol=1e-6, rtol=0)
            else:
                assert np.isnan(lookup["fbs"][a, z]) and np.isnan(row).all(), (a, z)


def test_a_constant_aggregator_has_fbs_zero_and_a_point_mass_on_the_truth():
    """No sensitive block: fbs 0, and the error-shifting row is the point mass on z* (spec 4)."""
    tree = and_tree(jax.random.key(0), depth=1, q=3, root_truth=1)  # children 111, code 7
    const = dataclasses.replace(tree, tables=jnp.ones((1, 8), jnp.int8))
    assert node_fbs(const)[0, 0] == 0.0 and tree_rho(const) == 0.0
    want = np.zeros(8)
    want[7] = 1.0
    assert np.array_equal(error_shifting_table(const)[0, 0], want)
    lookup = lp_lookup(const.tables, (3,))
    assert np.array_equal(np.asarray(error_shifting_table_jnp(const, lookup))[0, 0], want)


def test_flip_probability_at_eps_one_is_one_where_a_block_is_sensitive():
    """F(1) = 1 (all mass on one sensitive block) when S_z is nonempty, else 0."""
    for tab in (parity_table(3), and_table(3), threshold_table(4, 2), np.ones(8, np.int8)):
        for z in range(tab.size):
            want = 1.0 if sensitive_blocks(tab, z).size else 0.0
            assert abs(flip_probability(tab, z, 1.0) - want) < TOL


def test_node_fbs_of_library_trees_is_the_closed_form_at_each_nodes_child_count():
    """node_fbs is the closed form at each node's true-children count; tree_rho is their max."""
    k = jax.random.key(2)
    cases = [
        (noisy_evidence_tree(k, depth=2, root_truth=0, unstable_alternative=True), (5, 9)),
        (unanimous_tree(k, depth=2, root_truth=0), (5,)),
        (unanimous_tree(k, depth=2, root_truth=1), (5,)),
        (hidden_flaw_tree(k, depth=3, q=4, root_truth=1), (4, 3)),
        (noisy_evidence_tree(k, depth=1), (5,)),
    ]
    for tree, ts in cases:
        q, nf = tree.q, node_fbs(tree)
        w = bit_table(q).sum(axis=1)[child_codes(tree)]
        for c, t in enumerate(ts):
            want = np.array([fbs_threshold(q, t, int(x)) for x in w[:, c]])
            assert np.allclose(nf[:, c], want, atol=TOL, rtol=0), (tree.cand_names, c)
            assert tree_rho(tree, cand=c) == pytest.approx(want.max(), abs=TOL)
    uni0 = node_fbs(cases[1][0])
    assert np.allclose(uni0, 9 / 5, atol=TOL) and cases[1][0].n_internal == 10
