"""``--config FILE`` on every stage command (issue 28): TOML, or YAML with PyYAML, with the same
dotted keys as ``--set`` (nested tables flatten to them); ``--set`` and the command's flags override
the file; an unknown key or a bad value is one line naming the file, exit 2; the resolved whole is
what the manifest records, so a file and the same ``--set`` flags make the same artifact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kolectra.pipeline.cli import main

TOML = """
# a nested table is the dotted keys: [train] lr is train.lr
[train]
lr = 1e-3
steps = 50
warmup_steps = 5
[model]
dropout = 0.0
"""
YAML = """
train:
  lr: 0.001
  steps: 50
  warmup_steps: 5
model:
  dropout: 0.0
"""


def _config(capsys, argv: list[str]) -> dict:
    assert main(argv + ["--print-config", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _one_line(capsys, command: str) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1 and err[0].startswith(f"kolectra {command}: "), err
    return err[0]


def test_a_toml_or_yaml_file_sets_the_same_keys_and_set_and_flags_override_it(tmp_path, capsys):
    (tmp_path / "p.toml").write_text(TOML, encoding="utf-8")
    (tmp_path / "p.yaml").write_text(YAML, encoding="utf-8")
    toml = _config(capsys, ["pretrain", "--config", str(tmp_path / "p.toml")])
    assert (toml["train"]["lr"], toml["train"]["steps"], toml["model"]["dropout"]) == (1e-3, 50, 0.0)
    assert _config(capsys, ["pretrain", "--config", str(tmp_path / "p.yaml")]) == toml
    flags = _config(capsys, ["pretrain", "--set", "train.lr=1e-3", "--set", "train.steps=50",
                             "--set", "train.warmup_steps=5", "--set", "model.dropout=0"])
    assert flags == toml  # the same resolved config, so the same artifact id
    over = _config(capsys, ["pretrain", "--config", str(tmp_path / "p.toml"), "--set", "train.steps=70",
                            "--save-every", "10"])
    assert over["train"]["steps"] == 70 and over["train"]["save_every"] == 10 and over["train"]["lr"] == 1e-3
    (tmp_path / "n.toml").write_text('max_train_examples = 64\n[optim]\nlr = 3e-5\n', encoding="utf-8")
    nsmc = _config(capsys, ["finetune", "nsmc", "--config", str(tmp_path / "n.toml")])
    assert nsmc["max_train_examples"] == 64 and nsmc["optim"]["lr"] == 3e-5


def test_a_flag_overrides_the_file_and_is_refused_beside_set_on_its_key(tmp_path, capsys):
    (tmp_path / "p.toml").write_text(TOML, encoding="utf-8")
    file = ["pretrain", "--config", str(tmp_path / "p.toml")]
    assert _config(capsys, [*file, "--steps", "60"])["train"]["steps"] == 60  # the flag over the file's
    assert _config(capsys, [*file, "--set", "train.steps=70"])["train"]["steps"] == 70  # --set over the file's
    # the flag and --set on one key: the flag won silently (60), though a key given twice is an error
    assert main([*file, "--steps", "60", "--set", "train.steps=70", "--print-config", "json"]) == 2
    line = _one_line(capsys, "pretrain")
    assert line.endswith("train.steps is given twice, by --steps 60 and by --set train.steps=70: give it once")


@pytest.mark.parametrize("text, expected", [
    ("[train]\nlrr = 1\n", "unknown config key 'train.lrr'"),
    ("[train]\nsteps = \"many\"\n", "train.steps: expected an integer, got 'many'"),
    ("[train\nsteps = 1\n", "not valid TOML"),
    # one key twice, which TOML's own duplicate check does not see (and --set refuses): the last one won
    ('"train.lr" = 1e-3\n[train]\nlr = 2e-3\n', "train.lr is given twice"),
    ("train.lr: 1.0e-3\ntrain:\n  lr: 2.0e-3\n", "train.lr is given twice"),
    ("[objective]\ntemperature = nan\n", "objective.temperature: expected a number, got nan"),
    ("[objective]\ntemperature = inf\n", "objective.temperature: expected a finite number, got inf"),
])
def test_a_bad_file_is_one_line_naming_it_exit_2(tmp_path, capsys, text, expected):
    path = tmp_path / ("bad.yaml" if text.startswith("train.lr:") else "bad.toml")
    path.write_text(text, encoding="utf-8")
    assert main(["pretrain", "--examples", "x", "--config", str(path), "--out", str(tmp_path / "r")]) == 2
    line = _one_line(capsys, "pretrain")
    assert str(path) in line and expected in line
    assert main(["vocab", "--corpus", "x", "--config", str(tmp_path / "none.toml")]) == 2
    line = _one_line(capsys, "vocab")
    assert f"--config {tmp_path / 'none.toml'}: No such file or directory" in line


def test_a_stage_built_from_a_file_records_it_and_is_the_same_request_as_set(tmp_path, capsys, monkeypatch):
    from kolectra.core import verbosity

    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))  # -q below sets it: restored after the test
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({"id": f"d{i}", "text": f"영화가 정말 재미있었다 {i}번째 리뷰입니다."},
                                      ensure_ascii=False) + "\n" for i in range(30)), encoding="utf-8")
    (tmp_path / "c.toml").write_text("min_chars = 12\n", encoding="utf-8")
    root = ["--out", str(tmp_path / "root")]
    assert main(["corpus", "--input", str(raw), "--config", str(tmp_path / "c.toml"), "-q"] + root) == 0
    built = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert json.loads((built / "manifest.json").read_text(encoding="utf-8"))["config"]["min_chars"] == 12
    assert main(["corpus", "--input", str(raw), "--set", "min_chars=12", "-q"] + root) == 0
    assert Path(capsys.readouterr().out.strip().splitlines()[-1]) == built  # found, not rebuilt
