"""W&B tracking that can never lose results.

Every run is a W&B run, offline by default (files under ``<run_dir>/wandb/``, no account, no
network; ``dedebate sync <run_dir>`` uploads later). ``tracking.mode`` decides the mode; ``auto``
follows ``WANDB_MODE``. The lab writes its local files before it calls W&B, and any exception
from W&B (import error, init failure, full disk, network) turns into one warning on stderr and
disables tracking for the rest of the run.

Online mode first checks, once per process and W&B server, that the server answers an HTTP
request within ``PROBE_TIMEOUT_S``; if not, or if an online start fails, every W&B run of this
process (the rest of a run, sweep or reproduce) is offline instead, after one warning: a machine
without a network waits seconds, not a minute per W&B run.

A run's W&B config holds its provenance (dedebate/lab/provenance.py); a resumed run continues its
W&B run (id in ``<run_dir>/wandb/``, which :mod:`dedebate.lab.folder_guard` checks first).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dedebate.lab.folder_guard import RUN_ID_FILE, check_wandb_dir, own_folder
from dedebate.lab.rundir import (
    RunDirError,
    environment_provenance,
    eprint,
    flatten_numbers,
    write_text,
)

FINISH_TIMEOUT_S = 120.0  # the most a run's end waits for its upload (the files stay local)


def _settings(wandb: Any) -> Any:
    """Quiet, fast start-up (no stats, git, code or console capture); every network wait bounded."""
    opts = {
        "silent": True,
        "console": "off",
        "x_disable_stats": True,
        "x_disable_meta": True,
        "x_disable_machine_info": True,
        "disable_git": True,
        "save_code": False,
        "disable_job_creation": True,
        "init_timeout": 60.0,
        "finish_timeout": FINISH_TIMEOUT_S,  # 0, wandb's default, waits for ever
        "x_file_stream_timeout_seconds": 30.0,
        "x_graphql_timeout_seconds": 30.0,
        "x_file_transfer_timeout_seconds": 60.0,
    }
    known = getattr(wandb.Settings, "model_fields", None)  # an older wandb lacks some options
    if known is not None:
        opts = {k: v for k, v in opts.items() if k in known}
    try:
        return wandb.Settings(**opts)
    except Exception:  # noqa: BLE001 - a wandb whose options cannot be listed
        return wandb.Settings(silent=True)


PROBE_TIMEOUT_S = 3.0
DEFAULT_BASE_URL = "https://api.wandb.ai"
# W&B server URL -> None when it answered, else why online mode is off in this process
_ONLINE: dict[str, str | None] = {}
_ONLINE_LOCK = threading.Lock()


def base_url() -> str:
    """The W&B server an online run talks to.

    Returns ``WANDB_BASE_URL``, else the installed wandb's own default (it moved from
    ``api.wandb.ai`` in recent releases), without a trailing slash.
    """
    url = os.environ.get("WANDB_BASE_URL")
    if not url:
        try:
            import wandb

            url = wandb.Settings().base_url
        except Exception:  # noqa: BLE001 - no wandb, or one without this setting
            url = DEFAULT_BASE_URL
    return str(url).strip().rstrip("/")


def probe(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Whether the server at ``url`` answers an HTTP request (any status) within ``timeout`` s.

    Name lookup, proxy, connection and TLS count towards the timeout.
    """
    out: list[str | None] = []

    def attempt() -> None:
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, method="HEAD"), timeout=timeout
            ):
                out.append(None)
        except urllib.error.HTTPError:  # an HTTP status: the server is there
            out.append(None)
        except (OSError, ValueError) as err:
            why = getattr(err, "reason", None) or err
            if isinstance(why, TimeoutError):  # the socket's own timeout won the race
                out.append(f"no answer within {timeout:g} s")
                return
            out.append(
                " ".join(str(getattr(why, "strerror", None) or why).split()) or type(err).__name__
            )

    t = threading.Thread(target=attempt, name="dedebate-wandb-probe", daemon=True)
    t.start()
    t.join(timeout)
    if not out:
        return f"no answer within {timeout:g} s"
    return out[0]


