"""A fake experiment whose claims pass: exercises every RunContext service and field type."""

from __future__ import annotations

import dataclasses
from typing import Literal, Optional

import jax
import jax.numpy as jnp

from dedebate.lab.experiment import Claim, ExperimentResult, wilson_interval

NAME = "fake_pass"
TITLE = "Fake experiment: a fair coin's heads rate is in its Wilson interval"


@dataclasses.dataclass(frozen=True)
class Config:
    n: int = dataclasses.field(default=64, metadata={"doc": "coin flips per chunk"})
    chunks: int = dataclasses.field(default=3, metadata={"doc": "chunks (progress steps)"})
    p: float = dataclasses.field(default=0.5, metadata={"doc": "heads probability, in [0, 1]"})
    flag: bool = dataclasses.field(default=False, metadata={"doc": "a boolean switch"})
    label: str = dataclasses.field(default="coin", metadata={"doc": "a string"})
    xs: tuple[int, ...] = dataclasses.field(default=(1, 2), metadata={"doc": "a tuple of ints"})
    k: Optional[int] = dataclasses.field(  # noqa: UP045 - tests typing.Optional on purpose
        default=None, metadata={"doc": "an optional int"})
    kind: Literal["a", "b"] = dataclasses.field(default="a", metadata={"doc": "a literal"})
    lr: float | None = dataclasses.field(default=None, metadata={"doc": "an optional float"})

    def __post_init__(self):
        if self.n < 1:
            raise ValueError(f"n={self.n}: must be >= 1")
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p={self.p}: must be a probability in [0, 1]")


SIZES = {"quick": {"n": 16, "chunks": 2}, "full": {"n": 4096, "chunks": 8}}


def run(cfg: Config, ctx) -> ExperimentResult:
    heads = 0
    total = 0
    with ctx.progress(cfg.chunks, "flips") as bar:
        for i in range(cfg.chunks):
            key = jax.random.fold_in(ctx.key, i)
            h = int(jnp.sum(jax.random.bernoulli(key, cfg.p, (cfg.n,))))
            heads += h
            total += cfg.n
            ctx.log({"heads": h, "rate": jnp.float32(h / cfg.n)}, step=i)
            bar.update(1)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.bar(["heads", "tails"], [heads, total - heads])
    plot = ctx.save_figure(fig, "counts")
    rate, lo, hi = wilson_interval(heads, total)
    claim = Claim("heads rate near p", "fake lemma 1", f"contains {cfg.p}", rate, lo, hi,
                  passed=lo <= cfg.p <= hi, note=f"{total} flips")
    exact = Claim.exact("flips counted", "fake lemma 2", f"== {cfg.n * cfg.chunks}", total,
                        passed=total == cfg.n * cfg.chunks)
    return ExperimentResult(
        claims=[claim, exact],
        metrics={"heads": heads, "total": total, "rate": rate, "nested": {"a": 1.5}},
        tables={"chunks": [{"chunk": i, "n": cfg.n} for i in range(cfg.chunks)]},
        plots=[plot],
    )
