"""A whole-object transfer to a store (an upload, a write of bytes) that a stop really stops.

fsspec's synchronous calls run the client's coroutine on its own I/O thread and wait for it in the
caller's; a Ctrl-C or SIGTERM ends the wait, not the transfer. An upload of 100 MB or more (s3fs sends
it as a multipart upload) went on in that thread: the object landed seconds after the command said it
was interrupted (over the objects of a published copy a ``--force`` rebuild replaces, after its clean-up
ran), or, the process gone first, its multipart upload stayed pending, never listed and its parts billed
until a lifecycle rule aborted it; s3fs aborts one on an ``Exception`` only, and a stop is none.

:func:`run` waits for the coroutine itself: a stop (any exception raised while waiting) cancels it,
waits a moment for the cancellation to land, and aborts the S3 multipart upload left under the key, all
within :data:`CANCEL_SECONDS`: a store that stopped answering (the likeliest reason to stop a hung upload)
held the stop up for minutes, its listing's retries each waiting out a read timeout. A stop landing as the
loop is handed the transfer stops it too (it once escaped the cancel: the upload ran on), and a clean-up
that takes over a second says so in a line (a store that stopped answering kept the command silent for
the whole bound, inviting the second Ctrl-C that leaves the multipart upload pending).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from typing import Any, Callable, Coroutine

from kolectra.core.stage import progress

CANCEL_SECONDS = 10  # how long a stop waits for the transfer to notice it and its multipart upload's abort
SAID_AFTER_SECONDS = 1  # a stop whose clean-up takes longer says so (a store that stopped answering)


def run(fs: Any, coroutine: Coroutine, bucket_key: tuple[str, str] | None, location: str | None = None) -> Any:
    """``coroutine`` (a method of ``fs``, an asynchronous fsspec client) run on the client's loop, its
    result returned here; stopped (a Ctrl-C, SIGTERM, or any failure while waiting), it is cancelled and,
    given ``bucket_key`` (S3), the multipart upload it began under that key is aborted. ``location``: the
    upload's URL, for the line a clean-up that takes a while prints."""
    transfer = _Transfer(coroutine)
    try:
        # inside the try: a stop landing as the loop is handed the transfer (its future not yet returned
        # here) escaped the cancel, and the upload ran on in fsspec's thread
        future = asyncio.run_coroutine_threadsafe(transfer.watched(), fs.loop)
        # a second at a time: a signal's handler runs between. Not future.result(timeout=1) in a loop that
        # passes TimeoutError: the transfer's own (gcsfs's connection timeout, aiohttp's) is one too, and the
        # loop asked again for ever, at full CPU, where fsspec raised it
        while not future.done():
            concurrent.futures.wait([future], timeout=1)
        return future.result()
    except BaseException:
        with contextlib.suppress(BaseException):  # a second stop, the store gone: left to a lifecycle rule
            _clean_up(fs, transfer, bucket_key, location)
        raise


class _Transfer:
    """The transfer, which a stop ends whether it has begun on the loop or not: :meth:`watched` and
    :meth:`stop` both run on the loop, one after the other, so one begun is cancelled and one not yet
    begun never begins (without the future that a stop may have kept from being returned)."""

    def __init__(self, coroutine: Coroutine):
        self.coroutine, self.task, self.stopped, self.began = coroutine, None, False, False
        self.finished = threading.Event()  # ended, or never to begin

    async def watched(self) -> Any:
        if self.stopped:
            self.coroutine.close()
            return None
        self.began, self.task = True, asyncio.current_task()
        try:
            return await self.coroutine
        finally:
            self.finished.set()

    def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
        elif not self.began:
            self.coroutine.close()
            self.finished.set()


def _clean_up(fs: Any, transfer: _Transfer, bucket_key: tuple[str, str] | None, location: str | None) -> None:
    """The transfer stopped and its multipart upload aborted, within :data:`CANCEL_SECONDS`; past
    :data:`SAID_AFTER_SECONDS` a line says what the command waits for (nothing printed, a user pressed
    Ctrl-C again, which ends the wait and leaves the multipart upload pending)."""
    began = time.monotonic()
    deadline, said = began + CANCEL_SECONDS, False

    def waited(wait: Callable[[float], bool]) -> bool:
        nonlocal said
        while (left := deadline - time.monotonic()) > 0:
            if not said and time.monotonic() >= began + SAID_AFTER_SECONDS:
                said = True
                what = f"the upload to {location}" if location else "the upload"
                multipart = bucket_key is not None
                progress(f"stopping {what}: waiting up to {CANCEL_SECONDS} s for it to end"
                         + (" and any multipart upload it began to be aborted (a second Ctrl-C leaves that pending)"
                            if multipart else " (a second Ctrl-C ends the wait)"), quiet_too=True)
            if wait(left if said else min(left, max(began + SAID_AFTER_SECONDS - time.monotonic(), 0.01))):
                return True
        return False

    fs.loop.call_soon_threadsafe(transfer.stop)
    waited(transfer.finished.wait)
    if bucket_key is None or (transfer.finished.is_set() and not transfer.began):
        return  # no multipart upload (a transfer that never began asked nothing of the store)
    aborting = asyncio.run_coroutine_threadsafe(abort_uploads(fs, *bucket_key), fs.loop)
    try:
        waited(lambda seconds: not concurrent.futures.wait([aborting], timeout=seconds).not_done)
    finally:
        aborting.cancel()


async def abort_uploads(fs: Any, bucket: str, key: str) -> None:
    """Abort the S3 multipart uploads pending under exactly ``key`` (a build's own key: its lease's holder
    alone writes it)."""
    call = fs._call_s3  # noqa: SLF001 - s3fs's asynchronous API is its underscored methods
    pending = (await call("list_multipart_uploads", Bucket=bucket, Prefix=key)).get("Uploads", [])
    for upload in pending:
        if upload.get("Key") == key:
            await call("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload["UploadId"])
