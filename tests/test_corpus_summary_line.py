"""The corpus job's last line names why records were rejected, as it names why documents were dropped, and
leaves out the reasons that counted nothing. Before: ``corpus: 20050 records -> 19256 documents (189 valid), 40
rejected, dropped 754 {'boilerplate': 0, 'duplicate': 69, ...}`` (an audit on the NSMC reviews with bad lines
planted): the rejects' reasons were in stats.json and rejects.jsonl alone, the drops a Python dict of every
reason, zeros included. A real corpus (Beam, Kiwi) with bad lines planted."""

from __future__ import annotations

import json

from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store
from tests.test_report_funnel import GOOD


def test_the_last_line_names_the_reject_and_drop_reasons_that_counted(tmp_path, capsys):
    lines = [json.dumps({"id": f"g{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(GOOD)]
    lines += ['{"id": "cut", "text": ', '{"id": "cut2", "text": "끝나지 않은', "[1, 2, 3]",
              json.dumps({"id": "same", "text": GOOD[0]}, ensure_ascii=False)]
    raw = tmp_path / "reviews.jsonl"
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stages.corpus(Store(tmp_path / "root"), [str(raw)], sets=["valid_fraction=0", "max_reject_ratio=0.5"])
    said = [ln for ln in capsys.readouterr().err.splitlines() if " records -> " in ln]
    assert said == ["[kolectra] corpus: 10 records -> 6 documents (0 valid), 3 rejected (invalid_json 2, "
                    "not_an_object 1), dropped 1 (duplicate 1)"], said
