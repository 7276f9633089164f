"""classify and ner reading a researcher's own files: two files joined with their headers, CSV rows over
several lines and long fields, the NER format guessed (CoNLL with spaces, CoNLL-2003's four columns, Naver's
numbered tokens, BIOES), a refusal's reasons, a byte order mark, blank lines, test tags of training types or
spelt otherwise, and dev, training or test sentences left without an entity. The metrics themselves are
tests/test_finetune_files_audit.py's."""

from __future__ import annotations

import dataclasses
import unicodedata
from types import SimpleNamespace

import numpy as np
import pytest

from kolectra.core.config import ConfigError
from kolectra.finetune import config
from kolectra.finetune.classify import Classify
from kolectra.finetune.entities import entities
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.ner import Ner
from kolectra.finetune.readers.ner import read_sentences
from kolectra.finetune.readers.tables import read_table
from tests.finetune_files_support import PER, conll, sentence


# ---- two files joined, each with its header ----------------------------------------------------------------
def test_a_repeated_header_is_a_counted_bad_row_not_a_class_or_a_score(tmp_path):
    """KorNLI's SNLI and MNLI training files joined with cat: the second header had been one more
    training row, its label the class 'gold_label'."""
    header = "\ufeffsentence1\tsentence2\tgold_label\n"
    labels = ["entailment", "neutral", "contradiction"]
    part = [header + "".join(f"문장 {k}{i}\t가설 {k}{i}\t{labels[i % 3]}\n" for i in range(600)) for k in "ab"]
    train, test = tmp_path / "train.tsv", tmp_path / "test.tsv"
    train.write_text(part[0] + part[1], encoding="utf-8")
    test.write_text(part[0], encoding="utf-8")
    cfg = dataclasses.replace(config.sample_classify(), text_column="sentence1", text_pair_column="sentence2",
                              label_column="gold_label")
    task = Classify()
    facts = task.read(cfg, train, test).facts["train_file"]
    assert task.labels == ["contradiction", "entailment", "neutral"]  # was also 'gold_label', one row
    assert facts["rows"] == 1200 and facts["bad_rows"] == 1 and facts["bad_lines"] == [
        {"line": 602, "reason": "repeats the header line (files joined with their headers, as `cat a.tsv b.tsv` does?)"}]
    # CSV alike (an unnamed column included); in a small file the one row is over max_bad_fraction: refused, named
    csv = tmp_path / "small.csv"
    csv.write_text("text,,label\n가,x,1\n나,y,2\n다,z,1\ntext,,label\n라,w,2\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"small\.csv: 1 of 5 rows are malformed .*line 5: repeats the header "
                                            r"line \(files joined with their headers, as `cat a\.csv b\.csv` does\?\)"):
        Classify().read(cfg.__class__(), csv, test)


def test_ner_files_joined_each_with_a_byte_order_mark_and_a_docstart_line_read_every_sentence(tmp_path):
    """Two CoNLL files each saved with a byte-order mark (Windows Notepad) and opening with CoNLL-2003's -DOCSTART-
    line, joined with cat: the second -DOCSTART-, behind its mark, had been a bad sentence told "4 space-separated
    fields ... keep the first and the last", the file refused; a mark opening a token line stayed in the token."""
    part = "\ufeff-DOCSTART- -X- -X- O\n\n" + "".join(f"김민수{i}\tB-PER\n씨\tO\n\n" for i in range(3))
    def write(path, text):
        path.write_bytes(text.encode("utf-8"))
        return path

    joined = read_sentences(write(tmp_path / "joined.txt", part + part))
    assert joined.bad == [] and len(joined.records) == 6
    bare = read_sentences(write(tmp_path / "bare.txt", "\ufeff김민수\tB-PER\n\n\ufeff이영희\tB-PER\n"))
    assert [s["tokens"] for _, s in bare.records] == [["김민수"], ["이영희"]]
    lines = read_sentences(write(tmp_path / "lines.txt", "\ufeff김민수 씨\tB-PER O\n\ufeff이영희 씨\tB-PER O\n"))
    assert [s["tokens"][0] for _, s in lines.records] == ["김민수", "이영희"]


