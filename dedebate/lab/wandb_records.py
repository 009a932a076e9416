"""What ``wandb sync`` of an offline W&B run would upload from outside its run directory.

An offline run's ``run-ID.wandb`` is W&B's transaction log: protobuf records (``wandb.proto``) in
LevelDB's log format (blocks of 32 KiB, each record a 7-byte header: CRC, length, type: whole,
first, middle or last piece). An artifact record names each file by ``local_path`` and ``wandb
sync`` uploads what is there; a run folder from someone else could name any file the user can
read (``~/.netrc``, which holds the W&B key). :func:`outside_files` reads every record and lists
the files an artifact or files record names outside the run directory, and every TensorBoard
record and request (W&B writes neither into an offline run's log; a sync would read a TensorBoard
directory or bucket anywhere, or log or download an artifact), so ``dedebate sync`` refuses the
folder before anything is uploaded (docs/lab.md, "Weights & Biases").
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dedebate.lab.rundir import MiB, read_bytes

MAX_LOG_BYTES = 1024 * MiB
"""The largest ``run-ID.wandb`` read (a run that logs more is refused, not synced)."""
HEADER, BLOCK, PIECE = 7, 32768, 7  # the file's header; LevelDB's block and record header
WHOLE, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class RecordError(ValueError):
    """A ``run-ID.wandb`` that does not read as W&B's log."""


def records(path: Path) -> Iterator[Any]:
    """The protobuf records of one ``run-ID.wandb`` (RecordError where it does not read)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = read_bytes(path, MAX_LOG_BYTES, "wandb_records.MAX_LOG_BYTES")
    if data[:4] != b":W&B":
        raise RecordError(f"{path}: not a W&B run log (no :W&B header)")
    pos, buf = HEADER, b""
    while pos + PIECE <= len(data):
        if BLOCK - pos % BLOCK < PIECE:  # the block's tail: padding
            pos += BLOCK - pos % BLOCK
            continue
        _, size, kind = struct.unpack("<IHB", data[pos : pos + PIECE])
        if size == 0 and kind == 0:  # a zero-filled tail
            pos += BLOCK - pos % BLOCK
            continue
        piece, pos = data[pos + PIECE : pos + PIECE + size], pos + PIECE + size
        if kind not in (WHOLE, FIRST, MIDDLE, LAST):
            raise RecordError(f"{path}: a record piece of unknown type {kind}")
        buf = piece if kind in (WHOLE, FIRST) else buf + piece
        if kind in (WHOLE, LAST):
            record = pb.Record()  # type: ignore[attr-defined]
            try:
                record.ParseFromString(buf)
            except Exception as err:  # noqa: BLE001 - protobuf's DecodeError and kin
                raise RecordError(f"{path}: a record does not parse ({err})") from None
            yield record


def outside_files(run: Path) -> list[str]:
    """The files the records of offline run folder ``run`` name outside its run directory (the
    folder holding its ``wandb/``): artifact entries' and manifests' local paths to a file that
    exists elsewhere (one copied from another machine names paths that are nowhere here), files
    records' paths that are absolute or climb out (``..``), and each TensorBoard record's
    directory and each request's type, whatever they name.

    Every ``*.wandb`` log counts, whatever its name: W&B's sync uploads them all.

    Raises:
        RecordError: a ``*.wandb`` that does not read as W&B's log.
        RunDirError: a ``*.wandb`` that is a link, not a regular file or over its cap.
    """
    inside = Path(os.path.realpath(run)).parent.parent
    out: list[str] = []

    def outside(path: str) -> bool:  # and there: a path that is nowhere uploads nothing
        real = Path(os.path.realpath(inside / path))  # a relative path: from the run directory
        return real != inside and inside not in real.parents and real.exists()

    for log in sorted(run.glob("*.wandb")):
        for r in records(log):
            kind = r.WhichOneof("record_type")
            if kind == "artifact":
                manifest = r.artifact.manifest
                named = [e.local_path for e in manifest.contents if e.local_path]
                if manifest.manifest_file_path:
                    named.append(manifest.manifest_file_path)
                out += [p for p in named if outside(p)]
            elif kind == "files":
                out += [
                    f.path
                    for f in r.files.files
                    if Path(f.path).is_absolute() or ".." in Path(f.path).parts
                ]
            elif kind == "tbrecord":
                out.append(f"TensorBoard directory {r.tbrecord.log_dir or r.tbrecord.root_dir!r}")
            elif kind == "request":
                out.append(f"a {r.request.WhichOneof('request_type')} request")
    return out
