"""Parameters of the stochastic debate (spec DED 5.2-5.4): sample counts, validator, bounds."""

import dataclasses
import math

import pytest

from dedebate.protocols.stochastic import (
    DebateStatic,
    LeanParams,
    lean_defaults,
    paper_constants,
)


@pytest.mark.parametrize(
    "K,T,n_a,n_b,n_v",
    [  # the table of spec DED 5.2
        (1, 10, 38_005, 16_891, 105_967),
        (1, 100, 49_518, 22_008, 105_967),
        (1, 10**6, 95_570, 42_476, 105_967),
        (2, 100, 198_070, 88_032, 423_866),
        (10, 100, 4_951_744, 2_200_776, 10_596_635),
    ],
)
def test_sample_counts_equal_the_spec_table(K, T, n_a, n_b, n_v):
    c = lean_defaults(K, T).constants(K, T)
    assert (c.n_alice, c.n_bob, c.n_vera) == (n_a, n_b, n_v)
    assert c.tau_bob == pytest.approx(0.035 / K, rel=1e-12)
    assert c.tau_vera == pytest.approx(0.015 / K, rel=1e-12)


@pytest.mark.parametrize("K,T", [(1, 10), (2, 100), (4, 1024), (10, 100)])
def test_closed_forms_of_the_counts(K, T):
    """N_A = ceil(5000 K^2 ln(200T)), N_B = ceil((20000/9) K^2 ln(200T)),
    N_V = ceil(20000 K^2 ln 200) (spec DED 5.2), up to the float rounding of c, s, b."""
    c = lean_defaults(K, T).constants(K, T)
    assert abs(c.n_alice - 5000 * K * K * math.log(200 * T)) <= 1
    assert abs(c.n_bob - 20000 / 9 * K * K * math.log(200 * T)) <= 1
    assert abs(c.n_vera - 20000 * K * K * math.log(200)) <= 1


def test_default_guarantees_match_the_lean_numbers():
    K, T = 2, 100
    comp, sound = lean_defaults(K, T).check(K, T)  # w = 2/3, d = 3/5
    # spec DED 5.3: 0.99 (2/3 - K c - (1 - (1-q)^T)) and 0.99 (1-q)^T (2/3 - K b)
    assert comp == pytest.approx(0.99 * (2 / 3 - 0.01 - (1 - (1 - 1 / (100 * T)) ** T)))
    assert comp == pytest.approx(0.6402, abs=1e-4)
    assert sound == pytest.approx(0.99 * (1 - 1 / (100 * T)) ** T * (2 / 3 - 0.05))
    assert 1 - sound == pytest.approx(0.3956, abs=2e-4)
    assert comp >= 3 / 5 and sound >= 3 / 5


def test_validator_rejects_bad_parameters():
    with pytest.raises(ValueError, match="0 < c < s < b"):
        LeanParams(c=0.02, s=0.01, b=0.05, q=0.01, v=0.01)
    with pytest.raises(ValueError, match="q <= v"):
        LeanParams(c=0.01, s=0.02, b=0.05, q=0.1, v=0.01)
    p = LeanParams(c=0.01, s=0.02, b=0.3, q=0.001, v=0.01)
    with pytest.raises(ValueError, match="k\\*b <= w"):
        p.check(K=3, T=10)
    with pytest.raises(ValueError, match="completeness fails"):
        LeanParams(c=0.01, s=0.02, b=0.05, q=0.01, v=0.01).check(K=1, T=100)
    with pytest.raises(ValueError, match="K=0"):
        lean_defaults(0, 10)
    with pytest.raises(ValueError, match="T=0"):
        lean_defaults(1, 0)


def test_paper_constants():
    c = paper_constants(1, 100)
    d = 150
    assert c.n_alice == math.ceil(192 * d * d * math.log(100 * 100))
    assert c.n_alice == c.n_bob
    assert c.n_vera == math.ceil(192 * d * d * math.log(100))
    assert c.tau_bob == 1 / (2 * d) and c.tau_vera == 1 / (4 * d)
    assert 3.9e7 < c.n_alice < 4.0e7  # spec DED 5.4: R ~ 3.98e7 for K=1, T=100
    with pytest.raises(ValueError, match=r"exceeds 2\^30 - 1"):
        paper_constants(10, 1000)
    # the exact checker decides counts below 2^30: K = 4 at T = 60,000 needs 2^30 + 1.3e7
    assert paper_constants(4, 50_000).n_alice < 2**30 < math.ceil(192 * 600**2 * math.log(6e6))
    with pytest.raises(ValueError, match=r"exceeds 2\^30 - 1"):
        paper_constants(4, 60_000)
    # d = ceil(150 K) for K as written, not for its float: 150 x 0.14 = 21, 150 x 1.12 = 168
    for K, d in ((0.14, 21), (1.12, 168), (0.5, 75), (1 / 3, 50)):
        assert paper_constants(K, 10).tau_bob == 1 / (2 * d)


def test_scaled_and_spec_validation():
    c = lean_defaults(2, 8).constants(2, 8)
    h = c.scaled(0.5)
    assert h.n_alice == math.ceil(c.n_alice / 2) and h.tau_bob == c.tau_bob
    with pytest.raises(ValueError, match="factor"):
        c.scaled(0.0)
    for n in (0, 2**30):  # the checker's integer rule holds for counts in [1, 2^30 - 1]
        with pytest.raises(ValueError, match=rf"n_vera={n}: a sample count must be in"):
            dataclasses.replace(c, n_vera=n)
    with pytest.raises(ValueError, match="estimator"):
        DebateStatic(T=8, estimator="normal")
    with pytest.raises(ValueError, match="T=0"):
        DebateStatic(T=0)
