"""Near-duplicate removal for the corpus stage: MinHash signatures + LSH banding (Broder 1997;
Leskovec et al., Mining of Massive Datasets, ch. 3), as used for web corpora (Gopher, datatrove).

Each document's character 5-gram shingles are MinHashed with ``num_perm`` seeded universal hash
functions; the signature is cut into ``bands`` of ``rows``. Two documents whose Jaccard
similarity is s share at least one band with probability 1 - (1 - s^rows)^bands, an S-curve
whose midpoint (1/bands)^(1/rows) sits near the configured threshold.

Documents sharing a bucket (band, band hash) are *candidate* pairs; a candidate becomes an edge
only if the signatures' agreement (an unbiased estimate of Jaccard) reaches the threshold, which
removes the S-curve's false positives. Edges are clustered into connected components; each keeps
its smallest key ``(source, line)`` and drops the rest as ``near_duplicate`` - so which copy
survives depends on the data only, never on bundling or the number of workers. Chains are
clusters: with A~B and B~C, C goes even if A !~ C (as in datatrove's MinHash dedup).

Two forms of the method share these functions. :func:`find_near_duplicates` runs it in memory,
every pair of a bucket a candidate and union-find over the edges (the exact reference, for tests
and small inputs). The corpus stage runs it in Beam stages (``corpus/neardup_beam.py``): a
bucket's members linked in sorted order (:func:`bucket_links`), the candidates verified by joining
signatures by id, components found in rounds of large-star/small-star (:func:`star_rounds` is the
same in memory). How the two differ, measured: docs/corpus.md (near-dup section).
"""

from __future__ import annotations

import hashlib
import itertools
import zlib
from collections.abc import Iterable, Iterator

import numpy as np

NUM_PERM = 128
SHINGLE = 5
_PRIME = 4294967291  # largest prime below 2^32: the hash family wraps around it
TALLY = "tally"  # same tag as corpus.build's tallies
SAMPLES = "samples"  # (reason, document) of dropped documents, for samples/dropped.jsonl


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
    """The hash family's (a, b), each from SHA-256 of (seed, index): fixed by their definition, where
    numpy's ``Generator.integers`` may change its algorithm between numpy versions (NEP 19), which
    would change which documents go under the same corpus id."""
    words = [hashlib.sha256(f"minhash\x00{seed}\x00{i}".encode()).digest() for i in range(num_perm)]
    # (a*h + b) mod p with a < 2^31, b < 2^32 and 32-bit h stays below 2^64: exact in uint64
    a = np.array([1 + int.from_bytes(w[:8], "little") % ((1 << 31) - 1) for w in words], dtype=np.uint64)
    b = np.array([int.from_bytes(w[8:16], "little") % (1 << 32) for w in words], dtype=np.uint64)
    return a, b


def shingles(text: str, n: int = SHINGLE) -> np.ndarray:
    """32-bit hashes (crc32: stable across processes, unlike ``hash``) of the character n-grams."""
    compact = "".join(text.split())
    grams = {compact[i : i + n] for i in range(max(1, len(compact) - n + 1))}
    return np.fromiter((zlib.crc32(g.encode("utf-8")) for g in grams), dtype=np.uint64, count=len(grams))


# Shingles hashed at a time: the hashes of all of a document's shingles at once took a num_perm x
# shingles array, which grows with max_chars (which has no upper bound); a running minimum over
# slices of this many holds num_perm x SIGN_SLICE values whatever the document.
SIGN_SLICE = 1 << 12


