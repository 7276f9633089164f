"""The corpus stage's near-duplicate step as Beam stages (``corpus/neardup.py`` has the method and
its pure functions), laid out as web-scale MinHash dedup does it (datatrove's MinHash dedup, the
C4 and NeMo Curator pipelines), so that no element and no worker holds the corpus's pairs, and no
step holds a group that grows with the data (a bucket or a cluster of template spam): a step
reads its GroupByKey group in streamed passes, which runners page in from their shuffle.

1. ``MinHash``: each document's signature, once; out go one *band record* per band (the bucket,
   7 bytes (``neardup.BUCKET_BYTES``), and the document's compact id, an int) and one signature
   record keyed by the id.
2. ``PackBands`` -> ``GroupBands`` -> ``LinkSorted``: the band records go packed, 16 bytes each,
   per coarse key (the bucket's top bits: :mod:`corpus.neardup_bands`, which says why), and the
   step that reads a coarse group sorts them by (bucket, id) with bounded memory and walks the
   buckets: a bucket's members in sorted order, each linked to the next and to the smallest
   (:func:`neardup.bucket_links`), ids only; a bucket of more than ``chain_limit`` members, each to
   the smallest only, in one pass (the rule of :func:`neardup.bucket_candidates`); ``DistinctPairs``.
3. ``JoinSignatures`` -> ``GroupPairs`` -> ``Verify``: each candidate meets the two signatures by
   id (one shuffle of the signatures, one of the candidates with theirs) and stays if their
   agreement reaches the threshold.
4. ``Components``: connected components in ``rounds`` rounds of large-star/small-star
   (:func:`neardup.large_star`), each a GroupByKey of the edges by node and a ``Distinct`` of the
   edges it gives (the steps keep no sets), then a check that every
   component became one star round its smallest node. Each node not at a component's centre is
   dropped for it. Should a graph need more rounds than it got (a chain of near duplicates
   thousands long), nodes that still have a smaller neighbour are dropped for it and local minima
   are kept: no document is dropped wrongly, some clusters keep more than one copy, and the
   ``neardup/unconverged_nodes`` counter says how many nodes were left (and a warning, once a worker).
5. ``JoinMarks``: documents meet their marks by id (without their source and line, which the id
   holds); marked ones are counted and sampled.

The compact id is the source's rank among the job's sources above the line number, so sorting ids
sorts by (source, line): each cluster keeps its smallest (source, line), as the in-memory method.
The ranks come in as a PCollection of (rank, source) (the corpus job's listing) and are read as
multimap side inputs, a key at a time (``_Ranked``): no step holds a table of every source, which
would grow with the input files (16 MB a step at 100,000 files).
Every step is a function of its group's contents only, so the result does not depend on bundling
or on the number of workers.
"""

from __future__ import annotations

import logging

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from kolectra.core.errors import UserInputError
from kolectra.corpus import neardup, neardup_bands

TALLY, SAMPLES = neardup.TALLY, neardup.SAMPLES
SIGS = "signatures"
PLACE = ("source", "line")  # the fields a compact id holds
ROUNDS = 8  # large+small star rounds: enough for a sorted chain of 200 near duplicates (docs/corpus.md)
LINE_BITS = 40  # a compact id is source rank << 40 | line

_log = logging.getLogger(__name__)


class _Ranked(beam.DoFn):
    """A step that reads a multimap side input (source -> rank, or rank -> source) a key at a time:
    the runner serves the table (Beam's Fn API reads a multimap side input by key and forgets it
    after the bundle), and the step remembers at most ``MEMO`` answers, so its memory does not grow
    with the number of sources."""

    MEMO = 4096

    def start_bundle(self):
        self.memo = {}

    def one(self, table, key):
        if key not in self.memo:
            found = list(table[key])
            if len(found) != 1:  # every document comes from a listed file; this would be a bug upstream
                raise ValueError(f"near-dup: {key!r} is not one of the job's sources (found {len(found)} matches)")
            if len(self.memo) >= self.MEMO:
                self.memo.clear()
            self.memo[key] = found[0]
        return self.memo[key]


