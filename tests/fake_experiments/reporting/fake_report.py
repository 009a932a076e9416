"""A fake experiment of the report contract: coin flips at a dynamic rate ``p``.

``point`` counts heads (pure JAX), ``host`` gives the expected count on the host, ``report``
turns both into a claim, a table and a figure; the lab evaluates and writes.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from dedebate.lab.experiment import Claim, ExperimentResult

NAME = "fake_report"
TITLE = "Fake report-contract experiment: heads of a p-coin in their exact interval"
DYNAMIC = ("p",)


@dataclasses.dataclass(frozen=True)
class Config:
    n: int = dataclasses.field(default=64, metadata={"doc": "coins per trial (static), >= 1"})
    trials: int = dataclasses.field(default=8, metadata={"doc": "trials (static), >= 1"})
    p: float = dataclasses.field(default=0.5, metadata={"doc": "heads probability, in [0, 1]"})


SIZES = {"quick": {"n": 32}, "full": {"trials": 256}}


def point(cfg: Config):
    """``(dynamic, fn)``: ``fn`` counts heads per trial and in all."""
    n, trials = cfg.n, cfg.trials

    def fn(dyn, key):
        heads = jnp.sum(jax.random.bernoulli(key, dyn["p"], (trials, n)), axis=1, dtype=jnp.int32)
        return {"heads": jnp.sum(heads), "max_trial": jnp.max(heads)}

    return {"p": jnp.float32(cfg.p)}, fn


def host(cfg: Config, seed: int, key, measured) -> dict:
    """The expected count, the seed and the measured count as the host saw them."""
    return {"expected": cfg.p * cfg.n * cfg.trials, "seed": seed, "seen": measured["heads"]}


def report(cfg: Config, measured, host) -> ExperimentResult:
    """One proportion row, a two-row table and a bar figure."""
    from matplotlib.figure import Figure

    total = cfg.n * cfg.trials
    fig = Figure()
    fig.subplots().bar(["heads", "expected"], [measured["heads"], host["expected"]])
    return ExperimentResult(
        claims=[
            Claim.proportion(
                "heads rate is p", "fake lemma 4", "==", cfg.p, measured["heads"], total
            )
        ],
        metrics={"host": host},
        tables={
            "counts": [
                {"what": "heads", "count": measured["heads"]},
                {"what": "max_trial", "count": measured["max_trial"]},
            ]
        },
        figures={"heads": fig},
    )
