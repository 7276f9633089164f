"""The artifact store on an object store: ROOT is ``s3://bucket/prefix`` on a real S3-compatible
server (moto's, on 127.0.0.1; tests/s3_support.py), reached only through the standard environment.

- the whole chain (corpus -> vocab -> examples -> pretrain -> fine-tuning) gives the digests of the
  same request on a local root, every artifact verifies, a rerun reuses them;
- kills at each step of the publish protocol leave nothing that looks complete; a rerun publishes,
  ``artifacts gc`` removes what the kill left once its lease expired;
- two identical builds at once: one builds, the other waits and joins;
- an object altered after publishing is named by ``verify`` and refused before a stage reads it;
- store failures (no bucket, no endpoint, no credentials) are one line and exit 2.
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
from kolectra.pipeline.store.artifacts import ArtifactError, Store
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.remote import RemoteStore
from tests.s3_support import bucket, free_port, s3_endpoint, two_identical_builds_at_once  # noqa: F401  (fixtures)
from tests.test_end_to_end import TINY

FAST_LEASE = {"KOLECTRA_LEASE_SECONDS": "3", "KOLECTRA_LEASE_POLL_SECONDS": "0.2"}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _child(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.fault_child", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **FAST_LEASE, **(env or {})},
                          cwd=Path(__file__).resolve().parents[1])


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


# ---- the chain ------------------------------------------------------------------------------------
def test_whole_chain_on_s3_matches_local_digests(bucket, tmp_path):
    local = Store(tmp_path / "local")
    remote = open_store(f"{bucket}/kolectra")
    assert isinstance(remote, RemoteStore)
    run_sample(local, sets=TINY)
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


# ---- failures -------------------------------------------------------------------------------------
def test_a_missing_bucket_is_one_line(s3_endpoint):
    r = _cli("artifacts", "list", "--out", "s3://no-such-bucket-kolectra/x")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "does not exist" in r.stderr and "no-such-bucket" in r.stderr


def test_a_root_without_a_bucket_is_one_line(s3_endpoint):
    r = _cli("artifacts", "list", "--out", "s3://")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "names no bucket" in r.stderr, r.stderr


def test_an_unreachable_endpoint_is_one_line(s3_endpoint):
    closed = f"http://127.0.0.1:{free_port()}"
    r = _cli("artifacts", "list", "--out", "s3://b/x", env={"AWS_ENDPOINT_URL": closed, "AWS_MAX_ATTEMPTS": "1"})
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "cannot reach the store" in r.stderr and closed in r.stderr


def test_missing_credentials_are_one_line(s3_endpoint, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"))
    r = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "list", "--out", "s3://b/x"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "credentials" in r.stderr


def test_credentials_confined_to_the_roots_prefix_open_it(tmp_path):
    # a shared bucket's usual grant: list, read and write below a prefix, no HEAD of the bucket (on
    # S3 that needs s3:ListBucket on the whole bucket, refused under an s3:prefix condition; moto
    # models it as the separate s3:HeadBucket action). The root was refused: "permission refused"
    import boto3

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", "from moto.server import main; main()", "-H", "127.0.0.1",
                               "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True, env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"})
    try:
        endpoint = f"http://127.0.0.1:{port}"
        admin = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "admin",
                 "aws_secret_access_key": "admin"}
        deadline = time.monotonic() + 60
        while True:
            try:
                boto3.client("s3", **admin).create_bucket(Bucket="shared")  # the 4 actions before IAM applies
                break
            except Exception:  # noqa: BLE001 - not listening yet
                assert server.poll() is None and time.monotonic() < deadline, "moto server did not start"
                time.sleep(0.2)
        iam = boto3.client("iam", **admin)
        iam.create_user(UserName="team")
        iam.put_user_policy(UserName="team", PolicyName="team-prefix", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": "arn:aws:s3:::shared"},
                {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                 "Resource": "arn:aws:s3:::shared/team/*"}]}))
        key = iam.create_access_key(UserName="team")["AccessKey"]
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
               "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"], "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_EC2_METADATA_DISABLED": "true", "KOLECTRA_CACHE": str(tmp_path / "cache")}
        ok = _child("toy", "s3://shared/team/kolectra", "none", "--text", "a team's prefix", env=env)
        assert ok.returncode == 0, ok.stderr
        assert ok.stdout.startswith("s3://shared/team/kolectra/corpus/toy-")
        listed = _cli("artifacts", "list", "--out", "s3://shared/team/kolectra", env=env)
        assert listed.returncode == 0 and "toy-" in listed.stdout, listed.stderr
        # what the credentials may not touch is still one line naming it
        other = _cli("artifacts", "list", "--out", "s3://elsewhere/k", env=env)
        assert other.returncode == 2 and other.stderr.count("\n") == 1 and "s3://elsewhere/k" in other.stderr
        assert "permission refused" in other.stderr
        # a wrong secret or an unknown key is named as such, not as a permission refused
        for wrong in ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, {"AWS_ACCESS_KEY_ID": "AKIANOSUCHKEY0000000"}):
            refused = _cli("artifacts", "list", "--out", "s3://shared/team/kolectra", env={**env, **wrong})
            assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
            assert "refused the credentials (check the access key and secret)" in refused.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)


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


# ---- pretraining resumes from the store -------------------------------------------------------------
def test_pretrain_killed_mid_run_resumes_from_the_bucket_on_a_fresh_machine(bucket, tmp_path, capsys, monkeypatch):
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    root = f"{bucket}/p"
    store = open_store(root)
    monkeypatch.setenv("KOLECTRA_PARENT_ROOTS", root)  # the local straight run's parents are the bucket's

    _, _, ex = small_chain(store)
    straight = stages.pretrain(open_store(tmp_path / "local"), str(store.local(ex)), preset="tiny", sets=SETS)

    killed = _child("pretrain", root, str(ex.path), "step10", *(f"--set={s}" for s in SETS))
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert store.list("checkpoint") == []
    kept = storage.listing(f"{root}/.work")
    assert any("/out/checkpoints/step-00000008/manifest.json" in k for k in kept), sorted(kept)
    assert any("/parts/metrics.jsonl/" in k for k in kept), sorted(kept)  # the log, a part a save

    os.environ["KOLECTRA_CACHE"] = str(tmp_path / "another-machine")  # nothing local: all from the bucket
    capsys.readouterr()
    art = stages.pretrain(open_store(root), str(ex.path), preset="tiny", sets=SETS, resume=True)
    err = capsys.readouterr().err
    assert "fetching the interrupted run's step-00000008" in err and "resuming at step 8" in err
    assert art.manifest["stats"]["resumed_from_step"] == 8
    assert art.read_bytes("hf/discriminator/model.safetensors") == \
        (straight.path / "hf" / "discriminator" / "model.safetensors").read_bytes()

    def logged(data: bytes) -> list[dict]:  # the lines but their timings
        return [{k: v for k, v in json.loads(x).items() if k not in ("tokens_per_s", "mfu")} for x in data.splitlines()]

    assert logged(art.read_bytes("metrics.jsonl")) == logged((straight.path / "metrics.jsonl").read_bytes())
    assert storage.children(f"{root}/.work") == []  # published: the run's state in the store is gone
    assert store.verify(art) == []


def _resume_on_another_machine(root: str, examples: str, tmp_path, monkeypatch, capsys) -> str:
    """``pretrain --resume`` on ``root`` as another machine runs it (an empty cache), in this process (as
    the test of a run killed mid-run does): a fresh process started torch and transformers again, about
    5 CPU s a test, for nothing these tests check. What it wrote to stderr."""
    from tests.test_faults_pretrain import SETS

    for name, value in {**FAST_LEASE, "KOLECTRA_CACHE": str(tmp_path / "another-machine")}.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    stages.pretrain(open_store(root), examples, preset="tiny", sets=SETS, resume=True)
    return capsys.readouterr().err


@pytest.mark.parametrize("at, in_store", [(2, None), (6, "step-00000004")])
def test_a_second_sigterm_during_the_copy_to_the_store_says_which_checkpoint_the_store_holds(bucket, tmp_path, at,
                                                                                             in_store, monkeypatch,
                                                                                             capsys):
    """SIGTERM at a step, then again while its checkpoint is copied to the store: the line said the
    state was kept here `and s3://.../.work; --resume continues it` while the store held no complete
    checkpoint (--resume on another machine: 'nothing to resume; starting fresh'). The copy before
    (step 4, saved every 4) stays complete in the store until the new one is; the line names it."""
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    root = f"{bucket}/t{at}"
    _, _, ex = small_chain(open_store(root))
    stopped = _child("pretrain", root, str(ex.path), f"term{at}", *(f"--set={s}" for s in SETS))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    line = stopped.stderr.strip().splitlines()[-1]
    assert line.startswith(f"kolectra pretrain: terminated (SIGTERM) after step {at} of 12, saved as the checkpoint "
                           f"step-{at:08d}; checkpoint: its working state is kept in "), line
    kept = storage.listing(f"{root}/.work")
    assert any(f"/out/checkpoints/step-{at:08d}/" in k for k in kept)  # a part of its copy: cut short
    assert sorted(k.split("/")[3] for k in kept if k.endswith("/manifest.json")) == ([in_store] if in_store else [])
    if in_store is None:
        assert f"only: the store holds no complete checkpoint of it (step-{at:08d}'s copy to " in line, line
        assert line.endswith("did not complete); --resume continues it on this machine only"), line
    else:
        assert f"holds {in_store} only (step-{at:08d}'s copy to it did not complete); --resume continues from " \
               f"step-{at:08d} on this machine, from {in_store} on another" in line, line
    # as the line says, on another machine
    again = _resume_on_another_machine(root, str(ex.path), tmp_path, monkeypatch, capsys)
    assert (f"fetching the interrupted run's {in_store}" in again if in_store
            else "nothing to resume for this request; starting fresh" in again), again[-3000:]


def test_a_second_sigterm_as_the_manifest_of_the_copy_to_the_store_lands_does_not_deny_it(bucket, tmp_path, monkeypatch,
                                                                                        capsys):
    """The second SIGTERM after the checkpoint's manifest reached the store, before the upload returned
    (1 of 12 real trials with TERM twice 0.2 s apart on moto): the line said the store 'holds step-00000004
    only (step-00000006's copy to it did not complete); --resume continues ... from step-00000004 on
    another', while the store held step-00000006 complete, from which another machine's --resume went on.
    The store is not asked while stopping (it may be what hangs); the line says the copy may be there."""
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    root = f"{bucket}/tl"
    _, _, ex = small_chain(open_store(root))
    stopped = _child("pretrain", root, str(ex.path), "termlast6", *(f"--set={s}" for s in SETS))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    line = stopped.stderr.strip().splitlines()[-1]
    kept = storage.listing(f"{root}/.work")
    assert sorted(k.split("/")[3] for k in kept if k.endswith("/manifest.json")) == ["step-00000004", "step-00000006"]
    assert "did not complete" not in line, line  # before: 'holds step-00000004 only (step-00000006's copy ...'
    assert ("holds step-00000004, and step-00000006 too unless its copy was cut short as its manifest was "
            "written; --resume continues from step-00000006 on this machine, from the newer of the two there on "
            "another") in line, line
    again = _resume_on_another_machine(root, str(ex.path), tmp_path, monkeypatch, capsys)
    assert "fetching the interrupted run's step-00000006" in again, again[-3000:]


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


def test_a_step_a_follower_s_part_never_reached_keeps_the_one_before_in_the_store(bucket, tmp_path):
    """Each rank copies its own part of a checkpoint to the store, rank 0 the rest and the manifest, and
    rank 0 then removed every older step. A follower whose part of step 8 lagged and whose machine went
    (2 gloo ranks on moto, rank 1 killed before its upload) left the store step 8 without rank-1.pt and no
    step 4: every --resume fetched step 8 and ended ('.../rank-1.pt: missing; was this checkpoint written
    with another number of ranks?'), the run lost. Now the step before stays until the new one has as many
    parts, and a step lacking one is not complete: --resume fetches step 4."""
    store = open_store(f"{bucket}/parts")
    store._run_url, store._logs = storage.join(store.url, ".work", "checkpoint-q7"), {}

    def saved(rank: int, step: int) -> None:
        step_dir = tmp_path / f"rank-{rank}" / "checkpoints" / f"step-{step:08d}"
        step_dir.mkdir(parents=True)
        names = [f"rank-{rank}.pt"] + ["model.safetensors", "state.pt", "manifest.json"] * (rank == 0)
        for name in names:
            (step_dir / name).write_text(f"{name} {step}")
        store._run_rank = rank
        store.checkpoint_saved(step_dir)

    def steps() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for rel in storage.listing(f"{store._run_url}/out/checkpoints"):
            found.setdefault(rel.split("/")[0], []).append(rel.split("/")[1])
        return {step: sorted(names) for step, names in found.items()}

    saved(0, 4), saved(1, 4)
    saved(0, 8)  # rank 1's part of step 8 never comes
    assert steps() == {"step-00000004": ["manifest.json", "model.safetensors", "rank-0.pt", "rank-1.pt", "state.pt"],
                       "step-00000008": ["manifest.json", "model.safetensors", "rank-0.pt", "state.pt"]}
    assert store._steps(storage.listing(store._run_url)) == ["step-00000004"]  # what --resume fetches
    saved(1, 8)
    saved(0, 12)  # step 8 complete now: step 4 goes, step 8 stays until step 12 has rank 1's part
    assert sorted(steps()) == ["step-00000008", "step-00000012"]
    saved(1, 12), saved(0, 16), saved(1, 16), saved(0, 20)
    assert sorted(steps()) == ["step-00000016", "step-00000020"]


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
