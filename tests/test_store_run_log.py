"""A pretraining run's metrics.jsonl on a bucket root (pipeline/store/log_parts.py), on moto's S3
server (tests/s3_support.py): each checkpoint uploads the lines written since the one before
(before, the whole file, so a run's uploads grew with the square of its lines), as a part that takes
in the newest parts like a binary counter (their number logarithmic in the saves; before, one more a
save, never merged); ``--resume`` on a machine without the run reads the parts back as the one file;
the published artifact holds ``metrics.jsonl`` whole, in its manifest, verified."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.pipeline.store import log_parts
from kolectra.pipeline.store.artifacts import Resumable
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.gcs_support import gcs_endpoint, gs_bucket  # noqa: F401  (fixtures)
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)

RESUMABLE = Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",))
WEIGHTS = 4096  # bytes of a checkpoint's model file here


def lines(first: int, n: int) -> bytes:
    """``n`` metrics lines from step ``first``, as long as the trainer's (about 440 bytes)."""
    return b"".join(
        json.dumps(
            {
                "step": s,
                "loss": 10.5 - s * 1e-6,
                "gen_loss": 6.25,
                "disc_loss": 0.0831,
                "grad_norm": 1.37,
                "gen_acc": 0.31,
                "replaced_share": 0.85,
                "disc_acc": 0.94,
                "disc_precision": 0.71,
                "disc_recall": 0.42,
                "replaced_token_share": 0.12,
                "disc_auc": 0.9123456789,
                "lr": 0.000123456789,
                "tokens_per_s": 12345.678,
                "nonpad_tokens": s * 4096,
                "padding": "x" * 120,
            }
        ).encode()
        + b"\n"
        for s in range(first, first + n)
    )


def save(out: Path, step: int) -> Path:
    """A checkpoint as the trainer leaves it: ``checkpoints/step-N/`` with its files, the manifest last."""
    step_dir = out / "checkpoints" / f"step-{step:08d}"
    step_dir.mkdir(parents=True)
    (step_dir / "model.pt").write_bytes(bytes(WEIGHTS))
    (step_dir / "manifest.json").write_text(json.dumps({"step": step}))
    return step_dir


def append(out: Path, data: bytes) -> None:
    with (out / "metrics.jsonl").open("ab") as f:
        f.write(data)


def test_a_checkpoint_uploads_the_new_lines_whatever_came_before(bucket, s3_endpoint, tmp_path, monkeypatch):
    """The bytes a save uploads are the checkpoint's files and the lines new since the save before
    (no merge here: 100 lines, less than the part before them), the same after 1,000 earlier lines as
    after 10,000 (the whole file before: 0.5 MB against 4.8 MB); published, the artifact holds
    metrics.jsonl whole, listed in its manifest, and verifies."""
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    store = open_store(f"{bucket}/grow")
    sent: dict[int, list] = {}

    def train(out: Path) -> StageOutput:
        step = 0
        for earlier in (1_000, 10_000):
            append(out, lines(step, earlier - step))
            step = earlier
            store.checkpoint_saved(save(out, step))  # what came before this save
            append(out, lines(step, 100))
            step += 100
            with answered(s3_endpoint) as found:
                store.checkpoint_saved(save(out, step))
            sent[earlier] = [a for a in found if a.operation == "PutObject" and "/.work/" in a.key]  # no lease renewal
        return StageOutput(stats={})

    request = Request(kind="checkpoint", name="grow", stage_version=1, config={})
    art = store.build(request, train, resumable=RESUMABLE)
    total = {earlier: sum(a.sent for a in puts) for earlier, puts in sent.items()}
    assert abs(total[10_000] - total[1_000]) < 1_000, total  # ~50 kB each; the old code: 4.2 MB more
    for earlier, puts in sent.items():
        log = sum(a.sent for a in puts if f"/{log_parts.PARTS}/metrics.jsonl/" in a.key)
        rest = sum(a.sent for a in puts if f"/{log_parts.PARTS}/" not in a.key)
        assert log == len(lines(earlier, 100)) < 50_000, (earlier, puts)  # 100 lines, not 1,000 or 10,000
        assert rest == WEIGHTS + len(json.dumps({"step": earlier + 100})), (earlier, puts)
    files = {f["path"]: f["bytes"] for f in art.manifest["files"]}
    assert files == {"metrics.jsonl": len(lines(0, 10_100))}
    assert art.read_bytes("metrics.jsonl") == lines(0, 10_100)
    assert store.verify(art) == []
    assert storage.children(f"{bucket}/grow/.work") == []


