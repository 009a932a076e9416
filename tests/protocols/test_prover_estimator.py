"""Prover-estimator debate (spec PED 2, 4, 9): exact values, bounds, modes, vmap vs loop, inputs."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from dedebate.agents.ped_strategies import (
    TIE_TOLERANCE,
    CalibratedEstimator,
    ConstantEstimator,
    ErrorShiftingEstimator,
    HonestEstimator,
    TabularEstimator,
    constant_estimator,
    error_shifting_estimator,
    first_max,
    honest_prover,
    lie_then_honest_prover,
    obfuscating_liar,
    random_joint_estimator,
    scripted_prover,
    tie_loss,
)
from dedebate.programs import FAST_COMPILE
from dedebate.protocols.prover_estimator import (
    PEDStatic,
    _directions,
    all_paths,
    expected_payoff,
    ped_params,
    play,
    sample_index,
)
from dedebate.trees import and_tree, hidden_flaw_tree, noisy_evidence_tree, random_tree
from dedebate.trees.stability import error_shifting_table, tree_rho

EXACT = PEDStatic()
SAMPLED = PEDStatic(mode="sampled")
B_ONE = PEDStatic(final_round="b", final_weight="one")
B_RHO = PEDStatic(final_round="b", final_weight="rho")
TOL = 1e-6
_jit = functools.partial(jax.jit, compiler_options=FAST_COMPILE)


@functools.partial(_jit, static_argnums=0)
def shifting_values(settings, params, tree, shift, errors):
    """Honest A vs the error-shifting B for each root error e (exact mode)."""

    def one(e):
        return play(
            settings,
            params,
            honest_prover(),
            ErrorShiftingEstimator(e, shift),
            tree,
            jax.random.key(0),
        )

    return jax.vmap(one)(errors)


@pytest.fixture(scope="module")
def tree5():
    """q=5, Thr_3, d=4, true claims with exactly 4 true children, false with 1: fbs = 2 everywhere."""  # noqa: E501
    tree = noisy_evidence_tree(
        jax.random.key(11), depth=4, q=5, t=3, true_counts=(4,), false_counts=(1,)
    )
    return tree, jnp.asarray(error_shifting_table(tree))


@pytest.fixture(scope="module")
def hidden():
    return hidden_flaw_tree(jax.random.split(jax.random.key(5), 4), depth=3, q=4)


ERRORS = np.asarray([0.0, 0.2, 0.5, 1.0], np.float32)


def test_error_shifting_meets_the_completeness_bound_exactly(tree5):
    """Spec 4 / 9.2: q=5 Thr_3 d=4 rho=2: e=0.2 -> 0.0375, 0.5 -> 0.046875, 1 -> 0.0625."""
    tree, shift = tree5
    assert tree_rho(tree) == pytest.approx(2.0, abs=1e-9)
    out = shifting_values(EXACT, ped_params(2.0), tree, shift, ERRORS)
    u = np.asarray(out.u_a)
    np.testing.assert_allclose(u, [0.03125, 0.0375, 0.046875, 0.0625], atol=TOL)
    np.testing.assert_allclose(u, 0.5**5 + np.asarray(ERRORS) * 0.5**4 * 0.5, atol=TOL)
    assert np.abs(np.asarray(out.r_rounds)).max() < TOL  # every consistency reward is 0
    # the estimate's error halves per level along the honest path
    err = np.abs(np.asarray(out.phats) - np.asarray(tree.truth)[np.asarray(out.nodes)])
    np.testing.assert_allclose(err, np.asarray(ERRORS)[:, None] * 0.5 ** np.arange(5), atol=TOL)


def test_negative_control_rho_below_fbs_breaks_completeness(tree5):
    tree, shift = tree5
    u = float(shifting_values(EXACT, ped_params(1.5), tree, shift, ERRORS).u_a[-1])
    assert u == pytest.approx(0.0625, abs=TOL)
    assert u < (2 / 3) ** 5 - 0.06  # 0.0625 < 0.1317


def test_shorter_debates_on_the_same_tree(tree5):
    """A debate descending n levels: U = r^{n+1} (1 - e) + e / 2^n (fbs = 2)."""
    tree, shift = tree5
    for n in (1, 2, 3):
        u = np.asarray(shifting_values(EXACT, ped_params(2.0, rounds=n), tree, shift, ERRORS).u_a)
        e = np.asarray(ERRORS)
        np.testing.assert_allclose(u, 0.5 ** (n + 1) * (1 - e) + e * 0.5**n, atol=TOL)


def test_variant_b_closes_only_with_weight_rho(tree5):
    """Variant (b) on a depth-4 tree (d = 3): weight rho gives r^{d+1} + e r^d (1 - r) exactly,
    weight 1 gives r^{d+1} (B's lie is then free)."""
    tree, shift = tree5
    e = np.asarray(ERRORS)
    u_rho = np.asarray(shifting_values(B_RHO, ped_params(2.0), tree, shift, ERRORS).u_a)
    u_one = np.asarray(shifting_values(B_ONE, ped_params(2.0), tree, shift, ERRORS).u_a)
    np.testing.assert_allclose(u_rho, 0.5**4 + e * 0.5**3 * 0.5, atol=TOL)
    np.testing.assert_allclose(u_one, np.full(4, 0.5**4), atol=TOL)


@_jit
def _zoo(params, tree, ps, keys):
    """Honest A vs honest, constant-p and random-joint B (exact)."""

    def u(est):
        return play(EXACT, params, honest_prover(), est, tree, jax.random.key(0))

    return (
        u(HonestEstimator()),
        jax.vmap(lambda p: u(ConstantEstimator(p)))(ps),
        jax.vmap(lambda k: u(random_joint_estimator(k, tree)))(keys),
    )


def test_honest_margin_and_completeness_on_random_trees():
    """Honest vs honest is r^{d+1} exactly; against any B, honest A earns at least
    r^{d+1} + |p_d - T(x)| r^d (1 - r) when rho >= fbs at every node (spec 4), on random trees with
    random M_D tables."""
    ps = jnp.asarray([0.0, 0.3, 0.5, 1.0])
    keys = jax.random.split(jax.random.key(1), 6)
    for i in range(2):
        tree = random_tree(jax.random.key(100 + i), depth=3, q=3, n_cand=2)
        rho = max(1.0, tree_rho(tree))
        r, d = 1 / rho, 3
        hh, cst, rj = _zoo(ped_params(rho), tree, ps, keys)
        assert float(hh.u_a) == pytest.approx(r ** (d + 1), abs=TOL)
        for out in (cst, rj):
            u = np.asarray(out.u_a)
            err0 = np.abs(np.asarray(out.p_d) - int(tree.truth[0]))
            assert np.all(u >= r ** (d + 1) + err0 * r**d * (1 - r) - TOL), (i, u)


P_CONST = 0.3
DP_SKEW = (0.3, 0.0, 0.7)  # E[s] = 0.4
DPS = np.asarray([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.5, 0.0, 0.5]], np.float32)


