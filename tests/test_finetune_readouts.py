"""Fair readouts of a checkpoint (issue 44): re-initialised top layers before fine-tuning, and a probe
that reads any layer (or the best one, chosen on dev rows carved from its train rows, never on the
evaluation rows) with mean or [CLS] pooling.  A tiny real ELECTRA directory, real transformers."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from benchmarks.tiny_model import build_tiny_model_dir
from kolectra.core.config import ConfigError
from kolectra.finetune import nsmc, probe
from kolectra.finetune.config import sample_nsmc
from kolectra.finetune.reinit import reinit_top_layers
from tests.test_finetune_e2e import NEG, POS, nsmc_file

LAYERS = 3


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 3-layer discriminator whose every weight is off its initial value (biases non-zero, LayerNorm
    weights not one), so a re-initialised tensor shows whatever its initialiser draws."""
    from transformers import ElectraForPreTraining

    out = build_tiny_model_dir(tmp_path_factory.mktemp("electra3"), POS + NEG, seed=0, hidden=32, layers=LAYERS,
                               heads=2, vocab_size=400, max_position=128)
    model = ElectraForPreTraining.from_pretrained(str(out))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=gen))
    model.save_pretrained(str(out))
    return out


def _classifier(model_dir):
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_pretrained(str(model_dir), num_labels=2)


def test_reinit_draws_exactly_the_top_layers_afresh_from_the_model_initialiser(model_dir):
    model = _classifier(model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    assert reinit_top_layers(model, 1, seed=7) == [LAYERS - 1]
    assert torch.equal(torch.get_rng_state(), rng)  # dropout and the head's draws stay where they were
    after = model.state_dict()
    top = f"electra.encoder.layer.{LAYERS - 1}."
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {k for k, v in before.items() if k.startswith(top) and v.is_floating_point()}
    # the model's own initialiser: normal(0, initializer_range) weights, zero biases, LayerNorm 1 / 0
    std = model.config.initializer_range
    for key in changed:
        value = after[key]
        if "LayerNorm.weight" in key:
            assert torch.equal(value, torch.ones_like(value)), key
        elif key.endswith("bias"):
            assert torch.equal(value, torch.zeros_like(value)), key
        else:
            assert abs(float(value.std()) - std) < 0.25 * std and abs(float(value.mean())) < 0.25 * std, key
    # seeded: the same seed draws the same weights, another seed others
    again, other = _classifier(model_dir), _classifier(model_dir)
    reinit_top_layers(again, 1, seed=7)
    reinit_top_layers(other, 1, seed=8)
    for key in changed:
        assert torch.equal(again.state_dict()[key], after[key])
    assert any(not torch.equal(other.state_dict()[k], after[k]) for k in changed)
    # two layers: the top two and nothing else
    two = _classifier(model_dir)
    reinit_top_layers(two, 2, seed=7)
    moved = {k for k, v in two.state_dict().items() if not torch.equal(v, before[k])}
    assert {k.split(".")[3] for k in moved} == {str(LAYERS - 2), str(LAYERS - 1)}
    assert reinit_top_layers(model, 0, seed=7) == []
    with pytest.raises(ConfigError, match="reinit_top_layers: the model has 3 encoder layers"):
        reinit_top_layers(_classifier(model_dir), LAYERS + 1, seed=7)


def test_the_redrawn_layers_are_independent_of_the_new_head(model_dir):
    from kolectra.finetune.loading import load_model, load_tokenizer
    from kolectra.model import runtime

    # as a run does it: the head drawn from the global generator seeded with the run's seed, then the top
    # layer; a generator seeded with that seed again made the top layer's query matrix the head's dense one
    cfg = dataclasses.replace(sample_nsmc(), seed=7)
    model = load_model("AutoModelForSequenceClassification", model_dir, cfg, runtime.resolve("cpu", False, 1),
                       load_tokenizer(model_dir), num_labels=2)
    reinit_top_layers(model, 1, cfg.seed)
    head = [p.flatten()[:16] for p in model.classifier.parameters() if p.dim() == 2]
    top = [p.flatten()[:16] for p in model.electra.encoder.layer[LAYERS - 1].parameters() if p.dim() == 2]
    assert not any(torch.equal(h, t) for h in head for t in top)


def test_a_finetuning_run_reinitialises_and_records_it_in_its_config(model_dir, tmp_path):
    train, test = nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "test.txt", 12, 1)
    cfg = dataclasses.replace(sample_nsmc(), max_length=32, batch_size=16, epochs=1, max_train_examples=0,
                              max_eval_examples=0)
    nsmc.run(dataclasses.replace(cfg, reinit_top_layers=1), model_dir, train, test, tmp_path / "a")
    nsmc.run(cfg, model_dir, train, test, tmp_path / "b")
    fresh, kept = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in "ab")
    assert fresh["config"]["reinit_top_layers"] == 1 and kept["config"]["reinit_top_layers"] == 0
    assert fresh["epochs"][0]["train_loss"] != kept["epochs"][0]["train_loss"]  # another model was trained
    with pytest.raises(ConfigError, match="reinit_top_layers"):
        nsmc.run(dataclasses.replace(cfg, reinit_top_layers=LAYERS + 1), model_dir, train, test, tmp_path / "c")
    with pytest.raises(ConfigError, match="reinit_top_layers: must be 0"):
        dataclasses.replace(cfg, reinit_top_layers=-1).validate()


