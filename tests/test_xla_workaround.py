"""The XLA CPU miscompilation dedebate works around (see dedebate/_xla_flags.py) stays fixed."""

import os

import jax
import jax.numpy as jnp
import numpy as np

import dedebate  # noqa: F401  (applies the work-around)
from tests.conftest import XLA_DEFAULTS


def test_ynn_reduce_fusion_flag_is_set():
    assert "xla_cpu_experimental_ynn_fusion_type" in os.environ.get("XLA_FLAGS", "")


def test_fused_broadcast_matmul_reduction_is_correct_under_jit():
    rng = np.random.default_rng(0)
    wz = jnp.asarray(rng.normal(size=(4, 40)), jnp.float32)
    wh = jnp.asarray(rng.normal(size=(40, 4)), jnp.float32)

    def f(wz, wh):
        return jnp.sum(wz[:, :, None] + (wh @ jnp.full((4, 50), 0.25))[None], axis=2)

    expected = np.asarray(wz)[:, :, None] + (np.asarray(wh) @ np.full((4, 50), 0.25))[None]
    expected = expected.sum(axis=2)
    # compiled as users' programs are (the tests' own options use other fusion emitters)
    got = np.asarray(jax.jit(f).lower(wz, wh).compile(XLA_DEFAULTS)(wz, wh))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)
