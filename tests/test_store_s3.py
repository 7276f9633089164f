"""The artifact store on an object store: ROOT is ``s3://bucket/prefix`` on a real S3-compatible
server (moto's, on 127.0.0.1; tests/s3_support.py), reached only through the standard environment.

- the whole chain (corpus -> vocab -> examples -> pretrain -> fine-tuning) gives the digests of the
  same request on a local root, every artifact verifies, a rerun reuses them;
- kills at each step of the publish protocol leave nothing that looks complete; a rerun publishes,
  ``artifacts gc`` removes what the kill left once its lease expired;
- two identical builds at once: one builds, the other waits and joins;
- an object altered after publishing is named by ``verify`` and refused before a stage reads it;
- signals once the manifest is in the store; gc beside live runs; layouts, globs and folder markers.
Store failures: tests/test_store_s3_access.py; pretraining resumed from the store: tests/test_store_s3_pretrain.py.
"""

from __future__ import annotations

import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.core import conditional, storage
from kolectra.pipeline import stages
from kolectra.pipeline.run import run_sample
from kolectra.pipeline.store.artifacts import ArtifactError
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.remote import RemoteStore
from tests.s3_support import bucket, s3_endpoint, two_identical_builds_at_once  # noqa: F401  (fixtures)
from tests.sample_chain_support import TINY, copy_of_the_chain
from tests.store_s3_support import FAST_LEASE, _child, _cli, _own_cache  # noqa: F401  (_own_cache: autouse)


# ---- the chain ------------------------------------------------------------------------------------
def test_whole_chain_on_s3_matches_local_digests(bucket, tmp_path, tmp_path_factory):
    local = copy_of_the_chain(tmp_path_factory, tmp_path / "local")[0]  # run_sample(local, sets=TINY), copied
    remote = open_store(f"{bucket}/kolectra")
    assert isinstance(remote, RemoteStore)
    run_sample(remote, sets=TINY)

    def digests(store):
        return {(a.kind, a.path.name): a.manifest["digest"] for a in store.list() if a.kind != "eval"}

    files = {store: {(a.kind, f["path"]): f["sha256"] for a in store.list() if a.kind != "eval"
                     for f in a.manifest["files"]} for store in (local, remote)}
    assert files[local].keys() == files[remote].keys()
    # every byte the same but the training logs, which carry wall-clock times (as two local runs do)
    timed = {"metrics.jsonl", "stats.json", "README.md"}
    differ = [k for k in files[local] if files[local][k] != files[remote][k]]
    assert [k for k in differ if k[0] != "checkpoint" or not (k[1] in timed or k[1].startswith("tensorboard/")
                                                               or k[1].endswith("README.md"))] == [], differ
    assert {k: v for k, v in digests(local).items() if k[0] != "checkpoint"} == \
        {k: v for k, v in digests(remote).items() if k[0] != "checkpoint"}
    assert {a.kind for a in remote.list()} == {"corpus", "vocab", "examples", "checkpoint", "eval"}
    for art in remote.list():
        assert remote.verify(art) == [], art.path
        assert str(art.path).startswith(f"{bucket}/kolectra/{art.kind}/")
    # what the Beam workers wrote is all there is: no report file, no staging copy
    corpus = remote.list("corpus")[0]
    assert ".written.json" not in storage.listing(str(corpus.path))
    # a rerun reuses every artifact; the CLI lists and verifies the bucket
    before = {str(a.path) for a in remote.list()}
    run_sample(remote, sets=TINY)
    assert {str(a.path) for a in remote.list()} == before
    listed = _cli("artifacts", "list", "--out", f"{bucket}/kolectra")
    assert listed.returncode == 0 and corpus.path.name in listed.stdout
    ok = _cli("artifacts", "verify", str(corpus.path), "--out", f"{bucket}/kolectra")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"ok {corpus.path}")
    chain = _cli("artifacts", "verify", "--quick", "--lineage", str(remote.list("checkpoint")[0].path),
                 "--out", f"{bucket}/kolectra")  # the checkpoint, its examples, their vocab and corpus
    assert chain.returncode == 0, chain.stderr
    kinds = [line.split()[1].split("/")[-2] for line in chain.stdout.splitlines()]
    assert kinds[:2] == ["checkpoint", "examples"] and sorted(kinds[2:]) == ["corpus", "vocab"], chain.stdout


