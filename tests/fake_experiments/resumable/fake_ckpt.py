"""A fake experiment that trains through the lab's chunked driver (``run_chunks``): one step a
chunk, a checkpoint and a logged row after each.

The environment variable ``FAKE_CRASH_AT=i`` makes the run raise right after step ``i`` (its row
logged and its checkpoint saved; a crash that the config, and so the config hash, does not see).
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp

from dedebate.lab.driver import run_chunks
from dedebate.lab.experiment import Claim, ExperimentResult

NAME = "fake_ckpt"
TITLE = "Fake experiment: a checkpointed random walk"


@dataclasses.dataclass(frozen=True)
class Config:
    steps: int = dataclasses.field(default=6, metadata={"doc": "walk steps, >= 1"})

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps={self.steps}: must be >= 1")


SIZES = {"quick": {"steps": 4}, "full": {}}


def run(cfg: Config, ctx) -> ExperimentResult:
    crash_at = int(os.environ.get("FAKE_CRASH_AT", "-1"))

    def chunk(state, i):
        if crash_at >= 0 and i == crash_at + 1:
            raise RuntimeError(f"crash after step {crash_at}")
        key, sub = jax.random.split(state["key"])
        return {"step": jnp.int32(i), "total": state["total"] + jax.random.uniform(sub),
                "key": key}, None

    done = run_chunks(ctx, "walk", {"step": jnp.int32(-1), "total": jnp.float32(0.0),
                                    "key": ctx.key}, chunk, cfg.steps,
                      log_rows=lambda i, state, _: [(i, {"total": state["total"]})])
    state = done.state
    total = float(state["total"])
    return ExperimentResult(
        claims=[Claim.exact("walk finished", "fake", f"== {cfg.steps} steps",
                            int(state["step"]) + 1, passed=int(state["step"]) + 1 == cfg.steps)],
        metrics={"total": total, "resumed_from": done.restored})
