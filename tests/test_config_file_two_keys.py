"""A check relating two settings names where each came from when a ``--config`` file gave one of them.

Before (3c73a90 named the file by the first key a message names): ``model.hidden = 256`` in pretrain.toml with
``--set model.heads=3`` read ``kolectra pretrain: error: pretrain.toml: model.hidden (256) must be divisible by
model.heads (3)``, the bad heads blamed on the file; ``heads = 3`` in the file (hidden the preset's) named no file,
nor did the corpus's ``need 0 <= min_chars <= max_chars`` whatever set them. A check of one key reads as before."""

from __future__ import annotations

from tests.test_config_file_ranges import _error


def test_a_key_from_the_file_and_one_from_set_are_each_named_with_their_source(tmp_path, capsys):
    path = tmp_path / "pretrain.toml"
    path.write_text("[model]\nhidden = 256\n", encoding="utf-8")
    line = _error(capsys, ["pretrain", "--config", str(path), "--set", "model.heads=3"])
    assert line == (f"kolectra pretrain: error: model.hidden from {path}, model.heads from the command line: "
                    "model.hidden (256) must be divisible by model.heads (3)")
    (tmp_path / "c.toml").write_text("min_chars = 50\n", encoding="utf-8")
    line = _error(capsys, ["corpus", "--config", str(tmp_path / "c.toml"), "--set", "max_chars=10"])
    assert line == (f"kolectra corpus: error: min_chars from {tmp_path / 'c.toml'}, max_chars from the command line: "
                    "need 0 <= min_chars <= max_chars, got 50, 10")


def test_the_file_is_named_when_it_gave_the_second_key_or_both(tmp_path, capsys):
    path = tmp_path / "pretrain.toml"
    path.write_text("[model]\nheads = 3\n", encoding="utf-8")
    line = _error(capsys, ["pretrain", "--config", str(path)])
    assert line == f"kolectra pretrain: error: {path}: model.hidden (64) must be divisible by model.heads (3)"
    (tmp_path / "c.toml").write_text("min_chars = 50\nmax_chars = 10\n", encoding="utf-8")
    line = _error(capsys, ["corpus", "--config", str(tmp_path / "c.toml")])
    assert line == f"kolectra corpus: error: {tmp_path / 'c.toml'}: need 0 <= min_chars <= max_chars, got 50, 10"


def test_both_keys_from_set_and_a_one_key_check_naming_another_key_read_as_before(tmp_path, capsys):
    path = tmp_path / "pretrain.toml"
    path.write_text("[model]\nhidden = 128\n", encoding="utf-8")
    line = _error(capsys, ["pretrain", "--config", str(path), "--set", "model.hidden=256", "--set", "model.heads=3"])
    assert line == "kolectra pretrain: error: model.hidden (256) must be divisible by model.heads (3)"
    # keep_fields' own check names text_field in its explanation: the file that set text_field is not blamed
    (tmp_path / "c.toml").write_text('text_field = "body"\n', encoding="utf-8")
    line = _error(capsys, ["corpus", "--config", str(tmp_path / "c.toml"), "--set", "keep_fields=text"])
    assert line.startswith("kolectra corpus: error: keep_fields: 'text' is a key of the corpus document itself")
