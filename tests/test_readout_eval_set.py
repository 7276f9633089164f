"""A study's readouts score held-out rows carved from the NSMC train file: their own eval artifacts say so (metrics.json's
``eval_set``, the results line, the learning curve, ``kolectra report``), where they called them NSMC's test set. A
plain ``finetune nsmc`` keeps its config, id and words."""

from __future__ import annotations

import json

import pytest

from kolectra.pipeline.store.artifacts import ArtifactError, Store
from kolectra.pipeline.study.runner import HELD_OUT
from tests.model_support import small_chain
from tests.test_finetune_e2e import nsmc_file

SETS = ["max_length=32", "epochs=1", "max_train_examples=0", "max_eval_examples=0"]


def test_a_readout_s_eval_artifact_names_its_held_out_rows_not_nsmc_s_test_set(tmp_path, capsys):
    """The study's nsmc readouts wrote 'NSMC test accuracy 81.33% on 300 rows', a learning curve titled 'NSMC: test
    accuracy', and `kolectra report` on them said 'Scored on 300 test rows', for rows carved from the NSMC train file;
    the probe readout's report the same (z6)."""
    from kolectra.pipeline import stages
    from kolectra.pipeline.report import eval_section

    store = Store(tmp_path / "root")
    examples = small_chain(store)[2]
    floor = stages.pretrain(store, examples, preset="tiny", sets=["train.steps=0", "train.warmup_steps=0"], seed=1,
                            name="study-floor")
    train, dev = nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "dev.txt", 20, 1)
    capsys.readouterr()
    held = stages.finetune(store, "nsmc", floor, train, dev, preset="sample", sets=SETS, seed=1, name="study-lowdata",
                           eval_set=HELD_OUT)
    err = capsys.readouterr().err
    metrics = json.loads((held.path / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["eval_set"] == held.manifest["config"]["eval_set"] == HELD_OUT
    n, d = metrics["test_examples"], metrics["dev_examples"]
    assert f"/ {d} dev / {n} held-out rows carved from the NSMC train file (not NSMC's test set)\n" in err
    assert (f"NSMC accuracy {metrics['accuracy_pct']:.2f}% on {n} held-out rows carved from the NSMC train file (not "
            f"NSMC's test set); epoch 1, chosen on {d} dev rows") in err
    assert "test accuracy" not in err and "test rows" not in err
    shown = "\n".join(eval_section(held, tmp_path))
    assert f"Scored on {n} held-out rows carved from the NSMC train file (not NSMC's test set)." in shown

    plain = stages.finetune(store, "nsmc", floor, train, dev, preset="sample", sets=SETS, seed=1, name="study-lowdata")
    assert "NSMC test accuracy" in capsys.readouterr().err and plain.id != held.id
    assert "eval_set" not in plain.manifest["config"]
    assert "eval_set" not in json.loads((plain.path / "metrics.json").read_text(encoding="utf-8"))
    assert f"Scored on {n} test rows." in "\n".join(eval_section(plain, tmp_path))
    with pytest.raises(ArtifactError, match="classify: takes no eval_set"):
        stages.finetune(store, "classify", floor, train, dev, eval_set=HELD_OUT)

    probe = stages.probe(store, floor, train, dev, seed=1, name="study-probe", eval_set=HELD_OUT)
    assert f"on {n} {HELD_OUT} (trained on" in capsys.readouterr().err
    assert json.loads((probe.path / "metrics.json").read_text(encoding="utf-8"))["eval_set"] == HELD_OUT
    assert f"Scored on {n} held-out rows carved from the NSMC train file" in "\n".join(eval_section(probe, tmp_path))


def test_the_learning_curve_of_held_out_rows_is_not_titled_test_accuracy(tmp_path, monkeypatch):
    from kolectra.finetune import report

    monkeypatch.setattr(report, "chart", lambda path, panels, **kw: panels)  # the panels drawn, not the PNG
    metrics = {"epochs": [{"epoch": 1, "train_loss": 0.7, "dev_accuracy": 0.6}], "best_epoch": 1, "accuracy_pct": 61.0}
    top, bottom = report.learning_curve(tmp_path / "c.png", "nsmc", {**metrics, "eval_set": HELD_OUT}, [])
    assert top.title == "NSMC: held-out accuracy 61.00% (not NSMC's test set)"
    assert list(bottom.series) == ["dev accuracy %", "held-out accuracy % (chosen epoch)"]
    top, bottom = report.learning_curve(tmp_path / "c.png", "nsmc", metrics, [])
    assert top.title == "NSMC: test accuracy 61.00%" and "test accuracy % (chosen epoch)" in bottom.series


def test_a_study_asks_its_readouts_to_name_the_held_out_rows(tmp_path, monkeypatch):
    from kolectra.pipeline import stages
    from kolectra.pipeline.study.plan import StudyPlan
    from kolectra.pipeline.study.runner import Splits, read_out

    asked = []

    class Art:
        path = tmp_path

    (tmp_path / "metrics.json").write_text(json.dumps({"accuracy": 0.5, "eval_examples": 7}))
    monkeypatch.setattr(stages, "finetune", lambda *a, **k: asked.append(k.get("eval_set")) or Art())
    monkeypatch.setattr(stages, "probe", lambda *a, **k: asked.append(k.get("eval_set")) or Art())
    train = [tmp_path / "t1.txt"]
    splits = Splits(tmp_path / "dev.txt", frozenset(), {"lowdata": train, "probe": train})
    for readout in ("lowdata", "probe"):
        read_out(None, None, StudyPlan(flops=1e12), splits, readout, 1)
    assert asked == [HELD_OUT, HELD_OUT]
