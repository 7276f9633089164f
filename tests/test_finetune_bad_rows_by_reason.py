"""classify, regress and ner on users' files with bad rows of several kinds: metrics.json counts each file's rows
left out by reason (``bad_rows_by_reason``, a snake_case key a reason), so that rows in = rows used + the reasons'
counts. Before, it kept the total (``bad_rows``) and the first 20 lines (``bad_lines``) only: a file of hundreds of
mixed bad rows could not be reconciled by reason. A real fine-tune each (a tiny random ELECTRA, 1 epoch)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks.tiny_model import build_tiny_model_dir
from kolectra.finetune import classify, config, ner, regress
from kolectra.finetune.readers.nsmc import read_nsmc


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_tiny_model_dir(tmp_path_factory.mktemp("model"), ["서울 부산 문장 좋다 싫다 김민수 에서 왔다"],
                                seed=0, hidden=32, layers=1, heads=2, vocab_size=120, max_position=32)


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def reconciles(stats: dict, rows_in: int, by_reason: dict) -> None:
    """The file's counts by reason are ``by_reason`` and add up: rows in = rows used + the reasons' counts."""
    assert stats["bad_rows_by_reason"] == by_reason
    assert stats["bad_rows"] == sum(by_reason.values()) and stats["rows"] + stats["bad_rows"] == rows_in, stats
    assert len(stats["bad_lines"]) == min(stats["bad_rows"], 20)  # the samples stay


def test_classify_counts_its_bad_rows_by_reason_in_each_file(model, tmp_path, capsys):
    good = "".join(f"문장 {i} 좋다\tpos\n문장 {i} 싫다\tneg\n" for i in range(20))
    train = write(tmp_path / "train.tsv", "text\tlabel\n" + good + "빈 라벨\t\n" * 3 + "칸이\t셋\t있다\n" * 2
                  + "text\tlabel\n" + "공백 라벨\t  \n")
    dev = write(tmp_path / "dev.tsv", "text\tlabel\n" + good.replace(" 좋다", " 좋네").replace(" 싫다", " 싫네") + "칸 하나\n")
    test = write(tmp_path / "test.tsv", "text\tlabel\n" + good + "빈 라벨\t\n" + "text\tlabel\n")
    cfg = dataclasses.replace(config.sample_classify(), max_length=16, epochs=1, max_bad_fraction=0.5)
    classify.run(cfg, model, train, test, tmp_path / "out", dev_file=dev)
    m = metrics(tmp_path / "out")
    reconciles(m["train_file"], 40 + 7, {"empty_label": 4, "repeated_header": 1, "wrong_column_count": 2})
    reconciles(m["dev_file"], 41, {"wrong_column_count": 1})
    reconciles(m["test_file"], 42, {"empty_label": 1, "repeated_header": 1})
    err = capsys.readouterr().err
    assert "train.tsv: 7 bad row(s) left out (empty_label 4, wrong_column_count 2, repeated_header 1; " in err


def test_regress_counts_empty_text_non_numbers_nan_inf_and_missing_columns_apart(model, tmp_path):
    rows = [json.dumps({"text": f"문장 {i} 좋다", "label": i % 5}, ensure_ascii=False) for i in range(30)]
    bad = [json.dumps({"text": None, "label": 1}), json.dumps({"text": "문장", "label": "높다"}, ensure_ascii=False),
           '{"text": "문장", "label": NaN}', '{"text": "문장", "label": "nan"}', '{"text": "문장", "label": Infinity}',
           '{"text": "문장", "label": "-inf"}', '{"text": "문장"}', '{"text": "문장", "label": null}',
           '{"text": "문장", "label": true}', '{"text": "문장", "label": "1_0"}', '{"text": "문장", "label": 1',
           '["문장", 1]']
    train = write(tmp_path / "train.jsonl", "\n".join(rows + bad) + "\n")
    test = write(tmp_path / "test.jsonl", "\n".join(rows[:10] + bad[2:4]) + "\n")
    cfg = dataclasses.replace(config.sample_regress(), max_length=16, epochs=1, max_bad_fraction=0.5)
    regress.run(cfg, model, train, test, tmp_path / "out")
    m = metrics(tmp_path / "out")
    reconciles(m["train_file"], 42, {"empty_score": 1, "empty_text": 1, "missing_column": 1, "not_an_object": 1,
                                     "not_valid_json": 1, "score_boolean": 1, "score_infinite": 2, "score_nan": 2,
                                     "score_not_a_number": 2})
    reconciles(m["test_file"], 12, {"score_nan": 2})
    assert "dev_file" not in m  # carved from train: its counts are the train file's


def test_ner_counts_its_bad_sentences_by_reason(model, tmp_path):
    sentences = [f"김민수\tB-PER\n서울\tB-LOC\n에서\tO\n왔다{i}\tO\n\n" for i in range(24)]
    good = "".join(sentences)
    bad = ["서울\tB-LOC I-LOC\n에서\tO\n",  # a tag with spaces (a sentence-a-line file's tags)
           "서울\n에서\tO\n",  # a token without its tag
           "서울\tb-loc\n",  # not BIO
           "서울\tS-LOC\n",  # BIOES
           "EU NNP B-NP B-ORG\n",  # CoNLL-2003's four fields
           "서울\tB-LOC\tx\ty\n",  # fields past the tag
           "1\t서울\tLOC_B\n"]  # the Naver challenge's numbered tokens
    train = write(tmp_path / "train.conll", good + "\n".join(bad) + "\n" + bad[0])
    test = write(tmp_path / "test.conll", "".join(sentences[:6]) + bad[2] + "\n" + bad[2])
    cfg = dataclasses.replace(config.sample_ner(), max_length=16, epochs=1, max_bad_fraction=0.5)
    ner.run(cfg, model, train, test, tmp_path / "out")
    m = metrics(tmp_path / "out")
    reconciles(m["train_file"], 24 + 8, {"indexed_tokens": 1, "no_tag": 1, "space_separated_fields": 1,
                                         "tag_bioes_or_bilou": 1, "tag_not_bio": 1, "tag_with_spaces": 2,
                                         "wrong_field_count": 1})
    reconciles(m["test_file"], 6 + 2, {"tag_not_bio": 2})


def test_nsmc_counts_every_bad_row_by_reason_past_the_lines_it_shows(tmp_path):
    """nsmc's stats kept the first 20 bad lines and the total: 30 bad rows of three kinds are counted by reason."""
    good = "".join(f"{i}\t리뷰 {i}\t{i % 2}\n" for i in range(100))
    bad = "1\t2\n" * 12 + "7\t리뷰\t2\n" * 10 + "\t리뷰\t1\n" * 8
    stats = read_nsmc(write(tmp_path / "ratings.txt", "id\tdocument\tlabel\n" + good + bad + "\n"), 0.5).stats
    assert stats["bad_rows_by_reason"] == {"empty_id": 8, "label_not_0_or_1": 10, "wrong_column_count": 12}
    assert stats["lines"] == stats["rows"] + sum(stats["bad_rows_by_reason"].values()) + stats["blank_lines"] == 131
    assert stats["bad_rows"] == 30 and len(stats["bad_lines"]) == 20


