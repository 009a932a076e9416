"""The players: honest and adversarial strategies (the zoos) and learned policies.

Each module implements the player interface its protocol owns (``dedebate.protocols``):
deterministic debates (``deterministic_*``), the stochastic-oracle debate (``stochastic_*``,
``selfplay_players``) and prover-estimator debate (``ped_*``, ``learned``).
"""
