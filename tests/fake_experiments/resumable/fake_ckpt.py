"""A fake experiment that checkpoints every step and resumes from ``ctx.checkpointer``.

The environment variable ``FAKE_CRASH_AT=i`` makes the run raise right after saving step ``i``
(a crash that the config, and so the config hash, does not see).
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp

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
    state = {"step": jnp.int32(-1), "total": jnp.float32(0.0), "key": ctx.key}
    start = 0
    with ctx.checkpointer(every=1, keep=2) as ckpt:
        if ctx.resume:
            found = ckpt.restore(state)
            if found is not None:
                start, state = found[0] + 1, found[1]
        for i in range(start, cfg.steps):
            key, sub = jax.random.split(state["key"])
            state = {"step": jnp.int32(i), "total": state["total"] + jax.random.uniform(sub),
                     "key": key}
            ckpt.save(i, state)
            ctx.log({"total": state["total"]}, step=i)
            if i == crash_at:
                ckpt.wait()
                raise RuntimeError(f"crash after step {i}")
    total = float(state["total"])
    return ExperimentResult(
        claims=[Claim.exact("walk finished", "fake", f"== {cfg.steps} steps",
                            int(state["step"]) + 1, passed=int(state["step"]) + 1 == cfg.steps)],
        metrics={"total": total, "resumed_from": start})