def test_the_nsmc_task_says_each_files_bad_rows_left_out(tmp_path, capsys):
    """The nsmc task read its files' bad rows into metrics.json's train_file/test_file and said nothing of them
    (classify, regress and ner print a line); a user's NSMC-format file lost rows unsaid."""
    from kolectra.finetune.nsmc import Nsmc  # noqa: PLC0415

    good = "".join(f"{i}\t리뷰 {i}\t{i % 2}\n" for i in range(100))
    train = write(tmp_path / "train.txt", "id\tdocument\tlabel\n" + good + "x\t리뷰\t2\n" + "\t리뷰\t1\n" * 2)
    test = write(tmp_path / "test.txt", "id\tdocument\tlabel\n" + good)
    Nsmc().read(dataclasses.replace(config.sample_nsmc(), max_bad_fraction=0.5), train, test)
    err = capsys.readouterr().err
    # worded as the file tasks' line (finetune.files.bad_rows_line): before, every reason and the first line alone
    assert ("WARNING: nsmc: train.txt: 3 bad row(s) left out (empty_id 2, label_not_0_or_1 1; line 102: label must be 0 "
            "or 1, got '2'; lines 103, 104: empty id; train_file.bad_rows_by_reason, .bad_lines in metrics.json)") in err
    assert "test.txt" not in err  # a file without bad rows: no line


