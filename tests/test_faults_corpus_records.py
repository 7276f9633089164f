"""Corpus records that are valid but odd (issue 27), through the real corpus job (Beam's
FnApiRunner in-process, real Kiwi) and the reader and cleaning rules alone:

- a line Python's JSON parser refuses (an integer of 5,000 digits, nesting past the recursion
  limit, in the text's object or in the id) is one ``unparsable_json`` reject; the lines after it
  are read, by default settings (no ``max_damaged_files``);
- ids: numbers canonical, other non-string ids ``invalid_id``; one id with two texts is counted;
- documents of invisible characters (Hangul fillers, the Braille blank ...) are dropped as
  ``invisible``; U+FFA0 is folded; a ZWJ inside an emoji sequence stays, a stray one goes;
- inputs that are not regular files (a FIFO, a device) are refused up front, naming them.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
from pathlib import Path

import pytest

from kolectra.corpus import filters, inputs, reader, record_rules
from kolectra.corpus import text as text_rules
from kolectra.corpus.config import default_config
from kolectra.pipeline import stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store

BIG = "1" * 5000  # over Python's 4,300-digit limit for int('...')
DEEP = "[" * 100_000 + "]" * 100_000  # RecursionError in json.loads
FAMILY = "👨\u200d👩\u200d👧"


def _good(i: int) -> str:
    return json.dumps({"id": f"g{i}", "text": f"{i}번째 좋은 문서입니다 정말 재밌었어요"}, ensure_ascii=False)


# line -> what it is; the good lines around them keep the reject ratio under the default 5 %
ODD = {
    3: '{"id": "big", "text": "큰 숫자가 들어 있는 줄입니다", "n": ' + BIG + "}",
    6: '{"id": "deep", "text": "깊게 중첩된 줄입니다 정말로", "a": ' + DEEP + "}",
    9: '{"id": ' + BIG + ', "text": "아이디가 큰 숫자인 줄입니다"}',
    12: '{"id": ' + DEEP + ', "text": "아이디가 깊은 줄입니다 정말"}',
    15: json.dumps({"id": True, "text": "불리언 아이디는 문서를 가리키지 않아요"}, ensure_ascii=False),
    18: json.dumps({"id": {"a": 1}, "text": "객체 아이디도 문서를 가리키지 않아요"}, ensure_ascii=False),
    21: json.dumps({"id": 7, "text": "숫자 아이디 문서입니다 좋아요"}, ensure_ascii=False),
    24: json.dumps({"id": 7.0, "text": "같은 숫자 아이디 다른 문서입니다"}, ensure_ascii=False),
    27: json.dumps({"id": "twice", "text": "한 아이디에 첫 번째 글입니다"}, ensure_ascii=False),
    30: json.dumps({"id": "twice", "text": "한 아이디에 두 번째 글입니다"}, ensure_ascii=False),
    33: json.dumps({"id": "same", "text": "같은 아이디 같은 글입니다 정말"}, ensure_ascii=False),
    36: json.dumps({"id": "same", "text": "같은 아이디 같은 글입니다 정말"}, ensure_ascii=False),  # a duplicate
    39: json.dumps({"id": "filler", "text": "\u3164" * 12}),
    42: json.dumps({"id": "halfwidth", "text": "\uffa0" * 12}),
    45: json.dumps({"id": "braille", "text": "\u2800" * 12 + "\n" + "\u115f\u1160" * 4}),
    48: json.dumps({"id": "family", "text": f"우리 가족 {FAMILY} 사진입니다\u200d 좋아요"}, ensure_ascii=False),
}
LINES = 120


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    root = tmp_path_factory.mktemp("odd")
    body = "\n".join(ODD.get(i, _good(i)) for i in range(1, LINES + 1)) + "\n"
    (root / "odd.jsonl").write_text(body, encoding="utf-8")
    art = stages.corpus(Store(root / "store"), [str(root / "odd.jsonl")])  # default settings
    rejects = [json.loads(line) for line in (art.path / "rejects" / "rejects.jsonl").read_text().splitlines()]
    stats = json.loads((art.path / "stats.json").read_text())
    docs = [json.loads(line) for f in sorted((art.path / "data").glob("*.jsonl.gz"))
            for line in gzip.decompress(f.read_bytes()).decode("utf-8").splitlines()]
    return rejects, stats, docs


def test_a_record_the_parser_refuses_is_one_reject_and_the_file_is_read_on(odd):
    rejects, stats, docs = odd
    by_line = {r["line"]: r for r in rejects}
    assert {line: r["reason"] for line, r in by_line.items()} == {
        3: "unparsable_json", 6: "unparsable_json", 9: "unparsable_json", 12: "unparsable_json",
        15: "invalid_id", 18: "invalid_id"}
    assert "4300" in by_line[3]["detail"] and "nested" in by_line[6]["detail"]
    assert "damaged" not in stats["sources"]["odd.jsonl"]
    assert stats["rejected_reasons"]["unparsable_json"] == 4 and stats["rejected_reasons"]["invalid_id"] == 2
    ids = {d["id"] for d in docs}
    assert {f"g{i}" for i in range(1, LINES + 1) if i not in ODD} <= ids  # every good line, after them too
    assert stats["records_in"] == LINES
    assert stats["records_in"] == stats["records_out"] + stats["rejected"] + sum(stats["dropped"].values())


def test_ids_numbers_are_canonical_and_an_id_with_two_texts_is_counted(odd):
    _, stats, docs = odd
    ids = [d["id"] for d in docs]
    assert ids.count("7") == 2 and ids.count("twice") == 2 and ids.count("same") == 1
    assert not any(i.startswith(("{", "True", "[")) for i in ids)
    assert stats["duplicate_id_different_text"] == 2  # the second "7" and the second "twice"
    assert stats["dropped"]["duplicate"] == 1


def test_invisible_documents_are_dropped_by_name_and_emoji_keep_their_joiners(odd):
    _, stats, docs = odd
    assert stats["dropped"]["invisible"] == 3
    assert not {"filler", "halfwidth", "braille"} & {d["id"] for d in docs}
    [family] = [d for d in docs if d["id"] == "family"]
    assert family["text"] == f"우리 가족 {FAMILY} 사진입니다 좋아요"  # the stray ZWJ went


@pytest.mark.parametrize("line, reason", [
    ('{"text": "x", "n": -' + BIG + "}", "unparsable_json"),
    ('{"text": "x", "n": ' + '{"a": ' * 20_000 + "1" + "}" * 20_000 + "}", "unparsable_json"),
    ("[" + BIG + "]", "unparsable_json"),
    ('{"text": ' + BIG + "}", "unparsable_json"),
    ('{"text": "x", "id": [1]}', "invalid_id"),
    ('{"text": "x", "id": NaN}', "invalid_id"),
    ('{"text": "x", "id": -Infinity}', "invalid_id"),
    ('{"text": "x", "id": false}', "invalid_id"),
])
def test_the_reader_rejects_one_line_and_reads_the_next(tmp_path, line, reason):
    path = tmp_path / "in.jsonl"
    path.write_text(line + '\n{"text": "다음 줄"}\n', encoding="utf-8")
    rows = list(reader.read_file(str(path), "in.jsonl", "auto", "text", "id", 1 << 20))
    assert [r.get("reason") for r in rows] == [reason, None], rows
    assert rows[1]["text"] == "다음 줄" and rows[0]["line"] == 1


@pytest.mark.parametrize("value, canonical", [(7, "7"), (7.0, "7"), (-0.0, "0"), (1.5, "1.5"), (10**30, str(10**30)),
                                              (1e300, "1e+300"), (True, None), (None, None), ([1], None),
                                              (float("nan"), None), (float("inf"), None)])
def test_canonical_ids(value, canonical):
    assert record_rules.canonical_id(value) == canonical


@pytest.mark.parametrize("blank", ["\u3164", "\uffa0", "\u2800", "\u115f\u1160", "\u034f", "\ufe0f", "\u200d",
                                   "\U000e0041", "\u3164 \u2800\n\u200b\ufeff"])
def test_a_document_of_invisible_characters_is_dropped_as_invisible(blank):
    cleaned = text_rules.clean(blank * 10)
    assert filters.judge(cleaned, default_config())[1] in ("invisible", "empty")
    assert filters.judge(text_rules.clean("보이는 글자 " + blank * 3 + " 있어요"), default_config())[1] is None


def test_halfwidth_filler_is_folded_and_joiners_are_kept_only_inside_emoji():
    assert text_rules.fold_width("\uffa0\uffa1") == "\u3164\u3131"
    for seq in (FAMILY, "🏳\ufe0f\u200d🌈", "👨🏽\u200d💻", "❤\ufe0f\u200d🔥", "🏴\U000e0067\U000e0062\U000e0073\U000e0063"
                "\U000e0074\U000e007f"):
        assert text_rules.normalize(f"가 {seq} 나") == f"가 {seq} 나"
    assert text_rules.normalize("가\u200d나 \u200d👩 👨\u200d \U000e0041x") == "가나 👩 👨 x"
    assert text_rules.normalize("👨\u200b\u200d👩") == "👨\u200d👩"  # joined once the zero-width space is gone


def test_inputs_that_are_not_regular_files_are_refused_naming_them(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        for path, kind in ((fifo, "named pipe"), (Path("/dev/zero"), "character device"),
                           (Path("/dev/null"), "character device"), (tmp_path / "sock", "socket")):
            with pytest.raises(inputs.InputError, match=f"{path}.*{kind}.*not a regular file"):
                inputs.list_inputs([str(path)])
        (tmp_path / "ok.txt").write_text("좋은 영화였어요\n", encoding="utf-8")
        with pytest.raises(inputs.InputError, match="pipe"):  # a glob that matches one
            inputs.list_inputs([str(tmp_path / "*")])
        for given in (str(fifo), "/dev/zero"):
            assert main(["corpus", "--input", given, "--out", str(tmp_path / "root")]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith("kolectra corpus: error: input ") and given in err[0]
    finally:
        sock.close()
