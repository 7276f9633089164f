"""The examples stage's refusals and bad input: settings, tokenizers and vocabularies it cannot use,
unreadable and damaged corpus shards (each named by file and line), a local run over the machine's
memory, a remote runner's workers that cannot reach local files, and the reports a work item sends
(bounded whatever its bad lines). The layout and packing tests are in ``tests/test_examples.py``,
whose corpus and vocab fixture these share."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to
from tokenizers import Tokenizer, models

from kolectra.core.config import ConfigError, override
from kolectra.core.errors import UserInputError
from kolectra.core.stage import StageOutput
from kolectra.corpus import examples_beam, runners
from kolectra.corpus.examples import build
from kolectra.corpus.local_memory import LocalMemoryError
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Store
from kolectra.pipeline.store.request import Request
from tests.test_examples import CFG, _build, inputs  # noqa: F401 - inputs is a fixture
from tests.test_vocab_corpus import write_corpus


def test_refusals(inputs, tmp_path):
    with pytest.raises(ConfigError, match="max_seq_length"):
        override(CFG, ["max_seq_length=7"])
    with pytest.raises(ValueError, match="tokenizer.json not found"):
        build(CFG, inputs["corpus"], tmp_path / "nowhere", tmp_path)
    no_specials = tmp_path / "nospecials"
    no_specials.mkdir()
    Tokenizer(models.WordPiece(vocab={"[UNK]": 0, "영화": 1, "##가": 2}, unk_token="[UNK]")).save(
        str(no_specials / "tokenizer.json"))
    with pytest.raises(ValueError, match=r"tokenizer.json lacks the special tokens"):
        build(CFG, inputs["corpus"], no_specials, tmp_path)
    bad = write_corpus(tmp_path / "bad", {"train": [["좋은 영화였다."], ["재미없다."]]})
    path = bad / "data" / "train-00000-of-00001.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        good, doc = f.readlines()
    doc = json.loads(doc)
    del doc["sentences"]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(good + json.dumps(doc, ensure_ascii=False) + "\n{not json\n")
    out = tmp_path / "o"
    out.mkdir()
    with pytest.raises(ValueError, match=r"2 unreadable document\(s\).*train-00000-of-00001.jsonl.gz:2: .*sentences"):
        build(CFG, bad, inputs["vocab"], out)
    with pytest.raises(ValueError, match="no valid shards under"):
        build(override(CFG, ["split=valid"]), bad, inputs["vocab"], tmp_path / "o2")
    # a split whose shards hold no document at all: the job still reports, and the stage says so
    empty = write_corpus(tmp_path / "empty", {"train": [["좋은 영화였다."]]})
    with gzip.open(empty / "data" / "train-00000-of-00001.jsonl.gz", "wt", encoding="utf-8"):
        pass
    (tmp_path / "o3").mkdir()
    with pytest.raises(ValueError, match="the train split of .* yields no tokens"):
        build(CFG, empty, inputs["vocab"], tmp_path / "o3")


def _publish(store: Store, kind: str, src: Path, parents=()) -> Artifact:
    """An existing directory as a complete artifact of ``store`` (copied in by Store.build)."""
    req = Request(kind=kind, name=kind, stage_version=1, config={"src": str(src)}, parents=tuple(parents))
    return store.build(req, lambda out: (shutil.copytree(src, out, dirs_exist_ok=True), StageOutput({}))[1])


def test_refuses_a_vocab_of_another_corpus_unless_told(inputs, tmp_path):
    store = Store(tmp_path / "root")
    corpus = _publish(store, "corpus", inputs["corpus"])
    other = _publish(store, "corpus", inputs["corpus"] / "data")  # another corpus id
    vocab = _publish(store, "vocab", inputs["vocab"], parents=[other])
    with pytest.raises(ArtifactError, match=rf"learned from corpus {other.id}, not from .*{corpus.id}.*"
                                            r"allow_other_corpus_vocab"):
        stages.examples(store, corpus, vocab, sets=["max_seq_length=40"])
    assert stages.examples(store, corpus, vocab, sets=["max_seq_length=40", "allow_other_corpus_vocab=true"])
    own = _publish(store, "vocab", inputs["vocab"], parents=[corpus])
    assert stages.examples(store, corpus, own, sets=["max_seq_length=40"]).manifest["stats"]["examples"]


def test_refuses_a_length_the_tokenizer_cannot_take(inputs, tmp_path):
    vocab = tmp_path / "vocab"
    shutil.copytree(inputs["vocab"], vocab)
    conf = json.loads((vocab / "tokenizer_config.json").read_text())
    conf["model_max_length"] = 32
    (vocab / "tokenizer_config.json").write_text(json.dumps(conf))
    with pytest.raises(ValueError, match="max_seq_length=40 exceeds model_max_length=32"):
        build(CFG, inputs["corpus"], vocab, tmp_path / "o")
    assert not (tmp_path / "o").exists()  # refused before any work


def test_a_local_run_over_the_machines_memory_is_refused_in_one_line(inputs, tmp_path):
    with pytest.raises(LocalMemoryError) as e:
        build(CFG, inputs["corpus"], inputs["vocab"], tmp_path / "o", ["--local_memory_gb=0.1"])
    said = str(e.value)
    assert said.startswith("examples:") and "\n" not in said
    assert "DataflowRunner" in said and "--local_memory_gb 1 " in said and "gzipped corpus shards" in said
    assert not (tmp_path / "o").exists()  # refused before any work
    # the estimate counts a shuffle of the sequences only where the job makes one: one worker takes
    # the whole shard here, three share it (each then reads it and keeps every third batch)
    assert "0.05 MB per MB" in said
    with pytest.raises(LocalMemoryError, match=" 2 MB per MB"):
        build(CFG, inputs["corpus"], inputs["vocab"], tmp_path / "o",
              ["--local_memory_gb=0.1", "--direct_num_workers=3", "--direct_running_mode=multi_threading"])
    _, stats = _build(CFG, inputs, "fits", beam_args=["--local_memory_gb=1"])  # the estimate fits in 1 GB
    assert stats["examples"] > 0


def _reports(job: examples_beam.Job, path: Path) -> list[tuple]:
    fn = examples_beam.TokenizeAndPack(job)
    fn.setup()
    return [o.value for o in fn.process((0, [(0, str(path), 0, 1)])) if isinstance(o, beam.pvalue.TaggedOutput)]


def test_a_work_items_reports_do_not_grow_with_its_documents_or_bad_lines(inputs, tmp_path, monkeypatch):
    # CollectReports gathers every report of the job in one list on one worker: a work item sends
    # its tallies once and names at most BAD_NAMED bad lines, however many batches and bad lines
    monkeypatch.setattr(examples_beam, "BAD_NAMED", 3, raising=False)
    with gzip.open(inputs["corpus"] / "data" / "train-00000-of-00001.jsonl.gz", "rt", encoding="utf-8") as f:
        good = f.readline()
    job = examples_beam.Job(cfg=override(CFG, ["batch_documents=4"]), tokenizer_path=str(inputs["vocab"] / "tokenizer.json"),
                            dtype="uint16", vocab_size=1000, out_dir=str(tmp_path))
    reports = {}
    for n in (20, 200):
        path = tmp_path / f"shard-{n}.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write("".join(good if i % 2 else "{not json\n" for i in range(n)))
        reports[n] = _reports(job, path)
    assert len(reports[20]) == len(reports[200]) <= 3 + 8  # 3 bad lines named, 8 tallies
    for n, sent in reports.items():
        tally = {r[1]: r[2] for r in sent if r[0] == "tally"}
        assert tally["bad_documents"] == tally["documents"] == n // 2  # every line is counted
        bad = [r[1].split(": ")[0] + ": " for r in sent if r[0] == "bad"]
        assert bad == sorted(f"{tmp_path}/shard-{n}.jsonl.gz:{i}: " for i in range(1, n + 1, 2))[:3]
    # the job: every bad line counted, the first BAD_NAMED named in the file the stage reads back
    corpus = tmp_path / "corpus"
    shutil.copytree(inputs["corpus"], corpus)
    shutil.copy(tmp_path / "shard-200.jsonl.gz", corpus / "data" / "train-00000-of-00001.jsonl.gz")
    (tmp_path / "out").mkdir()
    with pytest.raises(ValueError, match=r"100 unreadable document\(s\)"):
        build(CFG, corpus, inputs["vocab"], tmp_path / "out")
    assert len(json.loads((tmp_path / "out" / examples_beam.BAD_FILE).read_text())) == 3


def _work_item_reports(item: int, bad: int) -> list[tuple]:
    """What a work item that wrote one piece sends (TokenizeAndPack and write_shard's kinds)."""
    path = f"data/shard-{item:05d}-0000.arrow"
    return [("tally", "documents", 10), ("tally", "bad_documents", bad), ("tally", "examples", 4),
            *(("bad", f"c/train-{item:05d}.jsonl.gz:{line}: no usable 'id'") for line in range(bad)),
            ("piece", (item, 0), {"path": path, "examples": 4}), ("file", {"path": path, "bytes": 9, "sha256": "0" * 64})]


def test_the_jobs_reports_are_summed_as_they_come_not_listed(monkeypatch):
    # CollectReports was a list of every report on one worker: each work item's tallies and up to
    # BAD_NAMED bad messages, so it grew with the work items (the corpus / shard_bytes). Summed as
    # they come it holds the tallies once, BAD_NAMED messages and the index's two entries a piece.
    monkeypatch.setattr(examples_beam, "BAD_NAMED", 3, raising=False)
    reports = [r for item in range(40) for r in _work_item_reports(item, 5)]
    fn = examples_beam.CollectReports()
    held = fn.create_accumulator()
    for report in reports:
        held = fn.add_input(held, report)
    tally, bad, pieces, files = held
    assert tally == {"documents": 400, "bad_documents": 200, "examples": 160}
    first = sorted(r[1] for r in reports if r[0] == "bad")[:3]
    assert bad == first and len(pieces) == len(files) == 40
    # the same through Beam, whose workers each sum a part and merge their sums
    halves = [fn.create_accumulator(), fn.create_accumulator()]
    for i, report in enumerate(reports):
        halves[i % 2] = fn.add_input(halves[i % 2], report)
    assert fn.merge_accumulators(halves)[:2] == (tally, bad)
    with beam.Pipeline(options=runners.pipeline_options(["--direct_num_workers=1"])) as p:  # no Prism attempt
        summed = (p | beam.Create(reports)
                  | beam.CombineGlobally(examples_beam.CollectReports()).without_defaults())
        assert_that(summed | beam.Map(lambda t: (t[0], t[1], sorted(t[2]), sorted(f["path"] for f in t[3]))),
                    equal_to([(tally, bad, sorted(pieces), sorted(f["path"] for f in files))]))

def test_a_text_the_tokenizer_cannot_take_is_an_unreadable_document_named_by_line(inputs, tmp_path):
    # a 'text' that is a list was read as a pair of texts (["영화", "좋다"]: two "sentences" packed as
    # one) or failed the whole job's tokenizer batch with a bare TypeError; a lone surrogate (valid
    # JSON, no UTF-8 spelling) failed it too: each is now one bad document, named by file and line
    corpus = write_corpus(tmp_path / "c", {"train": [["좋은 영화였다."]]})
    path = corpus / "data" / "train-00000-of-00001.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        good = f.read()
    lines = [{"id": "pair", "text": ["영화", "좋다"], "sentences": [[0, 2]]},
             {"id": "list", "text": ["영화", "좋다"], "sentences": [[0, 1]]},
             {"id": "lone", "text": "영화\ud800좋다", "sentences": [[0, 5]]}]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(good + "".join(json.dumps(d) + "\n" for d in lines))
    out = tmp_path / "o"
    out.mkdir()
    with pytest.raises(UserInputError, match=r"3 unreadable document\(s\)") as e:
        build(CFG, corpus, inputs["vocab"], out)
    said = str(e.value)
    assert "train-00000-of-00001.jsonl.gz:2: " in said and "'text' is list, not a string" in said
    bad = json.loads((out / examples_beam.BAD_FILE).read_text())
    assert any(m.endswith(":4: no usable 'id'/'text'/'sentences' (ValueError(\"'text' has a lone surrogate at "
                          "character 2 (no UTF-8 spelling)\"))") for m in bad), bad


@pytest.mark.parametrize("damage", ["cut", "not_gzip"])
def test_a_damaged_corpus_shard_is_refused_naming_it(inputs, tmp_path, damage):
    # the decompressor's own error (EOFError, zlib.error, BadGzipFile) named no file
    corpus = write_corpus(tmp_path / "c", {"train": [["좋은 영화였다."]] * 300})
    path = corpus / "data" / "train-00000-of-00001.jsonl.gz"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2] if damage == "cut" else b"not gzip\n" + data)
    (tmp_path / "o").mkdir()
    with pytest.raises(UserInputError, match=rf"{path}: damaged corpus shard, it cannot be read to its end .*"
                                             r"`kolectra artifacts verify` the corpus"):
        build(CFG, corpus, inputs["vocab"], tmp_path / "o")


