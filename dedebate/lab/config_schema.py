"""What a run configuration is: ``RunConfig`` and its sections, frozen and self-checking.

:class:`RunConfig` holds one run of one experiment: its registry name, seed, size, output
directory, resume flag, W&B tracking (:class:`TrackingConfig`), the experiment's own ``Config``
as ``params`` and an optional sweep grid (:class:`SweepConfig`). Each section checks its own
fields in ``__post_init__`` (``ValueError("name=value: what is allowed")``). Its config hash
(:meth:`RunConfig.config_hash`) covers exactly what determines the results (experiment, seed,
size, params), so resuming or moving a run keeps it. Building one from YAML and the command
line: :mod:`dedebate.lab.config`.
"""

from __future__ import annotations

import dataclasses
import fractions
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

from dedebate.lab.config_types import ConfigError, show_value
from dedebate.lab.experiment import doc as _doc

SIZES = ("quick", "default", "full")
TrackingMode = Literal["auto", "offline", "online", "disabled"]
TRACKING_MODES: tuple[str, ...] = get_args(TrackingMode)
# Values of the WANDB_MODE environment variable and the tracking mode each one means.
_WANDB_ENV_MODES = {
    "online": "online",
    "run": "online",
    "offline": "offline",
    "dryrun": "offline",
    "disabled": "disabled",
}
KEY_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


PROJECT_FORBIDDEN = "/\\#?%:"
"""Characters W&B refuses in a project's name."""


def _check_no_nul(name: str, value: Any) -> None:
    """Refuse a string with a NUL character: no path or W&B name can hold one."""
    if isinstance(value, str) and "\0" in value:
        raise ValueError(
            f"{name}={show_value(value)}: contains a NUL character (\\0), "
            "which no path or name may hold"
        )


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    """W&B tracking. Offline by default: nothing needs an account or a network."""

    mode: TrackingMode = dataclasses.field(
        default="auto",
        metadata=_doc(
            "auto = the WANDB_MODE environment variable if set, else offline; "
            "offline | online | disabled force that mode"
        ),
    )
    project: str = dataclasses.field(default="dedebate", metadata=_doc("W&B project name"))
    entity: str | None = dataclasses.field(
        default=None, metadata=_doc("W&B entity (user or team); null = the account default")
    )
    group: str | None = dataclasses.field(
        default=None, metadata=_doc("W&B group (e.g. one sweep or one reproduce job)")
    )

    def __post_init__(self):
        if self.mode not in TRACKING_MODES:
            raise ValueError(f"mode={self.mode!r}: must be one of {', '.join(TRACKING_MODES)}")
        for name in ("project", "entity", "group"):
            value = getattr(self, name)
            _check_no_nul(name, value)
            if value is not None and (not value.strip() or len(value) > 128):
                raise ValueError(f"{name}={value!r}: must be 1 to 128 characters, not all blank")
        if set(self.project) & set(PROJECT_FORBIDDEN):  # W&B's own rule (wandb_settings)
            raise ValueError(
                f"project={self.project!r}: must not contain any of {' '.join(PROJECT_FORBIDDEN)}"
            )

    def effective_mode(self, environ: Mapping[str, str] | None = None) -> str:
        """The mode W&B runs in: ``offline``, ``online`` or ``disabled``.

        ``auto`` follows ``WANDB_MODE`` when it is set to a value W&B knows, else ``offline``.
        An explicit mode in the config wins over the environment.

        Args:
            environ: the environment to read ``WANDB_MODE`` from; None = ``os.environ``.

        Returns ``"offline"``, ``"online"`` or ``"disabled"``.
        """
        if self.mode != "auto":
            return self.mode
        env = os.environ if environ is None else environ
        value = env.get("WANDB_MODE", "").strip().lower()
        return _WANDB_ENV_MODES.get(value, "offline")


