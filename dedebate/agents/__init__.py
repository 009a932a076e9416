"""The players: honest and adversarial strategies (the zoos) and learned policies.

Each module implements the player interface its protocol owns (``dedebate.protocols``):
deterministic debates (``deterministic_*``), the stochastic-oracle debate (``stochastic_*``,
``selfplay_players``) and prover-estimator debate (``ped_*``, ``learned``).
"""

from dedebate.core.lazy import lazy_exports

# module -> the public names it defines (imported on first use: dedebate.core.lazy)
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "deterministic_grids": "grid_cells honest_costs judged_counts play_grid witness_suite",
        "deterministic_players": (
            "concat configuration_lies det_alice_zoo det_bob_zoo det_honest_alice judge_grid "
            "make_alice make_bob merge_judged repeat zoo_pairs"
        ),
        "learned": "MLP LearnedEstimator LearnedProver init_estimator init_prover",
        "ped_strategies": (
            "CalibratedEstimator ConstantEstimator ErrorShiftingEstimator HonestEstimator "
            "RootLiarEstimator ScriptedProver TabularEstimator constant_estimator "
            "error_shifting_estimator honest_prover lie_then_honest_prover obfuscating_liar "
            "random_joint_estimator scripted_prover tabulate unstable_prover wrong_direction_prover"
        ),
        "selfplay_players": (
            "AliceParams BobParams LearnedAlice alice_claim bob_abort bob_as_zoo bob_logit "
            "init_alice init_bob learned_alice level_codes node_features"
        ),
        "stochastic_players": (
            "HonestAlice HonestBob SearchResult ZooAlice ZooBob alice_lies_from_params "
            "bob_logits_from_params completeness_zoo evolution_strategy honest_alice honest_bob "
            "optimise_alice optimise_bob soundness_zoo zoo_alice zoo_bob"
        ),
        "stochastic_zoo": (
            "alice_members bob_members cell_metrics compile_options lane_bytes measure_cell "
            "member_names zoo_cell zoo_stats"
        ),
    },
)
