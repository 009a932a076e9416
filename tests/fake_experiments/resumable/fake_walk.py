"""A fake long run for the fault tests: a random walk through the lab's chunked driver
(``chunks`` -> ``Chunks``) that checkpoints its whole state (step, key, partial results) every
step, and sleeps ``FAKE_STEP_SLEEP`` seconds per step (an environment variable, so the config and
its hash do not see it) to leave time for a SIGKILL mid-run.
"""

from __future__ import annotations

import dataclasses
import os
import time

import jax
import jax.numpy as jnp

from dedebate.lab.experiment import Chunks, Claim, ExperimentResult

NAME = "fake_walk"
TITLE = "Fake experiment: a slow checkpointed random walk"


@dataclasses.dataclass(frozen=True)
class Config:
    steps: int = dataclasses.field(default=16, metadata={"doc": "walk steps, >= 1"})

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps={self.steps}: must be >= 1")


SIZES = {"quick": {}, "full": {}}


@jax.jit
def _step(state, i):
    key, sub = jax.random.split(state["key"])
    x = jax.random.normal(sub)
    return {"step": i, "key": key, "total": state["total"] + x, "path": state["path"].at[i].set(x)}


def chunks(cfg: Config, key) -> Chunks:
    """The walk, one step a chunk, its total logged at each step."""
    pause = float(os.environ.get("FAKE_STEP_SLEEP", "0"))

    def chunk(state, i):
        time.sleep(pause)
        return _step(state, jnp.int32(i)), None

    state = {
        "step": jnp.int32(-1),
        "key": key,
        "total": jnp.float32(0.0),
        "path": jnp.zeros(cfg.steps, jnp.float32),
    }
    return Chunks(
        init_state=state,
        chunk=chunk,
        n_chunks=cfg.steps,
        keep=3,
        desc="walk",
        log_rows=lambda i, state, _: [(i, {"total": state["total"]})],
    )


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The walk finished every step; its total, its path and the chunks restored."""
    done = measured["trained"]
    state = done.state
    return ExperimentResult(
        claims=[
            Claim.exact(
                "walk finished",
                "fake",
                f"== {cfg.steps} steps",
                int(state["step"]) + 1,
                passed=int(state["step"]) + 1 == cfg.steps,
            )
        ],
        metrics={
            "total": float(state["total"]),
            "path": [float(x) for x in state["path"]],
            "resumed_from": done.restored,
        },
    )
