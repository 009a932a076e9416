"""Small shared pure helpers: exact binomial draws (``binomial``), the checker's exact dyadic
arithmetic (``dyadic``), bit tables, simplex projection, sample counts, fits and intervals
(``stats``) and pytree stacking."""

from dedebate.core.lazy import lazy_exports

# module -> the public names it defines (imported on first use: dedebate.core.lazy)
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "binomial": (
            "UniformStream binom_lower_tail binom_lower_tail_sample block_bits block_uniforms "
            "decide_outside decision_gate log_pmf outside_probability sample_binomial stirlerr "
            "stream_binomial stream_binomial_fast stream_length uniform_stream"
        ),
        "bits": "bit_table bits_to_code",
        "dyadic": "checker_bounds computed_once ratio_f32",
        "pytrees": "stack",
        "samples": "hoeffding_samples",
        "simplex": "project_rows project_rows_pairwise project_rows_to_simplex",
        "stats": (
            "finite_linfit finite_loglog_slope linfit linfit_jnp loglog_slope loglog_slope_jnp "
            "nan_last wilson_jnp"
        ),
    },
)
