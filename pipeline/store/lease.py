"""The lease of one request on an object store: who builds it, while a store root has no ``flock``.

``ROOT/.locks/<kind>-<id>.lease`` is a small JSON object (holder's pid, host, start, expiry, a
token) created with a conditional write (:func:`kolectra.core.conditional.create_exclusive`: S3
``If-None-Match: *``, GCS ``ifGenerationMatch=0``), so of two builders exactly one gets it. The
holder renews it every third of its time to live, conditionally on its own version; a holder that
died stops renewing, its lease expires and the next builder replaces it (conditionally on the
expired version, so again one wins).

Ownership is proved, never assumed: a renewal refused because the object changed to another holder's
(412, the lease read again names another token) or is gone (404: a build that took over and finished
removed it) means the lease is lost (a 412 on a lease naming our own token is our own renewal, landed,
whose reply was lost and the retry refused: still ours), and so does a holder that could not renew
for a whole lease (a stall, a partition: someone may have taken over).
Before every step that deletes or writes under the final prefix the store asks :meth:`Lease.check`,
which renews right then; a lost lease raises :class:`LeaseLost` and the build touches nothing more.

When a lease expired is decided by the store's own clock, not the body's ``expires`` (data anyone
can write, and a clock ahead on the reader removed a live lease): a lease expires once it was not
rewritten for ``KOLECTRA_LEASE_SECONDS``, its age being the store's time now minus the object's
last-modified time (:func:`kolectra.core.store_objects.age`). Part of :mod:`.remote`.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
import time
import uuid

from kolectra.core import conditional, scratch, storage, store_objects, url_secrets
from kolectra.core.stage import progress
from kolectra.pipeline.store import workspace
from kolectra.pipeline.store.manifest import ArtifactError

LOCKS = ".locks"
MAX_BODY = 64 << 10  # a lease kolectra writes is about 300 bytes


class LeaseLost(ArtifactError):
    """This build can no longer prove it holds its request's lease: it publishes and deletes nothing."""


def lease_seconds() -> float:
    """How long a lease lasts unless renewed (``KOLECTRA_LEASE_SECONDS``, default 120)."""
    return float(os.environ.get("KOLECTRA_LEASE_SECONDS", "120"))


def poll_seconds() -> float:
    return float(os.environ.get("KOLECTRA_LEASE_POLL_SECONDS", "5"))


def expired(body: dict, found: dict, url: str) -> bool:
    """Whether the lease at ``url`` (its ``body``, its store ``found`` info) is past its time.

    By the store's clock: not rewritten for a whole lease (less one second, the store's clocks
    count whole seconds), the lease time being its holder's (``seconds``) capped by this machine's
    ``KOLECTRA_LEASE_SECONDS``. A store that gives no times falls back to the body's ``expires``,
    a finite number capped at one lease from now (a lease claiming years never blocks forever)."""
    seconds = lease_seconds()
    if _number(body.get("seconds")) and body["seconds"] > 0:  # its holder's lease time, at most this one's
        seconds = min(seconds, body["seconds"])
    age = store_objects.age(url, found)
    if age is not None:
        return age > seconds - 1
    claimed = body.get("expires")
    if not _number(claimed):
        return True  # not written by a kolectra holder: nothing says it is live
    return min(claimed, time.time() + seconds) < time.time()


