"""A data file's bad rows left out are recorded in the eval's ``stats.warnings``, so ``artifacts show``, ``kolectra
report`` (its Health section, and beside the score: ``test file: N bad rows left out``) and ``kolectra run``'s summary
say them. Before, the line was on stderr alone: a report of a score on a test file short of rows read as one on the
whole file. Real fine-tunes through ``kolectra finetune`` (a tiny random ELECTRA, 1 epoch) and the probe. KorQuAD's
training questions left out (their first answer not at its ``answer_start``) are recorded the same way (korquad 13)."""

from __future__ import annotations

import json
from pathlib import Path

from kolectra.finetune.files import scored_file_losses
from kolectra.pipeline.cli import main
from kolectra.pipeline.run import warning_lines
from kolectra.pipeline.store.artifacts import Store
from tests.test_finetune_bad_rows_by_reason import model, write  # noqa: F401 - the fixture
from tests.test_finetune_e2e import FIXTURE, tiny_model  # noqa: F401 - tiny_model is a fixture


def finetune(model, store: Path, train: Path, test: Path, name: str, capsys, *more: str) -> Path:
    argv = ["-q", "finetune", "classify", "--model", str(model), "--train", str(train), "--test", str(test),
            "--preset", "sample", "--set", "epochs=1", "--set", "max_length=16", "--set", "max_bad_fraction=0.2",
            "--name", name, "--out", str(store), *more]
    assert main(argv) == 0
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_test_files_bad_rows_are_in_the_manifest_the_report_and_the_summary(model, tmp_path, capsys):
    train = write(tmp_path / "train.tsv", "text\tlabel\n" + "".join(f"문장 {i} 좋다\tpos\n문장 {i} 싫다\tneg\n"
                                                                    for i in range(20)))
    rows = "text\tlabel\n" + "".join(f"서울 {i} 좋다\tpos\n부산 {i} 싫다\tneg\n" for i in range(10))
    dirty = write(tmp_path / "test.tsv", rows + "빈 라벨\t\n" * 2 + "칸이\t셋\t있다\n")
    clean = write(tmp_path / "clean.tsv", rows)
    store = tmp_path / "store"
    bad, good = finetune(model, store, train, dirty, "dirty", capsys), finetune(model, store, train, clean, "clean", capsys)

    line = ("classify: test.tsv: 3 bad row(s) left out (empty_label 2, wrong_column_count 1; lines 22, 23: empty label; "
            "line 24: ")
    # the tiny model's other warnings (a small dev split, text its tokenizer has no piece for) come after it
    recorded = [w for w in json.loads((bad / "manifest.json").read_text(encoding="utf-8"))["stats"]["warnings"]
                if "bad row" in w]
    assert len(recorded) == 1 and recorded[0].startswith(line), recorded
    assert recorded[0].endswith("test_file.bad_rows_by_reason, .bad_lines in metrics.json)")
    # a clean file adds none (and the train file, clean too, none)
    assert not [w for w in json.loads((good / "manifest.json").read_text(encoding="utf-8"))["stats"].get("warnings", [])
                if "bad row" in w]

    assert main(["artifacts", "show", bad.name, "--out", str(store)]) == 0
    assert f"  warning   {recorded[0]}" in capsys.readouterr().out.splitlines()

    # kolectra run's summary lists every warning its evals recorded
    s = Store(store)
    arts = [s.resolve(bad.name), s.resolve(good.name)]
    assert [w for w in warning_lines(s, arts, None) if "bad row" in w] == [f"  eval dirty: {recorded[0]}"]

    # one eval's report: beside the test size, and in the Health section
    assert main(["report", bad.name, "--out", str(store), "--dest", str(tmp_path / "one")]) == 0
    md = (tmp_path / "one" / "report.md").read_text(encoding="utf-8")
    assert "Scored on 20 test rows (**test file: 3 bad rows left out**)." in md
    health = md.split("## Health")[1].split("\n## ")[0]
    assert "  - WARNING: classify: test.tsv: 3 bad row(s) left out (empty_label 2" in health

    # a table of scores: the dirty file's cell says it, the clean one's does not
    assert main(["report", bad.name, good.name, "--out", str(store), "--dest", str(tmp_path / "table")]) == 0
    capsys.readouterr()
    lines = (tmp_path / "table" / "report.md").read_text(encoding="utf-8").splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("| model"))
    columns, row = ([c.strip() for c in lines[j].strip("|").split("|")] for j in (at, at + 2))
    cells = {c.split(" ")[0]: v for c, v in zip(columns, row)}
    # (1 epoch of a tiny random model learns nothing: its health flag follows)
    assert "(20 test rows; test file: 3 bad rows left out; " in cells["dirty"], cells
    assert "(20 test rows; " in cells["clean"] and "bad row" not in cells["clean"], cells


