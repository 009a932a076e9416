"""Exact evaluation: quantities computed exactly (float64, on the host) for small instances, to
check the Monte Carlo play of the protocols and the trained players against.

* :mod:`~dedebate.exact.acceptance` -- the stochastic-oracle debate's acceptance probability
  ``P[out = 1]`` for honest players and the zoos, by backward DP over the prefix tree.
"""

from dedebate.exact.acceptance import (
    SD_RANGE,
    TIE_TOL,
    acceptance_exact,
    acceptance_exact_many,
    binomial_law,
    checker_prob,
    real,
)

__all__ = ["SD_RANGE", "TIE_TOL", "acceptance_exact", "acceptance_exact_many", "binomial_law",
           "checker_prob", "real"]
