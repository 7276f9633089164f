"""The file-name suffixes by which the corpus stage knows an input's format: whole-file compressions
(read by :mod:`kolectra.corpus.compress`) and Parquet (:mod:`kolectra.corpus.parquet`). A leaf module,
so that the input listing (:mod:`kolectra.corpus.inputs`), which both readers import, can name them."""

from urllib.parse import urlsplit

COMPRESSED = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}  # suffix -> codec
PARQUET = (".parquet", ".pq")


def file_name(path: str) -> str:
    """``path`` as its suffixes are read, lower-cased: an http(s) URL's path alone. A signed URL
    (``.../reviews.jsonl.gz?X-Amz-Signature=...``) or a download link (``?download=true``) ends in its query,
    so a gzip file's bytes were read as lines of text and a JSONL file as text (a bucket's key is its
    name whole: a ``?`` there is part of it)."""
    if path[:8].lower().startswith(("http://", "https://")):
        path = urlsplit(path).path
    return path.lower()
