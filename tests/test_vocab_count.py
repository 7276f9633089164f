"""The vocab stage's word count, a Beam job over the corpus shards where they are (vocab/count.py,
vocab/tables.py).

Real Kiwi morphemes in the corpus, the real ``tokenizers`` pre-tokeniser, Beam's FnApiRunner in
this process and with worker processes, moto's S3 server for shards read in place."""

from __future__ import annotations

import gzip
import json
import math
import random
import shutil
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.errors import UserInputError
from kolectra.corpus import examples_beam, local_memory, runners, shards
from kolectra.corpus.local_memory import LocalMemoryError
from kolectra.vocab import beside, count, heaps, tables, trainer, words
from kolectra.vocab import build as stage
from kolectra.vocab.config import VocabConfig
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)
from tests.test_vocab_corpus import small_corpus

CFG = VocabConfig(vocab_size=1000, num_unused=10)
FILES = ("tokenizer.json", "vocab.txt", "report.json")
TWO_WORKERS = ["--direct_num_workers", "2"]  # two worker processes (multi_processing)


def resharded(corpus: Path, n: int, dest: Path) -> Path:
    """``corpus`` with its train documents cut into ``n`` shards, in order (valid shards copied)."""
    lines = [json.dumps(d, ensure_ascii=False) + "\n" for d in shards.iter_documents(corpus, "train")]
    (dest / shards.DATA_DIR).mkdir(parents=True)
    for path in shards.shard_paths(corpus, "valid"):
        shutil.copy(path, dest / shards.DATA_DIR / path.name)
    for i in range(n):
        with gzip.open(dest / shards.DATA_DIR / f"train-{i:05d}-of-{n:05d}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(lines[i * len(lines) // n:(i + 1) * len(lines) // n])
    return dest


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("count")
    one = small_corpus(root / "one")
    stream, stream_counts = words.count_words(words.iter_docs(one, "train"))
    return {"one": one, "four": resharded(one, 4, root / "four"), "stream": stream, "stream_counts": stream_counts}


def record_beside(monkeypatch) -> list[int]:
    """The process ids of every :class:`Beside` started from now on (the list fills as they start)."""
    started = []
    real = beside.Beside.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        started.append(self.process.pid)

    monkeypatch.setattr(beside.Beside, "__init__", spy)
    return started


def train_paths(corpus: Path) -> list[str]:
    return [str(p) for p in shards.shard_paths(corpus, "train")]


def test_one_worker_and_two_worker_processes_count_the_table_of_one_stream(corpora):
    stream = corpora["stream"]
    one = count.count_split(train_paths(corpora["four"]), 10**6, 10**6)
    two = count.count_split(train_paths(corpora["four"]), 10**6, 10**6, TWO_WORKERS)
    for table, chars, counts in (one, two):
        assert table == stream  # every type, with its exact count
        assert chars == tables.char_counts(stream)
        assert counts["documents"] == corpora["stream_counts"]["documents"]
        assert counts["words"] == corpora["stream_counts"]["words"] == sum(table.values())
        assert counts["word_types"] == len(stream) and counts["word_types_dropped"] == counts["words_dropped"] == 0
    assert list(one[0].items()) == list(two[0].items()) and one[1] == two[1] and one[2] == two[2]


def test_past_max_word_types_the_most_frequent_are_kept_with_exact_counts_and_the_whole_alphabet(corpora):
    stream, k = corpora["stream"], 40
    # a flush every work item's first batch or so: the sums must not depend on where tables were cut
    here = count.count_split(train_paths(corpora["four"]), k, 1)
    there = count.count_split(train_paths(corpora["one"]), k, 10**6, TWO_WORKERS)
    assert list(here[0].items()) == list(there[0].items()) and here[1] == there[1] and here[2] == there[2]
    table, chars, counts = here
    assert len(table) == k and all(stream[w] == n for w, n in table.items())  # exact, not lower bounds
    assert min(table.values()) >= max(n for w, n in stream.items() if w not in table)  # the most frequent
    assert counts["counting"]["dropped_max_count"] == min(table.values())
    assert counts["word_types_dropped"] == len(stream) - k
    assert counts["words_dropped"] + sum(table.values()) == counts["words"] == sum(stream.values())
    # the alphabet is the uncapped table's, though most types (and characters) were left out of the table
    assert trainer.alphabet_of(chars, 3000) == trainer.alphabet(stream, 3000)
    assert len(trainer.alphabet(table, 3000)[0]) < len(trainer.alphabet_of(chars, 3000)[0])


def test_a_worker_passes_its_table_on_at_the_setting_not_at_the_end(corpora, monkeypatch):
    """Memory per worker follows ``count_flush_types``: the table goes on whenever it reaches it."""
    monkeypatch.setattr(count, "BATCH_LINES", 5)  # documents a batch: flushes happen between batches
    fn = count.CountWords(count.Job(max_word_types=10**6, flush_types=100, result_path=""))
    fn.setup()
    parts, flushes = [], []
    for out in fn.process((0, [(p, 0, 1) for p in train_paths(corpora["one"])])):
        if isinstance(out, tuple):
            flushes[-1].append(out)
        else:
            parts.append(out.value)
            flushes.append([])
    # every batch of 5 short documents adds fewer than 100 types to a table that held fewer than 100
    assert len(flushes) > 3 and max(len(f) for f in flushes) < 200
    summed: Counter = Counter()
    for key, n in (pair for f in flushes for pair in f):
        summed[tables.word_type(key)] += n
    assert summed == corpora["stream"]
    assert tables.add_totals(parts)["chars"] == tables.char_counts(corpora["stream"])


def test_top_types_do_not_depend_on_how_the_pairs_were_split_or_merged():
    rng = random.Random(0)
    pairs = [(f"w{i}", rng.choice([1, 1, 2, 3, 5, 8])) for i in range(500)]
    want = tables.most_frequent(pairs, 30)
    for seed in range(5):
        rng.seed(seed)
        parts = [tables.TopTypes(30) for _ in range(rng.randint(1, 6))]
        for pair in rng.sample(pairs, len(pairs)):
            rng.choice(parts).add([pair])
        rng.shuffle(parts)
        merged = parts[0]
        for part in parts[1:]:
            merged.merge(part)
        assert merged.result() == want and merged.types == 500 and merged.words == sum(n for _, n in pairs)


def test_type_keys_round_trip():
    for word in (("영화를", (2,)), ("재밌었어요", (2, 3, 4)), (".", ()), ("ab", ())):
        assert tables.word_type(tables.type_key(word)) == word


def test_a_local_count_over_the_machines_memory_is_refused_before_the_job(corpora, tmp_path, monkeypatch):
    """The local runner holds the count's shuffle in the launcher (docs/scale.md, "Vocabulary at
    34 GB"): a count whose estimated peak would not fit is refused in one line, before the job."""
    paths = train_paths(corpora["four"])
    real_recipe = count.recipe
    monkeypatch.setattr(count, "recipe", lambda *a, **k: pytest.fail("the job started"))
    with pytest.raises(LocalMemoryError) as e:
        count.count_split(paths, 10**6, 10**6, ["--local_memory_gb=0.1"])
    said = str(e.value)
    assert said.startswith("vocab:") and "\n" not in said
    assert "DataflowRunner" in said and "--local_memory_gb 1 " in said and "gzipped corpus shards" in said
    monkeypatch.setattr(local_memory, "machine_memory", lambda: 0.1e9)  # a machine of 100 MB
    with pytest.raises(LocalMemoryError, match=r"^vocab: .*over this machine's memory \(0\.1 GB\)"):
        count.count_split(paths, 10**6, 10**6)
    out = tmp_path / "vocab"
    out.mkdir()
    with pytest.raises(LocalMemoryError, match="^vocab: "):  # the stage: refused before it writes anything
        stage.build(CFG, corpora["four"], out)
    assert not any(out.iterdir())
    monkeypatch.setattr(count, "recipe", real_recipe)
    table, _, _ = count.count_split(paths, 10**6, 10**6, ["--local_memory_gb=1"])  # the estimate fits in 1 GB
    assert table == corpora["stream"]


def test_shards_on_a_store_are_read_in_place(corpora, bucket):  # noqa: F811
    urls = []
    for path in shards.shard_paths(corpora["four"], "train"):
        urls.append(f"{bucket}/corpus/data/{path.name}")
        storage.write_bytes(urls[-1], path.read_bytes())
    table, chars, counts = count.count_split(urls, 10**6, 10**6)
    assert table == corpora["stream"] and chars == tables.char_counts(corpora["stream"])


def test_bad_documents_are_counted_and_named_in_one_error(corpora, tmp_path):
    bad = resharded(corpora["one"], 2, tmp_path / "bad")
    last = shards.shard_paths(bad, "train")[-1]
    with gzip.open(last, "at", encoding="utf-8") as f:
        f.write(json.dumps({"id": "x", "morphs": []}) + "\n")
        f.write("{not json\n")
    with pytest.raises(UserInputError, match=r"2 unreadable document\(s\).*train-00001-of-00002.jsonl.gz:\d+: "):
        count.count_split(train_paths(bad), 10**6, 10**6)


def test_a_shard_of_bad_lines_is_counted_whole_and_named_in_part(tmp_path, monkeypatch):
    """Every unreadable line is counted, the first KEEP_BAD by message named: a worker held every
    message of its part before (13 MB for 60,000 bad lines, where it now holds 0.7 MB)."""
    shard = tmp_path / "train-00000-of-00001.jsonl.gz"
    good = json.dumps({"id": "a", "text": "좋은 영화", "morphs": []}, ensure_ascii=False)
    with gzip.open(shard, "wt", encoding="utf-8") as f:
        f.writelines(f"{{not json {i}\n" if i % 500 else good + "\n" for i in range(60_000))
    monkeypatch.setattr(examples_beam, "READ_BYTES", 64 << 10)  # what the reader holds: a block of a shard
    step = count.CountWords(count.Job(max_word_types=10, flush_types=10**6, result_path=""))
    step.setup()
    tracemalloc.start()
    [totals] = [o.value for o in step.process((0, [(str(shard), 0, 1)])) if getattr(o, "tag", None) == "totals"]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert totals["bad_documents"] == 60_000 - 120 and totals["tallies"]["documents"] == 120
    first = sorted(f"{shard}:{i + 1}:" for i in range(60_000) if i % 500)[:tables.KEEP_BAD]
    assert [message.split(" ")[0] for message in totals["bad"]] == first
    assert peak < 3e6, f"counting held {peak / 1e6:.1f} MB"
    with pytest.raises(UserInputError, match=r"^vocab: 59880 unreadable document\(s\)"):
        count.count_split([str(shard)], 10, 10**6)


def test_the_stage_gives_the_same_files_on_one_worker_and_on_two(corpora, tmp_path):
    alone, split = tmp_path / "alone", tmp_path / "split"
    alone.mkdir()
    split.mkdir()
    stage.build(CFG, corpora["four"], alone)
    stage.build(CFG, corpora["four"], split, TWO_WORKERS)
    for f in FILES:
        assert (split / f).read_bytes() == (alone / f).read_bytes(), f
    report = json.loads((alone / "report.json").read_text(encoding="utf-8"))
    assert report["train_corpus"]["counting"]["method"] == "exact_top_k"
    assert report["train_corpus"]["word_types"] == len(corpora["stream"])


def test_a_flush_table_holds_the_setting_and_one_document_however_long_the_documents(tmp_path):
    """Web text's long documents of distinct words (numbers, hashes, names): the table was checked
    against ``count_flush_types`` once a batch of 1,000 documents, so 40 documents of 2,000 distinct
    words each went on as one table of 80,000 types, 80 times the setting; now after each document."""
    rng = random.Random(7)
    docs = []
    for i in range(40):
        text = " ".join("".join(chr(0xAC00 + rng.randrange(11172)) for _ in range(4)) for _ in range(2000))
        docs.append({"id": f"d{i}", "text": text, "morphs": []})
    shard = tmp_path / "train-00000-of-00001.jsonl.gz"
    with gzip.open(shard, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    step = count.CountWords(count.Job(max_word_types=10**6, flush_types=1000, result_path=""))
    step.setup()
    tables_sent, summed, documents = [0], Counter(), 0
    for out in step.process((0, [(str(shard), 0, 1)])):
        if getattr(out, "tag", None) == "totals":
            tables_sent.append(0)
            documents += out.value["tallies"]["documents"]
        else:
            tables_sent[-1] += 1
            summed[out[0]] += out[1]
    assert max(tables_sent) <= 1000 + 2000, f"a flush table of {max(tables_sent)} types"
    assert documents == 40 and summed == Counter(
        tables.type_key((w, ())) for d in docs for w in d["text"].split(" "))


def distinct_words_shards(dest: Path, shards_n: int, words_each: int, seed: int = 3) -> list[str]:
    """Shards of documents of 50 random 4-syllable words each: nearly every word a type of its own,
    as web text's numbers, hashes and names are."""
    rng = random.Random(seed)
    dest.mkdir(parents=True)
    paths = []
    for s in range(shards_n):
        paths.append(str(dest / f"train-{s:05d}-of-{shards_n:05d}.jsonl.gz"))
        with gzip.open(paths[-1], "wt", encoding="utf-8") as f:
            for i in range(words_each // 50):
                text = " ".join("".join(chr(0xAC00 + rng.randrange(11172)) for _ in range(4)) for _ in range(50))
                f.write(json.dumps({"id": f"{s}-{i}", "text": text, "morphs": []}, ensure_ascii=False) + "\n")
    return paths


def test_a_local_count_of_many_distinct_words_is_refused_by_its_word_types(tmp_path, monkeypatch):
    """The check's line in gzipped bytes was fitted on reviews (9,300 types a MB): 100,000 distinct
    words in 0.45 MB gave 0.30 GB and the job started where the launcher holds 0.6 kB a type
    (docs/scale.md, "Many distinct words"). The types, estimated from a sample, now count too."""
    paths = distinct_words_shards(tmp_path / "data", 2, 50_000)
    monkeypatch.setattr(count, "recipe", lambda *a, **k: pytest.fail("the job started"))
    with pytest.raises(LocalMemoryError) as e:
        count.count_split(paths, 10**6, 10**6, ["--local_memory_gb=0.34"])
    said = str(e.value)
    assert said.startswith("vocab: a local run of this input needs about 0.4 GB") and "\n" not in said
    assert "0.3 GB + 650 bytes for each of its 100,000 word types (Heaps' law over a sample) in its " in said
    assert "MB of gzipped corpus shards)" in said


def test_word_types_are_estimated_from_a_sample_by_heaps_law(corpora, tmp_path):
    paths = distinct_words_shards(tmp_path / "data", 4, 20_000)
    size = runners.input_bytes(paths)
    assert heaps.estimate_types(paths, size) == len(set(w for p in paths for w in all_words(p)))  # all read: exact
    guess = heaps.estimate_types(paths, size, sample_bytes=120_000)  # a tenth of the words: extrapolated
    assert 0.9 * 80_000 < guess < 1.1 * 80_000
    reviews = train_paths(corpora["four"])
    assert heaps.estimate_types(reviews, runners.input_bytes(reviews)) == len(corpora["stream"])
    assert heaps.extrapolate(1000, 2000, 10, (600, 1000)) == int(1000 * 10 ** (math.log(1000 / 600) / math.log(2)))
    assert heaps.extrapolate(1000, 2000, 10, (1000, 1000)) == int(1000 * 10 ** 0.5)  # clipped to 0.5
    assert heaps.extrapolate(1000, 1000, 10, (500, 500)) == 10_000  # beta 1, never more types than words


def all_words(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [w for line in f for w in json.loads(line)["text"].split(" ")]


def test_a_damaged_shard_is_named_by_the_count_not_guessed_at_by_the_sample(tmp_path):
    """The sample of the memory check stops at a shard it cannot read: it extrapolated from the
    bytes before it as if they were none ('about 14.9 GB at its peak' for a 30 kB shard)."""
    [path] = distinct_words_shards(tmp_path / "data", 1, 5000)
    whole = Path(path).read_bytes()
    Path(path).write_bytes(whole[:len(whole) // 2])
    assert heaps.estimate_types([path], len(whole) // 2) < 5000
    with pytest.raises(UserInputError, match="damaged corpus shard"):
        count.count_split([path], 10**6, 10**6, ["--local_memory_gb=1"])


def test_word_types_are_estimated_from_every_part_of_the_corpus_not_its_first_shard(tmp_path):
    """The corpus stage writes documents in input order, so the first shard is the first input's
    text. The sample read the first shard alone: a table of codes there (every word new) before
    reviews (a few thousand words again and again) was taken for the whole corpus, 2.1 times its
    types on real reviews, 4.2 times here (0.84 now), and a local count that fits refused. The sample now takes
    each of up to 8 shards, from the first to the last, its share by its size."""
    [codes] = distinct_words_shards(tmp_path / "codes", 1, 20_000)
    rng = random.Random(1)
    common = ["".join(chr(0xAC00 + rng.randrange(11172)) for _ in range(3)) for _ in range(2000)]
    reviews = []
    for s in range(7):
        reviews.append(str(tmp_path / f"train-{s + 1:05d}-of-00008.jsonl.gz"))
        with gzip.open(reviews[-1], "wt", encoding="utf-8") as f:
            for i in range(600):
                text = " ".join(rng.choice(common) for _ in range(50))
                f.write(json.dumps({"id": f"{s}-{i}", "text": text, "morphs": []}, ensure_ascii=False) + "\n")
    paths = [codes, *reviews]
    exact = len(set(w for p in paths for w in all_words(p)))
    guess = heaps.estimate_types(paths, runners.input_bytes(paths), sample_bytes=300_000)
    assert 0.8 * exact < guess < 1.3 * exact, (guess, exact)  # before: 92,517 of 22,000
    assert heaps.spread([str(i) for i in range(20)]) == ["0", "3", "5", "8", "11", "14", "16", "19"]
