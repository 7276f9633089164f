"""``kolectra artifacts gc --cache``: this machine's copies of artifacts read from a bucket (moto's S3 server,
tests/s3_support.py), fine-tuning's tokenised splits and lock files, pruned by last use, never while a
kolectra process reads them. Before, nothing in kolectra removed any of them: a rebuilt parent's old copy,
an examples artifact's shards (tens of GB), stayed on disk until deleted by hand, and deleting by hand could
pull a copy from under a running pretraining.

Readers are real processes (``python -c``, the store's ``local``), as a stage reading a copy for hours is."""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store import copies
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

DAY = 86400
READER = ("import sys\n"
          "from kolectra.pipeline.store.factory import open_store\n"
          "store = open_store(sys.argv[1])\n"
          "print(store.local(store.resolve(sys.argv[2])), flush=True)\n"
          "sys.stdin.read()  # reading the copy until told to end\n")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _build(store, name: str, data: bytes):
    def produce(out):
        (out / "stats.json").write_text('{"records_in": 1}')
        (out / "shard-0.bin").write_bytes(data)
        return StageOutput(stats={})
    return store.build(Request(kind="corpus", name=name, stage_version=1, config={"n": name}), produce)


class Reader:
    """A kolectra process that read ``art``'s copy and goes on reading it until :meth:`end`."""

    def __init__(self, root: str, art):
        self.proc = subprocess.Popen([sys.executable, "-c", READER, root, str(art.path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
        line = self.proc.stdout.readline().strip()
        assert line, "the reader ended before reading its copy"
        self.copy = Path(line)

    def end(self) -> None:
        self.proc.communicate("", timeout=60)
        assert self.proc.returncode == 0


def _read_once(root: str, art) -> Path:
    reader = Reader(root, art)
    reader.end()
    return reader.copy


def _age(paths, days: float) -> None:
    """Last used ``days`` ago (what a reader's times would say then)."""
    then = time.time() - days * DAY
    for p in paths:
        os.utime(p, (then, then))


def _aged_copy(copy: Path, days: float) -> None:
    _age([p for p in (copy, copy / "manifest.json", copies.lock_of(copy)) if p.exists()], days)


def _gc(capsys, *args: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["artifacts", "gc", *args]) == 0
    return capsys.readouterr()


def test_a_copy_a_running_process_reads_is_kept_and_an_unused_one_removed_then_downloaded_again(bucket, capsys):
    root = f"{bucket}/c"
    store = open_store(root)
    data = {n: os.urandom(200_000) for n in ("held", "old", "recent")}
    arts = {n: _build(store, n, d) for n, d in data.items()}
    old = _read_once(root, arts["old"])
    recent = _read_once(root, arts["recent"])
    reader = Reader(root, arts["held"])
    try:
        _aged_copy(reader.copy, 30)  # read for 30 days so far, and still reading
        _aged_copy(old, 30)
        _aged_copy(recent, 2)
        out, err = _gc(capsys, "--cache", "--older-than", "7", "--out", root)
        assert reader.copy.is_dir() and (reader.copy / "shard-0.bin").read_bytes() == data["held"]
        assert f"kept {reader.copy}: in use by a running kolectra process" in out, out
        assert not old.exists() and not copies.lock_of(old).exists()
        assert f"removed {old} (20" in out, out
        assert recent.is_dir()
        assert "2 removed" not in err and "1 removed (20" in err and "1 kept in use" in err, err
        assert "published" not in out
    finally:
        reader.end()
    # the store keeps the artifact: verified whole, and the next read downloads the same bytes again
    assert store.verify(arts["old"]) == []
    again = _read_once(root, arts["old"])
    assert again == old and (again / "shard-0.bin").read_bytes() == data["old"]
    # its reader gone, the held copy goes with the next gc (it was last used just now: --older-than 0)
    out, _ = _gc(capsys, "--cache", "--out", root)
    assert f"removed {reader.copy} (" in out and not reader.copy.exists()
    assert store.verify(arts["held"]) == []


def test_a_read_that_starts_while_the_pruner_deletes_its_copy_waits_then_downloads_it_whole(bucket):
    """The pruner holds the lock while it deletes; a reader starting then waits on the lock file the pruner
    unlinks, takes a fresh one and downloads again: it never finds half a copy."""
    root = f"{bucket}/r"
    data = os.urandom(100_000)
    art = _build(open_store(root), "one", data)
    copy = _read_once(root, art)
    with copies._claimed(copy, dry_run=False) as free:
        assert free
        shutil.rmtree(copy)
        (copy / "shard-0.bin").parent.mkdir()
        (copy / "shard-0.bin").write_bytes(b"half")  # as far as the pruner got
        reader = subprocess.Popen([sys.executable, "-c", READER, root, str(art.path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
        assert select.select([reader.stdout], [], [], 5)[0] == []  # waiting: nothing read, nothing said
        assert (copy / "shard-0.bin").read_bytes() == b"half"  # not read meanwhile
        shutil.rmtree(copy)
    assert reader.stdout.readline().strip() == str(copy)
    reader.communicate("", timeout=60)
    assert reader.returncode == 0 and (copy / "shard-0.bin").read_bytes() == data
    assert copies.lock_of(copy).is_file()


def test_a_dry_run_removes_nothing_and_says_what_would_go(bucket, capsys):
    root = f"{bucket}/d"
    store = open_store(root)
    copy = _read_once(root, _build(store, "one", b"x" * 50_000))
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in copy.rglob("*") if p.is_file()}
    lock = copies.lock_of(copy)
    lock.unlink(missing_ok=True)  # a copy made before the reader lock existed: a dry run creates none either
    out, err = _gc(capsys, "--cache", "--dry-run", "--out", root)
    assert f"would remove {copy} (5" in out, out
    assert "would be freed" in err, err
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in copy.rglob("*") if p.is_file()} == before
    assert not lock.exists()
    out, _ = _gc(capsys, "--cache", "--out", root)
    assert f"removed {copy} (5" in out and not copy.exists()


def test_fine_tuning_caches_and_unheld_lock_files_are_pruned_by_last_use(tmp_path, capsys):
    cache = tmp_path / "cache"
    disk_root = tmp_path / "root"
    folders = [cache / "roots" / "0123456789abcdef" / ".cache" / "finetune", disk_root / ".cache" / "finetune"]
    for f in folders:
        f.mkdir(parents=True)
        for key, days in (("stale", 30), ("fresh", 30)):
            (f / f"{key}.arrow").write_bytes(b"a" * 1000)
            (f / f"{key}.arrow.sha256").write_text("0" * 64 + "\n")
            _age([f / f"{key}.arrow", f / f"{key}.arrow.sha256"], days)
        _age([f / "fresh.arrow.sha256"], 1)  # reused yesterday (finetune/features.py touches its checksum file)
    in_use = cache / "roots" / "fedcba9876543210" / ".cache" / "finetune"
    in_use.mkdir(parents=True)
    (in_use / "k.arrow").write_bytes(b"b" * 10)
    _age([in_use / "k.arrow"], 30)
    locks = cache / ".locks"
    locks.mkdir()
    (locks / "corpus-0123456789abcdef.lock").write_text("{}")
    (locks / "vocab-0123456789abcdef.lock").write_text("{}")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom pathlib import Path\nfrom kolectra.pipeline.store import copies, "
         "workspace\nfd = workspace.try_flock(Path(sys.argv[1]), wait=False)\ncopies.hold(Path(sys.argv[2]))\n"
         "print('held', flush=True)\nsys.stdin.read()\n", str(locks / "vocab-0123456789abcdef.lock"), str(in_use)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        assert holder.stdout.readline().strip() == "held"
        out, err = _gc(capsys, "--cache", "--older-than", "7", "--out", str(disk_root))
    finally:
        holder.communicate("", timeout=60)
    for f in folders:
        assert not (f / "stale.arrow").exists() and not (f / "stale.arrow.sha256").exists()
        assert (f / "fresh.arrow").is_file() and (f / "fresh.arrow.sha256").is_file()
        assert f"removed {f / 'stale.arrow'} (1.0 kB)" in out, out
    assert (in_use / "k.arrow").is_file() and f"kept {in_use}: in use" in out, out
    assert not (locks / "corpus-0123456789abcdef.lock").exists()
    assert (locks / "vocab-0123456789abcdef.lock").exists()  # a download holds it
    assert f"removed {locks / 'corpus-0123456789abcdef.lock'}" in out
    assert "kept in use" in err and "used within 7 day(s)" in err, err


def test_older_than_takes_a_number_of_days(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["artifacts", "gc", "--cache", "--older-than", "-1", "--out", str(tmp_path)])
    assert e.value.code == 2
    assert "0 or more" in capsys.readouterr().err


def test_a_reused_tokenised_split_records_its_use(tmp_path):
    """Pruned by last use, not by when it was tokenised: a split reused every week stays."""
    from datasets import Dataset  # noqa: PLC0415 - the real library, as fine-tuning uses it

    from kolectra.finetune import features  # noqa: PLC0415

    ds = Dataset.from_dict({"text": ["가나", "다라"]})

    def encode(batch, idx):
        return {"input_ids": [[1, len(t)] for t in batch["text"]]}

    first = features.tokenize(ds, encode, desc="t", settings={"v": 1}, cache_dir=tmp_path)
    stamp = next(tmp_path.glob("*.arrow.sha256"))
    _age([stamp, *tmp_path.glob("*.arrow")], 30)
    again = features.tokenize(ds, encode, desc="t", settings={"v": 1}, cache_dir=tmp_path)
    assert again["input_ids"] == first["input_ids"]
    assert time.time() - stamp.stat().st_mtime < DAY
