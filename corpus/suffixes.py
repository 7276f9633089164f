"""The file-name suffixes by which the corpus stage knows an input's format: whole-file compressions
(read by :mod:`kolectra.corpus.compress`) and Parquet (:mod:`kolectra.corpus.parquet`). A leaf module,
so that the input listing (:mod:`kolectra.corpus.inputs`), which both readers import, can name them."""

COMPRESSED = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}  # suffix -> codec
PARQUET = (".parquet", ".pq")
