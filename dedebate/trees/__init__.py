"""What is debated in prover-estimator debate: complete q-ary claim trees (spec PED 1, 3, 9)."""

from dedebate.trees.library import (
    CandidateRule,
    and_rule,
    and_table,
    and_tree,
    build_tree,
    dictator_table,
    hidden_flaw_tree,
    majority_table,
    noisy_evidence_tree,
    or_table,
    parity_table,
    random_tree,
    threshold_rule,
    threshold_table,
    unanimous_tree,
)
from dedebate.trees.tree import (
    MAX_Q,
    ClaimTree,
    check_decomposable,
    check_sizes,
    child_codes,
    level_offset,
    n_nodes,
    truth_code,
)

__all__ = [
    "MAX_Q", "CandidateRule", "ClaimTree", "and_rule", "and_table", "and_tree", "build_tree",
    "check_decomposable", "check_sizes", "child_codes", "dictator_table", "hidden_flaw_tree",
    "level_offset", "majority_table", "n_nodes", "noisy_evidence_tree", "or_table", "parity_table",
    "random_tree", "threshold_rule", "threshold_table", "truth_code", "unanimous_tree",
]
