"""The stochastic-oracle debate (spec DED 5.1, 5.3): the zoos against the proven bounds, exact
acceptance vs Monte Carlo, costs, the two-party coin, batched vs per-trial equality."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dedebate.agents.stochastic_players import (
    A_HONEST,
    A_HONEST_SHIFT,
    A_PER_STEP,
    B_ABORT_FIRST,
    B_HONEST,
    B_LEARNED,
    B_NEVER,
    alice_lies_from_params,
    bob_logits_from_params,
    completeness_zoo,
    evolution_strategy,
    honest_alice,
    honest_bob,
    optimise_alice,
    soundness_zoo,
    stack,
    zoo_alice,
    zoo_bob,
)
from dedebate.exact import acceptance_exact, binomial_law
from dedebate.machines.fixtures import f2_target
from dedebate.machines.lipschitz import prefix_tree
from dedebate.protocols.stochastic import (
    debate_static,
    lean_defaults,
    make_vera,
    play,
    trial_keys,
    two_party_coin,
)
from dedebate.protocols.stochastic_batch import run_trials
from tests.fakes import LIGHT_COMPILE

T, K = 12, 2
N_MC = 1500
P_YES, P_NO = 2 / 3, 0.33333


@pytest.fixture(scope="module")
def setup():
    lp = lean_defaults(K, T)
    consts = lp.constants(K, T)
    yes = f2_target(T, P_YES, spread=0.2).machine
    no = f2_target(T, P_NO, spread=0.2).machine
    return {
        "lp": lp,
        "c": consts,
        "yes": yes,
        "no": no,
        "spec": debate_static(T),
        "vera": make_vera(consts),
        "lv_yes": prefix_tree(yes),
        "lv_no": prefix_tree(no),
        "p_yes": float(yes.output_prob_dp()),
        "p_no": float(no.output_prob_dp()),
    }


# The slice width of every zoo run: 12 x 1500, 5 x 1500 and 3 x 400,000 lanes all play in slices
# of 8192 (a lane's outcome depends on its key alone), so the three runs share one compilation.
ZOO_LANES = 8192


def _run_zoo(s, machine, members, side, key, n=N_MC):
    """Each member for n debates against the other side's honest zoo kind (both sides are zoo
    classes, and every run plays slices of ``ZOO_LANES``, so all share one compiled program)."""
    m = len(members)
    rep = jax.tree.map(lambda x: np.repeat(np.asarray(x), n, axis=0), stack(members))
    other = zoo_bob(s["c"], B_HONEST) if side == "alice" else zoo_alice(s["c"], A_HONEST)
    other = jax.tree.map(lambda x: np.repeat(np.asarray(x)[None], m * n, axis=0), other)
    kd = np.asarray(jax.random.key_data(trial_keys(jax.random.key(key), n)))
    keys = jax.random.wrap_key_data(np.tile(kd, (m, 1)))
    alice, bob = (rep, other) if side == "alice" else (other, rep)
    out = run_trials(
        s["spec"],
        machine,
        alice,
        bob,
        s["vera"],
        keys,
        axes=(None, 0, 0, None),
        max_lanes=ZOO_LANES,
    )
    return out, np.asarray(out.alice_wins).reshape(m, n).mean(axis=1)


def _z(mc, exact, n):
    return (mc - exact) / math.sqrt(max(exact * (1 - exact), 1e-4) / n)


def _soundness_members(c):
    names, members = soundness_zoo(c)
    opt = zoo_alice(c, A_PER_STEP, lies=alice_lies_from_params(np.array([1.4, 0.5, 0.3]), c))
    return names + ["per-step lies"], members + [opt]


@pytest.fixture(scope="module")
def soundness_run(setup):
    """The Alice zoo against honest Bob on the no-instance, N_MC debates per member (key 1)."""
    names, members = _soundness_members(setup["c"])
    out, mc = _run_zoo(setup, setup["no"], members, "alice", key=1)
    return names, members, out, mc


def test_alice_zoo_respects_soundness_exactly_and_by_monte_carlo(setup, soundness_run):
    s = setup
    bound = 1 - s["lp"].soundness(K, T, 1 - s["p_no"])  # max acceptance allowed
    assert bound == pytest.approx(0.3956, abs=5e-4)
    names, members, out, mc = soundness_run
    exact = np.array(
        [acceptance_exact(s["no"], a, honest_bob(s["c"]), s["vera"], s["lv_no"]) for a in members]
    )
    for nm, e, m in zip(names, exact, mc):
        assert e <= bound, nm  # the theorem, exactly
        assert m <= bound + 3 * math.sqrt(bound * (1 - bound) / N_MC), nm
        assert abs(_z(m, e, N_MC)) < 4.0, (nm, m, e)  # exact DP == Monte Carlo
    # the strongest members lie just below Bob's threshold; shifting by s gains ~K s
    i = names.index("+s")
    assert exact[i] > s["p_no"] + 0.5 * K * s["c"].s


def test_bob_zoo_respects_completeness_exactly_and_by_monte_carlo(setup):
    s = setup
    bound = s["lp"].completeness(K, T, s["p_yes"])
    assert bound == pytest.approx(0.6402, abs=5e-4)
    names, members = completeness_zoo(s["c"])
    names, members = names + ["honest"], members + [zoo_bob(s["c"], B_HONEST)]
    exact = np.array(
        [
            acceptance_exact(s["yes"], honest_alice(s["c"]), b, s["vera"], s["lv_yes"])
            for b in members
        ]
    )
    out, mc = _run_zoo(s, s["yes"], members, "bob", key=2)
    for nm, e, m in zip(names, exact, mc):
        assert e >= bound, nm
        assert m >= bound - 3 * math.sqrt(bound * (1 - bound) / N_MC), nm
        assert abs(_z(m, e, N_MC)) < 4.0, (nm, m, e)
    # honest vs honest: the acceptance is P_M(1) (unbiased estimates on an affine machine)
    h = names.index("honest")
    assert exact[h] == pytest.approx(s["p_yes"], abs=1e-3)
    assert abs(_z(mc[h], s["p_yes"], N_MC)) < 3.0

    # measured costs (spec DED 5.3): Alice N_A and Bob N_B per step played, Vera N_V per abort
    c = s["c"]
    rounds = np.asarray(out.costs.rounds).reshape(len(members), N_MC)
    aborted = np.asarray(out.aborted).reshape(len(members), N_MC)
    abort_step = np.asarray(out.abort_step).reshape(len(members), N_MC)
    np.testing.assert_array_equal(
        np.asarray(out.costs.alice_queries).reshape(rounds.shape), rounds * np.float32(c.n_alice)
    )
    qv = np.asarray(out.costs.verifier_queries).reshape(rounds.shape)
    np.testing.assert_array_equal(qv, np.where(aborted, c.n_vera, 0))
    n_b = np.asarray([int(b.n_samples) for b in members])[:, None]  # N_B, or 0 for no sampling
    assert n_b.max() == c.n_bob != c.n_alice  # Bob's count: Alice's would read otherwise
    qb = np.asarray(out.costs.bob_queries).reshape(rounds.shape)
    np.testing.assert_array_equal(qb, rounds * n_b.astype(np.float32))
    first = names.index("aborts at step 0")
    assert np.all(abort_step[first] == 0) and np.all(rounds[first] == 1)
    never = names.index("never aborts")
    assert np.all(abort_step[never] == -1) and np.all(rounds[never] == T)
    rnd = names.index("aborts at a random step")
    hist = np.bincount(abort_step[rnd], minlength=T)  # hazard 1/(T - t): uniform abort step
    assert stats.chisquare(hist).pvalue > 1e-3


def test_batched_equals_per_trial_loop(setup, soundness_run):
    """The batched runner's outcomes (the soundness zoo run, a module fixture shared with the
    soundness test) equal the exact per-trial ``play`` with the same keys."""
    s = setup
    _, members, batched, _ = soundness_run
    keys = trial_keys(jax.random.key(1), N_MC)
    single = jax.jit(play, static_argnums=0, compiler_options=LIGHT_COMPILE)
    for m in (1, len(members) - 1):  # "+s" and the per-step liar
        for i in range(3):
            one = single(
                s["spec"], s["no"], members[m], zoo_bob(s["c"], B_HONEST), s["vera"], keys[i]
            )
            for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(batched)):
                assert np.asarray(a) == np.asarray(b)[m * N_MC + i]


def test_two_party_coin_is_uniform_when_one_side_is_honest():
    n = 20000
    honest = jax.random.uniform(jax.random.split(jax.random.key(3))[0], (n,))  # as before
    # a U-shaped adversarial share, independent of the honest one (numpy's Beta sampler: JAX's
    # compiles a rejection loop for several seconds and the coin's law does not depend on it)
    u_shaped = jnp.asarray(np.random.default_rng(3).beta(0.2, 0.2, n), jnp.float32)
    for adversarial in (jnp.full((n,), 0.3), u_shaped, jnp.mod(3.7 * jnp.arange(n) / n, 1.0)):
        for u in (two_party_coin(adversarial, honest), two_party_coin(honest, adversarial)):
            assert stats.kstest(np.asarray(u), "uniform").pvalue > 1e-3
    both_fixed = np.asarray(two_party_coin(jnp.full((n,), 0.3), jnp.full((n,), 0.2)))
    assert np.allclose(both_fixed, 0.5)


def test_two_party_coin_is_exactly_uniform_whatever_the_other_share_is():
    """Every one of the 2^23 grid values of an honest share gives a different coin, so the coin
    is exactly uniform on the grid, for shares a cheating player may send: huge (which swallowed
    the honest share: the coin was 0), negative and off the grid, NaN (the coin was NaN). An
    honest share is unchanged."""
    grid = jnp.arange(2**23, dtype=jnp.float32) / 2.0**23
    for cheat in (2.0**30, -7.25 + 1e-6, float("nan")):
        u = two_party_coin(cheat, grid)  # symmetric: z_A + z_B = z_B + z_A in floats too
        k = np.asarray(u, np.float64) * 2.0**23  # each grid value once: a permutation
        assert np.array_equal(k, np.round(k)) and k.min() >= 0 and k.max() < 2**23, cheat
        assert np.all(np.bincount(k.astype(np.int64), minlength=2**23) == 1), cheat
        assert np.array_equal(np.asarray(two_party_coin(grid, cheat)), np.asarray(u))
    assert np.array_equal(np.asarray(two_party_coin(0.0, grid)), np.asarray(grid))


def test_two_party_coin_protocol(setup):
    """With the paper's coin, a fixed share by Alice and an honest Bob give the trusted-coin law
    (checked against the exact DP); two fixed shares do not."""
    s = setup
    spec = debate_static(T, two_party_coin=True)
    kd = np.asarray(jax.random.key_data(trial_keys(jax.random.key(4), N_MC)))
    keys = jax.random.wrap_key_data(np.tile(kd, (2, 1)))
    fixed_alice = zoo_alice(s["c"], 0, coin=0.3)  # honest claims, fixed coin share
    bobs = stack([zoo_bob(s["c"], B_HONEST), zoo_bob(s["c"], B_HONEST, coin=0.2)])
    bobs = jax.tree.map(lambda x: np.repeat(x, N_MC, axis=0), bobs)
    out = run_trials(spec, s["yes"], fixed_alice, bobs, s["vera"], keys, axes=(None, None, 0, None))
    acc = np.asarray(out.alice_wins).reshape(2, N_MC).mean(axis=1)
    exact = acceptance_exact(
        s["yes"], honest_alice(s["c"]), honest_bob(s["c"]), s["vera"], s["lv_yes"]
    )
    assert abs(_z(acc[0], exact, N_MC)) < 4.0
    assert acc[1] > 0.99  # u = 0.5 < p ~ 2/3 every step: all bits are 1


def test_black_box_calls_estimator_matches_exact(setup):
    """``estimator="calls"``: N real Bernoulli calls per estimate (small N to keep it cheap)."""
    s = setup
    c = s["c"].scaled(1 / 64)
    spec = debate_static(T, estimator="calls", call_block=512)
    n = 600
    out = run_trials(
        spec,
        s["yes"],
        honest_alice(c),
        honest_bob(c),
        make_vera(c),
        trial_keys(jax.random.key(9), n),
    )
    exact = acceptance_exact(s["yes"], honest_alice(c), honest_bob(c), make_vera(c), s["lv_yes"])
    assert abs(_z(float(np.mean(np.asarray(out.alice_wins))), exact, n)) < 4.0
    np.testing.assert_array_equal(
        np.asarray(out.costs.alice_queries), np.asarray(out.costs.rounds) * np.float32(c.n_alice)
    )


def test_optimised_alice_stays_below_the_bound(setup):
    s = setup
    c, lv = s["c"], s["lv_no"]
    bob = honest_bob(c)

    def acceptance(lies):
        return np.array(
            [
                acceptance_exact(s["no"], zoo_alice(c, A_PER_STEP, lies=li), bob, s["vera"], lv)
                for li in lies
            ]
        )

    res = optimise_alice(acceptance, c, generations=3, population=6, seed=0)
    again = acceptance(res.params["lies"][None])[0]
    assert again == pytest.approx(res.value, abs=1e-12)
    # the search found a lie that pays (so the bound below is tested against a real liar) and
    # improved on its initial population (0.271 -> 0.345 at this seed)
    assert res.value > s["p_no"] + 0.005
    assert res.value > res.history[0] + 0.01
    assert res.value <= 1 - s["lp"].soundness(K, T, 1 - s["p_no"])


@pytest.mark.slow
def test_exact_dp_and_monte_carlo_agree_at_bobs_threshold(setup):
    """Alice claims her honest estimate + tau_B: Bob's strict ``|p - count / N_B| < tau_B`` meets
    ties. The DP (thresholds and claims as the player's float32 numbers, boundaries exact) sees
    the tie exactly: one float32 ulp below tau_B Bob lets the tied count pass, so Alice is
    accepted more often than at tau_B, where the tie is disputed as one ulp above (a ``<=``
    check would make the first two equal up to rounding). The Monte Carlo (the integer checker,
    160k debates each, one batched program) agrees with the DP at all three to 3 standard errors
    (about 0.004); the tie itself moves the acceptance by ~6e-8, far below that resolution."""
    s = setup
    tau = np.float32(s["c"].tau_bob)
    deltas = (np.nextafter(tau, np.float32(0)), tau, np.nextafter(tau, np.float32(1)))
    members = [zoo_alice(s["c"], A_HONEST_SHIFT, delta=float(d)) for d in deltas]
    exact = [
        acceptance_exact(s["no"], a, zoo_bob(s["c"], B_HONEST), s["vera"], s["lv_no"])
        for a in members
    ]
    # the tied count's mass (~6e-8) against what one more ulp of the claim moves otherwise
    # (float rounding, ~4e-17): two scales apart, so the bounds need no tuning
    jump, step = exact[0] - exact[1], abs(exact[2] - exact[1])
    assert jump > 1e-9 and step < 1e-12, exact
    n = 160_000
    _, mc = _run_zoo(s, s["no"], members, "alice", key=11, n=n)
    for d, e, m in zip(deltas, exact, mc):
        z = (m - e) / math.sqrt(e * (1 - e) / n)
        assert abs(z) < 3.0, (float(d), m, e, z)


def test_binomial_law_sums_to_one():
    for n, pi in ((4, 0.3), (149911, 0.72), (66628, 1e-6), (1000, 0.999999), (7, 0.5)):
        w = binomial_law(n, pi)[1]
        assert abs(w.sum() - 1.0) <= 1e-12, (n, pi, w.sum())


@pytest.mark.parametrize("n,pi", [(1, 0.5), (4, 0.9), (10, 0.5), (100, 0.97), (149911, 0.72)])
def test_binomial_law_is_the_pmf_on_consecutive_counts_leaving_out_under_1e_20(n, pi):
    """Against scipy: the support is consecutive counts, the mass left out below 1e-20 (so the
    renormalisation cannot hide a dropped count: leaving out count n at (4, 0.9) passed the sum
    test above) and each probability the pmf to the float64 rounding of its log-gamma terms."""
    from scipy import stats

    points, w = binomial_law(n, pi)
    k = np.rint(points * n)
    np.testing.assert_array_equal(k, np.arange(k[0], k[-1] + 1))
    assert stats.binom.cdf(k[0] - 1, n, pi) + stats.binom.sf(k[-1], n, pi) < 1e-20
    rtol = 8 * 2.0**-52 * max(1.0, n * math.log(n))  # four terms of size up to n ln n
    np.testing.assert_allclose(w, stats.binom.pmf(k, n, pi), rtol=rtol, atol=0)
    # K = 4-sized counts at Lean's constants: an honest-vs-honest acceptance is a probability
    c4 = lean_defaults(4, 4).constants(4, 4)
    m4 = f2_target(4, 0.9, spread=0.05).machine
    acc = acceptance_exact(m4, honest_alice(c4), honest_bob(c4), make_vera(c4))
    assert 0.0 <= acc <= 1.0


def test_bad_input_is_rejected(setup):
    s = setup
    with pytest.raises(ValueError, match="machine.T=12 but spec.T=8"):
        play(
            debate_static(8),
            s["yes"],
            honest_alice(s["c"]),
            honest_bob(s["c"]),
            s["vera"],
            jax.random.key(0),
        )
    with pytest.raises(ValueError, match="axes"):
        run_trials(
            s["spec"],
            s["yes"],
            honest_alice(s["c"]),
            honest_bob(s["c"]),
            s["vera"],
            trial_keys(jax.random.key(0), 2),
            axes=(0, 1),
        )
    with pytest.raises(ValueError, match="lies has shape"):
        zoo_alice(s["c"], A_PER_STEP, lies=np.zeros(3))
    assert B_ABORT_FIRST != B_NEVER


def test_soundness_zoo_members_are_distinct_and_sample_as_their_names_say(setup):
    """Each member of the soundness zoo is a strategy of its own (no two alike: "+0.99 s" once
    became "+s"), and exactly the members named after honest Alice's estimate sample it (N_A
    queries per step): a member claiming that estimate from zero samples passed the DP too."""
    c = setup["c"]
    names, members = soundness_zoo(c)
    fields = [
        (int(m.kind), float(m.delta), tuple(np.asarray(m.lies).tolist()), int(m.n_samples))
        for m in members
    ]
    assert len(set(fields)) == len(fields), names
    for name, (_, _, _, n) in zip(names, fields):
        assert n == (c.n_alice if name.startswith("honest") else 0), name
    delta = dict(zip(names, (f[1] for f in fields)))
    assert delta["+0.99 s (just under s)"] == np.float32(0.99 * c.s) < delta["+s"]


def test_trial_keys_from_an_offset_are_those_trials_of_the_whole_run():
    key = jax.random.key(9)
    part, whole = trial_keys(key, 3, offset=5), trial_keys(key, 8)
    np.testing.assert_array_equal(jax.random.key_data(part), jax.random.key_data(whole)[5:])


def test_every_zoo_bob_continues_as_the_exact_dp_reads_at_every_step(setup):
    """1 - ``abort_prob`` of each sampling-free completeness-zoo Bob (the threshold Bobs included)
    and of a learned Bob reading the step, the deviation and the previous bit equals the exact
    DP's continuation probability at every step, previous bit and claim: the play loop and the DP
    model one strategy (a Bob aborting after a 1 from step 2 on only passed every test)."""
    from dedebate.exact.acceptance import _bob_params, _cont
    from dedebate.protocols.stochastic_scan import StepView

    c = setup["c"]
    names, members = completeness_zoo(c)
    names.append("learned")
    members.append(zoo_bob(c, B_LEARNED, w=np.linspace(-2, 1, T), w_dev=1.5, w_prev=-0.7))
    claims = np.float32([0.0, 0.3, 0.41, 0.9, 1.0])

    @jax.jit
    def cont(bob, t, pi, prev):
        view = StepView(t=t, pi=pi, prev_bit=prev, ones=jnp.int32(0), state=None, T=T)
        return 1.0 - jax.vmap(lambda p: bob.abort_prob(view, p))(jnp.asarray(claims))

    def tol(b, t, pi):
        # float32 against float64 (same float32 inputs): the logit's terms carry a few roundings
        # each (8 ulp of the sum of their magnitudes, generously), the sigmoid's slope is <= 1/4,
        # and the abort probability and 1 - a round once each
        mag = abs(b["w"][t]) + abs(b["w_dev"]) * np.abs(claims - pi) / b["tau_vera"]
        logit = 8 * 2.0**-24 * (mag + abs(b["w_prev"])) if b["kind"] == B_LEARNED else 0.0
        return logit / 4 + 2 * 2.0**-24

    for name, bob in zip(names, members):
        b = _bob_params(bob)
        for t in range(T):
            pi = np.float32(0.37 + 0.01 * t)
            for prev in (0, 1):
                got = np.asarray(cont(bob, jnp.int32(t), jnp.float32(pi), jnp.int32(prev)))
                want = _cont(b, t, T, float(pi), prev, claims.astype(np.float64))
                err = f"{name}, t={t}, prev={prev}: {got} vs {want}"
                assert np.all(np.abs(got - want) <= tol(b, t, float(pi))), err


def test_each_zoo_holds_the_simplest_attackers_and_they_play_as_named(setup):
    """The soundness zoo holds Alice who always claims 1, the completeness zoo Bob who aborts at
    once and Bob who never aborts (spec DED 9), each playing as named by the exact DP's laws (a
    zoo whose "always 1" member shifted by 0 instead kept every count and passed)."""
    from dedebate.exact.acceptance import _bob_params, _cont, claim_law

    c = setup["c"]
    names, alices = soundness_zoo(c)
    always = alices[names.index("always 1")]
    for t in range(T):
        claims, weights = claim_law(always, t, T, 0.3)
        assert set(np.asarray(claims).tolist()) == {1.0} and float(np.sum(weights)) == 1.0
    names, bobs = completeness_zoo(c)
    first, never = (_bob_params(bobs[names.index(n)]) for n in ("aborts at step 0", "never aborts"))
    claims = np.array([0.0, 0.3, 1.0])
    for t in range(T):
        for prev in (0, 1):
            assert (_cont(never, t, T, 0.3, prev, claims) == 1.0).all()
            assert (_cont(first, t, T, 0.3, prev, claims) == float(t > 0)).all()


def test_the_optimised_adversaries_families_are_the_documented_ones(setup):
    """The lie family and the abort-logit family read each parameter where their docstrings
    say, step by step (a last-step lie at T - 2, or w_dev and w_prev swapped, passed)."""
    c = setup["c"]
    th = np.array([0.3, -1.1, 0.45])
    lies = alice_lies_from_params(th, c)
    for t in range(T - 1):
        want = c.tau_bob * math.tanh(th[0] + th[1] * t / (T - 1))
        assert lies[t] == pytest.approx(want, rel=2**-22), t
    assert lies[T - 1] == pytest.approx(c.tau_bob * th[2], rel=2**-22)
    w, w_dev, w_prev = bob_logits_from_params(np.array([-2.0, 0.5, 1.7, -0.3]), c)
    np.testing.assert_allclose(w, -2.0 + 0.5 * np.arange(T) / (T - 1), rtol=2**-22)
    assert (float(w_dev), float(w_prev)) == (np.float32(1.7), np.float32(-0.3))


def test_evolution_strategy_climbs_to_the_maximum():
    """On ``-|x - (3, -2)|^2`` from 0 the search ends within 0.1 of the maximum (one that stepped
    down its gradient kept only its luckiest sample, near the start)."""
    target = np.array([3.0, -2.0])
    best, value, history = evolution_strategy(
        lambda x: -np.sum((x - target) ** 2, axis=1), np.zeros(2), 0.1, 30, 8, 0.5, seed=0
    )
    assert np.linalg.norm(best - target) < 0.1
    assert value == -np.sum((best - target) ** 2) and history == sorted(history)


def test_every_zoo_alice_claims_what_the_exact_dp_reads_at_every_step(setup):
    """The claim each soundness-zoo Alice (and an optimised one, a different lie per step) makes
    at step t, for every count of her samples, is bit for bit the claim the exact DP's
    ``claim_law`` gives there: the DP and the play loop model one strategy (a liar shifting
    one step early, or reading the next step's lie, passed the zoo's rows)."""
    from dedebate.exact.acceptance import binomial_law, claim_law
    from dedebate.protocols.stochastic_scan import StepView

    c = setup["c"]
    names, members = soundness_zoo(c)
    names.append("per step, arange(T) * 1e-3")
    members.append(zoo_alice(c, A_PER_STEP, lies=np.arange(T) * 1e-3))

    @jax.jit
    def claims(alice, t, pi, counts):
        view = StepView(t=t, pi=pi, prev_bit=jnp.int32(0), ones=jnp.int32(0), state=None, T=T)
        return jax.vmap(lambda k: alice.claim(view, k, jnp.float32(0.5)))(counts)

    for name, alice in zip(names, members):
        for t in range(T):
            pi = np.float32(0.37 + 0.01 * t)
            want, _ = claim_law(alice, t, T, float(pi))
            n = int(alice.n_samples)
            # by her count when she samples: the law's support, counts k (fractions k / n)
            k = np.rint(binomial_law(n, float(pi))[0] * n) if want.size > 1 else np.zeros(1)
            counts = jnp.asarray(k, jnp.int32)
            got = np.asarray(claims(alice, jnp.int32(t), jnp.float32(pi), counts))
            np.testing.assert_array_equal(got, np.float32(want), err_msg=f"{name}, t={t}")
            # and the DP holds the float32 claim itself, not a float64 sum that rounds to it
            np.testing.assert_array_equal(got.astype(np.float64), want, err_msg=f"{name}, t={t}")


@pytest.mark.parametrize("n, pi", [(100, 0.97), (100, 0.03), (1000, 0.5), (40, 0.2)])
def test_the_counts_left_out_weigh_under_the_documented_5e_23(n, pi):
    """Each tail ``count_range`` leaves out of a count's law weighs under ``exp(-TAIL_EXPONENT)``
    = 5e-23 (scipy's binomial law), as dedebate/exact/acceptance.py states: a range one count
    narrower at either end left out 5.4e-23 at (100, 0.97)."""
    from dedebate.exact.acceptance import count_range

    lo, hi = count_range(n, pi)
    assert stats.binom.cdf(lo - 1, n, pi) < 5e-23
    assert stats.binom.sf(hi, n, pi) < 5e-23


def test_the_checker_window_is_exact_where_a_boundary_is_an_integer():
    """``checker_window(p, n, tau)``: the counts X with ``|p - X / n| < tau``, against the same
    bounds in fractions, at claims (float64) whose ``n (p -+ tau)`` is an integer in the reals
    but not in float64 (the exact path), and one that is not near an integer."""
    from fractions import Fraction

    from dedebate.exact.acceptance import checker_window

    for p, n, tau in [
        (0.9, 3, 0.1),
        (0.7666666666666666, 3, 0.1),
        (0.24285714285714285, 7, 0.1),
        (0.55, 7, 0.1),
    ]:
        lo_real = n * (Fraction(p) - Fraction(tau))
        hi_real = n * (Fraction(p) + Fraction(tau))
        want = (math.floor(lo_real) + 1, math.ceil(hi_real) - 1)
        got = checker_window(np.array([p]), n, tau)
        assert (int(got[0][0]), int(got[1][0])) == want, (p, n, tau)
