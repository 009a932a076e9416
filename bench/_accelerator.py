"""The prepared accelerator run behind ``bench/accelerator.sh``: every figure in one JSON file.

Steps, in order, each a subprocess with its own timeout (its whole process group is killed when
the timeout passes), all within one time budget (``--budget-s``, default 480 s of wall time from
the start of the run, the install included):

1. ``install``: ``pip install -e '.[cuda12]'`` (or ``--cuda cuda13``) where an NVIDIA GPU is
   visible (``nvidia-smi`` on the PATH) and JAX does not already use it; ``--install no`` (or
   ``DEDEBATE_ACCEL_INSTALL=0``) skips it, and so does a machine without ``nvidia-smi``;
   ``--install preinstalled`` installs dedebate alone beside the JAX already there, offline
   (``pip install --no-deps --no-build-isolation -e .``: clusters, NVIDIA's JAX images);
2. ``doctor``: ``dedebate doctor --json`` (backend, devices with their memory, x64, versions);
3. ``throughput``: the stochastic debate's trial-steps per second in each ``bob_draw`` mode
   (:func:`dedebate.protocols.stochastic_batch.run_trials`, honest players, fixture F2 with K = 2 at
   ``T = 256``) with as many trials as fit in the device's memory
   (:func:`dedebate.lab.devices.lanes_for_memory`);
4. ``bench/NAME``: ``dedebate bench NAME --full`` for every benchmark of ``dedebate bench --list``;
5. ``reproduce/NAME``: ``dedebate reproduce --full --only NAME`` for each experiment of ``--only``
   (default :data:`FULL_FIT`, cheapest first).

A step that would start with less than ``MIN_STEP_S`` of the budget left is recorded as
``skipped`` (``budget spent``). The JSON is rewritten (atomically) after every step, so a run
killed at any point keeps every finished step (the record: :class:`bench._steps.Run`).
``--quick`` runs the same steps at small sizes (benchmarks at their default size, ``reproduce
--quick``, a small throughput problem): the tests use it on a CPU.

Every step's record: ``name``, ``status`` (``ok``, ``failed``, ``timed_out``, ``skipped``),
``wall_s``, ``timeout_s``, ``returncode``, ``reason`` (skipped / failed), ``stderr_tail``
(failed / timed out) and ``result`` (its JSON). ``figures`` collects the headline numbers:
``trial_steps_per_s`` (per mode), ``bench`` (each benchmark's top-level numbers: its ratios and
rates), ``sweep_runs_per_s_vs_one_cpu``, ``reproduce`` (verdict, claims passed / total, wall
seconds per experiment).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ._steps import REPO, Run, utc_now
from ._steps import SCHEMA as SCHEMA  # the JSON's schema, re-exported

BUDGET_S = 480.0
# Benchmarks left out of the default list: cold_start times three cold `reproduce --quick` runs
# (minutes of device time for a CPU figure; this script's reproduce steps time reproduce here).
NOT_ON_DEVICE = ("cold_start",)
# The experiments whose --full size is expected to fit in a few minutes on one accelerator,
# cheapest first; the budget decides how many of them run.
FULL_FIT = (
    "machines",
    "ogd_estimator",
    "deterministic_debate",
    "stackelberg",
    "stochastic_selfplay",
    "prover_estimator",
    "stochastic_debate",
    "ped_digits",  # last: not yet run at --full (42 GiB planned, an upper bound; XLA: 20 GiB)
)
TIMEOUTS = {
    "install": 240.0,
    "doctor": 90.0,
    "bench-list": 90.0,
    "throughput": 150.0,
    "bench": 150.0,
    "reproduce": 240.0,
}
THROUGHPUT = {
    "full": {"T": 256, "modes": ("count", "decision", "lazy"), "min_seconds": 0.5, "repeats": 3},
    "quick": {"T": 16, "trials": 256, "modes": ("lazy",), "min_seconds": 0.05, "repeats": 1},
}
TRIAL_BYTES_PER_STEP, TRIAL_BYTES_FIXED = 16, 2048  # planned memory of one trial (throughput)


def _finite_numbers(d: dict) -> dict:
    """The top-level numbers and booleans of a benchmark's result (its ratios and rates)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, bool):
            out[k] = v
        elif isinstance(v, (int, float)) and math.isfinite(v):
            out[k] = v
        elif (
            isinstance(v, list)
            and len(v) == 2
            and all(isinstance(x, (int, float)) and math.isfinite(x) for x in v)
            and k.endswith("_range")
        ):
            out[k] = v
    return out


