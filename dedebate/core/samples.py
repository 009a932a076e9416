"""Host-side sample counts, exact (passed to jitted code as static ints)."""

import decimal
import math


def hoeffding_samples(e: float, delta: float) -> int:
    """Lean's ``samples e delta = ceil(ln(2/delta) / (2 e^2))`` (spec DED 5.1), a Python int.

    The smallest N with Hoeffding's two-sided bound ``2 exp(-2 N e^2) <= delta``; ``e > 0`` finite,
    ``delta`` in ``(0, 1]``. Computed in decimals from the floats' exact values, 60 digits past
    the quotient's integer part: float64 put a quotient within 1e-11 of an integer on the wrong
    side, and overflowed for tiny ``e`` or ``delta``.
    """
    if not (e > 0 and math.isfinite(e)):
        raise ValueError(f"e={e!r}: the accuracy must be a positive finite number")
    if not (0 < delta <= 1):
        raise ValueError(f"delta={delta!r}: the failure probability must lie in (0, 1]")

    def quotient(digits: int) -> decimal.Decimal:
        with decimal.localcontext() as ctx:
            ctx.prec = digits
            return (2 / decimal.Decimal(delta)).ln() / (2 * decimal.Decimal(e) ** 2)

    integer_digits = max(0, quotient(60).adjusted() + 1)
    exact = quotient(60 + integer_digits)
    return int(exact.to_integral_value(rounding=decimal.ROUND_CEILING))
