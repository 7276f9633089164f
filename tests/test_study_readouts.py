"""A study's readout recipes (issue 44): several read the same checkpoints and rows side by side, each
with its own floor, and the pretraining points are trained once whatever the recipes."""

import json

import pytest

from kolectra.core.config import ConfigError
from kolectra.pipeline.run import SAMPLE
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.study.plan import StudyPlan, readout_recipe
from kolectra.pipeline.study.runner import run_study
from tests.model_support import small_chain


def test_recipes_read_as_a_readout_and_its_settings():
    assert readout_recipe("probe") == ("probe", [])
    assert readout_recipe("probe-best-layer") == ("probe", ["layer=best"])
    assert readout_recipe("probe-layer2-cls") == ("probe", ["layer=2", "pooling=cls"])
    assert readout_recipe("lowdata-reinit1") == ("lowdata", ["reinit_top_layers=1"])
    assert readout_recipe("finetune-reinit2-nodecay") == ("finetune", ["reinit_top_layers=2",
                                                                       "optim.layerwise_lr_decay=1.0"])
    for bad, said in (("probe-reinit1", "applies to lowdata, finetune only"), ("lowdata-best-layer", "probe only"),
                      ("lowdata-fast", "cannot read '-fast'"), ("regress", "unknown readout")):
        with pytest.raises(ConfigError, match=said):
            readout_recipe(bad)
    # refused before any point is trained: a layer the preset lacks, a recipe twice
    with pytest.raises(ConfigError, match="the mini model has 4 layers"):
        StudyPlan(flops=1e12, readouts=("probe", "lowdata-reinit5")).validate()
    with pytest.raises(ConfigError, match="distinct"):
        StudyPlan(flops=1e12, readouts=("probe", "probe")).validate()


def test_report_names_the_low_data_recipe_with_its_layerwise_decay():
    from kolectra.pipeline.study.report import recipe_text

    plan = {"finetune_preset": StudyPlan.finetune_preset, "finetune_sets": StudyPlan.finetune_sets}
    said = recipe_text("lowdata", plan)
    assert "lr 0.001" in said and "layer-wise LR decay 0.8" in said and "re-initialised" not in said
    assert "top 1 encoder layer(s) re-initialised" in recipe_text("lowdata-reinit1", plan)
    assert "layer-wise LR decay 1" in recipe_text("lowdata-nodecay", plan)
    assert "the best layer, chosen on dev rows" in recipe_text("probe-best-layer", plan)


def test_two_recipes_share_every_pretraining_point_and_each_has_its_floor(tmp_path):
    store = Store(tmp_path / "store")
    _, _, examples = small_chain(store, n=64, seq_len=32)
    small = ["model.hidden=32", "model.intermediate=64", "model.embedding_size=32", "model.generator_hidden=16",
             "model.generator_intermediate=32", "train.batch_size=4"]
    plan = StudyPlan(flops=4e9, points=1, preset="tiny", arms=("electra",), pretrain_seeds=1, finetune_seeds=1,
                     readouts=("probe", "probe-best-layer"), pretrain_sets=tuple(small), dev_rows=60, probe_rows=80,
                     bootstrap=50)
    study = run_study(store, plan, SAMPLE / "nsmc_train.txt", examples_ref=examples.id)
    doc = json.loads((study.path / "study.json").read_text())
    # counted: one checkpoint per (arm or floor, budget, pretraining seed), read by both recipes
    checkpoints = store.list("checkpoint")
    assert len(checkpoints) == (1 + len(plan.arms) * plan.points) * plan.pretrain_seeds == 2
    points = doc["points"] + doc["floor_points"]
    assert sorted(p["checkpoint"] for p in points) == sorted(c.id for c in checkpoints)
    assert all(set(p["readouts"]) == {"probe", "probe-best-layer"} for p in points)
    assert set(doc["floor"]) == {"probe", "probe-best-layer"} and all(len(v) == 1 for v in doc["floor"].values())
    probes = [json.loads((a.path / "metrics.json").read_text()) | {"inputs": a.manifest["inputs"]}
              for a in store.list("eval")]
    assert len(probes) == 2 * len(checkpoints)  # each checkpoint read once by each recipe
    assert sorted(p["config"]["layer"] for p in probes) == ["best", "best", "last", "last"]
    # the same training and evaluation rows for both recipes
    assert len({json.dumps(p["inputs"][-2:], sort_keys=True) for p in probes}) == 1
    assert {c["readout"] for c in doc["comparisons"]} == {"probe", "probe-best-layer"}
    report = (study.path / "report.md").read_text()
    assert "## Verdicts, recipe by recipe" in report
    assert "`probe`: linear probe (frozen encoder): the top layer, mean pooling" in report
    assert "`probe-best-layer`: linear probe (frozen encoder): the best layer" in report


