"""Training of learned players: Stackelberg self-play for prover-estimator debate and self-play
for the stochastic debate (spec PED 10.3, spec DED 5.7)."""
