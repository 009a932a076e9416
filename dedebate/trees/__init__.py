"""What is debated in prover-estimator debate: complete q-ary claim trees (spec PED 1, 3, 9)."""

from dedebate.core.lazy import lazy_exports

# module -> the public names it defines (imported on first use: dedebate.core.lazy)
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "library": (
            "CandidateRule and_rule and_table and_tree build_tree dictator_table hidden_flaw_tree "
            "majority_table noisy_evidence_tree or_table parity_table random_tree threshold_rule "
            "threshold_table unanimous_tree"
        ),
        "stability": (
            "child_codes_jnp error_shifting_table error_shifting_table_jnp fbs fbs_and "
            "fbs_dictator fbs_dual fbs_majority fbs_or fbs_parity fbs_threshold flip_probability "
            "lp_lookup node_fbs node_fbs_jnp sensitive_blocks tree_rho"
        ),
        "tree": (
            "MAX_Q ClaimTree check_decomposable check_sizes child_codes level_offset n_nodes "
            "truth_code"
        ),
    },
)
