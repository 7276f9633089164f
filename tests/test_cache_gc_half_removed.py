"""A copy ``kolectra artifacts gc --cache`` could not delete whole is never read as complete.

A build removal deletes the manifest first (pipeline/store/removal.py) because a half-deleted build with its
manifest would read as whole. A copy in ``$KOLECTRA_CACHE`` is pruned without that (pipeline/store/copies.py):
what a failure part way leaves keeps its ``manifest.json``. That file vouches for nothing: ``RemoteStore.local``
checks every file it hands out against the store's manifest (size and sha256) at every read and downloads again
what is missing or differs; a fine-tuning's tokenised split is reused only with its ``.sha256`` matching.

The failures are real: a folder nothing may delete from (``chattr +i`` as root, whom permissions do not stop;
mode 0555 otherwise). Readers are real processes, as a stage is."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.finetune.files import FinetuneError
from kolectra.pipeline.cli import main
from kolectra.pipeline.store import copies
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

DAY = 86400
REPO = Path(__file__).resolve().parents[1]
# a stage's read: the whole copy, or (a fine-tuning's) the discriminator alone; prints each file's sha256
READER = ("import hashlib, json, sys\n"
          "from kolectra.pipeline.store.factory import open_store\n"
          "store = open_store(sys.argv[1])\n"
          "only = (lambda f: f.startswith('hf/discriminator/')) if sys.argv[3] == 'hf' else None\n"
          "d = store.local(store.resolve(sys.argv[2]), only)\n"
          "print(json.dumps({'copy': str(d), 'files': {str(p.relative_to(d)): hashlib.sha256(p.read_bytes())"
          ".hexdigest() for p in sorted(d.rglob('*')) if p.is_file() and p.name != 'manifest.json'}}))\n")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _build(store, files: dict[str, bytes]):
    def produce(out):
        for rel, data in files.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
        return StageOutput(stats={})
    return store.build(Request(kind="corpus", name="half", stage_version=1, config={"n": 1}), produce)


def _read(root: str, art, what: str = "all") -> tuple[int, dict, str]:
    """A real process reading ``art``'s copy: its exit, what it read (copy, file -> sha256), its stderr."""
    p = subprocess.run([sys.executable, "-c", READER, root, str(art.path), what], capture_output=True, text=True,
                       cwd=REPO, env=os.environ, timeout=120)
    return p.returncode, (json.loads(p.stdout) if p.returncode == 0 else {}), p.stderr


