"""A resume under other numerics (versions, backend, devices, XLA_FLAGS) than the checkpoint's or
the finished groups' is refused, naming the change; the same numerics resume as before."""

from __future__ import annotations

import json

import jax
import pytest

import dedebate
from dedebate.lab import numerics
from dedebate.lab.checkpoint import Checkpointer
from tests.lab.test_lab_checkpoint import HASH, assert_state_equal, make_state
from tests.lab.test_lab_sweep import SWEEPABLE

FAST = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def test_a_checkpoint_resumes_only_under_its_numerics(tmp_path, monkeypatch):
    d = tmp_path / "ck"
    monkeypatch.setenv("XLA_FLAGS", FAST)  # as `reproduce --quick` on a CPU
    with Checkpointer(d, HASH) as ck:
        ck.save(2, make_state(2))
    monkeypatch.setenv("XLA_FLAGS", "")
    with Checkpointer(d, HASH) as ck, pytest.raises(numerics.ResumeMismatch) as err:
        ck.restore(make_state(0))
    msg = str(err.value)
    assert f"xla_flags {' '.join(sorted(FAST.split()))!r} -> ''" in msg
    assert "DEDEBATE_FAST_COMPILE=1" in msg and "start anew without --resume" in msg
    assert sorted(p.name for p in d.iterdir()) == ["2"]  # refused, nothing moved aside
    # the same flags, in another order and with a dump folder, are the same numerics
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to={tmp_path} {' '.join(reversed(FAST.split()))}")
    with Checkpointer(d, HASH) as ck:
        step, state = ck.restore(make_state(0))
    assert step == 2
    assert_state_equal(state, make_state(2))
    # another device count (a state laid out over devices) or version is another change
    new = numerics.fingerprint(devices=True)
    for name, other in (("devices", new["devices"] + 1), ("jax", "0.0.1")):
        with pytest.raises(numerics.ResumeMismatch, match=f"{name} {other!r} -> "):
            numerics.check("it", new | {name: other}, new)
    numerics.check("it", None, new)  # an older dedebate's checkpoint recorded none


def test_an_older_checkpoint_without_numerics_still_resumes(tmp_path):
    d = tmp_path / "ck"
    with Checkpointer(d, HASH) as ck:
        ck.numerics = None  # what a checkpoint written before the check holds: no "numerics"
        ck.save(1, make_state(1))
    with Checkpointer(d, HASH) as ck:
        assert ck.restore(make_state(0))[0] == 1


def test_a_sweep_resumes_its_groups_only_under_their_numerics(tmp_path, monkeypatch, capsys):
    from dedebate import cli

    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", SWEEPABLE)
    path = tmp_path / "s.yaml"
    path.write_text(
        f"experiment: fake_sweep\nsize: quick\noutput_dir: {tmp_path}\n"
        "tracking: {mode: disabled}\nsweep: {seeds: 2, plots: false, axes: {n: [4, 8]}}\n"
    )
    assert cli.main(["sweep", "--no-progress", str(path)]) == 0
    (out,) = tmp_path.glob("fake_sweep-sweep-*")
    recorded = json.loads((out / "groups" / numerics.SWEEP_FILE).read_text())
    assert recorded == numerics.fingerprint(devices=True)
    (out / "groups" / "group-001.csv").unlink()  # killed during group 1
    monkeypatch.setattr(dedebate, "__version__", "9.9.9")
    capsys.readouterr()
    assert cli.main(["sweep", "--no-progress", "--resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"dedebate {recorded['dedebate']!r} -> '9.9.9'" in err
    assert not (out / "groups" / "group-001.csv").exists()  # nothing computed
    monkeypatch.setattr(dedebate, "__version__", recorded["dedebate"])
    # another device count (more processes or accelerators) rounds floats otherwise
    count = jax.device_count
    monkeypatch.setattr(jax, "device_count", lambda: recorded["devices"] + 1)
    assert cli.main(["sweep", "--no-progress", "--resume", str(out)]) == 2
    assert (
        f"devices {recorded['devices']!r} -> {recorded['devices'] + 1!r}" in capsys.readouterr().err
    )
    monkeypatch.setattr(jax, "device_count", count)
    assert cli.main(["sweep", "--no-progress", "--resume", str(out)]) == 0
    assert "(1 resumed)" in capsys.readouterr().out
