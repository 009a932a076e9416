"""A tiny stand-in for the lab's ``RunContext`` (``dedebate/lab/experiment.py``), for unit tests of
experiment ``run`` functions that should not start the lab (no run directory, no W&B).

    ctx = FakeContext(tmp_path, seed=0)
    result = my_experiment.run(my_experiment.Config(), ctx)
    ctx.logged   # [(step, metrics), ...] of this attempt
    ctx.figures  # ["name.png", ...] saved under tmp_path / "plots"
"""

from __future__ import annotations

import contextlib
import itertools
import zlib
from pathlib import Path
from typing import Any

import jax

from dedebate.programs import FAST_COMPILE


def training_bar(ctx) -> FakeBar:
    """The progress bar of a run's chunked training (the lab's ``NAME training``)."""
    return next(b for b in ctx.bars if b.desc.endswith(" training"))


class FakeBar:
    """Counts ``update`` calls like a tqdm bar would."""

    def __init__(self, total: int, desc: str):
        self.total, self.desc, self.n = total, desc, 0

    def update(self, n: int = 1) -> None:
        self.n += n


class FakeContext:
    """Implements every RunContext service with plain Python, keyed like the real lab."""

    def __init__(
        self,
        root: str | Path,
        seed: int = 0,
        name: str = "fake",
        resume: bool = False,
    ):
        self.root = Path(root)
        self.seed = seed
        # Same derivation as dedebate.lab.runner.experiment_key.
        self.key = jax.random.fold_in(jax.random.key(seed), zlib.crc32(name.encode()) & 0x7FFFFFFF)
        self.plots_dir = self.root / "plots"
        self.checkpoint_dir = self.root / "checkpoints"
        self.plots_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self.resume = resume
        self.logged: list[tuple[int | None, dict[str, Any]]] = []
        self.figures: list[str] = []
        self.bars: list[FakeBar] = []
        self.truncated: list[int] = []
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def progress(self, total: int, desc: str):
        bar = FakeBar(total, desc)
        self.bars.append(bar)
        yield bar

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        self.logged.append((step, dict(metrics)))

    def truncate_metrics(self, step: int) -> None:
        """Records ``step`` in ``truncated`` and drops this attempt's rows from it on."""
        self.truncated.append(step)
        self.logged = [(s, m) for s, m in self.logged if s is None or s < step]

    def checkpointer(self, every: int = 1, keep: int = 3):
        """Like the lab's: an Orbax Checkpointer on ``checkpoint_dir`` (config hash ``"fake"``)."""
        from dedebate.lab.checkpoint import Checkpointer

        return Checkpointer(self.checkpoint_dir, "fake", every=every, keep=keep)

    def stopwatch(self, name: str):
        """Like the lab's: times the block into ``timings["wall_<name>_s"]``."""
        from dedebate.lab.experiment import stopwatch

        return stopwatch(name, self.timings)

    def save_figure(self, fig: Any, name: str) -> str:
        import matplotlib.pyplot as plt

        filename = name if name.endswith(".png") else f"{name}.png"
        fig.savefig(self.plots_dir / filename)
        plt.close(fig)
        self.figures.append(filename)
        return filename


class Crash(RuntimeError):
    """What :class:`CrashingContext` raises: a stand-in for a killed run."""


