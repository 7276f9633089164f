"""What a reader takes away from ``kolectra report`` and a ``kolectra export`` card must be true: a
small figure is not rounded to 0.0000, an eval's score says how many rows it was measured on and
whether it is a median over seeds, and a card's cut local path stays visible when rendered."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline import markdown
from kolectra.pipeline.hub import no_local_paths
from kolectra.pipeline.report import render
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request


def test_small_figures_keep_their_digits():
    rows = markdown.table(["figure", "value"], [["lr", 1.6667e-05], ["mfu", 0.00049], ["loss", 0.6932], ["zero", 0.0]])
    cells = [r.split(" | ")[1].rstrip(" |") for r in rows[2:]]
    assert cells == ["1.667e-05", "4.900e-04", "0.6932", "0.0000"]


def _eval(store: Store, name: str, metrics: dict):
    def produce(out: Path) -> StageOutput:
        (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
        return StageOutput(stats={})

    return store.build(Request(kind="eval", name=name, stage_version=1, config={"k": name}), produce)


def test_an_eval_report_says_what_its_score_was_measured_on(tmp_path):
    store = Store(tmp_path / "store")
    cut = _eval(store, "cut", {"task": "nsmc", "accuracy": 0.75, "test_examples": 128,
                               "test_file": {"path": "/d/ratings_test.txt", "rows": 50000}})
    report = render(store, cut.path.name, tmp_path / "r1").read_text(encoding="utf-8")
    assert "Scored on 128 of 50,000 test rows." in report
    seeds = _eval(store, "nsmc-seeds", {"task": "nsmc", "seeds": [1, 2, 3], "statistic": "median over seeds",
                                         "accuracy": 0.8, "accuracy_spread": 0.02})
    report = render(store, seeds.path.name, tmp_path / "r2").read_text(encoding="utf-8")
    assert "median over 3 seeds (1, 2, 3" in report and "| accuracy_spread | 0.0200 |" in report


def test_a_cut_local_path_is_no_html_tag_in_the_card():
    out = no_local_paths("| initialised from | /home/me/runs/base/hf |")
    assert out == "| initialised from | [local folder]/hf |"
    assert not re.search(r"<[A-Za-z]", out)  # CommonMark: raw HTML, hidden by the Hub's renderer


def test_an_export_of_an_older_vocabulary_returns_segment_ids(tmp_path):
    """A vocabulary before vocab 8 (SentencePiece's PreTrainedTokenizerFast without model_input_names):
    the exported tokenizer returns token_type_ids, so a pair's second segment is segment 1."""
    from transformers import AutoTokenizer

    from kolectra.pipeline.hub import text_is_data
    from kolectra.vocab.export import write_dir

    write_dir(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "가", "나", "##다"], tmp_path)
    config = tmp_path / "tokenizer_config.json"
    old = json.loads(config.read_text(encoding="utf-8"))
    del old["model_input_names"], old["split_special_tokens"]
    config.write_text(json.dumps(old), encoding="utf-8")
    text_is_data(config)
    pair = AutoTokenizer.from_pretrained(str(tmp_path))("가", "나다")
    assert pair["token_type_ids"] == [0, 0, 0, 1, 1, 1]
    assert json.loads(config.read_text(encoding="utf-8"))["split_special_tokens"] is True