def test_tampered_object_is_named_by_verify_and_refused(bucket):
    store = open_store(f"{bucket}/r")
    corpus = stages.corpus(store, [str(Path(__file__).resolve().parents[1] / "pipeline" / "sample" / "reviews.jsonl.gz")],
                           sets=["min_chars=10"])
    stats = f"{corpus.path}/stats.json"
    body = storage.read_bytes(stats)
    storage.write_bytes(stats, body.replace(b'"records_in"', b'"records_iN"'))  # same size, other bytes
    problems = store.verify(corpus)
    assert any(stats in p for p in problems), problems
    with pytest.raises(ArtifactError, match="stats.json"):
        store.require(corpus.id, "corpus")
    # an object added under the prefix is named too
    storage.write_bytes(f"{corpus.path}/data/extra.txt", b"x")
    assert any("extra.txt: not in manifest" in p for p in store.verify(corpus))


# ---- kills and concurrency ------------------------------------------------------------------------
@pytest.mark.parametrize("point", ["leased", "uploaded1", "before_manifest"])
def test_a_kill_at_each_publish_step_leaves_nothing_that_looks_complete(bucket, point):
    root = f"{bucket}/k"
    killed = _child("toy", root, point, "--text", "killed run")
    assert killed.returncode == -9, killed.stderr
    store = open_store(root)
    assert store.list() == []
    with pytest.raises(ArtifactError, match="no artifact"):
        store.resolve("toy")
    time.sleep(3.2)  # its lease expires
    done = _child("toy", root, "none", "--text", "killed run")
    assert done.returncode == 0, done.stderr
    art = store.resolve("toy")
    assert art.read_bytes("data/a.txt") == b"killed run"
    assert store.verify(art) == []
    removed, _ = store.collect()
    assert not any(str(art.path) == r for r in removed)
    assert storage.children(f"{root}/.locks") == []


def test_the_next_build_here_takes_over_at_once_the_lease_of_a_killed_build_of_this_machine(bucket):
    root, lease = f"{bucket}/h", {"KOLECTRA_LEASE_SECONDS": "30"}  # the default is 120 s
    assert _child("toy", root, "uploaded1", "--text", "killed run", env=lease).returncode == -9
    started = time.monotonic()
    done = _child("toy", root, "none", "--text", "killed run", env=lease)
    # before: 'another run (pid N on HOST since ...) is building the same request ...; waiting', the lease
    # of the dead pid waited out (30 s here, 2 minutes by default), then 'expired ...; taking the build over'
    assert done.returncode == 0 and time.monotonic() - started < 20, done.stderr
    assert "is held by no process: that process of this machine has ended" in done.stderr, done.stderr
    assert "is building the same request" not in done.stderr
    store = open_store(root)
    art = store.resolve("toy")
    assert art.read_bytes("data/a.txt") == b"killed run" and store.verify(art) == []
    assert storage.children(f"{root}/.locks") == []


def test_a_lease_of_another_machine_or_a_live_process_is_not_taken_over():
    from kolectra.core import scratch
    from kolectra.pipeline.store.lease import ended_here
    me = scratch.me("lease")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(dead.stdout)
    assert ended_here({"owner": {"pid": gone, "start": 1, "host": me.host}})
    assert not ended_here({"owner": {"pid": me.pid, "start": me.start, "host": me.host}})  # alive
    assert not ended_here({"owner": {"pid": gone, "start": 1, "host": "0badcafe"}})  # another machine's
    assert not ended_here({"pid": gone, "host": "vm"})  # an earlier kolectra's lease: no owner
    assert not ended_here({"owner": {"pid": True, "start": "1", "host": me.host}})  # not a kolectra holder's


