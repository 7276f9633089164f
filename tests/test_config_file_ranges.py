"""A value out of range in a ``--config`` file is refused naming the file, as a value of the wrong type is.

Before: ``[objective] mask_prob = 1.5`` in pretrain.toml read ``kolectra pretrain: error: objective.mask_prob:
must be in (0, 1), got 1.5``, the file unsaid, while ``lr = "abc"`` read ``pretrain.toml: train.lr: expected a
number``. A value a later ``--set`` gave is the command line's, and reads as before."""

from __future__ import annotations

from kolectra.pipeline.cli import main


def _error(capsys, argv: list[str]) -> str:
    assert main(argv + ["--print-config", "json"]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1, err
    return err[0]


def test_an_out_of_range_value_from_the_file_names_the_file(tmp_path, capsys):
    path = tmp_path / "pretrain.toml"
    path.write_text("[objective]\nmask_prob = 1.5\n[train]\nlr = 1e-3\n", encoding="utf-8")
    line = _error(capsys, ["pretrain", "--config", str(path)])
    assert line == f"kolectra pretrain: error: {path}: objective.mask_prob: must be in (0, 1), got 1.5"


def test_the_same_value_from_set_reads_as_before(tmp_path, capsys):
    path = tmp_path / "pretrain.toml"
    path.write_text("[objective]\nmask_prob = 0.2\n", encoding="utf-8")
    line = _error(capsys, ["pretrain", "--config", str(path), "--set", "objective.mask_prob=1.5"])
    assert line == "kolectra pretrain: error: objective.mask_prob: must be in (0, 1), got 1.5"
    (tmp_path / "v.toml").write_text("[train]\nlog_every = 0\n", encoding="utf-8")
    assert _error(capsys, ["pretrain", "--config", str(tmp_path / "v.toml")]).endswith(
        "v.toml: train.log_every: must be >= 1, got 0")


def test_zero_steps_by_set_is_not_told_to_add_the_flag_beside_it(tmp_path, capsys):
    """``--set train.steps=0`` was refused with '(e.g. --steps 600)': the flag beside that --set is refused in its
    turn as a key given twice (a579cb4). The line says to give it once, where the 0 was."""
    assert main(["pretrain", "--examples", "absent", "--out", str(tmp_path), "--set", "train.steps=0"]) == 2
    err = capsys.readouterr().err
    assert "train.steps: 0 would publish the random initialisation" in err
    assert "where the 0 was given (e.g. --steps 600, or --set train.steps=600; not both" in err
