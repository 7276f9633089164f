"""``artifacts show`` of a corpus whose manifest holds a reason count that is not a whole number (a root from
elsewhere, a manifest edited by hand) ended in ``internal error: TypeError: bad operand type for unary -: 'str'``:
its records line sorted every count before it left out those that are not numbers. The line's reasons are now
core/words.py's ``reasons``, shared with the corpus stage's own summary line; such a count is left out."""

from __future__ import annotations

import json

from kolectra.core.words import reasons
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store
from tests.test_report_funnel import GOOD


def test_a_reason_count_that_is_not_a_number_is_left_out_of_the_records_line(tmp_path, capsys):
    from kolectra.pipeline.cli import main

    lines = [json.dumps({"id": f"g{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(GOOD)]
    lines += ['{"id": "cut", "text": ', "[1, 2, 3]", json.dumps({"id": "same", "text": GOOD[0]}, ensure_ascii=False)]
    raw = tmp_path / "reviews.jsonl"
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = Store(tmp_path / "root")
    corpus = stages.corpus(store, [str(raw)], sets=["valid_fraction=0", "max_reject_ratio=0.5"])
    path = corpus.path / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["stats"]["rejected_reasons"]["invalid_json"] = "many"
    manifest["stats"]["dropped"]["near_duplicate"] = None
    path.write_text(json.dumps(manifest), encoding="utf-8")
    capsys.readouterr()
    assert main(["artifacts", "show", corpus.id, "--out", str(store.root)]) == 0
    said = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  records ")]
    assert said == ["  records   9 in = 6 out + 2 rejected (not_an_object 1) + 1 dropped (duplicate 1)"]


def test_the_reasons_said_are_those_that_counted_most_first_then_by_name():
    assert reasons({"b": 1, "a": 1, "c": 0, "d": 3}) == " (d 3, a 1, b 1)"
    assert reasons({"a": 0}) == reasons({}) == reasons(None) == ""
    assert reasons({"a": 1_234_567}) == " (a 1,234,567)"
