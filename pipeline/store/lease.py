"""The lease of one request on an object store: who builds it, while a store root has no ``flock``.

``ROOT/.locks/<kind>-<id>.lease`` is a small JSON object (holder's pid, host, start, expiry, a
token) created with a conditional write (:func:`kolectra.core.storage.create_exclusive`: S3
``If-None-Match: *``, GCS ``ifGenerationMatch=0``), so of two builders exactly one gets it. The
holder renews it every third of its time to live, conditionally on its own version; a holder that
died stops renewing, its lease expires and the next builder replaces it (conditionally on the
expired version, so again one wins). A holder whose lease was taken over while it stalled learns
it at its next renewal and must not publish (:meth:`Lease.check`). Part of :mod:`.remote`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid

from kolectra.core import storage
from kolectra.core.stage import progress
from kolectra.pipeline.store import workspace
from kolectra.pipeline.store.manifest import ArtifactError

LOCKS = ".locks"


def lease_seconds() -> float:
    """How long a lease lasts unless renewed (``KOLECTRA_LEASE_SECONDS``, default 120)."""
    return float(os.environ.get("KOLECTRA_LEASE_SECONDS", "120"))


def poll_seconds() -> float:
    return float(os.environ.get("KOLECTRA_LEASE_POLL_SECONDS", "5"))


class Lease:
    """``ROOT/.locks/<kind>-<id>.lease``: who builds a request on a store (see the module docstring)."""

    def __init__(self, root: str, kind: str, aid: str):
        self.url = storage.join(root, LOCKS, f"{kind}-{aid}.lease")
        self.kind, self.aid = kind, aid
        self.version: str | None = None
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.token = uuid.uuid4().hex

    def _body(self) -> bytes:
        return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": workspace.now(),
                           "expires": time.time() + lease_seconds(), "token": self.token,
                           "argv": " ".join(["kolectra", *sys.argv[1:]])}).encode()

    def holder(self) -> tuple[dict, str | None]:
        try:
            found = storage.info(self.url)
            body = json.loads(storage.read_bytes(self.url) or b"{}")
        except FileNotFoundError:
            return {}, None
        except (ValueError, UnicodeDecodeError):
            body = {}
        return (body if isinstance(body, dict) else {}), storage.checksum_of(found)

    def acquire(self) -> None:
        said = False
        while True:
            try:
                self.version = storage.create_exclusive(self.url, self._body())
                break
            except storage.PreconditionFailed:
                pass
            held, version = self.holder()
            if version is not None and float(held.get("expires", 0) or 0) < time.time():
                with contextlib.suppress(storage.PreconditionFailed):  # expired: whoever replaces it first wins
                    progress(f"{self.kind}: the lease of pid {held.get('pid', '?')} on {held.get('host', '?')} "
                             "expired (its builder stopped); taking the build over")
                    self.version = storage.create_exclusive(self.url, self._body(), replacing=version)
                    break
                continue
            if not said:
                progress(f"{self.kind}: another run (pid {held.get('pid', '?')} on {held.get('host', '?')} since "
                         f"{held.get('since', '?')}) is building the same request {self.aid}; waiting for it to "
                         "finish (Ctrl-C stops waiting)")
                said = True
            time.sleep(poll_seconds())
        self._thread = threading.Thread(target=self._renew, name="kolectra-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(lease_seconds() / 3):
            try:
                self.version = storage.create_exclusive(self.url, self._body(), replacing=self.version)
            except storage.PreconditionFailed:
                self.lost.set()  # taken over: this build must not publish
                return
            except Exception:  # noqa: BLE001 - a blip: try again next time; the lease lasts three renewals
                continue

    def check(self) -> None:
        if self.lost.is_set():
            raise ArtifactError(f"{self.kind}: lost the lease {self.url} to another run (this one stalled longer "
                                f"than {lease_seconds():.0f} s); nothing published by this run")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if not self.lost.is_set():
            held, version = self.holder()
            if held.get("token") == self.token:
                storage.remove(self.url)