class _CompactIds(_Ranked):
    """(text_key, document) -> (compact id, (text_key, document)); ``ranks``: source -> rank."""

    def process(self, keyed, ranks):
        source, line = keyed[1]["source"], keyed[1]["line"]
        if not 0 <= line < 1 << LINE_BITS:
            raise ValueError(f"near-dup: document ({source!r}, {line}) has a line number out of range")
        rank = self.one(ranks, source)
        if rank >= 1 << (64 - LINE_BITS):  # the packed band records hold an id in 64 bits
            raise ValueError(f"near-dup: more than {1 << (64 - LINE_BITS):,} input files ({source!r} is number "
                             f"{rank + 1:,}); merge them into fewer files")
        yield rank << LINE_BITS | line, keyed


class _KeepUnmarked(_Ranked):
    """(id, {doc, mark}) -> the document, its source and line back from its id, unless marked:
    then tallied and, with ``samples``, sampled with the kept copy's (source, line); ``names``:
    rank -> source."""

    def __init__(self, samples: str | None = None):
        self.samples = samples

    def key(self, names, doc_id: int) -> tuple[str, int]:
        return self.one(names, doc_id >> LINE_BITS), doc_id & ((1 << LINE_BITS) - 1)

    def process(self, joined, names):
        doc_id, groups = joined
        source, line = self.key(names, doc_id)
        docs = [(key, {"source": source, "line": line, **rest}) for key, rest in groups["doc"]]
        if groups["mark"]:
            yield beam.pvalue.TaggedOutput(TALLY, (("dropped", "near_duplicate"), len(docs)))
            if self.samples:
                kept = list(self.key(names, groups["mark"][0]))
                for _, doc in docs:
                    yield beam.pvalue.TaggedOutput(self.samples, ("near_duplicate", {**doc, "kept": kept}))
        else:
            yield from docs


class _Sign(beam.DoFn):
    """(id, (text_key, document)) -> band records (bucket, id) and a ``SIGS`` record (id, signature)."""

    def __init__(self, bands: int, rows: int, seed: int):
        self.bands, self.rows, self.seed = bands, rows, seed

    def setup(self):
        self.perms = neardup.permutations(self.seed, self.bands * self.rows)

    def process(self, keyed):
        doc_id, (_, doc) = keyed
        sig = neardup.signature(doc["text"], self.perms)
        yield beam.pvalue.TaggedOutput(SIGS, (doc_id, neardup.sig_bytes(sig)))
        for bucket in neardup.band_keys(sig, self.bands, self.rows):
            yield bucket, doc_id


NEAR = "near_dup"  # the first part of this step's tally keys: stats.json's "near_dup" block


class _PackBands(beam.DoFn):
    """(bucket, id) band records -> (coarse key, packed records) (:mod:`corpus.neardup_bands`), sent
    every ``FLUSH_RECORDS`` records and at the bundle's end."""

    def start_bundle(self):
        self.buckets, self.ids = [], []

    def process(self, record):
        bucket, doc_id = record
        self.buckets.append(neardup_bands.bucket_int(bucket))
        self.ids.append(doc_id)
        if len(self.ids) >= neardup_bands.FLUSH_RECORDS:
            yield from self._flush()

    def finish_bundle(self):
        for item in self._flush():
            yield GlobalWindows.windowed_value(item)

    def _flush(self):
        buckets, ids, self.buckets, self.ids = self.buckets, self.ids, [], []
        return neardup_bands.pack(buckets, ids) if ids else ()


class _Link(beam.DoFn):
    """(coarse key, packed chunks) -> candidate pairs, bucket by bucket (:mod:`corpus.neardup_bands`,
    :func:`neardup.bucket_candidates`' rule); a bucket over the chain limit is tallied
    (``star_only_buckets``, and its members), since it is linked more loosely."""

    def __init__(self, chain_limit: int):
        self.chain_limit = chain_limit

    def process(self, group):
        _, chunks = group
        pairs, walk = neardup_bands.group_pairs(chunks, self.chain_limit)
        yield from pairs
        for star_pairs in walk.star_pairs():
            yield beam.pvalue.TaggedOutput(TALLY, ((NEAR, "star_only_buckets"), 1))
            yield beam.pvalue.TaggedOutput(TALLY, ((NEAR, "star_only_documents"), star_pairs + 1))