def test_a_sentence_a_line_file_whose_lines_end_in_a_tab_reads_its_sentences_and_a_tag_with_spaces_is_bad(tmp_path):
    """A Naver-style words<TAB>tags file whose lines end in a tab was guessed CoNLL: each line one token, the whole
    sentence, tagged 'B-PER I-PER O B-LOC' (a type 'PER I-PER O B-LOC' by the B- prefix): trained on without a word
    (2 "sentences" of the 60-line file, split by its one line of spaces)."""
    line = "김민수{i} 씨는 서울 에서\tB-PER O B-LOC O"
    tabbed = tmp_path / "tabbed.tsv"
    tabbed.write_bytes(("\n".join(line.format(i=i) + "\t" for i in range(6)) + "\n   \n" + line.format(i=6) + "\t\n")
                       .encode("utf-8"))
    table = read_sentences(tabbed)
    assert table.bad == [] and [s["tokens"][0] for _, s in table.records] == [f"김민수{i}" for i in range(7)]
    assert table.records[0][1]["tags"] == ["B-PER", "O", "B-LOC", "O"]
    # several tags in one field are no tag, whatever the format: a bad sentence saying so
    spaced = tmp_path / "spaced.tsv"
    spaced.write_bytes("김민수\tB-PER I-PER\n씨\tO\n\n이영희\tB-PER\n".encode("utf-8"))
    table = read_sentences(spaced, max_bad_fraction=0.5)
    assert table.bad == [(1, "tag 'B-PER I-PER' holds spaces: several tags in one field (a line of a sentence-a-line "
                             "file, words<TAB>tags? --set format=lines reads those)")]
    with pytest.raises(ConfigError, match=r"^tag_names: must be"):
        dataclasses.replace(config.sample_ner(), tag_names=("B-PS X", "O")).validate()


def test_a_csv_file_given_to_ner_is_named_as_one_not_read_as_conll(tmp_path):
    # pandas' to_csv of a token-list frame was read as CoNLL: "1 of 1 sentences are malformed (...): line 1: no tag
    # (expected token<TAB>tag)", the whole file one sentence
    path = tmp_path / "ner.csv"
    path.write_bytes('tokens,ner_tags\n"[\'김민수\', \'씨\']","[\'B-PER\', \'O\']"\n'.encode("utf-8"))
    with pytest.raises(FinetuneError, match=r"ner\.csv: a CSV file, which ner does not read .* orient='records', "
                                            r"lines=True.*--set format=conll$"):
        read_sentences(path)
    path.write_bytes("김민수\tB-PER\n씨\tO\n".encode("utf-8"))
    assert read_sentences(path, "conll").records[0][1]["tags"] == ["B-PER", "O"]


# ---- CSV rows over several lines, long fields ----------------------------------------------------------------
def test_csv_rows_merged_by_a_stray_quote_are_counted_and_the_lines_add_up(tmp_path, capsys):
    rows = [f"문장 {i} 입니다,{i % 2}" for i in range(200)]
    rows[10] = '"그렇다고 말했다,1'  # a quote opening the field, closed ten lines on: rows 10-20 are one row
    rows[20] = '끝" 문장,0'
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    train.write_text("text,label\n" + "\n".join(rows) + "\n\n", encoding="utf-8")
    test.write_text("text,label\n가,0\n나,1\n", encoding="utf-8")
    facts = Classify().read(config.sample_classify(), train, test).facts["train_file"]
    lines = len(train.read_text(encoding="utf-8").splitlines())
    assert facts["rows"] == 190 and facts["multiline_rows"] == 1 and facts["continued_lines"] == 10  # were absent
    assert 1 + facts["rows"] + facts["bad_rows"] + facts["blank_lines"] + facts["continued_lines"] == lines
    assert "train.csv: 1 row(s) read over several lines (10 line(s) past their first; the first row, lines 12-22)" \
        in capsys.readouterr().err
    assert "multiline_rows" not in Classify().read(config.sample_classify(), test, train).facts["train_file"]


def test_a_csv_quote_never_closed_is_named_where_it_opens_and_a_long_field_is_read(tmp_path):
    test = tmp_path / "test.csv"
    test.write_text("text,label\n가,0\n나,1\n", encoding="utf-8")
    rows = [f"문장 {i} 입니다 그리고 조금 더 긴 문장을 써 봅니다,{i % 2}" for i in range(5000)]
    rows[10] = '"따옴표로 시작하는 문장,1'
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    # was: "train.csv:3788: cannot read as CSV (field larger than field limit (131072))"
    with pytest.raises(FinetuneError, match=r"train\.csv: 1 of 11 rows are malformed .*line 12: expected 2 "
                                            r"comma-separated columns, got 1 \(read over lines 12-5001: a \" never closed\?\)"):
        Classify().read(config.sample_classify(), train, test)
    long = tmp_path / "long.csv"
    long.write_text("text,label\n" + "가" * 140_000 + ",1\n나,0\n다,1\n라,0\n", encoding="utf-8")
    data = Classify().read(dataclasses.replace(config.sample_classify(), dev_fraction=0.25), long, test)
    assert data.facts["train_file"]["rows"] == 4  # was refused: "field larger than field limit (131072)"


