"""The JSON record of an accelerator run (``bench/accelerator.sh``, :mod:`bench._accelerator`):
each step a subprocess in its own process group, within its timeout and the run's budget, the
file rewritten (atomically) after every step."""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "dedebate-accelerator/1"
MIN_STEP_S = 10.0


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class Run:
    """The JSON record of one accelerator run, rewritten after every step."""

    def __init__(
        self, out: Path, budget_s: float, size: str, timeouts: dict[str, float], env: dict[str, str]
    ):
        self.out, self.budget_s, self.size, self.env = out, budget_s, size, env
        self.timeouts = timeouts
        self.t0 = time.monotonic()
        self.data: dict = {
            "schema": SCHEMA,
            "started": utc_now(),
            "finished": None,
            "complete": False,
            "size": size,
            "budget_s": budget_s,
            "spent_s": 0.0,
            "device": None,
            "versions": None,
            "steps": [],
            "figures": {
                "trial_steps_per_s": {},
                "bench": {},
                "sweep_runs_per_s_vs_one_cpu": None,
                "reproduce": {},
            },
        }
        self.write()

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.t0)

    def write(self) -> None:
        self.data["spent_s"] = round(time.monotonic() - self.t0, 3)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out.with_name(self.out.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, allow_nan=False) + "\n")
        os.replace(tmp, self.out)

    def timeout_for(self, name: str) -> float:
        return self.timeouts.get(name, self.timeouts[name.split("/")[0]])

    def step(self, name: str, cmd: list[str], parse=None) -> dict:
        """Run one step (``cmd`` in its own process group) within its timeout and the budget;
        record it and rewrite the JSON. ``parse(stdout)`` gives the step's ``result``."""
        rec: dict = {
            "name": name,
            "status": None,
            "wall_s": 0.0,
            "timeout_s": None,
            "returncode": None,
        }
        left = self.left()
        if left < min(MIN_STEP_S, self.timeout_for(name)):
            rec.update(
                status="skipped",
                reason=f"budget spent ({max(left, 0):.0f} s left of {self.budget_s:.0f} s)",
            )
            return self._record(rec)
        timeout = min(self.timeout_for(name), left)
        rec["timeout_s"] = round(timeout, 3)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the step and every process it started
            except ProcessLookupError:
                pass
            stdout, stderr = proc.communicate()
            rec.update(
                status="timed_out",
                wall_s=round(time.monotonic() - t0, 3),
                reason=f"ran past its timeout of {timeout:g} s",
                stderr_tail=(stderr or "")[-2000:],
            )
            return self._record(rec)
        rec.update(wall_s=round(time.monotonic() - t0, 3), returncode=proc.returncode)
        try:
            from dedebate.lab.rundir import non_finite

            rec["result"], bad = non_finite(parse(stdout) if parse else None)
            if bad:  # not a figure (and not JSON): the step fails, the run goes on
                raise ValueError(f"non-finite numbers at {', '.join(bad[:5])}")
        except Exception as err:  # noqa: BLE001 - recorded: a step's output that does not parse
            rec.update(
                status="failed",
                reason=f"output not understood: {err}",
                stderr_tail=(stderr or "")[-2000:],
                stdout_tail=(stdout or "")[-2000:],
            )
            return self._record(rec)
        if proc.returncode != 0 and not name.startswith("reproduce/"):
            rec.update(
                status="failed",
                reason=f"exit status {proc.returncode}",
                stderr_tail=(stderr or "")[-2000:],
            )
        else:  # reproduce exits 1 when a claim fails: the verdict is the result, not a failure
            rec["status"] = "ok"
        return self._record(rec)

    def _record(self, rec: dict) -> dict:
        self.data["steps"].append(rec)
        self.write()
        extra = f" ({rec['reason']})" if rec.get("reason") else ""
        print(
            f"accelerator: {rec['name']}: {rec['status']} in {rec['wall_s']:.1f} s{extra}",
            file=sys.stderr,
            flush=True,
        )
        return rec
