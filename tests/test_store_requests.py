"""What checking an artifact kept in a bucket costs in requests, counted on moto's server (its
recorder: every request any client or child process makes; tests/s3_support.py).

- a stage run lists each parent's objects once and reads each manifest once, though the stage and
  its build both check the parent; the next run lists again, and sees a change made in between;
- a parent is found under the name its child recorded (one GET), or by its id once moved;
- a manifest is one GET; an empty or oversized one is refused in one line;
- the examples' ``index.json`` (their layout check reads it) is one GET; an absent one is named missing;
- ``artifacts verify --quick`` names an object rewritten, removed or added without downloading
  any, and says which objects it could check by size only; the default still streams every
  object; on a local root ``--quick`` hashes every file;
- a local root building from a parent in the bucket lists it, not downloads it, to check it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import ArtifactError, Store
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)

SHARD = 1 << 20  # the examples' one data object: what a check must not download


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _standin(store, kind: str, name: str, parents: tuple = (), files: dict | None = None, stats: dict | None = None):
    """An artifact published through Store.build (the stage's code replaced by writing ``files``)."""
    def produce(out: Path) -> StageOutput:
        for rel, data in (files or {f"{name}.txt": name.encode()}).items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
        return StageOutput(stats=stats or {})
    return store.build(Request(kind=kind, name=name, stage_version=1, config={"n": name}, parents=parents), produce)


def _chain(store):
    """corpus -> vocab -> examples (one index.json, one shard of SHARD bytes: a kind's layout is checked)."""
    corpus = _standin(store, "corpus", "c")
    vocab = _standin(store, "vocab", "v", (corpus,))
    index = json.dumps({"format": 2, "shards": [{"path": "data/s0.bin"}]}).encode()
    examples = _standin(store, "examples", "e", (corpus, vocab),
                        {"stats.json": b"{}", "index.json": index, "data/s0.bin": os.urandom(SHARD)}, {"examples": 2})
    return corpus, vocab, examples


def _pretrain_like(store, examples_id: str):
    """The store calls ``kolectra pretrain`` makes (pipeline/stages.py): its examples and their vocab
    checked, then a checkpoint built from the examples (whose build checks them again)."""
    ex = store.require(examples_id, "examples")
    store.require(ex.parent_of_kind(store, "vocab"), "vocab")
    return _standin(store, "checkpoint", f"k{time.time_ns()}", (ex,))


def _prefix(art) -> str:
    return str(art.path).split("://", 1)[1] + "/"


def _listings(seen, art) -> int:
    """Listings of the artifact's own objects (recursive, or the one-key probe of a "directory")."""
    return sum(1 for r in seen if r.operation == "ListObjectsV2" and r.key == _prefix(art))


def test_a_stage_run_lists_each_parent_once_and_reads_each_manifest_once(bucket, s3_endpoint):
    corpus, vocab, ex = _chain(open_store(f"{bucket}/r"))
    store = open_store(f"{bucket}/r")
    with answered(s3_endpoint) as seen:
        _pretrain_like(store, ex.id)
    assert {a.kind: _listings(seen, a) for a in (corpus, vocab, ex)} == {"corpus": 0, "vocab": 1, "examples": 1}
    gets = Counter(r.key for r in seen if r.operation == "GetObject")
    assert [gets[_prefix(a) + "manifest.json"] for a in (corpus, vocab, ex)] == [1, 1, 1], gets
    # no request about an artifact's prefix itself (an object store has no symlink to ask after)
    assert not [r for r in seen if r.operation == "HeadObject" and r.key + "/" in map(_prefix, (corpus, vocab, ex))]
    assert gets[_prefix(ex) + "data/s0.bin"] == 0
    # parents are found under the names their children recorded: no listing of the corpus or vocab kind
    kinds = [_prefix(a).rsplit("/", 2)[0] + "/" for a in (corpus, vocab)]
    assert not [r for r in seen if r.operation == "ListObjectsV2" and r.key in kinds]


def test_a_parent_moved_to_another_name_is_still_found_by_its_id(bucket):
    corpus, vocab, ex = _chain(open_store(f"{bucket}/w"))
    moved = str(vocab.path).replace("/v-", "/renamed-")
    for rel in storage.listing(str(vocab.path)):
        storage.write_bytes(f"{moved}/{rel}", storage.read_bytes(f"{vocab.path}/{rel}"))
    storage.remove(str(vocab.path), recursive=True)
    store = open_store(f"{bucket}/w")
    assert str(store.parent(ex, vocab.id).path) == moved
    assert store.verify(ex, quick=True) == []


def test_the_next_run_checks_again_and_sees_a_change_made_after_the_first(bucket, s3_endpoint):
    _, _, ex = _chain(open_store(f"{bucket}/n"))
    store = open_store(f"{bucket}/n")
    _pretrain_like(store, ex.id)
    shard = f"{ex.path}/data/s0.bin"
    storage.write_bytes(shard, os.urandom(SHARD))  # the same size, other bytes: another ETag
    with answered(s3_endpoint) as seen, pytest.raises(ArtifactError, match="s0.bin: rewritten after publishing"):
        _pretrain_like(store, ex.id)
    assert _listings(seen, ex) == 1


def _verify(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "verify", *args],
                          capture_output=True, text=True, timeout=300, env=os.environ.copy())


