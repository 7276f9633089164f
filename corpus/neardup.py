"""Near-duplicate removal for the corpus stage: MinHash signatures + LSH banding (Broder 1997;
Leskovec et al., Mining of Massive Datasets, ch. 3), as used for web corpora (Gopher, datatrove).

Each document's character 5-gram shingles are MinHashed with ``num_perm`` seeded universal hash
functions; the signature is cut into ``bands`` of ``rows``. Two documents whose Jaccard
similarity is s share at least one band with probability 1 - (1 - s^rows)^bands, an S-curve
whose midpoint (1/bands)^(1/rows) sits near the configured threshold.

Documents sharing a bucket (band, band hash) are *candidate* pairs; a candidate becomes an edge
only if the signatures' agreement (an unbiased estimate of Jaccard) reaches the threshold, which
removes the S-curve's false positives. Edges are clustered with union-find (connected
components); each cluster keeps its smallest key ``(source, line)`` and drops the rest as
``near_duplicate`` - so which copy survives depends on the data only, never on bundling or the
number of workers. Chains are clusters: with A~B and B~C, C goes even if A !~ C (as in
datatrove's MinHash dedup). Memory: buckets are grouped by Beam (spread over workers); the edge
list is clustered in one place and holds only verified near-duplicate pairs (a few per
duplicate), not documents.

Pure functions first (:func:`find_near_duplicates` runs the whole method in memory, for tests and
small inputs), then the Beam transform :class:`NearDedup` used by ``corpus/build.py``.
"""

from __future__ import annotations

import hashlib
import zlib

import apache_beam as beam
import numpy as np

from kolectra.core.errors import UserInputError

NUM_PERM = 128
SHINGLE = 5
_PRIME = 4294967291  # largest prime below 2^32: the hash family wraps around it


