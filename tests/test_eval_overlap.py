"""``kolectra report`` on an eval says how many of its scored texts the pretraining corpus holds verbatim
(pipeline/overlap.py): a model pretrained on reviews and scored on NSMC's test reviews read an inflated accuracy
and nothing said so. A real corpus artifact (Beam, Kiwi) with planted test reviews, the chain down to a real
nsmc eval, the count exact; none planted says 0; no corpus in the lineage says so."""

from __future__ import annotations

import json
import shutil
import unicodedata

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline import overlap, stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from tests.model_support import build_examples, build_tokenizer
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

FT = ["max_length=32", "epochs=1", "max_train_examples=0", "max_eval_examples=0"]
PLANTED = [  # (test file's text, the corpus document holding it)
    ("연기가 정말 좋았어요 다시 보고 싶네요", "연기가 정말 좋았어요 다시 보고 싶네요"),
    ("스토리가  지루하고\u3000결말이   별로", "스토리가 지루하고 결말이 별로"),  # spaces folded
    ("ＯＳＴ가 너무 좋다 최고", "OST가 너무 좋다 최고"),  # full width folded, as the corpus stage does
    (unicodedata.normalize("NFD", "감동적인 영화였습니다 추천"), "감동적인 영화였습니다 추천"),  # NFD -> NFC
    ("배우들 연기 구멍 없음 강추", "첫 줄은 다른 이야기입니다\n배우들 연기 구멍 없음 강추\n끝 줄도 있어요"),  # a line
]
INSIDE = ("음악이 좋았다", "음악이 좋았다 그리고 영상미도 훌륭했다")  # part of a longer line: not counted
FILLER = ["오늘은 날씨가 맑고 바람이 시원했다", "주말에 친구와 시장에 가서 떡볶이를 먹었다",
          "도서관에서 역사책을 빌려 읽었다", "새로 산 운동화가 발에 잘 맞는다"]
CLEAN = ["처음 보는 배우인데 인상 깊었다", "중간에 졸았지만 결말은 괜찮았다", "두 번은 못 보겠다 너무 길다"]


def nsmc(path, texts):
    rows = ["id\tdocument\tlabel"] + [f"{100 + i}\t{t}\t{i % 2}" for i, t in enumerate(texts)]
    path.write_text("\n".join(rows + ["999\t\t1"]) + "\n", encoding="utf-8")  # an empty review: never found
    return path


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """corpus (the real stage) -> vocab, examples (small, built by the tests' helpers) -> a floor checkpoint."""
    tmp = tmp_path_factory.mktemp("overlap")
    docs = [d for _, d in PLANTED] + [INSIDE[1]] + FILLER
    raw = tmp / "reviews.jsonl"
    raw.write_text("".join(json.dumps({"id": f"r{i}", "text": d}, ensure_ascii=False) + "\n"
                           for i, d in enumerate(docs)), encoding="utf-8")
    store = Store(tmp / "root")
    corpus = stages.corpus(store, [str(raw)], sets=["valid_fraction=0"])

    def writes(fn):
        return lambda out: (fn(out), StageOutput(stats={}))[1]

    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)),
                        writes(build_tokenizer))
    examples = store.build(Request(kind="examples", name="e", stage_version=1, config={"split": "train"},
                                   parents=(corpus, vocab)),
                           writes(lambda out: build_examples(out, store.local(vocab), n=64, seq_len=32)))
    floor = stages.pretrain(store, examples, preset="tiny", sets=["train.steps=0", "train.warmup_steps=0"], seed=1)
    train = nsmc(tmp / "train.txt", ["좋은 영화 추천합니다", "별로였어요 지루함", "최고의 연출", "시간 낭비"] * 5)
    return store, corpus, floor, train, tmp


def report_of(store, art, tmp, capsys) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["report", art.path.name, "--out", str(store.root), "--dest", str(tmp / f"r-{art.id}")]) == 0
    return (tmp / f"r-{art.id}" / "report.md").read_text(encoding="utf-8"), capsys.readouterr().err