def _liar_vs_constant_closed_form(q=4, d=3, rho=2.0):
    """The liar (a = 1, AND decomposition, uniform selection, E[s] = 0.4) against the constant
    estimator p on a hidden-flaw tree (false root): R_init = r^{d+1} p; every consistency round
    has pi = p^q; the leaf reached is false with probability q^-d."""
    r, p, es = 1 / rho, P_CONST, 0.4
    rounds = sum(r**k * es * (p**q - p) for k in range(1, d + 1))
    return r ** (d + 1) * p + rounds + es * ((1 - q**-d) - p)


@_jit
def _obf_exact(params, trees, dps):
    cal = CalibratedEstimator()
    liar = obfuscating_liar()

    def per_tree(tree):
        liars = jax.vmap(
            lambda dp: expected_payoff(EXACT, params, liar.replace(dir_probs=dp), cal, tree)
        )(dps)
        const = expected_payoff(
            EXACT,
            params,
            liar.replace(dir_probs=jnp.asarray(DP_SKEW)),
            ConstantEstimator(jnp.float32(P_CONST)),
            tree,
        )
        honest = play(EXACT, params, honest_prover(), cal, tree, jax.random.key(0)).u_a
        return liars, const, honest

    return jax.vmap(per_tree)(trees)


def _liar_vs_constant(tree, key):
    return play(
        SAMPLED, ped_params(2.0), obfuscating_liar(DP_SKEW), constant_estimator(P_CONST), tree, key
    )


_sampled_batch = _jit(jax.vmap(_liar_vs_constant, in_axes=(None, 0)))
_sampled_one = _jit(_liar_vs_constant)


@pytest.fixture(scope="module")
def tree0(hidden):
    return jax.tree.map(lambda x: x[0], hidden)


