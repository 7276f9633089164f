"""The artifact store and corpus inputs on Google Cloud Storage: ROOT is ``gs://bucket/prefix`` on
fake-gcs-server (tests/gcs_support.py), reached through gcsfs and google-cloud-storage as a user's
bucket is. tests/test_store_s3.py runs the same protocol on S3, with more of it (the whole chain,
a pretraining run resumed from ``.work/``); what differs on GCS is tested here:

- an object's store checksum is its generation (a rewrite of the same bytes is a new one), and the
  lease is arbitrated by ``ifGenerationMatch``: publish, list, verify (full and ``--quick``), reuse,
  a killed build taken over once its lease expired, two identical builds at once;
- a lease's age is read from the store's clock without writing (GCS takes about one write a second
  to one object name; a ``.clock`` object was written beside the leases by every waiting run);
- a lease already removed is no error (google-cloud-storage raises NotFound, not FileNotFoundError);
- folder markers (``dir/`` objects: the console's "Create folder", gcsfuse) are no objects, and a
  ``**`` glob names each object once (gcsfs lists a folder's marker as a folder inside it);
- a store failure is one line: the GCS clients' own logging (a warning per credential source tried,
  gcsfs's retries) is not shown at the default verbosity.

What fake-gcs-server does not model (IAM, a DELETE's ``ifGenerationMatch``) is said in
docs/scale.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.core import conditional, storage, store_glob
from kolectra.pipeline.store.factory import open_store
from tests.gcs_support import TOKEN, gcs_endpoint, gs_bucket, iam, no_credentials, object_roles_only  # noqa: F401
from tests.s3_support import two_identical_builds_at_once

FAST_LEASE = {"KOLECTRA_LEASE_SECONDS": "3", "KOLECTRA_LEASE_POLL_SECONDS": "0.2"}
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _child(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tests.fault_child", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **FAST_LEASE, **(env or {})},
        cwd=REPO,
    )


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kolectra.pipeline.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def _put(bucket: str, key: str, data: bytes = b"") -> None:
    """An object written as Google's own client writes it (gcsfs drops a key's trailing "/")."""
    from google.cloud import storage as gcs  # noqa: PLC0415

    gcs.Client().bucket(bucket.removeprefix("gs://")).blob(key).upload_from_string(data)


def test_an_artifact_on_gcs_is_published_listed_verified_and_reused(gs_bucket, tmp_path):
    root, calls = f"{gs_bucket}/t", tmp_path / "calls"
    built = _child("toy", root, "none", "--text", "on gcs", "--calls", str(calls))
    assert built.returncode == 0, built.stderr
    path = built.stdout.strip()
    assert path.startswith(f"{root}/corpus/toy-")
    store = open_store(root)
    art = store.resolve("toy")
    assert str(art.path) == path and art.read_bytes("data/a.txt") == b"on gcs"
    # the store checksum the manifest records is the object's generation (what --quick compares)
    found = storage.listing(path)
    assert {f["path"]: f["checksum"] for f in art.manifest["files"]} == {
        k: v["generation"] for k, v in found.items() if k != "manifest.json"
    }
    listed = _cli("artifacts", "list", "--out", root)
    assert listed.returncode == 0 and art.path.name in listed.stdout, listed.stderr
    for quick in ([], ["--quick"]):
        ok = _cli("artifacts", "verify", path, *quick, "--out", root)
        assert ok.returncode == 0 and ok.stdout.startswith(f"ok {path}"), ok.stderr
    again = _child("toy", root, "none", "--text", "on gcs", "--calls", str(calls))
    assert again.returncode == 0 and again.stdout == built.stdout, again.stderr
    assert len(calls.read_text().split()) == 1  # reused, not built again
    # the same bytes written again are a new generation: --quick reads that object, its bytes decide
    storage.write_bytes(f"{path}/data/a.txt", b"on gcs")
    assert store.verify(art, quick=True) == [] and store.verify(art) == []
    storage.write_bytes(f"{path}/data/a.txt", b"on GCS")  # other bytes, the same size
    for quick in (False, True):
        assert any(f"{path}/data/a.txt" in p for p in store.verify(art, quick=quick)), quick


def test_a_killed_build_is_taken_over_once_its_lease_expires_and_leaves_nothing_behind(gs_bucket):
    root = f"{gs_bucket}/k"
    killed = _child("toy", root, "uploaded1", "--text", "killed run")
    assert killed.returncode == -9, killed.stderr
    store = open_store(root)
    assert store.list() == []
    [orphan] = storage.children(f"{root}/corpus")
    removed, _ = store.collect(dry_run=True)
    assert not any(orphan in r for r in removed)  # its lease is live: a build may be running
    time.sleep(3.2)  # its lease expires
    done = _child("toy", root, "none", "--text", "killed run")
    assert done.returncode == 0, done.stderr
    assert "expired (its builder stopped renewing it); taking the build over" in done.stderr
    art = store.resolve("toy")
    assert art.read_bytes("data/a.txt") == b"killed run" and store.verify(art) == []
    removed, kept = store.collect()  # nothing in the store: the killed build's local directory alone
    assert kept == [] and len(removed) == 1 and not storage.is_url(removed[0]), removed
    # the lease's age was read from the store's clock, nothing written for it: .locks is empty (a
    # .clock object was left there, rewritten by every run that waited on a lease)
    assert storage.children(f"{root}/.locks") == [] and storage.children(root) == ["corpus"]


def test_gc_removes_an_orphaned_prefix_and_its_expired_lease(gs_bucket):
    for point, left in (("leased", [".lease"]), ("uploaded1", ["", ".lease"])):
        root = f"{gs_bucket}/{point}"
        assert _child("toy", root, point).returncode == -9
        time.sleep(3.2)  # its lease expires
        removed, _ = open_store(root).collect()  # and the killed build's local directory, once made
        in_store = [r for r in removed if storage.is_url(r)]
        assert sorted(r[-6:] if r.endswith(".lease") else "" for r in in_store) == left, removed
        assert storage.listing(root) == {}  # nothing left: no .clock beside the lease either


def test_two_identical_builds_at_once_one_builds_the_other_joins(gs_bucket, tmp_path):
    two_identical_builds_at_once(f"{gs_bucket}/c", tmp_path, FAST_LEASE)


def test_the_lease_s_conditional_writes_and_a_lease_removed_meanwhile(gs_bucket):
    url = f"{gs_bucket}/r/.locks/corpus-abc.lease"
    first = conditional.create_exclusive(url, b"{}")
    with pytest.raises(conditional.PreconditionFailed):  # ifGenerationMatch=0: one creator
        conditional.create_exclusive(url, b"{}")
    second = conditional.create_exclusive(url, b"{}", replacing=first)
    assert second != first
    with pytest.raises(conditional.PreconditionFailed):  # replaced only while it is still that version
        conditional.create_exclusive(url, b"{}", replacing=first)
    assert conditional.remove_if(url, second) is True
    # removed meanwhile (another gc, the holder's own release): not there, so not removed; it was a
    # StoreError naming a 404, which stopped gc and a build's release of its lease
    assert conditional.remove_if(url, second) is False
    with pytest.raises(conditional.PreconditionFailed):
        conditional.create_exclusive(url, b"{}", replacing=second)


def test_folder_markers_are_no_objects_and_a_glob_names_each_object_once(gs_bucket):
    from kolectra.core.stage import StageOutput
    from tests.fault_child import toy_request

    def produce(out: Path) -> StageOutput:
        (out / "data").mkdir()
        (out / "data" / "a.txt").write_text("markers")
        return StageOutput(stats={"n": 7})

    store = open_store(f"{gs_bucket}/m")
    art = store.build(toy_request("markers"), produce)
    key = str(art.path).removeprefix(f"{gs_bucket}/")
    for marker in ("m/", "m/corpus/", "m/.locks/", f"{key}/", f"{key}/data/"):
        _put(gs_bucket, marker)
    assert sorted(storage.listing(str(art.path))) == ["data/a.txt", "manifest.json"]
    assert storage.children(f"{gs_bucket}/m/corpus") == [art.path.name]
    assert store.verify(art) == [] and store.verify(art, quick=True) == []
    assert store.scan() == ([art], [])
    assert store.collect(dry_run=True) == ([], [])
    # corpus inputs under markers: every object once (a "**" named each twice below a marked folder)
    keys = ["raw/a.jsonl.gz", "raw/sub/b.jsonl", "raw/sub/deep/c.gz", "rawer/d.gz"]
    for k in keys:
        storage.write_bytes(f"{gs_bucket}/{k}", b"x\n")
    for marker in ("raw/", "raw/sub/", "raw/sub/deep/"):
        _put(gs_bucket, marker)
    from fsspec.utils import glob_translate

    name = gs_bucket.removeprefix("gs://")
    for pattern in ("raw/**", "raw/**/*.gz", "raw/*", "raw/*/*", "raw*/**", "raw/sub/**"):
        expected = [f"gs://{name}/{k}" for k in keys if re.match(glob_translate(f"{name}/{pattern}"), f"{name}/{k}")]
        assert [u for u, _, _ in store_glob.iter_glob(f"{gs_bucket}/{pattern}")] == expected, pattern


def test_a_missing_bucket_is_one_line(gcs_endpoint):
    r = _cli("artifacts", "list", "--out", "gs://no-such-bucket-kolectra/x")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "does not exist" in r.stderr and "no-such-bucket" in r.stderr, r.stderr


def test_a_service_account_with_only_the_object_roles_opens_a_new_root(gs_bucket, gcs_endpoint):
    # roles/storage.objectAdmin on the bucket (no storage.buckets.get): the bucket check asked for the
    # bucket's metadata, and gcsfs, refused, listed the bucket instead: a new, empty one read as missing
    with iam(gcs_endpoint, object_roles_only) as front:
        env = {"STORAGE_EMULATOR_HOST": front.url}
        listed = _cli("artifacts", "list", "--out", f"{gs_bucket}/team", env=env)
        assert listed.returncode == 0, listed.stderr
        built = _child("toy", f"{gs_bucket}/team", "none", "--text", "object roles", env=env)
        assert built.returncode == 0 and built.stdout.startswith(f"{gs_bucket}/team/corpus/toy-"), built.stderr
        missing = _cli("artifacts", "list", "--out", "gs://no-such-bucket-kolectra/x", env=env)
        assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr


def test_no_credentials_are_named_as_such(gs_bucket, gcs_endpoint):
    # gcsfs, finding no credentials, asks anonymously; the bucket's 401 was shown as "HttpError: ..."
    with iam(gcs_endpoint, no_credentials) as front:
        r = _cli("artifacts", "list", "--out", f"{gs_bucket}/x", env={"STORAGE_EMULATOR_HOST": front.url})
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{gs_bucket}/x: no credentials found" in r.stderr and "GOOGLE_APPLICATION_CREDENTIALS" in r.stderr


def test_an_empty_manifest_is_a_damaged_artifact_not_a_store_failure(gs_bucket):
    # GCS answers a range of an empty object with 416, which gcsfs raises as its HttpError (no OSError,
    # as s3fs's is): a manifest read (one ranged GET) of an empty manifest.json was a StoreError, and
    # `artifacts list` of the whole root stopped on it
    from kolectra.core.stage import StageOutput
    from tests.fault_child import toy_request

    def produce(out: Path) -> StageOutput:
        (out / "a.txt").write_text("x")
        return StageOutput(stats={})

    store = open_store(f"{gs_bucket}/e")
    art = store.build(toy_request("empty"), produce)
    storage.write_bytes(f"{art.path}/manifest.json", b"")
    found, damaged = open_store(f"{gs_bucket}/e").scan()
    assert found == [] and len(damaged) == 1 and "manifest.json" in str(damaged[0]), damaged
    listed = _cli("artifacts", "list", "--out", f"{gs_bucket}/e")
    assert "manifest.json" in listed.stdout + listed.stderr and "StoreError" not in listed.stderr, listed.stderr
    assert "416" not in listed.stderr, listed.stderr


def _service_account_file(path: Path, token_uri: str) -> Path:
    """A service account's key file that names no project (a user's own credentials name none either),
    its tokens asked for at ``token_uri``; a new RSA key, made here."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "client_email": "team@p.iam.gserviceaccount.com",
                "private_key_id": "1",
                "private_key": key.decode(),
                "token_uri": token_uri,
            }
        )
    )
    return path


def test_the_lease_s_writes_need_no_project(gs_bucket, gcs_endpoint, tmp_path):
    # credentials that name no project (a user's own, from `gcloud auth application-default login`):
    # writing an object needs none, but google-cloud-storage's Client() refused to start, "Project was
    # not passed and could not be determined from the environment", so a build failed at its lease.
    # Here the client goes to the server as to GCS, with those credentials (the emulator mode has a project)
    with iam(gcs_endpoint) as front:
        env = {k: v for k, v in os.environ.items() if k not in ("STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")}
        adc = _service_account_file(tmp_path / "key.json", f"{front.url}/token")
        env.update(
            GOOGLE_APPLICATION_CREDENTIALS=str(adc),
            API_ENDPOINT_OVERRIDE=front.url,
            CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
        )
        url = f"{gs_bucket}/p/.locks/corpus-abc.lease"
        code = (
            "import sys; from kolectra.core import conditional as c; v = c.create_exclusive(sys.argv[1], b'{}'); "
            "print(v, c.remove_if(sys.argv[1], v))"
        )
        r = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr
        version, removed = r.stdout.split()
        assert version.isdigit() and removed == "True"
        assert front.authorized and front.bearers and set(front.bearers) == {f"Bearer {TOKEN}"}
