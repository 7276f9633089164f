"""The corpus stage's near-duplicate step as Beam stages (``corpus/neardup.py`` has the method and
its pure functions), laid out as web-scale MinHash dedup does it (datatrove's MinHash dedup, the
C4 and NeMo Curator pipelines), so that no element and no worker holds the corpus's pairs, and no
step holds a group that grows with the data (a bucket or a cluster of template spam): a step
reads its GroupByKey group in streamed passes, which runners page in from their shuffle.

1. ``MinHash``: takes the corpus job's lists of documents (one dedup group each) and, for each
   document, its compact id and signature, once; out go its *band records* (one per band: the
   bucket, 7 bytes (``neardup.BUCKET_BYTES``), and the compact id), packed 16 bytes each per
   coarse key (the bucket's top bits: :mod:`corpus.neardup_bands`, which says why) and sent every
   ``FLUSH_RECORDS`` records and at the bundle's end; its signature (with its id and group), in
   chunks per *signature group* (:func:`sig_group`, a hash of the id), sent when full (``SIG_CHUNK``),
   when the step's waiting signatures reach ``SIG_BUDGET`` and at the bundle's end; and the list
   itself, packed (:func:`outputs.pack_chunk`), to step 5.
2. ``GroupBands`` -> ``LinkSorted``: the step that reads a coarse group sorts its records by
   (bucket, id) with bounded memory and walks the
   buckets: a bucket's members in sorted order, each linked to the next and to the smallest
   (:func:`neardup.bucket_links`), ids only; a bucket of more than ``chain_limit`` members, each to
   the smallest only, in one pass (the rule of :func:`neardup.bucket_candidates`); ``DistinctPairs``.
3. ``JoinSignatures`` -> ``GroupPairs`` -> ``Verify``: each candidate's ends meet their signatures
   in their signature groups (one shuffle of the signature chunks and the pair ends; a group holds
   at most the signatures its pair ends need, one a document of the group), the two signatures of
   a pair meet by pair, and the pair stays if their agreement reaches the threshold.
4. ``Components``: connected components in ``rounds`` rounds of large-star/small-star
   (:func:`neardup.large_star`), each a GroupByKey of the edges by node and a ``Distinct`` of the
   edges it gives (the steps keep no sets), then a check that every
   component became one star round its smallest node. Each node not at a component's centre is
   dropped for it. Should a graph need more rounds than it got (a chain of near duplicates
   thousands long), nodes that still have a smaller neighbour are dropped for it and local minima
   are kept: no document is dropped wrongly, some clusters keep more than one copy, and the
   ``neardup/unconverged_nodes`` counter says how many nodes were left (and a warning, once a worker).
5. ``JoinMarks``: the packed lists meet their marks by group (the text key's dedup group: a node
   carries its group from ``Verify`` through the rounds, ``(id, group)``, which sorts as the id
   does), and ``KeepUnmarked`` reads a group's marks, then its lists, dropping, counting and
   sampling the marked documents. The documents cross near-dup's steps as a few large elements,
   not one each (one each, Beam's per-element cost was most of near-dup's CPU: docs/scale.md);
   a group holds what its dedup group held, a setting's worth (``dedup_group_bytes``).

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
import zlib

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from kolectra.core.errors import UserInputError
from kolectra.corpus import neardup, neardup_bands, outputs
from kolectra.corpus.chunks import KeyedChunks

TALLY, SAMPLES = neardup.TALLY, neardup.SAMPLES
SIGS = "signatures"
DOCS_OUT = "documents"  # the tag of the documents packed per group, on their way to their marks
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


class _KeepUnmarked(_Ranked):
    """(group, tagged values) -> the group's documents in lists, minus the marked ones, which are
    tallied and, with ``samples``, sampled with the kept copy's (source, line); ``names``: rank ->
    source. Two passes over the group: its marks (at most one a document of the group) and then its
    packed documents, a chunk at a time."""

    def __init__(self, samples: str | None = None):
        self.samples = samples

    def key(self, names, doc_id: int) -> tuple[str, int]:
        return self.one(names, doc_id >> LINE_BITS), doc_id & ((1 << LINE_BITS) - 1)

    def process(self, grouped, names):
        _, values = grouped
        values = neardup.reiterable(values)
        marks = {self.key(names, mark[0]): mark[1] for tag, mark in values if tag == MARK}
        dropped = 0
        for tag, chunk in values:
            if tag != DOCS:
                continue
            docs = outputs.unpack_chunk(chunk)
            if marks:
                kept_docs = []
                for keyed in docs:
                    doc = keyed[1]
                    mark = marks.get((doc["source"], doc["line"]))
                    if mark is None:
                        kept_docs.append(keyed)
                        continue
                    dropped += 1
                    if self.samples:
                        kept = list(self.key(names, mark))
                        yield beam.pvalue.TaggedOutput(self.samples, ("near_duplicate", {**doc, "kept": kept}))
                docs = kept_docs
            if docs:
                yield docs
        if dropped:
            yield beam.pvalue.TaggedOutput(TALLY, (("dropped", "near_duplicate"), dropped))


class _Sign(_Ranked):
    """Lists of (text_key, document) -> each document's band records, packed per coarse key
    (:mod:`corpus.neardup_bands`; sent every ``FLUSH_RECORDS`` records and at the bundle's end),
    its signature in ``SIGS`` chunks ((signature group, (SIG, [(id, signature, group), ...]))), and
    the documents themselves, packed per
    group (``DOCS``: (group, (DOCS, packed list))), where their marks will meet them. The group is
    the text key's dedup group (:func:`outputs.bucket_of` over ``groups``), so the corpus job's
    lists (one dedup group each) go on whole; ``ranks``: source -> rank, for the compact ids."""

    def __init__(self, bands: int, rows: int, seed: int, groups: int):
        self.bands, self.rows, self.seed, self.groups = bands, rows, seed, groups

    def setup(self):
        self.perms = neardup.permutations(self.seed, self.bands * self.rows)

    def start_bundle(self):
        super().start_bundle()
        self.buckets, self.ids = [], []
        self.sigs = KeyedChunks(SIG_CHUNK, SIG_BUDGET)  # signature group -> [(id, signature, group)]

    def compact_id(self, ranks, doc: dict) -> int:
        source, line = doc["source"], doc["line"]
        if not 0 <= line < 1 << LINE_BITS:
            raise ValueError(f"near-dup: document ({source!r}, {line}) has a line number out of range")
        rank = self.one(ranks, source)
        if rank >= 1 << (64 - LINE_BITS):  # the packed band records hold an id in 64 bits
            raise ValueError(f"near-dup: more than {1 << (64 - LINE_BITS):,} input files ({source!r} is number "
                             f"{rank + 1:,}); merge them into fewer files")
        return rank << LINE_BITS | line

    def process(self, docs: list, ranks):
        by_group: dict = {}
        for keyed in docs:
            doc_id = self.compact_id(ranks, keyed[1])
            sig = neardup.signature(keyed[1]["text"], self.perms)
            group = outputs.bucket_of(keyed[0], self.groups)
            packed = neardup.sig_bytes(sig)
            for key, chunk in self.sigs.add(sig_group(doc_id, self.groups), (doc_id, packed, group), len(packed)):
                yield beam.pvalue.TaggedOutput(SIGS, (key, (SIG, chunk)))
            self.buckets.extend(map(neardup_bands.bucket_int, neardup.band_keys(sig, self.bands, self.rows)))
            self.ids.extend([doc_id] * self.bands)
            by_group.setdefault(group, []).append(keyed)
            if len(self.ids) >= neardup_bands.FLUSH_RECORDS:
                yield from self._flush()
        for group, chunk in by_group.items():
            yield beam.pvalue.TaggedOutput(DOCS_OUT, (group, (DOCS, outputs.pack_chunk(chunk))))

    def finish_bundle(self):
        for item in self._flush():
            yield GlobalWindows.windowed_value(item)
        for key, chunk in self.sigs.drain():
            yield beam.pvalue.TaggedOutput(SIGS, GlobalWindows.windowed_value((key, (SIG, chunk))))

    def _flush(self):
        buckets, ids, self.buckets, self.ids = self.buckets, self.ids, [], []
        return neardup_bands.pack(buckets, ids) if ids else ()


NEAR = "near_dup"  # the first part of this step's tally keys: stats.json's "near_dup" block


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


SIG, PAIR = 0, 1  # tags of a chunk of signatures and of a candidate pair's end, grouped by signature group
SIG_CHUNK = 1024  # signatures an element at most
SIG_BUDGET = 16 << 20  # bytes of signatures a MinHash step holds waiting, all groups together (corpus/chunks.py)
DOCS, MARK = 0, 1  # tags of a group's packed documents and of its marks, grouped by group


def sig_group(doc_id: int, groups: int) -> int:
    """The group a document's signature and its candidate pairs' ends meet in: a hash of its id
    (crc32: the same in every worker), so the ids of a file's lines spread over all groups."""
    return zlib.crc32(doc_id.to_bytes(8, "big")) % groups


def _pair_ends(pair, groups: int):
    """A candidate pair -> each end to its signature group: (group, (PAIR, id, other id))."""
    a, b = pair
    return [(sig_group(a, groups), (PAIR, a, b)), (sig_group(b, groups), (PAIR, b, a))]


def _signed_pairs(_, tagged):
    """A signature group's signatures out to each candidate pair one of its documents is in, keyed by
    the pair. The group is read in three passes, never listed: the ids its pair ends need, their
    signatures (at most one a document of the group are held), then the ends again (the smallest
    member of a bucket of template spam is in a pair with every other member)."""
    tagged = neardup.reiterable(tagged)
    needed = {value[1] for value in tagged if value[0] == PAIR}
    if not needed:
        return
    sigs = {}
    for value in tagged:
        if value[0] == SIG:
            for doc_id, sig, group in value[1]:
                if doc_id in needed:
                    sigs[doc_id] = (sig, group)
    for value in tagged:
        if value[0] == PAIR:
            _, doc_id, other = value
            signed = sigs.get(doc_id)
            if signed is None:  # every id of a pair comes from a signed document; this would be a bug upstream
                raise ValueError(f"near-dup: document id {doc_id} is in candidate pairs but has no signature")
            yield (min(doc_id, other), max(doc_id, other)), (doc_id, signed[1], signed[0])


def _verified(pair_sigs, threshold: float):
    """A candidate pair and its ends' (id, group, signature) -> an edge of (id, group) nodes if
    their signatures agree enough. A node's group goes with it through the rounds to its mark;
    ids are unique, so the nodes sort as their ids do."""
    _, ends = pair_sigs
    (a, group_a, sig_a), (b, group_b, sig_b) = sorted(ends)
    yield beam.pvalue.TaggedOutput(TALLY, ((NEAR, "candidate_pairs"), 1))
    if neardup.estimated_jaccard(sig_a, sig_b) >= threshold:
        yield beam.pvalue.TaggedOutput(TALLY, ((NEAR, "verified_pairs"), 1))
        yield (a, group_a), (b, group_b)


def _mark_to_group(mark):
    """((id, group), (kept id, kept group)) -> (group, (MARK, (id, kept id)))."""
    (doc_id, group), (kept, _) = mark
    return group, (MARK, (doc_id, kept))


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
                node = grouped[0]  # the corpus job's nodes are (id, group): the id is what it names
                _log.warning("near-dup: a cluster did not become a star in %d rounds (document id %s); it may keep "
                             "more than one copy (counter neardup/unconverged_nodes)", self.rounds,
                             node[0] if isinstance(node, tuple) else node)
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


class NearDedup(beam.PTransform):
    """Lists of (text_key, document) -> ``.docs``, lists of the same minus near duplicates; a
    ``TALLY`` output counts the drops and what the stages did (``stats.json`` → ``near_dup``),
    a ``SAMPLES`` output carries the dropped documents (reason, document + the kept key) for the
    artifact's samples. ``sources``: every source the documents may carry, as a PCollection of
    (rank, source) whose rank order is the sources' order (the corpus job's listing), or as names
    (ranked here; for tests and small jobs: the names are then in the pipeline's graph).
    ``groups``: how many groups the documents wait in for their marks, by their text key's dedup
    group (the corpus job's dedup groups: a group then holds what one of those holds); the
    output does not depend on it."""

    def __init__(self, threshold: float, seed: int, sources, rounds: int = ROUNDS,
                 chain_limit: int = neardup.CHAIN_LIMIT, groups: int = 16):
        super().__init__()
        self.threshold, self.seed, self.sources, self.rounds = threshold, seed, sources, rounds
        self.chain_limit, self.groups = chain_limit, groups

    def expand(self, docs):
        if self.threshold <= 0:
            raise UserInputError("NearDedup needs a threshold in (0, 1]; leave the step out to keep near duplicates")
        bands, rows = neardup.bands_rows(self.threshold)
        ranked = self.sources if isinstance(self.sources, beam.pvalue.PCollection) else (
            docs.pipeline | "RankSources" >> beam.Create(list(enumerate(sorted(set(self.sources))))))
        ranks = beam.pvalue.AsMultiMap(ranked | "ByName" >> beam.MapTuple(lambda rank, name: (name, rank)))
        signed = docs | "MinHash" >> beam.ParDo(_Sign(bands, rows, self.seed, self.groups), ranks).with_outputs(
            SIGS, DOCS_OUT, main="bands")
        linked = (
            signed.bands
            | "GroupBands" >> beam.GroupByKey()
            | "LinkSorted" >> beam.ParDo(_Link(self.chain_limit)).with_outputs(TALLY, main="pairs")
        )
        pairs = (
            linked.pairs
            | "DistinctPairs" >> beam.Distinct()
            | "PairEnds" >> beam.FlatMap(_pair_ends, self.groups)
        )
        verified = (
            (signed[SIGS], pairs)
            | "SignaturesAndPairs" >> beam.Flatten()
            | "JoinSignatures" >> beam.GroupByKey()
            | "SignPairs" >> beam.FlatMapTuple(_signed_pairs)
            | "GroupPairs" >> beam.GroupByKey()
            | "Verify" >> beam.FlatMap(_verified, self.threshold).with_outputs(TALLY, main="edges")
        )
        components = verified.edges | "Components" >> StarComponents(self.rounds)
        kept = (
            (signed[DOCS_OUT], components.marks | "MarksToGroups" >> beam.Map(_mark_to_group))
            | "DocumentsAndMarks" >> beam.Flatten()
            | "JoinMarks" >> beam.GroupByKey()
            | "KeepUnmarked" >> beam.ParDo(_KeepUnmarked(SAMPLES), beam.pvalue.AsMultiMap(ranked)).with_outputs(
                TALLY, SAMPLES, main="docs")
        )
        tallies = ((linked[TALLY], verified[TALLY], components[TALLY], kept[TALLY])
                   | "NearDupTallies" >> beam.Flatten())
        return Outputs(docs=kept.docs, **{TALLY: tallies, SAMPLES: kept[SAMPLES]})
