"""An S3-compatible server for the tests: moto's standalone server on 127.0.0.1 (nothing leaves the
machine), reached by the real clients (s3fs, botocore) through the standard environment only
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``), exactly as a user points
kolectra at a bucket. Child processes (the ``kolectra`` command, Beam workers) inherit it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from kolectra.core import storage


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint():
    """The server's URL, with the environment pointing at it for the whole session."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", "from moto.server import main; main()", "-H", "127.0.0.1",
                               "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, "moto server did not start"
            time.sleep(0.2)
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "kolectra-test",
           "AWS_SECRET_ACCESS_KEY": "kolectra-test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    storage.reset()
    yield env["AWS_ENDPOINT_URL"]
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    storage.reset()
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture()
def bucket(s3_endpoint) -> str:
    """A new, empty bucket: ``s3://NAME``."""
    name = f"kolectra-{uuid.uuid4().hex[:12]}"
    fs, _ = storage.filesystem(f"s3://{name}")
    fs.mkdir(name)
    return f"s3://{name}"
