"""An upload to a store stopped by a real Ctrl-C stops: no object lands after it, no multipart upload stays.

fsspec ran the upload on its I/O thread and a Ctrl-C ended only the wait for it: an object of 100 MB or
more (a multipart upload: a pretraining checkpoint's weights and optimizer state, a large examples
shard) landed seconds after the command had said it was interrupted, over a published copy's object on a
``--force`` rebuild; with the process gone first, its multipart upload stayed pending, billed for its
parts. On moto's S3 server (tests/s3_support.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from kolectra.core import stoppable, storage
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

SIZE = 110 << 20  # s3fs sends 100 MiB and more as a multipart upload of 50 MiB parts


def _pending(url: str) -> list[str]:
    fs, path = storage.filesystem(url)
    return [u["Key"] for u in fs.call_s3("list_multipart_uploads", Bucket=path.split("/")[0]).get("Uploads", [])]


def _interrupt_once_pending(url: str) -> threading.Thread:
    """A real SIGINT to this process once the multipart upload under ``url`` has begun."""
    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _pending(url):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


@pytest.mark.parametrize("how", ["upload", "write_bytes"])
def test_a_large_upload_stopped_by_ctrl_c_lands_nothing_and_leaves_no_multipart_upload(bucket, tmp_path, how):
    url = f"{bucket}/stopped/{how}/model.pt"
    data = os.urandom(1 << 20) * (SIZE >> 20)
    local = tmp_path / "model.pt"
    local.write_bytes(data)
    watcher = _interrupt_once_pending(url)
    with pytest.raises(KeyboardInterrupt):
        if how == "upload":
            storage.upload(str(local), url)
        else:
            storage.write_bytes(url, data)
        time.sleep(60)  # (a signal that came after the upload ended: the test fails below)
    watcher.join()
    time.sleep(4)  # before: the upload went on in fsspec's thread and its object landed meanwhile
    assert not storage.exists(url)
    assert _pending(url) == []
    storage.upload(str(local), url)  # the same upload, not stopped, lands whole
    assert storage.info(url)["size"] == SIZE and _pending(url) == []


def test_a_transfer_that_times_out_by_itself_fails_at_once_not_waited_on_for_ever():
    """The transfer's own timeout (what gcsfs raises once its retries of a connection that timed out are spent:
    aiohttp's ConnectionTimeoutError, a TimeoutError) is raised as fsspec raised it. The wait once passed every
    TimeoutError, taking it for its own one-second wait's: it asked again for ever, at full CPU. In a child, so
    that a wait for ever ends with the test."""
    child = (
        "import asyncio, aiohttp\n"
        "from kolectra.core import stoppable, storage\n"
        "fs = storage.filesystem('s3://b')[0]\n"
        "async def upload():\n"
        "    await asyncio.sleep(0.1)\n"
        "    raise aiohttp.ConnectionTimeoutError('Connection timeout to host http://127.0.0.1:9/upload')\n"
        "try:\n"
        "    stoppable.run(fs, upload(), None)\n"
        "except TimeoutError as e:\n"
        "    print('raised', type(e).__name__)\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the wait for a transfer that had timed out by itself never ended")
    assert done.stdout.strip() == "raised ConnectionTimeoutError", done.stderr


MUTE_STORE_CHILD = """
import os, signal, socket, sys, threading, time
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(16)
held = []
def answer_nothing():  # accepts each connection and never answers: a store that stopped answering mid-upload
    while True:
        held.append(server.accept()[0])
threading.Thread(target=answer_nothing, daemon=True).start()
os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{server.getsockname()[1]}"
from kolectra.core import stoppable, storage
stoppable.CANCEL_SECONDS = 2
sent = None
def stop_once_sent():  # once the upload has reached the store (a fixed delay once fired before: 2 s to get there)
    global sent
    while not held:
        time.sleep(0.05)
    time.sleep(0.5)
    sent = time.monotonic()
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=stop_once_sent, daemon=True).start()
try:
    storage.write_bytes("s3://b/run/model.pt", b"weights")
except KeyboardInterrupt:
    print(f"stopped {time.monotonic() - sent:.2f} s after the signal" if sent else "stopped before the signal")