def test_obfuscating_liar_earns_zero_against_calibrated_estimator(hidden):
    """Spec 9.3: E[U_A] = 0 exactly for every direction policy; honest A on the stable
    decomposition earns r^{d+1} = 1/16; the liar against a constant estimator matches its closed
    form exactly (enumeration of all paths)."""
    liars, const, honest = _obf_exact(ped_params(2.0), hidden, DPS)
    assert np.abs(np.asarray(liars.u_a)).max() < TOL
    np.testing.assert_allclose(np.asarray(liars.total_prob), 1.0, atol=TOL)
    np.testing.assert_allclose(np.asarray(honest), 1 / 16, atol=TOL)
    np.testing.assert_allclose(np.asarray(const.u_a), _liar_vs_constant_closed_form(), atol=TOL)


def test_the_simplest_liar_lies_at_the_root_and_plays_as_honest_a_below(tree0):
    """The soundness zoos' simplest attacker: a = 1 - T(x), then honest A's every move."""
    liar, honest = lie_then_honest_prover(), honest_prover()
    assert float(liar.answer(tree0)) == 1.0 - float(honest.answer(tree0)) in (0.0, 1.0)
    marginals = jax.random.uniform(jax.random.key(3), (tree0.n_internal, tree0.q))
    for node in range(tree0.n_internal):
        args = (tree0, jnp.int32(node), jnp.float32(0.3), jnp.int32(1))
        for move in ("direction", "decompose"):
            np.testing.assert_array_equal(getattr(liar, move)(*args), getattr(honest, move)(*args))
        cand = jnp.argmax(honest.decompose(*args))
        sel = (tree0, jnp.int32(node), cand, marginals[node], jnp.float32(0.5), args[2], args[3])
        np.testing.assert_array_equal(liar.select(*sel), honest.select(*sel))


def test_first_max_takes_the_first_of_values_within_the_tolerance():
    tol = TIE_TOLERANCE
    x = jnp.asarray([0.5, 0.7 - tol / 2, 0.7, 0.7 - 2 * tol], jnp.float32)
    assert int(first_max(x, tol)) == 1
    assert int(first_max(x.at[1].set(0.7 - 2 * tol), tol)) == 2


@pytest.mark.parametrize("delta", [0.8 * TIE_TOLERANCE, 4 * TIE_TOLERANCE])
def test_the_tie_rule_costs_honest_a_at_most_tie_loss(delta):
    """Thr_3 of 5 at depth 1 (rho = 2), a true root with one false child, first: B puts mass
    0.1 on flipping each of two disjoint pairs of true children and 0.1 - delta on the false
    child. Spec 2.3's argmax earns exactly r^2 = 1/4 (docs: PED 4). Within the tolerance the
    rule takes the false child and earns 1/4 - delta, no less than 1/4 - tie_loss; outside it,
    1/4."""
    for seed in range(64):  # a tree whose first child is its false one
        tree = noisy_evidence_tree(
            jax.random.key(seed), depth=1, q=5, t=3, true_counts=(4,), false_counts=(1,)
        )
        kids = np.asarray(tree.child_truths(0, 0))
        if kids[0] == 0:
            break
    true = np.flatnonzero(kids)
    code = int(sum(int(b) << i for i, b in enumerate(kids)))
    probs = np.zeros(32)
    for flip, mass in (((true[0], true[1]), 0.1), ((true[2], true[3]), 0.1), ((0,), 0.1 - delta)):
        probs[code ^ sum(1 << int(i) for i in flip)] = mass
    probs[code] = 1 - probs.sum()
    logits = np.full((tree.n_internal, tree.n_cand, 32), -np.inf, np.float32)
    with np.errstate(divide="ignore"):  # log 0 = -inf: no mass
        logits[0, 0] = np.log(probs)
    est = TabularEstimator(jnp.float32(1.0), jnp.asarray(logits))
    u = float(play(EXACT, ped_params(2.0), honest_prover(), est, tree, jax.random.key(0)).u_a)
    if delta < TIE_TOLERANCE:
        assert u == pytest.approx(0.25 - delta, abs=TOL) and u < 0.25 - delta / 2
        assert u >= 0.25 - tie_loss(2.0, 1) - TOL
    else:
        assert u == pytest.approx(0.25, abs=TOL)


