"""``kolectra report`` on a corpus: the filter funnel names each reject reason, as it names each drop
reason (docs/inspecting.md: "records in, each reject and drop reason, records kept"). Before, every
reject was one row, "rejected (malformed input)": a user could not tell a truncated line from a text
that was a number without opening rejects.jsonl, and a document the analyser raised on
(``analysis_failed``) was called malformed input. A real corpus (Beam, Kiwi) with bad lines planted."""

from __future__ import annotations

import json

from kolectra.pipeline import stages
from kolectra.pipeline.report import render
from kolectra.pipeline.store.artifacts import Store

GOOD = ["오늘 본 영화는 정말 재미있었다", "배우들의 연기가 아주 훌륭했어요", "스토리가 조금 지루했지만 괜찮았다",
        "음악이 좋아서 다시 보고 싶은 영화", "결말이 예상과 달라서 놀랐습니다", "가족과 함께 보기 좋은 영화였다"]


def test_the_funnel_names_each_reject_reason_and_still_adds_up(tmp_path):
    lines = [json.dumps({"id": f"g{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(GOOD)]
    lines += ['{"id": "cut", "text": ', '{"id": "cut2", "text": "끝나지 않은', "[1, 2, 3]",
              '{"id": "n", "text": 42}', json.dumps({"id": "same", "text": GOOD[0]}, ensure_ascii=False)]
    raw = tmp_path / "reviews.jsonl"
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = Store(tmp_path / "root")
    corpus = stages.corpus(store, [str(raw)], sets=["valid_fraction=0", "max_reject_ratio=0.5"])
    stats = json.loads((corpus.path / "stats.json").read_text(encoding="utf-8"))
    assert stats["rejected_reasons"]["invalid_json"] == 2 and stats["rejected"] == 4

    md = render(store, corpus.path.name, tmp_path / "report").read_text(encoding="utf-8")
    rows = {r.split(" | ")[0].lstrip("| "): r.split(" | ")[1] for r in md.splitlines()
            if r.startswith("| ") and " | " in r}
    assert rows["rejected: invalid_json"] == "-2"
    assert rows["rejected: not_an_object"] == "-1" and rows["rejected: text_not_string"] == "-1"
    assert rows["dropped: duplicate"] == "-1"
    assert not any("malformed input" in r for r in rows)
    # the rows still add up: records in = each reject + each drop + records out
    steps = [int(v.replace(",", "")) for k, v in rows.items() if k.startswith(("rejected", "dropped"))]
    assert int(rows["records in"]) + sum(steps) == int(rows["**records out**"]) == len(GOOD)


def test_artifacts_show_of_a_corpus_says_how_its_records_add_up(tmp_path, capsys):
    """Its stats line is scalars only: records in and out, and the rejected total, but not the drops (nor
    why any record went), so `records_in = records_out + rejected + sum(dropped)` could not be checked there."""
    from kolectra.pipeline.cli import main

    lines = [json.dumps({"id": f"g{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(GOOD)]
    lines += ['{"id": "cut", "text": ', "[1, 2, 3]", json.dumps({"id": "same", "text": GOOD[0]}, ensure_ascii=False)]
    raw = tmp_path / "reviews.jsonl"
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = Store(tmp_path / "root")
    corpus = stages.corpus(store, [str(raw)], sets=["valid_fraction=0", "max_reject_ratio=0.5"])
    capsys.readouterr()
    assert main(["artifacts", "show", corpus.id, "--out", str(store.root)]) == 0
    said = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  records ")]
    assert said == ["  records   9 in = 6 out + 2 rejected (invalid_json 1, not_an_object 1) + 1 dropped (duplicate 1)"]


def test_a_corpus_that_rejected_nothing_keeps_one_rejected_row(tmp_path):
    raw = tmp_path / "reviews.jsonl"
    raw.write_text("".join(json.dumps({"id": f"g{i}", "text": t}, ensure_ascii=False) + "\n"
                           for i, t in enumerate(GOOD)), encoding="utf-8")
    store = Store(tmp_path / "root")
    corpus = stages.corpus(store, [str(raw)], sets=["valid_fraction=0"])
    md = render(store, corpus.path.name, tmp_path / "report").read_text(encoding="utf-8")
    assert "| rejected | 0 | 0.00% |" in md