# ---- NER file format guess ----------------------------------------------------------------------------------
def test_one_conll_line_of_two_words_does_not_make_the_file_sentence_per_line(tmp_path):
    sentences = [sentence(i) for i in range(30)]
    sentences[5] = [("전자 회사", "O O"), ("직원", "O")]  # a stray line: two words, two tags
    path = conll(tmp_path / "train.conll", sentences)
    table = read_sentences(path, max_bad_fraction=0.1)
    # was: read as one sentence a line, 162 sentences of one word, none bad
    assert table.rows == 29 and table.bad == [(sum(len(s) + 1 for s in sentences[:5]) + 1,
                                               "tag 'O O' holds spaces: several tags in one field (a line of a "
                                               "sentence-a-line file, words<TAB>tags? --set format=lines reads those)")]
    assert [s["tokens"] for _, s in table.records][:2] == [[t for t, _ in sentences[0]], [t for t, _ in sentences[1]]]
    lines = tmp_path / "naver.tsv"  # a sentence-per-line file with some one-word sentences stays one
    lines.write_text("김민수 씨는 서울 에서\tPER-B O LOC-B O\n부산\tLOC-B\n삼성 전자 직원\tORG-B ORG-I O\n", encoding="utf-8")
    assert read_sentences(lines).rows == 3