SWEEP_TRACKING = ("points", "sweep")


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A grid of runs of one experiment (``dedebate sweep``; see ``dedebate/lab/sweep.py``).

    Every combination of ``axes`` values is one point; every point runs once per seed. Axes over
    fields the experiment lists in ``DYNAMIC`` run inside one compiled, vmapped program; axes
    over other (static) fields compile once per value.
    """

    seeds: int | list[int] = dataclasses.field(
        default=1,
        metadata=_doc("N (the N seeds seed, seed+1, ..., seed+N-1) or an explicit list of seeds"),
    )
    axes: dict[str, list[Any]] = dataclasses.field(
        default_factory=dict,
        metadata=_doc("params field -> list of values; the grid is their Cartesian product"),
    )
    batch: int = dataclasses.field(
        default=0,
        metadata=_doc("most rows (point x seed) per compiled call; 0 = a whole static group"),
    )
    tracking: Literal["points", "sweep"] = dataclasses.field(
        default="points",
        metadata=_doc(
            "points = one W&B run per point (plus one for the sweep); "
            "sweep = only the sweep's W&B run"
        ),
    )
    plots: bool = dataclasses.field(
        default=True, metadata=_doc("plot metrics against every axis (bands over seeds)")
    )
    metrics: list[str] = dataclasses.field(
        default_factory=list,
        metadata=_doc("metrics to plot; [] = every metric, the first 24 if there are more"),
    )
    max_rows: int = dataclasses.field(
        default=100_000,
        metadata=_doc(
            "most rows (points x seeds) a sweep may have; raise it for a larger grid "
            "(each row is a point's Config, a line of sweep.csv and a W&B row)"
        ),
    )

    def __post_init__(self):
        if isinstance(self.seeds, int):
            if not 1 <= self.seeds <= 100_000:
                raise ValueError(
                    f"seeds={self.seeds}: must be a count in [1, 100000] or a list of seeds"
                )
        else:
            if not self.seeds:
                raise ValueError("seeds=[]: must list at least one seed")
            bad = [s for s in self.seeds if not 0 <= s < 2**32]
            if bad:
                raise ValueError(f"seeds={bad[0]}: each seed must be an integer in [0, 2^32)")
            if len(set(self.seeds)) != len(self.seeds):
                raise ValueError(f"seeds={list(self.seeds)}: seeds must be distinct")
        for name in self.axes:
            if not KEY_SEGMENT.match(str(name)):
                raise ValueError(f"axes={name!r}: an axis is the name of a params field")
        if not 0 <= self.batch <= 2**31:
            raise ValueError(
                f"batch={self.batch}: must lie in [0, 2^31] (0 = a whole static group)"
            )
        if not 1 <= self.max_rows <= 2**31:
            raise ValueError(f"max_rows={self.max_rows}: must lie in [1, 2^31]")
        blank = [m for m in self.metrics if not str(m).strip()]
        if blank or len(set(self.metrics)) != len(self.metrics):
            raise ValueError(f"metrics={list(self.metrics)}: names must be distinct and not blank")
        seeds = self.seeds if isinstance(self.seeds, int) else len(self.seeds)
        rows = (
            math.prod(len(v) if isinstance(v, list | tuple) else 1 for v in self.axes.values())
            * seeds
        )
        if rows > self.max_rows:
            raise ValueError(
                f"axes x seeds = {rows} rows, over max_rows={self.max_rows}: "
                "shrink the grid, or raise sweep.max_rows to run it"
            )
        if self.tracking not in SWEEP_TRACKING:
            raise ValueError(
                f"tracking={self.tracking!r}: must be one of {', '.join(SWEEP_TRACKING)}"
            )

    def seed_list(self, base_seed: int) -> list[int]:
        """The seeds of the sweep: ``seeds`` if a list, else ``base_seed + i`` for i < seeds.

        Raises:
            ConfigError: a count of seeds that runs past 2^32 - 1.
        """
        if isinstance(self.seeds, int):
            out = [base_seed + i for i in range(self.seeds)]
            if out[-1] >= 2**32:
                raise ConfigError(
                    f"sweep.seeds={self.seeds}: seed {base_seed} + {self.seeds - 1} "
                    "is beyond 2^32 - 1"
                )
            return out
        return list(self.seeds)


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_BYTE_SIZE = re.compile(r"^\s*(\d+)(?:\.(\d+))?\s*([a-z]*)\s*$", re.IGNORECASE)
MAX_LIMIT_BYTES = 2**63
"""The largest ``memory_limit``: 8 EiB, beyond any machine (and a signed 64-bit count)."""


def parse_limit(value: int | str) -> int | None:
    """A ``memory_limit`` in bytes: ``auto`` (None: the machine's memory), an integer of bytes
    or a number with a unit (``64G``, ``512MiB``, ``1.5TB``), at most ``MAX_LIMIT_BYTES``.

    Returns bytes (>= 1), or None for ``auto``. ValueError naming the value otherwise.
    """
    n = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str):
        if value.strip().lower() == "auto":
            return None
        m = _BYTE_SIZE.match(value)
        if m and m.group(3).lower() in _BYTE_UNITS:
            whole, frac = m.group(1).lstrip("0"), (m.group(2) or "")[:60]
            # Exact (no float overflow or rounding); 60 decimals decide the floor for every unit.
            n = MAX_LIMIT_BYTES + 1
            if len(whole) <= 20:
                number = fractions.Fraction(f"{whole or 0}.{frac or 0}")
                n = math.floor(number * _BYTE_UNITS[m.group(3).lower()])
    if n is not None and n > MAX_LIMIT_BYTES:
        raise ValueError(
            f"memory_limit={show_value(value)}: more than 2^63 bytes, the largest limit "
            "(use auto, or a size such as 64GiB)"
        )
    if n is not None and n >= 1:
        return n
    raise ValueError(
        f"memory_limit={show_value(value)}: must be auto, a number of bytes >= 1, or a size "
        "with a unit (e.g. 512MiB, 64G, 1.5TB)"
    )


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One run of one experiment, fully resolved. ``params`` is the experiment's ``Config``."""

    experiment: str = dataclasses.field(
        default="", metadata=_doc("required: registry name of the experiment (experiments/NAME/)")
    )
    seed: int = dataclasses.field(
        default=0, metadata=_doc("root PRNG seed, an integer in [0, 2^32)")
    )
    size: Literal["quick", "default", "full"] = dataclasses.field(
        default="default",
        metadata=_doc("quick (tiny, for tests) | default | full (paper scale, accelerator)"),
    )
    output_dir: str = dataclasses.field(
        default="runs", metadata=_doc("where run directories are created")
    )
    resume: bool = dataclasses.field(
        default=False,
        metadata=_doc("continue the latest run of this exact config from its checkpoints"),
    )
    tracking: TrackingConfig = dataclasses.field(
        default_factory=TrackingConfig, metadata=_doc("W&B tracking")
    )
    params: Any = dataclasses.field(
        default=None, metadata=_doc("the experiment's own Config fields")
    )
    sweep: SweepConfig | None = dataclasses.field(
        default=None,
        metadata=_doc("a grid of runs: seeds and values of params fields (dedebate sweep)"),
    )
    memory_limit: int | str = dataclasses.field(
        default="auto",
        metadata=_doc(
            "most memory a run (or a sweep's compiled call) may be estimated to need "
            "before it starts; auto = the memory this machine has available; or bytes, "
            "or a size such as 64GiB (raise it to run a refused config anyway)"
        ),
    )

    def __post_init__(self):
        if not (0 <= self.seed < 2**32):
            raise ValueError(f"seed={self.seed}: must be an integer in [0, 2^32)")
        _check_no_nul("output_dir", self.output_dir)
        if not self.output_dir.strip():
            raise ValueError(f"output_dir={self.output_dir!r}: must name a folder (runs/ if unset)")
        parse_limit(self.memory_limit)
        if self.size not in SIZES:
            raise ValueError(f"size={self.size!r}: must be one of {', '.join(SIZES)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), the form written to ``config.yaml``.

        Returns the top-level keys, ``tracking`` and ``params`` as dicts, and ``sweep`` if set.
        """
        return {
            "experiment": self.experiment,
            "seed": self.seed,
            "size": self.size,
            "output_dir": self.output_dir,
            "resume": self.resume,
            "tracking": plain(dataclasses.asdict(self.tracking)),
            "params": plain(dataclasses.asdict(self.params)) if self.params is not None else {},
            "memory_limit": self.memory_limit,
            **({"sweep": plain(dataclasses.asdict(self.sweep))} if self.sweep is not None else {}),
        }

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of the result-determining part of the config.

        Covers ``experiment``, ``seed``, ``size`` and ``params``; not ``output_dir``, ``resume``
        or ``tracking``, which change where results go, never what they are (so a resumed run
        keeps its hash).
        """
        return config_hash_of(self.to_dict())

    def sweep_hash(self) -> str:
        """:meth:`config_hash` extended by the ``sweep`` block's ``seeds`` and ``axes``.

        That is what a sweep directory's results depend on (checked when a sweep is resumed).
        """
        return sweep_hash_of(self.to_dict())


def sweep_hash_of(d: Mapping[str, Any]) -> str:
    """:meth:`RunConfig.sweep_hash` of a plain config dict (e.g. a loaded ``config.yaml``).

    Args:
        d: a config as :meth:`RunConfig.to_dict` writes it.
    """
    sweep = plain(d.get("sweep")) or {}
    sweep = {k: v for k, v in sweep.items() if k in ("seeds", "axes")}  # what sets the numbers
    core = {"config": config_hash_of(d), "sweep": sweep}
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def config_hash_of(d: Mapping[str, Any]) -> str:
    """:meth:`RunConfig.config_hash` of a plain config dict (e.g. a loaded ``config.yaml``).

    Args:
        d: a config as :meth:`RunConfig.to_dict` writes it.
    """
    core = {k: plain(d.get(k)) for k in ("experiment", "seed", "size", "params")}
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def plain(x: Any) -> Any:
    """A value with its mappings' keys as strings and its tuples as lists (JSON/YAML form).

    Args:
        x: a value built from dicts, lists, tuples and scalars.
    """
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x
