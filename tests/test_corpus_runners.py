"""The corpus and examples jobs on Beam's portable path - the one Flink and Spark take: job
submission to a job service (``--job_endpoint embed``), SDK workers started by a separate worker
pool process (``worker_pool_main``, ``--environment_type EXTERNAL``) that shares nothing with the
launcher but the file system, and outputs written to ``--corpus_staging``. Both jobs must give
the same bytes as the default in-process runner. One worker pool serves the whole module."""

import gzip
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.corpus import build as corpus_build
from kolectra.corpus.config import default_config
from kolectra.corpus.examples import build as build_examples
from kolectra.corpus.examples_config import ExamplesConfig
from kolectra.vocab.build import build as build_vocab
from kolectra.vocab.config import VocabConfig
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)

SAMPLE = Path(__file__).resolve().parents[1] / "pipeline" / "sample" / "reviews.jsonl.gz"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def worker_pool(s3_endpoint):
    """``python -m apache_beam.runners.worker.worker_pool_main`` in its own session; it starts
    each SDK worker as ``python -c ...``, so this interpreter's directory goes first on PATH. It
    starts after the S3 server, so its workers find the bucket's endpoint and credentials in their
    environment, as a cluster's workers find theirs."""
    port = _free_port()
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    pool = subprocess.Popen([sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                             f"--service_port={port}"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("localhost", port), timeout=1).close()
            break
        except OSError:
            assert pool.poll() is None and time.monotonic() < deadline, "worker pool did not start"
            time.sleep(0.2)
    yield f"localhost:{port}"
    os.killpg(pool.pid, 15)  # the pool and any SDK worker it still runs
    pool.wait(timeout=30)


def _portable(pool: str) -> list[str]:
    return ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL",
            f"--environment_config={pool}"]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_corpus_and_examples_on_the_portable_runner_match_the_default(worker_pool, tmp_path):
    lines = gzip.decompress(SAMPLE.read_bytes()).splitlines(keepends=True)[:300]
    src = tmp_path / "reviews.jsonl"
    src.write_bytes(b"".join(lines))
    cfg = default_config()
    default, portable, staging = tmp_path / "default", tmp_path / "portable", tmp_path / "staging"
    for d in (default, portable, staging):
        d.mkdir()
    corpus_build.build(cfg, [str(src)], default, [])
    corpus_build.build(cfg, [str(src)], portable, [*_portable(worker_pool), f"--corpus_staging={staging}"])
    assert _files(default) == _files(portable)
    assert list(staging.iterdir()) == []  # fetched into the artifact, then removed

    vocab = tmp_path / "vocab"
    vocab.mkdir()
    build_vocab(VocabConfig(vocab_size=2000, num_unused=0, report_baseline=False), default, vocab)
    ex_cfg = ExamplesConfig(max_seq_length=32, shard_size=64)
    outs = {}
    for name, args in (("default", []), ("portable", _portable(worker_pool))):
        outs[name] = tmp_path / f"examples-{name}"
        outs[name].mkdir()
        build_examples(ex_cfg, default, vocab, outs[name], args)
    assert _files(outs["default"]) == _files(outs["portable"])
    assert any(p.suffix == ".arrow" for p in outs["portable"].rglob("*"))  # the job wrote shards


def test_the_portable_runners_workers_write_straight_into_the_bucket(worker_pool, bucket, s3_endpoint, tmp_path,  # noqa: F811
                                                                      monkeypatch):
    """A store root: the external pool's workers write the corpus under the artifact's prefix and
    report what they wrote; no staging copy, no file through the launcher, the local root's digest.
    The workers read the listing, and a large gzip file's pieces (copied by the plan: corpus/pieces.py),
    from the job's folder in the bucket, which is gone after the job."""
    from kolectra.core import storage
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.artifacts import Store
    from kolectra.pipeline.store.factory import open_store

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    lines = gzip.decompress(SAMPLE.read_bytes()).splitlines(keepends=True)[:300]
    more = gzip.compress(b"".join(gzip.decompress(SAMPLE.read_bytes()).splitlines(keepends=True)[300:500]))
    src = f"{bucket}/raw/reviews.jsonl"  # the input on the store too
    storage.write_bytes(src, b"".join(lines))
    storage.write_bytes(f"{bucket}/raw/more.jsonl.gz", more)
    with answered(s3_endpoint) as requests:
        remote = stages.corpus(open_store(f"{bucket}/root"), [f"{bucket}/raw/*"], beam_args=_portable(worker_pool),
                               sets=["split_bytes=1024"])  # pieces: same artifact (an operational setting)
    copies = {r.key for r in requests if r.operation == "PutObject" and "/_job/pieces/" in r.key}
    assert len(copies) > 5 and all(k.endswith(".zst") for k in copies)  # the gzip file's pieces, on the store
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "reviews.jsonl").write_bytes(b"".join(lines))
    (tmp_path / "raw" / "more.jsonl.gz").write_bytes(more)
    local = stages.corpus(Store(tmp_path / "root"), [str(tmp_path / "raw" / "*")])
    assert remote.manifest["digest"] == local.manifest["digest"]
    assert not [k for k in storage.listing(f"{bucket}/root") if "_job/" in k]
    assert open_store(f"{bucket}/root").verify(remote) == []
    assert sorted(storage.listing(str(remote.path))) == sorted([*(f["path"] for f in remote.manifest["files"]),
                                                               "manifest.json"])
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.jsonl.gz"))
