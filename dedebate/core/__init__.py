"""Small shared pure helpers: sample counts, bit tables, simplex projection."""

from dedebate.core.bits import bit_table
from dedebate.core.samples import hoeffding_samples
from dedebate.core.simplex import project_rows, project_rows_pairwise, project_rows_to_simplex

__all__ = [
    "bit_table",
    "hoeffding_samples",
    "project_rows",
    "project_rows_pairwise",
    "project_rows_to_simplex",
]
