"""``kolectra report``'s check of eval texts in the pretraining corpus (pipeline/overlap.py), on small artifacts
written by hand (no Beam): a pretraining continued from another checkpoint (``train.init_from``) reaches that
checkpoint's corpus too; a result measured while the examples' holdout_ids file was not here is not read back
for the file's return; a root whose cache cannot be written still gets the result."""

from __future__ import annotations

import gzip
import json

from kolectra.core.stage import StageOutput
from kolectra.pipeline import overlap
from kolectra.pipeline.report import render
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.manifest import fingerprint_inputs
from kolectra.pipeline.store.request import Request


def files(**named):
    def produce(out):
        for rel, data in named.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
        return StageOutput(stats={})
    return produce


def shard(docs: list[str]) -> bytes:
    return gzip.compress("".join(json.dumps({"id": f"d{i}", "source": "s", "text": t, "sentences": [], "morphs": []},
                                            ensure_ascii=False) + "\n" for i, t in enumerate(docs)).encode())


def nsmc(path, texts):
    path.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t{t}\t{i % 2}\n" for i, t in enumerate(texts)),
                    encoding="utf-8")
    return path


def pretrained(store, name, docs, train=None, inputs=(), examples_config=None, examples_inputs=()):
    """corpus -> examples -> checkpoint (its hf/ pair as a pretraining writes it), by hand."""
    corpus = store.build(Request(kind="corpus", name=name, stage_version=1, config={"docs": docs}),
                         files(**{"data/train-00000-of-00001.jsonl.gz": shard(docs)}))
    examples = store.build(Request(kind="examples", name=name, stage_version=1,
                                   config=examples_config or {"split": "train"}, parents=(corpus,),
                                   inputs=tuple(examples_inputs)), files())
    pair = {f"hf/{role}/config.json": b"{}" for role in ("discriminator", "generator")}
    return store.build(Request(kind="checkpoint", name=name, stage_version=1, config={"train": train or {}},
                               parents=(examples,), inputs=tuple(inputs)), files(**pair))