def test_conll_spelt_with_spaces_or_a_trailing_tab_and_jsonl_tags_with_spaces_read_as_their_tags(tmp_path):
    spaced = tmp_path / "spaced.conll"  # was: every line "no tag (expected token<TAB>tag)", the file refused
    spaced.write_text("김민수 B-PER\n씨는 O\n\n서울  B-LOC\n에서 O\n", encoding="utf-8")
    assert [s["tags"] for _, s in read_sentences(spaced).records] == [["B-PER", "O"], ["B-LOC", "O"]]
    trailing = tmp_path / "trailing.conll"  # was: "3 tab-separated fields"
    trailing.write_text("김민수\tB-PER\t\n씨는\tO\t\n", encoding="utf-8")
    assert [s["tokens"] for _, s in read_sentences(trailing).records] == [["김민수", "씨는"]]
    jsonl = tmp_path / "klue.jsonl"  # was: type 'PS ' beside 'PS', and a dev 'B-PS' not among the training tags
    jsonl.write_text('{"tokens": ["김", "민수"], "ner_tags": ["B-PS ", " I-PS"]}\n', encoding="utf-8")
    assert [s["tags"] for _, s in read_sentences(jsonl).records] == [["B-PS", "I-PS"]]
    missing = tmp_path / "missing.conll"  # a word alone still says what is missing
    missing.write_text("김민수\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"line 1: no tag \(expected token<TAB>tag\)"):
        read_sentences(missing)


def test_a_refusal_names_a_reason_shared_by_its_offenders_once_with_their_lines(tmp_path):
    """pandas' to_csv(sep='\\t') of texts holding tabs, read as TSV, was refused with its long reason five times over
    in one line ("line 3: expected 3 tab-separated columns, got 2 (a quoted field ...); line 7: expected 3 ..."):
    each reason is said once, after the lines that have it, in the order of their first line."""
    rows = "".join(f'{i}\t"문장\t{i}"\t{"ab"[i % 2]}\n' if i % 4 == 1 else f"{i}\t문장 {i}\t{'ab'[i % 2]}\n"
                   for i in range(20))
    path = tmp_path / "q.tsv"
    path.write_text("id\ttext\tlabel\n" + rows + "20\t문장\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"q\.tsv: 6 of 21 rows are malformed \(.*\): lines 3, 7, 11, 15, 19: expected 3 "
                                            r"tab-separated columns, got 4 \(a quoted field holding a tab or line break, "
                                            r"as pandas' to_csv\(sep='\\t'\) writes\? --set format=quoted_tsv reads CSV "
                                            r"quoting\)$"):
        Classify().read(config.sample_classify(), path, path)
    bioes = tmp_path / "bioes.conll"
    bioes.write_text("삼성\tB-ORG\n전자\tE-ORG\n\n서울\tS-LOC\n\n부산\tS-LOC\n\n김\tB-PER\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r": line 2: tag 'E-ORG' is not a BIO tag but BIOES .*\(the same entities\); "
                                            r"lines 4, 6: tag 'S-LOC' is not a BIO tag but BIOES .*\(the same entities\)$"):
        read_sentences(bioes)


def test_a_conll_2003_line_of_four_space_separated_columns_is_not_told_it_has_no_tag(tmp_path):
    # CoNLL-2003's "EU NNP B-NP B-ORG" (word, POS, chunk, tag) had been refused as "no tag (expected token<TAB>tag)"
    path = tmp_path / "conll2003.txt"
    path.write_text("삼성 NNP B-NP B-ORG\n전자 NNP I-NP I-ORG\n\n김민수 NNP B-NP B-PER\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"lines 1, 4: 4 space-separated fields \(expected token<TAB>tag, or a token "
                                            r"and its tag split by a space; CoNLL-2003's word, POS, chunk and tag: keep "
                                            r"the first and the last\)$"):
        read_sentences(path)
    path.write_text("비토리오\tNNP\tPER_B\n", encoding="utf-8")  # tabs: as before
    with pytest.raises(FinetuneError, match=r"line 1: 3 tab-separated fields \(expected token<TAB>tag\)$"):
        read_sentences(path)
    # the Naver NLP challenge's own files number their tokens: "3 tab-separated fields (expected token<TAB>tag)" had
    # not said what the first one was, nor the way out
    path.write_text("1\t비토리오\tPER_B\n2\t양일\tDAT_B\n\n1\t오늘\tDAT_B\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"lines 1, 4: 3 tab-separated fields \(expected token<TAB>tag; an index, a token "
                                            r"and its tag, as the Naver NLP challenge's files number their tokens: keep "
                                            r"the last two, cut -f2,3\)$"):
        read_sentences(path)


def test_a_byte_order_mark_before_a_quoted_csv_header_leaves_the_name_unquoted(tmp_path):
    path = tmp_path / "excel.csv"  # pandas' to_csv(encoding="utf-8-sig", quoting=QUOTE_ALL), Excel's "CSV UTF-8"
    path.write_bytes(b'\xef\xbb\xbf"text","label"\r\n"\xea\xb0\x80","1"\r\n')
    table = read_table(path)
    assert table.columns == ["text", "label"]  # was ['"text"', 'label']: "no column 'text' ... its columns are: "text", label"
    assert table.records == [(2, {"text": "가", "label": "1"})]


def test_a_tag_in_decomposed_hangul_is_its_composed_tag(tmp_path):
    person, nfd = "B-인명", unicodedata.normalize("NFD", "B-인명")
    train = tmp_path / "train.conll"
    train.write_text(f"김민수\t{person}\n씨는\tO\n\n이영희\t{nfd}\n씨\tO\n\n서울\tO\n", encoding="utf-8")
    table = read_sentences(train)
    assert {t for _, s in table.records for t in s["tags"]} == {person, "O"}  # was three tags, two printed alike


def test_a_line_of_spaces_or_tabs_alone_is_blank_in_tsv_and_csv_as_in_jsonl(tmp_path):
    test = tmp_path / "test.tsv"
    test.write_text("text\tlabel\n가\t0\n나\t1\n", encoding="utf-8")
    rows = "".join(f"문장 {i}\t{i % 2}\n" for i in range(200))
    for name, text in (("train.tsv", "text\tlabel\n" + rows + "  \n\t\n"),
                       ("train.csv", "text,label\n" + rows.replace("\t", ",") + "  \n , \n")):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        # was: "2 of 202 rows are malformed ... expected 2 tab-separated columns, got 1; ... empty label", refused
        facts = Classify().read(config.sample_classify(), path, test).facts["train_file"]
        assert (facts["rows"], facts["bad_rows"], facts["blank_lines"]) == (200, 0, 2), name


def test_a_test_tag_of_a_training_type_is_scored_as_gold_and_an_unknown_type_refused(tmp_path, capsys):
    """Training LOC entities were one word each, the test file has a two-word one (B-LOC I-LOC): it had been
    refused ("tag 'I-LOC' is not among the training tags"); it is scored, as conlleval scores any tag."""
    train = conll(tmp_path / "train.conll", [sentence(i) for i in range(40)])
    test = conll(tmp_path / "test.conll", [[("부산", "B-LOC"), ("광역시", "I-LOC"), ("에서", "O")], sentence(1)])
    task = Ner()
    data = task.read(dataclasses.replace(config.sample_ner(), dev_fraction=0.25), train, test)
    assert task.gold_only == ["I-LOC"] and "I-LOC" not in task.labels  # the head has no output for it
    assert "test.conll:2: tag 'I-LOC' is not among the training tags, though its type 'LOC' is: scored as gold" in capsys.readouterr().err
    gold = [task.labels.index("B-LOC"), task.labels.index("O")]
    logits = np.full((5, len(task.labels)), -5.0, np.float32)  # [CLS] 부산 광역시 에서 [SEP]: B-LOC O O
    for position, tag in enumerate([0, gold[0], gold[1], gold[1], 0]):
        logits[position, tag] = 5.0
    split = SimpleNamespace(derived={}, rows={"tags": [data.test["tags"][0]]}, encoded={"word_starts": [[1, 2, 3]]})
    scores, predictions = task.score(split, {"logits": [logits]}, None)
    assert split.derived["gold"] == [["B-LOC", "I-LOC", "O"]]
    assert predictions["entities"]["gold_entities"] == 1 and scores["f1"] == 0.0  # LOC(0,2) missed, LOC(0,1) wrong
    typo = conll(tmp_path / "typo.conll", [[("부산", "B-LCO")]])
    with pytest.raises(FinetuneError, match=r"typo\.conll:1: tag 'B-LCO' is not among the training tags"):
        Ner().read(dataclasses.replace(config.sample_ner(), dev_fraction=0.25), train, typo)


def test_a_gold_only_tag_written_two_ways_is_warned_of_once(tmp_path, capsys):
    """A test file writing the same gold-only tag two ways (I-LOC, then Naver's LOC-I) was warned of twice, one
    line each spelling, as if two tags the model cannot predict; one line now (metrics' gold_only_tags unchanged)."""
    train = conll(tmp_path / "train.conll", [sentence(i) for i in range(40)])
    test = conll(tmp_path / "test.conll", [[("부산", "B-LOC"), ("광역시", "I-LOC")], [("대구", "LOC-B"), ("시", "LOC-I")]])
    task = Ner()
    task.read(dataclasses.replace(config.sample_ner(), dev_fraction=0.25), train, test)
    err = capsys.readouterr().err
    assert task.gold_only == ["I-LOC", "LOC-I"]  # each spelling its gold name, as predictions.jsonl writes it
    assert err.count("not among the training tags") == 1 and "tag 'I-LOC' is not among" in err


def test_a_training_tag_spelled_otherwise_in_the_test_file_is_that_tag(tmp_path, capsys):
    """Naver's ``LOC-B`` in a test file beside a CoNLL training file's ``B-LOC`` (docs/finetune.md: both are
    BIO): it was warned of as a tag 'the model cannot predict' and kept as a gold-only tag; it is the
    training tag, the head's own output, and nothing is said."""
    train = conll(tmp_path / "train.conll", [sentence(i) for i in range(40)])
    test = conll(tmp_path / "test.conll", [[("부산", "LOC-B"), ("에서", "O")], [("서울", "LOC_B"), ("에", "O")]])
    task = Ner()
    data = task.read(dataclasses.replace(config.sample_ner(), dev_fraction=0.25), train, test)
    assert task.gold_only == [] and "not among the training tags" not in capsys.readouterr().err
    loc = task.labels.index("B-LOC")
    assert [tags[0] for tags in data.test["tags"]] == [loc, loc]


def test_a_training_file_mixing_tag_spellings_gives_each_tag_one_output(tmp_path):
    """A CoNLL file and a Naver one joined for training (B-LOC beside LOC-B): each spelling had an output of its
    own, six for four tags, the LOC rows split between two classes the model had to tell apart."""
    train = conll(tmp_path / "train.conll", [[(f"서울{i}", "B-LOC" if i % 2 else "LOC-B"),
                                              ("부산", "I-LOC" if i % 2 else "LOC-I"), (PER[i % 3], "PER-B"), ("왔다", "O")]
                                             for i in range(40)])
    task = Ner()
    data = task.read(dataclasses.replace(config.sample_ner(), dev_fraction=0.25), train, train)
    assert task.labels == ["O", "B-LOC", "I-LOC", "PER-B"] and task.gold_only == []
    assert sorted({t for tags in data.train["tags"] for t in tags}) == [0, 1, 2, 3]
    assert task.model_config(data)["num_labels"] == 4


def test_a_dev_set_without_an_entity_is_refused_before_training(tmp_path):
    """Every dev F1 was 0: the first epoch was kept and the health said "the model predicts no entity in the 10 dev
    sentences (O for every token; they hold 0): it learned nothing", of a model no dev entity could judge."""
    train = conll(tmp_path / "train.conll", [sentence(i) for i in range(40)])
    dev = conll(tmp_path / "dev.conll", [[(f"왔다{i}", "O"), ("에서", "O")] for i in range(10)])
    cfg = config.sample_ner()
    task = Ner(dev)
    data = task.read(cfg, train, train)
    with pytest.raises(FinetuneError, match=r"--dev .*dev\.conll: every dev tag is 'O': no entity to score, so no epoch "
                                            r"can be chosen by entity F1; give a dev file holding entities"):
        task.check({}, data, cfg)
    carved = Ner()
    carved.check({}, carved.read(dataclasses.replace(cfg, dev_fraction=0.25), train, train), cfg)


def test_training_sentences_left_of_no_entity_are_refused_before_training(tmp_path):
    """As classify refuses training rows left of one label: max_train_examples=10 of a file whose entities are sparse
    (2 sentences of 100), or a dev split that took them, trained a head on sentences of O alone, said only after the
    run by the health ("the model predicts no entity")."""
    train = conll(tmp_path / "train.conll", [sentence(i) for i in range(2)] + [[(f"왔다{i}", "O"), ("에서", "O")]
                                                                                for i in range(98)])
    dev, test = (conll(tmp_path / name, [sentence(i) for i in range(k)]) for name, k in (("dev.conll", 4), ("t.conll", 3)))
    cfg = dataclasses.replace(config.sample_ner(), max_train_examples=10, seed=0)
    task = Ner(dev)
    data = task.read(cfg, train, test)
    with pytest.raises(FinetuneError, match=r"train\.conll: the 10 training sentence\(s\) left by max_train_examples=10 "
                                            r"hold no entity \(every tag 'O'\): nothing to learn from; raise "
                                            r"max_train_examples$"):
        task.check({}, data, cfg)
    for seed in range(50):  # a carve that puts both sentences holding an entity in the dev split
        carved = dataclasses.replace(cfg, max_train_examples=0, seed=seed)
        task = Ner()
        data = task.read(carved, train, test)
        if not any(t != task.labels.index("O") for tags in data.train["tags"] for t in tags):
            break
    with pytest.raises(FinetuneError, match=r"the 80 training sentence\(s\) left by the dev split \(dev_fraction=0\.2\) "
                                            r"hold no entity .*; lower dev_fraction or pass --dev FILE$"):
        task.check({}, data, carved)
    task = Ner(dev)
    task.check({}, task.read(dataclasses.replace(cfg, max_train_examples=0), train, test), cfg)


def test_a_test_file_without_an_entity_is_warned_of_before_training(tmp_path, capsys):
    """A test file of O tags alone (placeholders, to get predictions for an unlabelled set) trained and reported
    "test f1 0.0000" as the model's figure, unsaid: with no entity to find, any model scores 0."""
    train = conll(tmp_path / "train.conll", [sentence(i) for i in range(40)])
    test = conll(tmp_path / "test.conll", [[(f"왔다{i}", "O"), ("에서", "O")] for i in range(3)])
    cfg = dataclasses.replace(config.sample_ner(), dev_fraction=0.25)
    task = Ner()
    task.check({}, task.read(cfg, train, test), cfg)
    assert (f"WARNING: ner: {test}: every test tag is 'O': no entity to find, so the test f1 and recall are 0 whatever "
            "the model learned (predictions.jsonl still holds its tags); score a file holding entities"
            ) in capsys.readouterr().err
    task = Ner()
    task.check({}, task.read(cfg, train, train), cfg)
    assert "every test tag" not in capsys.readouterr().err


def test_a_dev_set_cut_to_no_entity_by_its_cap_names_the_cap_not_the_file(tmp_path):
    """A --dev file opening with sentences of no entity, cut to them by max_eval_examples, was told "every dev tag
    is 'O' ...; give a dev file holding entities", which it is."""
    train = conll(tmp_path / "train.conll", [sentence(i) for i in range(40)])
    dev = conll(tmp_path / "dev.conll", [[(f"왔다{i}", "O"), ("에서", "O")] for i in range(5)]
                + [sentence(i) for i in range(10)])
    cfg = dataclasses.replace(config.sample_ner(), max_eval_examples=5)
    task = Ner(dev)
    data = task.read(cfg, train, train)
    with pytest.raises(FinetuneError, match=r"dev\.conll \(the first 5 of its 15 rows, cut by max_eval_examples=5, "
                                            r"which caps dev while max_dev_examples is -1\): every dev tag is 'O'.*; "
                                            r"raise max_dev_examples \(0: all\)$"):
        task.check({}, data, cfg)
    task = Ner(dev)
    task.check({}, task.read(dataclasses.replace(cfg, max_dev_examples=0), train, train), cfg)


def test_a_bioes_or_bilou_file_is_named_as_such_with_the_conversion(tmp_path):
    """A BIOES file was refused as "tag 'E-ORG' is not a BIO tag ... none is readable: check the file's format and
    columns", no word of the scheme or of the conversion that keeps its entities."""
    bioes = conll(tmp_path / "bioes.conll", [[("삼성", "B-ORG"), ("전자", "E-ORG"), ("서울", "S-LOC")],
                                             [("김민수", "PER-S"), ("왔다", "O")], [("부산", "U-LOC")]])
    with pytest.raises(FinetuneError, match=r"line 2: tag 'E-ORG' is not a BIO tag but BIOES or BILOU \(E-, S-, L-, U-\): "
                                            r"convert the file, S- and U- to B-, E- and L- to I- \(the same entities\); "
                                            r"line 5: tag 'PER-S' is not a BIO tag but BIOES.*line 8: tag 'U-LOC' is not a BIO "
                                            r"tag but BIOES"):
        read_sentences(bioes)
    converted = {"S": "B", "U": "B", "E": "I", "L": "I"}  # the conversion said keeps the entities
    for tags, expected in ((["B-ORG", "E-ORG", "S-LOC", "O"], [("ORG", 0, 2), ("LOC", 2, 3)]),
                           (["U-PER", "B-LOC", "L-LOC"], [("PER", 0, 1), ("LOC", 1, 3)])):
        assert entities([converted.get(t[0], t[0]) + t[1:] for t in tags]) == expected


def test_a_gold_only_tag_after_a_tag_spelled_otherwise_is_named_by_its_own_id(tmp_path):
    """A Naver-spelt test file (LOC-B, LOC-I) beside a CoNLL training file, with a tag of a training type the
    training file lacks (PER-I) after them: each spelling counted as an id, so PER-I got id 7 of 5 names and
    the run ended, after training, in "internal error: IndexError: list index out of range"."""
    train = conll(tmp_path / "train.conll", [[("서울", "B-LOC"), ("부산", "I-LOC"), (PER[i % 3], "B-PER"), (f"{i}일", "O")]
                                                   for i in range(40)])
    test = conll(tmp_path / "test.conll", [[("서울", "LOC-B"), ("부산", "LOC-I"), ("김", "PER-B"), ("민수", "PER-I")]])
    task = Ner()
    data = task.read(dataclasses.replace(config.sample_ner(), dev_fraction=0.25), train, test)
    assert task.labels == ["O", "B-LOC", "I-LOC", "B-PER"] and task.gold_only == ["PER-I"]
    assert list(data.test["tags"][0]) == [1, 2, 3, 4]
    split = SimpleNamespace(derived={}, rows={"tags": [data.test["tags"][0]]}, encoded={"word_starts": [[1, 2, 3, 4]]})
    logits = np.full((6, 4), -5.0, np.float32)
    for position, tag in enumerate([0, 1, 2, 3, 0, 0]):  # [CLS] B-LOC I-LOC B-PER O [SEP]
        logits[position, tag] = 5.0
    scores, predictions = task.score(split, {"logits": [logits]}, None)
    assert split.derived["gold"] == [["B-LOC", "I-LOC", "B-PER", "PER-I"]]
    assert predictions["entities"]["correct_entities"] == 1 and predictions["entities"]["gold_entities"] == 2
