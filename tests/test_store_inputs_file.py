"""A corpus of many input files keeps their records in ``inputs.jsonl``, not in its manifest
(pipeline/store/inputs.py), with the real corpus stage (Beam, Kiwi) on a local root and on a bucket
(moto's S3 server, tests/s3_support.py); ``INPUTS_INLINE`` is lowered so that a few files pass it.

- the file is listed in ``files`` (the digest covers it), the manifest keeps the first records, the
  count and the file's sha256, and the id is the one the whole request's key hashes to;
- what reads a parent's inputs reads them in that layout: ``show``'s lineage, ``list``, the lineage
  of a child, :func:`inputs.records`; ``require`` (every child stage's first step) and ``verify``
  refuse a tampered file as any file;
- up to the threshold the manifest is laid out as before: every record under ``inputs``, no file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.corpus import build as corpus_build
from kolectra.pipeline import stages
from kolectra.pipeline.cli import main as cli_main
from kolectra.pipeline.cli.artifacts import described, origins
from kolectra.pipeline.store import inputs
from kolectra.pipeline.store.artifacts import ArtifactError, Store, verify_dir
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.manifest import canonical, input_key
from kolectra.pipeline.store.request import ID_CHARS, Request, _without
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

REVIEWS = ["이 영화 정말 재밌었어요 배우들 연기도 최고", "두 번 보고 싶은 영화입니다 추천합니다",
           "지루하고 길어서 중간에 나왔어요 별로", "음악이 좋았고 결말도 마음에 들었다"]


def _files(root: Path) -> list[str]:
    root.mkdir()
    for i, text in enumerate(REVIEWS):
        (root / f"part-{i}.txt").write_text(f"{text} {i}\n", encoding="utf-8")
    return [str(root / "*.txt")]


@pytest.fixture()
def few(monkeypatch):
    """Past two records the inputs go to the file; the manifest keeps the first one."""
    monkeypatch.setattr(inputs, "INPUTS_INLINE", 2)
    monkeypatch.setattr(inputs, "INPUTS_HEAD", 1)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _one_file(out: Path) -> StageOutput:
    (out / "x").write_text("x")
    return StageOutput(stats={})


def _check_spilled(corpus) -> list[dict]:
    """The layout past INPUTS_INLINE; every record, read back streamed."""
    m = corpus.manifest
    entry = next(e for e in m["files"] if e["path"] == "inputs.jsonl")
    assert m["inputs_count"] == len(REVIEWS) and len(m["inputs"]) == 1
    assert m["inputs_file"] == {k: entry[k] for k in ("path", "bytes", "sha256")}
    every = list(inputs.records(corpus.path, m))
    assert [r["path"].rsplit("/", 1)[-1] for r in every] == [f"part-{i}.txt" for i in range(len(REVIEWS))]
    assert every[0] == m["inputs"][0] and all(len(r["sha256"]) == 64 for r in every)  # filled in after the job
    # the id is the hash of the whole request's key, as it was when the manifest held every record
    key = {"kind": "corpus", "stage_version": m["stage_version"], "parents": [],
           "config": _without(m["config"], corpus_build.OPERATIONAL),
           "inputs": [input_key(r) for r in every],
           "libraries": {k: m["provenance"]["libraries"][k] for k in stages.LIBS_CORPUS}}
    assert m["id"] == hashlib.sha256(canonical(key)).hexdigest()[:ID_CHARS]
    return every


def test_many_inputs_go_to_a_file_that_show_list_lineage_and_children_read(tmp_path, few, capsys):
    store = Store(tmp_path / "root")
    corpus = stages.corpus(store, _files(tmp_path / "in"), sets=["min_chars=10"])
    _check_spilled(corpus)
    assert verify_dir(corpus.path) == []
    # a child's lineage and `kolectra artifacts show`: the first record, then how many more and where
    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)),
                        _one_file)
    lines = store.lineage_lines(vocab)
    assert sum("input " in line for line in lines) == 1
    assert any("... 3 more inputs (4 in all, listed in inputs.jsonl)" in line for line in lines), lines
    assert cli_main(["artifacts", "show", corpus.id, "--out", str(store.root)]) == 0
    assert "3 more inputs (4 in all" in capsys.readouterr().out
    # `kolectra artifacts list`: its origins, and what tells two corpora of one name apart
    assert origins(corpus) == "part-0.txt, +3 more"
    assert described(corpus)["inputs_file"] == f"4 inputs@{corpus.manifest['inputs_file']['sha256'][:8]}"
    # a tampered inputs file is refused as any file: by verify, by a child's require, by the streamed read
    sidecar = corpus.path / "inputs.jsonl"
    body = sidecar.read_bytes()
    sidecar.write_bytes(body.replace(b"part-3.txt", b"part-9.txt"))
    assert any("inputs.jsonl: sha256 differs from manifest" in p for p in verify_dir(corpus.path))
    with pytest.raises(ArtifactError, match="inputs.jsonl"):
        Store(tmp_path / "root").require(corpus.id, "corpus")
    with pytest.raises(ArtifactError, match="inputs.jsonl: changed since it was published"):
        list(inputs.records(corpus.path, corpus.manifest))
    # a manifest whose inputs_file names no listed file is refused whole
    mp = corpus.path / "manifest.json"
    m = json.loads(mp.read_text())
    m["inputs_file"]["sha256"] = "0" * 64
    mp.write_text(json.dumps(m))
    assert "inputs_file" in verify_dir(corpus.path)[0]


def test_up_to_the_threshold_the_manifest_holds_every_record_as_before(tmp_path):
    store = Store(tmp_path / "root")
    corpus = stages.corpus(store, _files(tmp_path / "in"), sets=["min_chars=10"])
    m = corpus.manifest
    assert list(m) == ["schema", "kind", "name", "id", "parents", "parent_refs", "inputs", "config", "stage_version",
                       "files", "digest", "files_digest", "stats", "provenance", "fields_digest"]
    assert len(m["inputs"]) == len(REVIEWS) and "inputs.jsonl" not in {e["path"] for e in m["files"]}
    assert list(inputs.records(corpus.path, m)) == m["inputs"]


def test_a_stage_may_not_write_the_inputs_file(tmp_path, few):
    store = Store(tmp_path / "root")
    records = tuple({"path": f"/x/{i}", "bytes": i, "sha256": f"{i:064x}"} for i in range(3))
    with pytest.raises(ArtifactError, match="stage wrote its own inputs.jsonl"):
        store.build(Request(kind="corpus", name="c", stage_version=1, config={}, inputs=records),
                    lambda out: _one_file(out) if (out / "inputs.jsonl").write_text("x") else None)


def test_many_inputs_on_a_bucket(bucket, few):
    for i, text in enumerate(REVIEWS):
        storage.write_bytes(f"{bucket}/raw/part-{i}.txt", f"{text} {i}\n".encode())
    store = open_store(f"{bucket}/root")
    corpus = stages.corpus(store, [f"{bucket}/raw/part-*.txt"], sets=["min_chars=10"])
    _check_spilled(corpus)
    assert store.verify(corpus) == []
    assert "3 more inputs" in "\n".join(store.lineage_lines(corpus))
    # rewritten in the bucket: named by verify, refused before a child reads the corpus
    where = f"{corpus.path}/inputs.jsonl"
    storage.write_bytes(where, storage.read_bytes(where).replace(b"part-3.txt", b"part-9.txt"))
    assert any(where in p for p in store.verify(corpus))
    with pytest.raises(ArtifactError, match="inputs.jsonl"):
        open_store(f"{bucket}/root").require(corpus.id, "corpus")


def test_the_id_is_the_hash_of_the_whole_key_fed_in_batches(monkeypatch):
    from kolectra.pipeline.store import request as the_request

    monkeypatch.setattr(the_request, "ID_BATCH", 2)  # 5 records: batches of 2, 2 and 1
    records = tuple({"path": f"/말뭉치/{i}.txt", "bytes": i, "identity": f"local:/말뭉치/{i}.txt:{i}:{i * 7}"}
                    for i in range(5))
    for some in (records, records[:1], ()):
        request = Request(kind="corpus", name="c", stage_version=3, config={"가": {"b": [1, "한"]}}, inputs=some,
                          libraries=("apache-beam",), operational=("가.b",))
        assert request.id() == hashlib.sha256(canonical(request.key())).hexdigest()[:ID_CHARS]