def test_resume_on_another_machine_reads_the_parts_back_as_the_log(bucket, tmp_path, monkeypatch):
    """A run stopped after its saves is resumed on a machine without it: metrics.jsonl arrives as the
    store kept it at the last save (lines written after it are not there). The resumed run trims it
    back inside a part (as the trainer does to an earlier checkpoint's step) and logs other lines:
    the store's parts past that point are replaced, and the next machine, and the published
    artifact, get exactly the resumed run's file."""
    root = f"{bucket}/resume"
    request = Request(kind="checkpoint", name="resume", stage_version=1, config={})
    seen: dict[str, bytes] = {}

    def first(out: Path) -> StageOutput:
        for step in (100, 200, 300):
            append(out, lines(step - 100, 100))
            store_1.checkpoint_saved(save(out, step))
        append(out, lines(300, 7))  # after the last save: never uploaded
        raise RuntimeError("killed")

    def second(out: Path) -> StageOutput:
        seen["fetched"] = (out / "metrics.jsonl").read_bytes()
        kept = lines(0, 150)  # the trainer trims back into the second save's part
        (out / "metrics.jsonl").write_bytes(kept + lines(150, 100).replace(b'"gen_loss": 6.25', b'"gen_loss": 5.75'))
        store_2.checkpoint_saved(save(out, 400))
        seen["second"] = (out / "metrics.jsonl").read_bytes()
        raise RuntimeError("killed again")

    def third(out: Path) -> StageOutput:
        seen["third"] = (out / "metrics.jsonl").read_bytes()
        return StageOutput(stats={})

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "machine-1"))
    store_1 = open_store(root)
    with pytest.raises(RuntimeError, match="killed"):
        store_1.build(request, first, resumable=RESUMABLE)
    run = f"{root}/.work/checkpoint-{request.id()}"
    names = sorted(storage.listing(f"{run}/{log_parts.PARTS}/metrics.jsonl"))
    assert len(names) == 2 and [p[:2] for p in log_parts.chain(names)] == [  # the second save took in the first
        (0, len(lines(0, 200))),
        (len(lines(0, 200)), len(lines(0, 300))),
    ]

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "machine-2"))
    store_2 = open_store(root)
    with pytest.raises(RuntimeError, match="killed again"):
        store_2.build(request, second, resumable=RESUMABLE, resume=True)
    assert seen["fetched"] == lines(0, 300)
    chained = log_parts.chain(storage.listing(f"{run}/{log_parts.PARTS}/metrics.jsonl"))
    assert [p[:2] for p in chained] == [(0, len(seen["second"]))]  # the first part differs from byte 150's line
    assert len(storage.listing(f"{run}/{log_parts.PARTS}/metrics.jsonl")) == 1  # the stale ones removed

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "machine-3"))
    art = open_store(root).build(request, third, resumable=RESUMABLE, resume=True)
    assert seen["third"] == seen["second"] == art.read_bytes("metrics.jsonl")
    assert open_store(root).verify(art) == []


def test_a_part_that_does_not_match_its_name_ends_the_log_read_back(bucket, tmp_path):
    """A part altered in the store (or cut short) is not taken: the log read back ends before it, as a
    log cut by a kill does; keys that are no parts are ignored."""
    run = f"{bucket}/parts/.work/checkpoint-x"
    local = tmp_path / "out" / "metrics.jsonl"
    local.parent.mkdir()
    mirror = log_parts.Mirror(run, local)
    for k in range(3):
        append(local.parent, lines(k * 10, 10) + (b'{"step": 99, "lo' if k == 2 else b""))
        mirror.sync()
    assert local.read_bytes().startswith(lines(0, 30)) and len(local.read_bytes()) > len(lines(0, 30))
    parts = log_parts.chain(storage.listing(f"{run}/{log_parts.PARTS}/metrics.jsonl"))
    assert parts[-1][1] == len(lines(0, 30))  # whole lines only: the one being written waits for the next save
    assert [p[:2] for p in parts] == [(0, len(lines(0, 20))), (len(lines(0, 20)), len(lines(0, 30)))]
    storage.write_bytes(f"{run}/{log_parts.PARTS}/metrics.jsonl/notes.txt", b"not a part")
    listing = storage.listing(run)
    back = tmp_path / "back"
    log_parts.fetch(run, listing, back)
    assert (back / "metrics.jsonl").read_bytes() == lines(0, 30)
    storage.write_bytes(
        f"{run}/{log_parts.PARTS}/metrics.jsonl/{log_parts.part_name(parts[1])}",
        lines(20, 10).replace(b"6.25", b"6.26"),
    )
    log_parts.fetch(run, listing, back)
    assert (back / "metrics.jsonl").read_bytes() == lines(0, 20)


