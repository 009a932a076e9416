"""Algorithm 1 (spec PED 5.3-5.6): exit condition, iteration bound, regret bound, traces, vmap."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bench.ogd_numpy import NumpyTanhOGD
from dedebate.core.bits import bit_table
from dedebate.estimators.advantage import advantages, oi_problem, random_oi_problem
from dedebate.estimators.families import (
    calibration_family,
    random_tanh_family,
    round_reward_family,
    stack_families,
)
from dedebate.estimators.ogd import (
    OGDStatic,
    algorithm1,
    iteration_bound,
    ogd_init,
    ogd_run_steps,
    ogd_solve,
    regret_bound,
    step_size,
    summarize,
)


@jax.jit
def _build(key):
    problem, feat = random_oi_problem(jax.random.fold_in(key, 0), 50, 4)
    return problem, random_tanh_family(jax.random.fold_in(key, 1), feat, 4, 40)


def _spec_problem(seed):
    """Spec 5.5 [CHK]: |X| = 50, |Z| = 4, 40 prediction-dependent tanh tests."""
    return _build(jax.random.key(seed))


_advantages = jax.jit(advantages)
_summarize = jax.jit(summarize, static_argnums=0)


def _check_run(static, problem, family, state, delta):
    """Every property Algorithm 1 guarantees at exit, on one finished run."""
    sm = _summarize(static, problem, state, delta)
    steps = int(sm.steps)
    n_z = problem.n_z
    # exit condition, recomputed from h itself (not from the carried advantages)
    assert float(jnp.max(jnp.abs(_advantages(family, problem, state.h)))) < delta
    assert bool(sm.converged)
    # iteration bound (spec 5.5): T <= 36|Z|/delta^2, or 4.5|Z|/delta^2 for the tight rule
    assert steps <= iteration_bound(static.step_rule, n_z, delta)
    # every update had |Adv| >= delta, and Hazan's regret bound holds: T delta <= sum <= 1.5 G D sqrt T  # noqa: E501
    assert steps * delta <= float(sm.regret_sum) * (1 + 1e-6)
    assert float(sm.regret_sum) <= float(sm.regret_bound) + 1e-6
    trace = np.asarray(state.trace)
    if steps + 1 <= trace.size:
        assert np.all(trace[:steps] >= delta) and trace[steps] < delta
        assert np.all(np.isnan(trace[steps + 1 :]))
        assert np.all(np.asarray(state.chosen)[steps:] == -1)
    # h stays in the simplex
    h = np.asarray(state.h)
    assert np.all(h >= 0) and np.allclose(h.sum(1), 1.0, atol=1e-5)
    assert float(sm.circuit_size) == steps * n_z
    return sm


@pytest.mark.parametrize("step_rule", ["hazan", "tight"])
def test_spec_check_stops_quickly_below_delta(step_rule):
    """Spec 5.5 [CHK]: delta = 0.05 stops quickly (a reference run took 47 steps, bound 57,600)."""
    delta = 0.05
    problem, family = _spec_problem(0)
    state, sm = algorithm1(family, problem, delta, step_rule=step_rule)
    static = OGDStatic(step_rule=step_rule)
    _check_run(static, problem, family, state, delta)
    assert int(sm.steps) >= 1  # the uniform start was not already indistinguishable
    assert float(state.trace[0]) >= delta
    assert int(sm.steps) <= 500  # "quickly": at most 1% of the proven bound


def test_vmap_over_seeds_and_delta_matches_single_runs():
    """One compiled program over (seed, delta) gives each single run's numbers exactly."""
    static = OGDStatic(trace_len=128)
    seeds, deltas = [1, 2, 3], jnp.asarray([0.1, 0.05, 0.03], jnp.float32)
    problems, families = zip(*[_spec_problem(s) for s in seeds])

    def stack(*xs):
        return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *xs)

    prob_b, fam_b = stack(*problems), stack(*families)
    solve = jax.jit(ogd_solve, static_argnums=0)
    over_delta = jax.vmap(solve, in_axes=(None, None, None, 0))
    batched = jax.jit(jax.vmap(over_delta, in_axes=(None, 0, 0, None)), static_argnums=0)(
        static, fam_b, prob_b, deltas
    )
    for a in range(len(seeds)):
        for b in range(len(deltas)):
            single = solve(static, families[a], problems[a], deltas[b])
            assert int(batched.steps[a, b]) == int(single.steps)
            np.testing.assert_allclose(np.asarray(batched.h[a, b]), np.asarray(single.h), atol=1e-6)
            _check_run(static, problems[a], families[a], single, float(deltas[b]))
    # smaller delta never needs fewer steps on the same problem here
    assert np.all(np.diff(np.asarray(batched.steps), axis=1) >= 0)


