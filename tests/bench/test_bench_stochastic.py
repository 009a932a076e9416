"""The numpy references of ``dedebate bench stochastic`` (bench/stochastic_numpy.py): each
decides honest-vs-honest F2 debates with acceptance P_M(1) (z-tests), so the benchmark compares
implementations of the same protocol."""

import math
import types

import numpy as np
import pytest

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
    fast = one_word_path_f2_numpy(
        pi, c.n_alice, c.n_bob, c.n_vera, c.tau_bob, c.tau_vera, n, np.random.default_rng(1)
    )
    assert abs(fast["verdict"].mean() - p1) < Z_MAX * se
    assert fast["rare_steps"] <= 2  # expected 20,000 * 64 * 2^-24 ~ 0.08
    assert not fast["aborted"].any()


SMALL = (200, 200, 400, 0.11, 0.05)  # n_alice, n_bob, n_vera, tau_bob, tau_vera: ~2% aborts/step


def test_the_one_word_path_has_the_count_references_law_where_its_rare_path_runs():
    """At level 4 a sixteenth of the steps take the rare path, and a quarter of the debates abort:
    verdicts and aborts match the count reference (two-sample z-tests)."""
    T, n = 16, 20_000
    pi = np.asarray(f2_target(T, 2 / 3, spread=0.1).machine.pi, np.float64)
    ref = play_f2_numpy(pi, *SMALL, n, np.random.default_rng(0))
    ow = one_word_path_f2_numpy(pi, *SMALL, n, np.random.default_rng(1), log2_gate=4)
    assert abs(ow["rare_steps"] - n * T / 16) < 5 * math.sqrt(n * T / 16)
    assert 0.2 < ref["aborted"].mean() < 0.3
    for field in ("verdict", "aborted"):
        a, b = ref[field].mean(), ow[field].mean()
        pooled = (a + b) / 2
        assert abs(a - b) < Z_MAX * math.sqrt(pooled * (1 - pooled) * 2 / n), field


def test_the_one_word_path_refuses_a_level_its_aborts_are_too_likely_for():
    pi = np.full(7, 0.5)
    with pytest.raises(ValueError, match="aborts too likely"):
        one_word_path_f2_numpy(
            pi, 200, 200, 400, 0.05, 0.05, 1000, np.random.default_rng(0), log2_gate=4
        )


@pytest.mark.parametrize(
    ("na", "nb", "tau", "pi"), [(60, 45, 0.1, 0.4), (10, 10, 0.2, 0.5), (14, 70, 0.1, 0.8)]
)
def test_abort_weights_match_a_sum_over_bobs_counts(na, nb, tau, pi):
    """P(X, Bob aborts) and P(coin, Bob aborts) against the direct sum over Z of Bob's float64
    check (the last two cases have float64 ties |X/N_A - Z/N_B| = tau; in the last, ceil and floor
    of the float products miss ends of Bob's interval by one, on both sides)."""
    from scipy.stats import binom

    from bench.stochastic_numpy import _abort_mass, _abort_weights

    x, z = np.arange(na + 1), np.arange(nb + 1)
    aborts = np.abs(x[:, None] / na - z[None, :] / nb) >= tau
    want = binom.pmf(x, na, pi) * (binom.pmf(z, nb, pi)[None, :] * aborts).sum(axis=1)
    claim, w = _abort_weights(pi, na, nb, tau)
    np.testing.assert_array_equal(claim, x / na)  # every count has non-zero probability here
    np.testing.assert_allclose(w, want, rtol=1e-9, atol=1e-300)
    mass = [np.sum(want * (1 - x / na)), np.sum(want * x / na)]
    np.testing.assert_allclose(_abort_mass(pi, na, nb, tau), mass, rtol=1e-9)


def test_batch_scaling_compares_rates_per_trial_step_16x_apart():
    from bench.stochastic import batch_scaling

    out = batch_scaling(64, min_seconds=0.01, repeats=1)
    assert out["trials"] == {"small": 16, "large": 256}
    rates = out["trial_steps_per_s"]
    assert out["large_over_small"] == pytest.approx(rates["large"] / rates["small"])


