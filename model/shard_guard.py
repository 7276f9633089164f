"""Examples that cannot change under a running trainer unnoticed: the pretraining loader's shard
files (:mod:`kolectra.model.data`) are pinned when it opens them and checked after every read.

:func:`pin`: the file's identity and change time (:class:`Pin`) taken before its bytes are hashed
against the artifact's manifest (when the directory is an artifact: a local root's, or a store's
checked copy) and again after its structure is read; the two must agree, so the pinned state is
the state whose bytes matched. :func:`check`: after the rows of a batch are read, an ``fstat`` of
the descriptor they came from must still give the pin. Another inode (the name now holds another
file), another size, or another modification or change time (written in place, even to the same
size) ends the run with an :class:`ExamplesError` naming the file, before a row of it is used.

Why this closes the hole: Linux updates a file's change time when a write begins, before its bytes
are copied in (``file_modified`` in the write path), and no program can set a change time back,
so a write that reached bytes the trainer just read shows in the ``fstat`` that follows the read.
Cost: one ``fstat`` per shard file a batch touches, no copy of the data, no second pass over it.
Limits: a network file system may answer from its attribute cache (an NFS client: ``actimeo``,
seconds), and a write within one clock tick (milliseconds) of the file's own last change before
the pin cannot move its change time: a store root's local copy, or a local disk, has neither.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from kolectra.core import filehash
from kolectra.core.errors import UserInputError


class ExamplesError(UserInputError):
    """The examples artifact is malformed or changed; the message names the file."""


Pin = filehash.Stamp  # device, inode, size, modification and change time: what the store's check keys on too
_pin_of = filehash.stamp_of


def manifest_hashes(root: Path) -> dict[str, str] | None:
    """path -> sha256 of the artifact's files (its manifest.json), or None when ``root`` is no artifact."""
    try:
        manifest = json.loads((Path(root) / "manifest.json").read_text(encoding="utf-8"))
        return {e["path"]: e["sha256"] for e in manifest["files"]}
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        raise ExamplesError(f"{Path(root) / 'manifest.json'}: not a readable manifest ({e})") from None


def pin(path: Path, sha256: str | None) -> Pin:
    """Stat ``path`` and check its bytes against ``sha256`` (None: nothing to check against). The
    bytes are read unless this process hashed this very file, unchanged since, when the store
    checked the artifact (:mod:`kolectra.core.filehash`): the stamp it had then is the pin."""
    try:
        if sha256 is None:
            return _pin_of(os.stat(path))
        before, got = filehash.stamped_sha256(path)
    except FileNotFoundError:
        raise ExamplesError(f"{path}: missing (listed in {path.parent.parent / 'index.json'})") from None
    if got != sha256:
        raise ExamplesError(f"{path}: sha256 differs from the artifact's manifest (changed after it was "
                            "checked); `kolectra artifacts verify` it, rebuild it, then --resume")
    return before


def check(path: Path, pinned: Pin, st: os.stat_result | None = None) -> None:
    """Raise if ``path`` (or the open file whose ``fstat`` is ``st``) is no longer the pinned file."""
    try:
        now = _pin_of(st if st is not None else os.stat(path))
    except FileNotFoundError:
        now = None
    if now == pinned:
        return
    if now is None:
        what, detail = "removed", ""
    elif (now.dev, now.ino) != (pinned.dev, pinned.ino):
        what, detail = "replaced", " (the name now holds another file)"
    elif now.size != pinned.size:
        what = "truncated" if now.size < pinned.size else "extended"
        detail = f" ({now.size} bytes, was {pinned.size})"
    else:
        what, detail = "rewritten in place", " (the same size; its modification or change time moved)"
    raise ExamplesError(f"{path}: {what} while training read it{detail}; the examples artifact changed under "
                        "this run: `kolectra artifacts verify` it, rebuild it, then --resume")
