"""A run reads each file of its input artifacts once to hash it (core/filehash.py), on a local root
and on a bucket's cached copy (each rank of a data-parallel run: the two-rank stage test of
tests/test_model_ddp.py counts it); a file changed after that read is still refused before a row of
it is trained on; an old manifest's notice comes once."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kolectra.core import filehash
from kolectra.model.shard_guard import ExamplesError
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import ArtifactError, Store
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.manifest import MANIFEST, write_json
from tests.model_support import small_chain
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)
from tests.test_model_data import _rewrite_in_place

SETS = ["train.steps=2", "train.batch_size=8", "train.warmup_steps=1", "train.cpu_threads=1"]


def _settled(*dirs: Path) -> None:
    """Every file under ``dirs`` made unknown to this process (its change time moved, so no digest
    remembered for it still applies), then left until it changed over filehash.SETTLED_NS ago: only
    then may a digest stand for its bytes (a younger file is read at every check, as before)."""
    files = [p for d in dirs for p in Path(d).rglob("*") if p.is_file()]
    for p in files:
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    newest = max(p.stat().st_ctime_ns for p in files)
    time.sleep(max(0.0, (newest + filehash.SETTLED_NS - time.time_ns()) / 1e9 + 0.05))


def _bytes(art) -> int:
    return sum(f["bytes"] for f in art.manifest["files"])


def _read() -> int:
    return filehash.hashed()["bytes"]


@pytest.fixture()
def chain(tmp_path):
    store = Store(tmp_path / "root")
    corpus, vocab, ex = small_chain(store)
    _settled(store.root)
    return store, vocab, ex


def test_pretrain_on_a_local_root_reads_its_examples_once(chain):
    """The check before the build, the build's own check of its parents and the loader's pin read the
    examples three times before (and the vocab twice through the first two)."""
    store, vocab, ex = chain
    start = _read()
    ckpt = stages.pretrain(store, str(ex.path), preset="tiny", sets=SETS)
    assert _read() - start == _bytes(ex) + _bytes(vocab) + _bytes(ckpt)  # the checkpoint: hashed when sealed
    start = _read()
    assert store.require(ex) == ex and store.verify(ex) == [] and _read() == start  # unchanged: not read again


def test_a_shard_changed_after_it_was_hashed_is_still_refused(chain, monkeypatch):
    """Between the store's check and the loader's pin (the trainer fetching its shards), a shard is
    rewritten in place, same size and valid ids, its modification time put back: the pin reads it again
    (its change time moved) and refuses it before training on it; the store's next check names it too."""
    store, vocab, ex = chain
    store.require(ex)
    shard = sorted((ex.path / "data").iterdir())[0]
    real = Store.local

    def rewritten_after_the_check(self, art, only=None):
        out = real(self, art, only)
        if art.kind == "examples" and only is not None and only("data/" + shard.name):
            st = shard.stat()
            _rewrite_in_place(shard)
            os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
        return out

    monkeypatch.setattr(Store, "local", rewritten_after_the_check)
    with pytest.raises(ExamplesError, match=rf"{shard.name}: sha256 differs from the artifact's manifest"):
        stages.pretrain(store, str(ex.path), preset="tiny", sets=SETS)
    assert store.list("checkpoint") == []
    with pytest.raises(ArtifactError, match=rf"{shard.name}: sha256 differs from manifest"):
        store.require(ex)


def test_a_file_younger_than_its_change_time_can_vouch_for_is_read_every_time(tmp_path):
    f = tmp_path / "young.bin"
    f.write_bytes(b"x" * 1000)
    start = _read()
    assert filehash.sha256(f) == filehash.sha256(f)
    assert _read() - start == 2000


def test_pretrain_from_a_bucket_reads_its_cached_copy_once(bucket, tmp_path, monkeypatch):
    """A second run on a machine whose cache holds the examples: the cached copy is hashed once (it was
    read by the fetch's check, then by the loader's pin, before)."""
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    store = open_store(f"{bucket}/r")
    _, vocab, ex = small_chain(store)
    stages.pretrain(store, ex.id, preset="tiny", sets=SETS)  # fetches the copies: each hashed as it arrives
    _settled(tmp_path / "cache" / "artifacts")
    start = _read()
    ckpt = stages.pretrain(store, ex.id, preset="tiny", sets=SETS, force=True)
    # what the trainer fetches: index.json, stats.json (read_inputs' segment count) and the shards; a real
    # examples artifact's README.md stays behind (this one has none)
    # beside the copy: its reader lock (<copy>.lock, pipeline/store/copies.py), not a fetched file
    [copy] = [p for p in (tmp_path / "cache" / "artifacts" / "examples").iterdir() if p.is_dir()]
    fetched = sum(p.stat().st_size for p in copy.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert 0 < fetched <= _bytes(ex) and _read() - start == fetched + _bytes(vocab) + _bytes(ckpt)


def test_a_manifest_without_fields_digest_is_mentioned_once_and_said_harmless(chain, capsys):
    store, vocab, ex = chain
    manifest = json.loads((ex.path / MANIFEST).read_text())
    del manifest["fields_digest"]
    write_json(ex.path / MANIFEST, manifest)
    for _ in range(3):
        assert store.verify(ex.path) == []
    store.require(ex.path)
    err = capsys.readouterr().err
    assert err.count("written before manifests covered their own fields") == 1, err
    assert "Harmless, nothing to do" in err