def test_a_key_in_other_digits_is_no_part():
    """A key of the part form in non-ASCII digits (no kolectra writes one; whoever may write the bucket
    may) is not a part: read back under the name kolectra gives a part, it was a key that is not there,
    and --resume on another machine ended in FileNotFoundError."""
    digest = "a" * 64
    arabic = "\u0660" * 16 + "-" + "\u0660" * 15 + "\u0669" + "-" + digest
    assert log_parts.chain([arabic]) == []
    assert log_parts.chain([arabic, f"{0:016d}-{5:016d}-{digest}"]) == [(0, 5, digest)]


def test_resume_takes_the_store_s_newer_checkpoint_over_this_machine_s_older_copy(bucket, tmp_path, monkeypatch):
    """Machine 1 stops at step 300; machine 2 resumes from the store and goes on to 500; machine 1,
    resumed again, holds its own copy at 300. It resumes from the store's 500 (and its log), not its
    own 300: before, it went on from 300 and its first save removed steps 400-500 and their log parts
    from the store (the work of machine 2 lost)."""
    root = f"{bucket}/ahead"
    request = Request(kind="checkpoint", name="ahead", stage_version=1, config={})
    seen: dict[str, object] = {}

    def first(out: Path) -> StageOutput:
        for step in (100, 200, 300):
            append(out, lines(step - 100, 100))
            store_1.checkpoint_saved(save(out, step))
        raise RuntimeError("killed")

    def second(out: Path) -> StageOutput:
        for step in (400, 500):
            append(out, lines(step - 100, 100))
            store_2.checkpoint_saved(save(out, step))
        raise RuntimeError("preempted")

    def third(out: Path) -> StageOutput:
        seen["steps"] = sorted(p.name for p in (out / "checkpoints").iterdir())
        seen["log"] = (out / "metrics.jsonl").read_bytes()
        return StageOutput(stats={})

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "machine-1"))
    store_1 = open_store(root)
    with pytest.raises(RuntimeError, match="killed"):
        store_1.build(request, first, resumable=RESUMABLE)
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "machine-2"))
    store_2 = open_store(root)
    with pytest.raises(RuntimeError, match="preempted"):
        store_2.build(request, second, resumable=RESUMABLE, resume=True)
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "machine-1"))
    open_store(root).build(request, third, resumable=RESUMABLE, resume=True)
    assert seen["steps"] == ["step-00000500"] and seen["log"] == lines(0, 500), seen["steps"]


def test_parts_stay_logarithmic_in_the_saves_and_each_byte_goes_up_a_few_times(bucket, s3_endpoint, tmp_path):
    """64 saves of 1 to 3 lines: the store holds at most 1 + log2(file / newest part) parts after
    every save (each larger than all after it together), 5 at most here, read back as the file; the
    bytes PUT in all are at most 1 + log2(saves) times the file (3.4 here), and each merge's replaced
    parts are deleted. Before, one part a save, never merged: 64 parts (a resume's 64 GETs)."""
    run = f"{bucket}/many/.work/checkpoint-x"
    local = tmp_path / "out" / "metrics.jsonl"
    local.parent.mkdir()
    mirror = log_parts.Mirror(run, local)
    saves, step, most = 64, 0, 0
    with answered(s3_endpoint) as found:
        for k in range(saves):
            append(local.parent, lines(step, 1 + k % 3))
            step += 1 + k % 3
            mirror.sync()
            mirror.prune()
            names = list(storage.listing(f"{run}/{log_parts.PARTS}/metrics.jsonl"))
            parts = log_parts.chain(names)
            assert len(names) == len(parts) and parts[-1][1] == local.stat().st_size, (k, names)
            sizes = [e - s for s, e, _ in parts]
            assert all(size > sum(sizes[i + 1 :]) for i, size in enumerate(sizes)), (k, sizes)
            assert len(parts) < 1 + math.log2(sum(sizes) / sizes[-1]) or len(parts) == 1, (k, sizes)
            most = max(most, len(parts))
    assert most <= 1 + math.log2(saves), (most, sizes)  # 5 here; before, 64
    put = sum(a.sent for a in found if a.operation == "PutObject")
    assert local.stat().st_size < put <= local.stat().st_size * (1 + math.log2(saves)), put
    puts, deletes = (sum(a.operation == op for a in found) for op in ("PutObject", "DeleteObjects"))
    assert puts == saves and deletes == saves - len(parts), (puts, deletes)  # each replaced part once (a key a request)
    log_parts.fetch(run, storage.listing(run), tmp_path / "back")
    assert (tmp_path / "back" / "metrics.jsonl").read_bytes() == lines(0, step)