def test_the_bad_rows_line_is_said_under_q_and_again_when_the_eval_is_reused(model, tmp_path, capsys):
    """The bad-rows line was a progress line: ``-q`` (errors and warnings only) hid it, and a rerun that reused the
    published eval said nothing of it though metrics.json counts them. It is a warning now (a KorQuAD question left
    out of training is one), and a reuse says it again from the eval's metrics.json, naming the eval."""
    from kolectra.pipeline.cli import main  # noqa: PLC0415

    train = write(tmp_path / "train.tsv", "text\tlabel\n" + "".join(f"문장 {i} 좋다\tpos\n문장 {i} 싫다\tneg\n"
                                                                    for i in range(20)) + "빈 라벨\t\n" * 2)
    test = write(tmp_path / "test.tsv", "text\tlabel\n" + "".join(f"서울 {i} 좋다\tpos\n부산 {i} 싫다\tneg\n"
                                                                  for i in range(5)))
    argv = ["-q", "finetune", "classify", "--model", str(model), "--train", str(train), "--test", str(test),
            "--preset", "sample", "--set", "epochs=1", "--set", "max_length=16", "--set", "max_bad_fraction=0.1",
            "--out", str(tmp_path / "store")]
    line = ("WARNING: classify: train.tsv: 2 bad row(s) left out (empty_label 2; lines 42, 43: empty label; "
            "train_file.bad_rows_by_reason, .bad_lines in metrics.json)")
    assert main(argv) == 0
    built = capsys.readouterr()
    assert line in built.err and "train / " not in built.err  # -q: the warning, not the progress
    assert main(argv) == 0
    reused = capsys.readouterr()
    art = Path(reused.out.strip().splitlines()[-1])
    assert art == Path(built.out.strip().splitlines()[-1])  # the same eval, reused
    assert reused.err.splitlines() == [f"[kolectra] {line} (reused eval/{art.name})"]


def test_the_nsmc_and_file_tasks_lines_are_one_formatter(tmp_path):
    """nsmc's line named every reason and one line, the file tasks' three of each: one formatter words both from the
    counts metrics.json keeps (ties by key, the kinds and lines past three counted, a saved dataset's rows as rows)."""
    from kolectra.finetune.files import bad_rows_line  # noqa: PLC0415

    stats = {"path": "t.tsv", "bad_rows": 9,
             "bad_rows_by_reason": {"b": 2, "a": 2, "c": 4, "d": 1},
             "bad_lines": [{"line": 3, "reason": "x"}, {"line": 5, "reason": "y"}, {"line": 8, "reason": "x"},
                           {"line": 9, "reason": "z"}]}
    assert bad_rows_line(stats, "dev_file") == (
        "t.tsv: 9 bad row(s) left out (c 4, a 2, b 2, 1 more kind; lines 3, 8: x; line 5: y; 6 more; "
        "dev_file.bad_rows_by_reason, .bad_lines in metrics.json)")
    rows = {"bad_rows": 1, "bad_rows_by_reason": {"no_tag": 1}, "bad_lines": [{"row": 4, "reason": "no tag"}]}
    assert bad_rows_line(rows, "train_file", "corpus", "sentence(s)") == (
        "corpus: 1 bad sentence(s) left out (no_tag 1; row 4: no tag; train_file.bad_rows_by_reason, .bad_lines in "
        "metrics.json)")
    assert bad_rows_line({"bad_rows": 0, "bad_rows_by_reason": {}, "bad_lines": []}, "test_file") is None


