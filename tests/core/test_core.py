"""dedebate.core: bit tables, Hoeffding sample counts, row-wise simplex projection."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.core import bit_table, hoeffding_samples, project_rows_to_simplex
from dedebate.core.bits import bits_to_code


def test_bit_table_round_trips_codes():
    for q in range(7):
        table = bit_table(q)
        assert table.shape == (2**q, q)
        np.testing.assert_array_equal(bits_to_code(table), np.arange(2**q))


def test_bit_table_rejects_huge_q():
    with pytest.raises(ValueError, match="q=21"):
        bit_table(21)


@pytest.mark.parametrize(
    "e,delta,expected",
    [  # Lean's samples(e, delta) for the default Alice (c, q) with K=1: spec DED 5.2 table
        (1 / 100, 1 / 1000, 38005),
        (1 / 100, 1 / 10000, 49518),
        (1 / 200, 1 / 100, 105967),
    ],
)
def test_hoeffding_samples_match_lean_formula(e, delta, expected):
    n = hoeffding_samples(e, delta)
    assert n == expected
    # n is the smallest count meeting Hoeffding's bound 2 exp(-2 n e^2) <= delta.
    assert 2 * math.exp(-2 * n * e * e) <= delta < 2 * math.exp(-2 * (n - 1) * e * e)


def test_hoeffding_samples_is_the_smallest_count_even_near_integers_and_at_tiny_inputs():
    """Checked by Hoeffding's bound itself in 80-digit decimals (``exp``, not ``ln``): pairs whose
    quotient lies within about 1e-11 of an integer, where float64's ceiling can be one below,
    and inputs so small that float64 overflowed (``2 / delta``, ``1 / e^2``)."""
    import decimal
    from decimal import Decimal

    rng = np.random.default_rng(0)
    pairs = [(1e-160, 0.5), (0.1, 1e-320), (0.02, 0.05)]
    for target in rng.integers(10, 10**6, 40):  # delta = 2 exp(-2 N e^2) for an integer N
        e = float(rng.uniform(0.001, min(0.3, math.sqrt(300 / target))))  # delta > 1e-300
        pairs.append((e, 2 * math.exp(-2 * int(target) * e * e)))
    with decimal.localcontext() as ctx:
        ctx.prec = 400  # N reaches 10^320 at e = 1e-160
        for e, delta in pairs:
            n = hoeffding_samples(e, delta)

            def bound(m, e=e):
                return 2 * (-2 * m * Decimal(e) ** 2).exp()

            assert bound(n) <= Decimal(delta) < bound(n - 1), (e, delta, n)


@pytest.mark.parametrize("e,delta", [(0.0, 0.1), (-1.0, 0.1), (0.1, 0.0), (0.1, 1.5)])
def test_hoeffding_samples_rejects_bad_input(e, delta):
    with pytest.raises(ValueError):
        hoeffding_samples(e, delta)


def test_simplex_projection_rows():
    v = jnp.array([[0.5, 0.9, -1.0], [0.2, 0.2, 0.2], [3.0, 0.0, 0.0]])
    p = np.asarray(project_rows_to_simplex(v))
    np.testing.assert_allclose(
        p, [[0.3, 0.7, 0.0], [1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0]], atol=1e-6
    )


def test_bits_to_code_refuses_what_is_not_a_bit():
    """``[2, 0]`` read as the code of ``[0, 1]``, 0.7 as 0 and -1 as a negative code."""
    for bad in ([2, 0], [0.7, 1], [-1, 0]):
        with pytest.raises(ValueError, match="0 or 1"):
            bits_to_code(bad)
