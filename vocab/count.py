"""A corpus split's word table, counted by a Beam job where the corpus is.

Stage: corpus -> **vocab** -> examples. The job runs on the corpus stage's runners with its
options (:func:`corpus.runners.pipeline_options`: the in-process FnApiRunner and its worker
processes by default, any other runner as given) and reads the corpus shards in place, local
files or store URLs, never downloading the artifact. Graph (:func:`recipe`):

    shard paths -> spread over the workers (a GroupByKey on each work item's index)
    -> CountWords: batches of lines -> documents -> words with their morpheme cuts
       (:func:`vocab.words.doc_words`), summed in one table per worker that is passed on whenever
       it holds ``count_flush_types`` types (checked after each document, and a batch's raw lines
       held up to :data:`BATCH_BYTES`), with its exact character table and counters
    -> SumPerType (a combiner: each worker adds up its own share first) -> the exact count of every type
    -> MostFrequent: the ``max_word_types`` most frequent types, ties by text (:class:`tables.TopTypes`)
    -> one JSON file the launcher reads back, with the characters and counters summed beside.

Counts are exact: a type kept has its true count; a type left out occurs at most as often as the
last one kept (``dropped_max_count`` in report.json); the character table (the alphabet) is
counted over every word, kept or not. A worker's memory is its flush table and 2 x
``max_word_types`` pairs: settings, never the corpus's size. Beam's local runner is the exception:
it holds the shuffle in the launcher's process, whose memory grows with the corpus, so a local
count that would not fit is refused before it starts (:func:`local_model`: a line in the shards'
gzipped bytes, or their word types estimated from a sample, whichever says more). Nothing in the result
depends on the number of workers or on how Beam bundled the work (:mod:`vocab.tables`).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections import Counter

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions

from kolectra.core import scratch, storage
from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress
from kolectra.corpus.examples import parts_per_shard
from kolectra.corpus.examples_beam import read_lines
from kolectra.corpus.local_memory import MemoryModel, check_local_memory, worker_processes
from kolectra.corpus.outputs import keep_smallest
from kolectra.corpus.runners import (
    LOCAL_RUNNER,
    REMOTE_RUNNERS,
    CorpusOptions,
    input_bytes,
    interruptible,
    new_pipeline,
    pipeline_options,
    runner_label,
    runner_setup,
)
from kolectra.vocab import heaps, tables, words

BATCH_LINES = 1000  # documents parsed at a time (read_lines splits whole decompressed blocks)
# ... or fewer, where their lines come to this many bytes first: a batch's raw lines are held while it is
# counted, and 1,000 documents of the corpus stage's max_chars (100,000) are about 1 GB of shard JSON
BATCH_BYTES = 4 << 20
RESULT_FILE = "vocab-counts-{}.json"
# The local runner's peak RSS per MB of gzipped corpus shards counted (corpus/local_memory.py: MemoryModel):
# benchmarks/vocab_counting.py --sizes over the first 2, 4, 8, 16 of 16 NSMC review shards (12-94 MB,
# one in-process worker, the stage's defaults) measured 333-760 MB in two runs, 266-284 MB + 4.5-5.3
# MB per MB (the launcher holds the shuffle's pairs and the types read back); rounded up, 11-17 %
# over the higher run at each size (docs/scale.md, "Vocabulary at 34 GB"). Past 1 M types Beam's
# lifted combine evicts, so the pairs grow with the text rather than with the types (Heaps' law): a
# line in bytes, not in types. Each worker process (its flush table and combines, bounded by
# count_flush_types and max_word_types): 0.26-0.72 GB measured at 2-16 shards with 2 and 4 workers
# (docs/scale.md, "The local runner's worker processes"); 0.8 GB is 31 % over a worker's largest
# share of the measured totals, 10 % over the largest worker.
LOCAL_MEMORY = MemoryModel(base_mb=300, per_mb=6.0, measure="gzipped corpus shards", worker_mb=800)
# The launcher's peak against the word types instead (docs/scale.md, "Many distinct words"): text of
# distinct words (85,000 types a MB gzipped, as web text's numbers, hashes and names make) took it to
# 527 / 824 / 1,053 MB at 0.5 / 1 / 2 M types (5.9 / 11.7 / 23.5 MB), where the line above said 335 /
# 370 / 441. Each type costs the shuffle about 230 bytes, and each type read back (at most
# max_word_types) about 365 more; rounded up, 250 and 400, over 300 MB: 14-19 % over those three and
# over reviews' 760 MB at 879,095 types. The check takes whichever of the two says more, the types
# estimated before the job from a sample of the shards (vocab.heaps).
SHUFFLE_BYTES_PER_TYPE, KEPT_BYTES_PER_TYPE = 250, 400
# With worker processes each also holds its share of the types: the local runner hands a worker its whole
# partition of the shuffle's grouped output as one bundle's input. Two workers of that text peaked at 1,155
# and 745 MB at 2 M types (23.5 MB), 1,816 and 1,073 at 4 M (47.0 MB), against worker_mb's 800 measured on
# reviews (whose 0.88 M types they held within it): about 495 bytes a type over both past the first 1 M, 550
# here (totals 2,819 and 4,338 MB; the model 3,350 and 4,950, 19 and 14 % over).
WORKER_BYTES_PER_TYPE, WORKER_MB_TYPES = 550, 1_000_000


@dataclasses.dataclass(frozen=True)
class Job:
    """What every step needs; small and picklable."""

    max_word_types: int
    flush_types: int
    result_path: str


class BadLines:
    """A part's unreadable lines: every one counted, the first :data:`tables.KEEP_BAD` by message
    named, so a shard of bad lines costs a worker no more than a good one."""

    def __init__(self):
        self.named: list[str] = []
        self.count = 0

    def add(self, message: str) -> None:
        self.count += 1
        keep_smallest(self.named, message, tables.KEEP_BAD)


class CountWords(beam.DoFn):
    """(index, [(path, part, parts)]) -> ``(type key, count)`` pairs, and ``totals`` parts tagged
    ``"totals"``, a table of at most ``flush_types`` types at a time."""

    def __init__(self, job: Job):
        self.job = job

    def setup(self):
        self.splitter = words.WordSplitter()

    def process(self, keyed):
        _, items = keyed
        for path, part, parts in items:
            table: Counter = Counter()
            tally, bad = Counter(), BadLines()
            for first, lines in read_lines(path, BATCH_LINES, part, parts, BATCH_BYTES):
                for line_no, raw in enumerate(lines, start=first):
                    if not raw.strip():
                        continue
                    self._count_line(path, line_no, raw, table, tally, bad)
                    # after each document, not each batch: a batch of long documents of distinct words
                    # (web text's numbers, hashes, names) took the table millions of types past the setting
                    if len(table) >= self.job.flush_types:
                        yield from self._flush(table, tally, bad)
                        table, tally, bad = Counter(), Counter(), BadLines()
            yield from self._flush(table, tally, bad)

    def _count_line(self, path: str, line_no: int, raw: bytes, table: Counter, tally: Counter,
                    bad: BadLines) -> None:
        where = f"{path}:{line_no}: "
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
                raise UserInputError(f"{where}document without a 'text' string: {raw[:80].decode('utf-8', 'replace')}")
            found, unaligned = words.doc_words(doc, self.splitter, where)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            bad.add(f"{where}not a JSON document ({e})")
            return
        except UserInputError as e:
            bad.add(str(e))
            return
        table.update(found)
        tally["documents"] += 1
        tally["words"] += len(found)
        tally["words_unaligned"] += unaligned

    @staticmethod
    def _flush(table: Counter, tally: Counter, bad: BadLines):
        yield beam.pvalue.TaggedOutput("totals", tables.totals(tally, tables.char_counts(table), bad.named, bad.count))
        for word, n in table.items():
            yield tables.type_key(word), n


class MostFrequent(beam.CombineFn):
    """:class:`tables.TopTypes` as a Beam combiner."""

    def __init__(self, k: int):
        self.k = k

    def create_accumulator(self):
        return tables.TopTypes(self.k)

    def add_input(self, acc, pair):
        return acc.add([pair])

    def merge_accumulators(self, accs):
        accs = iter(accs)
        first = next(accs)
        for acc in accs:
            first.merge(acc)
        return first

    def extract_output(self, acc):
        return {"types": acc.result(), "word_types": acc.types, "words_counted": acc.words}


class AddTotals(beam.CombineFn):
    def create_accumulator(self):
        return tables.add_totals([])

    def add_input(self, acc, part):
        return tables.add_totals([acc, part])

    def merge_accumulators(self, accs):
        return tables.add_totals(accs)

    def extract_output(self, acc):
        return acc


def write_result(top: dict, totals: dict, path: str) -> None:
    doc = {**top, "chars": dict(totals["chars"]), "tallies": dict(totals["tallies"]), "bad": totals["bad"],
           "bad_documents": totals["bad_documents"]}
    storage.write_bytes(path, json.dumps(doc, ensure_ascii=False).encode("utf-8"))  # read once, then removed


def recipe(p: beam.Pipeline, job: Job, paths: list[str], parts: int = 1) -> None:
    work = [(path, part, parts) for path in paths for part in range(parts)]
    counted = (
        p
        | "ListWork" >> beam.Create(list(enumerate(work)))
        | "SpreadWork" >> beam.GroupByKey()
        | "CountWords" >> beam.ParDo(CountWords(job)).with_output_types(tuple[str, int]).with_outputs("totals", main="types")
    )
    totals = counted.totals | "AddTotals" >> beam.CombineGlobally(AddTotals())
    _ = (
        counted.types
        | "SumPerType" >> beam.CombinePerKey(sum)
        | "MostFrequent" >> beam.CombineGlobally(MostFrequent(job.max_word_types))
        | "WriteResult" >> beam.Map(write_result, beam.pvalue.AsSingleton(totals), job.result_path)
    )


def count_split(paths: list[str], max_word_types: int, flush_types: int,
                beam_args: list[str] = ()) -> tuple[Counter, Counter, dict]:
    """(word table of the ``max_word_types`` most frequent types, character table, counters) of the
    corpus shards ``paths`` (local or store URLs), counted by the Beam job of this module;
    ``beam_args`` as for the corpus stage (``--runner``, ``--direct_num_workers``...).
    A remote runner writes its result under ``--corpus_staging``."""
    size = input_bytes(paths)
    options = pipeline_options(list(beam_args), size)
    runner = options.view_as(StandardOptions).runner
    staging = options.view_as(CorpusOptions).corpus_staging
    if runner in REMOTE_RUNNERS and not staging:
        raise UserInputError(f"vocab: {runner} workers cannot write to this machine: give --corpus_staging "
                             "DIR (a store URL) for the word count's result")
    peak = check_local_memory(options, "vocab", size, local_model(paths, size, max_word_types, worker_processes(options))
                              if runner == LOCAL_RUNNER else LOCAL_MEMORY)
    progress(f"vocab: counting the words of {len(paths)} shard(s) where they are, runner {runner_label(options, peak)}")
    with scratch.temporary_directory("vocab") as tmp:
        result_path = storage.join(staging or tmp, RESULT_FILE.format(uuid.uuid4().hex))
        job = Job(max_word_types=max_word_types, flush_types=flush_types, result_path=result_path)
        with interruptible("interrupted while counting words"), runner_setup(options), new_pipeline(options) as p:
            recipe(p, job, list(paths), parts_per_shard(options, len(paths)))
        doc = json.loads(storage.read_bytes(result_path).decode("utf-8"))
        if staging:
            storage.remove(result_path)
    if doc["bad_documents"]:
        raise UserInputError(f"vocab: {doc['bad_documents']} unreadable document(s) in the corpus, e.g. "
                             + "; ".join(doc["bad"][:3]))
    table = Counter({words_type: n for words_type, n in ((tables.word_type(k), n) for k, n in doc["types"])})
    return table, Counter(doc["chars"]), summary(doc, table, max_word_types)


def local_model(paths: list[str], size: float, max_word_types: int, workers: int = 0) -> MemoryModel:
    """:data:`LOCAL_MEMORY`, or the model by word types where the shards' types (estimated before the
    job from a sample: :mod:`vocab.heaps`) make the launcher's peak larger."""
    types = heaps.estimate_types(paths, size)
    shares = max(0, types - WORKER_MB_TYPES) if workers else 0  # past what worker_mb holds
    per_type = (SHUFFLE_BYTES_PER_TYPE * types + KEPT_BYTES_PER_TYPE * min(types, max_word_types)
                + WORKER_BYTES_PER_TYPE * shares) / max(types, 1)
    by_types = dataclasses.replace(LOCAL_MEMORY, per_mb=0.0, records=types, per_record=round(per_type),
                                   records_are="word types (Heaps' law over a sample)")
    return max((LOCAL_MEMORY, by_types), key=lambda m: m.peak_bytes(size, workers))


def summary(doc: dict, table: Counter, max_word_types: int) -> dict:
    """The counters report.json records, with the counting method and its bound."""
    tally = doc["tallies"]
    kept = sum(table.values())
    return {"documents": tally.get("documents", 0), "words": tally.get("words", 0),
            "words_unaligned": tally.get("words_unaligned", 0), "word_types": doc["word_types"],
            "word_types_kept": len(table), "word_types_dropped": doc["word_types"] - len(table),
            "words_dropped": doc["words_counted"] - kept, "characters": sum(1 for c in doc["chars"] if len(c) == 1),
            "counting": {"method": "exact_top_k", "k": max_word_types,
                         "bound": "kept types: exact counts; a type left out occurs at most dropped_max_count times",
                         "dropped_max_count": min(table.values()) if len(table) < doc["word_types"] else 0}}