def test_ner_sentence_a_line_files_count_their_blank_lines(tmp_path):
    """A sentence-a-line (Naver) file's blank lines were skipped uncounted: its lines did not add up. Counted now
    (``blank_lines``, as the TSV reader's), lines = sentences + bad sentences + blank lines; a CoNLL file's blank lines
    are its sentence separators, not counted."""
    from kolectra.finetune.readers.ner import read_sentences  # noqa: PLC0415

    good = [f"김민수 서울 {i}\tPER-B LOC-B O" for i in range(8)]
    lines = good[:3] + ["", " \t "] + good[3:6] + ["서울 에서\tLOC-B"] + good[6:] + [""]
    table = read_sentences(write(tmp_path / "train.tsv", "\n".join(lines) + "\n"), max_bad_fraction=0.5)
    stats = table.stats()
    assert (stats["rows"], stats["bad_rows"], stats["blank_lines"]) == (8, 1, 3)
    assert stats["rows"] + stats["bad_rows"] + stats["blank_lines"] == len(lines) == 12
    assert stats["bad_lines"] == [{"line": 9, "reason": "2 words but 1 tags"}]
    conll = read_sentences(write(tmp_path / "train.conll", "서울\tB-LOC\n에서\tO\n\n\n부산\tB-LOC\n"))
    assert conll.stats()["rows"] == 2 and "blank_lines" not in conll.stats()


def test_regress_strips_invisible_edges_and_names_a_decimal_comma(tmp_path, capsys):
    """A score ending in a zero-width space or opening with a byte-order mark was a bad row, where a classify label
    drops such edges: regress drops them too. A file of decimal-comma scores ('3,5') was refused row by row as "not a
    number", the cause unsaid: each such row's reason asks, and a file most of whose bad scores are so says it (they
    are never read as 3.5: '1,000' would be 1.0)."""
    from kolectra.finetune.files import FinetuneError  # noqa: PLC0415
    from kolectra.finetune.regress import Regress  # noqa: PLC0415

    def scores(path: Path, values: list[str]) -> Path:
        return write(path, "text\tlabel\n" + "".join(f"문장 {i}\t{v}\n" for i, v in enumerate(values)))

    train = scores(tmp_path / "train.tsv", [f"{i % 5}.5\u200b" if i % 3 else f"\ufeff{i % 5}" for i in range(39)]
                   + ["2,5"])
    cfg = dataclasses.replace(config.sample_regress(), max_bad_fraction=0.05)
    data = Regress().read(cfg, train, train)
    assert data.facts["train_file"]["rows"] == 39 and data.facts["train_file"]["bad_rows_by_reason"] == {
        "score_decimal_comma": 1}
    assert sorted(set(data.train["label"]) | set(data.dev["label"])) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5]
    assert ("regress: train.tsv: 1 bad row(s) left out (score_decimal_comma 1; line 41: score must be a number, got "
            "'2,5' (a decimal comma? then write '2.5': regress reads no decimal comma); ") in capsys.readouterr().err
    commas = scores(tmp_path / "commas.tsv", [f"{i % 5},{i % 10}" for i in range(20)] + ["높다"])
    with pytest.raises(FinetuneError, match=r"commas\.tsv: 21 of 21 rows are malformed .*; 20 of its 21 bad rows have "
                                            r"a score with a decimal comma \('3,5'\): write the scores with a dot"):
        Regress().read(cfg, train, commas)
    few = scores(tmp_path / "few.tsv", ["1,5", "높다", "낮다"] + ["1"] * 10)
    with pytest.raises(FinetuneError) as refused:
        Regress().read(cfg, train, few)
    assert "decimal comma? then write '1.5'" in str(refused.value) and "bad rows have a score" not in str(refused.value)