"""


def test_a_stop_of_an_upload_the_store_stopped_answering_ends_within_its_bound(tmp_path):
    """A Ctrl-C on an upload hung on a store that stopped answering (the likeliest reason to press it) ends
    within CANCEL_SECONDS. The abort of its multipart upload once asked the store without a bound: each of its
    retries waited out s3fs's 15 s read timeout, and the stop took minutes to land, saying nothing. In a child
    (its own endpoint; a stop that never lands ends with the test)."""
    try:
        done = subprocess.run([sys.executable, "-c", MUTE_STORE_CHILD], capture_output=True, text=True, timeout=60,
                              env=_mute_env(tmp_path))
    except subprocess.TimeoutExpired:
        pytest.fail("a Ctrl-C on an upload to a store that stopped answering had not landed after a minute")
    took = _stopped_after(done)
    # the clean-up waited out its bound on the store that never answers (the stop landed on the upload, not
    # before it began) and no more: s3fs's read timeout (15 s) is what each unbounded retry waited
    assert 2 <= took < 15, (took, done.stderr[-2000:])


def _stopped_after(done: subprocess.CompletedProcess) -> float:
    """The seconds MUTE_STORE_CHILD's stop took from its signal to the KeyboardInterrupt leaving the upload."""
    said = done.stdout.strip().split()
    assert said[:1] == ["stopped"] and said[2:] == ["s", "after", "the", "signal"], (done.stdout, done.stderr[-2000:])
    return float(said[1])


@pytest.mark.parametrize("size", [1 << 20, SIZE])
def test_a_stop_as_the_upload_is_handed_to_fsspec_s_loop_lands_nothing(bucket, tmp_path, monkeypatch, size):
    """A real SIGINT landing while the transfer is handed to fsspec's I/O loop (after the loop has it, before
    the wait for it begins) stops it too. It escaped before the cancel: the upload ran on in fsspec's thread,
    its object landing after the stop (a single PUT at once; a multipart one left pending, then landing)."""
    url = f"{bucket}/handed/{size}/model.pt"
    local = tmp_path / "model.pt"
    local.write_bytes(os.urandom(1 << 20) * (size >> 20))
    handed = asyncio.run_coroutine_threadsafe

    def hand_then_stop(coroutine, loop):
        if sys._getframe(1).f_globals.get("__name__") != stoppable.__name__ or getattr(hand_then_stop, "done", 0):
            return handed(coroutine, loop)
        hand_then_stop.done = 1
        future = handed(coroutine, loop)  # the loop has the transfer: the stop lands before it is returned
        signal.raise_signal(signal.SIGINT)
        time.sleep(5)  # (the handler raises here)
        return future

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", hand_then_stop)
    with pytest.raises(KeyboardInterrupt):
        storage.upload(str(local), url)
    assert getattr(hand_then_stop, "done", 0)
    time.sleep(3)  # before: the upload went on in fsspec's thread
    assert not storage.exists(url)
    assert _pending(url) == []


def test_a_stop_whose_clean_up_takes_a_while_says_so_at_once(tmp_path):
    """A Ctrl-C on an upload to a store that stopped answering waits up to CANCEL_SECONDS for the transfer's
    cancel and its multipart upload's abort: a line says so after a second, naming the upload (before: nothing
    until the bound, a user pressing Ctrl-C again left the multipart upload pending)."""
    child = MUTE_STORE_CHILD.replace("CANCEL_SECONDS = 2", "CANCEL_SECONDS = 4")
    assert child != MUTE_STORE_CHILD
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60,
                          env=_mute_env(tmp_path))
    assert 4 <= _stopped_after(done) < 15, done.stderr[-2000:]
    said = [ln for ln in done.stderr.splitlines() if "s3://b/run/model.pt" in ln]
    assert len(said) == 1 and "stopping the upload" in said[0] and "up to 4 s" in said[0], done.stderr[-2000:]
    assert "a second Ctrl-C leaves that pending" in said[0]


def test_a_stop_cleaned_up_at_once_says_nothing_more(tmp_path):
    """A stop whose transfer ends at once (nothing to wait for, the likeliest case) prints no line of its own."""
    child = (
        "import asyncio, os, signal, threading\n"
        "from kolectra.core import stoppable, storage\n"
        "fs = storage.filesystem('s3://b')[0]\n"
        "async def upload():\n"  # the stop once the transfer runs on the loop (a fixed delay could come before)
        "    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "    await asyncio.sleep(60)\n"
        "try:\n"
        "    stoppable.run(fs, upload(), None)\n"
        "except KeyboardInterrupt:\n"
        "    print('stopped')\n"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60,
                          env=_mute_env(tmp_path))
    assert done.stdout.strip() == "stopped" and done.stderr == "", done.stderr[-2000:]


def _mute_env(tmp_path) -> dict:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "kolectra-test", "AWS_SECRET_ACCESS_KEY": "kolectra-test",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    for k in ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3"):
        env.pop(k, None)
    return env
