"""Sharding the run axis over devices: 4 fake CPU devices give exactly the 1-device table."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from dedebate.lab.devices import EvalInfo, evaluate, padded_batch
from tests.conftest import REPO

SWEEPABLE = "tests.fake_experiments.sweepable"
# 5 points x 2 seeds = 10 rows; batch 6 -> chunks of 6 rows on one device (2 padded rows), of 8
# rows on 4 devices (6 padded rows): padding and chunking both differ between the two runs.
CONFIG = """\
experiment: fake_sweep
size: quick
seed: 0
output_dir: {out}
tracking: {{mode: disabled}}
sweep:
  seeds: [0, 1]
  batch: 6
  plots: false
  axes: {{p: [0.1, 0.4, 0.7, 0.9, 0.5], threshold: [0.5]}}
"""


def sweep_env(n_devices: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["DEDEBATE_EXPERIMENTS"] = SWEEPABLE
    env["WANDB_SILENT"] = "true"
    env.pop("WANDB_MODE", None)
    env.pop("XLA_FLAGS", None)
    for k in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        env.pop(k, None)
    if n_devices:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n_devices}"
    return env


def write_config(tmp_path, name="sweep.yaml"):
    path = tmp_path / name
    path.write_text(CONFIG.format(out=tmp_path / "runs"))
    return path


@functools.lru_cache(maxsize=1)
def baseline(root: str) -> tuple[str, dict]:
    """The sweep on this process's first device only: (sweep.csv text, results.json)."""
    from pathlib import Path

    from dedebate.lab.config import load_config
    from dedebate.lab.registry import discover_experiments
    from dedebate.lab.sweep import run_sweep

    reg = discover_experiments([SWEEPABLE])
    Path(root).mkdir(parents=True, exist_ok=True)
    cfg = load_config(write_config(Path(root), "base.yaml"), reg.experiments)
    rec = run_sweep(
        reg.experiments["fake_sweep"], cfg, show_progress=False, devices=jax.devices()[:1]
    )
    return (rec.sweep_dir / "sweep.csv").read_text(), rec.results


def test_padded_batch():
    assert padded_batch(10, 1) == 10 and padded_batch(10, 4) == 12
    assert padded_batch(10, 4, batch=6) == 8 and padded_batch(3, 4) == 4
    assert padded_batch(10, 1, batch=6) == 6
    assert padded_batch(3, 4, batch=10) == 4 and padded_batch(5, 1, batch=8) == 5  # batch > n


def test_evaluate_pads_chunks_and_counts_one_trace():
    info = EvalInfo()
    x = np.arange(7, dtype=np.float32)
    out = evaluate(
        lambda a, b: {"s": a * 2 + b, "i": (a > 3).astype(np.int32)},
        (x, x[::-1].copy()),
        7,
        batch=3,
        info=info,
    )
    np.testing.assert_array_equal(out["s"], 2 * x + x[::-1])
    np.testing.assert_array_equal(out["i"], (x > 3).astype(np.int32))
    assert (info.traces, info.calls, info.batch) == (1, 3, 3)
    assert info.padded_rows == 2 and info.local_rows == list(range(7))
    info = EvalInfo()  # rows a multiple of the batch: nothing padded
    evaluate(lambda a: {"s": a}, (np.arange(6, dtype=np.float32),), 6, batch=3, info=info)
    assert (info.calls, info.padded_rows) == (2, 0)
    with pytest.raises(TypeError, match="scalar metrics; 'v' has shape"):
        evaluate(lambda a: {"v": np.ones(2) * a}, (x,), 7)


def test_evaluate_returns_a_row_fns_extras_when_asked_and_drops_them_otherwise():
    """A row fn may return ``(metrics, extras)``: a run reads the extras (arrays of any shape,
    chunks concatenated and padding cut), a sweep gets the metrics alone; one program serves
    both (``cache_key``)."""
    info = EvalInfo()
    x = np.arange(5, dtype=np.float32)

    def row(a):
        return {"s": a + 1}, {"v": a * np.arange(3, dtype=np.float32)}

    out, more = evaluate(row, (x,), 5, batch=2, info=info, cache_key=("extras-test",), extras=True)
    np.testing.assert_array_equal(out["s"], x + 1)
    np.testing.assert_array_equal(more["v"], x[:, None] * np.arange(3))
    only = evaluate(row, (x,), 5, batch=2, info=info, cache_key=("extras-test",))
    assert list(only) == ["s"] and info.traces == 1 and info.calls == 6


