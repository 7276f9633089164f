"""The settings that bound a fine-tuning run's size are on ``--help`` (issue 46: only ``--print-config
keys`` listed them), and the dev split has a cap of its own, ``max_dev_examples``: ``max_eval_examples``,
the scored file's cap, cut the rows the epoch is chosen on too, silently. Driven through ``kolectra
finetune``: -1 (the default) keeps the old cut and says so; 0 keeps every dev row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kolectra.pipeline.cli import main
from tests.test_finetune_e2e import nsmc_file, tiny_model  # noqa: F401 - tiny_model is a fixture


@pytest.mark.parametrize("task", ["nsmc", "korquad", "classify"])
def test_the_size_settings_are_on_help(task, capsys):
    with pytest.raises(SystemExit):
        main(["finetune", task, "--help"])
    out = capsys.readouterr().out
    assert all(flag in out for flag in ("--epochs N", "--max-train-examples N", "--max-eval-examples N"))
    assert ("--max-dev-examples N" in out) == (task != "korquad")  # KorQuAD's dev file is its scored file


@pytest.mark.parametrize("task", ["nsmc", "korquad", "classify", "regress", "ner"])
def test_the_help_says_which_training_rows_max_train_examples_keeps(task, capsys):
    """It said 'train on the first N rows' for every task; only KorQuAD keeps the file's first (questions):
    the others keep the first N of the seeded shuffle that carves dev, or with --dev a seeded sample
    (test_finetune_tasks::test_max_train_examples_with_a_dev_file_is_a_seeded_sample_not_the_files_first_rows)."""
    with pytest.raises(SystemExit):
        main(["finetune", task, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    said = out[out.index("--max-train-examples N ") + len("--max-train-examples N "):out.index("; 0: all")]
    if task == "korquad":
        assert said == "train on only the training file's first N questions (its first articles')", said
    else:
        assert "first N rows" not in said and "drawn with the seed" in said, said
        assert ("--dev a seeded sample" in said) == (task != "nsmc"), said  # nsmc takes no --dev


def test_max_dev_examples_caps_the_dev_split_apart_from_the_scored_file(tiny_model, tmp_path, capsys):
    train, test = nsmc_file(tmp_path / "train.txt", 100, 0), nsmc_file(tmp_path / "test.txt", 40, 1)
    common = ["finetune", "nsmc", "--model", str(tiny_model), "--train", str(train), "--test", str(test),
              "--preset", "sample", "--set", "max_length=32", "--epochs", "1", "--max-train-examples", "0",
              "--max-eval-examples", "10", "--out", str(tmp_path / "root")]
    assert main(["finetune", "nsmc", "--print-config", "--max-eval-examples", "10", "--max-dev-examples", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["max_eval_examples"], doc["max_dev_examples"]) == (10, 0)

    runs = {}
    for own in (None, "0"):
        assert main(common + (["--max-dev-examples", own] if own else [])) == 0
        captured = capsys.readouterr()
        art = Path(captured.out.strip().splitlines()[-1])
        runs[own] = (json.loads((art / "metrics.json").read_text(encoding="utf-8")), captured.err)
    capped, metrics_capped = runs[None][1], runs[None][0]
    assert metrics_capped["dev_examples"] == 10 and metrics_capped["test_examples"] == 10
    assert "the dev split is cut to its first 10 of 20 rows by max_eval_examples" in capped  # said, not silent
    whole, metrics_whole = runs["0"][1], runs["0"][0]
    assert metrics_whole["dev_examples"] == 20 and metrics_whole["test_examples"] == 10
    assert "the dev split is cut" not in whole
