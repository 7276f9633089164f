"""Fault injection on fine-tuning's inputs: its tokenised-rows cache edited or cut short, rows the
JSON parser refuses, a pickle in a --model folder, train rows repeated in the scored file, and
seed ranges out of bounds. Real tokenizers and a tiny random ELECTRA; every case through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.test_finetune_e2e import nsmc_file, tiny_model  # noqa: F401 - tiny_model is a fixture

FAST = ["--set", "max_length=32", "--set", "batch_size=16", "--set", "epochs=1"]


def _one_line(err: str, command: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith(f"kolectra {command}:")]
    assert len(lines) == 1, err[-2000:]
    return lines[0]


def _nsmc(tmp_path: Path, model: Path, *extra: str) -> list[str]:
    train = tmp_path / "train.txt" if (tmp_path / "train.txt").exists() else nsmc_file(tmp_path / "train.txt", 60, 0)
    test = tmp_path / "test.txt" if (tmp_path / "test.txt").exists() else nsmc_file(tmp_path / "test.txt", 20, 1)
    return ["finetune", "nsmc", "--model", str(model), "--train", str(train), "--test", str(test),
            "--out", str(tmp_path / "root"), "--preset", "sample", *FAST, *extra]


def _flip_labels(path: Path) -> None:
    """Rewrite a cached split with every label set to 1, as an edit by hand would. Read into memory first: a
    table read from a memory map of the file it then truncates writes from pages past its end (EFAULT or SIGBUS)."""
    table = pa.ipc.open_stream(pa.BufferReader(path.read_bytes())).read_all()
    labels = pa.array([1] * len(table), type=table.schema.field("labels").type)
    table = table.set_column(table.schema.get_field_index("labels"), "labels", labels)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


@pytest.mark.parametrize("damage", ["labels", "truncated"])
def test_a_changed_or_damaged_finetune_cache_is_rebuilt_not_trusted(tiny_model, tmp_path, capsys, damage):
    assert main(_nsmc(tmp_path, tiny_model)) == 0
    clean = json.loads((Store(tmp_path / "root").list("eval")[0].path / "metrics.json").read_text())
    cached = sorted((tmp_path / "root" / ".cache" / "finetune").glob("*.arrow"))
    assert cached
    for c in cached:
        if damage == "labels":
            _flip_labels(c)
        else:
            c.write_bytes(c.read_bytes()[: c.stat().st_size // 2])
    capsys.readouterr()
    assert main(_nsmc(tmp_path, tiny_model, "--force")) == 0
    err = capsys.readouterr().err
    assert err.count("do not match their checksum (changed or damaged); tokenising again") == len(cached)
    again = json.loads((Store(tmp_path / "root").list("eval")[0].path / "metrics.json").read_text())
    assert again["accuracy"] == clean["accuracy"] and again["dev_accuracy"] == clean["dev_accuracy"]
    assert all(Path(f"{c}.sha256").is_file() for c in cached)


def test_a_pickle_in_a_model_folder_is_a_refused_input_exit_2(tiny_model, tmp_path, capsys):
    import shutil

    import torch
    from safetensors.torch import load_file

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    state = load_file(model / "model.safetensors")
    (model / "model.safetensors").unlink()
    torch.save({**state, "payload": Path("x")}, model / "pytorch_model.bin")  # not a tensor: weights_only refuses
    assert main(_nsmc(tmp_path, model)) == 2
    line = _one_line(capsys.readouterr().err, "finetune nsmc")
    assert ": error: " in line and str(model) in line and "pickle" in line and "internal error" not in line
    assert not (tmp_path / "root" / ".logs").exists()


@pytest.mark.parametrize("seeds", ["1-100000000", "1-50,60-200", "0-100"])
def test_a_seed_range_beyond_the_bound_is_refused_before_it_is_expanded(tiny_model, tmp_path, capsys, seeds):
    assert main(_nsmc(tmp_path, tiny_model, "--seeds", seeds)) == 2
    line = _one_line(capsys.readouterr().err, "finetune nsmc")
    assert "more than 100 seeds" in line and seeds in line


def _jsonl(path: Path, n: int, offset: int, hostile: list[str]) -> Path:
    from tests.test_finetune_e2e import NEG, POS

    rows = [json.dumps({"text": (POS if (i + offset) % 2 else NEG)[i % 8], "label": ("pos", "neg")[(i + offset) % 2]},
                       ensure_ascii=False) for i in range(n)]
    path.write_text("\n".join(rows[:5] + hostile + rows[5:]) + "\n", encoding="utf-8")
    return path


HOSTILE = {"huge integer": '{"text": "좋다", "label": ' + "9" * 5000 + "}",
           "deep nesting": '{"text": ' + "[" * 100_000 + "]" * 100_000 + ', "label": "pos"}',
           "deep objects": '{"text": "x", "label": "pos", "m": ' + '{"a": ' * 990 + "1" + "}" * 990 + "}"}


@pytest.mark.parametrize("which", sorted(HOSTILE))
def test_a_row_the_json_parser_refuses_is_a_counted_bad_row(tiny_model, tmp_path, capsys, which):
    train = _jsonl(tmp_path / "train.jsonl", 60, 0, [HOSTILE[which]])
    test = _jsonl(tmp_path / "test.jsonl", 20, 1, [])
    argv = ["finetune", "classify", "--model", str(tiny_model), "--train", str(train), "--test", str(test),
            "--out", str(tmp_path / "root"), *FAST]
    assert main([*argv, "--set", "max_bad_fraction=0.05"]) == 0, capsys.readouterr().err[-2000:]
    metrics = json.loads((Store(tmp_path / "root").list("eval")[0].path / "metrics.json").read_text())
    found = json.dumps(metrics)
    assert '"bad_rows": 1' in found and '"line": 6' in found and "JSON" in found
    assert main(argv) == 2  # the default bound (0.1 %): refused in one line naming the line
    line = _one_line(capsys.readouterr().err, "finetune classify")
    assert "train.jsonl" in line and "internal error" not in line


@pytest.mark.parametrize("which", ["huge integer", "deep nesting"])
def test_a_korquad_file_the_json_parser_refuses_is_refused_in_one_line(tiny_model, tmp_path, capsys, which):
    from tests.test_finetune_e2e import FIXTURE

    bad = tmp_path / "train.json"
    body = "9" * 5000 if which == "huge integer" else "[" * 100_000 + "]" * 100_000
    bad.write_text('{"version": ' + body + ', "data": []}', encoding="utf-8")
    argv = ["finetune", "korquad", "--model", str(tiny_model), "--train", str(bad), "--dev", str(FIXTURE),
            "--out", str(tmp_path / "root"), "--preset", "sample", "--set", "epochs=1"]
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err, "finetune korquad")
    assert f"{bad}: not readable JSON" in line


@pytest.mark.parametrize("copy", ["reordered", "crlf", "nfd and spaces", "some rows"])
def test_scored_rows_found_in_the_training_file_are_counted_and_warned(tiny_model, tmp_path, capsys, monkeypatch,
                                                                      copy):
    import unicodedata

    from kolectra.core import verbosity

    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))  # -q below sets it: restored after the test

    train = tmp_path / "train.txt"  # 60 distinct texts: a copied row matches only its own original
    train.write_text("id\tdocument\tlabel\n" + "".join(f"{100 + i}\t리뷰 번호 {i} 정말 재미있다\t{i % 2}\n"
                                                      for i in range(60)), encoding="utf-8")
    header, *body = train.read_text(encoding="utf-8").splitlines()
    body = body[:20]
    if copy == "reordered":
        text, n = "\n".join([header, *reversed(body)]) + "\n", 20
    elif copy == "crlf":
        text, n = "\r\n".join([header, *body]) + "\r\n", 20
    elif copy == "nfd and spaces":
        text, n = "\n".join([header, *(unicodedata.normalize("NFD", r).replace(" ", "  ") for r in body)]) + "\n", 20
    else:
        text = "\n".join([header, *body[:5], *(f"{7000 + i}\tnever seen in training {i}\t1" for i in range(15))]) + "\n"
        n = 5
    (tmp_path / "test.txt").write_text(text, encoding="utf-8")
    assert main(_nsmc(tmp_path, tiny_model, "-q")) == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "also appear in the training file" in line]
    assert len(warning) == 1 and f"{n} of 20 scored rows ({n / 20:.1%})" in warning[0] and "WARNING" in warning[0]


def test_overlap_with_the_dev_file_names_the_dev_file(tmp_path, capsys):
    """With --dev, the dev rows are read for training too; scored rows found only there were said to
    be in the training file."""
    from kolectra.finetune import classify, skeleton
    from kolectra.finetune.features import rows

    data = skeleton.Data(rows({"text": ["가", "나"]}), rows({"text": ["다", "라"]}), rows({"text": ["다", "마"]}), {})
    said = skeleton.warn_overlap(classify.Classify(tmp_path / "dev.tsv"), data, tmp_path / "train.tsv",
                                 tmp_path / "test.tsv")
    assert len(said) == 1 and f"also appear in the training file {tmp_path / 'train.tsv'} or the dev file " \
                              f"{tmp_path / 'dev.tsv'}" in said[0] and "1 of 2 scored rows" in said[0]
    in_train = skeleton.Data(data.train, data.dev, rows({"text": ["가", "마"]}), {})
    said = skeleton.warn_overlap(classify.Classify(tmp_path / "dev.tsv"), in_train, tmp_path / "train.tsv",
                                 tmp_path / "test.tsv")
    assert "dev file" not in said[0]


def test_dev_file_rows_in_the_training_file_warn(tmp_path):
    """A --dev file sharing rows with the training file chose the epoch on memorised rows, unsaid."""
    from kolectra.finetune import classify, skeleton
    from kolectra.finetune.features import rows

    task = classify.Classify(tmp_path / "dev.tsv")
    data = skeleton.Data(rows({"text": ["가", "나", "다"]}), rows({"text": ["나 ", "라", "마", "바"]}),
                         rows({"text": ["사"]}), {})
    said = skeleton.warn_overlap(task, data, tmp_path / "train.tsv", tmp_path / "test.tsv")
    assert len(said) == 1 and "1 of 4 dev rows (25.0%) also appear in the training file" in said[0]
    clean = skeleton.Data(data.train, rows({"text": ["라", "마"]}), data.test, {})
    assert skeleton.warn_overlap(task, clean, tmp_path / "train.tsv", tmp_path / "test.tsv") == []


def test_the_overlap_checks_normalise_each_row_once(tmp_path, monkeypatch):
    """Test against train+dev, then dev against train (and, with --dev, test against train alone):
    the training rows were normalised and hashed once per check, the checks' main cost on a large file."""
    from kolectra.finetune import classify, leakage, skeleton
    from kolectra.finetune.features import rows

    data = skeleton.Data(rows({"text": ["가", "나", "다"]}), rows({"text": ["나 ", "라"]}), rows({"text": ["가", "사"]}), {})
    real, calls = leakage.text_key, []
    monkeypatch.setattr(leakage, "text_key", lambda row: calls.append(row) or real(row))
    said = skeleton.warn_overlap(classify.Classify(tmp_path / "dev.tsv"), data, tmp_path / "train.tsv",
                                 tmp_path / "test.tsv")
    assert len(said) == 2 and "1 of 2 scored rows" in said[0] and "1 of 2 dev rows" in said[1]
    assert len(calls) == 3 + 2 + 2  # each row of train, dev and test once


