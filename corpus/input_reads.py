"""Reading a listed corpus input: part of the corpus stage (the job's readers, and the vocab and
examples stages' own reads, open every input through it); :mod:`kolectra.corpus.inputs` lists the
files and says what identifies them.

- :func:`open_input` opens a local regular file (checked again on what was opened: a file replaced
  since the listing by a FIFO or a device is refused instead of hanging the worker) or a store URL
  (an http(s) server that ignores range requests read on as one GET: :mod:`kolectra.corpus.http_reads`).
- :class:`HashingReader` hashes (SHA-256) and counts the bytes the job reads under the decompressor:
  a file's content hash comes from its one read, not from a pass of its own; a store's read that fails
  after the listing (an object deleted, access withdrawn) is :class:`~kolectra.corpus.read_failures.ReadFailed`.
- :func:`changed_since` (with :func:`pinned_identity`, the version a store's pinned reads saw) says
  whether a file no longer matches its listing after its read: the job fails naming it instead of
  storing bytes that match neither version.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import IO

from kolectra.core import storage, url_secrets
from kolectra.corpus import http_reads, inputs, read_failures


def open_input(path: str) -> IO[bytes]:
    """``path`` opened for reading in binary: a store URL through :mod:`kolectra.core.storage`, a
    local path only if it is a regular file. The listing refused anything else, but a file can be
    replaced after it (a log rotated into a pipe): a FIFO's plain ``open`` waits for a writer
    forever and ``/dev/zero`` never ends. So the file is opened without waiting (``O_NONBLOCK``: a
    FIFO opens at once) and the kind checked on what was opened (``fstat``: no window between the
    check and the read); :class:`~kolectra.corpus.inputs.InputError` names it as the listing would."""
    if inputs.is_remote(path):
        # a server that answers a range request with the whole file: read on as one GET (http_reads); one
        # that fails the open after the listing (its HEAD): tried again, or ReadFailed (read_failures)
        return http_reads.ranged_or_whole(http_reads.opened(path), path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise inputs.InputError(f"{path!r} is {inputs.FILE_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a regular "
                             "file (replaced since it was listed?): only a regular file can be read to its end (copy "
                             "a stream to a file first)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class HashingReader:
    """``read(n)`` over a raw byte stream that hashes (SHA-256) and counts what passes through;
    :meth:`drain` reads the rest, so a file whose decompression failed is still hashed whole."""

    def __init__(self, raw: IO[bytes], path: str | None = None):
        self._raw, self._path = raw, path
        self.sha256 = hashlib.sha256()
        self.bytes = 0

    def read(self, n: int = -1) -> bytes:
        try:
            data = self._raw.read(n)
        except read_failures.ReadFailed:
            raise
        except Exception as e:  # noqa: BLE001 - a store's read failing after the listing: ReadFailed, never a bug
            failed = read_failures.of(self._path, e) if self._path is not None else None
            if failed is None:
                raise
            raise failed from e
        self.sha256.update(data)
        self.bytes += len(data)
        return data

    def readinto(self, b) -> int:  # bz2/gzip may ask for this
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def drain(self, chunk: int = 1 << 20) -> None:
        while self.read(chunk):
            pass

    def pinned_identity(self, path: str) -> str | None:
        """:func:`pinned_identity` of the stream this reads."""
        return pinned_identity(path, self._raw)

    def read_whole(self) -> bool:
        """Whether its server answered a range request with the whole file (:mod:`kolectra.corpus.http_reads`):
        a read from an offset downloads the bytes before it too."""
        return getattr(self._raw, "whole", False)

    def close(self) -> None:
        self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self) -> bool:
        return getattr(self._raw, "closed", False)

    def flush(self) -> None:
        pass


def pinned_identity(path: str, raw: IO[bytes]) -> str | None:
    """The identity of the version ``raw`` (a store object opened by :func:`open_input`) served,
    when every read of it was pinned to the version its open saw: s3fs sends each ranged GET with
    ``If-Match`` on the ETag its open's HEAD gave (or compares it, ``local_expiry_check``), so the
    bytes read are that version's or the read failed. A change since the listing then shows in this
    identity, with no request after the read. None where nothing pins the reads (a local file,
    another store): :func:`changed_since` asks again."""
    details = getattr(raw, "details", None) if inputs.is_remote(path) else None
    etag = details.get("ETag") if isinstance(details, dict) else None
    if not etag or "size" not in details:
        return None
    fs = getattr(raw, "fs", None)
    if getattr(raw, "read_kw", {}).get("IfMatch") != etag and not getattr(fs, "local_expiry_check", False):
        return None
    return inputs.object_file(path, int(details["size"]), storage.checksum_of(details)).identity


# the start of a why of :func:`changed_since` that is no change: the server refused (or failed) the check after
# the read (a signed URL expired meanwhile: 403), said by the check after the job as a read that failed
# (job_checks.check_stats), not as a file that "changed while the job read" it
NOT_CHECKED = "its server failed the check after its read "


def _refused_after_read(listed: inputs.InputFile) -> str | None:
    """:data:`NOT_CHECKED` and what an http(s) server answered instead of the object's info after its read
    (fsspec's FileNotFoundError keeps no status: one request more, only then), or None (no http(s) URL, a
    404/410: the file gone since, or an answer now)."""
    if storage.scheme(listed.path) not in ("http", "https"):
        return None
    from kolectra.corpus import literals  # noqa: PLC0415 - only once a check failed

    answered = literals.unreachable(listed.where)
    if answered is None:
        return None
    then = ("a signed URL may have expired, or access been withdrawn, since the listing; sign it again (or restore "
            "access) and run the same command again" if answered.startswith(("the server answered 401",
                                                                             "the server answered 403"))
            else "run the same command again once it answers")
    return f"{NOT_CHECKED}({url_secrets.redacted(answered)}): {then}"


def changed_since(listed: inputs.InputFile, bytes_read: int, read_identity: str | None = None) -> str | None:
    """Why the file no longer matches its listing after a read of ``bytes_read`` bytes, or None.
    ``read_identity``: the version the read was pinned to (:func:`pinned_identity`), compared as it
    is; without it the file is identified again (a stat, or a HEAD)."""
    if bytes_read != listed.bytes:
        return f"listed at {listed.bytes} bytes, {bytes_read} read"
    if read_identity is None:
        # a listing that found Last-Modified to be each response's own time left it out: so does this look
        stamped = storage.scheme(listed.path) not in ("http", "https") or "Last-Modified=" in listed.identity
        try:
            read_identity = inputs.identify(listed.where, time_stamp=stamped).identity
        except inputs.InputError as e:
            # fsspec's FileNotFoundError of a failed HEAD and GET keeps no status (a timeout or the store's own
            # error says itself): asked once more, for what the server answered
            lost = isinstance(e.__context__, FileNotFoundError)
            return (_refused_after_read(listed) if lost else None) or str(e)
    if read_identity != listed.identity:
        why = f"its size, time stamp or checksum changed during the read ({listed.identity} -> {read_identity})"
        if storage.scheme(listed.path) in ("http", "https") and "Last-Modified=" in listed.identity:
            # the listing's requests, a second apart where the stamp was recent, saw it hold: a file
            # rewritten since, or a stamp that moves on its own more slowly than that
            why += ("; a server whose Last-Modified moves on its own (a dynamic page a cache renews, servers behind "
                    "one name that disagree: a dynamic endpoint) looks changed at every run: download the file and "
                    "name the local copy in --input")
        return why
    return None
