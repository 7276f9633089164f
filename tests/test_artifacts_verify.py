"""What `verify` must see in a published artifact besides altered files: entries that are not
regular files, a filled build mark, and fields whose keys are not strings (writer and verifier
must hash the same text)."""

import hashlib
import json
import os
import threading
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import ArtifactError, Store, verify_dir
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.manifest import BUILD_LOCK, digest, fields_digest, files_digest
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


def _build(root: Path, stats: dict | None = None, config: dict | None = None):
    def produce(out: Path) -> StageOutput:
        (out / "data").mkdir()
        (out / "data" / "a.txt").write_text("hello")
        return StageOutput(stats=stats if stats is not None else {"n": 1})

    store = Store(root)
    return store, store.build(Request(kind="corpus", name="demo", stage_version=1, config=config or {"a": 1}), produce)


def test_stats_and_config_with_keys_that_are_not_strings_verify_as_built(tmp_path):
    """{10: .., 2: ..} sorts 2, 10 as numbers and "10", "2" once written as JSON text; a bool key
    beside a string one could not be sorted at all: the fields' digest is of what the file says."""
    store, art = _build(tmp_path, stats={"by_length": {10: 1, 2: 3}}, config={"labels": {True: "yes", "b": 2}})
    assert store.verify(art) == []
    assert verify_dir(art.path) == []


def test_a_fifo_added_to_a_published_artifact_fails_verify(tmp_path):
    store, art = _build(tmp_path)
    os.mkfifo(art.path / "data" / "b.jsonl.gz")  # a reader globbing data/ would block on it
    problems = store.verify(art)
    assert len(problems) == 1 and "b.jsonl.gz: not a regular file" in problems[0]


def test_a_stage_leaving_a_fifo_is_refused_when_sealed(tmp_path):
    def produce(out: Path) -> StageOutput:
        os.mkfifo(out / "pipe")
        return StageOutput(stats={})

    with pytest.raises(ArtifactError, match="pipe: not a regular file"):
        Store(tmp_path).build(Request(kind="corpus", name="demo", stage_version=1, config={}), produce)
    assert not (tmp_path / "corpus").exists() or not any((tmp_path / "corpus").iterdir())


def test_the_build_mark_is_ignored_only_while_empty(tmp_path):
    """A kill between publishing and removing the mark leaves an empty file (docs/artifacts.md); one
    with bytes in it is a file added after publishing."""
    store, art = _build(tmp_path)
    (art.path / BUILD_LOCK).touch()
    assert store.verify(art) == []
    (art.path / BUILD_LOCK).write_text(json.dumps({"added": "later"}))
    problems = store.verify(art)
    assert len(problems) == 1 and f"{BUILD_LOCK}: not in manifest" in problems[0]


def test_verify_does_not_block_on_a_fifo_put_where_an_examples_index_was(tmp_path):
    """The examples layout check reads index.json to learn its shards: opened as it stood, a FIFO
    there blocked ``verify`` (and every stage's check of the artifact) for good."""
    def produce(out: Path) -> StageOutput:
        (out / "stats.json").write_text("{}")
        (out / "index.json").write_text(json.dumps({"format": 2, "shards": [{"path": "s.arrow"}]}))
        (out / "s.arrow").write_text("x")
        return StageOutput(stats={"examples": 1})

    store = Store(tmp_path)
    art = store.build(Request(kind="examples", name="e", stage_version=1, config={}), produce)
    (art.path / "index.json").unlink()
    os.mkfifo(art.path / "index.json")
    found: list = []
    worker = threading.Thread(target=lambda: found.append(store.verify(art)), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # blocked opening the FIFO: a writer's open and close lets it read nothing and go on
        os.close(os.open(art.path / "index.json", os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
        pytest.fail("verify blocked on a FIFO named index.json")
    assert any("index.json: not a regular file" in p for p in found[0]), found


# ---- on a store ------------------------------------------------------------------------------------
def test_verify_on_a_store_reads_the_parent_as_it_is_now(bucket, tmp_path, monkeypatch):
    """The parents a stage's checks looked up are kept until its build has checked them
    (docs/scale.md); a whole ``verify`` is no stage's check: a parent rewritten since an earlier
    verify in the same process (a study, a notebook) was compared as it was then, and passed."""
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    store = open_store(f"{bucket}/root")
    parent = store.build(Request(kind="corpus", name="p", stage_version=1, config={}), _produce_text("hello"))
    child = store.build(Request(kind="vocab", name="c", stage_version=1, config={}, parents=(parent,)),
                        _produce_text("x"))
    assert store.verify(child) == []
    # the parent rebuilt by hand, files and manifest consistent: only its child's record tells
    m = dict(parent.manifest)
    m["files"] = [{"path": "data/a.txt", "bytes": 5, "sha256": hashlib.sha256(b"HELLO").hexdigest()}]
    m["digest"] = digest(m["files"])
    m["files_digest"] = files_digest(m["files"])
    m["fields_digest"] = fields_digest(m)
    storage.write_bytes(f"{parent.path}/data/a.txt", b"HELLO")
    storage.write_bytes(f"{parent.path}/manifest.json", json.dumps(m).encode())
    assert store.verify(str(parent.path)) == []  # verifies on its own
    problems = store.verify(child)
    assert len(problems) == 1 and "the parent was altered or rebuilt since" in problems[0]


def _produce_text(text: str):
    def produce(out: Path) -> StageOutput:
        (out / "data").mkdir()
        (out / "data" / "a.txt").write_text(text)
        return StageOutput(stats={})
    return produce


def test_a_store_checksum_removed_from_the_manifest_fails_verify(bucket, tmp_path, monkeypatch):
    """``digest`` covers each file's path and sha256 only: a manifest whose checksums were removed
    verified, and then ``verify --quick`` and a stage's check passed an object swapped for one of
    the same size (compared by size alone)."""
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    store = open_store(f"{bucket}/root")
    art = store.build(Request(kind="corpus", name="p", stage_version=1, config={}), _produce_text("hello"))
    m = dict(art.manifest)
    m["files"] = [{k: v for k, v in f.items() if k != "checksum"} for f in m["files"]]
    storage.write_bytes(f"{art.path}/manifest.json", json.dumps(m).encode())
    storage.write_bytes(f"{art.path}/data/a.txt", b"HELLO")  # the same size
    for quick in (True, False):
        problems = open_store(f"{bucket}/root").verify(str(art.path), quick=quick)
        assert any("files_digest does not match" in p for p in problems), problems
    with pytest.raises(ArtifactError, match="files_digest"):
        open_store(f"{bucket}/root").require(str(art.path))



def test_the_digest_binds_each_files_hash_to_its_path():
    # the digest is all a remote read (store/remote.py) and a manifest older than files_digest are
    # checked by: a file renamed in the list, or two files' names swapped, must change the digest
    one, two = "1" * 64, "2" * 64
    files = [{"path": "data/a", "sha256": one, "bytes": 1}, {"path": "data/b", "sha256": two, "bytes": 1}]
    swapped = [{"path": "data/a", "sha256": two, "bytes": 1}, {"path": "data/b", "sha256": one, "bytes": 1}]
    renamed = [{"path": "data/c", "sha256": one, "bytes": 1}, {"path": "data/d", "sha256": two, "bytes": 1}]
    assert len({digest(files), digest(swapped), digest(renamed)}) == 3
    assert digest(files) == digest(files[::-1])  # the list's order does not matter