SIG, PAIR = 0, 1  # tags of a document's signature and of its candidate pairs' other ends, grouped by id


def _signed_pairs(doc_id, tagged):
    """A document's signature out to each candidate pair it is in, keyed by the pair. The group is
    read in two passes, never listed: the smallest member of a bucket of template spam is in a
    pair with every other member (a CoGroupByKey would list them all in one element)."""
    sig = next((v for tag, v in tagged if tag == SIG), None)
    if sig is None:  # every id of a pair comes from a signed document; this would be a bug upstream
        raise ValueError(f"near-dup: document id {doc_id} is in candidate pairs but has no signature")
    for tag, other in tagged:
        if tag == PAIR:
            yield (min(doc_id, other), max(doc_id, other)), sig


def _verified(pair_sigs, threshold: float):
    pair, sigs = pair_sigs
    a, b = list(sigs)
    yield beam.pvalue.TaggedOutput(TALLY, ((NEAR, "candidate_pairs"), 1))
    if neardup.estimated_jaccard(a, b) >= threshold:
        yield beam.pvalue.TaggedOutput(TALLY, ((NEAR, "verified_pairs"), 1))
        yield pair


class _Marks(beam.DoFn):
    """(node, neighbours) of the last round -> (node, kept) for nodes that go; counts unconverged."""

    def __init__(self, rounds: int):
        self.rounds = rounds

    def setup(self):
        self.unconverged = beam.metrics.Metrics.counter("neardup", "unconverged_nodes")
        self.warned = False

    def process(self, grouped):
        mark, converged = neardup.star_mark(*grouped)
        if not converged:
            self.unconverged.inc()
            yield beam.pvalue.TaggedOutput(TALLY, ((NEAR, "unconverged_nodes"), 1))
            if not self.warned:  # once a worker; the counter has them all
                self.warned = True
                _log.warning("near-dup: a cluster did not become a star in %d rounds (document id %s); it may keep "
                             "more than one copy (counter neardup/unconverged_nodes)", self.rounds, grouped[0])
        if mark:
            yield mark