def online_mode() -> str:
    """The mode an online run gets in this process, asked once per process and W&B server.

    Returns ``"online"`` if the server answers, else ``"offline"`` (with one warning the first
    time).
    """
    url = base_url()
    with _ONLINE_LOCK:
        if url not in _ONLINE:
            _ONLINE[url] = probe(url)
            if _ONLINE[url] is not None:
                _warn_offline(f"{url} does not answer: {_ONLINE[url]}")
        return "online" if _ONLINE[url] is None else "offline"


def _warn_offline(why: str) -> None:
    eprint(
        f"dedebate: warning: W&B online mode is off ({why}); every W&B run of this process "
        "is offline instead (upload later with: wandb sync); local results are complete"
    )


class Tracker:
    """One W&B run, or nothing (``mode == "disabled"`` or after a failure)."""

    def __init__(self, run: Any = None, mode: str = "disabled", wandb_module: Any = None):
        self.run = run
        self.mode = mode
        self._wandb = wandb_module
        self.failed: str | None = None
        self.continued = False  # True: the run directory's earlier W&B run, resumed
        # W&B stages artifact files in its data directory until they are uploaded; inside the
        # run directory, they travel with it (default: a per-user directory outside the run).
        self.data_dir: Path | None = None

    # -- life cycle -----------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        *,
        mode: str,
        run_dir: str | os.PathLike,
        project: str,
        job_type: str,
        config: dict[str, Any],
        name: str | None = None,
        group: str | None = None,
        entity: str | None = None,
        resume: bool | None = None,
        provenance: dict[str, Any] | None = None,
        wandb_checked: bool = False,
    ) -> Tracker:
        """Start a W&B run with ``dir=run_dir`` (so its files live inside the run directory).

        The W&B config is ``config`` plus ``provenance``. Unless ``resume`` is None, the run's id
        is kept in ``<run_dir>/wandb/`` (:data:`RUN_ID_FILE`), and ``resume=True`` continues the
        W&B run kept there (same id, ``resume="allow"``). An online start whose server does not
        answer, or that fails, is offline instead (for the rest of the process, after one
        warning); any other failure gives a disabled tracker and one warning.

        Args:
            mode: ``"offline"``, ``"online"`` or ``"disabled"``.
            run_dir: the run directory.
            project: the W&B project.
            job_type: the W&B job type (the experiment's name).
            config: the run's config as a plain dict.
            name: the W&B run name.
            group: the W&B group.
            entity: the W&B entity; None = the account default.
            resume: True: continue the run directory's W&B run, if it has one; False: a new
                one; None: a new one whose id is not kept (one of many in the directory).
            provenance: what computed the run; None = :func:`environment_provenance` now.
            wandb_checked: this process checked ``<run_dir>/wandb/`` and has written it since
                (a sweep's point after its sweep's start): not walked again.

        Returns the :class:`Tracker` (W&B's own failures never raise; KeyboardInterrupt does).

        Raises:
            RunDirError: ``<run_dir>/wandb/`` holds a link or special file
                (:func:`~dedebate.lab.folder_guard.check_wandb_dir`), before W&B writes anything.
        """
        if mode == "disabled":
            return cls(None, "disabled")
        if not wandb_checked:  # someone else's folder: nothing written through a planted link
            check_wandb_dir(Path(run_dir) / "wandb")
        if mode == "online":
            mode = online_mode()  # offline when the server cannot be reached (probed once)
        try:
            os.environ.setdefault("WANDB_SILENT", "true")
            # without it wandb-core posts its own telemetry to the server, offline runs too
            os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
            import wandb

            if provenance is None:
                provenance = environment_provenance()
            kwargs: dict[str, Any] = {
                "project": project,
                "dir": str(run_dir),
                "mode": mode,
                "config": {**config, "provenance": provenance},
                "job_type": job_type,
                "name": name,
                "group": group,
                "reinit": "create_new",
                "settings": _settings(wandb),
            }
            if entity:
                kwargs["entity"] = entity
            id_file = Path(run_dir) / "wandb" / RUN_ID_FILE
            if resume and (run_id := _read_run_id(id_file)):
                kwargs.update(id=run_id, resume="allow")
            try:
                run = wandb.init(**kwargs)
            except Exception as err:
                if mode != "online":
                    raise
                # an online start that fails (refused, no key): offline from now on
                why = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
                with _ONLINE_LOCK:
                    _ONLINE[base_url()] = why
                _warn_offline(f"the online start failed: {why}")
                mode = kwargs["mode"] = "offline"
                run = wandb.init(**kwargs)
            if resume is not None:  # a later resume continues this W&B run
                with contextlib.suppress(OSError, RunDirError):  # a rename: never through a link
                    write_text(id_file, f"{run.id}\n")
            tracker = cls(run, mode, wandb)
            tracker.continued = "id" in kwargs
            tracker.data_dir = own_folder(Path(run_dir), "wandb", "data")
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
        eprint(
            f"dedebate: warning: W&B tracking failed ({what}: {self.failed}); "
            "tracking is off for this run, local results are complete"
        )
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
        """Whether a W&B run is open."""
        return self.run is not None

    @property
    def run_id(self) -> str | None:
        """The W&B run's id."""
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
        """Finish the W&B run (a failure is a warning)."""
        self._guard("finish", lambda: self.run.finish(exit_code=exit_code))
        self.run = None

    # -- logging --------------------------------------------------------------------------

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Log a row of scalars (nested dicts as ``a/b`` keys), the lab's ``step`` as a metric."""
        # Log a row of scalars (nested dicts flattened to ``a/b`` keys). The lab's own ``step`` goes
        # in as a metric, so W&B never drops rows whose step is not increasing.
        if self.run is None:
            return
        data = flatten_numbers(metrics, finite_only=False)  # a NaN loss stays a number to plot
        if step is not None:
            data.setdefault("step", step)
        if data:
            self._guard("log", self.run.log, data)

    def log_image(self, name: str, path: str | os.PathLike) -> None:
        """Log an image file as ``plots/NAME``."""
        if self.run is None:
            return
        self._guard(
            "log image", lambda: self.run.log({f"plots/{name}": self._wandb.Image(str(path))})
        )

    def log_artifact(self, name: str, kind: str, paths: Iterable[str | os.PathLike]) -> None:
        """Log the files that exist among ``paths`` as one artifact.

        Args:
            name: the artifact's name (characters W&B does not allow become ``-``).
            kind: the artifact's type (``results``, ``sweep``).
            paths: the files.
        """
        if self.run is None:
            return

        def _do():
            art = self._wandb.Artifact(_artifact_name(name), type=kind)
            if self.data_dir is not None:  # W&B stages into DATA/artifacts/staging: never a link
                own_folder(self.data_dir, "artifacts", "staging")
            with _data_dir(self.data_dir):
                for p in paths:
                    p = Path(p)
                    if p.is_file():
                        art.add_file(str(p), name=p.name)
                self.run.log_artifact(art)

        self._guard("artifact", _do)

    def log_table(self, name: str, rows: list[dict[str, Any]]) -> None:
        """A tidy table (e.g. ``sweep.csv``) as a ``wandb.Table``.

        Cells that are not numbers or strings are logged as their JSON text.

        Args:
            name: the table's key.
            rows: dicts; the columns are the union of their keys.
        """
        if self.run is None or not rows:
            return

        def _do():
            import json

            columns: list[str] = []
            for r in rows:
                columns += [k for k in r if k not in columns]

            def cell(v):
                return v if v is None or isinstance(v, (bool, int, float, str)) else json.dumps(v)

            data = [[cell(r.get(c)) for c in columns] for r in rows]
            self.run.log({name: self._wandb.Table(columns=columns, data=data)})

        self._guard("table", _do)

    def set_summary(self, values: dict[str, Any]) -> None:
        """Set summary values of the W&B run (nested dicts flattened to ``a/b`` keys)."""
        if self.run is None:
            return

        def _do():
            for k, v in flatten_numbers(values).items():
                self.run.summary[k] = v

        self._guard("summary", _do)


def _read_run_id(path: Path) -> str | None:
    """The W&B run id kept in the regular file ``path``, or None."""
    # The W&B run id kept in ``path``, or None: no such regular file (a link is not followed: a run
    # directory may come from someone else), or no id in it.
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        run_id = fh.read(129).decode("ascii", "replace").strip()
    ok = 0 < len(run_id) <= 128 and all(c.isalnum() or c in "-_" for c in run_id)
    return run_id if ok else None


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
