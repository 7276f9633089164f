"""A kept field of floats loads bit for bit as ``json.loads`` read it from the input, through
``datasets.load_dataset(<corpus dir>)`` and through kolectra's own reader (``shards.iter_documents``).

``datasets`` re-encodes every line of a JSON file with pandas' ujson when the features hold a
``json`` type (the card's ``morphs`` always is): ten decimals out, an approximate parser in, so
1/3 came back as 0.3333333333, 5e-324 as 0.0 and the largest double as infinity. A field whose
values are all floats is written as strings of their shortest round-trip digits, which the
re-encoding keeps and the card's ``float64`` casts exactly (docs/corpus.md, "Keeping input
fields"). Driven through ``kolectra corpus`` on the real job (Beam in-process, real Kiwi)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kolectra.core import verbosity
from kolectra.corpus import shards
from kolectra.pipeline.cli import main

FLOATS = [1 / 3, 0.1 + 0.2, 1e-300, 123456789.123456789, -2.5e17, 5e-324, 1.7976931348623157e308,
          2.2250738585072014e-308, -0.0, 7.0, 0.7, 2 / 3, 3.141592653589793, -1.0000000000000002, 1e22, 6.02214076e23]


@pytest.fixture(autouse=True)
def _verbosity(monkeypatch):
    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))


def test_kept_floats_load_bit_for_bit_through_datasets_and_kolectra(tmp_path, capsys):
    from datasets import load_dataset

    lines = [json.dumps({"id": f"r{i}", "text": f"영화 정말 재밌었어요 배우 연기 최고 {i}번째 리뷰입니다",
                         "score": f if i != 3 else None, "rating": i}) for i, f in enumerate(FLOATS)]
    src = tmp_path / "reviews.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    want = {r["id"]: r["score"] for r in map(json.loads, lines)}  # what the input says, as Python reads it
    assert main(["corpus", "--input", str(src), "--keep-fields", "score,rating", "--set", "num_shards=1",
                 "--set", "valid_fraction=0", "--out", str(tmp_path / "store")]) == 0
    art = Path(capsys.readouterr().out.strip().splitlines()[-1])

    def bits(scores: dict) -> dict:  # float.hex tells -0.0 from 0.0 and every last bit apart
        return {i: None if s is None else (type(s), s.hex()) for i, s in scores.items()}

    loaded = load_dataset(str(art), split="train")
    assert bits(dict(zip(loaded["id"], loaded["score"]))) == bits(want)
    assert dict(zip(loaded["id"], loaded["rating"])) == {f"r{i}": i for i in range(len(FLOATS))}
    assert bits({d["id"]: d["score"] for d in shards.iter_documents(art)}) == bits(want)
    assert '- name: "score"\n    dtype: float64' in (art / "README.md").read_text(encoding="utf-8")
