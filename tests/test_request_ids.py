"""An artifact's id changes with what decides its bytes and with nothing else: the examples' batching and
their holdout list's path are recorded but not hashed (the list's content is), and a ``--seeds`` summary
is the same artifact whichever way its runs' settings were spelled. Real stages' requests, stand-in
builds (no Beam, no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from tests.model_support import small_chain


@pytest.fixture
def chain(tmp_path):
    store = Store(tmp_path / "root")
    corpus, vocab, _ = small_chain(store, n=8)
    return store, corpus, vocab


def _examples_request(store: Store, corpus, vocab, monkeypatch, sets: list[str]) -> Request:
    asked: list[Request] = []
    monkeypatch.setattr(store, "build", lambda req, produce, force=False, **kw: asked.append(req))
    stages.examples(store, corpus, vocab, sets=sets)
    return asked[0]


def test_the_examples_id_hashes_the_holdout_lists_content_not_its_path_nor_the_batching(chain, tmp_path,
                                                                                        monkeypatch):
    store, corpus, vocab = chain
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "held.txt").write_text("doc-1\ndoc-2\n", encoding="utf-8")
    (tmp_path / "other.txt").write_text("doc-3\n", encoding="utf-8")

    def request(*sets: str) -> Request:
        return _examples_request(store, corpus, vocab, monkeypatch, list(sets))

    here, there = request(f"holdout_ids={tmp_path / 'a' / 'held.txt'}"), request(f"holdout_ids={tmp_path / 'b' / 'held.txt'}")
    assert here.id() == there.id()  # a study's list under another root's spelling: the same examples
    assert here.config["holdout_ids"] == str(tmp_path / "a" / "held.txt")  # recorded as given
    assert request(f"holdout_ids={tmp_path / 'other.txt'}").id() != here.id()  # other documents held out
    plain = request()
    assert plain.id() not in (here.id(), request(f"holdout_ids={tmp_path / 'other.txt'}").id())
    # the batching is the same bytes (tests/test_examples.py), so the same request; the packing is not
    assert request("batch_documents=64").id() == plain.id()
    assert request("batch_documents=64").config["batch_documents"] == 64
    assert request("batch_bytes=65536").id() == plain.id() and "batch_bytes" not in plain.config
    assert request("batch_bytes=65536").config["batch_bytes"] == 65536
    assert request("packing=none").id() != plain.id()


def test_a_seeds_summary_is_the_same_artifact_however_its_settings_were_spelled(tmp_path, monkeypatch):
    store = Store(tmp_path / "root")

    def run(store, task, model_ref, train_file, eval_file, *, preset, sets, seed, name, force, dev_file):
        _, config = stages.resolve("finetune", task=task, preset=preset, sets=sets, seed=seed)

        def produce(out: Path) -> StageOutput:
            (out / "metrics.json").write_text(json.dumps({"accuracy": 0.5 + seed / 100, "accuracy_pct": 50.0 + seed}))
            return StageOutput(stats={})
        return store.build(Request(kind="eval", name="nsmc", stage_version=1, config=config), produce)

    monkeypatch.setattr(stages, "finetune", run)
    toml = tmp_path / "ft.toml"
    toml.write_text("[optim]\nlr = 5e-4\n", encoding="utf-8")
    from kolectra.core.config import read_config_file

    summaries = [stages.finetune_seeds(store, "nsmc", "m", "t", "e", [1, 2], sets=sets)
                 for sets in (["optim.lr=5e-4"], ["optim.lr=0.0005"], read_config_file(toml))]
    assert len({a.id for a in summaries}) == 1
    assert len(store.list("eval")) == 3  # two runs and one summary
    config = summaries[0].manifest["config"]
    assert config["optim"]["lr"] == 5e-4 and config["seeds"] == [1, 2] and "seed" not in config
    assert config["task"] == "nsmc" and config["preset"] == "koelectra"
    assert stages.finetune_seeds(store, "nsmc", "m", "t", "e", [1, 2], sets=["optim.lr=1e-3"]).id != summaries[0].id


def test_the_corpus_id_names_the_unicode_database_its_cleaning_reads(monkeypatch):
    """NFC, the character categories and the symbol filter follow Python's Unicode database: on 3.12
    (15.0) U+1FAE8 is a symbol, on 3.11 (14.0) unassigned, so the same request keeps other documents."""
    import unicodedata

    from kolectra.pipeline.store import manifest

    def corpus_id() -> tuple[str, dict]:
        manifest._version.cache_clear()
        req = Request(kind="corpus", name="c", stage_version=1, config={}, libraries=stages.LIBS_CORPUS)
        return req.id(), manifest.library_versions(stages.LIBS_CORPUS)

    here, libraries = corpus_id()
    assert libraries["unicodedata"] == unicodedata.unidata_version
    monkeypatch.setattr(unicodedata, "unidata_version", "99.0.0")
    other, libraries = corpus_id()
    assert other != here and libraries["unicodedata"] == "99.0.0"
    monkeypatch.undo()
    assert corpus_id()[0] == here
    manifest._version.cache_clear()


class Asked(Exception):
    pass


def test_the_probe_names_the_tokenizers_version_as_fine_tuning_does(tmp_path, monkeypatch):
    store = Store(tmp_path / "root")
    model = tmp_path / "hf"
    model.mkdir()
    (model / "config.json").write_text("{}")
    for f in ("train.txt", "test.txt"):
        (tmp_path / f).write_text("id\tdocument\tlabel\n1\t좋다\t1\n", encoding="utf-8")
    asked: list[Request] = []

    def build(req, produce, force=False, **kw):  # the request is all this test reads: nothing is built
        asked.append(req)
        raise Asked

    monkeypatch.setattr(store, "build", build)
    with pytest.raises(Asked):
        stages.probe(store, str(model), tmp_path / "train.txt", tmp_path / "test.txt")
    assert "tokenizers" in asked[0].libraries and set(stages.LIBS_TORCH) <= set(asked[0].libraries)


@pytest.mark.parametrize("how", ["set", "file"])
def test_a_study_refuses_a_preset_in_its_pretraining_settings_other_than_its_own(tmp_path, capsys, how):
    """``--set preset=small`` (or a reused pretrain.toml) trained small with the steps worked out for
    --preset mini's model (study/runner.py flops_per_step): a budget 10-odd times off, under mini's name."""
    from kolectra.pipeline.cli import main

    toml = tmp_path / "pretrain.toml"
    toml.write_text('preset = "small"\n', encoding="utf-8")
    given = ["--set", "preset=small"] if how == "set" else ["--config", str(toml)]
    argv = ["study", "--examples", "x", "--flops", "1e12", "--nsmc-train", "x", "--out", str(tmp_path / "r")]
    assert main([*argv, *given]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("kolectra study:")]
    assert len(err) == 1 and "give --preset small" in err[0], err
    # the same preset as --preset is no conflict: the study goes on (to find no --examples 'x': its corpus's text
    # rules group the held-out rows, so it is looked up before the --nsmc-train file is read, 23cbb90)
    assert main([*argv, *given, "--preset", "small"]) == 2
    assert "no artifact 'x'" in capsys.readouterr().err


@pytest.mark.parametrize("setting", ["train.steps=5000", " train.warmup_steps=10", "objective.objective=mlm", "seed=3"])
def test_a_study_refuses_a_pretraining_setting_every_run_of_it_overwrites(tmp_path, capsys, setting):
    """The study's own steps, warm-up, objective and seeds came after --set's, which was taken and ignored."""
    from kolectra.pipeline.cli import main

    argv = ["study", "--examples", "x", "--flops", "1e12", "--nsmc-train", "x", "--out", str(tmp_path / "r")]
    assert main([*argv, "--set", setting]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("kolectra study:")]
    key = setting.split("=")[0].strip()
    assert len(err) == 1 and f"{key} is the study's to set" in err[0], err
    assert main([*argv, "--set", "train.cpu_threads=1"]) == 2  # one it leaves alone goes on (to no examples 'x')
    assert "no artifact 'x'" in capsys.readouterr().err


def test_a_study_refuses_to_start_its_arms_and_its_untrained_floor_from_a_model(tmp_path, capsys):
    from kolectra.pipeline.cli import main

    argv = ["study", "--examples", "x", "--flops", "1e12", "--nsmc-train", "x", "--out", str(tmp_path / "r")]
    assert main([*argv, "--set", f"train.init_from={tmp_path}"]) == 2
    assert "train.init_from would start every arm, and the floor reported as untrained" in capsys.readouterr().err


@pytest.mark.parametrize("setting, said", [
    ("optim.lrr=1e-3", "--finetune-set / --finetune-preset: unknown config key 'optim.lrr'"),
    ("epochs=0", "epochs: must be at least 1"),
    ("seed=7", "--finetune-set seed is the study's to set"),
    ("max_train_examples=50", "--finetune-set max_train_examples is the study's to set"),
    ("epochs=2 --finetune-set epochs=3", "--finetune-set epochs is given twice"),
])
def test_a_study_refuses_a_readout_setting_before_anything_is_built(tmp_path, capsys, setting, said):
    """A bad --finetune-set failed at the floor's first readout, after the examples (a Beam job from
    --corpus) and the floor; a key each readout sets itself was taken and ignored."""
    from kolectra.pipeline.cli import main

    argv = ["study", "--examples", "x", "--flops", "1e12", "--nsmc-train", "x", "--out", str(tmp_path / "r")]
    assert main([*argv, "--finetune-set", *setting.split()]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("kolectra study:")]
    assert len(err) == 1 and said in err[0], err


def test_a_readout_setting_goes_on_top_of_the_studys_own(tmp_path, monkeypatch):
    """docs/studies.md's ``--finetune-set dev_fraction=0.2`` replaced the study's max length, batch, 10
    epochs and lr 1e-3 with the preset's (3 epochs at 1e-4: the recipe that left the floor at chance)."""
    from kolectra.pipeline.cli import main
    from kolectra.pipeline.study import runner
    from kolectra.pipeline.study.plan import StudyPlan

    (tmp_path / "report.md").write_text("report\n", encoding="utf-8")
    plans = []
    monkeypatch.setattr(runner, "run_study", lambda store, plan, *a, **k: plans.append(plan) or
                        type("Art", (), {"path": tmp_path, "id": "x"}))
    argv = ["study", "--examples", "x", "--flops", "1e12", "--nsmc-train", "x", "--out", str(tmp_path / "r")]
    main([*argv, "--finetune-set", "dev_fraction=0.2", "--finetune-set", "epochs=4"])
    main(argv)
    assert [p.finetune_sets for p in plans] == [
        ("max_length=64", "batch_size=32", "optim.lr=1e-3", "dev_fraction=0.2", "epochs=4"), StudyPlan.finetune_sets]
