"""``kolectra report`` with names someone crafted (issue 27): model folders, input files and
labels holding ``|``, newlines, backticks and ``<script>`` must not move a score under another
task's column, end a table row, break out of a code span or block, or reach the Markdown as HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline import markdown
from kolectra.pipeline.report import render
from kolectra.pipeline.scores import render_table
from kolectra.pipeline.store.artifacts import Store, fingerprint_inputs
from kolectra.pipeline.store.request import Request

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


def test_published_figures_are_rows_of_report_md_in_percent_with_each_split(tmp_path, capsys):
    """Issue 46: ``--published`` printed the published table on the screen only; with eval artifacts it
    joins report.md's score table, the user's rows and theirs in percent, each row saying its split."""
    from kolectra.finetune.korquad import eval_set_label
    from kolectra.pipeline.cli import main
    from kolectra.pipeline.published import ROWS

    store = Store(tmp_path / "store")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    split = {"side": "dev", "seed": 7, "dev_fraction": 0.2, "source": "KorQuAD_v1.0_train.json"}
    shapes = {"nsmc": {"task": "nsmc", "accuracy": 0.8125, "test_examples": 400,
                       "test_file": {"path": "ratings_test.txt", "rows": 50000}},
              "korquad": {"task": "korquad", "exact_match": 41.5, "f1": 60.25, "questions": 96,
                          "dev_file": {"questions": 96}, "eval_set": eval_set_label(Path("dev.json"), {"split": split})}}

    def produce(metrics):
        def write(out: Path) -> StageOutput:
            (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
            return StageOutput(stats={})
        return write

    arts = [store.build(Request(kind="eval", name=task, stage_version=1, config={"task": task},
                                inputs=tuple(fingerprint_inputs([folder]))), produce(m)) for task, m in shapes.items()]
    root = ["--out", str(store.root)]
    assert main(["report", *(a.id for a in arts), "--published", "--dest", str(tmp_path / "t"), *root]) == 0
    report = (tmp_path / "t" / "report.md").read_text(encoding="utf-8")
    rows = {_cells(r)[0].strip(): [c.strip() for c in _cells(r)[1:]] for r in report.splitlines() if r.startswith("| ")}
    assert rows["model"] == ["nsmc (acc)", "korquad (EM / F1)", "split"]
    mine = rows[folder.name]  # the user's row: percent, and what each score was measured on
    assert mine[0] == "81.25 (400 of 50,000 test rows)"
    assert mine[1] == "41.50 / 60.25 (96 dev questions; by-article split, not the official dev set)"
    assert mine[2] == ("nsmc: 400 of 50,000 test rows of ratings_test.txt; "
                       "korquad: 96 dev questions, by-article split, not the official dev set")
    small = rows["KoELECTRA-Small-v3 (published)"]
    koelectra = next(r for r in ROWS if r.model == "KoELECTRA-Small-v3")
    assert small[:2] == [koelectra.nsmc_acc, f"{koelectra.korquad_em} / {koelectra.korquad_f1}"]
    assert "ratings_test.txt, all 50,000 rows" in small[2] and koelectra.source in report
    assert not any(k.startswith("KLUE") for k in rows)  # no figure for these tasks: no row

    # one eval: report.md ends with its row among the published ones
    assert main(["report", arts[1].id, "--published", "--dest", str(tmp_path / "one"), *root]) == 0
    one = (tmp_path / "one" / "report.md").read_text(encoding="utf-8").split("## Against published models", 1)[1]
    assert "| KR-ELECTRA (published) | 84.93 / 93.04 | NSMC: " in one and "| mine | 41.50 / 60.25 (96 dev" in one
    assert one.count("by-article split, not the official dev set") == 2


def test_one_name_on_two_tasks_gives_each_task_its_own_column(tmp_path):
    """``--name x`` on an NSMC and a KorQuAD run: one column headed "x (acc)" put EM / F1 under an
    accuracy header (and, with --published, beside the other task's published figures)."""
    store = Store(tmp_path / "store")
    for i, metrics in enumerate([{"task": "nsmc", "accuracy": 0.8, "test_examples": 500},
                                 {"task": "korquad", "exact_match": 50.0, "f1": 70.0, "questions": 12}]):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"i": i}), encoding="utf-8")

        def produce(out: Path, metrics=metrics) -> StageOutput:
            (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
            return StageOutput(stats={})

        store.build(Request(kind="eval", name="x", stage_version=1, config={"i": i},
                            inputs=tuple(fingerprint_inputs([folder]))), produce)
    _, table = render_table(store, [a.path.name for a in store.list("eval")])
    header = [c.strip() for c in _cells(table.splitlines()[0])]
    assert sorted(header[1:]) == ["x: korquad (EM / F1)", "x: nsmc (acc)"]
    for row in table.splitlines()[2:]:
        cells = dict(zip(header, (c.strip() for c in _cells(row))))
        filled = [h for h in header[1:] if cells[h] != "-"]
        assert filled == (["x: nsmc (acc)"] if cells["model"] == "m0" else ["x: korquad (EM / F1)"])


def test_a_report_of_an_eval_whose_metrics_were_edited_into_no_json_is_one_line(tmp_path, capsys):
    """``kolectra report REF`` reads an eval's metrics.json unverified: a line appended by hand ended with
    'internal error: JSONDecodeError: Extra data' (and a log of the traceback); it is one line naming the
    file and ``kolectra artifacts verify``, exit 2, as a JSON list in its place is."""
    from kolectra.pipeline.cli import main

    store = Store(tmp_path / "root")
    for broken, said in (("x\n", "JSONDecodeError: Extra data"), (None, "a JSON list")):
        art = _eval(store, f"e{len(said)}", [], 0.5)
        metrics = art.path / "metrics.json"
        if broken is None:
            metrics.write_text("[1, 2]", encoding="utf-8")
        else:
            metrics.write_text(metrics.read_text(encoding="utf-8") + broken, encoding="utf-8")
        assert main(["report", art.id, "--out", str(store.root), "--dest", str(tmp_path / art.id), "-q"]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and "internal error" not in err[0], err
        assert err[0].startswith(f"kolectra report: error: {metrics}: not the JSON object it was built as ({said}")
        assert f"kolectra artifacts verify {art.path} names what changed" in err[0], err


def test_a_metrics_log_line_that_is_no_json_names_the_file_and_line(tmp_path):
    """A checkpoint's metrics.jsonl with a line edited into no JSON: ``kolectra report`` of it ended
    'internal error: JSONDecodeError: Expecting value'; core.jsonl.read_lines, which it reads the log
    through, says the file and line in a UserInputError (one line, exit 2 on the command line)."""
    from kolectra.core.errors import UserInputError
    from kolectra.core.jsonl import read_lines

    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1}\n\n{"step": 2}\n{"step": oops\n', encoding="utf-8")
    rows = read_lines(log)
    assert [next(rows), next(rows)] == [{"step": 1}, {"step": 2}]  # a blank line is skipped, as before
    try:
        next(rows)
    except UserInputError as e:
        assert str(e).startswith(f"{log}: line 4 is no JSON (Expecting value)") and "artifacts verify" in str(e)
    else:
        raise AssertionError("a line that is no JSON was read")