def signature(text: str, perms: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    a, b = perms
    h = shingles(text)
    sig = ((a[:, None] * h[None, :SIGN_SLICE] + b[:, None]) % _PRIME).min(axis=1)
    for i in range(SIGN_SLICE, len(h), SIGN_SLICE):
        np.minimum(sig, ((a[:, None] * h[None, i : i + SIGN_SLICE] + b[:, None]) % _PRIME).min(axis=1), out=sig)
    return sig


# A bucket key is a 56-bit hash of the band's rows salted with the band's index: all bands share
# one key space, and 7 bytes are 8 on the wire (a length byte), where the band index beside a 64-bit
# hash took 11. Unrelated band values meet with probability 2^-56 a pair: with M band records about
# M^2 / 2^57 spurious candidate pairs, 3 at 60 M documents of 11 bands (6.6e8 records), each
# rejected by its signatures; docs/scale.md has the figures.
BUCKET_BYTES = 7


def band_keys(sig: np.ndarray, bands: int, rows: int) -> list[bytes]:
    """One bucket key per band, ``BUCKET_BYTES``: a hash of its rows, salted with the band's index."""
    return [
        hashlib.blake2b(sig[i * rows : (i + 1) * rows].tobytes(), digest_size=BUCKET_BYTES,
                        salt=i.to_bytes(2, "big")).digest()
        for i in range(bands)
    ]


# b-bit minwise hashing (Li and König, "b-Bit Minwise Hashing", WWW 2010): a signature keeps only
# the low ``SIG_BITS`` bits of each MinHash value. Two values that differ then agree by chance with
# probability 2^-b, which :func:`estimated_jaccard` takes back out; at 8 bits that is 1/256 and the
# estimate's spread at the threshold grows by under 1 %, for a quarter of the bytes (the signatures
# are the biggest shuffle of the corpus job with near-dup on: docs/scale.md). Band keys are cut
# from the full values before this, so the candidates are the same at any b.
SIG_BITS = 8


def _sig_dtype(bits: int) -> type:
    return np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32  # below 8: a byte each, unpacked


def sig_bytes(sig: np.ndarray, bits: int = SIG_BITS) -> bytes:
    """A compact, picklable signature: each value's low ``bits`` bits (up to 32)."""
    return (sig & np.uint64((1 << bits) - 1)).astype(_sig_dtype(bits)).tobytes()


def estimated_jaccard(a: bytes, b: bytes, bits: int = SIG_BITS) -> float:
    """Share of agreeing ``bits``-bit MinHash values, less the agreement that chance gives: an
    unbiased estimate of the shingle Jaccard similarity (Li and König's estimator for sets far
    smaller than the hash range, here 2^32)."""
    dtype = _sig_dtype(bits)
    agree = float((np.frombuffer(a, dtype=dtype) == np.frombuffer(b, dtype=dtype)).mean())
    chance = 2.0**-bits
    return (agree - chance) / (1.0 - chance)


MAX_BUCKET_PAIRS = 64  # beyond this many members, pair each with the smallest only (linear)
CHAIN_LIMIT = 1000  # the staged method's default: larger buckets are streamed as a star (CorpusConfig)


def candidate_pairs(members: list[tuple]) -> list[tuple[tuple, tuple]]:
    """Pairs ``(key_a, key_b)`` (a < b) of one bucket's ``(key, signature)`` members, for the exact
    method. All pairs for small buckets; a star around the smallest key for huge ones (template
    spam), which still joins the whole bucket into one cluster when the star edges verify."""
    members = sorted(members)
    if len(members) <= MAX_BUCKET_PAIRS:
        return [(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
    return [(members[0], b) for b in members[1:]]


def verified_edges(members: list[tuple], threshold: float) -> list[tuple]:
    """Candidate pairs of one bucket whose estimated Jaccard reaches ``threshold``, as key pairs."""
    return [
        (a[0], b[0]) for a, b in candidate_pairs(members) if a[0] != b[0] and estimated_jaccard(a[1], b[1]) >= threshold
    ]


def bucket_links(ids) -> list[tuple]:
    """The staged method's candidates in one bucket: its members in sorted order, each linked to
    the next (a chain) and to the smallest (a star) - 2(k-1) pairs, not k(k-1)/2, and no member in
    more than two chain pairs per bucket. The star checks every member against the copy that would
    survive; the chain catches near-duplicate chains (a~b~c with a !~ c) that the star alone misses
    when a member is not close to the smallest (docs/corpus.md, near-dup section, measures both)."""
    ids = sorted(set(ids))
    return sorted({*zip(ids, ids[1:]), *((ids[0], b) for b in ids[2:])})


def reiterable(group: Iterable) -> Iterable:
    # A GroupByKey's values may be iterated more than once (Beam tests it: BEAM-8645), and runners
    # page a large group in from their shuffle as it is read (Dataflow, Flink, Spark): two passes
    # hold one value at a time, where a list would hold the whole group. A one-shot iterator
    # cannot be read twice.
    if iter(group) is group:
        raise TypeError("near-dup: a group's values must be re-iterable (a GroupByKey's are), not a one-shot iterator")
    return group


def bucket_candidates(ids: Iterable, chain_limit: int) -> Iterator[tuple]:
    """One bucket's candidates, holding at most ``chain_limit`` members: :func:`bucket_links` for a
    bucket of up to that many; above it (template spam) each member is paired with the smallest
    only, in two streamed passes, so a bucket of millions costs the step no more memory than one
    of ``chain_limit``."""
    ids = reiterable(ids)
    head = list(itertools.islice(ids, chain_limit + 1))
    if len(head) <= chain_limit:
        yield from (bucket_links(head) if len(head) > 1 else ())
        return
    del head
    smallest = min(ids)
    yield from ((smallest, i) for i in ids if i != smallest)


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


# ---------------------------------------------------------------- connected components in rounds
# The alternating algorithm of Kiveris et al., "Connected Components in MapReduce and Beyond"
# (SoCC 2014): each round groups the edges by node and rewires them towards smaller nodes, so the
# graph shrinks to one star per component centred on its smallest node, in O(log n) rounds in
# practice. A round needs only one node's neighbours at a time; nothing holds all edges.


# Each step reads its node's group in one or two streamed passes (see ``reiterable``) and keeps
# no set: a round's edges are made distinct between steps instead (``StarComponents``), so a
# component's centre, whose group is the whole component, costs a step no more than a leaf.


def large_star(u, neighbours) -> Iterator[tuple]:
    """Every larger neighbour of ``u`` is linked to the smallest of ``u`` and its neighbours."""
    neighbours = reiterable(neighbours)
    m = min(min(neighbours), u)
    return ((m, v) for v in neighbours if v > u)


def small_star(u, smaller) -> Iterator[tuple]:
    """``u`` and its smaller neighbours are linked to the smallest of them (which drops ``u``'s
    links to the others)."""
    smaller = reiterable(smaller)
    m = min(smaller)
    yield m, u
    yield from ((m, v) for v in smaller if v != m)


def star_mark(u, neighbours) -> tuple[tuple | None, bool]:
    """``((u, kept), converged)``: a node with a smaller neighbour is dropped for the smallest one
    (``None`` when it has none: it is kept). Converged means one star per component, each centred
    on its smallest node: a node links to one smaller node and no larger ones, or to larger ones
    only. Before that, every node marked still has a smaller node of its component (it may be
    dropped and nothing wrong is dropped); some components keep more than one copy."""
    lo = hi = None  # the smallest and largest of the smaller neighbours, in one pass
    larger = False
    for v in neighbours:
        if v < u:
            lo, hi = (v, v) if lo is None else (min(lo, v), max(hi, v))
        else:
            larger = True
    converged = lo is None or (lo == hi and not larger)
    return ((u, lo) if lo is not None else None), converged


def both_ways(edge: tuple) -> list[tuple]:
    a, b = edge
    return [(a, b), (b, a)]


def by_larger(edge: tuple) -> tuple:
    a, b = edge
    return (max(a, b), min(a, b))


def _grouped(pairs) -> dict:
    groups: dict = {}
    for k, v in pairs:
        groups.setdefault(k, []).append(v)
    return groups


def star_rounds(edges, rounds: int) -> tuple[dict, int]:
    """The Beam step's rounds run in memory (for tests): ``({dropped: kept}, unconverged nodes)``."""
    edges = sorted(set(map(tuple, edges)))
    for _ in range(rounds):
        large = _grouped(p for e in edges for p in both_ways(e))
        edges = sorted({e for u, nb in large.items() for e in large_star(u, nb)})
        small = _grouped(map(by_larger, edges))
        edges = sorted({e for u, nb in small.items() for e in small_star(u, nb)})
    marks = [star_mark(u, nb) for u, nb in _grouped(p for e in edges for p in both_ways(e)).items()]
    return dict(m for m, _ in marks if m), sum(not ok for _, ok in marks)


def find_near_duplicates_staged(texts: dict, threshold: float, seed: int = 0, rounds: int = 8,
                                chain_limit: int = CHAIN_LIMIT) -> tuple[dict, int]:
    """The Beam stages' method in memory (``corpus/neardup_beam.py``): ``{key: text}`` ->
    ``({dropped key: kept key}, unconverged nodes)``; keys must sort as (source, line) does."""
    bands, rows = bands_rows(threshold)
    perms = permutations(seed, bands * rows)
    sigs, buckets = {}, {}
    for key, text in texts.items():
        sig = signature(text, perms)
        sigs[key] = sig_bytes(sig)
        for bucket in band_keys(sig, bands, rows):
            buckets.setdefault(bucket, []).append(key)
    pairs = {p for ids in buckets.values() for p in bucket_candidates(ids, chain_limit)}
    return star_rounds([(a, b) for a, b in pairs if estimated_jaccard(sigs[a], sigs[b]) >= threshold], rounds)