def ended_here(body: dict) -> bool:
    """Whether the lease's holder was a process of this machine (its boot and pid namespace) that has
    ended: one killed outright (kill -9, the out-of-memory killer, a SIGTERM's grace run out) renews
    nothing, and its lease held the same request's next build here for a whole lease time (2 minutes),
    saying that another run was building it. A holder of another machine, or a lease without an owner
    (an earlier kolectra's), waits for the store's clock as before."""
    who = body.get("owner")
    if not isinstance(who, dict) or who.get("host") != scratch.HOST:
        return False
    pid, start = who.get("pid"), who.get("start")
    if not (_whole(pid) and _whole(start)) or pid <= 0 or start < 0:
        return False
    return not scratch.alive(scratch.Owner("lease", pid, start, scratch.HOST))


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class Lease:
    """``ROOT/.locks/<kind>-<id>.lease``: who builds a request on a store (see the module docstring)."""

    def __init__(self, root: str, kind: str, aid: str):
        self.url = storage.join(root, LOCKS, f"{kind}-{aid}.lease")
        self.kind, self.aid = kind, aid
        self.version: str | None = None
        self.confirmed = -math.inf  # time.monotonic() when the store last said this lease is ours
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._renewing = threading.Lock()  # the renewal thread and check() renew one at a time
        self._thread: threading.Thread | None = None
        self.token = uuid.uuid4().hex

    def _body(self) -> bytes:
        me = scratch.me("lease")
        return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": workspace.now(),
                           "owner": {"pid": me.pid, "start": me.start, "host": me.host},
                           "expires": time.time() + lease_seconds(), "seconds": lease_seconds(), "token": self.token,
                           "argv": url_secrets.redacted(" ".join(["kolectra", *sys.argv[1:]]))}).encode()

    def holder(self) -> tuple[dict, str | None]:
        """(the lease's body, or {} when it is not a small JSON object; its version, None when absent)."""
        body, version, _ = self._read()
        return body, version

    def _read(self) -> tuple[dict, str | None, dict]:
        """:meth:`holder` and the lease's store info."""
        try:
            found = storage.info(self.url)
            raw = storage.read_bytes(self.url) if int(found.get("size", 0)) <= MAX_BODY else b""
            body = json.loads(raw or b"{}")
        except FileNotFoundError:
            return {}, None, {}
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = {}
        return (body if isinstance(body, dict) else {}), storage.checksum_of(found), found

    def live(self) -> bool:
        """Whether a lease is there and not expired (``gc``'s question)."""
        body, version, found = self._read()
        return version is not None and not expired(body, found, self.url)

    def expired_version(self) -> str | None:
        """The version of the lease there if it is expired, else None: what ``gc`` may remove, and only
        that version (a run may take the lease over between this read and the removal)."""
        body, version, found = self._read()
        return version if version is not None and expired(body, found, self.url) else None

    def acquire(self) -> None:
        said = False
        while True:
            started = time.monotonic()
            try:
                self.version = conditional.create_exclusive(self.url, self._body())
                break
            except conditional.PreconditionFailed:
                pass
            held, version, found = self._read()
            if version is not None and held.get("token") == self.token:  # ours: the write landed, its reply was
                self.version = version  # lost and the retry refused (412); not another run to wait a lease for
                break
            timed_out = version is not None and expired(held, found, self.url)
            if version is not None and (timed_out or ended_here(held)):
                started = time.monotonic()
                try:  # whoever replaces it first wins
                    self.version = conditional.create_exclusive(self.url, self._body(), replacing=version)
                except (conditional.PreconditionFailed, FileNotFoundError):
                    continue
                progress(f"{self.kind}: the lease of {_who(held)} expired (its builder stopped renewing it); "
                         "taking the build over" if timed_out else
                         f"{self.kind}: the lease of {_who(held)} is held by no process: that process of this "
                         "machine has ended (killed: kill -9, out of memory); taking the build over")
                break
            if not said and version is not None:
                progress(f"{self.kind}: another run ({_who(held)} since {_short(held.get('since'))}) is building "
                         f"the same request {self.aid}; waiting for it to finish (Ctrl-C stops waiting)")
                said = True
            if version is not None:
                time.sleep(poll_seconds())
        self.confirmed = started
        self._thread = threading.Thread(target=self._renew, name="kolectra-lease", daemon=True)
        self._thread.start()

    def _renew_now(self) -> None:
        """One conditional rewrite of the lease; LeaseLost when it is not ours any more."""
        with self._renewing:
            if self.lost.is_set():
                raise self._lost()
            started = time.monotonic()
            try:
                self.version = conditional.create_exclusive(self.url, self._body(), replacing=self.version)
            except FileNotFoundError:  # 404: removed
                self.lost.set()
                raise self._lost() from None
            except conditional.PreconditionFailed:  # 412: taken over, or our own write whose reply was lost
                self._ours_still()
            self.confirmed = started

    def _ours_still(self) -> None:
        """After a 412: the lease is still ours when it names our token. A renewal that landed but whose
        reply was lost is sent again by botocore/s3fs with the old version, and the store refuses that
        retry (412: our own write changed the version); only a lease naming another holder is lost.

        Ours, it is written again (conditionally on the version read) before it counts as proved now: the
        write that landed may be an earlier renewal whose every retry failed on the connection, up to a
        lease old by the store's clock, which another run could then take over while this one's
        ``check(recent=True)`` trusted it a third of a lease more. A 412 on that write too is read once more:
        ours then, it landed within this renewal."""
        self._adopt()
        try:
            self.version = conditional.create_exclusive(self.url, self._body(), replacing=self.version)
        except FileNotFoundError:  # 404: removed
            self.lost.set()
            raise self._lost() from None
        except conditional.PreconditionFailed:
            self._adopt()

    def _adopt(self) -> None:
        """The version of the lease there if it names our token; else it is lost."""
        body, version, _ = self._read()
        if version is None or body.get("token") != self.token:
            self.lost.set()
            raise self._lost() from None
        self.version = version

    def _renew(self) -> None:
        while not self._stop.wait(lease_seconds() / 3):
            try:
                self._renew_now()
            except LeaseLost:
                return
            except Exception:  # noqa: BLE001 - a blip: try again; check() refuses once a whole lease passed
                continue

    def _lost(self) -> LeaseLost:
        return LeaseLost(f"{self.kind}: lost the lease {self.url} to another run (this one stalled, or could "
                         f"not reach the store, for longer than the lease's {lease_seconds():.0f} s); it "
                         "publishes and deletes nothing, whatever another run published stays")

    def check(self, recent: bool = False) -> None:
        """Prove this build still holds its lease, now (a conditional renewal), before it deletes or
        writes under the final prefix; :class:`LeaseLost` when it cannot. With ``recent``, a proof
        from the last third of a lease will do (nobody takes a lease over before it is a whole lease
        old by the store's clock): for each of many uploads, without a request each."""
        if self.lost.is_set():
            raise self._lost()
        if recent and time.monotonic() - self.confirmed < lease_seconds() / 3:
            return
        try:
            self._renew_now()
        except LeaseLost:
            raise
        except Exception:  # the store unreachable: held only while the last proof is younger than a lease
            if time.monotonic() - self.confirmed >= lease_seconds():
                self.lost.set()
                raise self._lost() from None
            raise

    def holds(self) -> bool:
        """Whether :meth:`check` proves the lease is held (False instead of an error)."""
        try:
            self.check()
        except Exception:  # noqa: BLE001 - any doubt is "not proved"
            return False
        return True

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._renewing:
            if not self.lost.is_set() and self.version is not None:
                conditional.remove_if(self.url, self.version)  # only our own version: never a lease taken over


def _short(value, limit: int = 80) -> str:
    return str(value)[:limit] if value is not None else "?"


def _who(held: dict) -> str:
    return f"pid {_short(held.get('pid'), 20)} on {_short(held.get('host'))}"
