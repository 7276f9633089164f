"""A reader of a store artifact that a ``--force`` rebuild is replacing: on a bucket root the rebuild writes its
objects over the published copy's under the same keys, the old manifest standing until its own lands last
(docs/artifacts.md: ``--force`` rebuilds it in place). A reader that took the old manifest may then meet new
objects: it must fail naming the object and the likely cause, never use a mix of the two builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.core.storage import StoreError
from kolectra.pipeline.store.artifacts import ArtifactError
from kolectra.pipeline.store.factory import open_store
from tests.fault_child import toy_request
from tests.s3_support import bucket, free_port, s3_endpoint  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _two_files(out: Path) -> StageOutput:
    (out / "data").mkdir()
    (out / "data" / "a.txt").write_text("first build, a")
    (out / "data" / "b.txt").write_text("first build, b")
    return StageOutput(stats={"n": 2})


def test_a_reader_of_a_copy_half_overwritten_by_a_force_rebuild_fails_naming_the_object(bucket, tmp_path):
    store = open_store(f"{bucket}/r")
    art = store.build(toy_request("same"), _two_files)
    taken = store.require(art.id, "corpus")  # the reader resolved the copy: its manifest is the old one
    # the --force rebuild has uploaded its first object (other bytes, the same size), not yet its manifest
    storage.write_bytes(f"{art.path}/data/a.txt", b"second build a")
    with pytest.raises(StoreError, match=r"data/a\.txt: sha256 differs from the manifest.*--force rebuild"):
        store.local(taken)
    # nothing of the mix is left to be read as the copy: no manifest in the local copy, a.txt not there
    (local,) = (d for d in (tmp_path / "cache" / "artifacts" / "corpus").iterdir() if d.is_dir())  # (its .lock beside)
    assert not (local / "manifest.json").exists() and not (local / "data" / "a.txt").exists()


def test_a_stage_resolving_a_copy_a_force_rebuild_is_overwriting_is_refused_naming_that_cause(bucket):
    """The stage's own check (one listing) before it reads: an object of other bytes under the copy's key was
    refused with 'restore its files ..., or rebuild it (its command with --force)', while one was running."""
    store = open_store(f"{bucket}/r")
    art = store.build(toy_request("same"), _two_files)
    storage.write_bytes(f"{art.path}/data/b.txt", b"second build b")
    with pytest.raises(ArtifactError, match=r"data/b\.txt: rewritten after publishing.*a --force rebuild replacing "
                                            r"it right now reads the same: then run again once it has published"):
        store.require(art.id, "corpus")
