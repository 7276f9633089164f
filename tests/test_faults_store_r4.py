"""Fault injection, round 4: the object-store protocol (pipeline/store/remote.py, lease.py, remote_runs.py,
core/storage.py) on moto's S3 server (tests/s3_support.py), with real builder processes.

- a build that lost its lease (stalled past it: SIGSTOP, as a stopped process or a preempted VM)
  deletes and writes nothing under the final prefix, and never deletes the manifest another run
  published; a renewal that finds its lease gone (404 on If-Match) is a lost lease, not a blip;
- a key read from the store becomes a local path only if it stays inside its destination;
- a lease's ``expires`` is data: odd values, values years ahead and a clock running ahead
  neither hang nor break builds and ``gc``; a published artifact is reused without the lease;
- a root on a protocol kolectra does not support is one line; a recorded parent path is
  followed only on a supported store.

The manifest's tests (a lost PUT reply, its fields' digest, its read bound): tests/test_faults_store_r4_manifests.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from kolectra.core import conditional, storage
from kolectra.pipeline.store import lease as leases
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.manifest import MANIFEST
from tests.faults_store_r4_support import LEASE, _own_cache, _toy_request  # noqa: F401  (the autouse fixture)
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]


def _toy(root: str, *args: str, wait: bool = True):
    cmd = [sys.executable, "-m", "tests.fault_child", "toy", root, "none", *args]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)


def _wait_for(what, ready, seconds: float = 120):
    deadline = time.monotonic() + seconds
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _manifest_state(prefix: str) -> tuple[str | None, bytes | None]:
    try:
        return storage.checksum_of(storage.info(f"{prefix}/{MANIFEST}")), storage.read_bytes(f"{prefix}/{MANIFEST}")
    except FileNotFoundError:
        return None, None


# ---- a build that lost its lease --------------------------------------------------------------------
@pytest.mark.parametrize("in_place", [False, True], ids=["uploaded", "in_place"])
@pytest.mark.parametrize("then", ["finishes", "fails"])
def test_a_build_that_lost_its_lease_leaves_the_published_artifact_alone(bucket, tmp_path, in_place, then):
    """A stalls in its stage past its lease; B takes over, publishes and releases the lease; A resumes.
    Left to run, A must not publish over B (its renewal meets 404: the lease is gone, not a blip);
    failing, its clean-up must not clear the prefix B published."""
    root, release, calls = f"{bucket}/s", tmp_path / "release", tmp_path / "calls"
    flags = ["--in-place"] if in_place else []
    a = _toy(root, "--hold", str(release), "--calls", str(calls), "--text", "same", *flags, wait=False)
    try:
        _wait_for("A to start its stage", lambda: calls.is_file() and calls.read_text().strip())
        os.kill(a.pid, signal.SIGSTOP)  # a stopped process, a preempted VM
        time.sleep(LEASE + 1.5)
        b = _toy(root, "--text", "same", *flags)
        assert b.returncode == 0, b.stderr
        assert "expired" in b.stderr  # B took the build over
        store = open_store(root)
        art = store.resolve("toy")
        before = _manifest_state(str(art.path))
        assert before[0] is not None
        release.write_text("fail" if then == "fails" else "")
        os.kill(a.pid, signal.SIGCONT)
        _, err = a.communicate(timeout=120)
    finally:
        if a.poll() is None:
            os.kill(a.pid, signal.SIGCONT)
            a.kill()
    assert a.returncode != 0, err
    if then == "finishes":
        assert "lost the lease" in err, err
        assert "LeaseLost" in err, err  # an ArtifactError: the command line prints it as one line
    assert _manifest_state(str(art.path)) == before  # B's manifest, untouched
    assert store.verify(store.resolve("toy")) == []
    assert storage.children(f"{root}/.locks") == [] or all(not n.endswith(".lease") for n in
                                                           storage.children(f"{root}/.locks"))


def test_a_renewal_that_finds_the_lease_gone_is_a_lost_lease(bucket):
    """S3 answers 404 to If-Match when the object is gone: whoever removed it (a gc with a clock ahead, a
    run that took the build over and finished) may be publishing; this holder must stop."""
    held = leases.Lease(f"{bucket}/r", "corpus", "0123456789abcdef")
    held.acquire()
    try:
        storage.remove(held.url)
        _wait_for("the renewal", held.lost.is_set, seconds=LEASE * 3)
        with pytest.raises(leases.LeaseLost, match="lost the lease"):
            held.check()
    finally:
        held.release()


def test_a_renewal_whose_reply_was_lost_and_retried_keeps_the_lease(bucket, monkeypatch):
    """A renewal that lands but whose reply is lost is sent again by botocore/s3fs with the old version;
    the store refuses the retry (412: the version changed, by this holder's own write). Before, the
    holder took that for 'lost the lease' and stopped its build; a lease naming its token is its own."""
    held = leases.Lease(f"{bucket}/r", "corpus", "0123456789abcdef")
    held.version = conditional.create_exclusive(held.url, held._body())
    first = held.version
    put = conditional.create_exclusive

    def reply_lost_then_retried(location, data, replacing=None):
        put(location, data, replacing=replacing)  # lands on the store; its reply never comes back
        return put(location, data, replacing=replacing)  # the same PUT again, If-Match the old version

    with monkeypatch.context() as lossy:
        lossy.setattr(conditional, "create_exclusive", reply_lost_then_retried)
        held.check()  # before: LeaseLost 'lost the lease ... to another run'
    assert not held.lost.is_set() and held.version != first
    assert held.version == storage.checksum_of(storage.info(held.url))
    held.check()  # the adopted version renews as any other
    other = leases.Lease(held.url.rsplit("/.locks/", 1)[0], "corpus", "0123456789abcdef")
    conditional.create_exclusive(held.url, other._body(), replacing=storage.checksum_of(storage.info(held.url)))
    with pytest.raises(leases.LeaseLost, match="lost the lease"):  # a lease naming another holder is lost
        held.check()


def test_a_lease_read_back_as_this_holders_after_a_412_is_renewed_not_only_adopted(bucket):
    """A renewal that landed while every retry of it failed on the connection (the holder kept the old version),
    then a renewal meeting 412 whose read-back names this holder's token: the version there was adopted and the
    check counted as a proof from now, though that lease was last written long before (here near its end by the
    store's clock): another run could take it over while ``check(recent=True)`` trusted it a third of a lease more.
    The lease read back as ours is now rewritten, conditionally on that version, before the check passes."""
    held = leases.Lease(f"{bucket}/o", "corpus", "0123456789abcdef")
    held.version = conditional.create_exclusive(held.url, held._body())
    conditional.create_exclusive(held.url, held._body(), replacing=held.version)  # landed; its reply never came
    time.sleep(LEASE + 0.2)  # that write grows old: past its lease by the store's clock
    held.check()  # 412 on the old version; the lease there names this holder's token
    body, version, found = held._read()
    assert version == held.version and body["token"] == held.token
    assert not leases.expired(body, found, held.url), "check() passed on a lease another run may take over now"


def test_a_creation_whose_reply_was_lost_and_retried_is_this_runs_lease(bucket, monkeypatch):
    """The lease's creation (If-None-Match: *) lands, its reply is lost, the retry meets 412: before, the
    run waited a whole lease (2 minutes by default) for 'another run (pid <its own>)', then took it over."""
    monkeypatch.setenv("KOLECTRA_LEASE_SECONDS", "60")
    held = leases.Lease(f"{bucket}/c", "corpus", "0123456789abcdef")
    put = conditional.create_exclusive

    def reply_lost_then_retried(location, data, replacing=None):
        put(location, data, replacing=replacing)
        return put(location, data, replacing=replacing)

    with monkeypatch.context() as lossy:
        lossy.setattr(conditional, "create_exclusive", reply_lost_then_retried)
        t = threading.Thread(target=held.acquire, daemon=True)
        t.start()
        t.join(10)
    try:
        assert not t.is_alive(), "acquire waits on its own lease"
        assert held.version == storage.checksum_of(storage.info(held.url))
        held.check()
    finally:
        held.release()
    assert storage.children(f"{bucket}/c/.locks") == []


def test_a_holder_that_cannot_renew_for_a_whole_lease_cannot_prove_it_holds_it(bucket, monkeypatch):
    held = leases.Lease(f"{bucket}/r", "corpus", "0123456789abcdef")
    held.acquire()
    try:
        held.confirmed -= LEASE + 1  # its last successful renewal was longer ago than a lease
        with monkeypatch.context() as down, pytest.raises(leases.LeaseLost, match="lost the lease"):
            down.setattr(conditional, "create_exclusive", _unreachable)
            held.check()
    finally:
        held.release()


def _unreachable(*args, **kwargs):
    raise storage.StoreError("the store cannot be reached")


# ---- keys read from a store become local paths only inside their destination ------------------------
ESCAPED = f"escaped-{uuid.uuid4().hex[:8]}.txt"  # the name a planted key would write outside the cache
ESCAPES = ["out/" + "../" * 20 + f"tmp/{ESCAPED}", f"out/../../{ESCAPED}", "out/./x", "out//x",
           f"out/a\\..\\..\\{ESCAPED}"]


# ids fixed: the escaping name is random per process, and test ids must not be (pytest-xdist's workers
# each collect the suite and must agree; `--lf` must find the test again)
@pytest.mark.parametrize("key", ESCAPES, ids=["up-to-tmp", "two-up", "dot", "double-slash", "backslashes"])
def test_resume_refuses_a_run_state_key_that_leaves_the_cache(bucket, tmp_path, key):
    """``--resume`` fetches ROOT/.work/<run>/ into the local cache; a key planted there by anyone who may
    write the bucket must not name a file outside it (a ~/.bashrc, a .pth file)."""
    from kolectra.pipeline.store import workspace

    store = open_store(f"{bucket}/w")
    remote_run = f"{store.url}/.work/checkpoint-0123456789abcdef"
    fs, _ = storage.filesystem(remote_run)
    prefix = remote_run.removeprefix("s3://")
    fs.pipe_file(f"{prefix}/request.json", b'{"id": "0123456789abcdef", "kind": "checkpoint"}')
    fs.pipe_file(f"{prefix}/out/checkpoints/step-1/manifest.json", b"{}")
    fs.pipe_file(f"{prefix}/{key}", b"planted")
    assert key in storage.listing(remote_run)  # the store keeps the key as written
    run = workspace.Run(tmp_path / "cache" / "roots" / "r" / ".work" / "checkpoint-0123456789abcdef")
    with pytest.raises(storage.StoreError, match="refusing to write it"):
        store._fetch_run(remote_run, run)
    assert [p for p in tmp_path.rglob(f"*{ESCAPED}*")] == [] and not Path("/tmp", ESCAPED).exists()
    assert not any(p.read_bytes() == b"planted" for p in tmp_path.rglob("*") if p.is_file())


def test_a_key_is_refused_when_a_symlink_below_the_destination_leads_out(tmp_path):
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "out").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(storage.StoreError, match="symlink"):
        storage.local_target(tmp_path / "dest", "out/x.pt")
    assert storage.local_target(tmp_path / "dest", "a/b.pt") == tmp_path / "dest" / "a" / "b.pt"
    for bad in ["/etc/passwd", "C:/x", "a/../../b", "", "a\x00b", None, ["a"]]:
        with pytest.raises(storage.StoreError):
            storage.local_target(tmp_path / "dest", bad)


# ---- a lease's expiry is data --------------------------------------------------------------------
@pytest.mark.parametrize("expires", ['"soon"', "[1]", "NaN", "Infinity", "1e12", "null", "true"])
def test_a_lease_with_an_odd_expiry_is_taken_over_once_it_is_a_lease_old(bucket, expires):
    """Before: a string or a list was an internal error; NaN, Infinity or years ahead, a wait for ever."""
    store = open_store(f"{bucket}/e")
    request, produce = _toy_request()
    lease = leases.Lease(store.url, "corpus", request.id())
    storage.write_bytes(lease.url, f'{{"pid": 1, "host": "elsewhere", "expires": {expires}}}'.encode())
    art = _built_within(store, request, produce, LEASE * 6)
    assert store.verify(art) == []


def _built_within(store, request, produce, seconds: float):
    """``store.build`` in a thread: its artifact, failing the test if it is still waiting after ``seconds``."""
    import threading

    result: dict = {}

    def build():
        try:
            result["art"] = store.build(request, produce)
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e

    t = threading.Thread(target=build, daemon=True)
    t.start()
    t.join(timeout=seconds)
    assert not t.is_alive(), f"the build still waits on the lease after {seconds:.0f} s"
    assert "error" not in result, result.get("error")
    return result["art"]


def test_a_published_artifact_is_reused_without_waiting_for_a_lease(bucket):
    """The published check comes before the lease: a lease left (or held) on a published request
    blocks no reuse, and the reuse leaves it alone."""
    store = open_store(f"{bucket}/p")
    request, produce = _toy_request()
    art = store.build(request, produce)
    lease = leases.Lease(store.url, "corpus", request.id())
    body = b'{"pid": 1, "host": "elsewhere", "expires": 1e12, "token": "theirs"}'
    version = conditional.create_exclusive(lease.url, body)
    again = _built_within(store, request, produce, LEASE * 4)
    assert again.path == art.path
    assert storage.read_bytes(lease.url) == body and storage.checksum_of(storage.info(lease.url)) == version


class _ClockAhead:
    """The ``time`` module as a machine whose clock runs an hour ahead sees it (monotonic time is
    untouched: it measures intervals, not dates)."""

    def __init__(self, seconds: float):
        self.ahead = seconds

    def time(self) -> float:
        return time.time() + self.ahead

    def __getattr__(self, name):
        return getattr(time, name)


def test_gc_with_a_clock_ahead_keeps_a_live_builds_lease_and_objects(bucket, monkeypatch):
    """gc (remote_gc.py) asks lease.Lease.live, by the store's clock: this machine's clock (the lease module's
    ``time``, the one clock gc's decision reads) an hour ahead removes nothing live."""
    store = open_store(f"{bucket}/g")
    request, _ = _toy_request()
    holder = leases.Lease(store.url, "corpus", request.id())
    holder.acquire()
    try:
        building = f"{store.url}/corpus/toy-{request.id()}/data/a.txt"  # a Beam build writing in place
        storage.write_bytes(building, b"in progress")
        with monkeypatch.context() as ahead:
            # (remote.py, patched here before with raising=False, never imported time: that patch did nothing)
            ahead.setattr(leases, "time", _ClockAhead(3600))
            removed, _ = store.collect()
        assert removed == []
        assert storage.exists(building) and storage.exists(holder.url)
        holder.check()  # still its holder's
    finally:
        holder.release()
    # once nobody renews it, gc removes it (by the store's clock, whatever this machine's says)
    storage.write_bytes(holder.url, b'{"expires": 1e12}')
    time.sleep(LEASE + 1.2)
    removed, _ = store.collect()
    assert holder.url in removed and not storage.exists(building)


def test_gc_of_a_store_root_leaves_the_complete_copies_a_kill_left_in_a_disk_roots_tmp_used_as_its_cache(
        bucket, tmp_path, monkeypatch):
    """KOLECTRA_CACHE set to a disk root (its .tmp is then the cache's): that root's --force killed -9 between its
    renames left its copy moved aside (and the new build) complete in .tmp; the bucket root's gc took them for a
    store build's directories an older kolectra left, and deleted them: the disk root's artifact was gone. Now
    entries holding a manifest (a store build never writes one here) are left to that root's own sweep."""
    from kolectra.pipeline.cli import main
    from kolectra.pipeline.store.artifacts import Store

    disk = tmp_path / "disk"
    monkeypatch.setenv("KOLECTRA_CACHE", str(disk))
    assert _toy(str(disk)).returncode == 0
    (first,), _ = Store(disk).scan()
    killed = subprocess.run([sys.executable, "-m", "tests.fault_child", "toy", str(disk), "old_moved", "--force"],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    complete = sorted(d for d in (disk / ".tmp").iterdir() if (d / MANIFEST).is_file())
    assert complete
    removed, _ = open_store(f"{bucket}/g").collect()
    assert [d for d in complete if str(d) in removed or not d.is_dir()] == []  # before: both deleted
    assert main(["artifacts", "gc", "--out", str(disk)]) == 0
    art = Store(disk).find("corpus", first.id)
    assert art is not None and Store(disk).verify(art) == []


def test_gc_leaves_a_lease_taken_over_after_it_found_it_expired(bucket, monkeypatch):
    """gc reads a lease, finds it expired and removes it; a run that took the build over meanwhile
    (replacing, conditionally, the version gc read) keeps its new lease: gc deletes only the version it
    found expired. Before, it deleted whatever was there: the new holder's next renewal met 404 and its
    build stopped with "lost the lease", while a third run could take the request."""
    store = open_store(f"{bucket}/g")
    dead = leases.Lease(store.url, "corpus", "0123456789abcdef")
    dead.version = conditional.create_exclusive(dead.url, dead._body())  # its holder died: never renewed
    taker, expired = leases.Lease(store.url, "corpus", "0123456789abcdef"), leases.expired

    def expired_then_taken_over(body, found, url):
        if taker.version is None:  # gc found it expired; the waiting run takes it over before gc removes it
            taker.version = conditional.create_exclusive(taker.url, taker._body(), replacing=dead.version)
            return True
        return expired(body, found, url)

    monkeypatch.setattr(leases, "expired", expired_then_taken_over)
    removed, _ = store.collect()
    assert taker.version is not None
    taker.check()  # still its holder's: the renewal finds its own version
    assert taker.holder()[0]["token"] == taker.token
    assert removed == []  # nothing was removed: what gc found expired was no longer there


# ---- roots and recorded parents on other protocols ------------------------------------------------
@pytest.mark.parametrize("url", ["http://127.0.0.1:9/k", "ftp://127.0.0.1:9/k", "webhdfs://127.0.0.1:9/k",
                                 "hdfs://127.0.0.1:9/k", "memory://k"])
def test_a_root_on_an_unsupported_protocol_is_one_line(url, tmp_path):
    r = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "list", "--out", url],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "s3://" in r.stderr and "gs://" in r.stderr, r.stderr
    assert "bucket" not in r.stderr.split("s3://")[0]  # not "the bucket 'http:' does not exist"
    with pytest.raises(storage.StoreError, match="not a store kolectra keeps artifacts on"):
        open_store(url)


@pytest.mark.parametrize("scheme", ["http", "ftp"])
def test_a_recorded_parent_on_another_protocol_is_not_contacted(tmp_path, scheme):
    """A manifest is data: its parent_refs path must not make verify or lineage contact a host."""
    import socket

    from kolectra.pipeline.store.manifest import write_json

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    store = open_store(tmp_path / "root")  # as the CLI opens it: able to follow a parent into a store
    request, produce = _toy_request()
    art = store.build(request, produce)
    manifest = json.loads((art.path / MANIFEST).read_text())
    pid = "fedcba9876543210"
    manifest["parents"] = [pid]
    manifest["parent_refs"] = [{"id": pid, "kind": "corpus", "name": "p", "digest": "0" * 64,
                                "path": f"{scheme}://127.0.0.1:{port}/r/corpus/p-{pid}"}]
    write_json(art.path / MANIFEST, manifest)
    try:
        store.verify(store.resolve(art.id))
        lines = store.lineage_lines(store.resolve(art.id))
        assert any("MISSING parent" in line for line in lines)
        with pytest.raises(socket.timeout):
            listener.accept()  # nobody came
    finally:
        listener.close()
