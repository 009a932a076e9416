"""W&B tracking that can never lose results.

Every run is a W&B run, offline by default (files under ``<run_dir>/wandb/``, no account, no
network; ``dedebate sync <run_dir>`` uploads later). ``tracking.mode`` decides the
mode; ``auto`` follows ``WANDB_MODE``. The lab writes its local files before it calls W&B, and any
exception from W&B (import error, init failure, full disk, network) turns into one warning on
stderr and disables tracking for the rest of the run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dedebate.lab.rundir import eprint, flatten_numbers


def _settings(wandb: Any) -> Any:
    """Fast, quiet start-up: no system stats, no git/code capture, no console capture."""
    opts = {"silent": True, "console": "off", "x_disable_stats": True, "x_disable_meta": True,
            "x_disable_machine_info": True, "disable_git": True, "save_code": False,
            "disable_job_creation": True, "init_timeout": 60.0}
    try:
        return wandb.Settings(**opts)
    except Exception:  # noqa: BLE001 - an older/newer wandb without some option
        return wandb.Settings(silent=True)


class Tracker:
    """One W&B run, or nothing (``mode == "disabled"`` or after a failure)."""

    def __init__(self, run: Any = None, mode: str = "disabled", wandb_module: Any = None):
        self.run = run
        self.mode = mode
        self._wandb = wandb_module
        self.failed: str | None = None
        # W&B stages artifact files in its data directory until they are uploaded; inside the
        # run directory, they travel with it (default: a per-user directory outside the run).
        self.data_dir: Path | None = None

    # -- life cycle -----------------------------------------------------------------------

    @classmethod
    def start(cls, *, mode: str, run_dir: str | os.PathLike, project: str, job_type: str,
              config: dict[str, Any], name: str | None = None, group: str | None = None,
              entity: str | None = None) -> Tracker:
        """Start a W&B run with ``dir=run_dir`` (so its files live inside the run directory)."""
        if mode == "disabled":
            return cls(None, "disabled")
        try:
            os.environ.setdefault("WANDB_SILENT", "true")
            import wandb

            kwargs: dict[str, Any] = {
                "project": project, "dir": str(run_dir), "mode": mode, "config": config,
                "job_type": job_type, "name": name, "group": group, "reinit": "create_new",
                "settings": _settings(wandb)}
            if entity:
                kwargs["entity"] = entity
            run = wandb.init(**kwargs)
            tracker = cls(run, mode, wandb)
            tracker.data_dir = Path(run_dir) / "wandb" / "data"
            return tracker
        except BaseException as err:
            if isinstance(err, KeyboardInterrupt):
                raise
            t = cls(None, "disabled")
            t._warn("start", err)
            return t

    def _warn(self, what: str, err: BaseException) -> None:
        msg = " ".join(str(err).split())[:300]
        self.failed = f"{type(err).__name__}: {msg}"
        eprint(f"dedebate: warning: W&B tracking failed ({what}: {self.failed}); "
               "tracking is off for this run, local results are complete")
        run, self.run = self.run, None
        if run is not None and what != "finish":
            try:  # close the broken run so W&B does not keep it open until exit
                run.finish(exit_code=1)
            except BaseException as again:
                if isinstance(again, KeyboardInterrupt):
                    raise

    def _guard(self, what: str, fn, *args, **kwargs) -> None:
        if self.run is None:
            return
        try:
            fn(*args, **kwargs)
        except BaseException as err:
            if isinstance(err, KeyboardInterrupt):
                raise
            self._warn(what, err)

    @property
    def active(self) -> bool:
        return self.run is not None

    @property
    def run_id(self) -> str | None:
        try:
            return self.run.id if self.run is not None else None
        except Exception:  # noqa: BLE001
            return None

    @property
    def run_path(self) -> str | None:
        """The local W&B run folder (``.../wandb/offline-run-...``) if there is one."""
        try:
            if self.run is None:
                return None
            return str(Path(self.run.dir).parent)
        except Exception:  # noqa: BLE001
            return None

    def finish(self, exit_code: int = 0) -> None:
        self._guard("finish", lambda: self.run.finish(exit_code=exit_code))
        self.run = None

    # -- logging --------------------------------------------------------------------------

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Scalars only; the lab's own ``step`` goes in as a metric, so W&B never drops rows
        whose step is not increasing."""
        if self.run is None:
            return
        data = flatten_numbers(metrics)
        if step is not None:
            data.setdefault("step", step)
        if data:
            self._guard("log", self.run.log, data)

    def log_image(self, name: str, path: str | os.PathLike) -> None:
        if self.run is None:
            return
        self._guard("log image",
                    lambda: self.run.log({f"plots/{name}": self._wandb.Image(str(path))}))

    def log_artifact(self, name: str, kind: str, paths: Iterable[str | os.PathLike]) -> None:
        if self.run is None:
            return

        def _do():
            art = self._wandb.Artifact(_artifact_name(name), type=kind)
            with _data_dir(self.data_dir):
                for p in paths:
                    p = Path(p)
                    if p.is_file():
                        art.add_file(str(p), name=p.name)
                self.run.log_artifact(art)

        self._guard("artifact", _do)

    def log_table(self, name: str, rows: list[dict[str, Any]]) -> None:
        """A tidy table (e.g. ``sweep.csv``) as a ``wandb.Table``; cells that are not numbers or
        strings are logged as their JSON text."""
        if self.run is None or not rows:
            return

        def _do():
            import json

            columns: list[str] = []
            for r in rows:
                columns += [k for k in r if k not in columns]

            def cell(v):
                return v if v is None or isinstance(v, (bool, int, float, str)) \
                    else json.dumps(v)

            data = [[cell(r.get(c)) for c in columns] for r in rows]
            self.run.log({name: self._wandb.Table(columns=columns, data=data)})

        self._guard("table", _do)

    def set_summary(self, values: dict[str, Any]) -> None:
        if self.run is None:
            return

        def _do():
            for k, v in flatten_numbers(values).items():
                self.run.summary[k] = v

        self._guard("summary", _do)


@contextlib.contextmanager
def _data_dir(path: Path | None):
    """``WANDB_DATA_DIR=path`` while W&B stages artifact files (restored afterwards)."""
    if path is None:
        yield
        return
    old = os.environ.get("WANDB_DATA_DIR")
    os.environ["WANDB_DATA_DIR"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("WANDB_DATA_DIR", None)
        else:
            os.environ["WANDB_DATA_DIR"] = old


def _artifact_name(name: str) -> str:
    """W&B artifact names allow letters, digits, dashes, underscores and dots."""
    return "".join(c if (c.isalnum() or c in "-_.") else "-" for c in name)[:120]
