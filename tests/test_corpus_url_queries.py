"""An ``--input`` https URL with a query (a signed URL's ``?X-Amz-Signature=...``, a download link's
``?download=true``) is read by its path's suffixes, as the same URL without the query is.

The corpus stage knows an input's compression and format by the name's suffix, and read the whole URL:
``.../reviews.jsonl.gz?X-Amz-Signature=...`` ends in its query, so its gzip bytes were read as lines of
text (every line ``invalid_utf8``: the job refused it as not UTF-8, "convert it ... iconv -f cp949"), and
a ``.jsonl`` file's lines went into the corpus as text, each document the JSON of its record.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import threading

import pytest

from kolectra.corpus import compress, inputs, outputs, reader
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store

TEXTS = [f"이 영화 정말 재밌었어요 배우들 연기도 최고였고 {i}번째로 본 영화입니다." for i in range(40)]
SIGNED = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600&X-Amz-Signature=0a1b2c#part"


@pytest.fixture()
def server(tmp_path):
    """Python's file server: it answers a path whatever its query."""
    lines = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(TEXTS))
    (tmp_path / "reviews.jsonl").write_text(lines, encoding="utf-8")
    (tmp_path / "reviews.jsonl.gz").write_bytes(gzip.compress(lines.encode("utf-8")))
    (tmp_path / "reviews.tar.gz").write_bytes(gzip.compress(b"not a stream of text"))
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(quiet, directory=str(tmp_path)))
    threading.Thread(target=served.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{served.server_port}"
    served.shutdown()
    served.server_close()


def test_a_url_s_query_is_no_part_of_its_suffixes(server):
    url = "https://host/dumps/reviews.jsonl.gz" + SIGNED
    assert compress.codec_of(url) == "gzip" and reader.resolve_format(url, "auto") == "jsonl"
    assert reader.resolve_format("https://host/a.parquet?download=true", "auto") == "parquet"
    assert outputs.expected_input_bytes([(url, 100)]) == outputs.expected_input_bytes([("a.jsonl.gz", 100)])
    with pytest.raises(inputs.InputError, match="an archive of several files"):
        inputs.list_inputs([f"{server}/reviews.tar.gz?download=true"])
    # a bucket's key may hold a "?": it is the name there
    assert compress.codec_of("s3://bucket/reviews.gz?v=1") is None


@pytest.mark.parametrize("name", ["reviews.jsonl.gz", "reviews.jsonl"])
def test_a_signed_url_of_a_jsonl_file_builds_the_corpus_of_its_texts(tmp_path, server, name):
    art = stages.corpus(Store(tmp_path / "store"), [f"{server}/{name}{SIGNED}"])
    docs = [json.loads(line) for f in sorted((art.path / "data").glob("*.jsonl.gz"))
            for line in gzip.decompress(f.read_bytes()).decode("utf-8").splitlines()]
    stats = json.loads((art.path / "stats.json").read_text())
    assert stats["records_in"] == len(TEXTS) and not stats.get("rejected")
    assert sorted(d["text"] for d in docs) == sorted(TEXTS)  # the texts, not their records' JSON
