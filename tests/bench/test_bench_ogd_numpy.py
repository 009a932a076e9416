"""The numpy reference of ``dedebate bench ogd`` (bench/ogd_numpy.py): its chunk size changes its
speed only, never its results."""

import numpy as np

from bench.ogd_numpy import CHUNK, NumpyTanhOGD


def test_advantages_are_bit_identical_whatever_the_chunk():
    rng = np.random.default_rng(0)
    n_x, n_z, n_f, d = 300, 4, 10, 3
    args = (
        rng.normal(size=(n_x, d)),
        rng.normal(size=(n_f, d + 2 * n_z + 2)),
        rng.dirichlet(np.ones(n_x)),
        rng.dirichlet(np.ones(n_z), n_x),
    )
    h = rng.dirichlet(np.ones(n_z), n_x).astype(np.float32)
    assert NumpyTanhOGD(*args).chunk == CHUNK
    ref = NumpyTanhOGD(*args, chunk=n_f).advantages(h)
    for chunk in (1, 3, 8):
        assert np.array_equal(NumpyTanhOGD(*args, chunk=chunk).advantages(h), ref)