def test_the_summary_says_when_recipes_name_different_winners():
    from kolectra.pipeline.study.report import verdicts_by_recipe

    def cmp(readout: str, verdict: str, diff: float) -> dict:
        return {"a": "electra", "b": "mlm", "flops": 7.2e13, "readout": readout, "verdict": verdict,
                "diff": diff, "ci95": [diff - 0.01, diff + 0.01]}

    below = "no winner named: electra is below the random-init floor, mlm is above the random-init floor"
    split = verdicts_by_recipe({"comparisons": [cmp("lowdata", below, -0.1), cmp("lowdata-reinit1", "mlm ahead of electra", -0.03),
                                                cmp("probe", "electra ahead of mlm", 0.02)]})
    said = [ln for ln in split if "recipes disagree" in ln]
    assert said == ["  **The recipes disagree:** `lowdata` names no winner, `lowdata-reinit1` names mlm, "
                    "`probe` names electra; each verdict holds for its own recipe only."]
    partly = verdicts_by_recipe({"comparisons": [cmp("lowdata", below, -0.1), cmp("probe", "mlm ahead of electra", -0.05)]})
    assert [ln for ln in partly if "recipe" in ln and "**" in ln] == [
        "  **Not every recipe names a winner:** `lowdata` names no winner, `probe` names mlm; each verdict holds "
        "for its own recipe only."]
    agree = verdicts_by_recipe({"comparisons": [cmp("lowdata", "mlm ahead of electra", -0.1),
                                                cmp("lowdata-reinit1", "mlm ahead of electra", -0.03)]})
    assert not [ln for ln in agree if "disagree" in ln]


def test_a_budget_under_half_a_step_is_refused_before_anything_trains(tmp_path):
    """round() gave such an arm 0 steps, raised to 1: a step over twice the budget, under "equal FLOPs"."""
    store = Store(tmp_path / "store")
    _, _, examples = small_chain(store, n=64, seq_len=32)
    small = ["model.hidden=32", "model.intermediate=64", "model.embedding_size=32", "model.generator_hidden=16",
             "model.generator_intermediate=32", "train.batch_size=4"]
    plan = StudyPlan(flops=1e7, points=1, preset="tiny", arms=("mlm", "electra"), pretrain_seeds=1, finetune_seeds=1,
                     readouts=("probe",), pretrain_sets=tuple(small), dev_rows=60, probe_rows=80, bootstrap=50)
    with pytest.raises(ConfigError, match=r"a step of electra takes 2\.\d+e\+07 FLOPs, more than twice the smallest budget"):
        run_study(store, plan, SAMPLE / "nsmc_train.txt", examples_ref=examples.id)
    assert store.list("checkpoint") == []


def test_a_study_point_that_diverges_names_the_point_and_no_way_out_the_study_refuses(tmp_path):
    """A point whose pretraining diverged ended the study with the trainer's line, 'loss is NaN at step 16 ...;
    lower train.lr or lengthen train.warmup_steps', naming no arm, budget or seed (under -q no progress line says
    which point was training), and its second way out is refused by the study (it sets the warm-up)."""
    from kolectra.core.errors import KolectraError
    from kolectra.pipeline.study.runner import pretrain_point

    store = Store(tmp_path / "root")
    small_chain(store)
    examples = store.list("examples")[0]
    plan = StudyPlan(flops=1e9, points=1, preset="tiny", arms=("electra",),
                     pretrain_sets=("train.batch_size=8", "train.lr=1e6", "train.cpu_threads=1"))
    with pytest.raises(KolectraError) as e:
        pretrain_point(store, examples, plan, "electra", 1e9, 2)
    said = str(e.value)
    assert said.startswith("study: electra at 1e+09 FLOPs, pretraining seed 2: loss is NaN at step "), said
    assert "warmup_steps" not in said and "lower train.lr" in said and "leave electra out of --arms" in said


