"""A --name given to --seeds runs: every run and their summary carry it, and the name stands for the
summary (m4: 'kolectra report kornli' was refused as ambiguous among the three). Real fine-tuning
runs of a tiny random ELECTRA through the CLI; any other sharing of the name stays refused, saying why."""

from __future__ import annotations

import json
from pathlib import Path

from kolectra.pipeline.cli import main
from tests.test_finetune_e2e import nsmc_file, tiny_model  # noqa: F401 - tiny_model is a fixture

FAST = ["--preset", "sample", "--set", "max_length=32", "--set", "batch_size=16", "--set", "epochs=1"]


def _finetune(tmp_path: Path, model: Path, root: Path, capsys, *extra: str) -> Path:
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    if not train.exists():
        nsmc_file(train, 60, 0), nsmc_file(test, 20, 1)
    assert main(["finetune", "nsmc", "--model", str(model), "--train", str(train), "--test", str(test),
                 "--out", str(root), *FAST, "--name", "kornli", *extra]) == 0
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


def _refusal(capsys, command: str) -> str:
    lines = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln.startswith(f"kolectra {command}: error:")]
    assert len(lines) == 1
    return lines[0]


def test_the_name_of_seeds_runs_stands_for_their_summary_and_each_run_keeps_its_id(tiny_model, tmp_path, capsys):
    root = tmp_path / "root"
    summary = _finetune(tmp_path, tiny_model, root, capsys, "--seeds", "1-2")
    runs = json.loads((summary / "manifest.json").read_text(encoding="utf-8"))["parents"]
    assert len(runs) == 2 and len(list((root / "eval").glob("kornli-*"))) == 3  # one name, three artifacts

    assert main(["report", "kornli", "--out", str(root), "--dest", str(tmp_path / "rep")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(tmp_path / "rep" / "report.md")
    text = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert f"eval `{summary.name}`" in text and "Each figure is the median over 2 seeds (1, 2" in text
    for ref in ("kornli", "eval/kornli"):
        assert main(["artifacts", "show", ref, "--out", str(root), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["id"] == summary.name.rpartition("-")[2]
    for run in runs:  # each run by its id, as before
        assert main(["artifacts", "show", run, "--out", str(root), "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["id"] == run and "seed" in shown["config"]
    assert main(["artifacts", "list", "--kind", "eval", "--out", str(root)]) == 0
    listed = capsys.readouterr().out
    assert all(f"kornli-{r}" in listed for r in runs)

    # a run the summary does not summarise shares the name: refused, saying which one
    other = root.parent / "other"
    assert main(["finetune", "nsmc", "--model", str(tiny_model), "--train", str(tmp_path / "train.txt"), "--test",
                 str(tmp_path / "test.txt"), "--out", str(root), *FAST, "--name", "kornli", "--seed", "7"]) == 0
    lone = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["report", "kornli", "--out", str(root), "--dest", str(other)]) == 2
    line = _refusal(capsys, "report")
    assert "'kornli' is ambiguous: " in line and str(lone) in line and str(summary) in line
    assert line.endswith(f"(a name that one --seeds summary shares with only the runs it summarises stands for the "
                         f"summary; here eval/{lone.name} is not one of the runs eval/{summary.name} summarises)")
    assert not other.exists()


def test_two_seeds_summaries_of_one_name_stay_ambiguous(tiny_model, tmp_path, capsys):
    root = tmp_path / "root"
    two = _finetune(tmp_path, tiny_model, root, capsys, "--seeds", "1-2")
    three = _finetune(tmp_path, tiny_model, root, capsys, "--seeds", "1-3")  # seeds 1 and 2: the same runs
    assert len(list((root / "eval").glob("kornli-*"))) == 5
    assert main(["artifacts", "show", "kornli", "--out", str(root)]) == 2
    line = _refusal(capsys, "artifacts show")
    first, second = sorted([(str(three), "1, 2, 3"), (str(two), "1, 2")])
    assert line.endswith(f"here 2 --seeds summaries share it (eval/{Path(first[0]).name} of seeds {first[1]}; "
                         f"eval/{Path(second[0]).name} of seeds {second[1]}))")
    assert main(["artifacts", "show", three.name.rpartition("-")[2], "--out", str(root)]) == 0  # by id, as ever
