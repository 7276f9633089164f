"""A write that failed, named, without torch (:mod:`model.checkpoint` holds the checkpoints themselves and
re-exports these): ``kolectra export`` copies a checkpoint's ``hf/`` folder with them and, importing
:mod:`model.checkpoint` for them, paid for torch (about 2 CPU s) before copying anything."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Iterator

from kolectra.core.errors import EnvironmentProblem


class CheckpointWriteError(OSError, EnvironmentProblem):
    """A checkpoint's (or the export's) file could not be written (a full disk, a file-size limit); names it."""


def synced(path: Path) -> None:
    """Flush a file's or a directory's contents to the disk. A rename is atomic against a kill, not
    against a power loss: without this the newest checkpoint can come back torn (caught by its
    hashes), and with ``keep_checkpoints=1`` the one before it is already gone. (PyTorch's
    distributed checkpoint writer syncs each file by default for the same reason.)"""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)  # a full disk, the file-size limit, the disk quota


@contextlib.contextmanager
def writing_into(folder: Path, what: str = "export") -> Iterator[None]:
    """A full disk, the file-size limit or the quota met inside the block as a
    :class:`CheckpointWriteError` naming ``folder``: ``shutil.copyfile`` names its source (the
    tokenizer's or the store's file, on another disk), ``Path.write_text`` no file. Other errors
    (a source that cannot be read) pass as they are."""
    try:
        yield
    except CheckpointWriteError:
        raise
    except OSError as e:
        if e.errno not in FULL:
            raise
        raise CheckpointWriteError(e.errno, f"{os.strerror(e.errno)} ({what} not written)", str(folder)) from e