def test_no_overlap_no_warning(tiny_model, tmp_path, capsys):
    nsmc_file(tmp_path / "train.txt", 60, 0)
    (tmp_path / "test.txt").write_text("id\tdocument\tlabel\n" + "".join(
        f"{7000 + i}\tnever seen in training {i}\t{i % 2}\n" for i in range(20)), encoding="utf-8")
    assert main(_nsmc(tmp_path, tiny_model)) == 0
    assert "also appear in the training file" not in capsys.readouterr().err


def test_a_dev_split_too_small_to_choose_an_epoch_on_warns(tiny_model, tmp_path, capsys, monkeypatch):
    from kolectra.core import verbosity

    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))  # -q below sets it: restored after the test
    # a 27-row training file (28 with its empty row): the sample preset carves 0.2 of it, 6 rows, and picks the epoch on them
    nsmc_file(tmp_path / "train.txt", 27, 0)
    nsmc_file(tmp_path / "test.txt", 20, 1)
    assert main(_nsmc(tmp_path, tiny_model, "-q")) == 0
    warning = [ln for ln in capsys.readouterr().err.splitlines() if "the epoch is chosen on" in ln]
    assert len(warning) == 1 and "WARNING" in warning[0] and "the epoch is chosen on 6 dev rows" in warning[0]
    assert "raise dev_fraction (now 0.2)" in warning[0]
    stats = Store(tmp_path / "root").list("eval")[0].manifest["stats"]
    assert any("the epoch is chosen on 6 dev rows" in w for w in stats["warnings"])


def test_a_dev_split_of_thirty_rows_or_more_does_not_warn(tiny_model, tmp_path, capsys):
    nsmc_file(tmp_path / "train.txt", 150, 0)  # 0.2 of 150: 30 dev rows
    nsmc_file(tmp_path / "test.txt", 20, 1)
    assert main(_nsmc(tmp_path, tiny_model)) == 0
    assert "the epoch is chosen on" not in capsys.readouterr().err
