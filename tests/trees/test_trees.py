"""Claim trees: layout, recursive decomposability, the library's structure, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.core.bits import bit_table
from dedebate.trees import (
    MAX_Q,
    and_table,
    and_tree,
    check_decomposable,
    check_sizes,
    child_codes,
    dictator_table,
    hidden_flaw_tree,
    level_offset,
    majority_table,
    n_nodes,
    noisy_evidence_tree,
    or_table,
    parity_table,
    random_tree,
    threshold_rule,
    threshold_table,
    truth_code,
    unanimous_tree,
)


def _children_np(tree, v, c):
    return v * tree.branching + 1 + c * tree.q + np.arange(tree.q)


@pytest.fixture(scope="module")
def rand_tree():
    return random_tree(jax.random.key(0), depth=3, q=3, n_cand=2)


@pytest.fixture(scope="module")
def noisy_u():
    """Noisy-evidence tree (q=9, Thr_5) with an unstable AND alternative, false root."""
    return noisy_evidence_tree(jax.random.key(1), depth=2, root_truth=0, unstable_alternative=True)


@pytest.fixture(scope="module")
def hidden():
    """64 hidden-flaw trees (q=4, d=3) built as one batch."""
    return hidden_flaw_tree(jax.random.split(jax.random.key(7), 64), depth=3, q=4)


def test_layout_is_a_complete_breadth_first_tree(rand_tree):
    tree = rand_tree
    b = 6
    assert tree.n_nodes == n_nodes(3, 3, 2) == 1 + 6 + 36 + 216
    assert tree.n_internal == level_offset(3, 2, 3) == 43
    assert tree.truth.shape == (259,) and tree.agg.shape == (259, 2)
    # every non-root node is the child of exactly one (node, candidate, position)
    seen = np.concatenate(
        [_children_np(tree, v, c) for v in range(tree.n_internal) for c in range(2)]
    )
    assert np.array_equal(np.sort(seen), np.arange(1, tree.n_nodes))
    # children of level k are exactly level k + 1, in order
    for k in range(3):
        lo, hi = level_offset(3, 2, k), level_offset(3, 2, k + 1)
        kids = np.concatenate([_children_np(tree, v, c) for v in range(lo, hi) for c in range(2)])
        assert np.array_equal(kids, np.arange(hi, hi + (hi - lo) * b))
    assert np.array_equal(np.asarray(tree.children(5, 1)), _children_np(tree, 5, 1))
    assert int(tree.child(5, 1, 2)) == _children_np(tree, 5, 1)[2]


def test_md_table_materialises_the_aggregators(noisy_u):
    tree = noisy_u
    md = np.asarray(tree.md_table)
    assert md.shape == (tree.n_nodes, 2, 512)
    ones = bit_table(9).sum(axis=1)
    assert np.array_equal(md[3, 0], (ones >= 5).astype(np.int8))
    assert np.array_equal(md[3, 1], (ones == 9).astype(np.int8))
    assert np.array_equal(np.asarray(tree.md(3, 1)), md[3, 1])


def test_library_trees_are_recursively_decomposable(rand_tree, noisy_u, hidden):
    check_decomposable(rand_tree)
    check_decomposable(noisy_u)
    for i in (0, 1, 63):
        check_decomposable(jax.tree.map(lambda x, i=i: x[i], hidden))
    check_decomposable(unanimous_tree(jax.random.key(3), depth=2))
    check_decomposable(and_tree(jax.random.key(3), depth=3, q=4, root_truth=0))


def test_corrupted_tree_is_rejected(noisy_u):
    bad = noisy_u.replace(truth=noisy_u.truth.at[0].set(1 - noisy_u.truth[0]))
    with pytest.raises(ValueError, match="node 0, candidate 0"):
        check_decomposable(bad)


def test_noisy_evidence_child_counts(noisy_u):
    tree = noisy_u
    truth = np.asarray(tree.truth)
    counts = bit_table(9).sum(axis=1)[child_codes(tree)[:, 0]]
    parent = truth[: tree.n_internal]
    assert set(counts[parent == 1]) <= {8, 9} and set(counts[parent == 0]) <= {0, 1}
    assert {8, 9} <= set(counts[parent == 1]) and {0, 1} <= set(counts[parent == 0])


def test_hidden_flaw_structure(hidden):
    truth = np.asarray(hidden.truth)
    known = np.asarray(hidden.known)
    tree0 = jax.tree.map(lambda x: x[0], hidden)
    q, b, n_int = 4, 8, tree0.n_internal
    v = np.arange(n_int)
    and_kids = v[:, None] * b + 1 + np.arange(q)[None, :]  # candidate 0
    thr_kids = v[:, None] * b + 1 + q + np.arange(q)[None, :]  # candidate 1
    assert np.all(truth[:, 0] == 0) and np.all(known[:, 0])  # root oracle
    assert not known[:, and_kids].any() and known[:, thr_kids].all()
    false_and = truth[:, and_kids].sum(axis=-1)  # [tree, node]
    parent = truth[:, :n_int]
    assert np.all(false_and[parent == 1] == q) and np.all(false_and[parent == 0] == q - 1)
    # the flaw position is uniform: each position's count within a 99.9% binomial band
    pos = np.argmin(truth[:, and_kids], axis=-1)[parent == 0]
    n = pos.size
    counts = np.bincount(pos, minlength=q)
    band = 3.3 * np.sqrt(n * (1 / q) * (1 - 1 / q))
    assert n > 1000 and np.all(np.abs(counts - n / q) <= band), counts
    # the public view hides exactly the unobservable truths
    pub = np.asarray(tree0.public().truth)
    assert np.array_equal(pub == -1, ~np.asarray(tree0.known))
    assert np.array_equal(pub[np.asarray(tree0.known)], truth[0][np.asarray(tree0.known)])


def test_a_batch_of_keys_equals_building_one_by_one(hidden):
    keys = jax.random.split(jax.random.key(7), 64)
    for i in (0, 17, 63):
        one = hidden_flaw_tree(keys[i], depth=3, q=4)
        assert np.array_equal(np.asarray(one.truth), np.asarray(hidden.truth[i]))
        assert np.array_equal(np.asarray(one.known), np.asarray(hidden.known[i]))


def test_builders_trace_inside_jit():
    f = jax.jit(lambda k: and_tree(k, depth=3, q=4, root_truth=0).truth)
    eager = and_tree(jax.random.key(3), depth=3, q=4, root_truth=0).truth
    assert np.array_equal(np.asarray(f(jax.random.key(3))), np.asarray(eager))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"q": MAX_Q + 1}, r"q=13: .*2 <= q <= 12"),
        ({"q": 1}, r"q=1:"),
        ({"depth": 0}, r"depth=0:"),
    ],
)
def test_bad_sizes(kwargs, match):
    args = {"q": 3, "depth": 2} | kwargs
    with pytest.raises(ValueError, match=match):
        check_sizes(args["q"], args["depth"])
    with pytest.raises(ValueError, match=match):
        random_tree(jax.random.key(0), depth=args["depth"], q=args["q"])


def test_q_above_twelve_is_refused_by_every_builder():
    k = jax.random.key(0)
    for build in (
        lambda: noisy_evidence_tree(k, depth=1, q=13, t=7, true_counts=(13,), false_counts=(0,)),
        lambda: hidden_flaw_tree(k, depth=1, q=13),
        lambda: and_tree(k, depth=1, q=13),
    ):
        with pytest.raises(ValueError, match="q=13"):
            build()


def test_bad_rules_and_roots():
    with pytest.raises(ValueError, match="true_counts"):
        threshold_rule(9, 5, (4, 9), (0,))
    with pytest.raises(ValueError, match="false_counts"):
        threshold_rule(9, 5, (9,), (5,))
    with pytest.raises(ValueError, match="t=0"):
        threshold_rule(9, 0, (9,), (0,))
    with pytest.raises(ValueError, match="root_truth=2"):
        and_tree(jax.random.key(0), depth=1, q=3, root_truth=2)
    with pytest.raises(ValueError, match="table entries"):
        random_tree(jax.random.key(0), depth=6, q=12)
    with pytest.raises(ValueError, match="nodes"):
        check_sizes(12, 7, 2)


def test_traced_truth_code_matches_host_codes(rand_tree):
    tree = rand_tree

    @jax.jit
    def codes(tree):
        return jax.vmap(
            lambda v: jax.vmap(lambda c: truth_code(tree.child_truths(v, c)))(
                jnp.arange(tree.n_cand)
            )
        )(jnp.arange(tree.n_internal))

    assert np.array_equal(np.asarray(codes(tree)), child_codes(tree))


def test_a_pool_must_hold_every_digit():
    """A pool with no image of some digit would make a tree of that digit read another digit's
    image at a true leaf (the truth would not match the label): refused, naming the digit."""
    from dedebate.trees.digits import pool

    labels = np.repeat(np.arange(10), 3)
    pool(np.arange(30), labels)  # every digit: accepted
    without_3 = np.flatnonzero(labels != 3)
    with pytest.raises(ValueError, match=r"digit\(s\) \[3\]"):
        pool(without_3, labels)


def test_rules_and_digit_counts_refuse_what_they_truncated_or_misread():
    """Counts of 4.7 became 4, a bool public flag any truthy value, an unknown kind failed in a
    gather, an unknown family read as slack, m=True as 1."""
    from dedebate.trees.digits import family_rule, stated_counts
    from dedebate.trees.library import CandidateRule, threshold_rule

    with pytest.raises(ValueError, match="true_counts=\\(4.7,\\): counts of true children"):
        threshold_rule(5, 3, (4.7,), (1,))
    with pytest.raises(ValueError, match="false_counts"):
        threshold_rule(5, 3, (4,), (0.9,))
    with pytest.raises(ValueError, match="public='no'"):
        threshold_rule(5, 3, (4,), (1,), public="no")
    with pytest.raises(ValueError, match="kind='bogus'"):
        CandidateRule("bogus", 3)
    with pytest.raises(ValueError, match="family='bogus'"):
        stated_counts("bogus", 3, 2, 2)
    with pytest.raises(ValueError, match="depth=-1"):
        stated_counts("slack", 3, 2, -1)
    with pytest.raises(ValueError, match="m=True"):
        family_rule("slack", 3, True)
    assert stated_counts("slack", 3, 2, 2).tolist() == [4, 2, 1]


@pytest.mark.parametrize("truth", [0, 1])
def test_a_threshold_claims_children_sit_uniformly_given_their_count(truth):
    """Given w true children, each child is true with probability w / q whatever w is: the
    count and the positions come from separate uniforms. 40,000 claims of each truth; every
    position's count of true children within 5 binomial standard deviations of ``n_w w / q``.
    (Drawing a false claim's count from child 0's rank uniform left child 0 of a one-true-child
    claim false always, and passed every count-based test.)"""
    q, n = 4, 40_000
    rule = threshold_rule(q, 2, true_counts=(2, 3), false_counts=(0, 1))
    u = jax.random.uniform(jax.random.key(11), (n, q + 1))
    kids = np.asarray(rule.sample(u, jnp.full((n,), truth, jnp.int8)))
    w = kids.sum(axis=1)
    for count in (2, 3) if truth else (1,):
        rows = kids[w == count]
        share = count / q
        assert rows.shape[0] > n / 3
        sd = np.sqrt(rows.shape[0] * share * (1 - share))
        assert np.all(np.abs(rows.sum(axis=0) - rows.shape[0] * share) <= 5 * sd), rows.sum(axis=0)


def test_child_indexes_follow_the_breadth_first_layout(hidden):
    """``child(v, c, j)`` is child j of candidate c of node v: ``v B + 1 + c q + j``."""
    one = jax.tree.map(lambda x: x[0], hidden)
    assert one.n_cand == 2 and one.n_internal > 3
    for v, c, j in [(0, 0, 0), (0, 1, 2), (1, 1, 3), (3, 0, 1)]:
        assert int(one.child(v, c, j)) == int(_children_np(one, v, c)[j])


def test_aggregator_tables_match_their_definitions():
    """Every entry of each table against its definition on the python integer code."""
    for q in (2, 3, 4, 5):
        pop = [bin(z).count("1") for z in range(2**q)]
        for t in range(1, q + 1):
            assert threshold_table(q, t).tolist() == [int(w >= t) for w in pop]
        assert and_table(q).tolist() == [int(w == q) for w in pop]
        assert or_table(q).tolist() == [int(w >= 1) for w in pop]
        assert parity_table(q).tolist() == [w % 2 for w in pop]
        for i in range(q):
            assert dictator_table(q, i).tolist() == [(z >> i) & 1 for z in range(2**q)]
        if q % 2:
            assert majority_table(q).tolist() == [int(2 * w > q) for w in pop]


@pytest.mark.parametrize("truth, counts", [(1, (2, 3, 4)), (0, (0, 1))])
def test_a_threshold_rule_draws_each_of_its_counts_equally_often(truth, counts):
    """Count lists of unequal length: each count is drawn with probability 1 / len(counts)."""
    # 30,000 claims: each count's frequency within 5 binomial standard deviations
    rule = threshold_rule(4, 2, true_counts=(2, 3, 4), false_counts=(0, 1))
    n = 30_000
    u = jax.random.uniform(jax.random.key(4), (n, 5))
    w = np.asarray(rule.sample(u, jnp.full((n,), truth, jnp.int8))).sum(axis=1)
    p = 1 / len(counts)
    sd = np.sqrt(n * p * (1 - p))
    assert set(w.tolist()) == set(counts)
    for c in counts:
        assert abs((w == c).sum() - n * p) <= 5 * sd, (c, (w == c).sum())


def test_each_level_draws_its_own_uniforms():
    """A false node 1 (root flaw at position 0) has its own uniform flaw, not the root's draw."""
    # 4,000 trees: each position's count within 5 binomial standard deviations of n / 4
    trees = and_tree(jax.random.split(jax.random.key(9), 4000), depth=2, q=4, root_truth=0)
    truth = np.asarray(trees.truth)
    false1 = truth[:, 1] == 0
    pos = np.argmin(truth[false1][:, 5:9], axis=1)  # node 1's children: 1 * 4 + 1 + [0..3]
    n = pos.size
    assert n > 800 and np.all(truth[false1][:, 5:9].sum(axis=1) == 3)
    sd = np.sqrt(n * 0.25 * 0.75)
    assert np.all(np.abs(np.bincount(pos, minlength=4) - n / 4) <= 5 * sd), np.bincount(pos)


