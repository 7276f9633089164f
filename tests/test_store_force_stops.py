"""A stop or failure of a build that replaces a published artifact on a store root (``--force``, or a
damaged copy rebuilt), on moto's S3 server (tests/s3_support.py) and fake-gcs-server
(tests/gcs_support.py), with real builder processes and real signals: the copy published there
before keeps its objects, as a local root keeps its directory.

A Beam stage (``corpus``, ``vocab``, ``examples``) writes where the artifact lives; its failed build's
clean-up removes what its workers wrote, which removed the published copy's objects too: its manifest
was left listing files that were gone (``artifacts verify``: missing), under a line saying 'nothing
published under s3://...'."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.pipeline.cli import main
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


@pytest.mark.parametrize("resumable", [False, True], ids=["uploaded", "resumable"])
def test_a_stopped_force_rebuild_that_began_replacing_the_objects_says_the_copy_may_be_damaged(bucket, resumable):
    """A build uploaded to the store (fine-tuning, pretraining: bytes that differ run to run) writes its
    objects over the copy it replaces, under the same keys: stopped after the first, that copy's manifest
    lists bytes it no longer has, and the line said only 'nothing published under s3://...'."""
    root = f"{bucket}/force-uploaded-{resumable}"
    flag = ["--resumable"] if resumable else []
    first = subprocess.run([sys.executable, "-m", "tests.test_store_force_stops", root, "old", "none", *flag],
                           capture_output=True, text=True, timeout=300, cwd=REPO)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-m", "tests.test_store_force_stops", root, "new", "upload1", *flag],
                           capture_output=True, text=True, timeout=300, cwd=REPO)
    assert again.returncode == 130 and "Traceback" not in again.stderr, again.stderr
    art = open_store(root).resolve("toy")
    assert str(art.path) == first.stdout.strip()
    assert any("sha256 differs" in p for p in open_store(root).verify(art))  # the copy it replaced: damaged
    assert (f"the copy published there before may be damaged: this build had begun to replace its objects "
            f"(`kolectra artifacts verify {art.path}` says; the next build rebuilds it)") in again.stderr, again.stderr


def test_a_connection_lost_as_the_manifest_went_and_still_lost_says_it_may_have_landed(bucket):
    """The manifest's PUT reached the store, its answer did not (a dropped connection), and the one request
    asking whether it landed failed too: the line said 'nothing published under s3://...' with the artifact
    published. It says now that the store could not tell, nothing removed, and how to find out."""
    root = f"{bucket}/lost"
    proc = subprocess.run([sys.executable, "-m", "tests.test_store_force_stops", root, "lost", "lost"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    art = open_store(root).resolve("toy")  # it had landed
    assert open_store(root).verify(art) == []
    assert "nothing published" not in proc.stderr, proc.stderr
    assert (f"corpus: failed as its manifest was written to {art.path}; nothing was removed: `kolectra artifacts "
            f"verify {art.path}` says whether it was published") in proc.stderr, proc.stderr


# the real CLI, its corpus worker sent a Ctrl-C (SIGTERM) once a train shard's write passed 1,000 bytes
_STOPPED_MID_SHARD = """
import os, signal, sys
from kolectra.corpus import sorted_files
real, sent = sorted_files._Counted.write, []
def write(self, data):
    out = real(self, data)
    if not sent and self.bytes > 1000 and "data/train-" in str(getattr(self.raw, "path", "")):
        sent.append(1)
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    return out
sorted_files._Counted.write = write
from kolectra.pipeline.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_corpus_rebuild_stopped_as_it_wrote_a_shard_keeps_the_published_copy(bucket, tmp_path, capsys, stop):
    """The real corpus stage (kiwi, Beam's local runner in this process) rebuilt with --force and stopped while
    its worker wrote a train shard over the published copy's: closing the file on the way out, s3fs uploaded
    the lines written so far, so the copy's shard was truncated (verify: size 149080 != 564901 on the whole
    sample) under a line saying 'the copy published there before is kept'. A file cut short lands nothing.
    The published copy is built in this process (the stopped rebuild is the one that needs its own); 500
    reviews make a shard of tens of kB, the stop comes once 1,000 bytes of it are written."""
    root, src = f"{bucket}/mid-shard-{stop}", tmp_path / "reviews.jsonl"
    with gzip.open(REPO / "pipeline" / "sample" / "reviews.jsonl.gz") as f:
        src.write_bytes(b"".join(f.readlines()[:500]))
    args = ["corpus", "--input", str(src), "--out", root, "-q"]
    assert main(args) == 0
    path = capsys.readouterr().out.strip()
    again = subprocess.run([sys.executable, "-c", _STOPPED_MID_SHARD, stop, *args, "--force"], capture_output=True,
                           text=True, timeout=600, cwd=REPO)
    assert again.returncode == {"SIGINT": 130, "SIGTERM": 143}[stop], again.stderr
    assert f"nothing published under {path}; the copy published there before is kept" in again.stderr, again.stderr
    # one story: before, the stage's words said 'nothing was kept', then the store's that the copy was kept
    assert "nothing was kept" not in again.stderr and "; what it built is discarded: " in again.stderr, again.stderr
    store = open_store(root)
    assert store.verify(store.resolve(path)) == []  # before: '.../data/train-00000-of-00001.jsonl.gz: size ...'


