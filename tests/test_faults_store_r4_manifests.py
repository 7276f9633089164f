"""Fault injection, round 4, the manifest (moved as they were from tests/test_faults_store_r4.py), on moto's
S3 server (tests/s3_support.py) and local roots:

- a manifest PUT whose reply was lost and was retried (412) is this run's publish, not another run's;
  another run's bytes are still said, and a failed read back says whose it is cannot be told;
- a manifest's own fields are covered by a digest (an edit is named by verify, through a child too);
  a manifest is read within a bound (a huge file or a FIFO is refused, not read whole or waited on).
"""

from __future__ import annotations

import json
import os

import pytest

from kolectra.core import conditional, storage
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.manifest import MANIFEST
from tests.faults_store_r4_support import _own_cache, _toy_request  # noqa: F401  (the autouse fixture)
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


# ---- a manifest whose reply was lost ----------------------------------------------------------------
def _manifest_put_twice(monkeypatch, before=None):
    """``conditional.create_exclusive`` as the store sees a manifest PUT whose reply was lost: botocore/s3fs
    send the same conditional PUT again, and the store refuses it (412: the first one landed). ``before``:
    what another run publishes there first (its own bytes), so that this run's PUT itself meets 412."""
    put = conditional.create_exclusive

    def lossy(location, data, replacing=None):
        if not location.endswith(f"/{MANIFEST}"):
            return put(location, data, replacing=replacing)  # the lease's writes go through as they are
        if before is not None:
            put(location, before(data), replacing=replacing)
        put(location, data, replacing=replacing)  # lands; its reply never comes back
        return put(location, data, replacing=replacing)  # the retry: 412

    monkeypatch.setattr(conditional, "create_exclusive", lossy)


def test_a_manifest_whose_reply_was_lost_and_retried_is_this_runs_publish(bucket, monkeypatch, capsys):
    """Before: '[kolectra] corpus: another run published s3://... first; using it' on a run's own manifest
    (the retry of its landed PUT met 412): a user looked for a concurrent run that never was."""
    store = open_store(f"{bucket}/m")
    request, produce = _toy_request()
    _manifest_put_twice(monkeypatch)
    art = store.build(request, produce)
    assert "another run" not in capsys.readouterr().err
    assert store.verify(art) == [] and art.read_bytes("data/a.txt") == b"x"


def test_a_manifest_another_run_published_first_is_still_said(bucket, monkeypatch, capsys):
    """Only bytes other than this run's are another run's: that line is kept, and its manifest is used."""
    from kolectra.pipeline.store.manifest import fields_digest

    def theirs(data: bytes) -> bytes:
        manifest = json.loads(data)
        manifest["provenance"]["host"] = "another-machine"
        manifest["fields_digest"] = fields_digest(manifest)
        return (json.dumps(manifest, indent=2) + "\n").encode()

    store = open_store(f"{bucket}/o")
    request, produce = _toy_request()
    _manifest_put_twice(monkeypatch, before=theirs)
    art = store.build(request, produce)
    assert f"another run published {art.path} first; using it" in capsys.readouterr().err
    assert art.manifest["provenance"]["host"] == "another-machine" and store.verify(art) == []


def test_a_manifest_whose_read_back_fails_after_a_412_is_not_said_to_be_another_runs(bucket, monkeypatch, capsys):
    """The 412 on the retry of this run's own landed PUT, then the read back failing (a blip): the line said
    'another run published ... first', which may be false (the manifest is most likely this run's); now it says
    whose it is cannot be told."""
    store = open_store(f"{bucket}/u")
    request, produce = _toy_request()
    _manifest_put_twice(monkeypatch)
    read, failed = storage.read_bytes, []

    def blip(location, *args, **kwargs):
        if location.endswith(f"/{MANIFEST}") and not failed:
            failed.append(location)
            raise OSError("connection reset")
        return read(location, *args, **kwargs)
    monkeypatch.setattr(storage, "read_bytes", blip)
    art = store.build(request, produce)
    err = capsys.readouterr().err
    assert failed and "another run published" not in err, err
    assert f"a manifest is in {art.path} already and could not be read back" in err, err
    assert store.verify(art) == [] and art.read_bytes("data/a.txt") == b"x"