def test_planted_test_reviews_are_counted_exactly_in_the_report_and_warned_of(chain, capsys, monkeypatch):
    store, corpus, floor, train, tmp = chain
    texts = [t for t, _ in PLANTED] + [PLANTED[0][0], INSIDE[0]] + CLEAN  # the first planted review twice
    test = nsmc(tmp / "ratings_test.txt", texts)
    ev = stages.finetune(store, "nsmc", floor, train, test, preset="sample", sets=FT, seed=1)
    md, err = report_of(store, ev, tmp, capsys)
    # 5 planted + its repeat = 6 of 11 rows (the empty review included, never found); INSIDE's text is not a line
    assert (f"- NSMC test (ratings_test.txt): **6 of 11 rows (54.5%)** appear verbatim in the pretraining corpus "
            f"corpus/{corpus.path.name} (train split); a score on them may be inflated by memorisation.") in md
    section = md.split("## Eval texts in the pretraining corpus")[1].split("\n## ")[0]
    assert "연기가 정말 좋았어요" in section and "OST" not in section.replace("ＯＳＴ", "")
    assert "음악이 좋았다" not in section and CLEAN[0] not in section
    assert "Read 10 documents (13 lines, 1 shard," in section  # the three-line document: its lines and itself
    assert ("WARNING: NSMC test (ratings_test.txt): 6 of 11 rows (54.5%) appear verbatim in the pretraining corpus "
            f"corpus/{corpus.path.name} (train split); the score may be inflated") in err

    # once measured, kept: a second report reads no corpus, and says the same
    monkeypatch.setattr(overlap, "scan", lambda *a, **k: pytest.fail("the corpus was read again"))
    again, _ = report_of(store, ev, tmp, capsys)
    assert "**6 of 11 rows (54.5%)**" in again
    cached = list(store.cache_dir("overlap").glob("*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text(encoding="utf-8"))["columns"][0]["found"] == 6


def test_no_planted_review_says_0_and_a_changed_file_is_not_checked(chain, capsys):
    store, corpus, floor, train, tmp = chain
    test = nsmc(tmp / "clean_test.txt", CLEAN)
    ev = stages.finetune(store, "nsmc", floor, train, test, preset="sample", sets=FT, seed=1)
    test.write_text(test.read_text(encoding="utf-8") + "1000\t새 줄\t1\n", encoding="utf-8")  # changed since
    md, _ = report_of(store, ev, tmp, capsys)
    assert (f"Not checked against `corpus/{corpus.path.name}`: the scored file `{test}` is not the file it was "
            "(changed since); not checked.") in md
    nsmc(test, CLEAN)  # the bytes it was scored on again
    md, err = report_of(store, ev, tmp, capsys)
    assert "- NSMC test (clean_test.txt): **0 of 4 rows (0.0%)** appear verbatim in the pretraining corpus" in md
    assert "WARNING" not in err


def test_an_eval_whose_lineage_reaches_no_corpus_says_so(chain, capsys):
    store, corpus, floor, train, tmp = chain
    test = nsmc(tmp / "hf_test.txt", [PLANTED[0][0]] + CLEAN)
    hf = shutil.copytree(floor.path / "hf" / "discriminator", tmp / "hf-model")  # a Hugging Face model folder
    ev = stages.finetune(store, "nsmc", hf, train, test, preset="sample", sets=FT, seed=1)
    md, _ = report_of(store, ev, tmp, capsys)
    assert ("Not checked: no pretraining corpus in this eval's lineage (the model is not a kolectra checkpoint "
            "pretrained from one; a Hugging Face model's corpus is not known here).") in md

    # a corpus that was deleted from the root: named, not read as "no overlap"
    on_floor = stages.finetune(store, "nsmc", floor, train, test, preset="sample", sets=FT, seed=2)
    away = corpus.path.rename(tmp / "moved-away")
    try:
        md, _ = report_of(store, on_floor, tmp, capsys)
    finally:
        away.rename(corpus.path)  # the other tests' corpus
    assert f"Not checked against a pretraining corpus: its corpus `{corpus.id}`" in md
    assert "appear verbatim" not in md


def test_classify_pairs_korquad_and_documents_dropped_by_id(chain, tmp_path):
    """The text columns of classify (a pair: each column counted) and KorQuAD's questions and contexts are matched
    as NSMC's reviews are; documents the examples dropped by id (holdout_ids) are no pretraining text."""
    from kolectra.pipeline.store.manifest import fingerprint_inputs

    store, corpus, *_ = chain
    table = tmp_path / "pairs.tsv"
    table.write_text("premise\thypothesis\tlabel\n"
                     f"{PLANTED[0][0]}\t{CLEAN[0]}\tyes\n{CLEAN[1]}\t{PLANTED[2][0]}\tno\n{CLEAN[2]}\t{FILLER[0]}\tno\n",
                     encoding="utf-8")
    result = overlap.measure(corpus, "train", "classify", {"text_column": "premise",
                                                                  "text_pair_column": "hypothesis"}, table)
    assert [(c["column"], c["found"], c["total"]) for c in result["columns"]] == [("premise", 1, 3), ("hypothesis", 2, 3)]

    squad = tmp_path / "dev.json"
    qas = [{"id": f"q{i}", "question": q, "answers": [{"text": "영화", "answer_start": 0}]}
           for i, q in enumerate([FILLER[1], CLEAN[0], FILLER[1] + " 맞나요"])]
    squad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [
        {"context": "영화 " + CLEAN[1], "qas": qas[:2]}, {"context": "영화 이야기", "qas": qas[2:]}]}]},
        ensure_ascii=False), encoding="utf-8")
    result = overlap.measure(corpus, "train", "korquad", {}, squad)
    assert [(c["column"], c["unit"], c["found"], c["total"]) for c in result["columns"]] == [
        ("question", "questions", 1, 3), ("context", "contexts", 0, 2)]

    ids = tmp_path / "holdout.txt"
    ids.write_text("r0\nr1\n", encoding="utf-8")  # the first two planted documents
    examples = store.build(Request(kind="examples", name="held", stage_version=1,
                                   config={"split": "train", "holdout_ids": str(ids)}, parents=(corpus,),
                                   inputs=tuple(fingerprint_inputs([ids]))),
                           lambda out: StageOutput(stats={}))
    test = nsmc(tmp_path / "test.txt", [t for t, _ in PLANTED])
    result = overlap.overlap(store, examples, corpus, "nsmc", {}, fingerprint_inputs([test])[0])
    assert (result["columns"][0]["found"], result["columns"][0]["total"], result["dropped_by_holdout"]) == (3, 6, 2)
    ids.write_text("r0\n", encoding="utf-8")  # not the file the examples dropped by: said, and nothing dropped
    other = nsmc(tmp_path / "test2.txt", [t for t, _ in PLANTED][:4])
    result = overlap.overlap(store, examples, corpus, "nsmc", {}, fingerprint_inputs([other])[0])
    assert (result["columns"][0]["found"], result["dropped_by_holdout"]) == (4, 0)
    assert "holdout_ids file" in result["holdout_note"] and "counted as pretraining text" in result["holdout_note"]


