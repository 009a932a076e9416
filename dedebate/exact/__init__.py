"""Exact evaluation: quantities computed exactly (float64, on the host) for small instances, to
check the Monte Carlo play of the protocols and the trained players against.

* :mod:`~dedebate.exact.acceptance` -- the stochastic-oracle debate's acceptance probability
  ``P[out = 1]`` for honest players and the zoos, by backward DP over the prefix tree.
* :mod:`~dedebate.exact.best_response` -- the same DP for the best response of Bob to any Alice
  and of Alice to honest Bob: the worst any adversary can do.
"""

from dedebate.core.lazy import lazy_exports

# module -> the public names it defines (imported on first use: dedebate.core.lazy)
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "acceptance": (
            "SD_RANGE TAIL_EXPONENT TIE_TOL acceptance_exact acceptance_exact_many binomial_law "
            "checker_prob checker_window claim_law count_range ratio_f32 real window_prob"
        ),
        "best_response": "alice_best_response bob_best_response",
        "selfplay": (
            "against_honest_bob alice_best_response_bounds dp_value honest_alice_against "
            "level_inputs measure_pair measure_pairs policy_levels policy_nodes probe_deviations "
            "reach_levels split_levels take"
        ),
    },
)
