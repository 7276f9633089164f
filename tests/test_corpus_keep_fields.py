"""``kolectra corpus --keep-fields`` (issue 28), driven through the CLI on the real corpus job
(Beam's FnApiRunner in-process, real Kiwi) over small files the tests write:

- chosen JSONL fields reach the documents as they were (numbers stay numbers), after the
  document's own keys; a document whose input lacks one, has it null, or came from a text file
  among the inputs gets null, and ``stats.json`` → ``missing_fields`` counts them per field;
- of duplicate texts the kept copy (smallest source, line) brings its fields;
- the manifest and ``--print-config`` record the key only when it is set, so a corpus made
  without it keeps its id; ``datasets`` loads the fields; the examples stage ignores them;
- names the document already has, and inputs none of which is JSONL, are refused.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kolectra.core import verbosity
from kolectra.core.config import to_dict
from kolectra.corpus import reader, record_rules
from kolectra.corpus.config import default_config
from kolectra.pipeline.cli import main

WORDS = "영화 정말 재밌었어요 배우 연기 최고 지루했다 스토리 감동 음악 좋았고 별로 다시 보고 싶다".split()
FIELDS = "rating,movie_id,date"


def _review(i: int) -> dict:
    text = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6)) + f" {i}번"
    row = {"id": f"r{i}", "text": text, "rating": i % 10, "movie_id": f"m{i % 4}", "date": f"2020-01-{i % 28 + 1:02d}"}
    if i % 5 == 0:
        del row["rating"]  # absent
    if i % 7 == 0:
        row["date"] = None  # null
    return row


def _inputs(root: Path) -> tuple[Path, Path]:
    rows = [_review(i) for i in range(1, 41)]
    # a later copy of r3's text with other fields: dedup keeps r3 (the smaller line) and its fields
    rows.append({**rows[2], "id": "copy", "rating": 99, "movie_id": "later"})
    jsonl = root / "reviews.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    txt = root / "more.txt"
    txt.write_text("텍스트 파일에서 온 첫 번째 문서입니다\n텍스트 파일에서 온 두 번째 문서입니다\n", encoding="utf-8")
    return jsonl, txt


@pytest.fixture(autouse=True)
def _verbosity(monkeypatch):
    """Whatever a command sets (-q writes KOLECTRA_VERBOSITY) is restored after each test."""
    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))


def _corpus(capsys, argv: list[str]) -> Path:
    assert main(["corpus", *argv, "--set", "num_shards=1"]) == 0
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


def _documents(art: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((art / "data").glob("*.jsonl.gz"))
            for line in gzip.decompress(f.read_bytes()).decode("utf-8").splitlines()]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("keep")
    jsonl, txt = _inputs(root)
    return root, jsonl, txt, ["--out", str(root / "store")]


@pytest.fixture()
def kept(made, capsys):
    root, jsonl, txt, out = made
    art = _corpus(capsys, ["--input", str(jsonl), "--input", str(txt), "--keep-fields", FIELDS, *out])
    return art, _documents(art), json.loads((art / "stats.json").read_text(encoding="utf-8"))


def test_kept_fields_are_written_as_they_were_and_missing_ones_counted(kept):
    art, docs, stats = kept
    by_id = {d["id"]: d for d in docs}
    assert all(list(d)[:5] == ["id", "source", "text", "sentences", "morphs"] and list(d)[5:] == FIELDS.split(",")
               for d in docs)
    assert by_id["r1"]["rating"] == 1 and by_id["r1"]["movie_id"] == "m1" and by_id["r1"]["date"] == "2020-01-02"
    assert by_id["r5"]["rating"] is None and by_id["r7"]["date"] is None  # absent, null
    texts = [d for d in docs if d["source"] == "more.txt"]
    assert len(texts) == 2 and all(d[f] is None for d in texts for f in FIELDS.split(","))
    # 8 of r1..r40 lack a rating, 5 have a null date; the 2 text documents lack all three
    assert stats["missing_fields"] == {"rating": 8 + 2, "movie_id": 2, "date": 5 + 2}
    assert stats["records_out"] == len(docs) == 42 and stats["dropped"]["duplicate"] == 1
    manifest = json.loads((art / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["keep_fields"] == FIELDS.split(",")


def test_a_kept_field_no_document_has_is_warned_as_a_likely_typo(made, capsys):
    root, jsonl, _, out = made
    assert main(["corpus", "--input", str(jsonl), "--keep-fields", "rating,ratting", *out, "--set", "num_shards=1"]) == 0
    err = capsys.readouterr().err
    assert "WARNING: corpus: no document has the kept field 'ratting': all 40 hold null; is it misspelt?" in err
    assert "kept field 'rating'" not in err  # 8 of 40 without it: counted, not warned


def test_of_duplicate_texts_the_kept_copy_brings_its_fields(kept):
    _, docs, _ = kept
    [r3] = [d for d in docs if d["text"].endswith(" 3번")]
    assert (r3["id"], r3["rating"], r3["movie_id"]) == ("r3", 3, "m3")


def test_datasets_loads_the_kept_fields(kept):
    datasets = pytest.importorskip("datasets")
    art, docs, _ = kept
    loaded = datasets.load_dataset(str(art))
    assert set(FIELDS.split(",")) <= set(loaded["train"].column_names)
    rows = {r["id"]: r for split in loaded.values() for r in split}
    assert rows["r1"]["rating"] == 1 and rows["r5"]["rating"] is None


def test_without_the_option_nothing_changes_and_the_id_is_the_one_before_it(made, capsys):
    root, jsonl, txt, out = made
    art = _corpus(capsys, ["--input", str(jsonl), *out])
    docs = _documents(art)
    assert all(list(d) == ["id", "source", "text", "sentences", "morphs"] for d in docs)
    stats = json.loads((art / "stats.json").read_text(encoding="utf-8"))
    assert "missing_fields" not in stats and list(stats["repaired"]) == ["lone_surrogate"]
    manifest = json.loads((art / "manifest.json").read_text(encoding="utf-8"))
    assert "keep_fields" not in manifest["config"] and "keep_fields" not in to_dict(default_config())
    assert "rating" not in (art / "README.md").read_text(encoding="utf-8")
    # --print-config shows the key to set, and records it only once it is set
    assert main(["corpus", "--print-config"]) == 0
    assert "keep_fields" not in json.loads(capsys.readouterr().out)
    assert main(["corpus", "--print-config", "keys"]) == 0
    assert "keep_fields" in capsys.readouterr().out
    assert main(["corpus", "--print-config", "--keep-fields", "rating"]) == 0
    assert json.loads(capsys.readouterr().out)["keep_fields"] == ["rating"]


def test_the_examples_stage_ignores_the_kept_fields(made, kept, capsys):
    root, jsonl, txt, out = made
    plain = _corpus(capsys, ["--input", str(jsonl), "--input", str(txt), *out])
    rows = []
    for corpus in (kept[0], plain):
        assert main(["vocab", "--corpus", str(corpus), "--set", "vocab_size=400", "--set", "report_baseline=false",
                     *out]) == 0
        vocab = capsys.readouterr().out.strip().splitlines()[-1]
        assert main(["examples", "--corpus", str(corpus), "--vocab", vocab, "--max-seq-length", "32", *out]) == 0
        examples = Path(capsys.readouterr().out.strip().splitlines()[-1])
        rows.append([f.read_bytes() for f in sorted((examples / "data").glob("*"))])
    assert rows[0] == rows[1] and rows[0]


@pytest.mark.parametrize("argv, says", [
    (["--keep-fields", "text"], "'text' is a key of the corpus document itself"),
    (["--keep-fields", "rating,rating"], "'rating' is named twice"),
    (["--keep-fields", "rating", "--format", "text"], "none of the 1 input(s) is read as JSONL"),
    # 3,000 names were taken and printed back as one 38 kB line (issue 43)
    (["--keep-fields", ",".join(f"f{i}" for i in range(3000))], "keep_fields: 3000 fields named, at most 128"),
])
def test_refused_requests_say_why(made, capsys, argv, says):
    root, jsonl, txt, out = made
    assert main(["corpus", "--input", str(jsonl), *argv, *out]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and len(err) < 1000, err[:300]


def test_a_text_input_alone_is_refused(made, capsys):
    root, jsonl, txt, out = made
    assert main(["corpus", "--input", str(txt), "--keep-fields", "rating", *out]) == 2
    err = capsys.readouterr().err
    assert "none of the 1 input(s) is read as JSONL" in err and "--format auto" in err


def test_values_json_cannot_hold_become_null_or_u_fffd_and_count_as_repaired(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_text('{"text": "가나다라마", "rating": NaN, "who": "\\ud800x", "tags": [1, Infinity]}\n', encoding="utf-8")
    [rec] = reader.read_file(str(path), "odd.jsonl", "auto", "text", "id", 1 << 20, keep_fields=("rating", "who", "tags"))
    assert rec["fields"] == (None, "\ufffdx", [1, None]) and rec["repaired"] == record_rules.FIELD_REPAIRED


def test_values_datasets_cannot_hold_are_null_and_counted_and_the_corpus_loads(tmp_path, capsys):
    """An integer outside int64 (anywhere in the value) and a value nested past MAX_FIELD_DEPTH are
    null, like NaN, counted under ``repaired.kept_field`` and ``missing_fields`` (issue 43: one such
    integer made ``datasets.load_dataset`` fail on the whole corpus; 600 levels were an
    ``unreadable_record`` RecursionError, depending on the stack of the step that met it)."""
    from datasets import load_dataset

    deep = reader.MAX_FIELD_DEPTH
    edge = {"r0": 1 << 70, "r1": -(1 << 63) - 1, "r2": 1 << 63, "r3": float("nan"), "r4": float("inf")}
    rows = []
    for i in range(24):
        row = {"id": f"r{i}", "text": _review(i + 1)["text"] + f" 번호{i}", "n": i, "nest": {"a": [i, "x"]}}
        if f"r{i}" in edge:
            row["n"] = edge[f"r{i}"]
        rows.append(json.dumps(row, ensure_ascii=False))  # NaN, Infinity: spelled as Python reads them
    lines = [*rows[:5],
             '{"id": "r5", "text": "%s", "n": %d, "nest": {"a": [5, %d]}}' % (WORDS[0] + " 다섯", (1 << 63) - 1, 1 << 64),
             '{"id": "r6", "text": "%s", "n": %d, "nest": %s}' % (WORDS[1] + " 여섯", -(1 << 63), "[" * 600 + "1" + "]" * 600),
             '{"id": "r7", "text": "%s", "n": 7, "nest": %s}' % (WORDS[2] + " 일곱", "[" * deep + "1" + "]" * deep),
             '{"id": "r8", "text": "%s", "n": 8, "nest": %s}' % (WORDS[3] + " 여덟", "[" * (deep + 1) + "1" + "]" * (deep + 1)),
             *rows[9:]]
    src = tmp_path / "big.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    art = _corpus(capsys, ["--input", str(src), "--keep-fields", "n,nest", "--set", "valid_fraction=0",
                           "--out", str(tmp_path / "store")])
    stats = json.loads((art / "stats.json").read_text(encoding="utf-8"))
    assert stats["rejected"] == 0 and stats["records_out"] == 24
    # r0-r4: n; r5: a nested integer (nest.a[1], the rest kept); r6, r8: nest too deep
    assert stats["repaired"]["kept_field"] == 8 and stats["missing_fields"] == {"n": 5, "nest": 2}
    assert stats["field_kinds"]["n"] == {"integer": 19}
    docs = {d["id"]: d for d in _documents(art)}
    assert docs["r5"]["n"] == (1 << 63) - 1 and docs["r5"]["nest"] == {"a": [5, None]} and docs["r6"]["n"] == -(1 << 63)
    assert docs["r6"]["nest"] is None and docs["r8"]["nest"] is None and docs["r0"]["n"] is None
    assert json.dumps(docs["r7"]["nest"]) == "[" * deep + "1" + "]" * deep
    train = load_dataset(str(art), split="train")
    assert {r["id"]: r["n"] for r in train} == {i: d["n"] for i, d in docs.items()}
    assert {r["id"]: r["nest"] for r in train} == {i: d["nest"] for i, d in docs.items()}