def test_four_fake_cpu_devices_equal_one(tmp_path):
    table, res = baseline(str(tmp_path.parent / "device-baseline"))
    assert res["devices"] == 1 and res["padded_rows"] == 2 and res["compiled_calls"] == 2
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dedebate.cli",
            "sweep",
            "--no-progress",
            str(write_config(tmp_path)),
        ],
        env=sweep_env(4),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert "1 compilation(s), 4 device(s), 1 process(es)" in p.stdout
    (d,) = (tmp_path / "runs").glob("fake_sweep-sweep-*")
    four = json.loads((d / "results.json").read_text())
    assert four["devices"] == 4 and four["padded_rows"] == 6 and four["compiled_calls"] == 2
    assert four["compilations"] == 1
    assert (d / "sweep.csv").read_text() == table


# A row whose loop runs a data-dependent number of times: vmapped, its condition is "any row
# still looping", which XLA's SPMD partitioner would all-reduce over the devices every iteration.
LOOP_ROWS = """
import jax, jax.numpy as jnp, numpy as np
from dedebate.lab import devices

def row(x):
    steps = jax.lax.while_loop(lambda c: c[0] < x, lambda c: (c[0] + 1, c[1] + c[0]), (0, 0))
    return {"sum": steps[1]}

x = np.arange(8, dtype=np.int32)
out = devices.evaluate(row, (x,), 8, cache_key=("loop-rows",))
assert out["sum"].tolist() == [k * (k - 1) // 2 for k in range(8)], out
mesh = devices.run_mesh()
sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(devices.AXIS))
program = devices._program(row, sharding, devices.EvalInfo(), ("loop-rows",))
placed = jax.device_put(x, sharding)
hlo = program.lower(placed).compile().as_text()
print(mesh.size, sorted({op for op in ("all-reduce", "all-gather", "all-to-all",
                                      "collective-permute") if op in hlo}))
"""


def test_each_device_runs_its_rows_with_no_collective():
    """On 2 devices a sweep program holds no cross-device collective, even around a vmapped
    data-dependent loop (fails with plain ``jit`` partitioning: an all-reduce per iteration)."""
    p = subprocess.run(
        [sys.executable, "-c", LOOP_ROWS],
        env=sweep_env(2),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["2", "[]"], p.stdout


def test_peak_device_bytes_is_the_largest_peak_any_device_reports():
    from dedebate.lab.devices import peak_device_bytes
    from tests.lab.test_batch_lanes import FakeDevice as Dev

    gpus = [Dev({"peak_bytes_in_use": 7, "bytes_limit": 100}), Dev({"peak_bytes_in_use": 9})]
    assert peak_device_bytes(gpus) == 9 and peak_device_bytes(gpus[::-1]) == 9
    assert peak_device_bytes([Dev(None), Dev({}), Dev(RuntimeError("no stats"))]) is None
    import jax

    if jax.default_backend() == "cpu":
        assert peak_device_bytes() is None  # XLA:CPU reports no memory statistics


def test_a_chunked_fns_host_measure_sees_each_real_row_once():
    """3 rows in calls of 2 (the last padded): ``measure`` runs on the host for rows 0, 1, 2
    only, each with its own dynamic numbers and finish output (any arrays), and its metrics are
    the rows'."""
    import dataclasses
    import types

    from dedebate.lab.experiment import ChunkedFn
    from dedebate.lab.sweep_programs import ChunkedPrograms

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        n: int = 1

    seen = []

    def measure(dyn, fin):
        seen.append((float(dyn["x"]), fin["pair"].tolist()))
        return {"m": float(fin["y"]) * 10}

    fn = ChunkedFn(
        init=lambda dyn, key: dyn["x"],
        chunk=lambda dyn, s, spec: (s + spec, s[None]),
        chunks=(1, 2),
        finish=lambda dyn, s, mon: {"y": s, "pair": mon},
        measure=measure,
    )
    module = types.SimpleNamespace(__name__="toy_measure", NAME="toy_measure")
    progs = ChunkedPrograms(module, Cfg(), fn, jax.random.key_impl(jax.random.key(0)))
    keys = np.asarray(jax.random.key_data(jax.random.split(jax.random.key(0), 3)))
    out = progs.evaluate({"x": np.array([1.0, 2.0, 3.0], np.float32)}, keys, batch=2)
    assert seen == [(1.0, [1.0, 2.0]), (2.0, [2.0, 3.0]), (3.0, [3.0, 4.0])]
    np.testing.assert_array_equal(out["m"], [40.0, 50.0, 60.0])
