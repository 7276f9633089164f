"""A stop or failure of a build that replaces a published artifact on a store root (``--force``, or a
damaged copy rebuilt), on moto's S3 server (tests/s3_support.py) and fake-gcs-server
(tests/gcs_support.py), with real builder processes and real signals: the copy published there
before keeps its objects, as a local root keeps its directory.

A Beam stage (``corpus``, ``vocab``, ``examples``) writes where the artifact lives; its failed build's
clean-up removes what its workers wrote, which removed the published copy's objects too: its manifest
was left listing files that were gone (``artifacts verify``: missing), under a line saying 'nothing
published under s3://...'."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.pipeline.store.factory import open_store
from tests.gcs_support import gcs_endpoint, gs_bucket  # noqa: F401  (fixtures)
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]
FAST_LEASE = {"KOLECTRA_LEASE_SECONDS": "3", "KOLECTRA_LEASE_POLL_SECONDS": "0.2"}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    for k, v in FAST_LEASE.items():
        monkeypatch.setenv(k, v)


def _toy(root: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.fault_child", "toy", root, "none", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


@pytest.mark.parametrize("store,stop", [("bucket", "SIGINT"), ("bucket", "SIGTERM"), ("bucket", "fails"),
                                        ("gs_bucket", "SIGINT")])
def test_a_stopped_force_rebuild_in_place_keeps_the_published_copy(request, tmp_path, store, stop):
    root, calls, hold = f"{request.getfixturevalue(store)}/force-{stop}", tmp_path / "calls", tmp_path / "hold"
    first = _toy(root, "--text", "published", "--in-place")
    assert first.wait(timeout=300) == 0, first.communicate()[1]
    store = open_store(root)
    art = store.resolve("toy")
    assert store.verify(art) == []
    handled = [] if stop == "fails" else ["--handled"]  # (the toy's command line would log a failure under cwd)
    again = _toy(root, "--text", "published", "--in-place", "--force", *handled, "--calls", str(calls),
                 "--hold", str(hold))
    deadline = time.monotonic() + 120
    while not (calls.is_file() and calls.read_text().strip()):  # its stage runs (a Beam job, its workers)
        assert time.monotonic() < deadline and again.poll() is None, again.communicate()
        time.sleep(0.05)
    storage.write_bytes(f"{art.path}/data/worker-temp.txt", b"a worker's object")  # what its workers wrote
    if stop == "fails":
        hold.write_text("fail")
    else:
        again.send_signal(getattr(signal, stop))
    _, err = again.communicate(timeout=120)
    assert again.returncode == {"SIGINT": 130, "SIGTERM": 143, "fails": 1}[stop], err
    # before: data/a.txt removed with the workers' object, the manifest left listing it ('missing')
    assert store.verify(store.resolve("toy")) == [], err
    assert art.read_bytes("data/a.txt") == b"published"
    if stop != "fails":
        assert f"nothing published under {art.path}; the copy published there before is kept" in err, err
