"""Task files as users hold them, written by other programs: an NSMC-style file an editor left a blank
line in, Excel's "Unicode Text" (UTF-16), gzip-compressed and Parquet files, labels exported as class codes (s5)."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import json
import lzma

import pytest

from kolectra.finetune import config
from kolectra.finetune.classify import Classify
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers.ner import read_sentences
from kolectra.finetune.readers.nsmc import read_nsmc
from kolectra.finetune.readers.tables import read_table


def test_an_nsmc_file_with_a_trailing_blank_line_is_read_and_its_lines_add_up(tmp_path):
    # a 200-row sample of ratings_train.txt saved by an editor with an empty last line (and one of spaces):
    # each was a malformed row ("expected 3 tab-separated columns, got 1"), which refused the file at 0.001
    path = tmp_path / "ratings_sample.txt"
    path.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t리뷰 {i}\t{i % 2}\n" for i in range(200)) + "\n  \n",
                    encoding="utf-8")
    stats = read_nsmc(path).stats
    assert (stats["rows"], stats["bad_rows"], stats["blank_lines"], stats["lines"]) == (200, 0, 2, 202)
    path.write_text("id\tdocument\tlabel\n\n\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match="a header and no rows"):
        read_nsmc(path)


def test_excel_unicode_text_is_named_utf_16_with_the_iconv_that_converts_it(tmp_path):
    # Excel's "Unicode Text (*.txt)": UTF-16 LE with a byte-order mark, tab-separated; the hint was "iconv -f <its encoding>"
    rows = "text\tlabel\n" + "".join(f"정말 재미있는 영화 {i}\t{i % 2}\n" for i in range(20))
    path = tmp_path / "train.txt"
    path.write_bytes(rows.encode("utf-16"))
    with pytest.raises(FinetuneError, match=r"train\.txt:1: not UTF-8 .*it is UTF-16 .*Unicode Text.*"
                                            r"iconv -f utf-16 -t utf-8 "):
        read_table(path)
    path.write_bytes(rows.encode("utf-16-le"))  # the mark left off: NUL beside every ASCII character
    with pytest.raises(FinetuneError, match=r"UTF-16 without a byte-order mark \(utf-16le;.*iconv -f utf-16le "):
        read_sentences(path, "conll")
    nsmc = tmp_path / "ratings.txt"
    nsmc.write_bytes("id\tdocument\tlabel\n1\t좋다\t1\n".encode("utf-16"))
    with pytest.raises(FinetuneError, match="iconv -f utf-16 -t utf-8"):
        read_nsmc(nsmc)
    cp949 = tmp_path / "cp.tsv"  # no NUL bytes: still cp949's hint
    cp949.write_bytes(rows.encode("cp949"))
    with pytest.raises(FinetuneError, match="it reads as cp949"):
        read_table(cp949)


@pytest.mark.parametrize(("name", "pack", "said"), [
    ("train.tsv.gz", gzip.compress, r"gzip-compressed, not a text file; decompress it first: gunzip -k "),
    ("train.tsv", gzip.compress, r"gzip-compressed, not a text file"),
    ("train.csv", bz2.compress, r"bzip2-compressed, not a text file; decompress it first: bunzip2 -k "),
    ("train.jsonl", lzma.compress, r"xz-compressed"),
    ("train.xlsx", lambda b: b"PK\x03\x04" + b"\x00" * 40, r"a zip archive \(an Excel \.xlsx workbook is one\).*'CSV UTF-8"),
])
def test_a_compressed_file_or_a_workbook_is_named_as_what_it_is(tmp_path, name, pack, said):
    # was "cannot tell its format from the name; pass --set format=tsv, csv or jsonl", and with the format
    # passed (or a .tsv name) "not UTF-8 ... iconv -f <its encoding>": no text encoding would have helped
    path = tmp_path / name
    path.write_bytes(pack("text\tlabel\n좋다\t1\n".encode()))
    with pytest.raises(FinetuneError, match=said):
        read_table(path)
    if name.endswith(".gz"):
        with pytest.raises(FinetuneError, match=said):
            read_table(path, "tsv")


def class_label_parquet(path, rows, names, column="label"):
    import datasets  # noqa: PLC0415

    features = datasets.Features({"text": datasets.Value("string"), column: datasets.ClassLabel(names=names)})
    datasets.Dataset.from_dict({"text": [t for t, _ in rows], column: [y for _, y in rows]},
                               features=features).to_parquet(str(path))
    return path


def test_parquet_files_are_read_with_their_class_label_names(tmp_path):
    # was "cannot tell its format from the name; pass --set format=tsv, csv or jsonl", none of which reads it
    rows = [(f"경기 결과 {i}" if i % 3 else f"주가 지수 {i}", int(i % 3 == 0)) for i in range(60)]
    train = class_label_parquet(tmp_path / "train.parquet", rows, ["스포츠", "경제"])
    test = class_label_parquet(tmp_path / "test.pq", rows[:6], ["스포츠", "경제"])
    cfg = dataclasses.replace(config.sample_classify(), dev_fraction=0.25)
    task = Classify()
    data = task.read(cfg, train, test)
    assert task.labels == ["경제", "스포츠"]  # the names to_parquet keeps in the metadata, not codes 0 and 1
    assert data.facts["test_file"]["labels"] == {"경제": 2, "스포츠": 4} and data.facts["test_file"]["rows"] == 6
    # pandas' to_parquet: plain columns, a struct reached by its dotted name
    import pandas  # noqa: PLC0415

    plain = tmp_path / "scores.parquet"
    pandas.DataFrame({"s1": ["가", "나"], "s2": ["다", "라"], "labels": [{"score": 4.5}, {"score": 1.0}]}).to_parquet(plain)
    assert [r for _, r in read_table(plain).records] == [{"s1": "가", "s2": "다", "labels.score": 4.5},
                                                         {"s1": "나", "s2": "라", "labels.score": 1.0}]
    # NER: a list of tokens and a list of class-label tags
    import datasets  # noqa: PLC0415

    tags = datasets.Sequence(datasets.ClassLabel(names=["O", "B-OG", "I-OG"]))
    datasets.Dataset.from_dict({"tokens": [["삼성", "전자", "주가"]], "ner_tags": [[1, 2, 0]]}, features=datasets.Features(
        {"tokens": datasets.Sequence(datasets.Value("string")), "ner_tags": tags})).to_parquet(str(tmp_path / "ner.parquet"))
    assert [s["tags"] for _, s in read_sentences(tmp_path / "ner.parquet").records] == [["B-OG", "I-OG", "O"]]
    # a Parquet file by another name, and one cut short
    (tmp_path / "train.txt").write_bytes(train.read_bytes())
    with pytest.raises(FinetuneError, match=r"train\.txt: a Parquet file, not a text file; .*--set format=parquet"):
        read_table(tmp_path / "train.txt")
    assert len(read_table(tmp_path / "train.txt", "parquet").records) == 60
    (tmp_path / "cut.parquet").write_bytes(train.read_bytes()[:-20])
    with pytest.raises(FinetuneError, match=r"cut\.parquet: cannot read as Parquet \(ArrowInvalid: "):
        read_table(tmp_path / "cut.parquet")


def test_label_names_name_the_class_label_codes_to_json_wrote(tmp_path):
    # Dataset.to_json writes a ClassLabel column's codes: the classes were '0', '1', '2' in metrics.json and
    # predictions.jsonl, with no way to give their names short of rewriting the file
    import datasets  # noqa: PLC0415

    from kolectra.core.config import ConfigError, override  # noqa: PLC0415

    names = ["IT과학", "경제", "사회"]
    features = datasets.Features({"title": datasets.Value("string"), "label": datasets.ClassLabel(names=names)})
    rows = {"title": [f"제목 {i}" for i in range(60)], "label": [i % 3 for i in range(60)]}
    datasets.Dataset.from_dict(rows, features=features).to_json(str(tmp_path / "train.jsonl"), force_ascii=False)
    assert '"label":0' in (tmp_path / "train.jsonl").read_text(encoding="utf-8")  # codes, not names
    test = tmp_path / "test.tsv"  # a test file that spells the names, and one code past them
    test.write_text("title\tlabel\n뉴스 1\t경제\n뉴스 2\t2\n" + "".join(f"뉴스 {i}\t0\n" for i in range(3, 1200))
                    + "뉴스 0\t7\n", encoding="utf-8")
    cfg = override(dataclasses.replace(config.sample_classify(), text_column="title", dev_fraction=0.25),
                   ["label_names=IT과학,경제,사회"])
    task = Classify()
    data = task.read(cfg, tmp_path / "train.jsonl", test)
    assert task.labels == ["IT과학", "경제", "사회"]
    assert data.facts["test_file"]["labels"] == {"IT과학": 1197, "경제": 1, "사회": 1}
    assert data.facts["test_file"]["bad_lines"] == [
        {"line": 1201, "reason": "label '7' is neither a code of label_names (0 to 2) nor one of its names"}]
    plain = Classify()
    plain.read(dataclasses.replace(cfg, label_names=()), tmp_path / "train.jsonl", tmp_path / "train.jsonl")
    assert plain.labels == ["0", "1", "2"]  # without the setting, as before
    with pytest.raises(ConfigError, match="label_names: must be names that are not empty, each once"):
        override(cfg, ["label_names=경제,경제"]).validate()
    with pytest.raises(ConfigError, match="label_names: must be empty: regress reads scores"):
        override(config.sample_regress(), ["label_names=a,b"]).validate()


@pytest.mark.parametrize("sep, suffix", [(",", "csv"), ("\t", "tsv")])
def test_labels_pandas_wrote_as_floats_in_a_csv_are_their_integer_classes(tmp_path, sep, suffix):
    # pandas' to_csv of a label column with a gap (NaN) writes 0.0, 1.0, 2.0: with label_names they were refused as
    # "text that is none of its names ('0.0', '1.0', '2.0'): leave label_names out" (which trains classes '0.0'...),
    # and without them a test file written without the gap said "label '1' is not among the training labels (0.0, ...)"
    import numpy as np  # noqa: PLC0415
    import pandas as pd  # noqa: PLC0415

    train = pd.DataFrame({"text": [f"제목 {i}" for i in range(300)], "label": [float(i % 3) for i in range(300)]})
    train.loc[7, "label"] = np.nan
    train.to_csv(tmp_path / f"train.{suffix}", sep=sep, index=False)
    pd.DataFrame({"text": [f"뉴스 {i}" for i in range(30)], "label": [i % 3 for i in range(30)]}).to_csv(
        tmp_path / f"test.{suffix}", sep=sep, index=False)
    assert "1.0" in (tmp_path / f"train.{suffix}").read_text(encoding="utf-8")
    cfg = dataclasses.replace(config.sample_classify(), max_bad_fraction=0.01)
    task = Classify()
    data = task.read(cfg, tmp_path / f"train.{suffix}", tmp_path / f"test.{suffix}")
    assert task.labels == ["0", "1", "2"] and data.facts["test_file"]["labels"] == {"0": 10, "1": 10, "2": 10}
    assert data.facts["train_file"]["bad_lines"] == [{"line": 9, "reason": "empty label"}]
    named = Classify()
    data = named.read(dataclasses.replace(cfg, label_names=("IT과학", "경제", "사회")), tmp_path / f"train.{suffix}",
                      tmp_path / f"test.{suffix}")
    assert named.labels == ["IT과학", "경제", "사회"] and data.facts["test_file"]["labels"]["사회"] == 10
    from kolectra.finetune.classify import label_text  # noqa: PLC0415
    assert [label_text(x) for x in ("-1.0", "-0.0", "10.00", " 2.0 ", "1.5", "v1.0", "1.0.0")] == \
        ["-1", "0", "10", "2", "1.5", "v1.0", "1.0.0"]


def test_rows_cut_at_max_length_are_counted_per_split_and_said(tmp_path, capsys):
    # a long review or news body cut at max_length was read in part with nothing saying so (ner counts its
    # cut words; classify, regress and nsmc counted nothing)
    from benchmarks.tiny_model import build_tiny_model_dir  # noqa: PLC0415
    from kolectra.finetune import classify, nsmc  # noqa: PLC0415
    from kolectra.finetune.loading import load_tokenizer  # noqa: PLC0415

    words = ["영화", "정말", "재미", "있다", "없다", "배우", "연기", "최고"]
    texts = [" ".join(words[(i + k) % 8] for k in range(3 + (i * 7) % 29)) for i in range(60)]
    model = build_tiny_model_dir(tmp_path / "model", texts, vocab_size=120, max_position=64)
    tok = load_tokenizer(model)
    train, test = tmp_path / "train.tsv", tmp_path / "test.tsv"
    train.write_text("text\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(texts)), encoding="utf-8")
    test.write_text("text\tlabel\n" + "".join(f"{t} 끝\t{i % 2}\n" for i, t in enumerate(texts[:20])), encoding="utf-8")
    cfg = dataclasses.replace(config.sample_classify(), max_length=16, epochs=1, dev_fraction=0.25)
    classify.run(cfg, model, train, test, tmp_path / "out")
    m = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    longer = [len(tok(t)["input_ids"]) > 16 for t in texts]  # the reference: tokenised whole
    test_longer = sum(len(tok(f"{t} 끝")["input_ids"]) > 16 for t in texts[:20])
    cut = m["rows_past_max_length"]
    assert cut["train"] + cut["dev"] == sum(longer) and cut["test"] == test_longer and 0 < cut["test"] < 20
    said = capsys.readouterr().err
    assert f"{cut['test']} of 20 test rows" in said and "longer than max_length=16 tokens" in said
    # nsmc alike
    for path, rows in ((train, texts), (test, texts[:20])):
        path.with_suffix(".txt").write_text("id\tdocument\tlabel\n" + "".join(
            f"{i}\t{t}\t{i % 2}\n" for i, t in enumerate(rows)), encoding="utf-8")
    nsmc.run(dataclasses.replace(config.sample_nsmc(), max_length=16, epochs=1), model, train.with_suffix(".txt"),
             test.with_suffix(".txt"), tmp_path / "nsmc")
    m = json.loads((tmp_path / "nsmc" / "metrics.json").read_text(encoding="utf-8"))
    assert sum(m["rows_past_max_length"].values()) == sum(longer) + sum(longer[:20])


def test_a_tsv_written_by_pandas_is_said_to_be_quoted_and_read_with_format_quoted_tsv(tmp_path, capsys):
    # pandas' to_csv(sep="\t") quotes a text holding a quote, a tab or a line break: read as TSV the quotes
    # stayed in the text unsaid ('"그는 ""안녕""이라고"'), and the line break's second half was a row of its own
    import pandas  # noqa: PLC0415

    texts = ['그는 "안녕"이라고 말했다', "탭\t포함", "줄\n바꿈", '"인용된 리뷰"', "평범한 리뷰"] * 40
    frame = pandas.DataFrame({"text": texts, "label": [i % 2 for i in range(len(texts))]})
    path = tmp_path / "train.tsv"
    frame.to_csv(path, sep="\t", index=False)
    cfg = dataclasses.replace(config.sample_classify(), max_bad_fraction=0.5)
    rows, table = Classify().load(path, cfg)
    assert table.quoted == 80 and table.first_quoted == 2
    assert "expected 2 tab-separated columns, got 3 (a quoted field holding a tab" in table.bad[0][1]
    said = capsys.readouterr().err
    assert "80 row(s) hold a field quoted as CSV writers quote" in said and "--set format=quoted_tsv" in said
    rows, table = Classify().load(path, dataclasses.replace(cfg, format="quoted_tsv"))
    assert rows["text"] == texts and rows["label"] == [str(i % 2) for i in range(len(texts))]
    assert (table.bad, table.multiline, table.quoted) == ([], 40, 0)
    # a TSV whose texts merely hold quotes (KorSTS's, NSMC's stray ones) is said nothing of
    plain = tmp_path / "korsts.tsv"
    plain.write_text('text\tlabel\n"따옴표로 시작\t1\n끝나는 따옴표"\t0\n"전부 인용"\t1\n', encoding="utf-8")
    assert Classify().load(plain, cfg)[1].quoted == 0


def test_a_tsv_whose_every_field_is_quoted_is_told_to_read_with_format_quoted_tsv(tmp_path):
    # R's write.table(sep="\t", row.names=FALSE), csv.QUOTE_ALL: "no column 'text' (text_column); its columns are:
    # "text", "label"" said nothing of the quoting (and --text-column '"text"' trained on quoted texts and labels)
    path = tmp_path / "r.tsv"
    path.write_text('"text"\t"label"\n' + "".join(f'"리뷰 {i}"\t"{"pos" if i % 2 else "neg"}"\n' for i in range(20)),
                    encoding="utf-8")
    cfg = config.sample_classify()
    with pytest.raises(FinetuneError, match=r"its columns are: \"text\", \"label\"; its names are in quotes, as a CSV "
                                            r"writer quotes every field .* --set format=quoted_tsv reads that quoting$"):
        Classify().load(path, cfg)
    rows, _ = Classify().load(path, dataclasses.replace(cfg, format="quoted_tsv"))
    assert rows["text"][:2] == ["리뷰 0", "리뷰 1"] and rows["label"][:2] == ["neg", "pos"]


def test_r_row_names_without_a_name_in_the_header_are_named_as_such(tmp_path):
    # R's write.table(sep="\t") writes row names by default, with no name for them in the header: every row was
    # "expected 2 tab-separated columns, got 3 ... none is readable: check the file's format and columns"
    rows = [(i, f"리뷰 {i}", "pos" if i % 2 else "neg") for i in range(1, 21)]
    quoted, plain = tmp_path / "quoted.tsv", tmp_path / "plain.tsv"
    quoted.write_text('"text"\t"label"\n' + "".join(f'"{i}"\t"{t}"\t"{y}"\n' for i, t, y in rows), encoding="utf-8")
    plain.write_text("text\tlabel\n" + "".join(f"{i}\t{t}\t{y}\n" for i, t, y in rows), encoding="utf-8")
    cfg = config.sample_classify()
    for path, fmt in ((quoted, "quoted_tsv"), (plain, "auto")):
        with pytest.raises(FinetuneError, match=r"every row has one field more than the header, a number first: row "
                                                r"names, as R's write.table writes them .* row\.names=FALSE"):
            Classify().load(path, dataclasses.replace(cfg, format=fmt))
    # a file of some such rows among good ones keeps its refusal by max_bad_fraction, naming the lines
    plain.write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for _, t, y in rows) + "21\t리뷰\tpos\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"1 of 21 rows are malformed .* line 22: expected 2 tab-separated"):
        Classify().load(plain, cfg)


def test_labels_alike_but_for_case_are_warned_of_and_an_empty_jsonl_file_is_called_empty(tmp_path, capsys):
    # 'pos' and 'POS' (an export that upper-cased some rows) were two classes, unsaid
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"리뷰 {i}\t{['pos', 'neg', 'POS'][i % 3]}\n" for i in range(60)),
                     encoding="utf-8")
    task = Classify()
    task.read(config.sample_classify(), train, train)
    assert task.labels == ["POS", "neg", "pos"]  # kept as they are
    assert "WARNING: classify: " in (err := capsys.readouterr().err) and "'POS' and 'pos' differ only in case" in err
    # a JSONL file of no lines had been told "no line holds a JSON object (... a JSON array ... is not read)"
    for text in ("", "\n\n"):
        (tmp_path / "train.jsonl").write_text(text, encoding="utf-8")
        with pytest.raises(FinetuneError, match=r"train\.jsonl: empty file \(no JSON lines"):
            read_table(tmp_path / "train.jsonl")


def test_tag_names_name_the_ner_tag_codes_to_json_wrote(tmp_path):
    # KLUE-NER through Dataset.to_json: its tags are codes (O is 12); refused with no way to name them but a rewrite
    from kolectra.core.config import ConfigError, override  # noqa: PLC0415
    from kolectra.finetune.ner import Ner  # noqa: PLC0415

    names = ["B-OG", "I-OG", "B-PS", "I-PS", "O"]
    rows = [{"tokens": ["삼성", "전자", f"직원{i}", "김", "민수"], "ner_tags": [0, 1, 4, 2, 3]} for i in range(40)]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    test = tmp_path / "test.jsonl"  # one code past the names: a bad sentence naming it
    test.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:9])
                    + json.dumps({"tokens": ["가"], "ner_tags": [7]}) + "\n", encoding="utf-8")
    cfg = override(dataclasses.replace(config.sample_ner(), max_bad_fraction=0.2), ["tag_names=B-OG,I-OG,B-PS,I-PS,O"])
    with pytest.raises(FinetuneError, match="holds integers, not tag names.*--set tag_names="):
        Ner().read(dataclasses.replace(cfg, tag_names=()), train, test)
    task = Ner()
    data = task.read(cfg, train, test)
    assert task.labels == ["O", "B-OG", "I-OG", "B-PS", "I-PS"]
    assert data.facts["test_file"]["bad_lines"] == [{"line": 10, "reason": "tag code 7 is not a code of tag_names (0 to 4)"}]
    assert read_sentences(train, tag_names=tuple(names)).records[0][1]["tags"] == ["B-OG", "I-OG", "O", "B-PS", "I-PS"]
    with pytest.raises(ConfigError, match="tag_names: must be tag names that are not empty, each once"):
        override(cfg, ["tag_names=O,O"]).validate()


def test_a_label_with_a_zero_width_space_at_its_end_is_its_visible_class(tmp_path, capsys):
    # 'pos\u200b' (copied from a web page) was a third class printed as 'pos' beside 'pos' ({'neg', 'pos', 'pos'}),
    # and a test label so spelt went to it; a zero-width character inside a label is warned of, shown escaped
    labels = ["pos", "neg", "pos\u200b", "\ufeffneg"]
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"리뷰 {i}\t{labels[i % 4]}\n" for i in range(60)), encoding="utf-8")
    test = tmp_path / "test.tsv"
    test.write_text("text\tlabel\n좋다\tpos\u200b\n별로\tneg\u200e\n", encoding="utf-8")
    task = Classify()
    data = task.read(config.sample_classify(), train, test)
    assert task.labels == ["neg", "pos"] and data.facts["test_file"]["labels"] == {"neg": 1, "pos": 1}
    assert "differ only" not in capsys.readouterr().err
    inside = ["pos", "neg", "p\u200bos"]
    train.write_text("text\tlabel\n" + "".join(f"리뷰 {i}\t{inside[i % 3]}\n" for i in range(60)), encoding="utf-8")
    Classify().read(config.sample_classify(), train, train)
    assert "the training labels 'pos' and 'p\\u200bos' differ only in case, width or an invisible character" in \
        capsys.readouterr().err


@pytest.mark.parametrize(("name", "text", "said"), [
    ("train.txt", "text,label\n가,1\n", r"its columns are: text,label; the header line splits on commas: a CSV file, "
                                        r"read with --set format=csv"),
    ("train.csv", "text\tlabel\n가\t1\n", r"its columns are: text\\tlabel; the header line splits on tabs: a TSV file"),
    ("train.txt", '{"text": "가", "label": 1}\n', r"the first line is a JSON object: JSON Lines, read with --set "
                                                 r"format=jsonl"),
    ("train.csv", "text;label\n가;1\n", r"splits on semicolons, which no format here reads"),
])
def test_a_header_of_another_format_says_which(tmp_path, name, text, said):
    # the error had listed the whole header line as the one column ('its columns are: text,label'), a tab unescaped
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"no column 'text' \(text_column\); .*" + said):
        Classify().load(path, config.sample_classify())


def test_pandas_default_to_json_is_named_with_the_call_that_writes_rows_and_its_columns_are_not_all_listed(tmp_path):
    # df.to_json(path), pandas' default orient='columns': one object {"text": {"0": ..}, "label": {"0": ..}}, read as
    # one JSON Lines row whose columns are text.0 .. text.N, label.0 ..: the error listed every one of them (a line of
    # megabytes at 100,000 rows) and said nothing of how to write the file as rows
    import pandas  # noqa: PLC0415

    path = tmp_path / "train.json"
    pandas.DataFrame({"text": [f"리뷰 {i}" for i in range(2000)], "label": [i % 2 for i in range(2000)]}).to_json(
        path, force_ascii=False)
    with pytest.raises(FinetuneError) as e:
        Classify().load(path, config.sample_classify())
    said = str(e.value)
    assert said.startswith(f"{path}: no column 'text' (text_column); its columns are: text.0, text.1, "), said
    assert "text.29, ... (4,000 in all); the file is one object of columns, each an object of rows (pandas' " \
           "DataFrame.to_json() default, orient='columns'): write it as rows, df.to_json(PATH, orient='records', " \
           "lines=True, force_ascii=False)" in said, said
    assert len(said) < 1000, len(said)  # before: over 43,000 characters


def test_klue_ner_s_own_tsv_is_read_its_sentence_lines_skipped(tmp_path):
    # klue-ner-v1.1_train.tsv: "## <id>\t<sentence, entities marked inline>" before each sentence's character lines;
    # read as a token and its tag ('<이동욱:PS>님 ...' is no BIO tag) every sentence was bad and the file refused
    sentence = [("이", "B-PS"), ("동", "I-PS"), ("욱", "I-PS"), ("님", "O"), (" ", "O"), ("최", "O"), ("고", "O")]
    block = "".join(f"{c}\t{t}\n" for c, t in sentence)
    path = tmp_path / "klue-ner-v1.1_dev.tsv"
    path.write_text("".join(f"## klue-ner-v1_dev_{i:05d}_nsmc\t<이동욱:PS>님 최고\n{block}\n" for i in range(30)),
                    encoding="utf-8")
    table = read_sentences(path)
    assert (len(table.records), table.bad) == (30, [])
    n, first = table.records[0]
    assert n == 2 and first["tokens"] == ["이", "동", "욱", "님", "최", "고"] and first["dropped"] == 1
    assert first["tags"] == ["B-PS", "I-PS", "I-PS", "O", "O", "O"]


def test_klue_s_own_json_arrays_are_read(tmp_path):
    # klue-ynat-v1.1_train.json, klue-sts-v1.1_train.json, klue-nli-...: one JSON array each, refused as "no line
    # holds a JSON object (JSON Lines: one object per line; a JSON array ... is not read)"
    from kolectra.finetune.config import RegressConfig  # noqa: PLC0415
    from kolectra.finetune.regress import Regress  # noqa: PLC0415

    topics = ["IT과학", "경제", "사회"]
    ynat = tmp_path / "klue-ynat-v1.1_train.json"
    ynat.write_text("\ufeff" + json.dumps([{"guid": f"ynat-v1_train_{i:05d}", "title": f"제목 {i}", "label": topics[i % 3]}
                                           for i in range(60)], ensure_ascii=False, indent=4), encoding="utf-8")
    task = Classify()
    data = task.read(dataclasses.replace(config.sample_classify(), text_column="title"), ynat, ynat)
    assert task.labels == topics and data.facts["test_file"]["rows"] == 60
    assert "blank_lines" not in data.facts["test_file"]
    sts = tmp_path / "klue-sts-v1.1_train.json"
    sts.write_text(json.dumps([{"sentence1": f"가 {i}", "sentence2": f"나 {i}", "labels": {"label": i % 5 + 0.4}}
                               for i in range(40)] + ["stray"]), encoding="utf-8")
    cfg = RegressConfig(text_column="sentence1", text_pair_column="sentence2", label_column="labels.label",
                        max_bad_fraction=0.1)
    facts = Regress().read(cfg, sts, sts).facts["train_file"]
    assert (facts["rows"], facts["bad_lines"]) == (40, [{"row": 41, "reason": "expected a JSON object, got str"}])
    ner = tmp_path / "ner.json"
    ner.write_text(json.dumps([{"tokens": ["서", "울"], "ner_tags": ["B-LC", "I-LC"]}]), encoding="utf-8")
    assert read_sentences(ner).records[0][1]["tags"] == ["B-LC", "I-LC"]
    (tmp_path / "empty.json").write_text("[]", encoding="utf-8")
    with pytest.raises(FinetuneError, match="a JSON array holding no object"):
        read_table(tmp_path / "empty.json")


def test_jsonl_files_joined_with_their_byte_order_marks_read_every_line(tmp_path):
    # two JSONL files saved with a BOM (Windows editors, utf-8-sig) and joined with cat: the second's first line
    # was a bad row, 'not valid JSON (Unexpected UTF-8 BOM ...)', refusing a file under 1,000 lines
    part = "".join(json.dumps({"text": f"리뷰 {i}", "label": i % 2}, ensure_ascii=False) + "\n" for i in range(300))
    path = tmp_path / "train.jsonl"
    path.write_bytes(("\ufeff" + part + "\ufeff" + part).encode("utf-8"))
    table = read_table(path)
    assert (len(table.records), table.bad) == (600, []) and table.records[300] == (301, {"text": "리뷰 0", "label": 0})


def test_pandas_default_to_json_of_a_frame_whose_index_starts_past_0_is_named_too(tmp_path):
    # a split (df.iloc[50:], train_test_split) or a filtered frame keeps its index: the columns were text.50 ..,
    # no text.0, and the error listed them with no word of pandas' default or the call that writes rows
    import pandas  # noqa: PLC0415

    path = tmp_path / "test.json"
    frame = pandas.DataFrame({"text": [f"리뷰 {i}" for i in range(100)], "label": [i % 2 for i in range(100)]})
    frame.iloc[50:].to_json(path, force_ascii=False)
    with pytest.raises(FinetuneError) as e:
        Classify().load(path, config.sample_classify())
    assert "its columns are: text.50, text.51, " in str(e.value)
    assert "(pandas' DataFrame.to_json() default, orient='columns'): write it as rows" in str(e.value), str(e.value)