def test_a_kill_after_the_manifest_leaves_a_complete_artifact_and_gc_clears_the_lease(bucket):
    root = f"{bucket}/m"
    assert _child("toy", root, "manifest").returncode == -9
    store = open_store(root)
    art = store.resolve("toy")
    assert store.verify(art) == []
    time.sleep(3.2)
    removed, _ = store.collect()
    assert any(r.endswith(".lease") for r in removed)


def test_gc_removes_an_orphaned_prefix_once_its_lease_expired(bucket):
    root = f"{bucket}/g"
    assert _child("toy", root, "uploaded1").returncode == -9
    store = open_store(root)
    [orphan] = storage.children(f"{root}/corpus")
    removed, _ = store.collect(dry_run=True)
    assert not any(orphan in r for r in removed)  # its lease is live: a build may be running
    time.sleep(3.2)
    removed, _ = store.collect()
    assert any(r.endswith(f"corpus/{orphan}") for r in removed)
    assert storage.children(f"{root}/corpus") == []


def test_a_lease_renewed_while_a_waiting_run_reads_it_is_read_again(bucket, monkeypatch):
    """The holder rewrites its lease every third of its life; a run waiting for it reads the lease, and a
    renewal between s3fs opening the object and reading it (s3fs then raises FileExpired: the ETag it
    pinned is gone) is read again, not the waiting run's end."""
    from kolectra.pipeline.store.lease import Lease

    held = Lease(f"{bucket}/r", "corpus", "abc")
    held.version = conditional.create_exclusive(held.url, held._body())
    opened, renewals = storage.open_file, []

    def renewed_after_opening(location, mode="rb"):
        f = opened(location, mode)  # s3fs reads the object's ETag here ...
        if not renewals:  # ... and the holder renews its lease before the read
            renewals.append(conditional.create_exclusive(held.url, held._body(), replacing=held.version))
        return f

    monkeypatch.setattr(storage, "open_file", renewed_after_opening)
    body, version = Lease(f"{bucket}/r", "corpus", "abc").holder()
    assert renewals and body["token"] == held.token and body["pid"] == os.getpid()
    with pytest.raises(OSError, match="no longer exists"):  # what the read met, straight from s3fs
        with opened(held.url) as f:
            conditional.create_exclusive(held.url, held._body(), replacing=renewals[0])
            f.read()


def test_two_identical_builds_at_once_one_builds_the_other_joins(bucket, tmp_path):
    two_identical_builds_at_once(f"{bucket}/c", tmp_path, FAST_LEASE)


def _reviews(n: int = 300) -> bytes:
    """The sample's first ``n`` reviews, gzipped: what a corpus test needs without the job's per-record
    cost of all 4,000 (about 4 of its 12 CPU s)."""
    sample = Path(__file__).resolve().parents[1] / "pipeline" / "sample" / "reviews.jsonl.gz"
    return gzip.compress(b"".join(gzip.decompress(sample.read_bytes()).splitlines(keepends=True)[:n]), mtime=0)


def test_stage_outputs_on_s3_are_read_by_datasets_and_transformers_from_the_local_copy(bucket, tmp_path):
    store = open_store(f"{bucket}/d")
    (tmp_path / "reviews.jsonl.gz").write_bytes(_reviews())
    corpus = stages.corpus(store, [str(tmp_path / "reviews.jsonl.gz")], sets=["min_chars=10"])
    local = store.local(corpus)
    stats = json.loads((local / "stats.json").read_text())
    assert stats["records_in"] == stats["records_out"] + stats["rejected"] + sum(stats["dropped"].values())
    # a damaged local copy is not trusted: re-downloaded
    (local / "stats.json").write_text("{}")
    assert json.loads((store.local(corpus) / "stats.json").read_text()) == stats


