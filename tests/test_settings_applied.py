"""A setting does what its name says or is refused: ``preset`` named in a ``--config`` file or a
``--set`` chooses the pretrained model (it used to change only the label: a ``tiny`` model
published as ``mini``), and ``max_seq_length``, which the examples decide, is refused on pretrain
instead of being recorded and ignored. Driven through ``kolectra pretrain`` as a user runs it."""

from __future__ import annotations

import json

import pytest

from kolectra.model.presets import preset
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.model_support import small_chain

MINI = preset("mini").model


def _printed(capsys, argv: list[str]) -> dict:
    assert main(["pretrain", *argv, "--print-config"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("how", ["file", "set"])
def test_a_preset_named_in_a_config_file_or_a_set_chooses_the_model(tmp_path, capsys, how):
    toml = tmp_path / "pretrain.toml"
    toml.write_text('preset = "mini"\n[train]\nlr = 2e-3\n', encoding="utf-8")
    argv = ["--config", str(toml)] if how == "file" else ["--set", "preset=mini", "--set", "train.lr=2e-3"]
    doc = _printed(capsys, argv)
    assert doc["preset"] == "mini" and doc["model"]["hidden"] == MINI.hidden == 128
    assert doc["model"]["layers"] == MINI.layers and doc["train"]["lr"] == 2e-3  # the other keys apply on top
    if how == "set":  # beside --set preset=, --preset gives the key twice: refused, as two --set of it are
        assert main(["pretrain", *argv, "--preset", "tiny", "--print-config"]) == 2
        assert "preset is given twice, by --preset tiny and by --set preset=mini" in capsys.readouterr().err
        return
    # the --preset flag overrides the file, as every flag does, and the label follows the model
    doc = _printed(capsys, [*argv, "--preset", "tiny"])
    assert (doc["preset"], doc["model"]["hidden"]) == ("tiny", preset("tiny").model.hidden)


def test_an_unknown_preset_in_a_config_file_names_the_file(tmp_path, capsys):
    toml = tmp_path / "p.toml"
    toml.write_text('preset = "huge"\n', encoding="utf-8")
    assert main(["pretrain", "--config", str(toml), "--print-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(toml) in err[0] and "unknown preset 'huge'" in err[0] and "mini" in err[0]


def test_max_seq_length_on_pretrain_is_refused_not_recorded_and_ignored(capsys):
    assert main(["pretrain", "--set", "max_seq_length=512", "--print-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_seq_length" in err[0] and "--max-seq-length 512" in err[0]
    # the preset's own value (a config printed by --print-config, fed back) stays accepted
    assert _printed(capsys, ["--preset", "small++", "--set", "max_seq_length=512"])["max_seq_length"] == 512


def test_a_run_with_preset_mini_in_its_config_file_trains_mini(tmp_path, capsys):
    store = Store(tmp_path / "root")
    examples = small_chain(store, n=16)[2]
    toml = tmp_path / "pretrain.toml"
    toml.write_text('preset = "mini"\n[train]\nsteps = 2\nbatch_size = 4\nwarmup_steps = 1\nlog_every = 1\n'
                    'cpu_threads = 1\n', encoding="utf-8")
    assert main(["pretrain", "--examples", str(examples.path), "--out", str(store.root), "--config", str(toml),
                 "-q"]) == 0
    out = capsys.readouterr().out.strip().splitlines()[-1]
    [art] = store.list("checkpoint")
    assert out == str(art.path) and "-mini-" in art.path.name and art.manifest["config"]["preset"] == "mini"
    hf = json.loads((art.path / "hf" / "discriminator" / "config.json").read_text(encoding="utf-8"))
    assert (hf["hidden_size"], hf["num_hidden_layers"]) == (MINI.hidden, MINI.layers)