def test_agreement_flags_an_acceptance_rate_beyond_its_derived_threshold():
    import statistics

    from bench.stochastic import AGREEMENT_FALSE_ALARM, agreement

    n, p1 = 10_000, 2 / 3
    se = math.sqrt(p1 * (1 - p1) / n)
    ok = agreement({"a": p1, "b": p1 + 3 * se, "c": p1 - 4 * se}, p1, n)
    # three two-sided tests sharing a false-alarm probability of 1e-4: |z| <= 4.15
    z_max = statistics.NormalDist().inv_cdf(1 - AGREEMENT_FALSE_ALARM / 6)
    assert ok["comparisons"] == 3 and ok["z_max"] == z_max and 4.1 < z_max < 4.2
    assert ok["agrees"] and ok["z_vs_P_M"]["c"] == pytest.approx(-4.0)
    bad = agreement({"a": p1, "b": p1 + 5 * se}, p1, n)
    assert not bad["agrees"]


def test_the_stochastic_bench_reports_like_for_like_ratios_beside_the_headline(monkeypatch):
    """Fake timings (seconds per call by contender) show which contenders each ratio pairs."""
    from bench import stochastic

    secs = {"count": 2.0, "decision": 1.0, "lazy": 0.1, "numpy": 1.0, "numpy_one_word_path": 0.2}
    secs |= {"rng": 0.01, "rng_per_trial": 0.02}

    def fake_time_contenders(contenders, **kw):
        return {
            name: {
                "calls": [1],
                "repeat_s": [secs[name]],
                "seconds_per_call": [secs[name]],
                "cpu_seconds_per_call": [secs[name]],
            }
            for name in contenders
        }

    monkeypatch.setattr(stochastic, "time_contenders", fake_time_contenders)
    wins = {"alice_wins": np.ones(256, bool)}  # no debate compiled: the fields are the subject
    monkeypatch.setattr(stochastic, "run_trials", lambda *a: types.SimpleNamespace(**wins))
    monkeypatch.setattr(stochastic, "batch_scaling", lambda *a: None)
    monkeypatch.setattr(stochastic, "over_cores", lambda *a: None)
    out = stochastic.run(trials=256, min_seconds=0.01, repeats=1)
    assert out["dedebate_mode"] == "bob_draw=lazy" and out["ratio_vs_numpy"] == 10.0
    assert not out["ratio_vs_numpy_like_for_like"]
    assert "different algorithms" in out["ratio_vs_numpy_compares"]
    assert out["ratio_count_vs_numpy_count_path"] == 0.5
    assert out["ratio_lazy_vs_numpy_one_word_path"] == 2.0
    assert out["ratio_lazy_vs_numpy_one_word_path_range"] == [2.0, 2.0]
    agree = out["agreement"]
    assert set(agree["z_vs_P_M"]) == {"count", "decision", "lazy", "numpy", "numpy_one_word_path"}
    assert out["acceptance_agrees_with_P_M"] == agree["agrees"]
    # every debate accepted (P_M(1) < 1): the figures are of wrong results, no goal is met
    assert out["failed_checks"] == ["acceptance_agrees_with_P_M"] and not agree["agrees"]
    assert out["meets_goal_numpy"] is False and out["meets_goal_rng"] is False
    words = 256 * 256 / 0.01  # the faster RNG kernel: one word per trial-step
    assert out["rng_words_per_s"] == pytest.approx(words)
    assert out["rng_words_per_s_per_trial"] == pytest.approx(words / 2)
    assert out["modes"]["count"]["rng_limit_trial_steps_per_s"] == pytest.approx(words / 5)
    assert out["fraction_of_rng_limit"] == pytest.approx(256 * 256 / 0.1 / words)
    assert out["dedebate_first_call_s"] == out["modes"]["lazy"]["first_call_s"] > 0


def test_the_rng_limit_times_the_words_the_modes_draw():
    """The limit's kernels draw from :func:`block_bits` (two words a threefry block), the modes'
    generator, not from ``jax.random.uniform`` (one block a word, half the rate)."""
    import jax

    from bench.stochastic import rng_kernels
    from dedebate.core.binomial_stream import block_bits
    from dedebate.protocols.stochastic import trial_keys

    keys = trial_keys(jax.random.key(0), 8)
    kernels = rng_kernels(keys, 16)
    flat, lanes = kernels["rng"](), kernels["rng_per_trial"]()
    assert np.array_equal(flat, block_bits(jax.random.key(1), 128))
    assert lanes.shape == (8, 16) and lanes.dtype == np.uint32
    for i in range(8):
        assert np.array_equal(lanes[i], block_bits(keys[i], 16))