def test_sampled_mode_agrees_with_the_exact_value(tree0):
    """Sampled debates (judge draws, directions, uniform selections) against the closed form, within
    a 4-sigma normal interval; the first selection is uniform on the q subclaims."""
    out = _sampled_batch(tree0, jax.random.split(jax.random.key(9), 40_000))
    u = np.asarray(out.u_a, np.float64)
    se = u.std(ddof=1) / np.sqrt(u.size)
    exact = _liar_vs_constant_closed_form()
    assert abs(u.mean() - exact) <= 4 * se, (u.mean(), exact, se)
    counts = np.bincount(np.asarray(out.sels[:, 0]), minlength=4)
    assert np.all(np.abs(counts - u.size / 4) <= 4 * np.sqrt(u.size * 3 / 16))
    d = np.asarray(out.directions)
    assert set(np.unique(d)) == {-1.0, 1.0}
    assert abs((d == 1).mean() - 0.7) <= 4 * np.sqrt(0.21 / d.size)


def test_vmap_equals_a_loop_over_episodes(tree0):
    keys = jax.random.split(jax.random.key(9), 40_000)
    batch = _sampled_batch(tree0, keys)
    for i in (0, 1, 39_999):
        one = _sampled_one(tree0, keys[i])
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(batch)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b)[i])


@struct.dataclass
class HiddenFractionProbe:
    """Reports, as p_d, the fraction of truths hidden in the view it is handed."""

    sees_truth: bool = struct.field(pytree_node=False, default=False)

    def initial(self, tree):
        return jnp.mean((tree.truth < 0).astype(jnp.float32))

    def joint(self, tree, node, cand, phat, k):
        return jnp.zeros((2**tree.q,), jnp.float32)


def test_players_who_do_not_see_the_truth_get_the_public_view(hidden):
    tree0 = jax.tree.map(lambda x: x[0], hidden)
    f = _jit(
        lambda est: play(EXACT, ped_params(2.0), honest_prover(), est, tree0, jax.random.key(0)).p_d
    )
    hidden_fraction = 1.0 - float(np.mean(np.asarray(tree0.known)))
    assert hidden_fraction > 0.3
    assert float(f(HiddenFractionProbe())) == pytest.approx(hidden_fraction, abs=1e-6)
    assert float(f(HiddenFractionProbe(sees_truth=True))) == 0.0


def test_zero_direction_option():
    probs = jnp.asarray([0.2, 0.6, 0.2])
    dirs = jnp.asarray([-1.0, 0.0, 1.0])
    off = np.asarray(_directions(probs, PEDStatic()))
    on = np.asarray(_directions(probs, PEDStatic(allow_zero_direction=True)))
    np.testing.assert_allclose(off, [0.5, 0.0, 0.5], atol=1e-7)
    np.testing.assert_allclose(on, probs, atol=1e-7)
    skew = jnp.asarray([0.1, 0.3, 0.6])
    assert float(_directions(skew, PEDStatic()) @ dirs) == pytest.approx(float(skew @ dirs))


def test_sample_index_is_inverse_cdf():
    p = jnp.asarray([0.0, 0.25, 0.0, 0.75])
    got = [int(sample_index(u, p)) for u in (0.0, 0.2499, 0.2501, 0.9999)]
    assert got == [1, 1, 3, 3]


def test_all_paths_enumerates_choices():
    tree = random_tree(jax.random.key(0), depth=2, q=3, n_cand=2)
    paths = all_paths(tree)
    assert paths.shape == (36, 2, 2)
    assert len({tuple(p.ravel()) for p in paths}) == 36
    assert paths[:, :, 0].max() == 1 and paths[:, :, 1].max() == 2


def test_bad_inputs():
    with pytest.raises(ValueError, match="rho=0.5"):
        ped_params(0.5)
    with pytest.raises(ValueError, match="rounds=0"):
        ped_params(2.0, rounds=0)
    with pytest.raises(ValueError, match="mode='fast'"):
        PEDStatic(mode="fast")
    with pytest.raises(ValueError, match="final_round='c'"):
        PEDStatic(final_round="c")
    with pytest.raises(ValueError, match="p=1.5"):
        constant_estimator(1.5)
    tree = noisy_evidence_tree(
        jax.random.key(0), depth=1, q=3, t=2, true_counts=(3,), false_counts=(0,)
    )
    with pytest.raises(ValueError, match="e=-0.1"):
        error_shifting_estimator(tree, -0.1)
    with pytest.raises(ValueError, match="dir_probs"):
        obfuscating_liar((0.5, 0.0, 0.6))
    with pytest.raises(ValueError, match="dir_probs"):
        obfuscating_liar((-0.5, 0.5, 1.0))
    with pytest.raises(ValueError, match="select_mode='best'"):
        scripted_prover(select_mode="best")
    with pytest.raises(ValueError, match="sees_truth=False"):
        scripted_prover(sees_truth=False)
    with pytest.raises(ValueError, match="scale=-1"):
        random_joint_estimator(jax.random.key(0), tree, -1.0)
    big = jax.eval_shape(lambda k: and_tree(k, depth=6, q=12), jax.random.key(0))  # 3M paths
    with pytest.raises(ValueError, match="enumerating"):
        all_paths(big)