def _nsmc(path, rows):
    path.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t{d}\t{y}\n" for i, (d, y) in enumerate(rows)),
                    encoding="utf-8")
    return path


def _probe(cfg, model_dir, train, scored, out):
    out.mkdir()  # the store hands the stage an existing folder
    probe.run(cfg, model_dir, train, scored, out)
    return json.loads((out / "metrics.json").read_text())


def _reviews(n: int, seed: int) -> list[tuple[str, int]]:
    """Two of the test's phrases joined, labelled by the first, a third of the labels flipped: a task
    the layers of a random encoder read differently well."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        pos = bool(rng.integers(2))
        text = f"{(POS if pos else NEG)[rng.integers(8)]} {(POS + NEG)[rng.integers(16)]}"
        out.append((text, int(pos) ^ int(rng.random() < 0.33)))
    return out


def test_the_probe_reads_any_layer_with_mean_or_cls_pooling(model_dir):
    tok, encoder = probe.load_encoder(model_dir)
    texts = [d for d, _ in _reviews(6, 0)]
    x = probe.features(tok, encoder, texts, 32, 4, [0, LAYERS])
    cls = probe.features(tok, encoder, texts, 32, 4, [LAYERS], pooling="cls")
    with torch.no_grad():
        batch = tok(texts, padding=True, return_tensors="pt")
        out = encoder(**batch, output_hidden_states=True)
    mask = batch["attention_mask"].unsqueeze(-1).float()
    for n, layer in enumerate((0, LAYERS)):
        want = (out.hidden_states[layer] * mask).sum(1) / mask.sum(1)
        assert torch.allclose(torch.from_numpy(x[n]), want, atol=1e-5)
    assert torch.allclose(torch.from_numpy(cls[0]), out.last_hidden_state[:, 0], atol=1e-5)
    assert probe.layers_read(probe.ProbeConfig(), LAYERS) == [LAYERS]
    assert probe.layers_read(probe.ProbeConfig(layer="best"), LAYERS) == list(range(LAYERS + 1))
    with pytest.raises(ConfigError, match="layer: the model has 3 layers"):
        probe.layers_read(probe.ProbeConfig(layer="4"), LAYERS)
    for bad in ({"layer": "top"}, {"pooling": "max"}, {"dev_rows": 0}, {"threads": -1}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            probe.ProbeConfig(**bad).validate()


def test_a_probe_longer_than_the_position_table_is_refused_naming_max_length(model_dir, tmp_path):
    train, scored = _nsmc(tmp_path / "train.txt", _reviews(20, 0)), _nsmc(tmp_path / "eval.txt", _reviews(10, 1))
    # the model has 128 positions: a long review failed inside the forward ("The expanded size of the tensor")
    with pytest.raises(ConfigError, match=r"^max_length: 200 is longer than the model's 128 positions"):
        _probe(probe.ProbeConfig(max_length=200), model_dir, train, scored, tmp_path / "out")


def test_a_probe_of_weights_that_do_not_fit_the_encoder_is_refused(model_dir, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    from kolectra.finetune.files import FinetuneError

    renamed = tmp_path / "renamed"
    shutil.copytree(model_dir, renamed)
    weights = load_file(renamed / "model.safetensors")
    save_file({k.replace("electra.", "encoder."): v for k, v in weights.items()}, renamed / "model.safetensors")
    # AutoModel left every weight at its random initialisation and the probe read that encoder, silently
    with pytest.raises(FinetuneError, match=r"encoder weights are missing .*embeddings\..*The probe would read a "
                                            r"randomly initialised encoder$"):
        probe.load_encoder(renamed)
    assert probe.load_encoder(model_dir)[1].training is False  # its own weights: loaded, in eval mode


def test_the_best_layer_is_chosen_on_train_rows_never_on_the_evaluation_rows(model_dir, tmp_path):
    train = _nsmc(tmp_path / "train.txt", _reviews(120, 0))
    rows = _reviews(60, 1)
    scored = _nsmc(tmp_path / "eval.txt", rows)
    flipped = _nsmc(tmp_path / "flipped.txt", [(d, 1 - y) for d, y in rows])
    cfg = probe.ProbeConfig(max_length=32, batch_size=16, layer="best", dev_rows=40, seed=3)
    a, b = _probe(cfg, model_dir, train, scored, tmp_path / "a"), _probe(cfg, model_dir, train, flipped, tmp_path / "b")
    assert len(a["layers_dev_accuracy"]) == LAYERS + 1 and a["dev_examples"] == 40
    # the choice and every layer's dev figure are the same whatever the evaluation rows' labels say
    assert a["layer"] == b["layer"] and a["layers_dev_accuracy"] == b["layers_dev_accuracy"]
    assert a["layer"] == max(range(LAYERS + 1), key=lambda i: (a["layers_dev_accuracy"][i], -i))
    assert a["accuracy"] == pytest.approx(1 - b["accuracy"])  # the same predictions, scored against flipped labels
    # fine-tuning's verdict: no better than always the majority class (or one class for every row) learned nothing
    for m in (a, b):
        f = m["health"]["figures"]
        learned = f["eval_predicted_classes"] > 1 and m["accuracy"] > f["eval_majority_share"]
        assert m["health"]["status"] == ("ok" if learned else "not_learning") and f["eval_accuracy"] == m["accuracy"]
    assert "not_learning" in {a["health"]["status"], b["health"]["status"]}  # one of them is worse than chance
    # a fixed layer reads that layer, and the default is the top one
    c = _probe(dataclasses.replace(cfg, layer="last"), model_dir, train, scored, tmp_path / "c")
    d = _probe(dataclasses.replace(cfg, layer="0", pooling="cls"), model_dir, train, scored, tmp_path / "d")
    assert c["layer"] == LAYERS and d["layer"] == 0 and "layers_dev_accuracy" not in c


def test_a_probe_records_the_compute_every_eval_artifact_does(model_dir, tmp_path):
    """The outside contract's ``compute`` of a compute stage (parameters, FLOPs, wall seconds, device): a probe's
    eval artifact held wall seconds and device alone, so a script summing its evals' FLOPs met a KeyError."""
    from kolectra.model.electra import count_parameters

    train = _nsmc(tmp_path / "train.txt", _reviews(40, 0))
    scored = _nsmc(tmp_path / "eval.txt", _reviews(20, 1))
    cfg = probe.ProbeConfig(max_length=32, batch_size=16)
    (tmp_path / "out").mkdir()
    compute = probe.run(cfg, model_dir, train, scored, tmp_path / "out").compute
    tok, encoder = probe.load_encoder(model_dir)
    tokens = sum(len(ids) for f in (train, scored)
                 for ids in tok([r.document for r in probe.read_nsmc(f).rows], truncation=True, max_length=32)["input_ids"])
    assert compute["parameters"] == count_parameters(encoder) > 0
    assert compute["flops"] == 2 * compute["parameters"] * tokens  # one forward pass a token
    assert compute["wall_seconds"] > 0 and compute["device"] == "cpu"


