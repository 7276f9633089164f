"""``kolectra report`` with names someone crafted (issue 27): model folders, input files and
labels holding ``|``, newlines, backticks and ``<script>`` must not move a score under another
task's column, end a table row, break out of a code span or block, or reach the Markdown as HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline import markdown
from kolectra.pipeline.report import render, render_table
from kolectra.pipeline.store.artifacts import Request, Store, fingerprint_inputs

EVIL = ["x | 99.99 | 12.34", "two\nlines | 1", "```\n<script>alert(1)", "back`tick``s", "a\\|b"]


def _eval(store: Store, name: str, inputs, score: float):
    def produce(out: Path) -> StageOutput:
        (out / "metrics.json").write_text(json.dumps({"task": "classify", "accuracy": score}), encoding="utf-8")
        return StageOutput(stats={})

    return store.build(Request(kind="eval", name=name, stage_version=1, config={"k": name, "in": str(inputs)},
                               inputs=tuple(fingerprint_inputs(list(inputs)))), produce)


def _cells(row: str) -> list[str]:
    """A GitHub table row's cells: split on ``|`` not escaped by a backslash."""
    assert row.startswith("| ") and row.endswith(" |"), row
    return re.split(r"(?<!\\)\|", row[1:-1])


def test_crafted_model_folder_names_stay_in_their_cells(tmp_path):
    store = Store(tmp_path / "store")
    for i, evil in enumerate(EVIL):
        folder = tmp_path / f"m{i}" / evil
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"i": i}), encoding="utf-8")
        _eval(store, "topics" if i % 2 else "nli", [folder], 0.5 + i / 100)
    # one model per row; its score must land under its own task's column
    path, table = render_table(store, [a.path.name for a in store.list("eval")])
    report = path.read_text(encoding="utf-8")
    lines = table.splitlines()
    assert len(lines) == 2 + len(EVIL)  # header, rule, one row per model: no row split by a newline
    header = [c.strip() for c in _cells(lines[0])]
    for row in lines[2:]:
        cells = [c.strip() for c in _cells(row)]
        assert len(cells) == len(header), row
        assert sum(c != "-" for c in cells[1:]) == 1, row  # one score, in one column
    assert "<script>" not in report and "&lt;script&gt;" in report


def test_code_spans_and_blocks_cannot_be_closed_from_inside(tmp_path):
    assert markdown.code("a``b") == "```a``b```"
    assert markdown.code("`x`") == "`` `x` ``"
    assert markdown.code("a|b", in_table=True) == "`a\\|b`"
    assert markdown.fenced(["x ```` y"]) == ["`````", "x ```` y", "`````"]
    assert markdown.text("<b>|*x*|\n") == "&lt;b&gt;\\|\\*x\\*\\| "
    # a whole report whose lineage names an input file with a fence and HTML in its name
    store = Store(tmp_path / "store")
    evil = tmp_path / "in```\n<script>x.txt"
    evil.write_text("가\n", encoding="utf-8")
    art = _eval(store, "lineage", [evil], 0.5)
    report = render(store, art.path.name, tmp_path / "r").read_text(encoding="utf-8")
    before, block = report.split("## Lineage\n\n", 1)
    fence, block = block.split("\n", 1)
    inside, after = block.split("\n" + fence + "\n", 1)
    assert set(fence) == {"`"} and len(fence) > 3 and fence not in inside  # the name cannot close the block
    assert "<script>" not in before + after and "in``` <script>x.txt" in inside  # one line in the tree
