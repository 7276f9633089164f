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
held the stop up for minutes, its listing's retries each waiting out a read timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from typing import Any, Coroutine

CANCEL_SECONDS = 10  # how long a stop waits for the transfer to notice it and its multipart upload's abort


def run(fs: Any, coroutine: Coroutine, bucket_key: tuple[str, str] | None) -> Any:
    """``coroutine`` (a method of ``fs``, an asynchronous fsspec client) run on the client's loop, its
    result returned here; stopped (a Ctrl-C, SIGTERM, or any failure while waiting), it is cancelled and,
    given ``bucket_key`` (S3), the multipart upload it began under that key is aborted."""
    finished = threading.Event()

    async def watched():
        try:
            return await coroutine
        finally:
            finished.set()

    future = asyncio.run_coroutine_threadsafe(watched(), fs.loop)
    try:
        # a second at a time: a signal's handler runs between. Not future.result(timeout=1) in a loop that
        # passes TimeoutError: the transfer's own (gcsfs's connection timeout, aiohttp's) is one too, and the
        # loop asked again for ever, at full CPU, where fsspec raised it
        while not future.done():
            concurrent.futures.wait([future], timeout=1)
        return future.result()
    except BaseException:
        future.cancel()
        deadline = time.monotonic() + CANCEL_SECONDS
        with contextlib.suppress(BaseException):  # a second stop, the store gone: left to a lifecycle rule
            finished.wait(CANCEL_SECONDS)
            if bucket_key is not None:
                aborting = asyncio.run_coroutine_threadsafe(abort_uploads(fs, *bucket_key), fs.loop)
                try:
                    aborting.result(timeout=max(deadline - time.monotonic(), 0.1))
                finally:
                    aborting.cancel()
        raise


async def abort_uploads(fs: Any, bucket: str, key: str) -> None:
    """Abort the S3 multipart uploads pending under exactly ``key`` (a build's own key: its lease's holder
    alone writes it)."""
    call = fs._call_s3  # noqa: SLF001 - s3fs's asynchronous API is its underscored methods
    pending = (await call("list_multipart_uploads", Bucket=bucket, Prefix=key)).get("Uploads", [])
    for upload in pending:
        if upload.get("Key") == key:
            await call("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload["UploadId"])
