"""The sweep benchmark (bench/sweep.py), by structure only (no speed is asserted): which contenders
each device-count process times, what its ratios compare, that the metrics must be identical, and
that a CPU-only machine runs no timed process for real devices."""

from __future__ import annotations

import pytest

from bench import sweep


def _worker_result(d: int, digest: str = "abc", runs_per_s: float = 1000.0) -> dict:
    names = ["all_devices"] + (["one_device_same_batch", "one_device_one_call"] if d > 1 else [])
    out = {
        "backend": "cpu",
        "devices": d,
        "runs_per_s": runs_per_s,
        "metrics_sha256": digest,
        "metrics_sha256_by_contender": {n: digest for n in names},
    }
    if d > 1:
        out.update(ratio_vs_1_same_batch=1.5, ratio_vs_1_one_call=3.0, batch_effect_on_1_device=2.0)
    return out


def test_a_cpu_only_run_times_no_real_devices_and_reports_no_numpy(monkeypatch):
    calls = []

    def fake(size, n_devices):
        calls.append(n_devices)
        return _worker_result(n_devices) if n_devices else {"backend": "cpu", "timed": False}

    monkeypatch.setattr(sweep, "_subprocess", fake)
    out = sweep.run()
    assert calls == [1, 2, 4, None] and "real" not in out
    assert out["identical"] and out["numpy_reference"] is None and "no numpy" in out["note"]
    four = out["cpu_fake_devices"]["4"]
    assert four["ratio_vs_1_same_batch"] == 1.5 and four["batch_effect_on_1_device"] == 2.0
    assert out["cpu_fake_devices"]["1"]["ratio_vs_1_same_batch"] == 1.0
    assert out["device_ratios_within_cores"] == (1.5 <= out["cpu_cores"])


def test_different_metrics_across_device_counts_are_an_error(monkeypatch):
    def fake(size, n_devices):
        if n_devices is None:
            return {"backend": "cpu", "timed": False}
        return _worker_result(n_devices, digest="bad" if n_devices == 4 else "abc")

    monkeypatch.setattr(sweep, "_subprocess", fake)
    with pytest.raises(sweep.SweepMismatch, match="4/all_devices"):
        sweep.run()


def test_the_device_ratio_compares_one_device_at_the_same_rows_per_call(monkeypatch):
    """In a process with D devices the worker times the D devices, one device at rows/D rows per
    call and one device at all rows; the device ratio pairs the first two."""
    import dedebate.lab.devices as devices_mod

    batches = []
    real_evaluate = devices_mod.evaluate

    def evaluate(fn, inputs, n, *, devices=None, batch=0, **kw):
        batches.append((len(devices), batch))
        return real_evaluate(fn, inputs, n, devices=devices[:1], batch=batch, **kw)

    import jax

    monkeypatch.setattr(jax, "devices", lambda: [jax.local_devices()[0]] * 4)
    monkeypatch.setattr(devices_mod, "evaluate", evaluate)
    monkeypatch.setitem(
        sweep.SIZES, "tiny", {"points": 4, "seeds": 2, "trials": 4, "n": 4, "repeats": 1}
    )
    out = sweep.worker("tiny", min_seconds=1e-3)
    assert set(batches) == {(4, 0), (1, 2), (1, 0)}  # 8 rows over 4 devices: 2 per device
    assert out["rows_per_device_per_call"] == 2
    for field in ("ratio_vs_1_same_batch", "batch_effect_on_1_device", "ratio_vs_1_one_call"):
        lo, hi = out[f"{field}_range"]
        assert lo <= out[field] <= hi
    assert len(set(out["metrics_sha256_by_contender"].values())) == 1


def test_the_real_device_probe_times_nothing_on_a_cpu(monkeypatch):
    """The worker for the real devices (``--real``) returns at once where the backend is a CPU: the
    fake-device processes have timed the CPU already."""
    import bench._timing as timing_mod

    def no_timing(*a, **kw):
        raise AssertionError("timed on a CPU")

    monkeypatch.setattr(timing_mod, "time_contenders", no_timing)
    assert sweep.worker("default", real=True) == {"backend": "cpu", "timed": False}


def test_real_devices_keep_their_ratio_to_one_cpu_device_and_must_agree(monkeypatch):
    gpu = {**_worker_result(2, runs_per_s=8000.0), "backend": "gpu"}
    monkeypatch.setattr(sweep, "_subprocess", lambda size, d: _worker_result(d) if d else dict(gpu))
    out = sweep.run()
    assert out["real"]["ratio_vs_1_cpu_device"] == 8.0 and out["identical_real_vs_cpu"]
    gpu["metrics_sha256_by_contender"] = {"all_devices": "abc", "one_device_same_batch": "x"}
    with pytest.raises(sweep.SweepMismatch, match="real devices"):
        sweep.run()