def test_a_debate_cut_short_weights_its_paths_to_one(tree0):
    """With fewer rounds than the tree's depth, the paths past the last round are one masked
    no-op each, not copies: A's path probabilities add up to 1 and E[U_A] of the liar against a
    constant estimator stays within the payoff's range, at every round count. (Paths not zeroed
    past the last round summed to 64 at one round, E[U_A] = 10; nothing else noticed.)"""
    liar, est = (
        obfuscating_liar().replace(dir_probs=jnp.asarray(DP_SKEW)),
        ConstantEstimator(jnp.float32(P_CONST)),
    )
    for rounds in range(1, tree0.depth + 1):
        out = expected_payoff(EXACT, ped_params(2.0, rounds=rounds), liar, est, tree0)
        np.testing.assert_allclose(float(out.total_prob), 1.0, atol=TOL)
        assert abs(float(out.u_a)) <= 1.0 + TOL, (rounds, float(out.u_a))


def test_each_round_reads_its_own_random_number_for_z_and_for_the_selection(tree0, monkeypatch):
    """A sampled episode draws each round's (direction, candidate, z, selection) from its own
    uniform (spec 2.4.2: the selection never sees z). Moving every round's z number from 0.001
    to 0.999 changes the consistency rewards (z moves) and nothing A chose; moving the selection
    numbers changes A's selections. A z drawn from the direction's number, or a selection from
    z's, changes no mean against the zoo's estimators and passed every other test."""
    liar = obfuscating_liar().replace(dir_probs=jnp.asarray([1.0, 0.0, 0.0], jnp.float32))
    est = ConstantEstimator(jnp.float32(P_CONST))

    def episode(z, selection=0.5):  # every round's z and selection numbers; the rest 0.5
        table = np.full((tree0.depth + 1, 4), 0.5, np.float32)
        table[:, 2], table[:, 3] = z, selection
        monkeypatch.setattr(jax.random, "uniform", lambda *args, **kw: jnp.asarray(table))
        return play(SAMPLED, ped_params(2.0), liar, est, tree0, jax.random.key(0))

    low, high = episode(0.001), episode(0.999)
    for field in ("nodes", "cands", "sels", "directions"):
        np.testing.assert_array_equal(getattr(low, field), getattr(high, field), err_msg=field)
    assert not np.array_equal(low.r_rounds, high.r_rounds)
    assert not np.array_equal(low.sels, episode(0.001, selection=0.999).sels)


def test_small_constructors_and_constants_of_the_strategies(hidden):
    """Exact values of the strategies' constructors (each line failed no other test when wrong):
    the tie rule's cost sums rho^-k over the d rounds; a blind prover may not need the truth to
    choose a direction; a random estimator's logits scale with ``scale`` (zero at 0); the
    calibrated estimator starts at 1/2 on a hidden root and, blind, tabulates its joint from the
    public view (a blind B read the hidden truths through ``tabulate``)."""
    from dedebate.agents.ped_strategies import tabulate

    assert tie_loss(2.0, 1) == TIE_TOLERANCE and tie_loss(2.0, 3) == 1.75 * TIE_TOLERANCE
    with pytest.raises(ValueError, match="sees_truth=False"):
        scripted_prover("lie", "honest", None, "uniform", sees_truth=False)
    tree = jax.tree_util.tree_map(lambda a: a[0], hidden)
    key = jax.random.key(3)
    assert not np.any(np.asarray(random_joint_estimator(key, tree, 0.0).logits))
    np.testing.assert_array_equal(
        np.asarray(random_joint_estimator(key, tree, 2.0).logits),
        2 * np.asarray(random_joint_estimator(key, tree, 1.0).logits),
    )
    cal = CalibratedEstimator()
    assert float(cal.initial(tree.public())) == float(tree.truth[0])  # a public root
    rootless = dataclasses.replace(tree, known=tree.known.at[0].set(False))
    assert float(cal.initial(rootless.public())) == 0.5
    assert not bool(jnp.all(tree.known))  # hidden claims, whose truth a blind B must not read
    table = tabulate(cal, tree)
    for v in range(tree.n_internal):
        want = cal.joint(tree.public(), v, 0, jnp.float32(0.5), 0)
        np.testing.assert_array_equal(np.asarray(table.logits[v, 0]), np.asarray(want))
