"""What doubly-efficient debate debates: oracle machines, oracles, fixtures (spec DED 3, 9)."""

from dedebate.core.lazy import lazy_exports

# module -> the public names it defines (imported on first use: dedebate.core.lazy)
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "configurations": (
            "ConfigMachine check_deterministic clog2 config_machine consistency index_tree "
            "local_bit local_bits_numpy max_dep_distance num_deps random_programs run_program "
            "simulate_numpy"
        ),
        "fixtures": (
            "CascadeMachine Fixture MeanFinalMachine SumState ThresholdSumMachine and_fixture f1 "
            "f1_target f2 f2_target f3_cascade f3_target fixture_for_k majority meta_analysis "
            "or_fixture spread_probs standard_fixtures threshold_lipschitz"
        ),
        "lean": "LeanMachine f2_lean lean_machine polya_urn",
        "lipschitz": (
            "LipschitzEstimate estimate_lipschitz estimate_lipschitz_jnp hybrid_bound prefix_tree "
            "step_probs tree_from_step_probs tree_gradient tree_influences tree_matrix_jnp "
            "tree_output_prob tree_transcripts"
        ),
        "oracles": (
            "AffineMeanOracle HashedOracle JudgeMLP NeuralOracle Oracle PositionOracle "
            "PrefixMeanOracle TableOracle affine_mean_oracle check_probabilities hashed_oracle "
            "neural_oracle position_oracle query_code table_oracle"
        ),
        "program": (
            "Machine StepProgram count_ones exact_output_prob make_step_program sample_transcript "
            "sample_transcripts step_uniforms transcript_from_uniforms transcript_log_prob"
        ),
    },
)
