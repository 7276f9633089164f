"""``--keep-fields`` values load through ``datasets.load_dataset(<corpus dir>)`` as they were written
(issue 46): the strings "00123", "92471", "15.02" and "true" stay strings (``datasets``' ``json``
feature, which the card used to declare, re-read them as 123, 92471, 15.02 and True). The corpus job
counts each kept field's values by JSON kind (``stats.json`` → ``field_kinds``) and the dataset card
declares a field of one kind with its type; mixed and nested fields stay ``json``. Driven through
``kolectra corpus`` on the real job (Beam in-process, real Kiwi)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kolectra.core import verbosity
from kolectra.pipeline.cli import main

CODES = ["00123", "true", "15.02", "92471", "null", "[1]"]  # strings that read as JSON


@pytest.fixture(autouse=True)
def _verbosity(monkeypatch):
    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))


def _row(i: int) -> dict:
    row = {"id": f"r{i}", "text": f"영화 정말 재밌었어요 배우 연기 최고 {i}번째 리뷰입니다",
           "code": CODES[i % len(CODES)], "rating": i % 10, "score": i / 4 + 0.5, "liked": i % 3 == 0,
           "meta": {"tag": "00123", "n": i}, "mixed": [7, "7"][i % 2]}
    if i % 4 == 0:
        row["rating"] = None  # a null beside the integers: still int64, loaded as None
    return row


def test_kept_fields_load_through_datasets_as_they_were_written(tmp_path, capsys):
    from datasets import load_dataset

    rows = [_row(i) for i in range(24)]
    src = tmp_path / "reviews.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert main(["corpus", "--input", str(src), "--keep-fields", "code,rating,score,liked,meta,mixed",
                 "--set", "num_shards=1", "--set", "valid_fraction=0", "--out", str(tmp_path / "store")]) == 0
    art = Path(capsys.readouterr().out.strip().splitlines()[-1])
    stats = json.loads((art / "stats.json").read_text(encoding="utf-8"))
    assert stats["field_kinds"] == {"code": {"string": 24}, "rating": {"integer": 18}, "score": {"number": 24},
                                    "liked": {"boolean": 24}, "meta": {"object": 24},
                                    "mixed": {"integer": 12, "string": 12}}
    assert stats["missing_fields"]["rating"] == 6

    train = load_dataset(str(art), split="train")
    by_id = {r["id"]: r for r in train}
    assert len(by_id) == 24
    for row in rows:
        got = by_id[row["id"]]
        # one kind a field: loaded exactly as written (strings stay strings, nulls null)
        assert [got[k] for k in ("code", "rating", "score", "liked", "meta")] == \
               [row[k] for k in ("code", "rating", "score", "liked", "meta")]
        assert type(got["code"]) is str and type(got["liked"]) is bool
    card = (art / "README.md").read_text(encoding="utf-8")
    assert '- name: "code"\n    dtype: string' in card and '- name: "mixed"\n    dtype: json' in card
    assert '- name: "rating"\n    dtype: int64' in card and '- name: "score"\n    dtype: float64' in card
