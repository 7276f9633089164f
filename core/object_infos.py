"""Many objects' infos at a time: :func:`core.store_objects.object_info` of a list of URLs (the corpus stage's
literal ``--input`` URLs, :mod:`corpus.literals`), asked concurrently on the store client's own event loop.

One after the other, a thousand URLs answered in 100 ms each took 100 s before a job's first line; an
asynchronous fsspec client (s3fs, gcsfs, HTTP) takes up to :data:`HEADS_AT_ONCE` requests in flight at once
with no thread of ours. Each answer (or the error it would raise) comes back in its URL's place.
"""

from __future__ import annotations

from kolectra.core.storage import filesystem, names_no_object, scheme, translated
from kolectra.core.store_objects import object_info, s3_head_info

HEADS_AT_ONCE = 32  # requests in flight at a time to one store, for object_infos
# one http(s) object's info (its HEAD, and a GET where that fails) in object_infos: aiohttp's own bound
# is 300 s a request, so a server that took the connection and never answered held the listing 10 minutes
HTTP_INFO_SECONDS = 60.0


def object_infos(locations: list[str], at_once: int | None = None) -> list[dict | None | Exception]:
    """:func:`object_info` of each location, in order, a failure in its place (the error it would
    raise) rather than raised. Where the store's fsspec client is asynchronous (s3fs, gcsfs, HTTP),
    up to ``at_once`` (:data:`HEADS_AT_ONCE`) requests are in flight at a time on the client's own
    event loop: a thousand URLs answered in 100 ms each took 100 s one after the other. Elsewhere
    (sftp, memory, a file:// URL) one after the other."""
    import fsspec.asyn  # noqa: PLC0415 - only when a URL is used

    found: list[dict | None | Exception] = [None] * len(locations)
    by_store: dict[str, list[int]] = {}
    for i, location in enumerate(locations):
        by_store.setdefault(scheme(location), []).append(i)
    for indices in by_store.values():
        fs, _ = filesystem(locations[indices[0]])
        if isinstance(fs, fsspec.asyn.AsyncFileSystem) and not fs.asynchronous:
            bound = HTTP_INFO_SECONDS if scheme(locations[indices[0]]) in ("http", "https") else None
            answers = fsspec.asyn.sync(fs.loop, _gathered, [_object_info_async(fs, locations[i]) for i in indices],
                                       at_once or HEADS_AT_ONCE, bound, [locations[i] for i in indices])
        else:
            answers = [_caught(object_info, locations[i]) for i in indices]
        for i, answer in zip(indices, answers):
            found[i] = answer
    return found


async def _object_info_async(fs, location: str) -> dict | None:
    """:func:`object_info` on an asynchronous client, awaited."""
    _, path = filesystem(location)
    bucket, _, key = path.partition("/")
    if names_no_object(location, bucket, key):
        return None
    with translated(location):  # fsspec's asynchronous calls are its methods named with an underscore
        try:
            if scheme(location) in ("s3", "s3a"):
                return s3_head_info(await fs._call_s3("head_object", Bucket=bucket, Key=key), path)  # noqa: SLF001
            found = await fs._info(path)  # noqa: SLF001
        except FileNotFoundError:
            return None
    return found if found.get("type") != "directory" else None


async def _gathered(coroutines: list, at_once: int, seconds: float | None = None, names: list[str] | None = None) -> list:
    """Each coroutine's result (or the Exception it raised), in order, ``at_once`` running at a time;
    one that ran ``seconds`` is stopped, a TimeoutError in its place, and those not begun by then are
    not run (a TimeoutError naming it, of ``names``): the listing fails on any such input, and 1,000 URLs
    of a server that never answered waited 32 rounds of the bound, 32 minutes, before it did."""
    import asyncio  # noqa: PLC0415

    gate = asyncio.Semaphore(at_once)
    unanswered: list[str] = []

    async def one(coroutine, name: str):
        async with gate:
            if unanswered:
                coroutine.close()  # never begun
                return TimeoutError(f"not asked once {unanswered[0]} had no answer in {seconds:.0f} s")
            try:
                return await asyncio.wait_for(coroutine, seconds)
            except asyncio.TimeoutError as e:  # the bound's, or one the store raised itself
                if seconds is None:
                    return e
                unanswered.append(name)
                return TimeoutError(f"no answer in {seconds:.0f} s")
            except Exception as e:  # noqa: BLE001 - returned in its place: the caller decides
                return e

    return await asyncio.gather(*(one(c, n) for c, n in zip(coroutines, names or [""] * len(coroutines))))


def _caught(call, *args):
    try:
        return call(*args)
    except Exception as e:  # noqa: BLE001 - returned in its place, as _gathered does
        return e
