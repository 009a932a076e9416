"""Stochastic-oracle debate core: host-side constants (spec DED 5.2) and exact binomial counts.

The protocol's own behaviour (honest vs zoo against the proven bounds) is exercised by
``notebooks/01_stochastic_debate.ipynb`` (run by ``tests/conventions/test_notebooks.py``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dedebate.core.binomial import sample_binomial
from dedebate.protocols.stochastic import lean_defaults
from tests.fakes import LIGHT_COMPILE


def test_lean_default_guarantees_match_spec_5_3():
    K, T = 1, 100
    params = lean_defaults(K, T)
    completeness, soundness = params.check(K, T)
    # spec DED 5.3: 0.99 (2/3 - 0.01 - 0.01) >= 0.6402 ; 0.99^2 (2/3 - 0.05) ~ 0.6044
    assert completeness == pytest.approx(
        0.99 * (2 / 3 - 0.01 - (1 - (1 - 1 / (100 * T)) ** T)), abs=1e-12
    )
    assert completeness >= 0.6402 - 1e-4
    assert soundness == pytest.approx(0.99 * (1 - 1 / (100 * T)) ** T * (2 / 3 - 0.05), abs=1e-12)


# One compiled program for every (n, p) below: they are traced arguments, not constants.
_draw = jax.jit(jax.vmap(sample_binomial, in_axes=(0, None, None)), compiler_options=LIGHT_COMPILE)
DRAWS = 50_000


@pytest.mark.parametrize("n,p", [(5, 0.5), (40, 0.2), (20, 0.9), (1000, 0.3), (100_000, 0.02)])
def test_binomial_counts_are_exact_in_distribution(n, p):
    """Chi-square goodness of fit of 50,000 draws against the exact Binomial(n, p) pmf."""
    keys = jax.random.split(jax.random.key(7), DRAWS)
    counts = np.asarray(_draw(keys, jnp.int32(n), jnp.float32(p)))
    law = stats.binom(n, p)
    lo, hi = int(law.ppf(0.001)), int(law.ppf(0.999))
    support = np.arange(lo, hi + 1)
    observed = np.array(
        [(counts < lo).sum()] + [(counts == k).sum() for k in support] + [(counts > hi).sum()]
    )
    expected = np.array([law.cdf(lo - 1)] + list(law.pmf(support)) + [law.sf(hi)]) * counts.size
    keep = expected > 5
    chi2 = float(((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3
    assert counts.min() >= 0 and counts.max() <= n


def test_binomial_degenerate_probabilities_are_exact():
    keys = jax.random.split(jax.random.key(3), DRAWS)  # the shape above: the same program
    assert (np.asarray(_draw(keys, jnp.int32(1000), jnp.float32(0.0))) == 0).all()
    assert (np.asarray(_draw(keys, jnp.int32(1000), jnp.float32(1.0))) == 1000).all()
    assert (np.asarray(_draw(keys, jnp.int32(0), jnp.float32(0.5))) == 0).all()
