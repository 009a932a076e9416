"""Host-side sample counts (computed in float64, passed to jitted code as static ints)."""

import math


def hoeffding_samples(e: float, delta: float) -> int:
    """Lean's ``samples e delta = ceil(ln(2/delta) / (2 e^2))`` (spec DED 5.1), a Python int.

    The smallest N with Hoeffding's two-sided bound ``2 exp(-2 N e^2) <= delta``; ``e > 0`` finite,
    ``delta`` in ``(0, 1]``.
    """
    if not (e > 0 and math.isfinite(e)):
        raise ValueError(f"e={e!r}: the accuracy must be a positive finite number")
    if not (0 < delta <= 1):
        raise ValueError(f"delta={delta!r}: the failure probability must lie in (0, 1]")
    return int(math.ceil(math.log(2.0 / delta) / (2.0 * e * e)))
