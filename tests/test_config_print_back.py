"""A saved ``--print-config`` reads back as a ``--config`` file, an older kolectra's too: fine-tuning's
holds ``task`` and ``preset`` beside its settings, which ``--config`` refused as unknown keys
(``unknown config key 'task'``), so no saved fine-tuning config loaded. The command's own are
labels and left out; another task or preset is refused in one line naming the file."""

from __future__ import annotations

import json

from kolectra.pipeline.cli import main

FT = ["finetune", "nsmc", "--model", "m", "--train", "a", "--test", "b"]
# what the 2026-11-27 kolectra printed for `kolectra finetune nsmc --print-config` (before reinit_top_layers)
OLD = {"task": "nsmc", "preset": "koelectra", "seed": 42, "device": "cpu", "bf16": False, "cpu_threads": 1,
       "random_init": False, "train_on_eval": False, "max_length": 128, "batch_size": 32, "eval_batch_size": 128,
       "epochs": 10, "optim": {"lr": 5e-05, "weight_decay": 0.0, "adam_eps": 1e-08, "adam_betas": [0.9, 0.999],
                               "warmup_fraction": 0.0, "max_grad_norm": 1.0, "layerwise_lr_decay": 1.0},
       "max_train_examples": 0, "max_eval_examples": 0, "dev_fraction": 0.1, "max_bad_fraction": 0.001}


def _printed(capsys, argv) -> dict:
    assert main([*argv, "--print-config"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_a_saved_finetune_print_config_reads_back_as_the_same_config(tmp_path, capsys):
    printed = _printed(capsys, [*FT, "--set", "optim.lr=3e-5", "--epochs", "2"])
    saved = tmp_path / "nsmc.yaml"  # --print-config's JSON is YAML
    saved.write_text(json.dumps(printed, indent=2), encoding="utf-8")
    assert _printed(capsys, [*FT, "--config", str(saved)]) == printed


def test_an_older_kolectras_finetune_config_loads_with_its_values(tmp_path, capsys):
    saved = tmp_path / "old.yaml"
    saved.write_text(json.dumps({**OLD, "epochs": 4}), encoding="utf-8")
    now = _printed(capsys, [*FT, "--config", str(saved)])
    assert now["epochs"] == 4 and now["task"] == "nsmc" and now["preset"] == "koelectra"


def test_another_task_or_preset_in_the_file_is_refused_naming_it(tmp_path, capsys):
    saved = tmp_path / "old.yaml"
    saved.write_text(json.dumps(OLD), encoding="utf-8")
    assert main(["finetune", "korquad", "--model", "m", "--train", "a", "--dev", "b", "--config", str(saved),
                 "--print-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{saved}: task = 'nsmc', but this command runs 'korquad'" in err[0], err
    assert main([*FT, "--preset", "sample", "--config", str(saved), "--print-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "preset = 'koelectra', but this command runs 'sample' (--preset chooses it)" in err[0]
