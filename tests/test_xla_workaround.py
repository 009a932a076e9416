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


def test_flag_is_added_only_for_jaxlib_versions_that_know_it(monkeypatch):
    """Older jaxlib aborts at its first computation on an unknown flag in XLA_FLAGS (0.8.0 and
    older do on this one), so the work-around leaves XLA_FLAGS alone there."""
    from dedebate._xla_flags import YNN_FLAG, apply_cpu_workaround, jaxlib_version

    monkeypatch.delenv("DEDEBATE_KEEP_XLA_FLAGS", raising=False)
    for version, added in (((0, 10, 2), True), ((0, 8, 1), True), ((0, 12, 0, 20270101), True),
                           ((0, 8, 0), False), ((0, 4, 35), False)):
        monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
        apply_cpu_workaround(version)
        assert (YNN_FLAG in os.environ["XLA_FLAGS"]) == added, version
        assert os.environ["XLA_FLAGS"].startswith("--xla_dump_to=/tmp/x")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=")  # the user's
    apply_cpu_workaround((0, 10, 2))
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_experimental_ynn_fusion_type="
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("DEDEBATE_KEEP_XLA_FLAGS", "1")
    apply_cpu_workaround((0, 10, 2))
    assert os.environ["XLA_FLAGS"] == ""
    assert jaxlib_version() >= (0, 8, 1)  # the installed one gets the flag (test above)
