"""A fake experiment whose claims pass: a host step, a pure report with a table the lab logs and a
figure the lab saves, and every field type of a Config."""

from __future__ import annotations

import dataclasses
from typing import Literal, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dedebate.lab.experiment import Claim, ExperimentResult, wilson_interval

NAME = "fake_pass"
TITLE = "Fake experiment: a fair coin's heads rate is in its Wilson interval"


@dataclasses.dataclass(frozen=True)
class Config:
    n: int = dataclasses.field(default=64, metadata={"doc": "coin flips per chunk"})
    chunks: int = dataclasses.field(default=3, metadata={"doc": "chunks (table rows)"})
    p: float = dataclasses.field(default=0.5, metadata={"doc": "heads probability, in [0, 1]"})
    flag: bool = dataclasses.field(default=False, metadata={"doc": "a boolean switch"})
    label: str = dataclasses.field(default="coin", metadata={"doc": "a string"})
    xs: tuple[int, ...] = dataclasses.field(default=(1, 2), metadata={"doc": "a tuple of ints"})
    k: Optional[int] = dataclasses.field(  # noqa: UP045 - tests typing.Optional on purpose
        default=None, metadata={"doc": "an optional int"}
    )
    kind: Literal["a", "b"] = dataclasses.field(default="a", metadata={"doc": "a literal"})
    lr: float | None = dataclasses.field(default=None, metadata={"doc": "an optional float"})

    def __post_init__(self):
        if self.n < 1:
            raise ValueError(f"n={self.n}: must be >= 1")
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p={self.p}: must be a probability in [0, 1]")


SIZES = {"quick": {"n": 16, "chunks": 2}, "full": {"n": 4096, "chunks": 8}}


def host(cfg: Config, seed: int, key, measured) -> list[int]:
    """Heads of each chunk's ``n`` flips (chunk ``i`` at ``fold_in(key, i)``)."""
    return [
        int(jnp.sum(jax.random.bernoulli(jax.random.fold_in(key, i), cfg.p, (cfg.n,))))
        for i in range(cfg.chunks)
    ]


def report(cfg: Config, measured, host: list[int]) -> ExperimentResult:
    """The heads rate's Wilson interval, the flip count, a row per chunk and a bar figure."""
    from matplotlib.figure import Figure

    heads, total = sum(host), cfg.n * len(host)
    fig = Figure()
    fig.subplots().bar(["heads", "tails"], [heads, total - heads])
    rate, lo, hi = wilson_interval(heads, total)
    claim = Claim(
        "heads rate near p",
        "fake lemma 1",
        f"contains {cfg.p}",
        rate,
        lo,
        hi,
        passed=lo <= cfg.p <= hi,
        note=f"{total} flips",
    )
    exact = Claim.exact(
        "flips counted",
        "fake lemma 2",
        f"== {cfg.n * cfg.chunks}",
        total,
        passed=total == cfg.n * cfg.chunks,
    )
    return ExperimentResult(
        claims=[claim, exact],
        metrics={"heads": heads, "total": total, "rate": rate, "nested": {"a": 1.5}},
        tables={
            "chunks": [
                {"chunk": i, "n": cfg.n, "heads": h, "rate": np.float32(h / cfg.n)}
                for i, h in enumerate(host)
            ]
        },
        figures={"counts": fig},
    )