def _json_stdout(stdout: str):
    return json.loads(stdout)


def _last_json_line(stdout: str):
    return json.loads(stdout.strip().splitlines()[-1])


def _reproduce_result(stdout: str) -> dict:
    line = next(x for x in stdout.splitlines() if x.startswith("report: "))
    report_dir = Path(line[len("report: ") :]).parent
    report = json.loads((report_dir / "report.json").read_text())
    (e,) = report["experiments"]
    try:  # the experiment's own record: its peak device memory
        run_dir = report_dir / (e.get("run_dir") or e["name"])
        prov = json.loads((run_dir / "results.json").read_text())["provenance"]
    except (OSError, ValueError, KeyError, TypeError):
        prov = {}
    return {
        "verdict": e.get("verdict", "PASS" if e["passed"] else "FAIL"),
        "status": e["status"],
        "claims_passed": report["claims_passed"],
        "claims_total": report["claims_total"],
        "wall_s": e.get("wall_time_s"),
        "report_wall_s": report["wall_time_s"],
        "peak_device_bytes": prov.get("peak_device_bytes"),
        "error": e.get("error"),
    }


def throughput_worker(size: str, trials: int | None) -> dict:
    """Trial-steps per second of honest-vs-honest stochastic debates in each mode (this
    process's default device), with ``trials`` (default: as many as fit in its memory)."""
    import jax

    from dedebate.agents.stochastic_players import honest_alice, honest_bob
    from dedebate.lab.devices import device_memory_bytes, lanes_for_memory, peak_device_bytes
    from dedebate.machines.fixtures import f2_target
    from dedebate.protocols.stochastic import (
        debate_static,
        lean_defaults,
        make_vera,
        trial_keys,
    )
    from dedebate.protocols.stochastic_batch import run_trials

    from ._timing import summary, time_contenders

    s = THROUGHPUT[size]
    T = s["T"]
    if trials is None:
        trials = s.get("trials") or lanes_for_memory(
            TRIAL_BYTES_PER_STEP * T + TRIAL_BYTES_FIXED, default=16384, lo=1024, hi=1 << 21
        )
        trials = 1 << (trials.bit_length() - 1)  # a power of two: one call, run_trials pads none
    fx = f2_target(T, 2 / 3)
    consts = lean_defaults(2, T).constants(2, T)
    alice, bob, vera = honest_alice(consts), honest_bob(consts), make_vera(consts)
    keys = trial_keys(jax.random.key(0), trials)
    one_call = max(16384, 1 << (trials - 1).bit_length())  # lanes a call: all the trials
    runners, modes = {}, {}
    for mode in s["modes"]:
        spec = debate_static(T, bob_draw=mode)

        def call(spec=spec):  # every trial in one program (run_trials pads to a power of two)
            lanes = run_trials(spec, fx.machine, alice, bob, vera, keys, max_lanes=one_call)
            return jax.block_until_ready(lanes)

        t0 = time.perf_counter()
        out = call()
        modes[mode] = {
            "first_call_s": round(time.perf_counter() - t0, 3),  # compilation and one run
            "acceptance": float(out.alice_wins.mean()),
        }
        runners[mode] = call
    timing = time_contenders(runners, min_seconds=s["min_seconds"], repeats=s["repeats"])
    for mode, t in timing.items():
        sm = summary(t, trials * T, "trial_steps")
        modes[mode].update(
            trial_steps_per_s=sm["trial_steps_per_s"]["median"],
            trial_steps_per_s_range=[
                sm["trial_steps_per_s"]["min"],
                sm["trial_steps_per_s"]["max"],
            ],
            seconds_per_call=sm["seconds_per_call"]["median"],
        )
    dev = jax.devices()[0]
    return {
        "backend": jax.default_backend(),
        "device_kind": dev.device_kind,
        "memory_bytes": device_memory_bytes(dev),
        "peak_device_bytes": peak_device_bytes(),
        "T": T,
        "trials": trials,
        "problem": "F2, K = 2, P_M(1) = 2/3, honest Alice and Bob, Lean constants",
        "modes": modes,
    }