def test_verify_quick_names_altered_removed_and_added_objects_and_downloads_none(bucket, s3_endpoint):
    corpus, vocab, ex = _chain(open_store(f"{bucket}/q"))
    url = str(ex.path)
    with answered(s3_endpoint) as seen:
        ok = _verify("--quick", url)
    assert ok.returncode == 0 and ok.stdout.startswith(f"ok {url} (3 files"), ok.stderr
    read = {r.key.removeprefix(_prefix(ex)) for r in seen if r.operation == "GetObject"}
    # manifests (the artifact's, its parents') and the index the examples' layout check reads: no data
    assert {k for k in read if not k.endswith("manifest.json")} == {"index.json"}, read
    assert _listings(seen, ex) == 1
    with answered(s3_endpoint) as seen:
        assert _verify(url).returncode == 0  # the default still streams every object through SHA-256
    assert any(r.key == _prefix(ex) + "data/s0.bin" for r in seen if r.operation == "GetObject")

    storage.write_bytes(f"{url}/data/s0.bin", os.urandom(SHARD))  # rewritten: same size, another ETag
    storage.remove(f"{url}/stats.json")
    storage.write_bytes(f"{url}/data/extra.bin", b"x")
    with answered(s3_endpoint) as seen:
        bad = _verify("--quick", url)
    assert bad.returncode == 1, bad.stderr
    assert sorted(bad.stdout.splitlines()) == sorted([
        f"MISMATCH {url}/data/s0.bin: rewritten after publishing (store checksum and sha256 differ from the manifest)",
        f"MISMATCH {url}/stats.json: missing",
        f"MISMATCH {url}/data/extra.bin: not in manifest (added after publishing)"])
    assert bad.stderr.strip().splitlines()[-1] == "3 problem(s)"
    # only the object whose store checksum changed is read (a copy's bytes would pass: the next test)
    assert {r.key for r in seen if r.operation == "GetObject" and "/data/" in r.key} == {_prefix(ex) + "data/s0.bin"}


def test_verify_quick_names_a_parent_rebuilt_since(bucket):
    _, vocab, ex = _chain(open_store(f"{bucket}/p"))
    entry = storage.write_bytes(f"{vocab.path}/v.txt", b"w")  # a consistent rewrite: the parent verifies
    manifest = dict(vocab.manifest)
    manifest["files"] = [{**entry, "path": "v.txt", "checksum": storage.checksum_of(storage.info(f"{vocab.path}/v.txt"))}]
    from kolectra.pipeline.store.manifest import digest, fields_digest, files_digest

    manifest["digest"] = digest(manifest["files"])
    manifest["files_digest"] = files_digest(manifest["files"])
    manifest["fields_digest"] = fields_digest(manifest)
    storage.write_bytes(f"{vocab.path}/manifest.json", json.dumps(manifest).encode())
    assert _verify("--quick", str(vocab.path)).returncode == 0
    bad = _verify("--quick", str(ex.path))
    assert bad.returncode == 1 and "recorded when" in bad.stdout and str(vocab.path) in bad.stdout, bad.stdout


def test_verify_quick_on_a_local_root_hashes_every_file(tmp_path, capsys):
    store = Store(tmp_path / "root")
    art = _standin(store, "vocab", "v", files={"a.txt": b"abc"})
    (art.path / "a.txt").write_bytes(b"abd")  # the same size: only its bytes tell
    assert main(["artifacts", "verify", "--quick", str(art.path), "--out", str(tmp_path / "root")]) == 1
    assert capsys.readouterr().out.strip() == f"MISMATCH {art.path / 'a.txt'}: sha256 differs from manifest"


def test_a_local_root_lists_a_parent_in_the_bucket_rather_than_downloading_it(bucket, s3_endpoint, tmp_path):
    _, _, ex = _chain(open_store(f"{bucket}/l"))
    local = open_store(tmp_path / "root")  # as the CLI opens it: it follows parents into the bucket
    with answered(s3_endpoint) as seen:
        parent = local.require(str(ex.path), "examples")
        _standin(local, "checkpoint", "k", (parent,))
    assert not [r for r in seen if r.operation == "GetObject" and r.key == _prefix(ex) + "data/s0.bin"]
    assert _listings(seen, ex) == 1  # the stage's check; its build's reuses it


