"""Column names in decomposed Hangul (NFD, as files saved on macOS may hold them) are the names typed in composed
Hangul, as labels and tags are (docs/finetune.md): a TSV whose header read ``문장`` in NFD had been refused with
"no column '문장' (text_column); its columns are: 문장, 라벨", the two names printed alike. Found by trying files."""

from __future__ import annotations

import dataclasses
import json
import unicodedata

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kolectra.core.config import ConfigError, override, to_dict
from kolectra.finetune import config
from kolectra.finetune.classify import Classify
from kolectra.finetune.eval_texts import eval_texts
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.ner import Ner
from kolectra.finetune.readers.tables import read_table
from kolectra.finetune.regress import Regress
from tests.finetune_task_inputs_support import write

TEXT, LABEL = "문장", "라벨"  # composed (NFC), as typed
NFD = lambda s: unicodedata.normalize("NFD", s)  # noqa: E731


def _rows(n: int) -> list[tuple[str, str]]:
    return [(f"리뷰 {i}", "pos" if i % 2 else "neg") for i in range(n)]


def _tsv(path, rows, text=TEXT, label=LABEL, newline="\n"):
    return write(path, f"{text}\t{label}{newline}" + "".join(f"{t}\t{y}{newline}" for t, y in rows))


@pytest.mark.parametrize("header,asked", [(NFD, lambda s: s), (lambda s: s, NFD)], ids=["nfd-file", "nfd-flag"])
def test_a_classify_column_named_in_the_other_unicode_form_is_that_column(tmp_path, header, asked):
    train = _tsv(tmp_path / "train.tsv", _rows(12), header(TEXT), header(LABEL))
    csv = write(tmp_path / "test.csv", "\ufeff" + f"{header(TEXT)},{header(LABEL)}\r\n"
                + "".join(f"{t},{y}\r\n" for t, y in _rows(4)))
    cfg = dataclasses.replace(config.sample_classify(), text_column=asked(TEXT), label_column=asked(LABEL))
    data = Classify().read(cfg, train, csv)
    assert len(data.train) + len(data.dev) == 12 and list(data.test["text"]) == [t for t, _ in _rows(4)]
    assert data.facts["train_file"]["bad_rows"] == 0
    # kolectra report's check of the scored texts takes the same rows
    assert [t.values for t in eval_texts("classify", to_dict(cfg), csv)] == [[t for t, _ in _rows(4)]]


def test_jsonl_keys_and_parquet_columns_in_nfd_and_a_repeated_nfd_header(tmp_path):
    rows = [{NFD(TEXT): t, NFD("점수"): float(i % 5)} for i, (t, _) in enumerate(_rows(10))]
    train = write(tmp_path / "train.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    test = tmp_path / "test.parquet"
    pq.write_table(pa.table({NFD(TEXT): [t for t, _ in _rows(4)], NFD("점수"): [1.0, 2.0, 3.0, 4.0]}), test)
    cfg = dataclasses.replace(config.sample_regress(), text_column=TEXT, label_column="점수")
    data = Regress().read(cfg, train, test)
    assert len(data.train) + len(data.dev) == 10 and list(data.test["label"]) == [1.0, 2.0, 3.0, 4.0]
    # two NFD files joined with cat: the second header is still a repeated header, not a row
    joined = write(tmp_path / "joined.tsv", f"{NFD(TEXT)}\t{NFD(LABEL)}\n가\tpos\n{NFD(TEXT)}\t{NFD(LABEL)}\n나\tneg\n")
    table = read_table(joined)
    assert table.columns == [TEXT, LABEL] and [r[TEXT] for _, r in table.records] == ["가", "나"]
    assert [why for _, why in table.bad] == [table.bad[0][1]] and "repeats the header" in table.bad[0][1]


def test_ner_columns_in_nfd_and_a_missing_column_still_named(tmp_path):
    rows = [{NFD("토큰"): [f"김민수{i}", "씨", "서울", "에"], NFD("태그"): ["B-PS", "O", "B-LC", "O"]} for i in range(6)]
    path = write(tmp_path / "ner.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    cfg = dataclasses.replace(config.sample_ner(), tokens_column="토큰", tags_column="태그", dev_fraction=0.5)
    data = Ner().read(cfg, path, path)
    assert list(data.test["tokens"])[0] == ["김민수0", "씨", "서울", "에"]
    train = _tsv(tmp_path / "t.tsv", _rows(6), NFD(TEXT), NFD(LABEL))
    with pytest.raises(FinetuneError, match=r"no column '본문' \(text_column\); its columns are: 문장, 라벨$"):
        Classify().read(dataclasses.replace(config.sample_classify(), text_column="본문", label_column=LABEL),
                        train, train)


def test_two_flags_naming_one_column_in_either_form_are_refused_as_one_column_twice():
    # read after NFC they are one column: the label fed to the model as its text, every token its own tag
    for cls, sets, key in ((config.ClassifyConfig, [f"text_column={TEXT}", f"label_column={NFD(TEXT)}"], "label_column"),
                           (config.RegressConfig, [f"text_column={TEXT}", f"text_pair_column={NFD(TEXT)}"],
                            "text_pair_column"),
                           (config.NerConfig, ["tokens_column=토큰", f"tags_column={NFD('토큰')}"], "tags_column")):
        with pytest.raises(ConfigError, match=rf"^{key}: must be (another column|a column that is not)"):
            override(cls(), sets).validate()
