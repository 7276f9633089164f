"""The vocab stage's word count, shard by shard, here and in processes beside this one (vocab/count.py).

Real Kiwi morphemes in the corpus, real ``tokenizers`` pre-tokeniser, real child processes."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from kolectra.core.errors import UserInputError
from kolectra.corpus import shards
from kolectra.vocab import beside, count, words
from kolectra.vocab import build as stage
from kolectra.vocab.config import VocabConfig
from tests.test_vocab_corpus import small_corpus

CFG = VocabConfig(vocab_size=1000, num_unused=10)
FILES = ("tokenizer.json", "vocab.txt", "report.json")


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
    return {"one": one, "four": resharded(one, 4, root / "four")}


def record_beside(monkeypatch) -> list[int]:
    """The process ids of every :class:`Beside` started from now on (the list fills as they start)."""
    started = []
    real = beside.Beside.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        started.append(self.process.pid)

    monkeypatch.setattr(beside.Beside, "__init__", spy)
    return started


@pytest.fixture
def everywhere(monkeypatch):
    """Every run of shards beside this process counts, however small; the children are recorded."""
    monkeypatch.setattr(count, "BESIDE_MIN_BYTES", 1)
    return record_beside(monkeypatch)


def test_shards_counted_beside_add_up_to_one_stream_in_its_order(corpora, everywhere):
    stream, stream_counts = words.count_words(words.iter_docs(corpora["one"], "train"))
    table, counts, processes = count.count_split(corpora["four"], "train", None, cpus=3)
    assert processes == 3 and len(everywhere) == 2 and os.getpid() not in everywhere
    assert list(table.items()) == list(stream.items())  # the counts, and the order words were first seen
    assert counts == stream_counts
    alone, alone_counts, one = count.count_split(corpora["four"], "train", None, cpus=1)
    assert one == 1 and list(alone.items()) == list(stream.items()) and alone_counts == counts


def test_past_max_word_types_the_table_is_the_same_wherever_shards_are_counted(corpora, everywhere):
    here, here_counts, _ = count.count_split(corpora["four"], "train", 40, cpus=1)
    there, there_counts, processes = count.count_split(corpora["four"], "train", 40, cpus=4)
    assert processes == 4 and everywhere
    assert list(here.items()) == list(there.items()) and here_counts == there_counts
    assert here_counts["table_prunes"] > 0 and len(here) <= 40
    # what was pruned is counted: every word is in the table or among the pruned ones
    stream, stream_counts = words.count_words(words.iter_docs(corpora["one"], "train"))
    assert sum(here.values()) + here_counts["words_pruned"] == stream_counts["words"] == here_counts["words"]


@pytest.mark.parametrize("cpus", [2, 3])
def test_no_more_runs_are_counted_at_once_than_there_are_cpus(corpora, tmp_path, monkeypatch, cpus):
    eight = resharded(corpora["one"], 8, tmp_path / "eight")
    monkeypatch.setattr(count, "BESIDE_MIN_BYTES", 1)
    children, alive_at_start = [], []
    real = beside.Beside.__init__

    def spy(self, *args, **kwargs):
        alive_at_start.append(sum(p.poll() is None for p in children))
        real(self, *args, **kwargs)
        children.append(self.process)

    monkeypatch.setattr(beside.Beside, "__init__", spy)
    table, counts, processes = count.count_split(eight, "train", None, cpus)
    assert processes == cpus and len(children) == 8 - len(range(0, 8, cpus))  # every cpus-th run counted here
    assert max(alive_at_start) <= cpus - 2  # besides the one being started
    stream, stream_counts = words.count_words(words.iter_docs(eight, "train"))
    assert list(table.items()) == list(stream.items()) and counts == stream_counts


def test_runs_are_contiguous_about_equal_and_not_smaller_than_the_minimum(tmp_path, monkeypatch):
    paths = []
    for i, size in enumerate([5, 1, 1, 1, 4, 4]):
        paths.append(tmp_path / f"train-{i:05d}-of-00006.jsonl.gz")
        paths[-1].write_bytes(b"x" * size)
    monkeypatch.setattr(count, "BESIDE_MIN_BYTES", 1)
    assert count.runs(paths, 1) == [paths]
    assert count.runs(paths, 2) == [paths[:4], paths[4:]]  # 8 and 8 bytes
    assert count.runs(paths, 3) == [paths[:1], paths[1:5], paths[5:]]
    assert [p for r in count.runs(paths, 16) for p in r] == paths and len(count.runs(paths, 16)) == 6
    monkeypatch.setattr(count, "BESIDE_MIN_BYTES", 8)
    assert count.runs(paths, 16) == [paths[:4], paths[4:]]  # 16 bytes: two runs of at least 8
    assert count.runs([], 4) == []


def test_the_stage_gives_the_same_files_when_it_counts_beside(corpora, everywhere, tmp_path, monkeypatch):
    alone = tmp_path / "alone"
    alone.mkdir()
    monkeypatch.setattr(stage, "_cpus", lambda: 1)
    stage.build(CFG, corpora["four"], alone)
    assert not everywhere
    monkeypatch.setattr(stage, "_cpus", lambda: 2)
    monkeypatch.setattr(stage, "SIDE_BY_SIDE_MIN_WORD_TYPES", 10**9)  # only the count beside
    split = tmp_path / "split"
    split.mkdir()
    stage.build(CFG, corpora["four"], split)
    assert len(everywhere) == 2  # runs 1 and 3, one after the other; this process counted 0 and 2
    for f in FILES:
        assert (split / f).read_bytes() == (alone / f).read_bytes(), f


def test_a_bad_document_counted_beside_is_a_clear_error_naming_its_shard(corpora, everywhere, tmp_path):
    bad = resharded(corpora["one"], 2, tmp_path / "bad")
    last = shards.shard_paths(bad, "train")[-1]
    with gzip.open(last, "at", encoding="utf-8") as f:
        f.write(json.dumps({"id": "x", "morphs": []}) + "\n")
    with pytest.raises(UserInputError, match=r"train-00001-of-00002.jsonl.gz document without a 'text' string"):
        count.count_split(bad, "train", None, cpus=2)
    assert len(everywhere) == 1


def test_a_counting_process_that_dies_is_replaced_by_counting_here(corpora, capsys):
    paths = shards.shard_paths(corpora["four"], "train")
    expected = count.count_shards(paths[2:], None)
    killed = beside.Beside("counting 2 shard(s)", count.count_shards, paths[2:], None)
    killed.process.kill()
    tables, _ = killed.result()
    assert tables == expected
    assert "counting 2 shard(s) died (exit code -9); doing it here instead" in capsys.readouterr().err