@pytest.mark.parametrize("interrupted", [False, True])
def test_gc_on_the_same_machine_leaves_a_live_runs_local_copy_alone(bucket, interrupted):
    """A pretraining build on a bucket works in a local run under the cache, which ``gc`` of that root
    sweeps on this machine. Before, the run's build lock was let go as soon as it was opened: a ``gc``
    while the build ran took the run for dead and removed it (before its first checkpoint, or with
    ``--interrupted`` whatever it held), and the build failed on its own missing files."""
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store.artifacts import Resumable
    from kolectra.pipeline.store.request import Request

    root = f"{bucket}/g"
    request = Request(kind="checkpoint", name="live", stage_version=1, config={"steps": 1})
    seen = {}

    def train(out: Path) -> StageOutput:
        if interrupted:  # working state that --resume could continue: only --interrupted removes it
            (out / "checkpoints").mkdir(parents=True, exist_ok=True)
            (out / "checkpoints" / "state").write_text("step 1")
        seen["removed"], _ = open_store(root).collect(interrupted=interrupted)  # `kolectra artifacts gc`
        (out / "model.txt").write_text("trained")
        return StageOutput(stats={})

    art = open_store(root).build(request, train, resumable=Resumable(family={"kind": "checkpoint"},
                                                                      scratch=("checkpoints",)))
    assert seen["removed"] == []
    assert [f["path"] for f in art.manifest["files"]] == ["model.txt"]


def test_gc_keeps_the_run_state_of_a_rebuild_started_after_the_published_copy(bucket):
    """A --force'd (or stale-parent) pretraining rebuild, interrupted, mirrors the only copy of its
    checkpoints to ROOT/.work; gc dropped them because a copy of the id was published. A run whose
    request.json predates the published manifest is the published copy's own: dropped as before."""
    import time

    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store import workspace
    from kolectra.pipeline.store.request import Request

    root = f"{bucket}/rb"
    store = open_store(root)
    request = Request(kind="checkpoint", name="rb", stage_version=1, config={"steps": 1})
    old_run = f"{root}/.work/checkpoint-{request.id()}"
    storage.write_bytes(f"{old_run}/{workspace.REQUEST}", b"{}")  # a run older than the copy below
    time.sleep(1.1)  # S3 times are whole seconds

    def train(out: Path) -> StageOutput:
        (out / "model.txt").write_text("trained")
        return StageOutput(stats={})

    store.build(request, train)
    assert store.collect()[0] == [old_run]  # published since: dropped
    time.sleep(1.1)
    storage.write_bytes(f"{old_run}/{workspace.REQUEST}", b"{}")  # a rebuild's run, its mirrored checkpoint
    storage.write_bytes(f"{old_run}/out/checkpoints/step-5/model.pt", b"w")
    removed, kept = open_store(root).collect()
    assert removed == [] and [r.path for r in kept] == [old_run]
    assert open_store(root).collect(interrupted=True)[0] == [old_run]


def test_a_kinds_layout_is_checked_on_the_store_too(bucket):
    """An examples artifact whose index names a shard the manifest never listed fails verify there."""
    store = open_store(f"{bucket}/l")
    sample = Path(__file__).resolve().parents[1] / "pipeline" / "sample" / "reviews.jsonl.gz"
    corpus = stages.corpus(store, [str(sample)], sets=["min_chars=10"])
    vocab = stages.vocab(store, corpus, sets=TINY["vocab"])
    ex = stages.examples(store, corpus, vocab, sets=TINY["examples"])
    assert store.verify(ex) == []
    index = json.loads(ex.read_bytes("index.json"))
    index["shards"].append({"path": "data/shard-99999-0000.arrow", "examples": 1})
    # the manifest rewritten to match the edited index: only the layout check can tell
    body = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()
    entry = storage.write_bytes(f"{ex.path}/index.json", body)
    manifest = dict(ex.manifest)
    manifest["files"] = [{**f, **entry, "checksum": storage.checksum_of(storage.info(f"{ex.path}/index.json"))}
                         if f["path"] == "index.json" else f for f in ex.manifest["files"]]
    from kolectra.pipeline.store.manifest import digest, fields_digest, files_digest
    manifest["digest"] = digest(manifest["files"])
    manifest["files_digest"] = files_digest(manifest["files"])
    manifest["fields_digest"] = fields_digest(manifest)
    storage.write_bytes(f"{ex.path}/manifest.json", json.dumps(manifest).encode())
    problems = store.verify(store.resolve(ex.id))
    assert any("shard-99999-0000.arrow: missing" in p for p in problems), problems


