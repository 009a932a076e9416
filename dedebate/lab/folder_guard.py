"""A shared run folder as untrusted input: what it may hold (no link out of it, no special file,
a ``wandb/`` that W&B cannot write through) and the lock that makes one process its writer."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Any

from dedebate.lab.report_render import printable
from dedebate.lab.rundir import ONLY_FILES, RunDirError, file_kind, os_reason

LOCK_NAME = ".lock"
RUN_FOLDERS = ("plots", "tables", "checkpoints", "groups")
"""The folders the lab writes into, directly under a run directory: never symbolic links."""


def check_run_dir(run_dir: str | os.PathLike) -> None:
    """Refuse a run directory that reaches outside itself or holds what is not a file.

    Every symbolic link under it must lead inside it, and none may stand for one of
    :data:`RUN_FOLDERS`; links are not followed while looking. Every other entry must be a
    regular file or a folder: a FIFO, socket or device would block or misbehave when read. W&B's
    folders (``wandb/``, here or in a sub-run) must not be links out and hold only what
    :func:`check_wandb_dir` allows (W&B links its logs to its cache in the user's home).

    Raises:
        RunDirError: one line naming the first offending link (and where it leads) or entry.
    """
    root = Path(os.path.realpath(run_dir))
    todo = [root]
    while todo:
        where = todo.pop()
        try:
            entries = sorted(os.scandir(where), key=lambda e: e.name)
        except OSError:
            continue  # as os.walk: an unreadable folder is not looked into
        below: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                target = Path(os.path.realpath(path))
                if not target.is_relative_to(root) or (where == root and entry.name in RUN_FOLDERS):
                    raise RunDirError(
                        f"{printable(path)}: a symbolic link (to {printable(target)}); a run "
                        "directory must not reach outside itself: replace the link by the files"
                    )
            elif entry.is_dir(follow_symlinks=False):
                if entry.name == "wandb":
                    check_wandb_dir(path)
                else:
                    below.append(path)
            elif not entry.is_file(follow_symlinks=False):
                mode = entry.stat(follow_symlinks=False).st_mode
                kind = file_kind(mode)
                raise RunDirError(f"{printable(path)}: not a regular file ({kind}); {ONLY_FILES}")
        todo.extend(reversed(below))  # depth first, in name order


class RunLock:
    """An exclusive ``flock`` on ``<run_dir>/.lock`` (which holds the owner's PID). The kernel
    drops it when its process ends however it ends, so a dead process's lock is simply taken
    over. :meth:`release` (or leaving the ``with`` block) unlocks."""

    def __init__(self, fd: int | None, path: Path):
        self._fd = fd
        self.path = path

    def release(self) -> None:
        """Unlock the run directory (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def lock_run_dir(run_dir: str | os.PathLike) -> RunLock:
    """Lock ``run_dir`` for this process.

    The directory is checked first (:func:`check_run_dir`), and the lock file is opened without
    following a link and without truncating it.

    Returns the held :class:`RunLock`.

    Raises:
        RunDirError: another process holds it ("run in use by PID N"), at once; the directory
            reaches outside itself, or its lock file is a link or not a regular file.
    """
    check_run_dir(run_dir)
    path = Path(run_dir) / LOCK_NAME
    try:
        import fcntl
    except ImportError:  # no flock on this platform: no lock
        return RunLock(None, path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        why = "a symbolic link" if err.errno == errno.ELOOP else os_reason(err)
        raise RunDirError(f"{path}: cannot create the run's lock file: {why}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise RunDirError(
            f"{path}: the run's lock file is not a regular file of its own (a "
            "device, pipe or hard link); remove it"
        )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return RunLock(fd, path)  # a file system without locks (ENOLCK): run unlocked
        owner = ""
        with contextlib.suppress(OSError):
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        who = f"PID {owner}" if owner.isdigit() else "another process"
        raise RunDirError(
            f"run in use by {who}: {Path(run_dir)} is locked ({path}); wait for "
            "that process to finish or stop it"
        ) from None
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return RunLock(fd, path)


def held(run_dir: str | os.PathLike) -> bool | None:
    """Whether a process holds ``run_dir``'s lock now (None: no lock file to ask, or no flock).

    It asks with a shared lock taken and dropped at once, so a run starting at that instant may
    see "run in use" and can be started again."""
    try:
        import fcntl
    except ImportError:
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO does not block
    try:
        fd = os.open(Path(run_dir) / LOCK_NAME, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            return True if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


RUN_ID_FILE = "dedebate-run-id"  # the W&B run id a resumed run continues (in wandb/)


# The links W&B itself makes in a run directory's ``wandb/``: ``latest-run`` and the two log links
# directly in it (W&B replaces them, never writes through them; each leads into the run) and
# ``logs/debug-core.log`` in each W&B run folder (to W&B's log cache in the user's home).
_OWN_LINKS = frozenset({"latest-run", "debug.log", "debug-internal.log"})
_OWN_RUN_LINKS = frozenset({"debug-core.log"})


def check_wandb_dir(wandb_dir: str | os.PathLike) -> None:
    """Refuse a run directory's W&B folder that W&B could write through, or ``dedebate sync``
    upload through, to somewhere else.

    A run directory may come from someone else: a link planted under its ``wandb/`` (``data`` to
    another folder, an ``offline-run-*`` leading to another run) would make a resumed run stage
    its files there, or a sync upload that folder. So ``wandb_dir`` and everything under it must
    be folders and regular files, except W&B's own links (``latest-run``, ``debug.log`` and
    ``debug-internal.log`` leading into the run directory, and ``logs/debug-core.log`` in a W&B
    run folder) and :data:`RUN_ID_FILE` (never read through, replaced when written). Links are
    not followed while looking; a missing ``wandb_dir`` is fine.

    Raises:
        RunDirError: one line naming the first offending entry and what it is.
    """
    top = Path(wandb_dir)
    try:
        mode = os.lstat(top).st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise RunDirError(f"{printable(top)}: cannot read: {os_reason(err)}") from None
    if not stat.S_ISDIR(mode):
        _refuse(top, mode)
    inside = Path(os.path.realpath(top)).parent  # the run directory
    for where, dirs, files in os.walk(top):  # links to folders are listed, never entered
        for name in (*dirs, *files):
            path = Path(where, name)
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:  # gone meanwhile (W&B of another process)
                continue
            except OSError as err:
                raise RunDirError(f"{printable(path)}: cannot read: {os_reason(err)}") from None
            if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                continue
            if stat.S_ISLNK(mode):
                if path.parent == top and name == RUN_ID_FILE:
                    continue  # never read through (O_NOFOLLOW) and replaced by a rename
                if path.parent == top and name in _OWN_LINKS:
                    if Path(os.path.realpath(path)).is_relative_to(inside):
                        continue
                elif name in _OWN_RUN_LINKS and path.parent.name == "logs":
                    if path.parent.parent.parent == top:
                        continue
            _refuse(path, mode)


def _refuse(path: Path, mode: int) -> None:
    kind = "a regular file" if stat.S_ISREG(mode) else file_kind(mode)
    if stat.S_ISLNK(mode):
        kind += f" (to {printable(os.path.realpath(path))})"
    raise RunDirError(
        f"{printable(path)}: {kind}; a run directory's wandb/ must be a folder holding only "
        "folders, regular files and W&B's own log links (W&B would write, and dedebate sync "
        "upload, through anything else): remove it"
    )


def own_folder(base: Path, *names: str) -> Path:
    """``base/NAME/...``, each folder made here or already a folder, never a link (W&B writes in
    it); RunDirError otherwise."""
    path = base
    for name in names:
        path = path / name
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as err:
            raise RunDirError(f"{printable(path)}: cannot create: {os_reason(err)}") from None
        mode = os.lstat(path).st_mode
        if not stat.S_ISDIR(mode):
            _refuse(path, mode)
    return path
