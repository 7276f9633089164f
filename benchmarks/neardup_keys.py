"""Near-dup's band records with 7-byte bucket keys (``neardup.BUCKET_BYTES``) against the 10-byte
keys before them (the band index and a 64-bit hash of its rows), on the NSMC review shards.

Every document sends one ``(bucket, id)`` record per band into ``GroupBands``, near-dup's biggest
shuffle (docs/scale.md). A shorter key is fewer bytes a record, and more chance that two
unrelated band values share a bucket: such a pair is a spurious candidate, which its signatures
then reject (only CPU is at stake). This measures, on the unique reviews (as
``benchmarks/neardup.py`` reads them), through the stage's own functions:

- ``candidate_pairs`` with each key (``neardup.bucket_candidates`` over the buckets), and the
  pairs only one of them gives (``only_old``, ``only_new``);
- ``verified_pairs`` and ``drops`` (``neardup.star_rounds`` of the verified pairs) with each;
- ``element_bytes``: one band record encoded with the coders the runner gives ``KV[bytes, int]``
  (``BytesCoder`` and ``VarIntCoder``, nested) plus Beam's framing, for a compact id of source
  rank 5 (as ``benchmarks/neardup_bits.py``);
- ``expected_spurious_pairs``: M^2 / 2^(8 * key bytes + 1) for M band records, here and at
  60 M documents (34 GB of reviews).

value: the band record's bytes with ``BUCKET_BYTES``; baseline: with the 10-byte key; ratio = value / baseline
(lower is better, so long as the candidates hold).

    python benchmarks/neardup_keys.py [--quick] [--reviews GLOB | --data DIR] [--sizes 8]

Full: all 8 review files (about 90 CPU s); ``--quick``: the first file.
"""

from __future__ import annotations

import hashlib

from apache_beam.coders import coders
from common import cpu_seconds, emit
from neardup import SEED, THRESHOLD, review_files, unique_reviews

from kolectra.corpus import neardup, neardup_beam

FRAMING = 12  # Beam's windowed-value framing in the global window (benchmarks/shuffle_bytes.py)
DOCS_34GB = 60_000_000  # review-like documents in 34 GB of text (docs/scale.md)


def old_band_keys(sig, bands: int, rows: int) -> list[bytes]:
    """The keys before: the band index (2 bytes) and a 64-bit hash of its rows."""
    return [i.to_bytes(2, "big") + hashlib.blake2b(sig[i * rows : (i + 1) * rows].tobytes(), digest_size=8).digest()
            for i in range(bands)]


def element_bytes(bucket: bytes) -> int:
    doc_id = 5 << neardup_beam.LINE_BITS | 123_456
    coder = coders.TupleCoder([coders.BytesCoder(), coders.VarIntCoder()])
    return len(coder.encode_nested((bucket, doc_id))) + FRAMING


def spurious(records: int, key_bytes: int) -> float:
    return records * records / 2.0 ** (8 * key_bytes + 1)


def main(argv: list[str] | None = None) -> dict:
    files = review_files(__doc__, "about 90 CPU s", "neardup_keys", argv)
    t0 = cpu_seconds()
    texts = unique_reviews(files)
    bands, rows = neardup.bands_rows(THRESHOLD)
    perms = neardup.permutations(SEED, bands * rows)
    sigs, buckets = {}, {"old": {}, "new": {}}
    for key, text in texts.items():
        sig = neardup.signature(text, perms)
        sigs[key] = neardup.sig_bytes(sig)
        for name, keys in (("old", old_band_keys), ("new", neardup.band_keys)):
            for bucket in keys(sig, bands, rows):
                buckets[name].setdefault(bucket, []).append(key)
    out = {}
    for name, by_bucket in buckets.items():
        pairs = {p for ids in by_bucket.values() for p in neardup.bucket_candidates(ids, neardup.CHAIN_LIMIT)}
        verified = sorted(p for p in pairs if neardup.estimated_jaccard(sigs[p[0]], sigs[p[1]]) >= THRESHOLD)
        out[name] = {"pairs": pairs, "buckets": len(by_bucket), "verified_pairs": len(verified),
                     "drops": neardup.star_rounds(verified, neardup_beam.ROUNDS)[0],
                     "element_bytes": element_bytes(next(iter(by_bucket)))}
    old, new = out["old"], out["new"]
    records = len(texts) * bands
    rows_out = {
        name: {"key_bytes": len(next(iter(buckets[name]))), "buckets": o["buckets"], "candidate_pairs": len(o["pairs"]),
               "verified_pairs": o["verified_pairs"], "drops": len(o["drops"]), "element_bytes": o["element_bytes"]}
        for name, o in out.items()}
    for name, row in rows_out.items():
        print(name, row)
    return emit("neardup_keys", "bytes per band record", new["element_bytes"], "10-byte bucket keys", old["element_bytes"],
                {"files": len(files), "documents": len(texts), "bands": bands, "rows": rows, "threshold": THRESHOLD,
                 "only_old": len(old["pairs"] - new["pairs"]), "only_new": len(new["pairs"] - old["pairs"]),
                 "same_drops": old["drops"] == new["drops"],
                 "expected_spurious_pairs": spurious(records, neardup.BUCKET_BYTES),
                 "expected_spurious_pairs_60M_docs": round(spurious(DOCS_34GB * bands, neardup.BUCKET_BYTES), 2),
                 "expected_spurious_pairs_60M_docs_old": spurious(DOCS_34GB, 8) * bands,
                 "cpu_s": round(cpu_seconds() - t0, 1)},
                keys=rows_out)


if __name__ == "__main__":
    main()
