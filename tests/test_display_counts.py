"""Counts a user reads get thousands separators, and no Python dict: the vocab stage's line ("vocab: 79203
documents, ..."), ``python -m kolectra.vocab.table``'s first line and ``kolectra report``'s vocab section
("(249879 eojeols)"), and the corpus job's closing lines (kept fields missing and repairs printed as
``{'rating': 3}``). Display only: no artifact byte changes. Real functions on real stats; the report's on a real
vocab artifact's report.json."""

from __future__ import annotations

import json
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.corpus.job_checks import summary
from kolectra.pipeline.report import vocab_section
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from kolectra.vocab.table import format_report

REPORT = {"split": "valid", "documents": 30308, "eojeols": 249879, "chosen": "morph_wordpiece",
          "recipes": {"morph_wordpiece": {"learning": {"vocab_size": 35000}, "unk_rate": 0.0002,
                                          "tokens_per_eojeol": 2.1, "chars_per_token": 1.4,
                                          "morph_boundary_share": 0.772, "words_kept_whole": 0.5}}}


def test_the_vocab_table_and_the_reports_vocab_section_separate_thousands(tmp_path):
    table = format_report(REPORT).splitlines()
    assert table[0] == "vocab report on valid (30,308 documents, 249,879 eojeols)"
    assert "35,000" in next(ln for ln in table if ln.startswith("vocab size"))
    assert format_report({**REPORT, "documents": None}).splitlines()[0].startswith("vocab report on valid (None ")

    def produce(out: Path) -> StageOutput:
        (out / "report.json").write_text(json.dumps(REPORT), encoding="utf-8")
        return StageOutput(stats={})

    art = Store(tmp_path / "root").build(Request(kind="vocab", name="v", stage_version=1, config={}), produce)
    assert vocab_section(art, tmp_path)[0].startswith("Measured on the `valid` split (249,879 eojeols); ")


def test_the_corpus_jobs_closing_lines_separate_thousands_and_print_no_dict(capsys):
    stats = {"records_in": 82801, "records_out": 80022, "rejected": 0, "rejected_reasons": {},
             "dropped": {"too_short": 2021, "duplicate": 755, "empty": 3, "boilerplate": 0},
             "splits": {"valid": {"documents": 819}}, "duplicate_id_different_text": 1200,
             "missing_fields": {"rating": 1500, "date": 0}, "repaired": {"mojibake": 1234, "nul": 0},
             "near_dup": {"star_only_buckets": 1001, "star_only_documents": 45000, "unconverged_nodes": 2000}}
    summary(stats, [("a.jsonl", "cut short")], rounds=8)
    err = capsys.readouterr().err
    assert "corpus: 82,801 records -> 80,022 documents (819 valid), 0 rejected, dropped 2,779" in err
    assert "corpus: 1,200 kept document(s) share their id" in err
    assert "corpus: documents without a kept field (written as null) rating 1,500 of 80,022 " in err
    assert "corpus: repaired and kept (mojibake 1,234)" in err
    assert "near-dup: 1,001 band bucket(s)" in err and "(45,000 in all" in err and "near-dup: 2,000 document(s)" in err
    assert "corpus: damaged input a.jsonl (accepted by max_damaged_files): cut short" in err
    assert "{" not in err, err
