"""dedebate: executable, measured and trainable simulators of AI-safety debate protocols.

Doubly-efficient debate (Brown-Cohen, Irving, Piliouras, arXiv 2311.14125) and prover-estimator
debate (arXiv 2506.13609), as pure JAX functions vmapped over trials, inputs and hyperparameters.
"""

from dedebate._xla_flags import apply_cpu_workaround

apply_cpu_workaround()

__version__ = "0.2.0"
