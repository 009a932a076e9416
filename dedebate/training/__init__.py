"""Training of learned players: Stackelberg self-play for prover-estimator debate and self-play
for the stochastic debate (spec PED 10.3, spec DED 5.7)."""

from dedebate.core.lazy import lazy_exports

# module -> the public names it defines (imported on first use: dedebate.core.lazy)
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "exploit": "class_exploit_payoff exploit_payoff",
        "stackelberg": (
            "Carry StackelbergMonitors StackelbergParams StackelbergStatic TrainState adam_step "
            "advantage_at first_converged init_state payoff payoff_terms players "
            "stackelberg_params summary templates"
        ),
        "stochastic_selfplay": (
            "SelfPlayCarry SelfPlayMonitors SelfPlayParams SelfPlayStatic carry_axes chunk_grid "
            "chunk_lengths init_grid make_train_bob n_periods selfplay_params surrogate_value "
            "tracking_error train_grid vera_surrogate"
        ),
    },
)
