"""``dedebate/core/stats.py``: the host fits, their jnp twins, and the jnp Wilson interval."""

from __future__ import annotations

import numpy as np
import pytest

from dedebate.core.stats import linfit, linfit_jnp, loglog_slope, loglog_slope_jnp, wilson_jnp
from dedebate.lab.experiment import wilson_interval


def test_fits_recover_a_line_and_a_power_law_on_host_and_in_jnp():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    a, b, r2 = linfit(x, 3.0 * x - 2.0)
    assert (a, b, r2) == pytest.approx((3.0, -2.0, 1.0), abs=1e-9)
    assert loglog_slope(x, 5.0 * x**1.5) == pytest.approx(1.5, abs=1e-9)
    y = np.array([1.0, 3.0, 2.0, 5.0, 4.0])  # noisy: the two fits must agree, R^2 < 1
    host, jitted = linfit(x, y), [float(v) for v in linfit_jnp(x, y)]
    assert jitted == pytest.approx(list(host), rel=1e-5) and host[2] < 0.9
    assert float(loglog_slope_jnp(x, y)) == pytest.approx(loglog_slope(x, y), rel=1e-5)
    small = y / 1000  # R^2 is scale-free, also where the sums of squares are far below 1
    assert linfit(x, small)[2] == pytest.approx(np.corrcoef(x, small)[0, 1] ** 2, rel=1e-9)
    assert float(linfit_jnp(x, small)[2]) == pytest.approx(host[2], rel=1e-5)
    with pytest.raises(ValueError, match="length >= 2"):
        linfit([1.0], [2.0])


def test_wilson_jnp_matches_the_lab_interval():
    for k, n in ((0, 100), (1, 100), (37, 200), (133, 200), (400, 400)):
        got = [float(v) for v in wilson_jnp(k, n)]
        assert got == pytest.approx(list(wilson_interval(k, n)), abs=1e-6), (k, n)


def test_wilson_jnp_holds_its_estimate_at_the_ends():
    """At ``k = 0`` and ``k = n`` float32 rounding put an end of the interval past ``p_hat``
    (``hi = 0.99999994`` at 16 of 16); the interval holds it, as the host one does."""
    for n in range(1, 400):
        for k in (0, n):
            p, lo, hi = (float(v) for v in wilson_jnp(k, n))
            assert lo <= p <= hi, (k, n, lo, p, hi)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="trials="):
            wilson_jnp(1, bad)
