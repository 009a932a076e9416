"""One pure ``play`` per protocol, the player interfaces it calls, and their outcomes.

Doubly-efficient debate (spec DED 5-8): the stochastic-oracle debate (``stochastic*``), the
deterministic debates with cross-examination, binary search and a witness (``cross_exam``,
``binary_search``, ``det_witness``, ``witness``); prover-estimator debate and its naive baseline
(spec PED 2; ``prover_estimator``, ``naive_recursive``); the shared costs record (``costs``).
"""