@pytest.mark.parametrize("store", ["bucket", "gs_bucket"])
def test_an_object_written_a_piece_at_a_time_and_stopped_lands_nothing(request, store):
    """fsspec uploads what a file holds when it is closed, an exception's way out too: the object there before
    was replaced by the part written (also once a multipart or resumable upload had begun: aborted)."""
    url = f"{request.getfixturevalue(store)}/written/shard.gz"
    storage.write_bytes(url, b"the published bytes")
    for size in (1000, 6 << 20):  # in the file's buffer; past a part, uploaded (5 MiB: S3's least part)
        with pytest.raises(KeyboardInterrupt), storage.writing(url) as f:
            f.blocksize = 5 << 20
            f.write(b"x" * size)
            raise KeyboardInterrupt
        assert storage.read_bytes(url) == b"the published bytes", size
    with storage.writing(url) as f:
        f.write(b"the new bytes")
    assert storage.read_bytes(url) == b"the new bytes"
    fs, path = storage.filesystem(url)
    if store == "bucket":  # the multipart upload begun was aborted, not left to be billed
        assert fs.call_s3("list_multipart_uploads", Bucket=path.split("/")[0]).get("Uploads", []) == []


def test_a_file_whose_closing_upload_is_stopped_leaves_no_multipart_upload(bucket, monkeypatch):
    """A Ctrl-C as the close sends a shard's last part or completes its upload (the block itself ended well):
    fsspec marks the file closed and the object there before stays, but the multipart upload begun was left
    pending, never listed and billed for its parts (5 MiB and more each) until a lifecycle rule aborts it."""
    import s3fs

    url = f"{bucket}/closing/shard.gz"
    storage.write_bytes(url, b"the published bytes")
    commit = s3fs.core.S3File.commit

    def stopped(self):  # the stop arrives as the last request is sent (the parts before it are uploaded)
        raise KeyboardInterrupt

    monkeypatch.setattr(s3fs.core.S3File, "commit", stopped)
    with pytest.raises(KeyboardInterrupt), storage.writing(url) as f:
        f.blocksize = 5 << 20
        f.write(b"x" * (6 << 20))
    monkeypatch.setattr(s3fs.core.S3File, "commit", commit)
    assert storage.read_bytes(url) == b"the published bytes"
    fs, path = storage.filesystem(url)
    assert fs.call_s3("list_multipart_uploads", Bucket=path.split("/")[0]).get("Uploads", []) == []