@contextlib.contextmanager
def _undeletable_from(folder: Path):
    """Nothing in ``folder`` may be deleted (its subfolders' contents may): another user's read-only folder."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
            pytest.skip("root, and no chattr here (or a file system without it) to make a folder undeletable")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        return
    mode = folder.stat().st_mode
    folder.chmod(0o555)
    try:
        yield
    finally:
        folder.chmod(mode)


def _aged(copy: Path, days: float) -> None:
    then = time.time() - days * DAY
    for p in (copy, copy / "manifest.json", copies.lock_of(copy)):
        if p.exists():
            os.utime(p, (then, then))


def _gc(capsys, root: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["artifacts", "gc", "--cache", "--older-than", "7", "--out", root])
    out, err = capsys.readouterr()
    return code, out, err


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_copy_gc_left_half_deleted_with_its_manifest_is_downloaded_again_whole(bucket, capsys):
    root = f"{bucket}/h"
    files = {"stats.json": b'{"records_in": 1}', "shard-0.bin": os.urandom(100_000),
             "hf/discriminator/model.bin": os.urandom(100_000), "hf/discriminator/config.json": b'{"a": 1}'}
    art = _build(open_store(root), files)
    code, first, err = _read(root, art)
    assert code == 0, err
    copy = Path(first["copy"])
    assert first["files"] == {rel: _sha(b) for rel, b in files.items()}
    _aged(copy, 30)
    with _undeletable_from(copy):  # its top entries stay; hf/discriminator/ is deleted, hf/ itself cannot be
        code, out, err = _gc(capsys, root)
        assert code == 2 and f"could not remove {copy}: " in err, (out, err)
        assert (copy / "manifest.json").is_file() and (copy / "shard-0.bin").is_file()  # reads "complete"
        assert (copy / "hf").is_dir() and not (copy / "hf" / "discriminator").exists()
        # a fine-tuning reads the discriminator of the half-deleted copy: downloaded again, not taken as there
        code, read, err = _read(root, art, "hf")
        assert code == 0, err
        assert Path(read["copy"]) == copy
        for rel in ("hf/discriminator/model.bin", "hf/discriminator/config.json"):
            assert read["files"][rel] == _sha(files[rel]) and (copy / rel).read_bytes() == files[rel]
    # a file of the copy left damaged (a kill in a write; here cut short) is found by its sha256, not its name
    (copy / "shard-0.bin").write_bytes(files["shard-0.bin"][:10])
    (copy / "hf" / "discriminator" / "model.bin").unlink()
    code, read, err = _read(root, art)
    assert code == 0, err
    assert read["files"] == {rel: _sha(b) for rel, b in files.items()}


def test_a_copy_whose_missing_files_cannot_be_written_again_is_refused_not_read(bucket, capsys):
    """Left half deleted in a folder still read-only: the read that needs a file gone fails; it reads nothing."""
    root = f"{bucket}/r"
    files = {"stats.json": b'{"records_in": 1}', "shard-0.bin": os.urandom(50_000), "hf/model.bin": b"m" * 50_000}
    art = _build(open_store(root), files)
    code, first, err = _read(root, art)
    assert code == 0, err
    copy = Path(first["copy"])
    _aged(copy, 30)
    with _undeletable_from(copy):  # gc deletes hf/'s file alone: the manifest and shard stay
        code, out, err = _gc(capsys, root)
        assert code == 2 and f"could not remove {copy}: " in err, (out, err)
        assert (copy / "manifest.json").is_file() and (copy / "shard-0.bin").is_file()
        assert not (copy / "hf" / "model.bin").exists()
        with _undeletable_from(copy / "hf"):  # and hf/ is read-only too: its file cannot come back
            code, read, err = _read(root, art)
        assert code != 0 and read == {}, (read, err)
        assert not (copy / "hf" / "model.bin").exists()
    code, read, err = _read(root, art)  # mended: read whole
    assert code == 0 and read["files"] == {rel: _sha(b) for rel, b in files.items()}, err


@contextlib.contextmanager
def _undeletable(path: Path):
    """File ``path`` that nothing may delete, its folder still writable: only root can make one (chattr +i)."""
    if os.geteuid() != 0 or shutil.which("chattr") is None or \
            subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("one undeletable file in a writable folder needs root and chattr")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("left", ["arrow", "sha256"])
def test_a_tokenised_split_gc_left_half_deleted_is_tokenised_again_not_reused(tmp_path, capsys, left):
    """gc deletes a split's ``KEY.arrow`` and ``KEY.arrow.sha256`` one by one: either may be what is left. Reused,
    the split is checked against its checksum: neither alone is taken (refused while it cannot be replaced)."""
    from datasets import Dataset  # noqa: PLC0415 - the real library, as fine-tuning uses it

    from kolectra.finetune import features  # noqa: PLC0415

    folder = tmp_path / "cache" / "roots" / "0123456789abcdef" / ".cache" / "finetune"
    ds = Dataset.from_dict({"text": ["가나다", "라마", "바"]})

    def encode(batch, idx):
        return {"input_ids": [[1, *[ord(c) for c in t], 2] for t in batch["text"]]}

    first = features.tokenize(ds, encode, desc="t", settings={"v": 1}, cache_dir=folder)["input_ids"]
    arrow = next(folder.glob("*.arrow"))
    stamp = arrow.with_name(arrow.name + ".sha256")
    then = time.time() - 30 * DAY
    for p in (arrow, stamp):
        os.utime(p, (then, then))
    kept = arrow if left == "arrow" else stamp
    with _undeletable(kept):
        code, out, err = _gc(capsys, str(tmp_path / "root"))
        assert code == 2 and f"could not remove {kept}: " in err, (out, err)
        assert kept.exists() and not ({arrow, stamp} - {kept}).pop().exists()
        # it would have to delete what is left first: refused in one line naming the file, not read
        with pytest.raises(FinetuneError, match=rf"t: the cached tokenised rows must be made again, but "
                                                rf"{re.escape(str(kept))} cannot be deleted \(Operation not permitted\)"):
            features.tokenize(ds, encode, desc="t", settings={"v": 1}, cache_dir=folder)
    again = features.tokenize(ds, encode, desc="t", settings={"v": 1}, cache_dir=folder)["input_ids"]
    assert again == first
    assert stamp.read_text().strip() == hashlib.sha256(arrow.read_bytes()).hexdigest()
