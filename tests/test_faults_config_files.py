"""``--config FILE`` that could hang, fill memory or crash the parser (issue 43): a FIFO, a file past
the size cap, a YAML alias bomb or self-referencing anchor, a 5,000-digit integer, 20,000-deep
lists, duplicate YAML keys: each is one line naming the file, exit 2. A TOML file with a UTF-8
byte-order mark is read like one without."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from kolectra.pipeline.cli import main

BOMB = "a: &a [1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 8)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


def _refused(capsys, path, *words: str) -> str:
    assert main(["corpus", "--input", "x", "--config", str(path), "--print-config", "json"]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1 and err[0].startswith(f"kolectra corpus: error: --config {path}: "), err
    assert all(w in err[0] for w in words), err
    return err[0]


@pytest.mark.parametrize("name, text, words", [
    ("bomb.yaml", BOMB, ("aliases", "line 2")),
    ("self.yaml", "min_chars: &x [*x]\n", ("aliases",)),
    ("dup.yaml", "min_chars: 12\nmin_chars: 40\n", ("duplicate key 'min_chars'", "line 2")),
    ("digits.toml", "min_chars = " + "9" * 5000 + "\n", ("4300 digits",)),
    ("digits.yaml", "min_chars: " + "9" * 5000 + "\n", ("4300 digits",)),
    ("deep.toml", "min_chars = " + "[" * 20000 + "]" * 20000 + "\n", ("nested more than",)),
    ("deep.yaml", "min_chars: " + "[" * 20000 + "]" * 20000 + "\n", ("nested more than",)),
    ("mid.toml", "min_chars = " + "[" * 200 + "]" * 200 + "\n", ("nested more than",)),
    ("big.toml", "# padding\n" * 120_000 + "min_chars = 12\n", ("larger than",)),
    ("date.yaml", "keep_fields: [2020-01-01]\n", ()),
    ("utf16.toml", "min_chars = 12\n".encode("utf-16"), ("not UTF-8",)),
])
def test_a_file_the_parser_refuses_or_that_would_blow_up_is_one_line(tmp_path, capsys, name, text, words):
    path = tmp_path / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    _refused(capsys, path, *words)


def test_a_fifo_is_refused_without_being_opened(tmp_path, capsys):
    fifo = tmp_path / "settings.toml"
    os.mkfifo(fifo)
    done = threading.Event()

    def writer():  # if the command opened the FIFO, this gives it an empty file instead of a hang
        while not done.wait(0.05):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                return
            except OSError:  # ENXIO: no reader yet
                continue

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        _refused(capsys, fifo, "not a regular file")
    finally:
        done.set()
        t.join(5)


def test_a_directory_is_refused_in_one_line(tmp_path, capsys):
    _refused(capsys, tmp_path, "not a regular file")


def test_a_toml_file_with_a_byte_order_mark_reads_like_one_without(tmp_path, capsys):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbfmin_chars = 12\n")
    start = time.process_time()
    assert main(["corpus", "--config", str(path), "--print-config", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["min_chars"] == 12
    assert time.process_time() - start < 60  # not a timing claim: a guard against a loop


@pytest.mark.parametrize("flags", [["--keep-fields", ","], ["--keep-fields", "rating,,date"],
                                   ["--set", "keep_fields=rating,"]])
def test_a_list_setting_with_an_empty_item_is_refused_not_read_as_nothing(capsys, flags):
    """``--keep-fields ,`` was taken as no fields at all (issue 43)."""
    assert main(["corpus", *flags, "--print-config", "json"]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1 and "keep_fields: an empty item in" in err[0], err
