"""``kolectra artifacts gc`` (without ``--cache``) where a leftover cannot be deleted whole: a file gc may not
delete on a disk root (``chattr +i`` as root, a read-only folder otherwise), an object a bucket policy keeps.

Before: gc deleted with errors ignored (``rmtree(ignore_errors=True)``; s3fs drops the keys a bulk delete
refused): such a leftover read ``removed``, gc exited 0, and what was left of a complete build a kill left in
``.tmp`` kept its manifest (``artifacts list`` still called it a complete copy); a lock file in ``.locks`` gc
could not open ended gc with one error line, what it had removed unsaid. Now each is one line on stderr with
the bytes that went and those left, never said removed, the rest goes on, exit 2; the manifest goes first."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

from kolectra.core import storage
from kolectra.core.stage import size_text
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.fault_child import toy_request
from tests.gcs_support import gcs_endpoint, gs_bucket, iam  # noqa: F401  (fixtures)
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)
from tests.test_cache_gc_failures import _frozen


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _gc(capsys, root: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["artifacts", "gc", "--out", root, *args])
    out, err = capsys.readouterr()
    return code, out, err


def _damaged_copy_in_tmp(root: Path) -> Path:
    """A complete-looking build of toy in ``.tmp`` (the copy a kill between --force's renames left there) whose
    file was altered since: the sweep does not publish it (its hash) but deletes it; its id has no folder."""
    store = Store(root)
    art = store.build(toy_request("toy text " * 5000), lambda out: _toy(out))
    d = root / ".tmp" / f"corpus-toy-{art.id}-0badcafe"
    d.parent.mkdir(exist_ok=True)
    shutil.move(art.path, d)
    (d / "data" / "b.txt").write_text("altered")
    return d


def _toy(out: Path):
    from kolectra.core.stage import StageOutput  # noqa: PLC0415

    (out / "data").mkdir()
    (out / "data" / "a.txt").write_text("toy text " * 5000)  # 45.0 kB
    (out / "data" / "b.txt").write_text("x" * 1000)
    (out / "big.bin").write_bytes(b"x" * 100_000)
    return StageOutput(stats={})


def test_a_leftover_not_removed_whole_on_a_disk_root_is_said_and_keeps_no_manifest(tmp_path, capsys):
    root = tmp_path / "root"
    stuck = _damaged_copy_in_tmp(root)
    run = root / ".work" / "corpus-fedcba9876543210"  # a run holding nothing to resume from: dead
    (run / "out").mkdir(parents=True)
    (run / "request.json").write_text(json.dumps({"id": "fedcba9876543210", "kind": "corpus", "name": "x"}))
    lock = root / ".locks" / "corpus-1111111111111111.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text("")
    main(["artifacts", "list", "--out", str(root)])
    assert f"its complete copy is in {stuck}" in capsys.readouterr().err  # as a kill left it: said complete
    freed = size_text(100_000 + (stuck / "manifest.json").stat().st_size)  # big.bin and the manifest; data/ left
    with _frozen(stuck / "data"), _frozen(lock):
        code, out, err = _gc(capsys, str(root))
    assert code == 2, (out, err)  # a permission: the operating system's exit (docs/artifacts.md)
    assert f"removed {run}" in out and not run.exists(), out
    assert f"removed {stuck}" not in out and f"removed {lock}" not in out, out
    line = next(ln for ln in err.splitlines() if ln.startswith(f"could not remove {stuck}: "))
    assert str(stuck / "data") in line and f"({freed} freed, 45.0 kB left)" in line, line
    assert f"could not remove {lock}: " in err, err
    assert "1 removed, 0 interrupted run(s) kept, 2 could not be removed (above)" in err, err
    # what is left holds no manifest: nothing calls it a complete copy any more
    assert (stuck / "data" / "a.txt").is_file() and not (stuck / "manifest.json").exists()
    main(["artifacts", "list", "--out", str(root)])
    assert str(stuck) not in capsys.readouterr().err
    # mended, the same command removes it
    code, out, err = _gc(capsys, str(root))
    assert code == 0 and f"removed {stuck}" in out and f"removed {lock}" in out and not stuck.exists(), (out, err)


def test_an_orphaned_prefix_the_bucket_refuses_to_delete_is_said_and_the_rest_removed(bucket, capsys):
    root = f"{bucket}/g"
    orphans = [f"{root}/corpus/toy-{c * 16}" for c in "ab"]  # no manifest, no lease: a killed build's objects
    for prefix in orphans:
        storage.write_bytes(f"{prefix}/data/a.txt", b"x" * 1000)
        storage.write_bytes(f"{prefix}/data/b.txt", b"x" * 2000)
    name = bucket.removeprefix("s3://")
    fs, _ = storage.filesystem(bucket)
    fs.call_s3("put_bucket_policy", Bucket=name, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
         "Resource": f"arn:aws:s3:::{name}/g/corpus/toy-{'a' * 16}/data/b.txt"}]}))
    try:
        code, out, err = _gc(capsys, root)
    finally:
        fs.call_s3("delete_bucket_policy", Bucket=name)
    kept, gone = orphans
    assert code == 2, (out, err)
    assert f"removed {gone}" in out and storage.listing(gone) == {}, out
    assert f"removed {kept}" not in out, out
    line = next(ln for ln in err.splitlines() if ln.startswith(f"could not remove {kept}: "))
    assert f"{kept}/data/b.txt first" in line and "(1.0 kB freed, 2.0 kB left)" in line, line
    assert "1 removed, 0 interrupted run(s) kept, 1 could not be removed (above)" in err, err
    code, out, err = _gc(capsys, root)  # the policy lifted: removed
    assert code == 0 and f"removed {kept}" in out and storage.listing(kept) == {}, (out, err)


def test_an_orphaned_prefix_gcs_refuses_to_delete_is_said_and_gc_goes_on(gs_bucket, monkeypatch, capsys):  # noqa: F811
    """gcsfs raises the first refused delete: before, gc ended there in one error line, what it had removed
    unsaid (fake-gcs-server behind a front that answers GCS's 403 to one object's DELETE: the IAM it lacks)."""
    root = f"{gs_bucket}/g"
    orphans = [f"{root}/corpus/toy-{c * 16}" for c in "ab"]
    for prefix in orphans:
        storage.write_bytes(f"{prefix}/data/a.txt", b"x" * 1000)
        storage.write_bytes(f"{prefix}/data/b.txt", b"x" * 2000)
    refused = (403, "team@p.iam.gserviceaccount.com does not have storage.objects.delete access to the Google "
                    "Cloud Storage object. Permission 'storage.objects.delete' denied on resource (or it may not exist).")

    def refuses(method: str, path: str):
        return refused if method == "DELETE" and f"toy-{'a' * 16}/data/b.txt" in unquote(path) else None

    with iam(os.environ["STORAGE_EMULATOR_HOST"], refuses) as front:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", front.url)
        storage.reset()
        try:
            code, out, err = _gc(capsys, root)
        finally:
            monkeypatch.undo()
            storage.reset()
    kept, gone = orphans
    assert code == 2 and "error:" not in err, (out, err)
    assert f"removed {gone}" in out and storage.listing(gone) == {}, out
    line = next(ln for ln in err.splitlines() if ln.startswith(f"could not remove {kept}: "))
    assert line.count(kept) == 1 and "permission refused by the store" in line, line
    assert "(1.0 kB freed, 2.0 kB left)" in line, line
    assert "1 removed, 0 interrupted run(s) kept, 1 could not be removed (above)" in err, err