@pytest.mark.parametrize("killed", ["before the checkpoint", "after the checkpoint"])
def test_a_kill_between_a_merge_and_its_deletes_leaves_the_whole_log_once(bucket, tmp_path, monkeypatch, killed):
    """The fourth save merges the store's two parts and its new lines into one part, written before
    the two are deleted (after the checkpoint's manifest). Killed in between (before the checkpoint's
    first file: no step 400; or after its manifest), the store holds all three: the log read back is
    every line once (the chain takes the longer part). The run resumed on another machine trims back
    to its checkpoint; its first save keeps the replaced parts where the merged one went past that
    checkpoint, and the published artifact holds exactly the resumed run's file."""
    root = f"{bucket}/merge"
    request = Request(kind="checkpoint", name="merge", stage_version=1, config={})
    run = f"{root}/.work/checkpoint-{request.id()}"
    parts_url = f"{run}/{log_parts.PARTS}/metrics.jsonl"
    seen: dict[str, object] = {}
    real_upload, real_remove = storage.upload, storage.remove

    def upload(src: str, location: str) -> None:  # the kill: at the checkpoint's first file after the merge
        if killed == "before the checkpoint" and "/step-00000400/" in location:
            raise RuntimeError("killed")
        real_upload(src, location)

    def remove(location: str, recursive: bool = False) -> None:  # or at the merge's first delete
        if killed == "after the checkpoint" and f"/{log_parts.PARTS}/" in location:
            raise RuntimeError("killed")
        real_remove(location, recursive)

    def first(out: Path) -> StageOutput:
        for step in (100, 200, 300, 400):
            append(out, lines(step - 100, 100))
            if step == 400:  # the store holds [0, 200 lines) and [200, 300): both taken in
                monkeypatch.setattr(storage, "upload", upload)
                monkeypatch.setattr(storage, "remove", remove)
            store_1.checkpoint_saved(save(out, step))
        raise AssertionError("not killed")

    def second(out: Path) -> StageOutput:
        step = int(max(p.name for p in (out / "checkpoints").iterdir()).removeprefix("step-"))
        seen["step"], seen["fetched"] = step, (out / "metrics.jsonl").read_bytes()
        (out / "metrics.jsonl").write_bytes(lines(0, step))  # the trainer's trim, to its checkpoint
        append(out, lines(step, 50).replace(b'"gen_loss": 6.25', b'"gen_loss": 5.75'))
        store_2.checkpoint_saved(save(out, step + 50))
        seen["log"] = (out / "metrics.jsonl").read_bytes()
        seen["ends"] = [end for _, end, _ in log_parts.chain(storage.listing(parts_url))]
        seen["keys"] = len(storage.listing(parts_url))
        return StageOutput(stats={})

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "machine-1"))
    store_1 = open_store(root)
    with pytest.raises(RuntimeError, match="killed"):
        store_1.build(request, first, resumable=RESUMABLE)
    monkeypatch.setattr(storage, "upload", real_upload)
    monkeypatch.setattr(storage, "remove", real_remove)
    names = storage.listing(parts_url)
    assert sorted(p[:2] for p in map(log_parts.parse, names)) == [
        (0, len(lines(0, 200))), (0, len(lines(0, 400))), (len(lines(0, 200)), len(lines(0, 300)))]
    log_parts.fetch(run, storage.listing(run), tmp_path / "back")
    assert (tmp_path / "back" / "metrics.jsonl").read_bytes() == lines(0, 400)  # every line, once

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "machine-2"))
    store_2 = open_store(root)
    art = store_2.build(request, second, resumable=RESUMABLE, resume=True)
    assert seen["fetched"] == lines(0, 400)
    assert seen["step"] == (300 if killed == "before the checkpoint" else 400)
    # the save's PUT was its 50 new lines: the parts the resumed file starts with were kept (before the
    # checkpoint, the replaced ones: the merged part holds lines past step 300 that the trim dropped)
    ends = [200, 300, 350] if killed == "before the checkpoint" else [400, 450]
    assert seen["ends"] == [len(lines(0, n)) for n in ends] and seen["keys"] == len(ends), seen
    assert art.read_bytes("metrics.jsonl") == seen["log"]
    assert seen["log"] == lines(0, seen["step"]) + lines(seen["step"], 50).replace(b'"gen_loss": 6.25', b'"gen_loss": 5.75')
    assert store_2.verify(art) == []