def test_a_shard_read_in_small_batches_gives_every_line_once_in_order(tmp_path, monkeypatch):
    # batches are taken at an index into a block's lines (cutting the front off the list at each
    # batch was quadratic: docs/examples.md has the figures; speed is measured there, not asserted)
    path = tmp_path / "train-00000-of-00001.jsonl.gz"
    lines = [b'{"id": "%d"}' % i for i in range(100_000)]
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b"\n".join(lines) + b"\n")
    got = list(examples_beam.read_lines(str(path), 1))
    assert got == [(i + 1, [line]) for i, line in enumerate(lines)]
    # the same batches as before, over blocks that cut lines in two and with a short last batch
    monkeypatch.setattr(examples_beam, "READ_BYTES", 1000)
    path.write_bytes(gzip.compress(b"\n".join(lines[:5000])))  # no newline at the end
    for batch, part, parts in ((7, 0, 1), (7, 2, 3), (5000, 1, 2), (4999, 1, 2), (3000, 0, 1)):
        want = [(k + 1, lines[k:min(k + batch, 5000)]) for k in range(0, 5000, batch) if k // batch % parts == part]
        assert list(examples_beam.read_lines(str(path), batch, part, parts)) == want, (batch, part, parts)


def test_a_batch_closes_at_batch_bytes_so_long_documents_are_not_held_batch_documents_at_a_time(inputs, tmp_path,
                                                                                                 monkeypatch):
    # a batch is held tokenised (about 30 bytes a byte of its lines): 4,096 documents of 10,000
    # characters held 3.5 GB (docs/scale.md, "Skewed inputs"); it now closes at batch_bytes too
    lines = [b'{"id": "%d", "text": "%s"}' % (i, b"x" * (100 * (i % 7) + 900)) for i in range(300)]
    path = tmp_path / "train-00000-of-00001.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines)))
    monkeypatch.setattr(examples_beam, "READ_BYTES", 4096)  # blocks that cut lines in two
    for part, parts in ((0, 1), (1, 3)):
        got = list(examples_beam.read_lines(str(path), 4096, part, parts, batch_bytes=8000))
        batches = list(examples_beam.read_lines(str(path), 4096, 0, 1, batch_bytes=8000))
        assert got == batches[part::parts]
    assert [line for _, batch in batches for line in batch] == lines  # every line once, in order
    assert [first for first, _ in batches] == list(itertools.accumulate([1] + [len(b) for _, b in batches[:-1]]))
    for _, batch in batches[:-1]:  # at batch_bytes or just past it, by one line
        size = sum(len(line) + 1 for line in batch)
        assert 8000 <= size < 8000 + len(batch[-1]) + 1
    assert list(examples_beam.read_lines(str(path), 7, batch_bytes=10**9)) == list(examples_beam.read_lines(str(path), 7))
    # the step: a shard of long documents is tokenised a few at a time
    assert CFG.batch_bytes == 4 << 20  # the default
    doc = json.loads(gzip.open(inputs["corpus"] / "data" / "train-00000-of-00001.jsonl.gz").readline())
    text = " ".join([doc["text"]] * (20_000 // len(doc["text"])))  # about 20,000 characters
    shard = tmp_path / "long.jsonl.gz"
    with gzip.open(shard, "wt", encoding="utf-8") as f:
        for i in range(30):
            f.write(json.dumps({"id": str(i), "text": text, "sentences": [[0, len(text)]]}, ensure_ascii=False) + "\n")
    cfg = override(CFG, ["batch_bytes=200000"])
    job = examples_beam.Job(cfg=cfg, tokenizer_path=str(inputs["vocab"] / "tokenizer.json"), dtype="uint16",
                            vocab_size=1000, out_dir=str(tmp_path))
    step, sizes = examples_beam.TokenizeAndPack(job), []
    step.setup()
    batch = step._batch
    monkeypatch.setattr(step, "_batch", lambda shard, path, first, lines, *a: sizes.append(len(lines)) or batch(
        shard, path, first, lines, *a))
    tally = {o.value[1]: o.value[2] for o in step.process((0, [(0, str(shard), 0, 1)]))
             if isinstance(o, beam.pvalue.TaggedOutput) and o.value[0] == "tally"}
    assert tally["documents"] == 30 and sum(sizes) == 30
    assert max(sizes) <= -(-cfg.batch_bytes // len(text.encode())) < 30 < cfg.batch_documents


def test_a_remote_runner_is_refused_what_its_workers_cannot_reach(inputs, tmp_path):
    # a holdout list is a file of this machine, and so is a local root's corpus, vocab and output:
    # Dataflow's workers failed on them once the job ran; refused first, as the corpus stage does
    args = ["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/t"]
    holdout = tmp_path / "ids.txt"
    holdout.write_text("train-1\n")
    with pytest.raises(UserInputError, match=r"holdout_ids=.*ids.txt is a file on this machine, which the "
                                             r"DataflowRunner workers cannot read"):
        build(override(CFG, [f"holdout_ids={holdout}"]), inputs["corpus"], inputs["vocab"], tmp_path / "o", args)
    with pytest.raises(UserInputError, match=r"runner DataflowRunner runs on remote workers, which cannot read the "
                                             r"corpus and vocab or write .*/o on this machine: .*--out gs://BUCKET"):
        build(CFG, inputs["corpus"], inputs["vocab"], tmp_path / "o", args)
    assert not (tmp_path / "o").exists()