def test_a_corpus_in_a_bucket_is_streamed_where_it_is_with_its_own_text_rules(bucket, tmp_path, monkeypatch):  # noqa: F811
    """A root on S3 (moto): the corpus's shards are read in place, no copy in this machine's cache; and the
    corpus's max_repeat (ㅋㅋㅋㅋ -> ㅋㅋ) is applied to the test texts, as the corpus stage applied it."""
    import gzip

    from kolectra.pipeline.report import render
    from kolectra.pipeline.store.factory import open_store
    from kolectra.pipeline.store.manifest import fingerprint_inputs
    from tests.test_eval_overlap_lineage import files

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    store = open_store(f"{bucket}/k")
    docs = ["ㅋㅋ 이 영화 재밌다", "줄거리가 탄탄하다\n배우가 좋다"]
    shard = gzip.compress("".join(json.dumps({"id": f"d{i}", "source": "s", "text": t, "sentences": [], "morphs": []},
                                             ensure_ascii=False) + "\n" for i, t in enumerate(docs)).encode())

    corpus = store.build(Request(kind="corpus", name="toy", stage_version=1, config={"max_repeat": 2}),
                         files(**{"data/train-00000-of-00001.jsonl.gz": shard}))
    examples = store.build(Request(kind="examples", name="toy", stage_version=1, config={"split": "train"},
                                   parents=(corpus,)), files())
    ckpt = store.build(Request(kind="checkpoint", name="toy", stage_version=1, config={}, parents=(examples,)), files())
    train, test = nsmc(tmp_path / "train.txt", ["좋다", "싫다"]), nsmc(tmp_path / "test.txt",
                                                                    ["ㅋㅋㅋㅋㅋ 이 영화 재밌다", "배우가 좋다", "줄거리가 탄탄하다"])
    ev = store.build(Request(kind="eval", name="toy-nsmc", stage_version=1, config={"task": "nsmc"}, parents=(ckpt,),
                             inputs=tuple(fingerprint_inputs([train, test]))),
                     files(**{"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.5}).encode()}))
    md = render(store, ev.id, dest=tmp_path / "r").read_text(encoding="utf-8")
    assert "- NSMC test (test.txt): **3 of 4 rows (75.0%)** appear verbatim in the pretraining corpus" in md
    assert not (tmp_path / "cache" / "artifacts" / "corpus").exists()


def test_a_run_capped_by_max_eval_examples_is_checked_on_the_rows_it_scored(chain, capsys):
    """max_eval_examples=3 scores the first 3 rows (the sample preset's: 128): the rows past them were counted,
    '3 of 6', where the score holds 1 of them."""
    store, corpus, floor, train, tmp = chain
    test = nsmc(tmp / "capped_test.txt", [CLEAN[0], PLANTED[0][0], CLEAN[1], PLANTED[1][0], PLANTED[2][0]])
    sets = [s for s in FT if not s.startswith("max_eval_examples")] + ["max_eval_examples=3"]
    ev = stages.finetune(store, "nsmc", floor, train, test, preset="sample", sets=sets, seed=1)
    md, err = report_of(store, ev, tmp, capsys)
    assert ("- NSMC test (capped_test.txt), the first 3 of its 6 rows (max_eval_examples=3): **1 of 3 rows (33.3%)** "
            "appear verbatim in the pretraining corpus") in md
    assert "ＯＳＴ" not in md and "스토리가" not in md  # rows 4 and 5, past the cap
    assert "WARNING: NSMC test (capped_test.txt), the first 3 of its 6 rows (max_eval_examples=3): 1 of 3 rows" in err