class CrashingContext(FakeContext):
    """A :class:`FakeContext` whose progress bar raises :class:`Crash` once it has been updated
    ``after`` times (chunked training updates it after each chunk, once that chunk is logged
    and, when due, checkpointed), for resume tests."""

    def __init__(self, *args, after: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.after = after

    @contextlib.contextmanager
    def progress(self, total: int, desc: str):
        with super().progress(total, desc) as bar:
            update = bar.update

            def crashing(n: int = 1) -> None:
                update(n)
                if bar.n >= self.after:
                    raise Crash(f"crash after chunk {bar.n}")

            bar.update = crashing
            yield bar


def count_point_traces(monkeypatch, module) -> list[int]:
    """Wrap ``module.point`` so every trace of its ``fn`` (once per compile) adds 1 to the
    returned one-element counter; ``monkeypatch.undo()`` or a new setattr restores it."""
    traces = [0]
    real_point = module.point

    def counting(cfg):
        dyn, fn = real_point(cfg)

        def traced(d, key, *host):  # host: the row's inputs(), where the module defines it
            traces[0] += 1
            return fn(d, key, *host)

        return dyn, traced

    monkeypatch.setattr(module, "point", counting)
    return traces


def count_chunked_traces(monkeypatch, module) -> dict[str, int]:
    """Wrap ``module.point`` (a chunked point: ``(dynamic, ChunkedFn)``) so every trace of its
    ``init``, ``chunk`` (per spec) and ``finish`` (once per compile of each program) adds 1 to
    the returned counter, keyed ``"init"``, ``("chunk", spec)`` and ``"finish"``."""
    import dataclasses

    traces: dict = {}
    real_point = module.point

    def counted(name, f):
        def traced(*args):
            key = (name, args[-1]) if name == "chunk" else name
            traces[key] = traces.get(key, 0) + 1
            return f(*args)

        return traced

    def counting(cfg):
        dyn, fn = real_point(cfg)
        return dyn, dataclasses.replace(
            fn,
            init=counted("init", fn.init),
            chunk=counted("chunk", fn.chunk),
            finish=counted("finish", fn.finish),
        )

    monkeypatch.setattr(module, "point", counting)
    return traces


def sweep_one_row_per_call(
    module, tmp: Path, *, params: dict, axes: dict[str, list], seed: int = 0, seeds: int = 1
):
    """Resolve and run a sweep of ``module`` over ``axes`` x ``seeds`` at ``params``, one row per
    call (``sweep.batch: 1``), no tracking or plots, output under ``tmp / "out"``, with the
    program cache cleared first. Returns ``(resolved config, sweep record)``."""
    from dedebate.lab.config import resolve
    from dedebate.lab.devices import clear_program_cache
    from dedebate.lab.sweep import run_sweep

    raw = {
        "experiment": module.NAME,
        "seed": seed,
        "output_dir": str(tmp / "out"),
        "tracking": {"mode": "disabled"},
        "params": params,
        "sweep": {"seeds": seeds, "axes": axes, "plots": False, "batch": 1},
    }
    cfg = resolve(raw, {module.NAME: module})
    clear_program_cache()
    return cfg, run_sweep(module, cfg, show_progress=False)


def sweep_then_run_alone(
    module,
    tmp: Path,
    *,
    axes: dict[str, list],
    pick,
    seed: int = 0,
    seeds: int = 1,
    run_seed: int | None = None,
):
    """Sweep ``axes`` x ``seeds`` at the quick size one row per call (``sweep.batch: 1``), then
    run ``module`` alone (``run_module``) on the first point whose values satisfy
    ``pick(values)``, at seed ``run_seed`` (default: the sweep's first seed) and that row's key
    (``point_key``).

    Returns ``(sweep record, point, run seed, run result, context, traces of point's fn after
    both)``: one trace means the run reused the sweep's compiled program."""
    from dedebate.lab.evaluate import run_module
    from dedebate.lab.sweep import plan, point_key

    params = {k: list(v) if isinstance(v, tuple) else v for k, v in module.SIZES["quick"].items()}
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        traces = count_point_traces(mp, module)  # traces of the sweep's fn (once per compile)
        cfg, rec = sweep_one_row_per_call(
            module, tmp, params=params, axes=axes, seed=seed, seeds=seeds
        )
        pt = next(p for p in plan(module, cfg).points if pick(p.values))
        run_seed = rec.rows[0]["seed"] if run_seed is None else run_seed
        ctx = FakeContext(tmp / "alone", seed=run_seed, name=module.NAME)
        ctx.key = point_key(module.NAME, run_seed, pt.cfg)
        result = run_module(module, pt.cfg, ctx)
    return rec, pt, run_seed, result, ctx, traces[0]


BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # JAX's event per XLA compile
CACHE_HIT = "/jax/compilation_cache/cache_hits"  # its event per program loaded from the disk cache


@contextlib.contextmanager
def count_compiles():
    """Count the programs XLA compiles inside the block, or JAX loads from its persistent cache
    instead (the suite's, tests/conftest.py), through JAX's public monitoring events: yields a
    one-element list whose item grows by one per program."""
    count = [0]

    def on_compile(event: str, duration_secs: float, **kwargs: Any) -> None:
        if event == BACKEND_COMPILE:
            count[0] += 1

    def on_hit(event: str, **kwargs: Any) -> None:
        if event == CACHE_HIT:
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(on_compile)
    jax.monitoring.register_event_listener(on_hit)
    try:
        yield count
    finally:
        jax.monitoring.unregister_event_duration_listener(on_compile)
        jax.monitoring.unregister_event_listener(on_hit)


def truncate_checkpoint(step_dir: Path) -> None:
    """Damage an Orbax checkpoint as a crash mid-write would: every array data file under
    ``step_dir`` (files in a ``d`` folder) cut to half its length."""
    files = [f for f in Path(step_dir).rglob("*") if f.is_file() and f.parent.name == "d"]
    assert files, f"no array data files under {step_dir}"
    for f in files:
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


# XLA options for the tests' own large programs (the binomial samplers' loops): the stochastic
# driver's replay options, so a test's program compiles as the replays it is compared with do
# (also when XLA_FLAGS sets other options than tests/conftest.TEST_COMPILE_OPTIONS).
LIGHT_COMPILE = FAST_COMPILE


def assert_one_line_error(code, err, *fragments):
    """A refused command line: exit 2 and one stderr line, no traceback, holding every fragment."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


class FakeRun:
    ids = itertools.count()

    def __init__(self, kwargs):
        self.kwargs = kwargs
        self.id = f"fake{next(self.ids)}"
        self.dir = str(Path(kwargs["dir"]) / "wandb" / f"offline-run-{self.id}" / "files")
        self.logged, self.summary, self.artifacts, self.exit_code = [], {}, [], None

    def log(self, data):
        self.logged.append(data)

    def log_artifact(self, art):
        self.artifacts.append(art)

    def finish(self, exit_code=0):
        self.exit_code = exit_code


class FakeWandb:
    """Just the parts of ``wandb`` the lab uses."""

    def __init__(self):
        self.runs: list[FakeRun] = []

    @staticmethod
    def Settings(**kwargs):
        return kwargs

    def init(self, **kwargs):
        (Path(kwargs["dir"]) / "wandb").mkdir(parents=True, exist_ok=True)  # as wandb does
        run = FakeRun(kwargs)
        self.runs.append(run)
        return run

    class Image:
        def __init__(self, path):
            self.path = path

    class Table:
        def __init__(self, columns, data):
            self.columns, self.data = columns, data

    class Artifact:
        def __init__(self, name, type):
            self.name, self.type, self.files = name, type, []

        def add_file(self, path, name=None):
            self.files.append(name or Path(path).name)