def test_a_local_root_takes_a_parent_kept_in_the_bucket_by_its_url(bucket, tmp_path, monkeypatch):
    """A full artifact URL is a ref anywhere: a local root builds from a corpus kept in the bucket,
    and records where it came from; that record is followed once the user names the bucket's root
    (KOLECTRA_PARENT_ROOTS: a manifest alone sends no request to another root, test_store_foreign_parents.py)."""
    sample = Path(__file__).resolve().parents[1] / "pipeline" / "sample" / "reviews.jsonl.gz"
    corpus = stages.corpus(open_store(f"{bucket}/u"), [str(sample)], sets=["min_chars=10"])
    local = open_store(tmp_path / "root")  # a root opened as the CLI does: it follows parents into a bucket
    vocab = stages.vocab(local, str(corpus.path), sets=TINY["vocab"])
    assert vocab.parents == [corpus.id]
    assert vocab.manifest["parent_refs"][0]["path"] == str(corpus.path)
    assert f"MISSING parent {corpus.id} (recorded in {bucket}/u" in "\n".join(local.lineage_lines(vocab))
    monkeypatch.setenv("KOLECTRA_PARENT_ROOTS", f"{bucket}/u")
    local = open_store(tmp_path / "root")
    assert local.verify(vocab) == []
    assert "corpus/" + corpus.path.name in "\n".join(local.lineage_lines(vocab))


def test_corpus_inputs_may_be_globs_in_the_bucket(bucket):
    storage.write_bytes(f"{bucket}/raw/a.jsonl.gz", _reviews(300))
    storage.write_bytes(f"{bucket}/raw/sub/b.txt", b"not matched\n")
    corpus = stages.corpus(open_store(f"{bucket}/g2"), [f"{bucket}/raw/*.jsonl.gz"], sets=["min_chars=10"])
    assert [i["path"] for i in corpus.manifest["inputs"]] == [f"{bucket}/raw/a.jsonl.gz"]
    assert corpus.manifest["stats"]["records_in"] == 300


def test_folder_markers_in_the_bucket_are_no_objects(bucket, capsys):
    # a root copied through a FUSE mount or a console gets a zero-byte "dir/" key for each folder:
    # they made every artifact damaged (rebuilt, named by verify), a kind's marker an incomplete
    # artifact in the list, and gc named it for removal
    from kolectra.core.stage import StageOutput
    from tests.fault_child import toy_request

    def produce(out: Path) -> StageOutput:
        (out / "data").mkdir()
        (out / "data" / "a.txt").write_text("markers")
        return StageOutput(stats={"n": 7})

    store = open_store(f"{bucket}/m")
    art = store.build(toy_request("markers"), produce)
    fs, path = storage.filesystem(str(art.path))
    name, _, key = path.partition("/")
    for marker in ("m/", "m/corpus/", "m/.locks/", f"{key}/", f"{key}/data/"):
        fs.call_s3("put_object", Bucket=name, Key=marker, Body=b"")
    assert sorted(storage.listing(str(art.path))) == ["data/a.txt", "manifest.json"]
    assert storage.children(f"{bucket}/m/corpus") == [art.path.name]
    assert store.verify(art) == [] and store.verify(art, quick=True) == []
    assert store.scan() == ([art], [])
    capsys.readouterr()
    again = store.build(toy_request("markers"), produce)
    assert again == art and "reusing" in capsys.readouterr().err
    assert store.collect(dry_run=True) == ([], [])


