"""What a resumed run or sweep must share with the process that began it.

A checkpoint or a sweep's finished groups were computed under some dedebate and JAX versions,
backend, x64 flag and ``XLA_FLAGS`` (and a checkpoint's state on some number of devices): any of
them can change float rounding, so a resumed computation continued under others matches neither
uninterrupted one. :func:`fingerprint` records them; :func:`check` refuses a resume across a
change (:class:`ResumeMismatch`, one line: the CLI exits 2), naming what changed and how to go on
(docs/lab.md, "Resuming under the same numerics").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dedebate
from dedebate.lab.fast_compile import FLAGS as FAST_COMPILE_FLAGS
from dedebate.lab.rundir import RunDirError, read_json, write_json

IGNORED_FLAG_PREFIXES = ("--xla_dump",)
"""``XLA_FLAGS`` entries that never change a number (where XLA writes its dumps)."""


class ResumeMismatch(RunDirError):
    """A resume under other numerics than the checkpoint's or the finished groups'."""


def fingerprint(devices: bool) -> dict[str, Any]:
    """This process's numerics; with ``devices``, also its device count (a checkpointed state
    may be laid out over the devices)."""
    import jax
    import jax.lib

    flags = os.environ.get("XLA_FLAGS", "").split()
    out: dict[str, Any] = {
        "dedebate": dedebate.__version__,
        "jax": jax.__version__,
        "jaxlib": jax.lib.__version__,
        "backend": jax.default_backend(),
        "x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]
        "xla_flags": " ".join(sorted(f for f in flags if not f.startswith(IGNORED_FLAG_PREFIXES))),
    }
    if devices:
        out["devices"] = jax.device_count()
    return out


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Each entry of ``old`` that ``new`` differs in, as ``"NAME OLD -> NEW"``."""
    from dedebate.lab.report_render import printable  # a checkpoint's key may be anything

    return [
        f"{printable(k)} {old[k]!r} -> {new.get(k)!r}" for k in sorted(old) if old[k] != new.get(k)
    ]


def check(what: str, old: Any, new: Mapping[str, Any]) -> None:
    """Refuse to resume ``what`` (computed under ``old``, None for an older dedebate's, which
    recorded none) in a process whose numerics are ``new``.

    Raises:
        ResumeMismatch: ``old`` differs from ``new``; the message names each change and how to
            resume under the same numerics or start anew.
    """
    if not isinstance(old, Mapping):
        return
    diff = changes(old, new)
    if not diff:
        return
    hint = ""
    fast = [f"--{name}=" for name in FAST_COMPILE_FLAGS]
    if any(f in str(old.get("xla_flags", "")) for f in fast) and not any(
        f in str(new.get("xla_flags", "")) for f in fast
    ):
        hint = " (it began with `reproduce --quick`'s fast-compile flags: DEDEBATE_FAST_COMPILE=1)"
    raise ResumeMismatch(
        f"{what}: computed under other numerics than this process's ({'; '.join(diff)}): "
        "continued here, its numbers would match neither an uninterrupted run's; resume under "
        f"the same versions, backend, devices and XLA_FLAGS{hint}, or start anew without "
        '--resume (docs/lab.md, "Resuming under the same numerics")'
    )


SWEEP_FILE = "numerics.json"
"""In a sweep's ``groups/``: the numerics its group files were computed under."""


def guard_sweep(groups_dir: Path, resume: bool) -> None:
    """Before a sweep computes groups in ``groups_dir``: on ``resume``, refuse groups computed
    under other numerics (ResumeMismatch); record this process's for the groups to come (not
    where an older dedebate left groups and no record)."""
    record, now = groups_dir / SWEEP_FILE, fingerprint(devices=True)
    if resume and record.is_file():
        try:
            old = read_json(record)
        except (OSError, ValueError):  # unreadable: as an older dedebate's, which kept none
            old = None
        check(f"the finished groups of {groups_dir.parent}", old, now)
    elif resume and any(groups_dir.glob("group-*.csv")):
        return
    groups_dir.mkdir(exist_ok=True)
    write_json(record, now)
