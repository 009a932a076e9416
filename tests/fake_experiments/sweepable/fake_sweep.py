"""A fake sweepable experiment: Bernoulli flips with a dynamic rate and a dynamic threshold.

Each trial flips ``n`` coins with heads probability ``p`` and accepts when the heads rate is at
least ``threshold``. Per point and seed, ``fn`` returns the mean heads rate (expectation exactly
``p``), the acceptance rate (expectation exactly ``P(Binomial(n, p) >= threshold * n)``) and the
total heads count (an integer, for exact comparisons). ``p`` and ``threshold`` are dynamic (one
compiled program vmaps over them); ``n`` and ``trials`` are static (one compile per value).

``TRACES[0]`` counts how often ``fn`` is traced, so the tests can assert one compile per sweep.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from dedebate.lab.experiment import Claim, ExperimentResult, wilson_interval

NAME = "fake_sweep"
TITLE = "Fake sweepable experiment: Bernoulli rate and threshold acceptance"
DYNAMIC = ("p", "threshold")
TRACES = [0]


@dataclasses.dataclass(frozen=True)
class Config:
    n: int = dataclasses.field(default=16, metadata={"doc": "coins per trial (static), >= 1"})
    trials: int = dataclasses.field(default=32, metadata={"doc": "trials per point (static)"})
    p: float = dataclasses.field(default=0.5, metadata={"doc": "heads probability, in [0, 1]"})
    threshold: float = dataclasses.field(
        default=0.5, metadata={"doc": "accept when the heads rate is >= this, in [0, 1]"}
    )

    def __post_init__(self):
        if self.n < 1:
            raise ValueError(f"n={self.n}: must be >= 1")
        if self.trials < 1:
            raise ValueError(f"trials={self.trials}: must be >= 1")
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p={self.p}: must be a probability in [0, 1]")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold={self.threshold}: must be in [0, 1]")


SIZES = {"quick": {"n": 8, "trials": 16}, "full": {"trials": 4096}}


def point(cfg: Config):
    """``(dynamic params, fn)``: fn(dynamic, key) -> scalar metrics; only n, trials are baked in."""
    n, trials = cfg.n, cfg.trials

    def fn(dyn, key):
        TRACES[0] += 1  # runs once per trace, never per call
        flips = jax.random.bernoulli(key, dyn["p"], (trials, n))
        heads = jnp.sum(flips, axis=1, dtype=jnp.int32)
        rate = heads.astype(jnp.float32) / n
        return {
            "rate": jnp.mean(rate),
            "accept": jnp.mean((rate >= dyn["threshold"]).astype(jnp.float32)),
            "heads": jnp.sum(heads),
        }

    return {"p": jnp.float32(cfg.p), "threshold": jnp.float32(cfg.threshold)}, fn


def report(cfg: Config, measured, host) -> ExperimentResult:
    """One point, as ``dedebate run`` sees it: the heads rate's Wilson interval contains p."""
    heads = int(measured["heads"])
    rate, lo, hi = wilson_interval(heads, cfg.n * cfg.trials)
    return ExperimentResult(
        claims=[
            Claim(
                "heads rate near p",
                "fake lemma 3",
                f"contains {cfg.p}",
                rate,
                lo,
                hi,
                passed=lo <= cfg.p <= hi,
            )
        ],
        metrics={
            "rate": float(measured["rate"]),
            "accept": float(measured["accept"]),
            "heads": heads,
        },
    )
