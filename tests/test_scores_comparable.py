"""What the score table says of scores it puts side by side: a column whose rows were scored on different files
(another test file of the same size: both cells read ``500 test rows``) names each score's file and warns that they
are not comparable; a ``--seeds`` summary's cell carries the train/test overlap its runs recorded, as a single run's
cell does. Before 2026-12-02 neither was said (a walk of two checkpoints on the embedded sample: 54.40 on
nsmc_test.txt beside 49.60 on another file of 500 rows, and 'median of 3 seeds' with no overlap where each run had
warned of 0.4-0.6%)."""

from __future__ import annotations

import json
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline.scores import score_table
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request

OVERLAP = ("nsmc: {n} of 500 scored rows ({p}) of test.txt also appear in the training file train.txt (same text after "
           "NFC and whitespace normalisation): the score overstates what the model learned; remove them from one of "
           "the files")


def _model(store: Store, name: str):
    def produce(out: Path) -> StageOutput:
        (out / "weights.txt").write_text(name, encoding="utf-8")
        return StageOutput(stats={})

    return store.build(Request(kind="checkpoint", name=name, stage_version=1, config={"m": name}), produce)


def _eval(store: Store, name: str, config: dict, metrics: dict, parents=(), files=(), warnings=()):
    def produce(out: Path) -> StageOutput:
        (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
        return StageOutput(stats={"warnings": list(warnings)} if warnings else {})

    inputs = tuple({"path": f"/data/{f}", "bytes": 10, "sha256": sha * 8} for f, sha in files)
    return store.build(Request(kind="eval", name=name, stage_version=1, config=config, parents=tuple(parents),
                               inputs=inputs), produce)


def _rows(lines: list[str]) -> dict[str, str]:
    return {ln.split(" | ")[0].lstrip("| "): ln for ln in lines[2:]}


def test_a_column_scored_on_different_files_names_each_file_and_warns(tmp_path, capsys):
    store = Store(tmp_path / "root")
    a, b = _model(store, "a"), _model(store, "b")
    metrics = {"task": "nsmc", "accuracy": 0.5, "test_examples": 500, "test_file": {"rows": 500}}
    same = [_eval(store, "nsmc", {"task": "nsmc", "seed": 1}, metrics, (m,),
                  (("train.txt", "11111111"), ("test.txt", "22222222"))) for m in (a, b)]
    lines, _ = score_table(store, same)
    assert "on " not in "\n".join(lines) and "different files" not in capsys.readouterr().err  # one file: as before

    other = _eval(store, "nsmc", {"task": "nsmc", "seed": 2}, metrics, (b,),
                  (("train.txt", "11111111"), ("my_test.txt", "33333333")))
    lines, _ = score_table(store, [same[0], other])
    rows = _rows(lines)
    assert rows[f"checkpoint/{a.path.name}"].endswith("| 50.00 (500 test rows; on test.txt@22222222) |"), lines
    assert rows[f"checkpoint/{b.path.name}"].endswith("| 50.00 (500 test rows; on my_test.txt@33333333) |"), lines
    err = capsys.readouterr().err
    assert ("the scores of nsmc were measured on different files (my_test.txt@33333333, test.txt@22222222): "
            "not comparable across its rows") in err


def test_a_seeds_summary_carries_its_runs_overlap_with_the_files_they_scored(tmp_path, capsys):
    store = Store(tmp_path / "root")
    a = _model(store, "a")
    files = (("train.txt", "11111111"), ("test.txt", "22222222"))
    run = {"task": "nsmc", "accuracy": 0.5, "test_examples": 500, "test_file": {"rows": 500}}
    runs = [_eval(store, "nsmc", {"task": "nsmc", "seed": s}, run, (a,), files,
                  [OVERLAP.format(n=n, p=p)] if n else []) for s, n, p in ((1, 2, "0.4%"), (2, 3, "0.6%"), (3, 0, ""))]
    summary = _eval(store, "nsmc-seeds", {"task": "nsmc", "seeds": [1, 2, 3]},
                    {"task": "nsmc", "seeds": [1, 2, 3], "statistic": "median over seeds", "accuracy": 0.5}, runs)
    lines, _ = score_table(store, [summary])
    assert lines[2].endswith("| 50.00 (median of 3 seeds) (500 test rows; 0.4-0.6% of test rows in training "
                             "(in 2 of 3 seeds)) |"), lines

    single = _eval(store, "one", {"task": "nsmc", "seed": 9}, run, (a,), files, [OVERLAP.format(n=5, p="1.0%")])
    lines, _ = score_table(store, [single])
    assert lines[2].endswith("| 50.00 (500 test rows; 1.0% of test rows in training) |"), lines  # as before
    assert "different files" not in capsys.readouterr().err


def test_a_test_score_no_better_than_the_majority_class_is_said_where_the_health_check_passed(tmp_path):
    """The health check reads the dev split: a run 1 point over its dev majority passed as ``ok`` and scored 49.60 on a
    test file of 53.4% one class, a cell with nothing beside it before 2026-12-02."""
    store = Store(tmp_path / "root")
    a, b = _model(store, "a"), _model(store, "b")
    test_file = {"rows": 500, "labels": {"0": 233, "1": 267}}
    ok = {"status": "ok"}
    low = _eval(store, "nsmc", {"task": "nsmc", "seed": 1},
                {"task": "nsmc", "accuracy": 0.496, "test_examples": 500, "test_file": test_file, "health": ok}, (a,))
    high = _eval(store, "nsmc", {"task": "nsmc", "seed": 1},
                 {"task": "nsmc", "accuracy": 0.544, "test_examples": 500, "test_file": test_file, "health": ok}, (b,))
    rows = _rows(score_table(store, [low, high])[0])
    assert rows[f"checkpoint/{a.path.name}"].endswith(
        "| 49.60 (500 test rows; no better than always answering the majority class (53.4%)) |"), rows
    assert rows[f"checkpoint/{b.path.name}"].endswith("| 54.40 (500 test rows) |"), rows

    # a failed health check says it already; a score on the first N rows has no label counts of its own
    failed = _eval(store, "nsmc", {"task": "nsmc", "seed": 2},
                   {"task": "nsmc", "accuracy": 0.496, "test_examples": 500, "test_file": test_file,
                    "health": {"status": "not_learning"}}, (a,))
    cut = _eval(store, "nsmc", {"task": "nsmc", "seed": 2},
                {"task": "nsmc", "accuracy": 0.4, "test_examples": 100, "test_file": test_file, "health": ok}, (b,))
    rows = _rows(score_table(store, [failed, cut])[0])
    assert rows[f"checkpoint/{a.path.name}"].endswith("| 49.60 (500 test rows; learned nothing) |"), rows
    assert rows[f"checkpoint/{b.path.name}"].endswith("| 40.00 (100 of 500 test rows) |"), rows


def test_a_column_fine_tuned_with_different_settings_says_each_scores_values_and_warns(tmp_path, capsys):
    """``--set epochs=1`` beside another model's 2 under one name: the difference across the rows is not the models'
    alone. The seed (and a --seeds summary's seeds), threads and the eval batch do not count."""
    store = Store(tmp_path / "root")
    a, b = _model(store, "a"), _model(store, "b")
    metrics = {"task": "nsmc", "accuracy": 0.5, "test_examples": 500, "test_file": {"rows": 500}}
    recipe = {"task": "nsmc", "preset": "sample", "epochs": 2, "optim": {"lr": 5e-4}, "cpu_threads": 1}
    same = [_eval(store, "nsmc", {**recipe, "seed": s, "cpu_threads": t}, metrics, (m,))
            for m, s, t in ((a, 1, 1), (b, 2, 0))]
    score_table(store, same)
    assert "different settings" not in capsys.readouterr().err

    other = _eval(store, "nsmc", {**recipe, "epochs": 1, "optim": {"lr": 1e-3}, "seed": 2}, metrics, (b,))
    rows = _rows(score_table(store, [same[0], other])[0])
    assert rows[f"checkpoint/{a.path.name}"].endswith("| 50.00 (500 test rows; epochs=2, optim.lr=0.0005) |"), rows
    assert rows[f"checkpoint/{b.path.name}"].endswith("| 50.00 (500 test rows; epochs=1, optim.lr=0.001) |"), rows
    assert ("the scores of nsmc were fine-tuned with different settings (epochs, optim.lr): a difference across its "
            "rows is not the models' alone") in capsys.readouterr().err
