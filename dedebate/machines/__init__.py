"""What is debated in doubly-efficient debate: oracle machines, oracles, fixtures (spec DED 3, 9)."""

from dedebate.machines.oracles import (
    HashedOracle,
    NeuralOracle,
    PositionOracle,
    PrefixMeanOracle,
    TableOracle,
    hashed_oracle,
    neural_oracle,
    position_oracle,
    table_oracle,
)
from dedebate.machines.program import (
    COIN,
    DET,
    ORACLE,
    Machine,
    StepProgram,
    exact_output_prob,
    make_step_program,
    sample_transcript,
    sample_transcripts,
    transcript_log_prob,
)

__all__ = [
    "COIN", "DET", "ORACLE", "Machine", "StepProgram", "exact_output_prob", "make_step_program",
    "sample_transcript", "sample_transcripts", "transcript_log_prob",
    "HashedOracle", "NeuralOracle", "PositionOracle", "PrefixMeanOracle", "TableOracle",
    "hashed_oracle", "neural_oracle", "position_oracle", "table_oracle",
]