# ---- a manifest's own fields are covered by a digest; a manifest is read within a bound --------------
def _local_pair(tmp_path):
    """A local root with a toy parent and a child built from it."""
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store.artifacts import Store
    from kolectra.pipeline.store.request import Request

    store = Store(tmp_path / "root")
    request, produce = _toy_request()
    parent = store.build(request, produce)

    def child_produce(out):
        (out / "b.txt").write_text("child")
        return StageOutput(stats={"n": 2})

    child = store.build(Request(kind="vocab", name="kid", stage_version=1, config={"size": 8}, parents=(parent,)),
                        child_produce)
    return store, parent, child


@pytest.mark.parametrize("field, value", [("config", {"text": "forged"}), ("stats", {"n": 999}),
                                          ("provenance", {"host": "forged"}),
                                          ("parents", ["0123456789abcdef"])])
def test_an_edit_to_a_manifests_own_fields_is_named_by_verify(tmp_path, field, value):
    from kolectra.pipeline.store.manifest import write_json

    store, parent, _ = _local_pair(tmp_path)
    manifest = json.loads((parent.path / MANIFEST).read_text())
    manifest[field] = value
    write_json(parent.path / MANIFEST, manifest)
    problems = store.verify(store.resolve(parent.id))
    assert any("fields" in p and "edited after publishing" in p for p in problems), problems


def test_a_parents_fields_rewritten_consistently_are_named_through_its_child(tmp_path):
    """Whoever edits a parent's config and recomputes its fields_digest passes the parent's own check;
    its children recorded the digest of the fields they were built from."""
    from kolectra.pipeline.store.manifest import fields_digest, write_json

    store, parent, child = _local_pair(tmp_path)
    assert child.manifest["parent_refs"][0]["fields_digest"] == parent.manifest["fields_digest"]
    manifest = json.loads((parent.path / MANIFEST).read_text())
    manifest["config"] = {"text": "forged"}
    manifest["fields_digest"] = fields_digest(manifest)
    write_json(parent.path / MANIFEST, manifest)
    assert store.verify(store.resolve(parent.id)) == []
    problems = store.verify(store.resolve(child.id))
    assert any("fields" in p and "edited since" in p for p in problems), problems


def test_a_manifest_written_before_fields_digests_still_verifies_with_a_notice(tmp_path, capsys):
    from kolectra.pipeline.store.manifest import write_json

    store, parent, _ = _local_pair(tmp_path)
    manifest = json.loads((parent.path / MANIFEST).read_text())
    del manifest["fields_digest"]
    write_json(parent.path / MANIFEST, manifest)
    assert store.verify(store.resolve(parent.id)) == []
    assert "written before manifests covered their own fields" in capsys.readouterr().err


def test_a_manifest_on_the_store_with_edited_fields_is_named(bucket):
    store = open_store(f"{bucket}/f")
    request, produce = _toy_request()
    art = store.build(request, produce)
    manifest = json.loads(storage.read_bytes(f"{art.path}/{MANIFEST}"))
    manifest["stats"] = {"n": 12345}
    storage.write_bytes(f"{art.path}/{MANIFEST}", json.dumps(manifest).encode())
    problems = store.verify(store.resolve(art.id))
    assert any("edited after publishing" in p for p in problems), problems


@pytest.mark.parametrize("what", ["huge", "fifo"])
def test_a_manifest_is_read_within_a_bound(tmp_path, what):
    """A manifest replaced by a file over the bound (sparse) or a FIFO is refused, not read whole or waited on."""
    import threading

    from kolectra.pipeline.store import manifest as manifests
    from kolectra.pipeline.store.manifest import verify_dir

    bound = getattr(manifests, "MAX_MANIFEST", 64 << 20)

    store, parent, _ = _local_pair(tmp_path)
    mp = parent.path / MANIFEST
    mp.unlink()
    if what == "huge":
        with open(mp, "wb") as f:
            f.truncate(bound + 1)
    else:
        os.mkfifo(mp)
    found: list = []
    reader = threading.Thread(target=lambda: found.extend(verify_dir(parent.path)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "verify waits on the manifest"
    [problem] = found
    assert str(mp) in problem and (f"larger than {bound:,} bytes" in problem if what == "huge"
                                   else "not a regular file" in problem), problem