def test_chunked_run_equals_while_loop_and_cap_stops_early():
    delta = 0.03
    problem, family = _spec_problem(4)
    static = OGDStatic()
    full, _ = algorithm1(family, problem, delta)
    steps = int(full.steps)
    assert steps >= 3
    run = jax.jit(ogd_run_steps, static_argnums=(0, 5))
    state = ogd_init(static, family, problem)
    for _ in range(3):  # chunks of steps, past the exit (later iterations are no-ops)
        state = run(static, family, problem, state, delta, steps // 2 + 1)
    assert int(state.steps) == steps
    np.testing.assert_allclose(np.asarray(state.h), np.asarray(full.h), atol=1e-7)
    np.testing.assert_array_equal(np.asarray(state.chosen), np.asarray(full.chosen))
    # an explicit cap below T stops the loop with the exit condition unmet
    capped = OGDStatic(max_steps=steps - 1)
    st_c, sm_c = algorithm1(family, problem, delta, max_steps=steps - 1)
    assert int(sm_c.steps) == steps - 1 and not bool(sm_c.converged)
    assert float(_summarize(capped, problem, st_c, delta).max_adv) >= delta


def test_matches_numpy_reference_run():
    """The jitted loop and the benchmark's numpy loop take the same steps on the same problem."""
    delta = 0.03
    problem, family = _spec_problem(5)
    state, sm = algorithm1(family, problem, delta)
    ref = NumpyTanhOGD(family.features, family.weights, problem.mu, problem.g)
    h_np, steps_np, chosen_np, trace_np = ref.run(10_000, delta)
    assert steps_np == int(sm.steps)
    np.testing.assert_array_equal(chosen_np, np.asarray(state.chosen[:steps_np]))
    np.testing.assert_allclose(h_np, np.asarray(state.h), atol=1e-5)
    np.testing.assert_allclose(trace_np, np.asarray(state.trace[: steps_np + 1]), atol=1e-5)


def test_protocol_style_family_round_reward_calibration_and_tanh():
    """Spec 9.6: B fools {r_k, f_{k+1}} of a fixed A plus random tanh tests (q = 2, |Z| = 4)."""
    q, n_x, delta = 2, 40, 0.02
    rng = np.random.default_rng(7)
    md = rng.integers(0, 2, size=(n_x, 2**q)).astype(np.float32)
    phat = rng.uniform(size=n_x).astype(np.float32)
    direction = rng.choice([-1.0, 1.0], size=n_x).astype(np.float32)
    claimed = rng.integers(0, 2, size=(n_x, q)).astype(np.float32)
    truth = rng.integers(0, 2**q, size=n_x)
    key = jax.random.key(7)
    problem, feat = random_oi_problem(key, n_x, 2**q)
    problem = problem.replace(g=jax.nn.one_hot(truth, 2**q))  # g = point mass on T(y)

    def select(feat_x, h_x):  # a stochastic A: softmax of its marginal errors
        marg = h_x @ jnp.asarray(bit_table(q), jnp.float32)
        return jax.nn.softmax(4.0 * jnp.abs(marg - feat_x[:q]))

    def direction_fn(feat_x, j, m_j):
        return jnp.where(feat_x[j] > m_j, 1.0, -1.0)

    family = stack_families(
        round_reward_family(direction, md, phat, scale=0.5),
        calibration_family(select, direction_fn, claimed, q, scale=0.5),
        random_tanh_family(jax.random.fold_in(key, 1), feat, 2**q, 8),
    )
    state, sm = algorithm1(family, problem, delta, trace_len=4096)
    _check_run(OGDStatic(trace_len=4096), problem, family, state, delta)
    assert int(sm.steps) >= 1
    # the calibration test has zero mean under B's own prediction, so its advantage is its
    # expectation under the truth alone
    vals = np.asarray(family.values(state.h))[1]
    np.testing.assert_allclose((np.asarray(state.h) * vals).sum(1), 0.0, atol=1e-6)


def test_validation():
    problem, family = _spec_problem(0)
    with pytest.raises(ValueError, match="delta=0"):
        algorithm1(family, problem, 0.0)
    with pytest.raises(ValueError, match="step_rule='adam'"):
        OGDStatic(step_rule="adam")
    with pytest.raises(ValueError, match="projection='x'"):
        OGDStatic(projection="x")
    other = random_tanh_family(jax.random.key(1), np.zeros((50, 4)), 8, 3)
    with pytest.raises(ValueError, match="family"):
        algorithm1(other, problem, 0.1)
    for bad in (True, np.float32(0.0), np.ones(2)):
        with pytest.raises(ValueError, match="delta="):
            algorithm1(family, problem, bad)
    for fn in (step_size, regret_bound):
        with pytest.raises(ValueError, match="step_rule='adagrad'"):
            fn("adagrad", 4, 1.0)


def test_numpy_and_jax_scalar_deltas_are_deltas():
    """A delta from a numpy or JAX computation runs as the same Python float does."""
    problem, family = _spec_problem(0)
    want = int(algorithm1(family, problem, 0.25)[1].steps)
    for delta in (np.float32(0.25), np.float64(0.25), jnp.float32(0.25)):
        assert int(algorithm1(family, problem, delta)[1].steps) == want


def test_circuit_size_does_not_wrap_past_int32():
    """T |Z| passes 2^31 well inside the step cap (|Z| = 4096, T = 2^19): no negative size."""
    n_z, steps = 4096, 2**19
    problem = oi_problem([1.0], np.full((1, n_z), 1.0 / n_z))
    state = ogd_init(
        OGDStatic(trace_len=1),
        random_tanh_family(jax.random.key(0), np.zeros((1, 2)), n_z, 1),
        problem,
    )
    state = state.replace(steps=jnp.int32(steps))
    assert float(summarize(OGDStatic(), problem, state, 0.01).circuit_size) == 2.0**31


def test_regret_sum_is_compensated_over_a_long_run():
    """``regret_sum`` equals the float64 sum of the steps' ``|Adv|`` (the trace) within Kahan's
    ``2u sum`` (u = 2^-24) over 20,000 steps; a plain float32 running sum of the same terms
    misses that bound (the old update)."""
    n = 20_000
    problem, family = _spec_problem(3)
    static = OGDStatic(trace_len=n + 1)
    state = jax.jit(ogd_run_steps, static_argnums=(0, 5))(
        static, family, problem, ogd_init(static, family, problem), 1e-6, n
    )
    assert int(state.steps) == n
    terms = np.asarray(state.trace)[:n]  # |Adv| of the test each update used, in float32
    exact, tol = math.fsum(terms.astype(np.float64)), 2.0 * 2.0**-24 * float(terms.sum())
    assert abs(float(state.regret_sum) - exact) <= tol
    assert abs(float(np.cumsum(terms, dtype=np.float32)[-1]) - exact) > tol
