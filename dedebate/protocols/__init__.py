"""One pure ``play`` per protocol, the player interfaces it calls, and their outcomes.

Doubly-efficient debate (spec DED 5-8): the stochastic-oracle debate (``stochastic*``), the
deterministic debates with cross-examination, binary search and a witness (``cross_exam``,
``binary_search``, ``det_witness``, ``witness``); prover-estimator debate and its naive baseline
(spec PED 2; ``prover_estimator``, ``naive_recursive``); the shared costs record (``costs``).
"""

from dedebate.core.lazy import lazy_exports

# module -> the public names it defines (imported on first use: dedebate.core.lazy)
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "binary_search": "play_binary_search",
        "costs": "Costs",
        "cross_exam": "DetOutcome grid play_cross_exam verify",
        "det_witness": (
            "WitnessTask accepting_witnesses all_witnesses constraint_task plan_task play_witness "
            "with_witness witness_programs"
        ),
        "deterministic_players": (
            "Alice Bob MessageAlice alice_config alice_cost alice_transcript bob_bit bob_pointer"
        ),
        "naive_recursive": (
            "InformedChallenger NaiveDebater NaiveOutcome UniformChallenger naive_debater "
            "play_naive survival_probability"
        ),
        "prover_estimator": (
            "ExpectedPayoff PEDOutcome PEDParams PEDStatic all_paths expected_payoff ped_params "
            "sample_index"
        ),
        "prover_estimator_interface": "Estimator Prover",
        "stochastic": "DebateStatic debate_static play_fast play_trials trial_keys",
        "stochastic_batch": "replay_chunk replay_unresolved run_trials",
        "stochastic_constants": "DebateParams LeanParams lean_defaults paper_constants",
        "stochastic_interface": (
            "AlicePlayer BobPlayer Vera checker_interval make_vera two_party_coin"
        ),
        "stochastic_lazy": (
            "cheap_path check_players lazy_gate lazy_level play_lazy rare_step typical_set"
        ),
        "stochastic_scan": (
            "DebateCarry Outcome StepView checker_accepts debate_chunks initial_carry outcome_of "
            "scan_debate"
        ),
        "witness": "MetaAnalysisTask meta_analysis_task no_task witness_debate yes_task",
    },
)
