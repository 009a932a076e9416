"""A fake experiment that trains through the lab's chunked driver (``chunks`` -> ``Chunks``): one
step a chunk, a checkpoint and a logged row after each.

The environment variable ``FAKE_CRASH_AT=i`` makes the run raise right after step ``i`` (its row
logged and its checkpoint saved; a crash that the config, and so the config hash, does not see).
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp

from dedebate.lab.experiment import Chunks, Claim, ExperimentResult

NAME = "fake_ckpt"
TITLE = "Fake experiment: a checkpointed random walk"


@dataclasses.dataclass(frozen=True)
class Config:
    steps: int = dataclasses.field(default=6, metadata={"doc": "walk steps, >= 1"})

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps={self.steps}: must be >= 1")


SIZES = {"quick": {"steps": 4}, "full": {}}


def chunks(cfg: Config, key) -> Chunks:
    """The walk: chunk ``i`` adds a uniform draw to ``total`` and logs it at step ``i``."""
    crash_at = int(os.environ.get("FAKE_CRASH_AT", "-1"))

    def chunk(state, i):
        if crash_at >= 0 and i == crash_at + 1:
            raise RuntimeError(f"crash after step {crash_at}")
        key, sub = jax.random.split(state["key"])
        return {
            "step": jnp.int32(i),
            "total": state["total"] + jax.random.uniform(sub),
            "key": key,
        }, None

    return Chunks(
        init_state={"step": jnp.int32(-1), "total": jnp.float32(0.0), "key": key},
        chunk=chunk,
        n_chunks=cfg.steps,
        desc="walk",
        log_rows=lambda i, state, _: [(i, {"total": state["total"]})],
    )


def report(cfg: Config, measured, host) -> ExperimentResult:
    """The walk finished every step; its total and the chunks restored from a checkpoint."""
    done = measured["trained"]
    steps = int(done.state["step"]) + 1
    return ExperimentResult(
        claims=[
            Claim.exact(
                "walk finished", "fake", f"== {cfg.steps} steps", steps, passed=steps == cfg.steps
            )
        ],
        metrics={"total": float(done.state["total"]), "resumed_from": done.restored},
    )
