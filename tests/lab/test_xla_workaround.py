"""The XLA CPU miscompilation dedebate works around (see dedebate/_xla_flags.py) stays fixed."""

import os

import jax
import jax.numpy as jnp
import numpy as np

import dedebate  # noqa: F401  (applies the work-around)
from tests.conftest import XLA_DEFAULTS


def test_ynn_reduce_fusion_flag_is_set_where_the_installed_jaxlib_needs_it():
    from dedebate._xla_flags import jaxlib_version, needs_cpu_workaround

    set_ = "xla_cpu_experimental_ynn_fusion_type" in os.environ.get("XLA_FLAGS", "")
    assert set_ == needs_cpu_workaround(jaxlib_version())


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


def test_flag_is_added_only_for_the_checked_jaxlib_versions_that_need_it(monkeypatch):
    """XLA aborts at its first computation on an unknown flag in XLA_FLAGS (0.8.0 and older do on
    this one, and a newer jaxlib may rename it), so only the checked range gets it."""
    from dedebate import _xla_flags
    from dedebate._xla_flags import YNN_FLAG, apply_cpu_workaround

    checked = (_xla_flags.FIRST_JAXLIB_NEEDING_FLAG, _xla_flags.LAST_JAXLIB_NEEDING_FLAG)
    assert checked == ((0, 10, 2), (0, 11, 2))  # the version table in the module's comments
    monkeypatch.delenv("DEDEBATE_KEEP_XLA_FLAGS", raising=False)
    for version, added in (
        ((0, 10, 2), True),
        ((0, 10, 2, 1), True),
        ((0, 10, 1), False),
        ((0, 11, 2), True),
        ((0, 11, 3), False),
        ((99, 0, 0), False),
        ((0, 12, 0, 20270101), False),
        ((0, 8, 0), False),
        ((0, 4, 35), False),
    ):
        monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
        apply_cpu_workaround(version)
        want = "--xla_dump_to=/tmp/x" + (" " + YNN_FLAG if added else "")
        assert os.environ["XLA_FLAGS"] == want, version
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=")  # the user's
    apply_cpu_workaround((0, 10, 2))
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_experimental_ynn_fusion_type="
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("DEDEBATE_KEEP_XLA_FLAGS", "1")
    apply_cpu_workaround((0, 10, 2))
    assert os.environ["XLA_FLAGS"] == ""
