"""Fine-tuning on the one training runtime: device placement of HF task models, the tokenisation
cache, threads, progress lines and NSMC's predictions file."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from kolectra.finetune import nsmc, progress
from kolectra.finetune.config import sample_nsmc
from kolectra.model import runtime
from tests.test_finetune_e2e import nsmc_file, tiny_model  # noqa: F401 - tiny_model is a fixture


@pytest.mark.parametrize("auto", ["AutoModelForSequenceClassification", "AutoModelForQuestionAnswering",
                                  "AutoModelForTokenClassification"])
def test_placed_task_models_mask_padding_and_keep_eval_mode(tiny_model, auto):
    """On the CPU, ``place`` swaps in kolectra's dropout and attention; a 2-D padding mask must still
    keep [PAD] out of attention (it used to be dropped: padded rows scored differently)."""
    import transformers

    torch.manual_seed(0)
    model = getattr(transformers, auto).from_pretrained(str(tiny_model)).eval()
    dev = runtime.resolve("cpu")
    try:
        model = dev.place(model)
        assert not any(m.training for m in model.modules())  # swapped dropout modules stay in eval
        ids = torch.tensor([[2, 40, 41, 42, 3, 0, 0, 0], [2, 50, 51, 52, 53, 54, 55, 3]])
        with torch.no_grad():
            padded = model(input_ids=ids, attention_mask=(ids != 0).long())
            alone = model(input_ids=ids[:1, :5])
        for key in ("logits", "start_logits"):
            if key in padded:
                a, b = padded[key][0], alone[key][0]
                if a.dim() and a.shape[0] == 8:  # per token: compare the real tokens
                    a = a[:5]
                torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    finally:
        dev.close()


def small_cfg(**kw):
    return dataclasses.replace(sample_nsmc(), **{"max_length": 32, "batch_size": 16, "epochs": 1,
                                                 "max_train_examples": 0, "max_eval_examples": 0, **kw})


def test_tokenisation_cache_is_reused_and_changes_nothing(tiny_model, tmp_path):
    train, test = nsmc_file(tmp_path / "train.txt", 60, 0), nsmc_file(tmp_path / "test.txt", 20, 1)
    cache = tmp_path / "cache"
    before = torch.get_num_threads()
    plain = nsmc.run(small_cfg(cpu_threads=1), tiny_model, train, test, tmp_path / "a")
    assert plain.compute["torch_threads"] == 1 and torch.get_num_threads() == before  # restored after the run
    nsmc.run(small_cfg(), tiny_model, train, test, tmp_path / "b", cache_dir=cache)
    files = {p: p.stat().st_mtime_ns for p in cache.glob("*.arrow")}
    assert len(files) == 3  # train, dev, test
    nsmc.run(small_cfg(), tiny_model, train, test, tmp_path / "c", cache_dir=cache)
    assert {p: p.stat().st_mtime_ns for p in cache.glob("*.arrow")} == files  # read, not rewritten
    nsmc.run(small_cfg(max_length=24), tiny_model, train, test, tmp_path / "d", cache_dir=cache)
    assert len(list(cache.glob("*.arrow"))) == 6  # another max_length is another encoding
    same = [(tmp_path / d / "metrics.json").read_bytes() for d in "abc"]
    assert same[0] == same[1] == same[2]
    assert (tmp_path / "a" / "predictions.jsonl").read_bytes() == (tmp_path / "c" / "predictions.jsonl").read_bytes()


def test_nsmc_predictions_file_agrees_with_the_accuracy(tiny_model, tmp_path):
    train, test = nsmc_file(tmp_path / "train.txt", 60, 0), nsmc_file(tmp_path / "test.txt", 20, 1)
    out = tmp_path / "out"
    nsmc.run(small_cfg(epochs=2), tiny_model, train, test, out)
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = test.read_text(encoding="utf-8").splitlines()[1:]
    assert [x["id"] for x in lines] == [r.split("\t")[0] for r in rows]
    assert [x["text"] for x in lines] == [r.split("\t")[1] for r in rows]
    assert list(lines[0]) == ["id", "text", "label", "predicted", "probability"]
    assert all(0.5 <= x["probability"] <= 1.0 and x["predicted"] in (0, 1) for x in lines)
    assert np.mean([x["label"] == x["predicted"] for x in lines]) == pytest.approx(metrics["accuracy"])
    assert metrics["health"]["status"] in ("ok", "not_learning") and "dev_majority_share" in metrics["health"]["figures"]


def test_library_bars_are_quiet_without_a_terminal(monkeypatch):
    from datasets.utils import logging as ds_logging
    from transformers.utils import logging as tf_logging

    monkeypatch.setenv("KOLECTRA_PROGRESS", "lines")
    before = [lib.is_progress_bar_enabled() for lib in (ds_logging, tf_logging)]
    with progress.quiet_libraries():
        assert not ds_logging.is_progress_bar_enabled() and not tf_logging.is_progress_bar_enabled()
    assert [lib.is_progress_bar_enabled() for lib in (ds_logging, tf_logging)] == before


def test_epoch_progress_without_a_terminal_is_plain_lines(tiny_model, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KOLECTRA_PROGRESS", "lines")
    train, test = nsmc_file(tmp_path / "train.txt", 400, 0), nsmc_file(tmp_path / "test.txt", 20, 1)
    nsmc.run(small_cfg(batch_size=4), tiny_model, train, test, tmp_path / "out")  # 81 steps: a line at step 50
    err = capsys.readouterr().err
    assert "\r" not in err
    step_lines = [x for x in err.splitlines() if x.startswith("[kolectra] nsmc epoch 1/1 ")]
    assert step_lines and "50/81 [" in step_lines[0] and "step/s] loss " in step_lines[0]