def test_recipe_headings_give_the_max_length_each_readout_read():
    """report.md's recipe headings gave the optimizer settings but not the max length the readout read (the probe
    128 tokens, low-data fine-tuning the study's 64), so a reader could not tell a score came from truncated rows."""
    from kolectra.pipeline.study.report import recipe_text

    plan = {"finetune_preset": StudyPlan.finetune_preset, "finetune_sets": StudyPlan.finetune_sets}
    assert recipe_text("lowdata", plan).endswith(", max length 64 tokens")
    assert recipe_text("lowdata-reinit1", plan).endswith("re-initialised, max length 64 tokens")
    assert recipe_text("probe", plan) == "linear probe (frozen encoder): the top layer, mean pooling, max length 128 tokens"


def test_each_readout_s_score_is_printed_as_the_held_out_rows_it_is_not_nsmc_s_test_set(tmp_path, monkeypatch, capsys):
    """A study's readouts printed only the stage's own words, `NSMC test accuracy 81.33% on 300 rows`, for the
    study's held-out rows carved from the NSMC train file: quoted as an NSMC test figure, which it is not. Each
    readout's score is now printed under its right name, also when the readout was built before (nothing else said)."""
    from kolectra.pipeline import stages
    from kolectra.pipeline.study.runner import Splits, read_out

    class Art:
        path = tmp_path

    (tmp_path / "metrics.json").write_text(json.dumps({"accuracy": 0.8133, "health": {"status": "ok"}}))
    (tmp_path / "predictions.jsonl").write_text('{"label": 1, "predicted": 1}\n{"label": 0, "predicted": 1}\n'
                                                '{"label": 0, "predicted": 0}\n')
    monkeypatch.setattr(stages, "finetune", lambda *a, **k: Art())
    monkeypatch.setattr(stages, "probe", lambda *a, **k: Art())
    train = [tmp_path / "t1.txt", tmp_path / "t2.txt"]
    splits = Splits(tmp_path / "dev.txt", frozenset(), {"lowdata": train, "probe": train})
    read_out(None, None, StudyPlan(flops=1e12), splits, "lowdata-reinit1", 2)
    said = capsys.readouterr().err
    assert ("study: lowdata-reinit1, fine-tuning seed 2: held-out accuracy 81.33% on the study's 3 held-out rows "
            "(carved from the NSMC train file, not NSMC's test set)") in said
    (tmp_path / "predictions.jsonl").unlink()
    (tmp_path / "metrics.json").write_text(json.dumps({"accuracy": 0.5, "eval_examples": 7}))
    read_out(None, None, StudyPlan(flops=1e12), splits, "probe", 1)
    assert "study: probe, fine-tuning seed 1: held-out accuracy 50.00% on the study's 7 held-out rows" in \
        capsys.readouterr().err


def test_an_artifacts_report_of_a_study_names_its_held_out_rows(tmp_path):
    """`kolectra report` on a study showed differences of accuracy without saying on what rows: a reader took them
    for NSMC test figures. It now names the study's held-out rows (a study.json without them: nothing said)."""
    from types import SimpleNamespace

    from kolectra.pipeline.report import study_section

    cmp = {"readout": "probe", "flops": 1e12, "a": "electra", "b": "mlm", "diff": 0.02, "ci95": [0.01, 0.03],
           "seed_t95": None, "verdict": "no winner"}
    (tmp_path / "study.json").write_text(json.dumps({"holdout": {"dev_rows": 300}, "comparisons": [cmp]}))
    shown = "\n".join(study_section(SimpleNamespace(path=tmp_path), tmp_path))
    assert ("Accuracies on the study's 300 held-out rows, carved from the NSMC train file (not NSMC's test set)"
            in shown)
    (tmp_path / "study.json").write_text(json.dumps({"comparisons": [cmp]}))
    assert "held-out rows" not in "\n".join(study_section(SimpleNamespace(path=tmp_path), tmp_path))
