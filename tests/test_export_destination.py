"""Where and how ``kolectra export`` writes its folder (tests/test_export.py: what it writes): never over
a folder, never inside a managed one; a file-size limit, a full disk, a Ctrl-C, an I/O error or a kill leave
no half folder and a line naming what to do; an empty ``--to`` is filled (in place where the rename may not
replace it); the files are on the disk before the rename; a bucket's ``--to`` is asked for once."""

from __future__ import annotations

import dataclasses
import errno
import os
import subprocess
import sys
import tempfile

import pytest

from kolectra.core import scratch, storage
from kolectra.core.config import ConfigError
from kolectra.model import presets
from kolectra.pipeline.cli import main
from tests.export_support import checkpoint  # noqa: F401  (the fixture)
from tests.model_support import build_tokenizer
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


def test_export_never_overwrites_a_folder(checkpoint, tmp_path, capsys):
    store, art = checkpoint
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine", encoding="utf-8")
    assert main(["export", art.id, "--to", str(tmp_path / "full"), "--out", str(store.root)]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("where", ["the artifact", "its hf folder", "the kind's folder", "the root's .tmp",
                                   "the root", "a link into the root", "the cache"])
def test_a_destination_inside_a_managed_folder_is_refused_before_writing(checkpoint, tmp_path, capsys, monkeypatch,
                                                                         where):
    """Issue 43: ``--to`` inside the artifact made it fail verify (and every later fine-tune refuse
    it); inside ROOT/<kind>/ or ROOT/.tmp/ it is a stray entry clean-up may delete."""
    store, art = checkpoint
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    (tmp_path / "link").symlink_to(store.root)
    dest = {"the artifact": art.path / "exported", "its hf folder": art.path / "hf" / "mine",
            "the kind's folder": store.root / "checkpoint" / "exported", "the root's .tmp": store.root / ".tmp" / "x",
            "the root": store.root / "exports" / "x", "a link into the root": tmp_path / "link" / "checkpoint" / "y",
            "the cache": tmp_path / "cache" / "x"}[where]
    before = sorted(p.relative_to(store.root) for p in store.root.rglob("*"))
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--to {dest}: inside " in err[0], err
    assert sorted(p.relative_to(store.root) for p in store.root.rglob("*")) == before and not dest.exists()
    assert main(["artifacts", "verify", art.id, "--out", str(store.root)]) == 0


def test_an_export_to_a_bucket_is_uploaded_there_not_to_a_local_folder_named_s3(checkpoint, bucket, tmp_path,  # noqa: F811
                                                                               capsys, monkeypatch):
    """``--to s3://...`` was made a local path by the command line ('s3:/bucket/...'): the folder went to
    ./s3:/bucket/... in the working folder, that path was printed and nothing reached the bucket. Now the
    export is written in a local scratch folder and uploaded; a folder holding objects, a missing bucket and
    one inside a store root are refused before anything is written, and an upload that fails removes what it
    uploaded, so the same command runs again."""
    from kolectra.pipeline import hub
    from kolectra.pipeline.store.factory import open_store

    store, art = checkpoint
    monkeypatch.chdir(tmp_path)
    src = art.path / "hf" / "discriminator"
    to = f"{bucket}/models/tiny"
    export = ["export", art.id, "--to", to, "--out", str(store.root)]
    assert main([*export, "--push", "me/kolectra-tiny", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == to and "would upload" in out
    names = sorted(storage.listing(to))
    assert names == sorted({*(p.name for p in src.iterdir() if p.name in hub.FILES), "README.md"}), names
    assert storage.read_bytes(f"{to}/model.safetensors") == (src / "model.safetensors").read_bytes()
    assert f"checkpoint artifact `checkpoint/{art.path.name}`" in storage.read_bytes(f"{to}/README.md").decode()
    assert all(f"  {name}  " in out for name in names)  # the dry run's commit: the same files
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no ./s3: folder, no scratch left here
    # the export never overwrites; a missing bucket; a folder inside a store root: one line, nothing written
    for dest, expected in ((to, "exists and is not an empty folder"), (f"{to}/", "exists and is not an empty folder"),
                           ("s3://kolectra-no-such-bucket-m9/x", "does not exist")):
        assert main(["export", art.id, "--to", dest, "--out", str(store.root)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0] and dest.rstrip("/") in err[0], err
    assert sorted(storage.listing(to)) == names and len(storage.listing(bucket)) == len(names)
    with pytest.raises(ConfigError, match=f"inside {bucket}/k, which kolectra manages"):
        hub.store_folder(open_store(f"{bucket}/k"), f"{bucket}/k/exports/x")
    # an upload that fails (here Ctrl-C at the third file) takes what it uploaded back; the command runs again
    other, real, sent = f"{bucket}/again", storage.upload, []

    def upload(src: str, location: str) -> None:
        if len(sent) == 2:
            raise KeyboardInterrupt
        real(src, location)
        sent.append(location)

    monkeypatch.setattr(storage, "upload", upload)
    assert main(["export", art.id, "--to", other, "--out", str(store.root)]) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"the files uploaded to {other} were removed, so the same command can run again" in line, line
    assert len(sent) == 2 and storage.listing(other) == {}
    monkeypatch.setattr(storage, "upload", real)
    assert main(["export", art.id, "--to", other, "--out", str(store.root)]) == 0
    assert sorted(storage.listing(other)) == names
    # the local scratch folder's disk fills (here the file-size limit): that folder named, TMPDIR the remedy
    third = f"{bucket}/third"
    assert _limited(200_000, lambda: main(["export", art.id, "--to", third, "--out", str(store.root)])) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "the file-size limit was reached" in line and f"--to {third} is written in that local scratch" in line
    assert "TMPDIR" in line and storage.listing(third) == {}, line
    assert not [p for p in os.listdir(tempfile.gettempdir()) if p.startswith(scratch.prefix("export"))]


def _limited(size: int, run):
    """``run()`` under a file-size limit of ``size`` bytes (Python ignores SIGXFSZ: a write past it fails
    with EFBIG, as a full disk fails with ENOSPC)."""
    import resource  # noqa: PLC0415

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        return run()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_an_export_meeting_the_file_size_limit_names_to_and_can_run_again(checkpoint, tmp_path, capsys):
    """``--to`` on a disk that fills (here the file-size limit, 200 kB): the line named the checkpoint's
    own file in the store, which ``shutil.copyfile`` names ('.../hf/discriminator/model.safetensors: the
    file-size limit was reached'), pointing at the store's disk, and left a truncated model.safetensors
    in ``--to``, so the same command, once there was room, was refused ('exists and is not an empty
    folder'). Now the line names ``--to``, what was written goes, and the command runs again."""
    store, art = checkpoint
    dest = tmp_path / "out"
    code = _limited(200_000, lambda: main(["export", art.id, "--to", str(dest), "--out", str(store.root)]))
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and line.startswith(f"kolectra export: error: {dest}: the file-size limit was reached; "), line
    assert str(store.root) not in line and "run again" in line and not dest.exists(), line
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 0
    assert (dest / "model.safetensors").read_bytes() == (art.path / "hf" / "discriminator" / "model.safetensors"
                                                          ).read_bytes()


def test_pretraining_s_export_meeting_a_full_disk_past_the_weights_names_its_folder(tmp_path):
    """The export's weights fit, then the tokenizer's copy meets the limit (a tokenizer.json of 700 kB
    against 600 kB; a full disk does so at any file): the line named the vocabulary's own tokenizer.json
    ('.../tok/tokenizer.json: the file-size limit was reached'), shutil.copyfile's source, as the disk
    that was full. Now it names the export's folder, as a full disk meeting the weights does (bbfb79b)."""
    from kolectra.model.electra import ElectraPair  # noqa: PLC0415
    from kolectra.model.export import export_pair  # noqa: PLC0415
    from kolectra.pipeline.cli.errors import describe  # noqa: PLC0415

    tok = build_tokenizer(tmp_path / "tok")
    with open(tok / "tokenizer.json", "ab") as f:
        f.write(b" " * 700_000)  # trailing space: still the same JSON
    pair = ElectraPair(dataclasses.replace(presets.tiny().model, max_position=32), 300, 0)
    with pytest.raises(OSError) as caught:
        _limited(600_000, lambda: export_pair(pair, tok, tmp_path / "hf", {"preset": "tiny"}))
    assert (tmp_path / "hf" / "discriminator" / "model.safetensors").stat().st_size < 600_000
    assert describe(caught.value) == f"{tmp_path / 'hf' / 'discriminator'}: the file-size limit was reached"


@pytest.mark.parametrize("failure", ["ctrl-c", "an I/O error"])
def test_an_export_stopped_by_ctrl_c_or_an_io_error_leaves_no_half_folder(checkpoint, tmp_path, capsys, monkeypatch,
                                                                          failure):
    """da5aefd removed what was written into ``--to`` for a full disk only: a Ctrl-C, or an I/O error
    (strace -e inject=write:error=EIO on tokenizer.json: 'kolectra export: error: Input/output error',
    naming nothing), left config.json and the weights there (a folder AutoModel loads, without its
    tokenizer or card), and the same command was refused ('exists and is not an empty folder'). Here the
    failure comes as the copied tokenizer's config is read back, past the weights."""
    from kolectra.pipeline import hub

    store, art = checkpoint
    dest = tmp_path / "out"

    def stopped(path):
        assert (path.parent / "model.safetensors").is_file()  # the weights are in (beside --to, since n7)
        if failure == "ctrl-c":
            raise KeyboardInterrupt
        raise OSError(errno.EIO, os.strerror(errno.EIO))  # as shutil's copyfileobj raises it: no file named

    monkeypatch.setattr(hub, "text_is_data", stopped)
    code = main(["export", art.id, "--to", str(dest), "--out", str(store.root)])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == (130 if failure == "ctrl-c" else 2) and os.listdir(tmp_path) == [], (line, os.listdir(tmp_path))
    assert line.endswith("the files written into --to were removed, so the same command can run again"), line
    if failure != "ctrl-c":
        assert line == (f"kolectra export: error: Input/output error; while writing the export into {dest}; the files "
                        "written into --to were removed, so the same command can run again")
    monkeypatch.undo()
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 0


# The export stopped for good once the weights and the tokenizer are written, before the card: the
# test's own pause in a real kolectra process, which the test then kills with SIGKILL.
_PAUSED = """
import sys, time
from kolectra.pipeline import hub
from kolectra.pipeline.cli import main

def paused(path):
    print(sorted(p.name for p in path.parent.iterdir()), flush=True)
    time.sleep(120)

hub.text_is_data = paused
sys.exit(main(sys.argv[1:]))
"""


def test_an_export_killed_midway_leaves_no_to_and_the_next_export_sweeps_what_it_wrote(checkpoint, tmp_path, capsys,
                                                                                        monkeypatch):
    """kill -9 or an OOM kill during the export (no clean-up runs; c400d8e's covers Ctrl-C and errors) left
    config.json, the weights and the tokenizer in ``--to`` without its card: a folder ``AutoModel`` loads,
    incomplete, which the same command then refused ('exists and is not an empty folder'). Now the export is
    written beside ``--to`` and renamed into place whole: the kill leaves no ``--to``, and a scratch folder
    that the next export there sweeps."""
    store, art = checkpoint
    dest = tmp_path / "models" / "tiny"
    proc = subprocess.Popen([sys.executable, "-c", _PAUSED, "export", art.id, "--to", str(dest), "--out", str(store.root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, scratch.SWITCH: "0"})
    try:
        written = proc.stdout.readline()
    finally:
        proc.kill()  # SIGKILL
        proc.wait()
    assert "model.safetensors" in written and "tokenizer.json" in written, (written, proc.stderr.read())
    left = os.listdir(tmp_path / "models")
    assert not dest.exists() and len(left) == 1 and scratch.owner(left[0]).kind == "export", left
    monkeypatch.setenv(scratch.SWITCH, "1")
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 0
    assert "export: removed 1 scratch entry (" in capsys.readouterr().err
    assert os.listdir(tmp_path / "models") == ["tiny"]
    assert sorted(os.listdir(dest)) == sorted(os.listdir(art.path / "hf" / "discriminator"))


def test_an_empty_folder_given_as_to_is_filled_keeping_its_permissions(checkpoint, tmp_path):
    """The export renamed over an empty ``--to`` (a folder the user made first) keeps that folder's mode."""
    store, art = checkpoint
    dest = tmp_path / "mine"
    dest.mkdir()
    dest.chmod(0o750)
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 0
    assert (dest.stat().st_mode & 0o777) == 0o750 and (dest / "model.safetensors").is_file()
    assert os.listdir(tmp_path) == ["mine"]


def test_a_to_filled_by_another_process_during_the_export_is_refused_and_kept(checkpoint, tmp_path, capsys,
                                                                               monkeypatch):
    """``--to`` empty when checked, written by someone else before the export is renamed into place (two
    exports to one folder at once): the rename is refused, as a full ``--to`` is, and what is there stays."""
    from kolectra.pipeline import hub

    store, art = checkpoint
    dest = tmp_path / "out"
    real = hub.text_is_data

    def meanwhile(path):
        dest.mkdir()
        (dest / "theirs.txt").write_text("x", encoding="utf-8")
        real(path)

    monkeypatch.setattr(hub, "text_is_data", meanwhile)
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"kolectra export: error: --to {dest}: exists and is not an empty folder (the export never overwrites)"]
    assert os.listdir(tmp_path) == ["out"] and os.listdir(dest) == ["theirs.txt"]


@pytest.mark.parametrize("refusal", [errno.EBUSY, errno.EPERM])
def test_an_empty_to_that_the_rename_may_not_replace_is_filled_in_place(checkpoint, tmp_path, capsys, monkeypatch,
                                                                         refusal):
    """An empty ``--to`` that is a bind mount of a folder of the same disk (os.path.ismount says no; ``mount
    --bind`` then the CLI: 'kolectra export: error: DIR: Device or resource busy') or another user's folder in
    a sticky /tmp (EPERM) was refused once 988d293 renamed the export onto it; the export is written into it,
    as before 988d293. The rename is answered here as the kernel answers it for those two."""
    store, art = checkpoint
    dest = tmp_path / "mounted"
    dest.mkdir()
    real = os.rename

    def rename(src, dst, *args, **kwargs):
        if os.fspath(dst) == str(dest.resolve()):
            raise OSError(refusal, os.strerror(refusal), os.fspath(src), None, os.fspath(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", rename)
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 0, capsys.readouterr().err
    assert sorted(os.listdir(dest)) == sorted(os.listdir(art.path / "hf" / "discriminator"))
    assert os.listdir(tmp_path) == ["mounted"]  # no scratch folder left beside it


def test_an_export_to_the_empty_folder_one_is_in_is_seen_there(checkpoint, tmp_path, monkeypatch):
    """``mkdir m && cd m && kolectra export REF --to .``: 988d293 renamed the written export over the folder,
    so the shell was left in a deleted one (its ``ls`` showed nothing, each next command said 'getcwd: cannot
    access parent directories'). The files now go into the folder given, the same folder."""
    store, art = checkpoint
    here = tmp_path / "m"
    here.mkdir()
    inode = here.stat().st_ino
    monkeypatch.chdir(here)
    assert main(["export", art.id, "--to", ".", "--out", str(store.root)]) == 0
    assert sorted(os.listdir(".")) == sorted(os.listdir(art.path / "hf" / "discriminator"))
    assert here.stat().st_ino == inode and os.listdir(tmp_path) == ["m"]


def test_a_local_export_is_on_the_disk_before_it_is_renamed_into_place(checkpoint, tmp_path, monkeypatch):
    """A local export was renamed into place with nothing flushed: after a power loss the rename could be on
    the disk and the files not (empty or zeroed weights in a folder AutoModel loads; an export has no manifest
    to catch it). Now, as a checkpoint's step folder: every file and the folder synced before the rename, the
    parent after it; into an empty --to given, its files and the folder after the moves."""
    store, art = checkpoint
    seen: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd):
        seen.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def rename(src, dst, *args, **kwargs):
        seen.append(("rename", os.fspath(dst)))
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    dest = tmp_path / "new"
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 0
    placed = seen.index(("rename", str(dest)))
    synced = {os.path.basename(p) for event, p in seen[:placed] if event == "fsync"}
    assert set(os.listdir(dest)) | {"export"} <= synced, seen  # the files and their folder, then the rename
    assert ("fsync", str(tmp_path)) in seen[placed:], seen
    given = tmp_path / "given"
    given.mkdir()
    seen.clear()
    assert main(["export", art.id, "--to", str(given), "--out", str(store.root)]) == 0
    assert {("fsync", str(given / name)) for name in os.listdir(given)} | {("fsync", str(given))} <= set(seen), seen


def test_an_export_to_a_bucket_asks_for_the_to_object_once(checkpoint, bucket, s3_endpoint):  # noqa: F811
    """``export --to s3://B/a/models/tiny`` asked the store for the --to object twice (HeadObject of a/models/tiny:
    the listing of a/models/tiny/ finding nothing had s3fs look the prefix up as an object, a HEAD and a listing
    more whose answer nothing read, before the check for an object there asked again) and for the bucket twice
    (before the artifact around --to was looked for, and in the check of the folder). Once each now."""
    from tests.s3_support import answered

    store, art = checkpoint
    to = f"{bucket}/a/models/tiny"
    with answered(s3_endpoint) as requests:
        assert main(["export", art.id, "--to", to, "--out", str(store.root)]) == 0
    key = to.removeprefix("s3://")
    asked = [r.operation for r in requests if r.key == key]
    assert asked == ["HeadObject"], requests
    assert [r.operation for r in requests].count("HeadBucket") == 1, requests
    assert [r for r in requests if r.operation.startswith("List") and r.key == f"{key}/"] != [], requests
