"""Digit-audit claim trees, the noisy judge, fbs of both families and the gating rows' failures."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import experiments.ped_digits as exp
from dedebate.agents.ped_digits import (
    BagEstimator,
    DigitProver,
    context_features,
    expected_payoffs,
    payoffs,
    prover_beliefs,
    tabulate,
)
from dedebate.agents.ped_strategies import TabularEstimator
from dedebate.estimators import train
from dedebate.lab.claims import binomial_p_value
from dedebate.trees.digits import FAMILIES, digit_trees, judge, pool, split_pools
from dedebate.trees.library import and_table, threshold_table
from dedebate.trees.stability import fbs, fbs_dual, tree_rho
from dedebate.trees.tree import check_decomposable
from experiments.ped_digits.estimator import max_advantage, oi_setup, train_estimator
from experiments.ped_digits.learned import init_policy, learned_provers, play_values, selfplay
from tests.conftest import assert_shipped_sweeps_plot

IMAGES, LABELS = exp.load_data()
Q, DEPTH, M = 3, 2, 2


@pytest.fixture(scope="module")
def batches():
    pools = split_pools(LABELS, (0.5, 0.5), 0)
    out = {}
    for fam in ("exact", "slack"):
        tr = digit_trees(jax.random.key(1), pool(pools[0], LABELS), fam, Q, M, DEPTH, 16)
        ev = digit_trees(jax.random.key(2), pool(pools[1], LABELS), fam, Q, M, DEPTH, 16)
        out[fam] = (tr, ev)
    return pools, out


def test_train_and_eval_trees_share_no_image_and_leaves_match_labels(batches):
    pools, out = batches
    assert np.intersect1d(pools[0], pools[1]).size == 0
    for tr, ev in out.values():
        assert np.intersect1d(np.asarray(tr.leaves), np.asarray(ev.leaves)).size == 0
        for trees in (tr, ev):
            leaf = np.asarray(trees.tree.truth)[:, trees.tree.level_offset(DEPTH) :]
            shows = LABELS[np.asarray(trees.leaves)] == np.asarray(trees.digit)[:, None]
            assert np.array_equal(shows, leaf == 1)
            for i in range(4):
                check_decomposable(jax.tree_util.tree_map(lambda a, i=i: a[i], trees.tree))


def test_a_true_claim_holds_its_count_and_exact_counts_are_counts(batches):
    """Every true claim's block holds its stated count of d's; with exact counts a false claim's
    block does not (docs/ped-digits.md: with slack a false claim is a failed audit, not a count)."""
    from dedebate.trees.digits import stated_counts

    _, out = batches
    for fam, (tr, _) in out.items():
        shows = LABELS[np.asarray(tr.leaves)] == np.asarray(tr.digit)[:, None]  # [trees, q^D]
        truth = np.asarray(tr.tree.truth)
        for k, want in enumerate(stated_counts(fam, Q, M, DEPTH)):
            counts = shows.reshape(len(shows), Q**k, -1).sum(axis=2)  # per node of depth k
            true = truth[:, tr.tree.level_offset(k) : tr.tree.level_offset(k) + Q**k] == 1
            assert np.all(counts[true] >= want)
            if fam == "exact":
                assert np.all(counts[~true] < want) and (~true).any()


def test_each_feature_row_states_its_parts_count_and_depth(batches):
    """B reads, per claim, its parts' stated count as a fraction of a part's images: a true
    part holds at least that many d's, and with exact counts a false part fewer (from the labels,
    as above); the depth column is ``(k + 1) / D`` (stating the claim's own count, q times a
    part's, passed every test)."""
    _, out = batches
    for fam, (tr, _) in out.items():
        tree, n_t = tr.tree, len(tr.digit)
        feats = np.asarray(context_features(tr, IMAGES, fam, Q, M)).reshape(
            n_t, tree.n_internal, -1
        )
        shows = LABELS[np.asarray(tr.leaves)] == np.asarray(tr.digit)[:, None]
        truth = np.asarray(tree.truth)
        for k in range(DEPTH):
            size, rows = Q ** (DEPTH - k - 1), slice(tree.level_offset(k), tree.level_offset(k + 1))
            parts = slice(tree.level_offset(k + 1), tree.level_offset(k + 1) + Q ** (k + 1))
            held = shows.reshape(n_t, Q**k, Q, size).sum(axis=3)
            true = truth[:, parts].reshape(n_t, Q**k, Q) == 1
            stated = feats[:, rows, -1:] * size  # one count for the claim's q parts
            assert np.all(held[true] >= np.broadcast_to(stated, held.shape)[true])
            if fam == "exact":
                assert np.all(held[~true] < np.broadcast_to(stated, held.shape)[~true])
            np.testing.assert_array_equal(feats[:, rows, -2], np.float32((k + 1) / DEPTH))


def test_each_feature_row_holds_its_parts_images_masks_and_digit(batches):
    """Row (level k, node u), part j, slot i holds image ``leaves[t, (u q + j) size + i] / 16``
    (a part's images are the leaves under it, in order), zeros and mask 0 past the part's size,
    and the tree's digit one-hot: built again here with numpy loops (B once read another part's
    images, or the next digit's slot, and every other test passed)."""
    from dedebate.agents.ped_digits import N_DIGITS, PIXELS

    _, out = batches
    tr = out["slack"][0]
    tree, n_t, bag = tr.tree, len(tr.digit), Q ** (DEPTH - 1)
    feats = np.asarray(context_features(tr, IMAGES, "slack", Q, M)).reshape(
        n_t, tree.n_internal, -1
    )
    leaves, digit = np.asarray(tr.leaves), np.asarray(tr.digit)
    width = Q * bag * PIXELS
    for t in range(n_t):
        for k in range(DEPTH):
            size = Q ** (DEPTH - k - 1)
            for u in range(Q**k):
                row = feats[t, tree.level_offset(k) + u]
                imgs = np.zeros((Q, bag, PIXELS), np.float32)
                mask = np.zeros((Q, bag), np.float32)
                for j in range(Q):
                    first = (u * Q + j) * size
                    imgs[j, :size] = IMAGES[leaves[t, first : first + size]] / np.float32(16)
                    mask[j, :size] = 1
                np.testing.assert_array_equal(row[:width], imgs.ravel())
                np.testing.assert_array_equal(row[width : width + Q * bag], mask.ravel())
                np.testing.assert_array_equal(
                    row[width + Q * bag : width + Q * bag + N_DIGITS], np.eye(N_DIGITS)[digit[t]]
                )


def test_tabulated_root_estimate_is_what_the_roots_joint_implies(batches):
    """B's root estimate ``p_d = sum_z P_root(z) M_D(z)`` reads the root's joint (row 0 of each
    tree), not another node's: with joints that put all mass on the truth of each node's parts,
    it is the root's truth; with random joints, the sum done in numpy."""
    from dedebate.agents.ped_digits import tabulate

    _, out = batches
    for tr, _ in out.values():
        tree, n_t = tr.tree, len(tr.digit)
        truth = np.asarray(tree.truth)
        joint = np.zeros((n_t, tree.n_internal, 2**Q), np.float32)
        for v in range(tree.n_internal):
            kids = truth[:, v * Q + 1 : v * Q + 1 + Q]  # breadth-first: v's parts
            joint[np.arange(n_t), v, (kids * 2 ** np.arange(Q)).sum(axis=1)] = 1
        got = tabulate(joint.reshape(-1, 2**Q), n_t, tree)
        np.testing.assert_array_equal(np.asarray(got.p0), truth[:, 0].astype(np.float32))
        rand = np.random.default_rng(0).dirichlet(np.ones(2**Q), (n_t, tree.n_internal))
        rand = rand.astype(np.float32)
        got = np.asarray(tabulate(rand.reshape(-1, 2**Q), n_t, tree).p0)
        want = (rand[:, 0] * np.asarray(tree.tables)[:, 0]).sum(axis=1)
        np.testing.assert_allclose(got, want, rtol=0, atol=2**Q * 2.0**-23)


def test_the_audit_liar_recurses_on_the_false_part_b_trusts_most(batches):
    """AuditLiar's selection at every internal node of four trees, random marginals: the false
    part with the highest marginal (B's weakest spot), the first part where none is false; the
    numpy reference picks it from the tree's truths (a liar that picked B's strongest false part
    passed every other test)."""
    from dedebate.agents.ped_digits import AuditLiar

    _, out = batches
    rng = np.random.default_rng(1)
    tr = out["slack"][0]
    truth = np.asarray(tr.tree.truth)
    for i in range(4):
        tree = jax.tree_util.tree_map(lambda a, i=i: a[i], tr.tree)
        for v in range(tr.tree.n_internal):
            m = rng.random(Q).astype(np.float32)
            got = np.asarray(AuditLiar().select(tree, v, 0, m, 0.5, 0.5, 0))
            false = truth[i, v * Q + 1 : v * Q + 1 + Q] == 0
            want = int(np.argmax(np.where(false, m, -1.0))) if false.any() else 0
            np.testing.assert_array_equal(got, np.eye(Q, dtype=np.float32)[want])


def test_a_learned_provers_logits_are_capped_at_8(batches):
    """``8 tanh(x / 8)`` keeps a learned prover's probabilities in ``(3e-4, 1 - 3e-4)``: answer
    weights of 1e4 give ``sigmoid(8)``, not 1; the selection's gaps are capped the same way."""
    from dedebate.agents.ped_digits import DigitProver

    tree = jax.tree_util.tree_map(lambda a: a[0], batches[1]["slack"][0].tree)
    policy = {
        "answer": np.asarray([0.0, 1e4], np.float32),
        "direction": np.asarray([0.0, -1e4], np.float32),
        "select": np.asarray([1e4, 0, 0, 0, 0], np.float32),
    }
    a = DigitProver(belief=np.ones(tree.truth.shape[-1], np.float32), policy=policy)
    sig8 = 1 / (1 + np.exp(-8.0))
    np.testing.assert_allclose(float(a.answer(tree)), sig8, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(a.direction(tree, 0, 0.0, 0)), [sig8, 0, 1 - sig8], 1e-5)
    m = np.asarray([0.2, 0.9, 0.5], np.float32)  # A believes every part: logits 1e4 * [1, 1, 1]
    np.testing.assert_allclose(np.asarray(a.select(tree, 0, 0, m, 0.5, 0.5, 0)), [1 / 3] * 3, 1e-6)
    part0 = np.eye(tree.truth.shape[-1], dtype=np.float32)[1]  # node 1: the root's part 0
    b = DigitProver(belief=part0, policy=policy)  # the other parts' logits 1e4 below, capped at 8
    sel = np.asarray(b.select(tree, 0, 0, m, 0.5, 0.5, 0))
    e8 = np.exp(-8.0)
    np.testing.assert_allclose(sel, np.asarray([1, e8, e8]) / (1 + 2 * e8), rtol=1e-5)


@pytest.mark.parametrize("eta", [0.0, 0.05, 0.1])
def test_judge_noise_rate_matches_eta(eta):
    truth = np.tile([0, 1], 50_000)
    flips = int((np.asarray(judge(jax.random.key(3), truth, eta)) != truth).sum())
    if eta == 0:
        assert flips == 0
    else:
        assert binomial_p_value(flips, truth.size, eta, "==") > 1e-3


def test_exact_family_fbs_is_q_by_lp_dual_and_closed_form(batches):
    _, out = batches
    all_true = (1 << Q) - 1
    assert fbs(and_table(Q), all_true) == pytest.approx(Q)
    assert fbs_dual(and_table(Q), all_true) == pytest.approx(Q)
    # slack: Thr_2 of 3 at w = 2 true parts is w / (w - m + 1) = 2
    assert fbs(threshold_table(Q, M), 0b011) == pytest.approx(2.0)
    rho = {
        f: max(tree_rho(jax.tree_util.tree_map(lambda a, i=i: a[i], ev.tree)) for i in range(16))
        for f, (_, ev) in out.items()
    }
    assert rho == {
        "exact": pytest.approx(exp.expected_fbs("exact", Q, M)),
        "slack": pytest.approx(exp.expected_fbs("slack", Q, M)),
    }
    assert exp.expected_fbs("exact", Q, M) == Q and exp.expected_fbs("slack", Q, M) == 2.0


def test_untrained_estimator_is_uniform_and_its_root_estimate_is_pr_md(batches):
    _, out = batches
    ev = out["slack"][1]
    feats = context_features(ev, IMAGES, "slack", Q, M)
    net = BagEstimator(Q, DEPTH, 8)
    h = net.apply(net.init(jax.random.key(0), feats[:1]), feats)
    np.testing.assert_allclose(h, 1.0 / 2**Q, atol=1e-7)  # zero output layer
    # p_d = Pr[Thr_2 of 3] under the uniform joint = 4/8
    np.testing.assert_allclose(tabulate(h, 16, ev.tree).p0, 0.5, atol=1e-6)


def test_the_estimator_compares_each_parts_expected_count_with_its_stated_count(batches):
    """B's head reads, per part, its expected count of d's minus its stated count (the stated
    fraction times the part's images) and the stated fraction itself: moving the stated
    fraction by 1/4 moves the head's first layer by exactly that (a net that took the depth
    column for the count passed every test). Tolerance: the layer's float32 sums over its n
    inputs in each pass and the head's subtractions, ``2 (n + 3) 2^-24 (|head| @ |W| + |b|)``
    with ``|head|`` bounded by each input's range."""
    _, out = batches
    ev = out["exact"][1]
    feats = context_features(ev, IMAGES, "exact", Q, M)
    net = BagEstimator(Q, DEPTH, 8)
    params = net.init(jax.random.key(0), feats[:1])

    def mix_out(f):  # the output of the head's first layer
        _, state = net.apply(params, f, capture_intermediates=True)
        return np.asarray(state["intermediates"]["mix"]["__call__"][0], np.float64)

    w = np.asarray(params["params"]["mix"]["kernel"], np.float64)
    b = np.asarray(params["params"]["mix"]["bias"], np.float64)
    size = Q ** (DEPTH - 1 - _levels(ev.tree)).astype(np.float64)  # a part's images, per row
    step, most = np.zeros((len(size), w.shape[0])), np.ones((len(size), w.shape[0]))
    step[:, 0 : 3 * Q : 3] = -0.25 * size[:, None]  # each part's expected - stated count
    step[:, -1] = 0.25  # the stated fraction (at most 1 + 1/4)
    most[:, 0 : 3 * Q : 3], most[:, -1] = 1.25 * size[:, None], 1.25
    got = mix_out(feats.at[:, -1].add(0.25)) - mix_out(feats)
    bound = 2 * (w.shape[0] + 3) * 2.0**-24 * (most @ np.abs(w) + np.abs(b))
    assert np.all(np.abs(got - step @ w) <= bound), np.max(np.abs(got - step @ w) / bound)


def test_the_estimators_head_reads_each_parts_summary_and_the_depth(batches):
    """B's head reads, per part, expected - stated count, the least and the mean of
    ``Pr[image shows d]`` over the part's images (padding masked out), then the depth and the
    stated fraction: rebuilt here with numpy loops from the captured ``shows`` (an unmasked
    least, a mean over the padded bag, or a dropped depth column passed every other test).
    Tolerances: ``shows`` is a float32 softmax (a few ulps from exp, a 10-term sum, a division;
    2^-16 is 256 ulps of 1, and a row read for any other digit is asserted farther away); the
    head's first layer is bounded as in the count test, with the bag's sums added."""
    _, out = batches
    ev = out["slack"][1]
    feats = context_features(ev, IMAGES, "slack", Q, M)
    net = BagEstimator(Q, DEPTH, 8)
    params = net.init(jax.random.key(3), feats[:1])
    apply = jax.jit(lambda p, f: net.apply(p, f, capture_intermediates=lambda mdl, name: True))
    _, state = apply(params, feats)
    inter = state["intermediates"]
    shows = np.asarray(inter["shows"][0], np.float64)  # [X, q, bag]
    logits = np.asarray(inter["classify"]["__call__"][0], np.float64)  # [X, q, bag, 10]
    mixed = np.asarray(inter["mix"]["__call__"][0], np.float64)
    prob = np.exp(logits - logits.max(-1, keepdims=True))
    prob /= prob.sum(-1, keepdims=True)
    digit = np.repeat(np.asarray(ev.digit), ev.tree.n_internal)
    mine = np.take_along_axis(prob, digit[:, None, None, None], -1)[..., 0]
    others = np.abs(prob - mine[..., None])
    level, bag = _levels(ev.tree), Q ** (DEPTH - 1)
    image = np.arange(bag) < Q ** (DEPTH - 1 - level)[:, None, None]  # not padding (uniform)
    others = np.max(np.where(image[..., None], others, 0.0), axis=(1, 2))  # [X, 10]
    others[np.arange(len(digit)), digit] = np.inf
    assert np.all(np.abs(shows - mine) <= 2.0**-16)
    assert np.min(others) > 2.0**-16  # a row read for any other digit would be seen

    w, b = (params["params"]["mix"][n] for n in ("kernel", "bias"))
    w, b = np.asarray(w, np.float64), np.asarray(b, np.float64)
    stated = np.asarray(feats[:, -1], np.float64)
    head = np.zeros((len(level), 3 * Q + 2))
    most = np.ones_like(head)
    for x, k in enumerate(level):
        size = Q ** (DEPTH - 1 - k)
        for j in range(Q):
            part = shows[x, j, :size]  # the slots past the part's size are padding
            head[x, 3 * j : 3 * j + 3] = part.sum() - stated[x] * size, part.min(), part.mean()
            most[x, 3 * j] = size
        head[x, -2:] = (k + 1) / DEPTH, stated[x]
    bound = 2 * (w.shape[0] + bag + 3) * 2.0**-24 * (most @ np.abs(w) + np.abs(b))
    assert np.all(np.abs(mixed - (head @ w + b)) <= bound), np.max(np.abs(mixed - head @ w - b))


def _levels(tree):
    """Each feature row's level k (rows tree-major, then breadth-first)."""
    one = np.concatenate([np.full(Q**k, k) for k in range(DEPTH)])
    return np.tile(one, np.asarray(tree.truth).shape[0])


def test_completeness_row_passes_and_fails_with_a_noisier_judge(batches):
    _, out = batches
    ev = out["slack"][1]
    est = tabulate(oi_setup(ev)[0].g, 16, ev.tree)  # B calibrated on the labels: a tight margin
    err = np.abs(np.asarray(est.p0) - np.asarray(ev.tree.truth[:, 0]))
    for eta in (0.0, 0.1):
        u, _ = payoffs("honest", est, ev, 2.0, eta)
        assert exp.completeness_claim("slack", 2.0, Q, DEPTH, eta, np.asarray(u), err).passed
    # the judge flips more often (0.3) than the row's eta (0.05) claims: the row fails
    u, _ = payoffs("honest", est, ev, 2.0, 0.3)
    assert not exp.completeness_claim("slack", 2.0, Q, DEPTH, 0.05, np.asarray(u), err).passed
    # above rho^-(d+1) but below the telescoped sum of a B that erred by 1/2 at the root: fails
    tight = 2.0 ** -(DEPTH + 1) + 0.5 * 2.0**-DEPTH * 0.5
    row = exp.completeness_claim(
        "slack", 2.0, Q, DEPTH, 0.0, np.full(4, tight - 0.01), np.full(4, 0.5)
    )
    assert row.value > 2.0 ** -(DEPTH + 1) and not row.passed
    assert exp.completeness_claim(
        "slack", 2.0, Q, DEPTH, 0.0, np.full(4, tight), np.full(4, 0.5)
    ).passed
    # trees whose fbs is above the rho the protocol plays: no margin is guaranteed (rho row fails)
    assert not exp.fbs_claim("exact", Q, M, Q + 0.5).passed
    assert not exp.fbs_claim("exact", Q, M, float("nan")).passed
    below = exp.fbs_claim("exact", Q, M, Q - 1.0)  # a sample that misses the maximum: premise holds
    assert (
        below.passed
        and below.note.startswith("below")
        and exp.fbs_claim("exact", Q, M, Q).note == "equal"
    )


def test_soundness_row_fails_for_a_liar_above_the_bound():
    ok = exp.soundness_claim(
        "slack",
        np.full(32, -0.3) + np.linspace(0, 0.01, 32),
        np.zeros(32),
        2.0,
        DEPTH,
        0.0,
        0.01,
        True,
    )
    bad = exp.soundness_claim(
        "slack",
        np.full(32, 0.5) + np.linspace(0, 0.01, 32),
        np.zeros(32),
        2.0,
        DEPTH,
        0.0,
        0.01,
        True,
    )
    assert ok.passed and not ok.finding
    assert not bad.passed and not bad.finding
    # without the premise the row is a finding
    assert exp.soundness_claim(
        "slack", np.zeros(4) + [0, 1, 2, 3], np.zeros(4), 2.0, DEPTH, 0.0, 0.01, False
    ).finding
    # the bound (2d + 2) delta + eta at P[A correct] = 0: 0.6 at d = 2, delta = 0.1, eta = 0
    for u, ok in ((0.55, True), (0.65, False)):
        liar = np.full(32, u) + np.linspace(0, 1e-4, 32)
        assert exp.soundness_claim("slack", liar, np.zeros(32), 2.0, 2, 0.0, 0.1, True).passed is ok


def test_slack_rho_is_the_largest_fbs_over_true_and_false_claims():
    """Thr_1 of 3 and Thr_2 of 4 take their rho from a false claim (each of its 3 false parts
    flips it); Thr_2 of 3 is 2 at both of its points next to the threshold."""
    assert [exp.expected_fbs("slack", q, m) for q, m in ((3, 1), (4, 2), (3, 2))] == [3, 3, 2]


def _measured(cfg, n=32):
    """A made-up ``(measured, host)`` whose gating rows pass: calibrated B (small advantages),
    honest A at its margin, liars that lose on every false root."""
    rng = np.random.default_rng(0)
    e, d = len(cfg.etas), cfg.depth

    def small(*shape):
        return 0.001 * rng.standard_normal(shape)

    measured, host = {"extras": {}}, {"shared_images": np.zeros(0, np.int64)}
    for fam in FAMILIES:
        rho = exp.expected_fbs(fam, cfg.q, cfg.m)
        liar = {"u": np.full((e, n), -0.5) + small(e, n), "correct": np.zeros((e, n))}
        measured["extras"][fam] = {
            "adv": small(8, n),
            "u_honest": np.full((e, n), rho ** -(d + 1)),
            "root_err": np.zeros(n),  # an error-free B at the root
            "liars": {name: {**liar, "adv": small(n, d + 1, 2)} for name in exp.LIARS},
            "lp": {k: np.ones(cfg.lp_seeds) for k in ("agree", "correct", "u")},
            "u_stable_rho": np.full((e, n), 1.0),
        }
        measured |= {f"{fam}/train_max_adv": 0.01, f"{fam}/lp_honest": float(cfg.lp_seeds)}
        measured |= {f"{fam}/{name}_train_round_tests": 0.001 for name in exp.LIARS}
        host[fam] = (rho, np.ones(n, bool))
    return measured, host


def test_a_nan_in_a_liars_round_tests_fails_its_soundness_rows_and_the_run():
    """Not finite is no premise that fails (which would make the rows findings): they gate and
    fail. The zoo holds the simplest liar (lies at the root, then plays as honest A does)."""
    cfg = exp.Config(**exp.SIZES["quick"])
    assert set(exp.LIARS) == {"liar", "lie_then_honest"}
    measured, host = _measured(cfg)
    clean = exp.report(cfg, measured, host)
    sound = [c for c in clean.claims if c.claim.startswith("soundness")]
    assert clean.passed and len(sound) == 2 * len(cfg.etas) * len(exp.LIARS)
    assert not any(c.finding for c in sound)
    measured["extras"]["slack"]["liars"]["lie_then_honest"]["adv"][3, 1, 0] = np.nan
    broken = exp.report(cfg, measured, host)
    assert not broken.passed
    bad = [c for c in broken.claims if c.claim.startswith("soundness") and not c.passed]
    assert {c.claim for c in bad} == {
        c.claim for c in sound if "simplest lying A" in c.claim and "slack" in c.claim
    }
    assert not any(c.finding for c in bad) and "not finite" in bad[0].note


def test_soundness_rows_average_each_liar_over_the_false_roots_only():
    """A liar that wins 0.9 on every false root (above (2d + 2) delta + eta) and loses on the
    true ones fails every soundness row of its family."""
    cfg = exp.Config(**exp.SIZES["quick"])
    measured, host = _measured(cfg)
    false = np.arange(32) % 2 == 0
    host["slack"] = (host["slack"][0], false)
    for liar in exp.LIARS:
        measured["extras"]["slack"]["liars"][liar]["u"] = np.where(false, 0.9, -1.0) * np.ones(
            (len(cfg.etas), 32)
        )
    res = exp.report(cfg, measured, host)
    bad = [c for c in res.claims if c.claim.startswith("soundness") and not c.passed]
    assert len(bad) == len(cfg.etas) * len(exp.LIARS) and all("slack" in c.claim for c in bad)


def test_unstable_rows_allow_honest_a_rounding_below_its_margin():
    """Honest A within float32 rounding (tol / 2) below rho^-(d+1) - eta is not below the
    margin: no rejection is counted, so the finding is not met."""
    cfg = exp.Config(**exp.SIZES["quick"])
    measured, host = _measured(cfg)
    thr = exp.expected_fbs("slack", cfg.q, cfg.m) ** -(cfg.depth + 1)
    etas, tol = np.asarray(cfg.etas)[:, None], exp.exact_tol(cfg.q, cfg.depth)
    measured["extras"]["exact"]["u_stable_rho"] = np.broadcast_to(
        thr - etas - tol / 2, (len(etas), 32)
    )
    res = exp.report(cfg, measured, host)
    assert all(res.metrics["unstable"][str(eta)]["exact"] == 0 for eta in cfg.etas)
    rows = [c for c in res.claims if c.claim.startswith("only unstable")]
    assert rows and not any(c.passed for c in rows)


def test_figure_draws_each_liars_round_tests_and_the_payoffs_of_the_report():
    cfg = exp.Config(**exp.SIZES["quick"])
    measured, host = _measured(cfg)
    measured["slack/lie_then_honest_train_round_tests"] = 0.0625
    res = exp.report(cfg, measured, host)
    left, right = res.figures["soundness_premise"].axes
    points = {ln.get_label(): list(ln.get_ydata()) for ln in left.lines}
    held_out = {c.get_label(): c for c in left.containers}  # with the rows' intervals
    for liar, what in exp.LIARS.items():
        held = [res.metrics[f][f"{liar}_round_tests"] for f in FAMILIES]
        train = [res.metrics[f][f"{liar}_round_tests_train"] for f in FAMILIES]
        drawn = held_out[f"{what}, held-out (95%, all tests)"]
        assert list(drawn.lines[0].get_ydata()) == held
        ends = [tuple(seg[:, 1]) for seg in drawn.lines[2][0].get_segments()]
        spans = [res.metrics[f][f"{liar}_round_tests_interval"] for f in FAMILIES]
        assert ends == [tuple(s) for s in spans]
        assert points[f"{what}, B's training trees"] == train
    assert 0.0625 in points[f"{exp.LIARS['lie_then_honest']}, B's training trees"]
    assert left.get_yscale() == "linear" and left.get_ylim()[0] == 0.0  # a zero is drawn
    lines = {ln.get_label(): list(ln.get_ydata()) for ln in right.lines}
    for f in FAMILIES:
        assert lines[f"{f}: honest A, min U_A"] == list(res.metrics[f]["honest_min"].values())
    # each liar's mean payoff with its soundness row's interval as the error bar
    bars_of = {c.get_label(): c for c in right.containers}
    rows = {(c.value, c.lo, c.hi) for c in res.claims}
    for f in FAMILIES:
        for liar, what in exp.LIARS.items():
            drawn = bars_of[f"{f}: {what}, mean U_A (95%)"]
            means = res.metrics[f][f"{liar}_mean"]
            spans = res.metrics[f][f"{liar}_mean_interval"]
            assert list(drawn.lines[0].get_ydata()) == list(means.values())
            ends = [tuple(seg[:, 1]) for seg in drawn.lines[2][0].get_segments()]
            assert ends == [tuple(spans[e]) for e in means]
            assert all((means[e], *spans[e]) in rows for e in means)


def test_advantage_premise_holds_for_every_test_at_once():
    """The soundness premise is an upper end on ``max_f |Adv_f|`` valid for all F tests together
    (Bonferroni), not the 95% t interval of the test picked as largest after looking."""
    from dedebate.lab.claim_stats import mean_interval

    z = np.linspace(-1.0, 1.0, 256)
    z = (z - z.mean()) / z.std(ddof=1)  # mean 0, sd 1 exactly
    adv = np.vstack([0.08 + 0.1219 * z, 0.001 * z + np.zeros((25, 1))])  # F = 26 tests
    picked = mean_interval(adv[0])  # the largest test's own 95% interval ends below delta ...
    assert picked[2] < 0.1
    row = exp.advantage_claim("a", "s", adv, 0.1, "tests")  # ... its simultaneous one does not
    assert row.finding and not row.passed and row.hi > 0.1 > row.value
    assert row.value == pytest.approx(0.08) and 0 < row.lo < 0.08 < row.hi
    small = exp.advantage_claim("a", "s", adv * 0.5, 0.1, "tests")
    assert small.passed and small.hi < 0.1 and small.value == pytest.approx(0.04)
    # a test of mean 0 contributes 0 to the lower end; a NaN sample fails the premise
    assert exp.advantage_claim("a", "s", adv[1:], 0.1, "tests").lo == 0.0
    neg = exp.advantage_claim("a", "s", -adv, 0.1, "tests")  # |Adv|: a negative one as wide
    assert (neg.value, neg.lo, neg.hi, neg.passed) == (row.value, row.lo, row.hi, False)
    adv[3, 7] = np.nan
    assert not exp.advantage_claim("a", "s", adv, 0.1, "tests").passed


def test_the_liars_round_tests_add_up_to_its_payoff(batches):
    """The soundness premise's terms (each round's reward and calibration test on the liar's
    path, spec 6.3) and its exact payoff are two computations: with decomposable trees and a
    noiseless judge ``E[U_A] = r^(d+1) P[A correct] - sum Adv(reward) + sum Adv(calibration)``."""
    from dedebate.agents.ped_digits import exact_payoffs

    _, out = batches
    for fam, (_, ev) in out.items():
        rho = exp.expected_fbs(fam, Q, M)
        n_x = np.asarray(oi_setup(ev)[0].g).shape[0]
        h = jax.random.dirichlet(jax.random.key(5), np.ones(2**Q), (n_x,))  # some B
        est = tabulate(h, 16, ev.tree)
        u, correct = exact_payoffs("liar", est, ev.tree, rho, 0.0)
        terms = exp.round_tests("liar", rho, est, ev.tree)
        assert terms.shape == (16, DEPTH + 1, 2) and float(np.abs(terms).max()) > 1e-3
        chained = rho ** -(DEPTH + 1) * correct - terms[..., 0].sum(1) + terms[..., 1].sum(1)
        np.testing.assert_allclose(u, chained, atol=2 * exp.exact_tol(Q, DEPTH))  # two payoffs


def _payoff_in_float64(out, est, tree, rho, eta):
    """One exact-mode debate's ``U_A`` (with the judge's noise) recomputed in float64 along the
    path ``out`` took: B's float32 logits and A's directions are the players' own numbers."""
    bits = np.array([[(z >> i) & 1 for i in range(Q)] for z in range(2**Q)], np.float64)
    r, depth = 1.0 / rho, DEPTH
    s = np.asarray(out.directions, np.float64)
    p_d, pa = float(est.p0), float(out.answer)
    u = r ** (depth + 1) * (pa * p_d + (1 - pa) * (1 - p_d))
    phat = p_d
    for t in range(depth):
        node, c, j = (int(np.asarray(x)[t]) for x in (out.nodes, out.cands, out.sels))
        logits = np.asarray(est.logits[node, c], np.float64)
        joint = np.exp(logits - logits.max())
        joint /= joint.sum()
        md = np.asarray(tree.md(node, c), np.float64)
        u += r ** (depth - t) * s[t] * (joint @ md - phat)
        phat = (joint @ bits)[j]
    truth = float(tree.truth[int(np.asarray(out.nodes)[-1])])
    judge = (1 - eta) * truth + eta * (1 - truth)
    return u + s[-1] * (truth - phat) + s[-1] * (judge - truth)


@pytest.mark.parametrize("prover", ["honest", "liar"])
def test_exact_payoffs_are_within_exact_tol_of_float64(batches, prover):
    """``exact_tol`` bounds the float32 payoffs' distance from the same debates in float64."""
    from dedebate.agents.ped_digits import PROVERS, exact_payoffs
    from dedebate.protocols.prover_estimator import PEDParams, PEDStatic, play

    _, out = batches
    worst, tol, rho, eta = 0.0, exp.exact_tol(Q, DEPTH), 1.7, 0.1
    params = PEDParams(rho=np.float32(rho), rounds=np.int32(-1))
    a, key = PROVERS[prover](), jax.random.key(0)
    both = jax.vmap(lambda e, t: play(PEDStatic(), params, a, e, t, key))
    for _, ev in out.values():
        n_x = np.asarray(oi_setup(ev)[0].g).shape[0]
        h = jax.random.dirichlet(jax.random.key(7), np.full(2**Q, 0.3), (n_x,))  # some B
        est = tabulate(h, 16, ev.tree)
        u, _ = exact_payoffs(prover, est, ev.tree, rho, eta)
        played = both(est, ev.tree)
        for i in range(16):
            one = jax.tree_util.tree_map(lambda x, i=i: x[i], (played, est, ev.tree))
            worst = max(worst, abs(float(u[i]) - _payoff_in_float64(*one, rho, eta)))
    assert worst <= tol, (worst, tol)


def _pattern_estimator(ev, code):
    """B whose joint is the point mass on one truth pattern at every context."""
    n_x, n_z = np.asarray(oi_setup(ev)[0].g).shape
    return tabulate(np.eye(n_z, dtype=np.float32)[np.full(n_x, code)], 16, ev.tree)


def test_liar_payoffs_against_broken_estimators_and_a_judge_noisier_than_the_row(batches):
    _, out = batches
    ev = out["slack"][1]
    false_roots = np.asarray(ev.tree.truth[:, 0]) == 0
    # B says every part holds: the liar's "too low" bets lose; U_A = -(1 - rho^-(d+1)) = -0.875
    u, ac = payoffs("liar", _pattern_estimator(ev, (1 << Q) - 1), ev, 2.0, 0.0)
    np.testing.assert_allclose(np.asarray(u)[false_roots], -0.875, atol=exp.exact_tol(Q, DEPTH))
    # B says every part fails: the liar breaks even, plus what the judge's flips give: U_A = eta
    est = _pattern_estimator(ev, 0)
    for eta in (0.0, 0.1, 0.5):
        u, ac = payoffs("liar", est, ev, 2.0, eta)
        np.testing.assert_allclose(np.asarray(u)[false_roots], eta, atol=exp.exact_tol(Q, DEPTH))
    u, ac = np.asarray(u)[false_roots], np.asarray(ac)[false_roots]
    assert not ac.any()
    # a judge flipping half the time against a row that claims eta = 0.1: the row fails
    row = exp.soundness_claim("slack", u, ac, 2.0, DEPTH, 0.1, 1e-3, True)
    assert not row.passed and not row.finding
    assert exp.soundness_claim("slack", u, ac, 2.0, DEPTH, 0.5, 1e-3, True).passed


def test_trainer_runs_the_bag_network_and_logs_its_advantage(batches):
    _, out = batches
    tr = out["exact"][0]
    feats = context_features(tr, IMAGES, "exact", Q, M)
    static = train.NetTrainStatic(rounds=2, hidden=(8,))
    # delta = 2 > every advantage: the rounds take no step, so the log sees the warm start's B
    params, log = train_estimator(static, 2.0, 0.3, jax.random.key(0), tr, IMAGES, feats, 20)
    h = BagEstimator(Q, DEPTH, 8).apply(params, feats)
    assert np.asarray(log.chosen).tolist() == [-1, -1]
    np.testing.assert_allclose(np.asarray(log.max_adv), max_advantage(h, tr), rtol=1e-5)
    assert max_advantage(h, tr) != pytest.approx(max_advantage(np.full_like(h, 1 / 2**Q), tr))


def test_learned_prover_with_honest_weights_pays_what_the_honest_prover_pays(batches):
    _, out = batches
    ev = out["slack"][1]
    est = tabulate(oi_setup(ev)[0].g, 16, ev.tree)  # calibrated B: honest A earns rho^-(d+1)
    truth = np.asarray(ev.tree.truth, np.float32)
    # beliefs = the labels' truths, saturated honest weights: the honest prover up to the cap
    policy = {
        "answer": np.asarray([0.0, 1e4], np.float32),
        "direction": np.asarray([0.0, 1e4], np.float32),
        "select": np.asarray([0.0, 0.0, 1e4, 0.0, 0.0], np.float32),
    }
    # a calibrated B ties A's beliefs (the honest prover's tie-breaking is a convention), so
    # with noise compare against a random B (no ties)
    k1, k2 = jax.random.split(jax.random.key(7))
    noisy = TabularEstimator(
        p0=jax.random.uniform(k1, (16,)), logits=2.0 * jax.random.normal(k2, np.shape(est.logits))
    )
    for b, eta in ((est, 0.0), (noisy, 0.0), (noisy, 0.1)):
        u, acc = expected_payoffs(DigitProver(truth, policy), b, ev.tree, 2.0, eta)
        u_h, _ = payoffs("honest", b, ev, 2.0, eta)
        np.testing.assert_allclose(u, u_h, atol=2e-3)
        np.testing.assert_allclose(acc, 1.0, atol=1e-3)
    # the same beliefs with the answer weight flipped: A answers against its reading, and the
    # liar's share of correct answers is 0
    flipped = {**policy, "answer": np.asarray([0.0, -60.0], np.float32)}
    _, acc = expected_payoffs(DigitProver(truth, flipped), est, ev.tree, 2.0, 0.0)
    np.testing.assert_allclose(acc, 0.0, atol=1e-3)
    # a learned prover's beliefs: the root's is Pr[M_D] under its joint, a part's its marginal
    belief = prover_beliefs(oi_setup(ev)[0].g, ev.tree)
    np.testing.assert_allclose(belief, truth, atol=1e-6)


def test_selfplay_moves_both_players_and_reports_its_monitors(batches):
    _, out = batches
    tr = out["slack"][0]
    feats = context_features(tr, IMAGES, "slack", Q, M)
    net = BagEstimator(Q, DEPTH, 8)
    b0 = net.init(jax.random.key(0), feats[:1])
    belief = prover_beliefs(net.apply(b0, feats), tr.tree)
    pol0 = init_policy(jax.random.key(1), 1.0)
    pol, b, mon = selfplay(net, b0, pol0, feats, tr, 2.0, 3, 2, 0.1, 0.01)
    u0, acc0 = play_values(net, belief, pol0, b0, feats, tr, 2.0)
    # the first A update sees B after n_b = 2 steps; the monitor is the payoff A stepped on
    assert np.asarray(mon["u"]).shape == (3,)
    assert float(mon["correct"][0]) == pytest.approx(float(acc0.mean()), abs=1e-6)  # B moves
    assert float(mon["u"][0]) != pytest.approx(float(u0.mean()), abs=1e-6)  # not A's answer
    assert not np.allclose(pol["answer"], pol0["answer"])


def test_lp_batch_runs_the_seeds_one_vmap_runs_a_batch_at_a_time():
    """``lp_batch=2`` of 4 seeds (``lax.map`` over vmapped pairs, which bounds the memory: see
    tests/lab/test_lab_memory.py) runs each seed's key in the seeds' order, as one vmap does (a
    run's floats may round a few ulps apart across the two); a batch that does not divide the
    seeds is refused."""
    sizes = dict(q=Q, m=M, depth=DEPTH, lp_seeds=4)

    def run(c):
        return jax.jit(lambda key: learned_provers(c, lambda k: jax.random.bits(k, (3,)), key))(
            jax.random.key(3)
        )

    whole = run(exp.Config(**sizes))
    assert whole.shape == (4, 3) and len(np.unique(np.asarray(whole)[:, 0])) == 4
    for batch in (1, 2, 4, 8):
        np.testing.assert_array_equal(run(exp.Config(**sizes, lp_batch=batch)), whole)
    with pytest.raises(ValueError, match="lp_batch=3: must divide lp_seeds=4"):
        exp.Config(**sizes, lp_batch=3)


@pytest.mark.parametrize(
    "agree,honest,met",
    [
        ([0.95, 0.2, 0.91, 0.5], 2, True),
        ([0.1, 0.89], 0, False),
        ([0.95, 0.91, float("nan")], 2, False),
    ],
)
def test_learned_row_counts_seeds_above_the_threshold(agree, honest, met):
    """A NaN seed is not honest, and the finding is not met whatever the others show."""
    row = exp.learned_claim("slack", agree, 0.9)
    assert row.finding and row.k == honest and row.n == len(agree)
    assert row.passed == met and row.lo <= row.value <= row.hi


def test_unstable_row_compares_the_exact_familys_rejections_with_slack():
    slack, margin = np.ones(100), 0.5  # honest A's payoffs per tree: none below the margin
    many = exp.unstable_claim(0.0, np.where(np.arange(100) < 30, 0.0, 1.0), slack, margin, 2.0)
    assert many.finding and many.passed and many.value == pytest.approx(0.3)
    few = exp.unstable_claim(0.0, np.where(np.arange(100) < 2, 0.0, 1.0), slack, margin, 2.0)
    assert few.finding and not few.passed  # 2/100 is within the slack rate's interval [0, 0.036]
    five = exp.unstable_claim(0.0, np.where(np.arange(100) < 5, 0.0, 1.0), slack, margin, 2.0)
    assert five.value > 0.036 > five.lo and not five.passed  # its own lower end decides
    nan_slack = np.where(np.arange(100) < 10, np.nan, 1.0)  # a NaN would count as not below
    assert not exp.unstable_claim(0.0, np.zeros(100), nan_slack, margin, 2.0).passed


TINY = {
    "depth": 1,
    "train_trees": 8,
    "eval_trees": 8,
    "hidden": 4,
    "fit_steps": 2,
    "rounds": 1,
    "lp_seeds": 2,
    "lp_trees": 4,
    "lp_steps": 1,
    "lp_n_b": 1,
}


@pytest.mark.slow  # two compiles of the whole experiment at a tiny size
def test_sweep_compiles_once_per_static_group_and_a_row_is_the_point_alone(tmp_path, monkeypatch):
    from dedebate.lab import fast_compile
    from dedebate.lab.evaluate import run_module
    from dedebate.lab.sweep import plan, point_key, point_row
    from tests.fakes import FakeContext, sweep_one_row_per_call

    # compiled as a quick run compiles (LLVM level 0: the same programs, compiled faster)
    monkeypatch.setattr(exp, "COMPILE_OPTIONS", fast_compile.FLAGS, raising=False)
    # one static value (the lab's tests cover a compile per value): the group's rows compile once
    cfg, rec = sweep_one_row_per_call(
        exp, tmp_path, params=TINY, seeds=1, axes={"m": [2], "etas": [[0.0], [0.1]]}
    )
    res = rec.results
    assert res["dynamic_axes"] == ["etas"] and res["static_axes"] == ["m"]
    assert res["groups"] == 1 == res["compilations"] and res["rows"] == 2
    pt = plan(exp, cfg).points[1]  # m = 2, eta = 0.1
    alone, extras = point_row(exp, pt.cfg, point_key(exp.NAME, 0, pt.cfg), 0, extras=True)
    for f in FAMILIES:  # B's root error is a distance, |p0 - truth| per held-out tree
        err = extras[f]["root_err"]
        assert err.shape == (pt.cfg.eval_trees,) and ((err >= 0) & (err <= 1)).all(), err
    row = next(r for r in rec.rows if r["point"] == 1)
    assert_shipped_sweeps_plot("ped_digits", row)
    assert {k: row[k] for k in alone} == alone
    ctx = FakeContext(tmp_path / "run", name=exp.NAME)
    ctx.key = point_key(exp.NAME, 0, pt.cfg)
    result = run_module(exp, pt.cfg, ctx)  # the report of that row, its extras and host LPs
    assert (
        result.metrics["point"] == alone and len(result.claims) == 2 * (4 + 2 * len(exp.LIARS)) + 1
    )
    lp = result.tables["learned_prover"]
    assert [(r["family"], r["seed"]) for r in lp] == [(f, s) for f in FAMILIES for s in (0, 1)]
    for f in FAMILIES:
        assert result.metrics[f]["learned_prover"]["honest"] == alone[f"{f}/lp_honest"]
        assert result.metrics[f]["honest_min"]["0.1"] == alone[f"{f}/honest_min/0"]
        for liar in exp.LIARS:  # measured on B's training trees as on the held-out ones
            on_train = alone[f"{f}/{liar}_train_round_tests"]
            assert result.metrics[f][f"{liar}_round_tests_train"] == on_train >= 0