def test_a_resume_shorter_than_a_merged_part_keeps_the_store_s_lines_until_its_own_are_up(bucket, s3_endpoint, tmp_path, monkeypatch):
    """Machine 1's third save merges [0, 100) and [100, 110) into [0, 210) and is killed before the
    checkpoint's manifest (the store's checkpoint: step 110); resumed on machine 1 from its own step
    210, its first save is killed before the manifest too. The store's step 110 still needs lines
    100-110: the replaced parts wait for a manifest past them (that save PUTs only its new lines);
    machine 2, resumed from step 110 (the merged part past its trimmed log), finds them: a kill at its
    PUT leaves every line its checkpoint needs, and not killed it PUTs only its 5 new lines (before:
    the first resume deleted the replaced parts, the second the merged part, and the kill left no log)."""
    run = f"{bucket}/short/.work/checkpoint-x"
    parts_url = f"{run}/{log_parts.PARTS}/metrics.jsonl"

    def machine(name: str, data: bytes) -> log_parts.Mirror:
        local = tmp_path / name / "out" / "metrics.jsonl"
        local.parent.mkdir(parents=True)
        local.write_bytes(data)
        return log_parts.Mirror(run, local)

    one = machine("one", b"")
    for first, n in ((0, 100), (100, 10), (110, 100)):
        append(one.local.parent, lines(first, n))
        one.sync()
        if first < 110:  # the third save's checkpoint is never complete: no prune
            one.prune()
    assert sorted(p[:2] for p in map(log_parts.parse, storage.listing(parts_url))) == [
        (0, len(lines(0, 100))), (0, len(lines(0, 210))), (len(lines(0, 100)), len(lines(0, 110)))]

    again = machine("again", lines(0, 210) + lines(210, 10))  # machine 1 resumed from its step 210
    with answered(s3_endpoint) as found:
        again.sync()  # killed before its checkpoint's manifest: no prune
    assert sum(a.sent for a in found if a.operation == "PutObject") == len(lines(210, 10))
    log_parts.fetch(run, storage.listing(run), tmp_path / "back")
    assert (tmp_path / "back" / "metrics.jsonl").read_bytes() == lines(0, 220)

    def killed(src: str, location: str) -> None:
        raise RuntimeError("killed")

    resumed = lines(0, 110) + lines(110, 5).replace(b'"gen_loss": 6.25', b'"gen_loss": 5.75')
    three = machine("three", resumed)  # machine 2 from the store's step 110, killed at its first PUT
    monkeypatch.setattr(storage, "upload", killed)
    with pytest.raises(RuntimeError, match="killed"):
        three.sync()
    monkeypatch.undo()
    log_parts.fetch(run, storage.listing(run), tmp_path / "back-2")
    assert (tmp_path / "back-2" / "metrics.jsonl").read_bytes()[: len(lines(0, 110))] == lines(0, 110)

    two = machine("two", resumed)  # and again, not killed: the replaced parts serve, only 5 lines go up
    with answered(s3_endpoint) as found:
        two.sync()
        two.prune()
    assert sum(a.sent for a in found if a.operation == "PutObject") == len(lines(110, 5))
    log_parts.fetch(run, storage.listing(run), tmp_path / "back-3")
    assert (tmp_path / "back-3" / "metrics.jsonl").read_bytes() == resumed


