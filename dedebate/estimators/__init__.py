"""Outcome indistinguishability (spec PED 5-6): B's estimators and the tests they must fool.

* :mod:`~dedebate.estimators.families` -- test families F ("prover circuits"): random tanh tests,
  Flax MLP distinguishers, the spec 6.3 round-reward and calibration tests, unions;
* :mod:`~dedebate.estimators.advantage` -- exact ``Adv_f(h)`` over a finite context set;
* :mod:`~dedebate.estimators.ogd` -- Algorithm 1 (tabular OGD) with its iteration bound;
* :mod:`~dedebate.estimators.network`, :mod:`~dedebate.estimators.train` -- a Flax estimator
  trained by OGD toward (delta, F)-indistinguishability;
* :mod:`~dedebate.estimators.soundness` -- B built round by round against a fixed A (Lemma A.4).
"""

from dedebate.core.lazy import lazy_exports

# module -> the public names it defines (imported on first use: dedebate.core.lazy)
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "advantage": (
            "OIProblem advantage_weight advantages max_abs_advantage oi_problem random_oi_problem"
        ),
        "families": (
            "Family PointwiseFamily StackedFamily TableFamily TanhFamily calibration_family "
            "mlp_test_input random_mlp_family random_tanh_family round_reward_family "
            "stack_families table_family tanh_family"
        ),
        "network": "EstimatorNet",
        "ogd": (
            "OGDState OGDStatic OGDSummary algorithm1 iteration_bound ogd_init ogd_run_steps "
            "ogd_solve ogd_update regret_bound solve_block solve_grid step_size summarize"
        ),
        "soundness": (
            "ProverCalibrationFamily SoundnessReport StageReport construct_estimator "
            "prover_calibration_family"
        ),
        "train": (
            "NetTrainLog NetTrainParams NetTrainState NetTrainStatic grid_programs make_chunk "
            "make_chunk_grid make_init make_init_grid make_train make_train_grid net_train_params"
        ),
    },
)
