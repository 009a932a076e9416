"""The numpy references of ``dedebate bench stochastic`` (bench/stochastic_numpy.py): each
decides honest-vs-honest F2 debates with acceptance P_M(1) (z-tests), so the benchmark compares
implementations of the same protocol."""

import math

import numpy as np

from bench.stochastic_numpy import one_word_path_f2_numpy, play_f2_numpy
from dedebate.machines.fixtures import f2_target
from dedebate.protocols.stochastic import lean_defaults

Z_MAX = 3.89  # two-sided normal quantile at significance 1e-4


def test_numpy_references_accept_with_probability_p_m():
    T, n = 64, 20_000
    fx = f2_target(T, 2 / 3, spread=0.1)
    pi = np.asarray(fx.machine.pi, np.float64)
    c = lean_defaults(2, T).constants(2, T)
    p1 = fx.p1()
    se = math.sqrt(p1 * (1 - p1) / n)
    full = play_f2_numpy(
        pi, c.n_alice, c.n_bob, c.n_vera, c.tau_bob, c.tau_vera, n, np.random.default_rng(0)
    )
    assert abs(full["verdict"].mean() - p1) < Z_MAX * se
    assert full["aborted"].mean() < 1e-3
    fast = one_word_path_f2_numpy(pi, n, np.random.default_rng(1))
    assert abs(fast["verdict"].mean() - p1) < Z_MAX * se
    assert fast["rare_steps"] <= 2  # expected 20,000 * 64 * 2^-24 ~ 0.08


def test_batch_scaling_compares_rates_per_trial_step_16x_apart():
    import pytest

    from bench.stochastic import batch_scaling

    out = batch_scaling(64, min_seconds=0.01, repeats=1)
    assert out["trials"] == {"small": 16, "large": 256}
    rates = out["trial_steps_per_s"]
    assert out["large_over_small"] == pytest.approx(rates["large"] / rates["small"])