def test_a_resume_from_a_checkpoint_older_than_the_store_s_removes_the_merged_part_only_once_its_own_is_up(
        bucket, tmp_path, monkeypatch):
    """The store's checkpoint is step 300, its log one merged part [0, 300) (its replaced parts pruned);
    this machine resumes from its step 200 (its step 300 does not load: the trainer takes the one
    before). The merged part goes past the trimmed log and is removed, but only after the resumed
    lines are up: a kill at that PUT leaves the store's step 300 its 300 lines (before, removed first:
    no log left at all)."""
    run = f"{bucket}/older/.work/checkpoint-x"
    first = tmp_path / "one" / "out" / "metrics.jsonl"
    first.parent.mkdir(parents=True)
    one = log_parts.Mirror(run, first)
    for start, n in ((0, 100), (100, 50), (150, 150)):
        append(first.parent, lines(start, n))
        one.sync()
        one.prune()
    assert [p[:2] for p in log_parts.chain(storage.listing(f"{run}/{log_parts.PARTS}/metrics.jsonl"))] == [
        (0, len(lines(0, 300)))]

    resumed = lines(0, 200) + lines(200, 5).replace(b'"gen_loss": 6.25', b'"gen_loss": 5.75')
    real_upload = storage.upload

    def killed(src: str, location: str) -> None:
        raise RuntimeError("killed")

    for name, kill in (("two", True), ("three", False)):
        local = tmp_path / name / "out" / "metrics.jsonl"
        local.parent.mkdir(parents=True)
        local.write_bytes(resumed)
        mirror = log_parts.Mirror(run, local)
        monkeypatch.setattr(storage, "upload", killed if kill else real_upload)
        if kill:
            with pytest.raises(RuntimeError, match="killed"):
                mirror.sync()
        else:
            mirror.sync()
            mirror.prune()
        log_parts.fetch(run, storage.listing(run), tmp_path / f"back-{name}")
        assert (tmp_path / f"back-{name}" / "metrics.jsonl").read_bytes() == (lines(0, 300) if kill else resumed)
    assert len(storage.listing(f"{run}/{log_parts.PARTS}/metrics.jsonl")) == 1


@pytest.mark.parametrize("root", ["bucket", "gs_bucket"])
def test_a_part_already_gone_is_no_error_to_prune_or_to_drop_as_stale(root, request, tmp_path):
    """A replaced part (prune, after the checkpoint's manifest) or a stale one (the first sync) that is
    no longer there, removed meanwhile by another process (a gc, the other machine of a resume): the
    save goes on, on S3 (moto) and on GCS (fake-gcs-server: gcsfs raises FileNotFoundError for a key
    gone, S3 deletes it without a word; storage.remove takes both). Real GCS deletes through gcsfs's
    batch request, which no emulator answers: untested (its 404 reads "No such object", which gcsfs
    turns into FileNotFoundError)."""
    run = f"{request.getfixturevalue(root)}/gone/.work/checkpoint-x"
    parts = f"{run}/{log_parts.PARTS}/metrics.jsonl"
    local = tmp_path / "out" / "metrics.jsonl"
    local.parent.mkdir()
    mirror = log_parts.Mirror(run, local)
    for start in (0, 2):  # two saves of 2 lines: the second merges the first part into [0, 4 lines)
        append(local.parent, lines(start, 2))
        mirror.sync()
    assert len(mirror.replaced) == 1
    storage.remove(storage.join(parts, log_parts.part_name(mirror.replaced[0])))
    mirror.prune()
    assert log_parts.chain(storage.listing(parts)) == mirror.parts and not mirror.replaced

    # a part past the store's log, which the next machine's file does not hold: stale
    at, stale = local.stat().st_size, lines(4, 1).replace(b'"gen_loss": 6.25', b'"gen_loss": 5.75')
    key = storage.join(parts, log_parts.part_name((at, at + len(stale), hashlib.sha256(stale).hexdigest())))
    with storage.open_file(key, "wb") as f:
        f.write(stale)
    other = log_parts.Mirror(run, tmp_path / "other" / "out" / "metrics.jsonl")
    other.local.parent.mkdir(parents=True)
    other.local.write_bytes(local.read_bytes() + lines(4, 1))
    other.parts = other._compare()
    assert other.stale == [key.rsplit("/", 1)[1]]
    storage.remove(key)
    other.sync()
    other.prune()
    log_parts.fetch(run, storage.listing(run), tmp_path / "back")
    assert (tmp_path / "back" / "metrics.jsonl").read_bytes() == lines(0, 5)