def test_the_builders_set_which_truths_are_public():
    """Hidden AND rules hide every subclaim, public ones show them; the root is always known."""
    k = jax.random.key(0)
    noisy = noisy_evidence_tree(k, depth=2, unstable_alternative=True)
    known = np.asarray(noisy.known)
    kids = [_children_np(noisy, v, c) for v in range(noisy.n_internal) for c in range(2)]
    assert known[0] and known[np.concatenate(kids[0::2])].all()
    assert not known[np.concatenate(kids[1::2])].any()
    assert np.asarray(and_tree(k, depth=2, q=3).known).all()
    hid = np.asarray(and_tree(k, depth=2, q=3, hidden=True).known)
    assert hid[0] and not hid[1:].any()
    rule = threshold_rule(3, 2, (2, 3), (0, 1), public=False)
    assert rule.public is False
    from dedebate.trees import build_tree

    built = np.asarray(build_tree(k, [rule], depth=2).known)
    assert built[0] and not built[1:].any()


@pytest.mark.parametrize("root", [0, 1])
def test_a_random_tree_has_the_root_truth_asked_for(root):
    """random_tree(root_truth=r): the root is r in each of 8 trees, and the trees decompose."""
    for i in range(8):
        tree = random_tree(jax.random.key(i), depth=2, q=3, n_cand=2, root_truth=root)
        assert int(tree.truth[0]) == root
        check_decomposable(tree)


def test_a_false_unanimous_tree_has_no_true_subclaim():
    """unanimous_tree(root_truth=0): every claim is false, with 0 true children (fbs 9/5)."""
    tree = unanimous_tree(jax.random.key(1), depth=2, root_truth=0)
    assert not np.asarray(tree.truth).any()
    assert np.all(child_codes(tree) == 0)