def test_the_probe_records_its_eval_files_bad_rows(model, tmp_path):
    """The probe's reader leaves out up to 0.1% of a file's rows: one bad row of 1,001."""
    from kolectra.finetune import probe  # noqa: PLC0415

    rows = [f"{i}\t리뷰 {i} {'좋다' if i % 2 else '싫다'}\t{i % 2}\n" for i in range(1000)]
    train = write(tmp_path / "train.txt", "id\tdocument\tlabel\n" + "".join(rows[:40]))
    scored = write(tmp_path / "eval.txt", "id\tdocument\tlabel\n" + "".join(rows) + "x\t리뷰\t2\n")
    (out := tmp_path / "out").mkdir()
    stats = probe.run(probe.ProbeConfig(max_length=16, batch_size=256), model, train, scored, out).stats
    assert stats["warnings"] == ["probe: eval.txt: 1 bad row(s) left out (label_not_0_or_1 1; line 1002: label must be "
                                 "0 or 1, got '2'; eval_file.bad_rows_by_reason, .bad_lines in metrics.json)"]
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert scored_file_losses(m) == "eval file: 1 bad row left out"
    assert scored_file_losses({**m, "eval_file": {**m["eval_file"], "bad_rows": 0}}) == ""


def test_korquads_training_questions_left_out_are_in_the_manifest(tiny_model, tmp_path, capsys):  # noqa: F811
    """Before 2026-12-02 (korquad 12) the line was on stderr alone; a run that leaves none out records none."""
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    doc["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 3  # the answer sits 3 before it
    train = write(tmp_path / "train.json", json.dumps(doc, ensure_ascii=False))
    store, sets = tmp_path / "store", ["--preset", "sample", "--set", "epochs=1", "--set", "max_length=64",
                                       "--set", "doc_stride=32", "--set", "max_query_length=24",
                                       "--set", "max_train_examples=12", "--set", "max_eval_examples=12"]

    def korquad(train: Path, name: str, *more: str) -> tuple[list[str], str]:
        assert main(["-q", "finetune", "korquad", "--model", str(tiny_model), "--train", str(train), "--dev",
                     str(FIXTURE), *sets, *more, "--name", name, "--out", str(store)]) == 0
        captured = capsys.readouterr()
        art = Path(captured.out.strip().splitlines()[-1])
        manifest = json.loads((art / "manifest.json").read_text(encoding="utf-8"))
        return manifest["stats"].get("warnings", []), captured.err

    warnings, err = korquad(train, "left-out")
    line = (f"korquad: 1 training question(s) whose first answer is not at its answer_start are left out of training "
            f"({train}; train_questions_left_out)")
    recorded = [w for w in warnings if "left out of training" in w]
    assert len(recorded) == 1 and recorded[0].startswith(line), warnings
    assert f"[kolectra] WARNING: {recorded[0]}" in err.splitlines()  # the stderr line's words
    assert main(["artifacts", "show", "left-out", "--out", str(store)]) == 0
    assert f"  warning   {recorded[0]}" in capsys.readouterr().out.splitlines()

    clean, err = korquad(FIXTURE, "clean", "--set", "train_on_eval=true")
    assert not [w for w in clean if "left out of training" in w] and "left out of training" not in err, clean


def test_a_seeds_summary_records_its_runs_warnings_with_how_many_seeds_had_them(model, tmp_path, capsys):
    """A ``--seeds`` summary's manifest records each distinct warning of its runs once (summary 4; before 2026-12-02
    none), so ``artifacts show SUMMARY`` lists them; a line one run had and another did not says so."""
    from kolectra.finetune.seeds import seed_warnings  # noqa: PLC0415

    train = write(tmp_path / "train.tsv", "text\tlabel\n" + "".join(f"문장 {i} 좋다\tpos\n문장 {i} 싫다\tneg\n"
                                                                    for i in range(20)))
    rows = "text\tlabel\n" + "".join(f"서울 {i} 좋다\tpos\n부산 {i} 싫다\tneg\n" for i in range(10))
    dirty, clean = write(tmp_path / "test.tsv", rows + "빈 라벨\t\n" * 2), write(tmp_path / "clean.tsv", rows)
    store = tmp_path / "store"
    bad = finetune(model, store, train, dirty, "dirty", capsys, "--seeds", "1,2")
    good = finetune(model, store, train, clean, "clean", capsys, "--seeds", "1,2")

    summary = json.loads((bad / "manifest.json").read_text(encoding="utf-8"))
    assert "statistic" in summary["stats"]  # the summary, not a run
    where = json.loads((bad / "seeds.json").read_text(encoding="utf-8"))["runs"]  # {"1": "eval/dirty-ID", ...}
    runs = [json.loads((store / where[s] / "manifest.json").read_text(encoding="utf-8"))["stats"]["warnings"]
            for s in ("1", "2")]
    line = next(w for w in runs[0] if "bad row" in w)
    assert line.startswith("classify: test.tsv: 2 bad row(s) left out (empty_label 2") and all(line in r for r in runs)
    assert f"in 2 of 2 seeds: {line}" in summary["stats"]["warnings"]
    # every run's warning is there once, and nothing else
    assert sorted(summary["stats"]["warnings"]) == sorted(seed_warnings(dict(enumerate(runs))))
    assert main(["artifacts", "show", bad.name, "--out", str(store)]) == 0
    assert f"  warning   in 2 of 2 seeds: {line}" in capsys.readouterr().out.splitlines()
    assert not [w for w in json.loads((good / "manifest.json").read_text(encoding="utf-8"))["stats"].get("warnings", [])
                if "bad row" in w]

    # the counting: a line in one seed of two, a line twice in one run counted once, the seeds' order of first saying
    assert seed_warnings({2: ["b", "a"], 1: ["a", "a"]}) == ["in 2 of 2 seeds: a", "in 1 of 2 seeds: b"]
    assert seed_warnings({1: [], 2: []}) == []
