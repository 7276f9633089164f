"""What an examples worker holds while it writes a corpus shard's Arrow files (docs/scale.md, "The
examples job on production-sized shards"): each file is made once, in a buffer of its own size,
with the same bytes as a file written through a growing stream; on a real corpus and vocab, run
by the local runner in this process."""

from __future__ import annotations

import gzip
import json
import random

import pyarrow as pa
import pytest

from kolectra.corpus.examples import build
from kolectra.corpus.examples_config import ExamplesConfig
from kolectra.corpus.examples_format import COLUMNS
from kolectra.vocab.build import build as build_vocab
from kolectra.vocab.config import VocabConfig
from tests.test_vocab_corpus import documents, korean_sentences, write_corpus

CFG = ExamplesConfig(max_seq_length=64, seed=5)  # the default shard_size: one file a corpus shard here
COPIES = 40  # the documents repeated (under new ids): files of about 0.3 MB


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("worker_memory")
    docs = documents(korean_sentences(120, seed=2), random.Random(2), 6)
    corpus = write_corpus(root / "corpus", {"train": docs})
    vocab = root / "vocab"
    vocab.mkdir()
    build_vocab(VocabConfig(vocab_size=800, num_unused=0, report_baseline=False), corpus, vocab)
    path = corpus / "data" / "train-00000-of-00001.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for copy in range(COPIES):
            for doc in lines:
                f.write(json.dumps({**doc, "id": f"{doc['id']}-{copy}"}, ensure_ascii=False) + "\n")
    return {"root": root, "corpus": corpus, "vocab": vocab}


def _old_recipe(path) -> bytes:
    """The file's rows written as the examples job wrote them before: through a growing stream."""
    batch = pa.ipc.open_file(pa.memory_map(str(path))).get_batch(0)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def test_each_arrow_file_is_made_once_in_a_buffer_of_its_size_with_the_same_bytes(inputs):
    out = inputs["root"] / "out"
    out.mkdir()
    # every Arrow allocation of the job (its worker runs in this process) goes through this pool
    pool, default = pa.proxy_memory_pool(pa.default_memory_pool()), pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        build(CFG, inputs["corpus"], inputs["vocab"], out)
    finally:
        pa.set_memory_pool(default)
    files = sorted((out / "data").glob("*.arrow"))
    largest = max(p.stat().st_size for p in files)
    assert largest > 200_000  # large enough that a stream's growth would show
    # a growing stream held the power of two above the file (524,288 bytes for a 404,090-byte file),
    # and then a copy of it as bytes
    assert pool.max_memory() <= largest + 64, (pool.max_memory(), largest)
    for p in files:
        assert p.read_bytes() == _old_recipe(p), p.name
        table = pa.ipc.open_file(pa.memory_map(str(p))).read_all()
        assert table.column_names == list(COLUMNS)