_HIDDEN_HOLDER = """
import sys
from kolectra.core import scratch
from kolectra.pipeline.store.lease import ended_here
pid, start = int(sys.argv[1]), int(sys.argv[2])
print(ended_here({"owner": {"pid": pid, "start": start, "host": scratch.HOST}}),
      scratch.alive(scratch.Owner("lease", pid, start, scratch.HOST)))
"""


@pytest.mark.skipif(not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("unshare")
                         and shutil.which("setpriv")), reason="needs root, unshare and setpriv (util-linux)")
def test_a_live_build_of_another_user_hidden_by_proc_s_hidepid_keeps_its_lease():
    """/proc mounted with hidepid=2 (hardened and multi-user machines, HPC login nodes) shows each user
    only their own processes: another user's live build of the same request on this machine has no
    /proc entry, and its lease was taken over at once as if its process had ended (the build then lost
    it: 'lost the lease ... to another run'). Such a holder exists (kill(pid, 0) says EPERM)."""
    def as_user(uid: int) -> list[str]:
        return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]

    holder = subprocess.Popen([*as_user(54321), "sleep", "60"])  # another user's live build
    try:
        start = int(Path(f"/proc/{holder.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
        check = shlex.join([*as_user(54322), sys.executable, "-c", _HIDDEN_HOLDER, str(holder.pid), str(start)])
        proc = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t proc -o hidepid=2 proc /proc && exec {check}"],
                              capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1],
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        if "mount" in proc.stderr and proc.returncode != 0:
            pytest.skip(f"cannot mount a private /proc here: {proc.stderr.strip()[:200]}")
        # before: 'True False' (taken over at once, the live holder counted as ended)
        assert proc.stdout.split() == ["False", "True"], proc.stderr
    finally:
        holder.kill()
        holder.wait()


def test_a_second_ctrl_c_while_asking_whether_the_manifest_landed_removes_nothing(bucket):
    """A Ctrl-C as the manifest was written, then another while the store was asked whether it landed: the
    first's clean-up (an in-place Beam stage's data objects removed as an unfinished build's) ran with the
    manifest in the bucket, which then listed files that were gone. Nothing is removed now, and the line says
    how to tell whether it was published."""
    root = f"{bucket}/sig-twice"
    proc = _child("toy", root, "int_manifest_twice", "--text", "stopped", "--handled", "--in-place")
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    assert "nothing was removed" in proc.stderr and "artifacts verify" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    store = open_store(root)
    art = store.resolve("toy")  # it had landed: the artifact is whole
    assert store.verify(art) == [] and art.read_bytes("data/a.txt") == b"stopped"


@pytest.mark.parametrize("point,in_place", [("int_manifest", True), ("int_manifest", False), ("term_manifest", True),
                                             ("int_release", False)])
def test_a_signal_once_the_manifest_is_in_the_store_says_it_was_published_and_removes_nothing(bucket, point,
                                                                                               in_place):
    """A Ctrl-C or SIGTERM after the build's manifest landed in the bucket (reading the artifact back, the
    run's clean-up, the lease's release): before, 'interrupted; corpus: nothing published under s3://...'
    (or 'nothing was published'), and a Beam stage's (in place) data objects were removed as an unfinished
    build's, the manifest left listing them: the published artifact damaged."""
    root = f"{bucket}/sig-{point}-{in_place}"
    proc = _child("toy", root, point, "--text", "stopped", "--handled", *(["--in-place"] if in_place else []))
    signal_ = "SIGTERM" if point.startswith("term") else "SIGINT"
    store = open_store(root)
    art = store.resolve("toy")
    assert store.verify(art) == [] and art.read_bytes("data/a.txt") == b"stopped", proc.stderr
    word, code = ("terminated", 143) if signal_ == "SIGTERM" else ("interrupted", 130)
    assert (proc.returncode, proc.stdout) == (code, ""), proc.stderr
    assert proc.stderr == (f"kolectra corpus: {word}; corpus: published as {art.path} before the "
                           f"{'interrupt' if code == 130 else 'stop'}\n")
