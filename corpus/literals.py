"""What the stores say of the ``--input`` URLs named literally (no glob): part of the corpus stage's
listing (:mod:`kolectra.corpus.inputs`).

Each URL is asked for its object's info once, many at a time (``core.object_infos``: a thousand
URLs answered in 100 ms each took 200 s, two requests each, one after the other), and that info is
the object's identity: no second request for it.

An ``http(s)://`` object whose version is told by its ``Last-Modified`` alone (no ETag) is asked
again, because a dynamic endpoint sends each response's own time there: that identity moved at
every request, so every corpus job failed at its end as "changed while the job read it". A stamp
that moves between two requests while the size and any checksum stay is such a time, not the file's:
it is left out of the identity (the size, and a Content-MD5 or Digest if sent, tell the versions
apart; the listing warns). ``Last-Modified`` has whole seconds, and two requests a few milliseconds
apart mostly fall in one: a stamp within :data:`RECENT_S` of this machine's clock is asked for once
more a second after the last answer, which a response's own time cannot survive and a file's does.
"""

from __future__ import annotations

import dataclasses
import email.utils
import time

from kolectra.core import object_infos, storage

LITERALS_AT_ONCE = 1024  # URLs asked of at a time (their infos held meanwhile)
# a Last-Modified this close to the clock here may be the response's own time: asked again a second later
RECENT_S = 24 * 3600.0
_STAMP = "Last-Modified"
_HTTP = ("http", "https")


@dataclasses.dataclass(frozen=True, slots=True)
class Looked:
    """What the store said of one URL: ``info`` (None: no object there, or the store could not answer:
    the pattern is read as a glob, whose listing reports it), ``error`` (a later request failed, or
    the first had no answer in time: a TimeoutError), and
    ``stamps``, the two ``Last-Modified`` seen when they showed it to be each response's own time
    (``info`` then holds none)."""

    info: dict | None
    error: Exception | None = None
    stamps: tuple[str, str] | None = None


def look(urls: list[str], stamps: bool = True) -> dict[str, Looked]:
    """Each URL's :class:`Looked`; ``stamps=False``: for its name alone, the Last-Modified not tested."""
    # a server that did not answer in time: said as such (a glob's listing would wait on it again)
    looked = {url: Looked(info if isinstance(info, dict) else None, error=info if isinstance(info, TimeoutError) else None)
              for url, info in zip(urls, object_infos.object_infos(urls))}
    stamped = [url for url, seen in looked.items() if stamps and _stamped(url, seen.info)]
    answered = time.monotonic()
    if stamped:  # a second request, at once: a stamp that moved is each response's own time
        _again(looked, stamped)
        answered = time.monotonic()
    if recent := [url for url in stamped if looked[url].error is None and _stamped(url, looked[url].info)
                  and _recent(looked[url].info[_STAMP])]:
        # the same second: a file written lately, or a response's own time; a second on, only the file's stays
        time.sleep(max(0.0, answered + 1.0 - time.monotonic()))
        _again(looked, recent)
    return looked


def _stamped(url: str, info: dict | None) -> bool:
    """Whether ``info`` is an http(s) object's told apart by its Last-Modified (no ETag: storage.checksum_of)."""
    return (info is not None and storage.scheme(url) in _HTTP and storage.checksum_of(info) is None
            and bool(info.get(_STAMP)))


def _again(looked: dict[str, Looked], urls: list[str]) -> None:
    """Ask for ``urls`` once more: a moved stamp with all else kept is left out of the info."""
    for url, now in zip(urls, object_infos.object_infos(urls)):
        before = looked[url].info
        if not isinstance(now, dict):  # gone, or the store failed: identify's error, naming the input
            looked[url] = Looked(before, error=now if now is not None else FileNotFoundError(url))
        elif now.get(_STAMP) != before.get(_STAMP) and _kept(now) == _kept(before):
            looked[url] = Looked(_without_stamp(now), stamps=(before[_STAMP], now.get(_STAMP) or "none"))
        else:
            looked[url] = Looked(now)


def _kept(info: dict) -> tuple:
    """What tells the object's versions apart besides its Last-Modified (not the URL it was answered
    from: a redirect to a signed URL differs at every request)."""
    return info.get("size"), info.get("Content-MD5"), info.get("Digest")


def _without_stamp(info: dict) -> dict:
    return {k: v for k, v in info.items() if k != _STAMP}


def _recent(stamp: str) -> bool:
    try:
        return abs(time.time() - email.utils.parsedate_to_datetime(stamp).timestamp()) <= RECENT_S
    except (TypeError, ValueError):  # not an HTTP date: it tells nothing of its time, so ask
        return True


UNREACHABLE_S = 30.0  # the bound on the one request asking why an http(s) input was not found


def unreachable(pattern: str) -> str | None:
    """Why an ``http(s)://`` input found nothing when the server or the network, not a missing file,
    is the cause (a 403, a 500, a refused connection, no answer): fsspec turns every failure of its
    HEAD and GET into FileNotFoundError, so the job said "matches no file" of a URL that a login, a
    signed URL's expiry or a server down kept from it. None for a 404/410, another scheme, or an
    answer. A glob is asked of as its index page (the folder before its first ``*`` or ``[``).
    One request more, only when the input is about to be refused."""
    import fsspec.asyn  # noqa: PLC0415 - only when a URL is used

    if storage.scheme(pattern) not in _HTTP:
        return None
    wild = [i for i in (pattern.find("*"), pattern.find("[")) if i >= 0]
    url = pattern[:pattern.rfind("/", 0, min(wild)) + 1] if wild else pattern
    fs, path = storage.filesystem(url)
    try:
        fsspec.asyn.sync(fs.loop, fs._info, path, timeout=UNREACHABLE_S)  # noqa: SLF001 - its bounded form
        return None
    except fsspec.asyn.FSTimeoutError:
        return f"no answer from {url} in {UNREACHABLE_S:.0f} s"
    except FileNotFoundError as e:
        cause = e.__cause__
    except Exception as e:  # noqa: BLE001 - said, not raised: the caller refuses the input with it
        cause = e
    status = getattr(cause, "status", None)
    if cause is None or status in (404, 410):
        return None
    if status:
        page = f" for its index page {url}" if url != pattern else ""
        return f"the server answered {status} {getattr(cause, 'message', '')}".rstrip() + page
    return f"{type(cause).__name__}: {cause}"