def bands_rows(threshold: float, num_perm: int = NUM_PERM) -> tuple[int, int]:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` whose S-curve midpoint is nearest ``threshold``."""
    best = None
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        mid = (1.0 / bands) ** (1.0 / rows)
        cand = (abs(mid - threshold), -bands, bands, rows)
        best = cand if best is None or cand < best else best
    return best[2], best[3]


def permutations(seed: int, num_perm: int = NUM_PERM) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    # (a*h + b) mod p with a < 2^31, b < 2^32 and 32-bit h stays below 2^64: exact in uint64
    a = rng.integers(1, 1 << 31, size=num_perm, dtype=np.uint64)
    b = rng.integers(0, 1 << 32, size=num_perm, dtype=np.uint64)
    return a, b


def shingles(text: str, n: int = SHINGLE) -> np.ndarray:
    """32-bit hashes (crc32: stable across processes, unlike ``hash``) of the character n-grams."""
    compact = "".join(text.split())
    grams = {compact[i : i + n] for i in range(max(1, len(compact) - n + 1))}
    return np.fromiter((zlib.crc32(g.encode("utf-8")) for g in grams), dtype=np.uint64, count=len(grams))


def signature(text: str, perms: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    a, b = perms
    h = shingles(text)
    return ((a[:, None] * h[None, :] + b[:, None]) % _PRIME).min(axis=1)


def band_keys(sig: np.ndarray, bands: int, rows: int) -> list[str]:
    """One bucket id per band: the band index and a hash of its rows."""
    return [
        f"{i}:{hashlib.blake2b(sig[i * rows : (i + 1) * rows].tobytes(), digest_size=8).hexdigest()}"
        for i in range(bands)
    ]


def sig_bytes(sig: np.ndarray) -> bytes:
    """A compact, picklable signature: values are below 2^32, so uint32."""
    return sig.astype(np.uint32).tobytes()


def estimated_jaccard(a: bytes, b: bytes) -> float:
    """Share of agreeing MinHash values: an unbiased estimate of the shingle Jaccard similarity."""
    return float((np.frombuffer(a, dtype=np.uint32) == np.frombuffer(b, dtype=np.uint32)).mean())


MAX_BUCKET_PAIRS = 64  # beyond this many members, pair each with the smallest only (linear)


def candidate_pairs(members: list[tuple]) -> list[tuple[tuple, tuple]]:
    """Pairs ``(key_a, key_b)`` (a < b) of one bucket's ``(key, signature)`` members.
    All pairs for small buckets; a star around the smallest key for huge ones (template spam),
    which still joins the whole bucket into one cluster when the star edges verify."""
    members = sorted(members)
    if len(members) <= MAX_BUCKET_PAIRS:
        return [(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
    return [(members[0], b) for b in members[1:]]


def verified_edges(members: list[tuple], threshold: float) -> list[tuple]:
    """Candidate pairs of one bucket whose estimated Jaccard reaches ``threshold``, as key pairs."""
    return [
        (a[0], b[0]) for a, b in candidate_pairs(members) if a[0] != b[0] and estimated_jaccard(a[1], b[1]) >= threshold
    ]


def cluster_drops(edges) -> dict:
    """Union-find over ``(key_a, key_b)`` edges: ``{dropped key: kept key}``, where the kept key
    is the smallest of its connected component. Deterministic for any edge order."""
    parent: dict = {}

    def find(x):
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:  # the smaller root wins, so each root is its component's minimum
            parent[max(ra, rb)] = min(ra, rb)
            parent.setdefault(min(ra, rb), min(ra, rb))
    return {x: find(x) for x in parent if find(x) != x}


def find_near_duplicates(texts: dict, threshold: float, seed: int = 0) -> dict:
    """The whole method in memory: ``{key: text}`` -> ``{dropped key: kept key}``."""
    bands, rows = bands_rows(threshold)
    perms = permutations(seed, bands * rows)
    buckets: dict[str, list] = {}
    for key, text in texts.items():
        sig = signature(text, perms)
        for bucket in band_keys(sig, bands, rows):
            buckets.setdefault(bucket, []).append((key, sig_bytes(sig)))
    edges = {e for members in buckets.values() if len(members) > 1 for e in verified_edges(members, threshold)}
    return cluster_drops(sorted(edges))


def jaccard(x: str, y: str) -> float:
    """Exact shingle Jaccard similarity (for tests and spot checks)."""
    sx, sy = set(shingles(x).tolist()), set(shingles(y).tolist())
    return len(sx & sy) / len(sx | sy) if sx | sy else 1.0


# ---------------------------------------------------------------- Beam glue

TALLY = "tally"  # same tag as corpus.build's tallies
SAMPLES = "samples"  # (reason, document) of dropped documents, for samples/dropped.jsonl


class _BandKeys(beam.DoFn):
    """(text_key, document) -> (bucket, ((source, line), signature)) for each LSH band."""

    def __init__(self, bands: int, rows: int, seed: int):
        self.bands, self.rows, self.seed = bands, rows, seed

    def setup(self):
        self.perms = permutations(self.seed, self.bands * self.rows)

    def process(self, keyed):
        _, doc = keyed
        sig = signature(doc["text"], self.perms)
        member = ((doc["source"], doc["line"]), sig_bytes(sig))
        for bucket in band_keys(sig, self.bands, self.rows):
            yield bucket, member


def _bucket_edges(bucket, threshold: float):
    _, members = bucket
    members = list(members)
    return verified_edges(members, threshold) if len(members) > 1 else []


def _marks(edges: list):
    """All verified edges -> (dropped key, kept key) per non-minimal cluster member."""
    return sorted(cluster_drops(sorted(edges)).items())


def _keep_unmarked(joined, samples: str | None = None):
    _, groups = joined
    if groups["mark"]:
        yield beam.pvalue.TaggedOutput(TALLY, (("dropped", "near_duplicate"), len(groups["doc"])))
        if samples:
            for _, doc in groups["doc"]:
                yield beam.pvalue.TaggedOutput(samples, ("near_duplicate", {**doc, "kept": list(groups["mark"][0])}))
    else:
        yield from groups["doc"]


class NearDedup(beam.PTransform):
    """(text_key, document) -> the same minus near duplicates; a ``TALLY`` output counts the drops,
    a ``SAMPLES`` output carries the dropped documents (reason, document + the kept key) for the
    artifact's samples."""

    def __init__(self, threshold: float, seed: int):
        super().__init__()
        self.threshold, self.seed = threshold, seed

    def expand(self, docs):
        if self.threshold <= 0:
            raise UserInputError("NearDedup needs a threshold in (0, 1]; leave the step out to keep near duplicates")
        bands, rows = bands_rows(self.threshold)
        by_pos = docs | "KeyByPosition" >> beam.Map(lambda kv: ((kv[1]["source"], kv[1]["line"]), kv))
        marks = (
            docs
            | "MinHashBands" >> beam.ParDo(_BandKeys(bands, rows, self.seed))
            | "GroupBuckets" >> beam.GroupByKey()
            | "VerifiedEdges" >> beam.FlatMap(_bucket_edges, self.threshold)
            | "DistinctEdges" >> beam.Distinct()
            | "CollectEdges" >> beam.combiners.ToList()
            | "UnionFind" >> beam.FlatMap(_marks)
        )
        return (
            {"doc": by_pos, "mark": marks}
            | "JoinMarks" >> beam.CoGroupByKey()
            | "KeepUnmarked" >> beam.FlatMap(_keep_unmarked, SAMPLES).with_outputs(TALLY, SAMPLES, main="docs")
        )
