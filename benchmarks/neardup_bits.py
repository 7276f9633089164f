"""How many bits of each MinHash value near-dup's verification needs: b-bit minwise hashing
(``neardup.SIG_BITS``) against full 32-bit values, on the NSMC review shards.

The corpus job shuffles every document's signature to verify the candidate pairs its band
buckets give (``JoinSignatures``, the biggest shuffle with near-dup on: docs/scale.md). Keeping the
low b bits of each value cuts those bytes by 32/b; two values that differ then agree by chance
with probability 2^-b, which the estimator takes back out, and its spread grows. This measures
what that costs where it matters, on real candidates: the staged method's candidate pairs
(``neardup.bucket_candidates`` over the band buckets, the same at any b) of the unique reviews
(NFC, stripped, the first copy of each text kept, as ``benchmarks/neardup.py`` reads them), each
verified with b = 32, 16, 8, 4 and 2 bits (through the stage's own functions), and compared
with the pair's exact shingle Jaccard similarity (``neardup.jaccard``) at the threshold:

- ``precision`` / ``recall`` of the verified pairs against the exact ``J >= threshold`` pairs;
- ``flips_vs_32``: pairs whose verdict differs from the 32-bit one;
- ``drops`` and ``same_drops_as_32``: documents dropped once the verified pairs are clustered
  (``neardup.star_rounds``), and how many of them the 32-bit run drops too, for the same kept copy;
- ``signature_bytes``: one signature's bytes, and the encoded shuffle element ``(id, (tag,
  signature))`` with Beam's framing, as ``benchmarks/shuffle_bytes.py`` counts it.

value: the encoded signature element at ``SIG_BITS`` in bytes; baseline: the same at 32 bits;
ratio = value / baseline (lower is better, so long as precision and recall hold).

    python benchmarks/neardup_bits.py [--quick] [--reviews GLOB | --data DIR] [--sizes 8]

Full: all 8 review files (about 3 CPU minutes); ``--quick``: the first file, or without
``--reviews``/``--data`` the embedded sample (``pipeline/sample/reviews.jsonl.gz``, 4,000 reviews).
"""

from __future__ import annotations

import numpy as np
from apache_beam.coders import coders
from common import cpu_seconds, emit
from neardup import SEED, THRESHOLD, review_files, unique_reviews

from kolectra.corpus import neardup, neardup_beam

BITS = (32, 16, 8, 4, 2)
FRAMING = 12  # Beam's windowed-value framing in the global window (benchmarks/shuffle_bytes.py)


def candidates(texts: dict, perms, bands: int, rows: int) -> tuple[dict, set]:
    """``({key: full signature}, {candidate pair})`` as the corpus job's band buckets give them."""
    sigs, buckets = {}, {}
    for key, text in texts.items():
        sig = neardup.signature(text, perms)
        sigs[key] = sig
        for bucket in neardup.band_keys(sig, bands, rows):
            buckets.setdefault(bucket, []).append(key)
    pairs = {p for ids in buckets.values() for p in neardup.bucket_candidates(ids, neardup.CHAIN_LIMIT)}
    return sigs, pairs


def estimate(a: np.ndarray, b: np.ndarray, bits: int) -> float:
    return neardup.estimated_jaccard(neardup.sig_bytes(a, bits), neardup.sig_bytes(b, bits), bits)


def element_bytes(sig: np.ndarray, bits: int) -> int:
    """The ``JoinSignatures`` element of one signature, encoded as the runner does (its key an int
    id, its value a tagged tuple: Beam's FastPrimitivesCoder) plus the framing."""
    packed = neardup.sig_bytes(sig, bits) if bits >= 8 else bytes(len(sig) * bits // 8)  # as if bit-packed
    doc_id = 5 << neardup_beam.LINE_BITS | 123_456  # a typical compact id: source rank 5, line 123,456
    return len(coders.FastPrimitivesCoder().encode((doc_id, (neardup_beam.SIG, packed)))) + FRAMING


def main(argv: list[str] | None = None) -> dict:
    files = review_files(__doc__, "about 3 CPU minutes", "neardup_bits", argv)
    t0 = cpu_seconds()
    texts = unique_reviews(files)
    bands, rows = neardup.bands_rows(THRESHOLD)
    sigs, pairs = candidates(texts, neardup.permutations(SEED, bands * rows), bands, rows)
    truth = {p for p in pairs if neardup.jaccard(texts[p[0]], texts[p[1]]) >= THRESHOLD}
    verified = {bits: {p for p in pairs if estimate(sigs[p[0]], sigs[p[1]], bits) >= THRESHOLD} for bits in BITS}
    drops = {bits: neardup.star_rounds(sorted(v), neardup_beam.ROUNDS)[0] for bits, v in verified.items()}
    one = next(iter(sigs.values()))
    rows_out = []
    for bits in BITS:
        v, d = verified[bits], drops[bits]
        rows_out.append({
            "bits": bits, "verified_pairs": len(v),
            "precision": round(len(v & truth) / len(v), 4) if v else 1.0,
            "recall": round(len(v & truth) / len(truth), 4) if truth else 1.0,
            "flips_vs_32": len(v ^ verified[32]), "drops": len(d),
            "same_drops_as_32": sum(d.get(k) == kept for k, kept in drops[32].items()),
            "signature_bytes": len(one) * bits // 8, "element_bytes": element_bytes(one, bits)})
    for row in rows_out:
        print(row)
    at = {r["bits"]: r for r in rows_out}
    value, base = at[neardup.SIG_BITS]["element_bytes"], at[32]["element_bytes"]
    return emit("neardup_bits", "bytes per signature element", value, "32-bit signatures", base,
                {"files": len(files), "documents": len(texts), "candidate_pairs": len(pairs),
                 "exact_pairs_at_threshold": len(truth), "threshold": THRESHOLD, "perms": bands * rows,
                 "sig_bits": neardup.SIG_BITS, "cpu_s": round(cpu_seconds() - t0, 1)},
                bits=rows_out)


if __name__ == "__main__":
    main()
