"""A full disk during a checkpoint save is one line: Orbax's own logged tracebacks of it (from its
save threads, on the ``absl`` logger) are dropped, other errors it logs are kept
(dedebate/lab/checkpoint.py). The save's error itself: tests/hostile/test_catalogue.py."""

from __future__ import annotations

import errno
import logging

from tests.hostile.test_catalogue import ORBAX_FULL


def _raised_from(cause: BaseException) -> RuntimeError:
    try:
        raise RuntimeError("commit callback failed") from cause
    except RuntimeError as err:
        return err


def test_orbax_logs_of_a_full_disk_are_dropped_and_other_errors_kept(tmp_path, caplog):
    from dedebate.lab.checkpoint import Checkpointer

    Checkpointer(tmp_path / "ckpt", "hash").close()  # a checkpointer installs the filter
    absl = logging.getLogger("absl")
    with caplog.at_level(logging.ERROR):
        absl.error("Save Finalize thread failed.", exc_info=ORBAX_FULL)
        absl.error("_SignalingThread.run() raised an exception: %s", ORBAX_FULL)
        absl.error("quota", exc_info=OSError(errno.EDQUOT, "Disk quota exceeded"))
        absl.error("chained", exc_info=_raised_from(OSError(errno.ENOSPC, "full")))
        absl.error("not the disk", exc_info=_raised_from(OSError(errno.EIO, "I/O error")))
        absl.error(
            "Save Finalize thread failed.",
            exc_info=ValueError("RESOURCE_EXHAUSTED: too many open files"),
        )
    assert [r.getMessage() for r in caplog.records] == [
        "not the disk",
        "Save Finalize thread failed.",
    ]