class Outputs(dict):
    """A transform's named outputs, also as attributes (``.docs``, ``.marks``), as Beam's own
    ``with_outputs`` results read."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class StarComponents(beam.PTransform):
    """Edges (a, b) -> ``.marks``: (node, smallest node of its component) for every other node of a
    component; ``[TALLY]``: the nodes that did not converge."""

    def __init__(self, rounds: int = ROUNDS):
        super().__init__()
        self.rounds = rounds

    def expand(self, edges):
        for r in range(self.rounds):
            edges = (
                edges
                | f"LargeStarKeys{r}" >> beam.FlatMap(neardup.both_ways)
                | f"LargeStarGroups{r}" >> beam.GroupByKey()
                | f"LargeStar{r}" >> beam.FlatMapTuple(neardup.large_star)
                | f"LargeStarEdges{r}" >> beam.Distinct()  # the steps keep no sets: edges made distinct here
                | f"SmallStarKeys{r}" >> beam.Map(neardup.by_larger)
                | f"SmallStarGroups{r}" >> beam.GroupByKey()
                | f"SmallStar{r}" >> beam.FlatMapTuple(neardup.small_star)
                | f"SmallStarEdges{r}" >> beam.Distinct()
            )
        marks = (
            edges
            | "MarkKeys" >> beam.FlatMap(neardup.both_ways)
            | "MarkGroups" >> beam.GroupByKey()
            | "Marks" >> beam.ParDo(_Marks(self.rounds)).with_outputs(TALLY, main="marks")
        )
        return Outputs(marks=marks.marks, **{TALLY: marks[TALLY]})


def _without_place(doc_id, keyed):
    """The document as it meets its mark: its source and line are in its id, so they do not cross
    the shuffle (on short documents a quarter of the element: 197 -> 147 bytes for a review)."""
    key, doc = keyed
    return doc_id, (key, {k: v for k, v in doc.items() if k not in PLACE})


class NearDedup(beam.PTransform):
    """(text_key, document) -> ``.docs``, the same minus near duplicates; a ``TALLY`` output counts
    the drops and what the stages did (``stats.json`` → ``near_dup``),
    a ``SAMPLES`` output carries the dropped documents (reason, document + the kept key) for the
    artifact's samples. ``sources``: every source the documents may carry, as a PCollection of
    (rank, source) whose rank order is the sources' order (the corpus job's listing), or as names
    (ranked here; for tests and small jobs: the names are then in the pipeline's graph)."""

    def __init__(self, threshold: float, seed: int, sources, rounds: int = ROUNDS,
                 chain_limit: int = neardup.CHAIN_LIMIT):
        super().__init__()
        self.threshold, self.seed, self.sources, self.rounds = threshold, seed, sources, rounds
        self.chain_limit = chain_limit

    def expand(self, docs):
        if self.threshold <= 0:
            raise UserInputError("NearDedup needs a threshold in (0, 1]; leave the step out to keep near duplicates")
        bands, rows = neardup.bands_rows(self.threshold)
        ranked = self.sources if isinstance(self.sources, beam.pvalue.PCollection) else (
            docs.pipeline | "RankSources" >> beam.Create(list(enumerate(sorted(set(self.sources))))))
        ranks = beam.pvalue.AsMultiMap(ranked | "ByName" >> beam.MapTuple(lambda rank, name: (name, rank)))
        by_id = docs | "CompactIds" >> beam.ParDo(_CompactIds(), ranks)
        signed = by_id | "MinHash" >> (beam.ParDo(_Sign(bands, rows, self.seed)).with_output_types(beam.typehints.KV[bytes, int])
                  .with_outputs(SIGS, main="bands"))
        linked = (
            signed.bands
            | "PackBands" >> beam.ParDo(_PackBands())
            | "GroupBands" >> beam.GroupByKey()
            | "LinkSorted" >> beam.ParDo(_Link(self.chain_limit)).with_outputs(TALLY, main="pairs")
        )
        pairs = (
            linked.pairs
            | "DistinctPairs" >> beam.Distinct()
            | "PairEnds" >> beam.FlatMap(neardup.both_ways)
            | "TagPairs" >> beam.MapTuple(lambda doc_id, other: (doc_id, (PAIR, other)))
        )
        sigs = signed[SIGS] | "TagSignatures" >> beam.MapTuple(lambda doc_id, sig: (doc_id, (SIG, sig)))
        verified = (
            (sigs, pairs)
            | "SignaturesAndPairs" >> beam.Flatten()
            | "JoinSignatures" >> beam.GroupByKey()
            | "SignPairs" >> beam.FlatMapTuple(_signed_pairs)
            | "GroupPairs" >> beam.GroupByKey()
            | "Verify" >> beam.FlatMap(_verified, self.threshold).with_outputs(TALLY, main="edges")
        )
        components = verified.edges | "Components" >> StarComponents(self.rounds)
        kept = (
            {"doc": by_id | "WithoutPlace" >> beam.MapTuple(_without_place), "mark": components.marks}
            | "JoinMarks" >> beam.CoGroupByKey()
            | "KeepUnmarked" >> beam.ParDo(_KeepUnmarked(SAMPLES), beam.pvalue.AsMultiMap(ranked)).with_outputs(
                TALLY, SAMPLES, main="docs")
        )
        tallies = ((linked[TALLY], verified[TALLY], components[TALLY], kept[TALLY])
                   | "NearDupTallies" >> beam.Flatten())
        return Outputs(docs=kept.docs, **{TALLY: tallies, SAMPLES: kept[SAMPLES]})