def scored(store, ckpt, tmp, texts):
    train, test = nsmc(tmp / "train.txt", ["좋다", "싫다"]), nsmc(tmp / "test.txt", texts)
    return store.build(Request(kind="eval", name="nsmc", stage_version=1, config={"task": "nsmc"}, parents=(ckpt,),
                               inputs=tuple(fingerprint_inputs([train, test]))),
                       files(**{"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.5}).encode()}))


def section(store, ev, tmp) -> str:
    md = render(store, ev.id, dest=tmp / f"r-{ev.id}").read_text(encoding="utf-8")
    return md.split("## Eval texts in the pretraining corpus")[1].split("\n## ")[0]


def test_a_pretraining_continued_from_a_checkpoint_reaches_that_checkpoints_corpus(tmp_path):
    """init_from is an input, not a parent: the reviews the first pretraining read were never looked for ('0 of 3'
    against the second corpus alone); the first checkpoint's corpus is checked too, and a folder that is not a
    kolectra checkpoint's is said, not passed over."""
    store = Store(tmp_path / "root")
    first = pretrained(store, "first", ["연기가 정말 좋았어요", "지루한 영화"])
    hf = first.path / "hf"
    second = pretrained(store, "second", ["오늘은 날씨가 맑다"], train={"init_from": str(hf)},
                        inputs=fingerprint_inputs([hf]))
    ev = scored(store, second, tmp_path, ["연기가 정말 좋았어요", "지루한 영화", "처음 보는 배우"])
    text = section(store, ev, tmp_path)
    first_corpus = store.resolve("first", "corpus")
    assert f"**2 of 3 rows (66.7%)** appear verbatim in the pretraining corpus corpus/{first_corpus.path.name}" in text
    assert "**0 of 3 rows (0.0%)** appear verbatim" in text  # the second corpus, as before

    # continued on other examples of the same corpus (seq 128, then 512): that corpus once, not one line each
    longer = pretrained(store, "first", ["연기가 정말 좋았어요", "지루한 영화"], train={"init_from": str(hf)},
                        inputs=fingerprint_inputs([hf]), examples_config={"split": "train", "max_seq_length": 512})
    text = section(store, scored(store, longer, tmp_path, ["연기가 정말 좋았어요", "처음 보는 배우"]), tmp_path)
    assert text.count("appear verbatim") == 1 and "**1 of 2 rows (50.0%)**" in text

    folder = tmp_path / "hub-pair"  # a Hugging Face pair: its corpus is not known, and the report says so
    for role in ("discriminator", "generator"):
        (folder / role).mkdir(parents=True)
        (folder / role / "config.json").write_text("{}", encoding="utf-8")
    third = pretrained(store, "third", ["오늘은 비가 온다"], train={"init_from": str(folder)},
                       inputs=fingerprint_inputs([folder]))
    text = section(store, scored(store, third, tmp_path, ["연기가 정말 좋았어요"]), tmp_path)
    assert (f"Not checked against a pretraining corpus: checkpoint `{third.path.name}` continued the pretraining of "
            f"`{folder.resolve()}` (train.init_from), which is not a kolectra checkpoint's: its corpus is not known "
            "here.") in text


def test_a_result_measured_without_the_holdout_file_is_not_read_back_once_it_is_here(tmp_path):
    """Measured while the examples' holdout_ids file was changed (its documents counted, said so), the result was
    kept under the key of the file as recorded: once the file was back, the report read that result again."""
    store = Store(tmp_path / "root")
    ids = tmp_path / "holdout.txt"
    ids.write_text("d0\n", encoding="utf-8")
    ckpt = pretrained(store, "held", ["연기가 정말 좋았어요", "지루한 영화"],
                      examples_config={"split": "train", "holdout_ids": str(ids)},
                      examples_inputs=fingerprint_inputs([ids]))
    ev = scored(store, ckpt, tmp_path, ["연기가 정말 좋았어요", "지루한 영화"])
    ids.write_text("d1\n", encoding="utf-8")  # not the file the examples dropped by
    text = section(store, ev, tmp_path)
    assert "**2 of 2 rows (100.0%)**" in text and "counted as pretraining text" in text
    ids.write_text("d0\n", encoding="utf-8")  # back: d0 was dropped from the examples, no pretraining text
    text = section(store, ev, tmp_path)
    assert "**1 of 2 rows (50.0%)**" in text and "counted as pretraining text" not in text
    assert "1 documents the examples dropped by id (holdout_ids) were passed over." in text


def test_a_cache_that_cannot_be_written_still_gives_the_result(tmp_path, capsys):
    """A root this user may read but not write (here: its .cache a file): the corpus was read, then the report
    said 'Not checked ...: [Errno 17] File exists' and dropped what it had measured."""
    store = Store(tmp_path / "root")
    ckpt = pretrained(store, "ro", ["연기가 정말 좋았어요"])
    ev = scored(store, ckpt, tmp_path, ["연기가 정말 좋았어요", "처음 보는 배우"])
    (store.root / ".cache").write_text("", encoding="utf-8")
    capsys.readouterr()
    text = section(store, ev, tmp_path)
    assert "**1 of 2 rows (50.0%)** appear verbatim" in text and "Not checked" not in text
    assert "overlap: the result could not be kept in" in capsys.readouterr().err
    assert not [f for f in tmp_path.rglob("*.tmp") if f.is_file()]


def test_a_corpus_of_several_shards_says_its_progress(tmp_path, capsys, monkeypatch):
    """The first report of an eval on a big corpus reads it (minutes): more than one shard, its progress is said."""
    monkeypatch.setenv("KOLECTRA_PROGRESS", "lines")
    store = Store(tmp_path / "root")
    corpus = store.build(Request(kind="corpus", name="two", stage_version=1, config={}),
                         files(**{f"data/train-0000{i}-of-00002.jsonl.gz": shard([f"문서 {i}"]) for i in range(2)}))
    test = nsmc(tmp_path / "t.txt", ["문서 1"])
    capsys.readouterr()
    result = overlap.measure(corpus, "train", "nsmc", {}, test)
    assert result["columns"][0]["found"] == 1 and result["shards"] == 2
    assert f"overlap: corpus/{corpus.path.name} train" in capsys.readouterr().err


def test_a_damaged_or_missing_corpus_shard_is_said_and_the_report_written(tmp_path):
    """A truncated shard (an interrupted copy) ended `kolectra report` in 'internal error: EOFError: Compressed
    file ended ...', no report; it is now a not-checked line naming the shard, and the report is written."""
    store = Store(tmp_path / "root")
    ckpt = pretrained(store, "cut", ["연기가 정말 좋았어요"] + [f"문서 {i} " * 50 for i in range(300)])
    ev = scored(store, ckpt, tmp_path, ["연기가 정말 좋았어요"])
    (shard_file,) = (store.resolve("cut", "corpus").path / "data").iterdir()
    data = shard_file.read_bytes()
    shard_file.write_bytes(data[:len(data) // 2])
    text = section(store, ev, tmp_path)
    assert (f"its shard {shard_file} could not be read (EOFError: Compressed file ended before the end-of-stream "
            "marker was reached); kolectra artifacts verify names the files that differ from its manifest.") in text
    shard_file.unlink()  # gone: the same line, the system's words
    assert f"its shard {shard_file} could not be read (No such file or directory)" in section(store, ev, tmp_path)


def test_a_scored_file_named_with_a_terminal_escape_is_shown_escaped(tmp_path, capsys):
    """The overlap WARNING and progress lines printed the scored file's and corpus's names raw: a file named
    with ESC [ 2 J cleared the user's terminal; they are escaped as kolectra's other lines are (core/shown.py)."""
    store = Store(tmp_path / "root")
    ckpt = pretrained(store, "esc", ["연기가 정말 좋았어요"])
    train, test = nsmc(tmp_path / "train.txt", ["좋다"]), nsmc(tmp_path / "t\x1b[2J.txt", ["연기가 정말 좋았어요"])
    ev = store.build(Request(kind="eval", name="nsmc", stage_version=1, config={"task": "nsmc"}, parents=(ckpt,),
                             inputs=tuple(fingerprint_inputs([train, test]))),
                     files(**{"metrics.json": b'{"task": "nsmc", "accuracy": 0.5}'}))
    capsys.readouterr()
    section(store, ev, tmp_path)
    err = capsys.readouterr().err
    assert "WARNING: NSMC test (t\\x1b[2J.txt): 1 of 1 rows (100.0%)" in err
    assert "\x1b" not in err