def test_a_manifest_is_one_get_and_an_empty_or_oversized_one_is_refused_in_one_line(bucket, s3_endpoint, monkeypatch):
    from kolectra.pipeline.store import remote, remote_artifacts

    corpus = _standin(open_store(f"{bucket}/m"), "corpus", "c")
    with answered(s3_endpoint) as seen:
        assert remote.load_remote(corpus.path).manifest == corpus.manifest
    assert [r.operation for r in seen] == ["GetObject"]  # no HEAD first
    mp = f"{corpus.path}/manifest.json"
    storage.write_bytes(mp, b"")  # an empty object refuses a ranged GET (HTTP 416): read as empty
    with pytest.raises(ArtifactError, match="manifest.json: not valid JSON"):
        remote.load_remote(corpus.path)
    monkeypatch.setattr(remote_artifacts, "MAX_MANIFEST", 100)  # where load_remote reads it
    storage.write_bytes(mp, b" " * 101)
    with pytest.raises(ArtifactError, match="manifest.json: larger than 100 bytes"):
        remote.load_remote(corpus.path)


def test_the_examples_index_is_one_get_and_an_absent_one_is_named_missing(bucket, s3_endpoint):
    _, _, ex = _chain(open_store(f"{bucket}/i"))
    index = _prefix(ex) + "index.json"
    with answered(s3_endpoint) as seen:
        assert open_store(f"{bucket}/i").verify(ex, quick=True) == []
    assert [r.operation for r in seen if r.key == index] == ["GetObject"]  # no HEAD first
    storage.remove(f"{ex.path}/index.json")
    with answered(s3_endpoint) as seen:
        assert open_store(f"{bucket}/i").verify(ex, quick=True) == [f"{ex.path}/index.json: missing"]
    assert [r.operation for r in seen if r.key == index] == ["GetObject"]


def test_verify_quick_says_which_objects_it_could_check_by_size_only(bucket):
    store = open_store(f"{bucket}/s")
    art = _standin(store, "vocab", "v", files={"a.txt": b"abc", "b.txt": b"de"})
    from kolectra.pipeline.store.manifest import fields_digest, files_digest

    manifest = dict(art.manifest)  # as a store that gives no checksum would have published it
    manifest["files"] = [{k: v for k, v in f.items() if k != "checksum"} if f["path"] == "a.txt" else f
                         for f in manifest["files"]]
    # its digests as such a store's would be (a checksum removed from a manifest that recorded it: test_artifacts_verify)
    manifest["files_digest"] = files_digest(manifest["files"])
    manifest["fields_digest"] = fields_digest(manifest)
    storage.write_bytes(f"{art.path}/manifest.json", json.dumps(manifest).encode())
    storage.write_bytes(f"{art.path}/a.txt", b"abd")  # the same size
    quick = _verify("--quick", str(art.path))
    assert quick.returncode == 0 and "note: 1 object(s)" in quick.stderr and "sizes were checked" in quick.stderr
    assert _verify(str(art.path)).returncode == 1  # the full check hashes it


def test_the_full_verify_passes_an_object_copied_with_a_new_store_checksum(bucket):
    # `aws s3 cp` / `sync` copy an object over 8 MB in parts: the same bytes get another ETag
    # ("md5-N"). The full verify reads every byte, yet named such a copy "rewritten after publishing"
    # without reading it; the checks that read nothing (--quick, a stage's) still name it
    import boto3
    from boto3.s3.transfer import TransferConfig

    art = _standin(open_store(f"{bucket}/old"), "corpus", "big", files={"data/big.bin": os.urandom(6 << 20)})
    name = bucket.removeprefix("s3://")
    parts = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    for rel in storage.listing(str(art.path)):
        key = f"old/corpus/{art.path.name}/{rel}"
        boto3.client("s3").copy({"Bucket": name, "Key": key}, name, "new" + key.removeprefix("old"), Config=parts)
    store = open_store(f"{bucket}/new")
    [copied] = store.list("corpus")
    copy_checksum = storage.checksum_of(storage.info(f"{copied.path}/data/big.bin"))
    [entry] = [e for e in copied.manifest["files"] if e["path"] == "data/big.bin"]
    assert copy_checksum != entry["checksum"] and copy_checksum.endswith("-2")  # two parts: a new ETag
    assert store.verify(copied) == []
    # the quick check (and a stage's) reads such an object, and only it, and passes the same bytes: a root
    # copied with `aws s3 sync` was refused by every stage, its artifacts to be rebuilt (pretraining too)
    assert store.verify(copied, quick=True) == [] and store.require(str(copied.path), "corpus").id == copied.id
    storage.write_bytes(f"{copied.path}/data/big.bin", os.urandom(6 << 20))  # other bytes: the full check says so
    assert store.verify(copied) == [f"{copied.path}/data/big.bin: sha256 differs from manifest"]
    assert [p.split(": ", 1)[1] for p in open_store(f"{bucket}/new").verify(copied, quick=True)] == \
        ["rewritten after publishing (store checksum and sha256 differ from the manifest)"]