def test_a_forced_rebuild_whose_manifest_write_is_unknown_does_not_promise_gc_removes_it(bucket):
    """As above, replacing a published copy (--force): had the manifest not landed, the copy's own would be
    there still, which `artifacts gc` never removes; the line said '(if not, `kolectra artifacts gc` removes
    it once its lease expires)'."""
    root = f"{bucket}/lost-force"
    for text, point in (("old", "none"), ("new", "lost-force")):
        proc = subprocess.run([sys.executable, "-m", "tests.test_store_force_stops", root, text, point],
                              capture_output=True, text=True, timeout=300, cwd=REPO)
        assert proc.returncode == (0 if point == "none" else 2), proc.stderr
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    art = open_store(root).resolve("toy")
    assert "artifacts gc" not in proc.stderr, proc.stderr
    assert (f"corpus: failed as its manifest was written to {art.path}; nothing was removed: `kolectra artifacts "
            f"verify {art.path}` says whether it was published or the copy published there before is whole (if "
            "neither, the next build rebuilds it)") in proc.stderr, proc.stderr


def test_a_copy_whose_objects_a_stopped_rebuild_rewrote_is_read_back_saying_so(gs_bucket, capfd):
    """On GCS a rewrite gives an object a new generation, the store checksum a manifest records, even with the
    same bytes: the copy a stopped in-place rebuild kept has its objects read back at each check, which named
    only 'a copy of the root?' as the cause."""
    root = f"{gs_bucket}/rewritten"
    for point in ("none", "rewritten"):
        proc = subprocess.run([sys.executable, "-m", "tests.test_store_force_stops", root, "same", point, "--in-place"],
                              capture_output=True, text=True, timeout=300, cwd=REPO)
        assert proc.returncode == (0 if point == "none" else 130), proc.stderr
    assert "; the copy published there before is kept" in proc.stderr, proc.stderr
    store = open_store(root)
    capfd.readouterr()
    assert store.verify(store.resolve("toy"), quick=True) == []
    said = capfd.readouterr().err
    assert "1 object(s) have another store checksum than the manifest records (a copy of the root, or a rebuild " \
           "stopped after it wrote them?)" in said, said


def _child(root: str, text: str, point: str, resumable: bool, in_place: bool = False) -> None:
    """Build the toy request (the same id whatever ``text``) with ``text`` as its bytes, ``--force``d unless
    ``point`` is 'none'; 'upload1': a real SIGINT once the first object is uploaded; 'lost': the manifest's
    answer lost, then the one request after it failing ('lost-force': so, --force'd); 'rewritten' (``in_place``):
    a real SIGINT once its object is written over the copy's."""
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.cli import errors
    from tests.fault_child import signal_at_call, toy_request

    def produce(out: Path) -> StageOutput:
        if in_place:  # as the Beam workers write: under the artifact's own keys, reported
            entry = storage.write_bytes(storage.join(str(out), "data/a.txt"), text.encode())
            if point == "rewritten":
                os.kill(os.getpid(), signal.SIGINT)
            return StageOutput(stats={"n": len(text)}, files=[{"path": "data/a.txt", **entry}])
        (out / "data").mkdir(exist_ok=True)
        (out / "data" / "a.txt").write_text(text)
        (out / "data" / "b.txt").write_text(text * 2)
        return StageOutput(stats={"n": len(text)})

    def build() -> int:
        print(open_store(root).build(toy_request("same"), produce, force=point not in ("none", "lost"),
                                     resumable=resumable, in_place=in_place).path)
        return 0

    if point == "upload1":
        signal_at_call(storage, "upload", signal.SIGINT, only=lambda local, url, *a: "/.work/" not in str(url))
    if point.startswith("lost"):  # the manifest written, its answer lost; the store not answering the question after it
        from kolectra.core import conditional
        from kolectra.pipeline.store.remote import RemoteStore
        real_create, real_version = conditional.create_exclusive, RemoteStore._manifest_version

        def create_exclusive(url, *args, **kwargs):
            out = real_create(url, *args, **kwargs)
            if str(url).endswith("/manifest.json"):
                RemoteStore._manifest_version = staticmethod(unreachable)
                raise storage.StoreError(f"{url}: the connection was lost")
            return out

        def unreachable(prefix):
            RemoteStore._manifest_version = staticmethod(real_version)
            raise storage.StoreError(f"{prefix}: the store cannot be reached")

        conditional.create_exclusive = create_exclusive
    sys.exit(errors.handled("corpus", lambda: root, build))


if __name__ == "__main__":
    _child(*sys.argv[1:4], resumable="--resumable" in sys.argv, in_place="--in-place" in sys.argv)