def _parse_args(argv: list[str]) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="bench/accelerator.sh", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--out",
        default=env("DEDEBATE_ACCEL_OUT") or None,
        help="the JSON file (default runs/accelerator-<UTC time>.json)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        default=env("DEDEBATE_ACCEL_QUICK", "") not in ("", "0"),
        help="small sizes (benchmarks at their default size, reproduce --quick)",
    )
    p.add_argument(
        "--only",
        nargs="*",
        default=(env("DEDEBATE_ACCEL_ONLY") or "").split() or list(FULL_FIT),
        metavar="NAME",
        help="experiments to reproduce, in order",
    )
    p.add_argument(
        "--benches",
        nargs="*",
        default=(env("DEDEBATE_ACCEL_BENCHES") or "").split() or None,
        metavar="NAME",
        help="benchmarks (default: every one listed but cold_start)",
    )
    p.add_argument(
        "--no-throughput",
        action="store_true",
        default=env("DEDEBATE_ACCEL_THROUGHPUT", "1") == "0",
        help="skip the stochastic debate's throughput step",
    )
    p.add_argument(
        "--budget-s", type=float, default=float(env("DEDEBATE_ACCEL_BUDGET_S") or BUDGET_S)
    )
    p.add_argument(
        "--timeout",
        nargs="*",
        default=(env("DEDEBATE_ACCEL_TIMEOUTS") or "").split(),
        metavar="STEP=SECONDS",
        help="per-step timeouts (STEP: a step name such as "
        "bench/sweep, or a kind: install, doctor, throughput, bench, reproduce)",
    )
    p.add_argument(
        "--install",
        choices=("auto", "yes", "no", "preinstalled"),
        default={"0": "no", "1": "yes"}.get(env("DEDEBATE_ACCEL_INSTALL", ""), "auto"),
    )
    p.add_argument(
        "--cuda", default=env("DEDEBATE_ACCEL_CUDA") or "cuda12", choices=("cuda12", "cuda13")
    )
    p.add_argument(
        "--trials",
        type=int,
        default=None,
        help="throughput trials (default: from the device's memory)",
    )
    p.add_argument("--throughput-worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _timeouts(items: list[str]) -> dict[str, float]:
    out = dict(TIMEOUTS)
    for item in items:
        name, sep, value = item.partition("=")
        try:
            secs = float(value)
        except ValueError:
            secs = -1.0
        if not sep or not name or not secs > 0:
            raise SystemExit(
                f"bench/accelerator.sh: error: --timeout {item!r}: expected "
                "STEP=SECONDS with SECONDS > 0"
            )
        out[name] = secs
    return out


def _install(run: Run, args: argparse.Namespace, py: str) -> None:
    why = None
    if args.install == "preinstalled":
        run.step(
            "install",
            [py, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", "."],
            parse=lambda _out: {"extra": "preinstalled JAX"},
        )
        return
    if args.install == "no":
        why = "install turned off (--install no / DEDEBATE_ACCEL_INSTALL=0)"
    elif args.install == "auto" and shutil.which("nvidia-smi") is None:
        why = "no NVIDIA GPU visible (nvidia-smi not found)"
    elif args.install == "auto":
        probe = subprocess.run(
            [py, "-c", "import jax; print(jax.default_backend())"],
            cwd=REPO,
            env=run.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if probe.stdout.strip() == "gpu":
            why = "JAX already uses the GPU"
    if why is not None:
        run._record(
            {
                "name": "install",
                "status": "skipped",
                "reason": why,
                "wall_s": 0.0,
                "timeout_s": None,
                "returncode": None,
            }
        )
        return
    run.step(
        "install",
        [py, "-m", "pip", "install", "-e", f".[{args.cuda}]"],
        parse=lambda _out: {"extra": args.cuda},
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    if args.throughput_worker:
        print(json.dumps(throughput_worker("quick" if args.quick else "full", args.trials)))
        return 0
    timeouts = _timeouts(args.timeout)
    if not args.budget_s > 0:
        raise SystemExit(f"bench/accelerator.sh: error: --budget-s {args.budget_s}: must be > 0")
    size = "quick" if args.quick else "full"
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or REPO / "runs" / f"accelerator-{stamp}.json").resolve()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("WANDB_SILENT", "true")
    py = sys.executable
    cli = [py, "-m", "dedebate.cli"]
    run = Run(out, args.budget_s, size, timeouts, env)
    figures = run.data["figures"]

    _install(run, args, py)
    rec = run.step("doctor", cli + ["doctor", "--json"], parse=_json_stdout)
    if rec["status"] == "ok":
        run.data["device"] = {
            k: rec["result"][k]
            for k in ("backend", "device_count", "devices", "process_count", "x64")
        }
        run.data["versions"] = {
            "dedebate": rec["result"]["dedebate"],
            "git_commit": rec["result"]["git_commit"],
            "git_dirty": rec["result"]["git_dirty"],
            **rec["result"]["packages"],
        }
        run.write()
        for d in run.data["device"]["devices"]:  # the devices, on the terminal
            mem = d.get("memory_bytes")
            print(
                f"accelerator: device {d['id']}: {d['kind']} ({d['platform']}"
                + (f", {mem / 2**30:.1f} GiB" if mem else "")
                + ")",
                file=sys.stderr,
            )

    if not args.no_throughput:
        worker = [py, "-m", "bench._accelerator", "--throughput-worker"]
        worker += ["--quick"] if args.quick else []
        worker += ["--trials", str(args.trials)] if args.trials else []
        rec = run.step("throughput", worker, parse=_last_json_line)
        if rec["status"] == "ok":
            figures["trial_steps_per_s"] = {
                m: r["trial_steps_per_s"] for m, r in rec["result"]["modes"].items()
            }
            run.write()

    benches = args.benches
    if benches is None:
        rec = run.step(
            "bench-list",
            cli + ["bench", "--list"],
            parse=lambda o: [ln.split("\t")[0] for ln in o.splitlines() if ln.strip()],
        )
        benches = [b for b in rec.get("result") or [] if b not in NOT_ON_DEVICE]
    for name in benches:
        rec = run.step(
            f"bench/{name}",
            cli + ["bench", name] + ([] if args.quick else ["--full"]),
            parse=_json_stdout,
        )
        if rec["status"] == "ok":
            figures["bench"][name] = _finite_numbers(rec["result"])
            real = rec["result"].get("real") if name == "sweep" else None
            if isinstance(real, dict):
                figures["sweep_runs_per_s_vs_one_cpu"] = real.get("ratio_vs_1_cpu_device")
            run.write()

    repro_dir = out.with_suffix("")  # runs/accelerator-<time>/ beside the JSON
    for name in args.only:
        rec = run.step(
            f"reproduce/{name}",
            cli
            + [
                "reproduce",
                f"--{size}",
                "--only",
                name,
                "--output-dir",
                str(repro_dir),
                "--tracking",
                "disabled",
                "--no-progress",
            ],
            parse=_reproduce_result,
        )
        if rec["status"] == "ok":
            figures["reproduce"][name] = {
                k: rec["result"][k]
                for k in ("verdict", "claims_passed", "claims_total", "wall_s", "peak_device_bytes")
            }
            run.write()

    run.data.update(finished=utc_now(), complete=True)
    run.write()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