def test_a_probe_counts_each_files_bad_rows_by_reason(model_dir, tmp_path, capsys):
    """The probe's reader leaves out bad rows within max_bad_fraction (0.1 %), as the nsmc task's does; the task
    records each file's counts, the probe recorded none: rows in could not be told from rows used."""
    rows = _reviews(2000, 0)
    train = tmp_path / "train.txt"
    train.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t{d}\t{y}\n" for i, (d, y) in enumerate(rows))
                     + "x\t좋다\t2\n\n", encoding="utf-8")
    scored = _nsmc(tmp_path / "eval.txt", _reviews(20, 1))
    _probe(probe.ProbeConfig(max_length=16, batch_size=256), model_dir, train, scored, tmp_path / "out")
    m = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    t, e = m["train_file"], m["eval_file"]
    assert t["bad_rows_by_reason"] == {"label_not_0_or_1": 1} and t["rows"] == m["train_examples"] == 2000
    assert t["lines"] == t["rows"] + sum(t["bad_rows_by_reason"].values()) + t["blank_lines"] == 2002
    assert e["bad_rows"] == 0 and e["rows"] == m["eval_examples"] == 20
    assert ("WARNING: probe: train.txt: 1 bad row(s) left out (label_not_0_or_1 1; line 2002: label must be 0 or 1, "
            "got '2'; train_file.bad_rows_by_reason, .bad_lines in metrics.json)") in capsys.readouterr().err
