"""A fine-tuning data file that is a FIFO or a folder is named for what it is, in one line, before
anything reads it (issue 43: a FIFO was "not found"; reading one blocks until a writer comes)."""

from __future__ import annotations

import os

import pytest

from kolectra.pipeline.cli import main


@pytest.mark.parametrize("command, kind, expected", [
    (["finetune", "nsmc"], "fifo", "data file is not a regular file (a pipe"),
    (["finetune", "classify"], "fifo", "data file is not a regular file (a pipe"),
    (["finetune", "nsmc"], "folder", "data file is a folder, not a file"),
    (["finetune", "nsmc"], "missing", "data file not found"),
])
def test_a_data_file_that_is_no_file_is_one_line(tmp_path, capsys, command, kind, expected):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    data = tmp_path / "train.txt"
    if kind == "fifo":
        os.mkfifo(data)
    elif kind == "folder":
        data.mkdir()
    argv = [*command, "--model", str(model), "--train", str(data), "--test", str(data), "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1 and expected in err[0] and str(data) in err[0], err


def test_the_probe_refuses_a_fifo_the_same_way(tmp_path):
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.artifacts import ArtifactError, Store

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    os.mkfifo(tmp_path / "train.txt")
    with pytest.raises(ArtifactError, match="probe: data file is not a regular file"):
        stages.probe(Store(tmp_path / "r"), str(model), tmp_path / "train.txt", tmp_path / "train.txt")
