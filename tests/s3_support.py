"""An S3-compatible server for the tests: moto's standalone server on 127.0.0.1 (nothing leaves the
machine), reached by the real clients (s3fs, botocore) through the standard environment only
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``), exactly as a user points
kolectra at a bucket. Child processes (the ``kolectra`` command, Beam workers) inherit it.

:func:`answered` lists the requests the server answers meanwhile (moto's recorder, on the server:
every client and child process counts), for tests that count LISTs, HEADs and GETs."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from kolectra.core import storage


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(argv: list[str], port: int, setting: dict[str, str], what: str, **popen) -> Iterator[None]:
    """A server process started from ``argv``, waited for on ``port``; meanwhile ``setting`` is in this
    process's environment (children inherit it) and the store's clients start afresh; ``popen``: the
    server's own ``subprocess.Popen`` arguments."""
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                              **popen)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, f"{what} did not start"
            time.sleep(0.1)
    saved = {k: os.environ.get(k) for k in setting}
    os.environ.update(setting)
    storage.reset()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        storage.reset()
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory):
    """The server's URL, with the environment pointing at it for the whole session."""
    port = free_port()
    recording = tmp_path_factory.mktemp("moto") / "requests.jsonl"  # what answered() reads; off until asked
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "kolectra-test",
           "AWS_SECRET_ACCESS_KEY": "kolectra-test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true"}
    with serving([sys.executable, "-c", "from moto.server import main; main()", "-H", "127.0.0.1", "-p", str(port)],
                 port, env, "moto server", env={**os.environ, "MOTO_RECORDER_FILEPATH": str(recording)}):
        yield env["AWS_ENDPOINT_URL"]


@pytest.fixture()
def bucket(s3_endpoint) -> str:
    """A new, empty bucket: ``s3://NAME``."""
    name = f"kolectra-{uuid.uuid4().hex[:12]}"
    fs, _ = storage.filesystem(f"s3://{name}")
    fs.mkdir(name)
    return f"s3://{name}"


def two_identical_builds_at_once(root: str, tmp_path, lease: dict[str, str]) -> None:
    """Two processes build the same toy request on ``root`` at the same moment (with ``lease``'s short
    lease settings): one builds, the other waits and joins its artifact; one artifact, intact."""
    from kolectra.pipeline.store.factory import open_store  # noqa: PLC0415

    go, calls = tmp_path / "go", tmp_path / "calls"
    procs = [subprocess.Popen([sys.executable, "-m", "tests.fault_child", "toy", root, "none", "--sleep", "1",
                               "--calls", str(calls), "--start-after", str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, **lease},
                              cwd=Path(__file__).resolve().parents[1]) for _ in range(2)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("go.ready-*"))) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    go.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0]  # the same artifact
    assert len(calls.read_text().split()) == 1  # built once
    assert any("building the same request" in err for _, err in outs)
    store = open_store(root)
    assert len(store.list()) == 1 and store.verify(store.list()[0]) == []


class Answered(NamedTuple):
    """One request the server answered: its S3 operation and the key (a listing's: its prefix)."""

    operation: str  # ListObjectsV2, HeadObject, GetObject, PutObject, DeleteObject, HeadBucket, ...
    key: str  # "bucket/key"; for a listing "bucket/prefix"
    query: dict
    sent: int = 0  # the bytes of the object (or body) the client sent: a PutObject's size
    range: str = ""  # a ranged GET's Range header ("bytes=N-M"), else empty


def _operation(method: str, path: str, query: dict) -> str:
    is_bucket = "/" not in path.strip("/")
    if method == "GET" and is_bucket:
        return "ListObjectsV2" if query.get("list-type") == "2" else "ListObjects"
    if method == "POST" and "delete" in query:
        return "DeleteObjects"
    suffix = "Bucket" if is_bucket else "Object"
    return {"GET": "Get", "HEAD": "Head", "PUT": "Put" if not is_bucket else "Create",
            "DELETE": "Delete", "POST": "Post"}.get(method, method) + suffix


@contextlib.contextmanager
def answered(endpoint: str) -> Iterator[list[Answered]]:
    """The requests the server at ``endpoint`` answers inside the block, filled in when it ends."""
    def call(verb: str) -> bytes:
        method = "GET" if verb == "download-recording" else "POST"
        request = urllib.request.Request(f"{endpoint}/moto-api/recorder/{verb}", method=method)
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.read()

    call("reset-recording")
    call("start-recording")
    found: list[Answered] = []
    try:
        yield found
    finally:
        call("stop-recording")
        for line in call("download-recording").decode().splitlines():
            entry = json.loads(line)
            url = urlsplit(entry["url"])
            query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            operation = _operation(entry["method"], url.path, query)
            key = unquote(url.path).lstrip("/")
            if operation.startswith("ListObjects"):
                key = f"{key.rstrip('/')}/{query.get('prefix', '')}"
            headers = {k.lower(): v for k, v in entry.get("headers", {}).items()}
            sent = int(headers.get("x-amz-decoded-content-length") or headers.get("content-length") or 0)
            found.append(Answered(operation, key, query, sent, headers.get("range", "")))
