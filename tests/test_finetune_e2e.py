"""End to end: a tiny random ELECTRA fine-tuned on NSMC rows and on the KorQuAD-format fixture."""

import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks.tiny_model import build_tiny_model_dir
from kolectra.core.plot import PALETTE
from kolectra.finetune import korquad, nsmc
from kolectra.finetune.config import OptimConfig, sample_korquad, sample_nsmc
from tests.test_plot import decode_png

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "pipeline" / "sample" / "korquad_sample.json"

# Original short reviews written for this test (positive = 1, negative = 0).
POS = ["정말 재미있는 영화", "배우들 연기가 최고", "감동적인 이야기 추천", "또 보고 싶은 영화", "음악이 아름답다",
       "웃기고 따뜻한 영화", "완벽한 결말 최고", "가족과 보기 좋은 영화"]
NEG = ["너무 지루한 영화", "시간 낭비 최악", "연기가 어색하다", "돈이 아까운 영화", "줄거리가 엉망",
       "다시는 안 본다 최악", "졸린 전개 실망", "억지 감동 별로"]


def nsmc_file(path: Path, n: int, offset: int) -> Path:
    lines = ["id\tdocument\tlabel"]
    for i in range(n):
        pos = (i + offset) % 2 == 0
        pool = POS if pos else NEG
        # a row number makes every text its own (the dev split keeps repeated texts on one side), and a
        # test file's texts are not the training file's: the score measures the sentiment words, not recall
        doc = f"{pool[(i * 3 + offset) % len(pool)]} {offset * 1000 + i}"
        lines.append(f"{1000 + offset * 1000 + i}\t{doc}\t{int(pos)}")
    lines.append(f"{9999 + offset}\t\t1")  # an empty document is kept and counted
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    paras = [p for a in doc["data"] for p in a["paragraphs"]]
    texts = [p["context"] for p in paras] + [q["question"] for p in paras for q in p["qas"]] + POS + NEG
    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-electra"), texts, seed=0,
                                hidden=32, layers=2, heads=2, vocab_size=800, max_position=128)


def test_tiny_model_dir_loads_like_a_checkpoint(tiny_model):
    from transformers import AutoTokenizer

    names = {p.name for p in tiny_model.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    assert [tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id] == [0, 1, 2, 3, 4]


def test_nsmc_end_to_end_learns_and_is_deterministic(tiny_model, tmp_path):
    train = nsmc_file(tmp_path / "train.txt", 160, 0)
    test = nsmc_file(tmp_path / "test.txt", 40, 1)
    cfg = dataclasses.replace(sample_nsmc(), max_length=32, batch_size=16, epochs=3, dev_fraction=0.2,
                              max_train_examples=0, max_eval_examples=0,
                              optim=OptimConfig(lr=1e-2, warmup_fraction=0.1, layerwise_lr_decay=0.9))
    outs = []
    for k in range(2):
        out = tmp_path / f"out{k}"
        out.mkdir()
        result = nsmc.run(cfg, tiny_model, train, test, out)
        outs.append((out / "metrics.json").read_bytes())
    assert outs[0] == outs[1]  # same inputs + seed -> same bytes on CPU
    m = json.loads(outs[0])
    assert 0.0 <= m["accuracy"] <= 1.0 and m["accuracy_pct"] == pytest.approx(100 * m["accuracy"])
    assert m["accuracy"] >= 0.9  # the toy reviews are separable; a broken label path is ~0.5
    assert [e["epoch"] for e in m["epochs"]] == [1, 2, 3]
    assert all(0.0 <= e["dev_accuracy"] <= 1.0 for e in m["epochs"])
    assert m["dev_accuracy"] == max(e["dev_accuracy"] for e in m["epochs"])
    assert m["epochs"][m["best_epoch"] - 1]["dev_accuracy"] == m["dev_accuracy"]
    assert m["train_examples"] + m["dev_examples"] == 161 and m["test_examples"] == 41
    assert m["train_file"]["empty_documents"] == 1 and m["test_file"]["bad_rows"] == 0
    assert result.stats["accuracy"] == m["accuracy"]
    c = result.compute
    assert c["parameters"] > 0 and c["device"] == "cpu" and c["train_examples"] == m["train_examples"]
    assert c["wall_seconds"] > 0 and c["flops"] > 0
    check_learning_curve(tmp_path / "out0", m)
    assert (tmp_path / "out0" / "learning_curve.png").read_bytes() == (tmp_path / "out1" / "learning_curve.png").read_bytes()


def check_learning_curve(out: Path, m: dict) -> None:
    curve = json.loads((out / "learning_curve.json").read_text(encoding="utf-8"))
    steps = [p["step"] for p in curve["train_loss"]]
    assert steps == sorted(steps) and steps[-1] == curve["steps_per_epoch"] * len(m["epochs"])
    assert all(p["train_loss"] > 0 for p in curve["train_loss"]) and curve["epochs"] == m["epochs"]
    w, h, rows = decode_png((out / "learning_curve.png").read_bytes())
    assert (w, h) == (640, 600)
    top = sum(1 for r in rows[:300] for px in r if px == PALETTE[0])
    bottom = sum(1 for r in rows[300:] for px in r if px == PALETTE[0])
    assert top > 100 and bottom > 100  # the loss curve in the upper panel, the dev metric below


def test_korquad_end_to_end_overfits_fixture_and_is_deterministic(tiny_model, tmp_path):
    cfg = dataclasses.replace(sample_korquad(), max_length=64, doc_stride=32, max_query_length=24,
                              batch_size=16, epochs=8, max_train_examples=12, max_eval_examples=12,
                              optim=OptimConfig(lr=5e-3, warmup_fraction=0.1), train_on_eval=True)
    outs = []
    for k in range(2):
        out = tmp_path / f"out{k}"
        out.mkdir()
        result = korquad.run(cfg, tiny_model, FIXTURE, FIXTURE, out)
        outs.append(((out / "metrics.json").read_bytes(), (out / "predictions.json").read_bytes()))
    assert outs[0] == outs[1]
    m = json.loads(outs[0][0])
    preds = json.loads(outs[0][1])
    gold = {}
    for a in json.loads(FIXTURE.read_text(encoding="utf-8"))["data"]:
        for p in a["paragraphs"]:
            for q in p["qas"]:
                gold[q["id"]] = p["context"]
    assert len(preds) == m["questions"] == 12
    assert all(v in gold[k] for k, v in preds.items())  # every answer is a slice of its context
    assert 0.0 <= m["exact_match"] <= 100.0 and 0.0 <= m["f1"] <= 100.0
    # trained and scored on the same 12 questions: a tiny model memorises many of them
    # (F1 ~58 here), while an untrained head scores F1 around 10
    assert m["f1"] >= 40.0, m
    assert m["train_windows"] > m["train_questions"] and m["shared_contexts"] > 0
    assert result.compute["train_examples"] == m["train_windows"]
    # the dev metric per epoch (reporting only) ends at the final figure
    assert m["epochs"][-1]["dev_f1"] == pytest.approx(m["f1"], abs=1e-4)
    assert m["eval_set"] == "korquad_sample.json"
    nbest = json.loads((tmp_path / "out0" / "nbest_predictions.json").read_text(encoding="utf-8"))
    assert set(nbest) == set(preds) and all(nbest[k][0]["text"] == v for k, v in preds.items())
    assert all(1 <= len(v) <= cfg.n_best for v in nbest.values())
    assert all(abs(sum(a["probability"] for a in v) - 1.0) < 1e-3 for v in nbest.values())
    check_learning_curve(tmp_path / "out0", m)


def test_korquad_on_a_by_article_split(tiny_model, tmp_path):
    train_doc, dev_doc = korquad.split_by_article(FIXTURE, 0.25, seed=1)
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    train.write_text(json.dumps(train_doc, ensure_ascii=False), encoding="utf-8")
    dev.write_text(json.dumps(dev_doc, ensure_ascii=False), encoding="utf-8")
    cfg = dataclasses.replace(sample_korquad(), max_length=96, doc_stride=32, max_query_length=24,
                              batch_size=16, epochs=1, max_train_examples=8, eval_each_epoch=False)
    out = tmp_path / "out"
    out.mkdir()
    korquad.run(cfg, tiny_model, train, dev, out)
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    n_dev = sum(len(p["qas"]) for a in dev_doc["data"] for p in a["paragraphs"])
    assert m["questions"] == n_dev and m["shared_contexts"] == 0
    assert "by-article split" in m["eval_set"] and "NOT official" in m["eval_set"]
    assert 0.0 <= m["exact_match"] <= 100.0 and 0.0 <= m["f1"] <= 100.0
    assert set(json.loads((out / "predictions.json").read_text(encoding="utf-8"))) == {
        q["id"] for a in dev_doc["data"] for p in a["paragraphs"] for q in p["qas"]}
    # ASCII, as the official dev file is: the official script reads it in any locale's encoding
    raw = (out / "predictions.json").read_bytes()
    assert raw.isascii() and json.loads(raw.decode("cp949")) == json.loads(raw.decode("utf-8"))


def _one_segment_folder(tiny_model: Path, tmp_path: Path) -> Path:
    """``tiny_model`` with one segment embedding (``type_vocab_size: 1``), its tokenizer files beside."""
    import shutil

    from transformers import ElectraConfig, ElectraForPreTraining

    source = ElectraForPreTraining.from_pretrained(str(tiny_model))
    config = ElectraConfig(**{**source.config.to_dict(), "type_vocab_size": 1})
    one = ElectraForPreTraining(config)
    state = source.state_dict()
    state["electra.embeddings.token_type_embeddings.weight"] = state["electra.embeddings.token_type_embeddings.weight"][:1]
    one.load_state_dict(state)
    folder = tmp_path / "one-segment"
    one.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (tiny_model / name).is_file():
            shutil.copyfile(tiny_model / name, folder / name)
    return folder


def test_korquad_on_a_model_of_one_segment_embedding_reads_the_context_as_segment_0(tiny_model, tmp_path, capsys):
    """A model with ``type_vocab_size: 1`` (pretrained on examples of single_segment_prob=1, or a RoBERTa-style
    folder): the context's token type 1 ended the first step with 'internal error: IndexError: index out of range
    in self' (t9); the pair now goes in without segment ids (the model's own zeros), said in one line."""
    import torch

    folder = _one_segment_folder(tiny_model, tmp_path)
    cfg = dataclasses.replace(sample_korquad(), max_length=64, doc_stride=32, max_query_length=24,
                              batch_size=16, epochs=1, max_train_examples=8, max_eval_examples=8, train_on_eval=True)
    out = tmp_path / "out"
    out.mkdir()
    torch.manual_seed(0)
    korquad.run(cfg, folder, FIXTURE, FIXTURE, out)
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert m["questions"] == 8 and 0.0 <= m["f1"] <= 100.0
    assert "has one segment embedding (type_vocab_size 1): the second text of a pair" in capsys.readouterr().err


def test_a_single_text_task_on_a_model_of_one_segment_embedding_says_nothing_of_pairs(tiny_model, tmp_path, capsys):
    """nsmc (one text a row) on a ``type_vocab_size: 1`` model printed 'the second text of a pair (a question's
    context) goes in as segment 0 too', of pairs it never reads (w5); only a pair task says it."""
    folder = _one_segment_folder(tiny_model, tmp_path)
    cfg = dataclasses.replace(sample_nsmc(), max_length=32, batch_size=16, epochs=1, dev_fraction=0.2,
                              max_train_examples=0, max_eval_examples=0)
    out = tmp_path / "out"
    out.mkdir()
    nsmc.run(cfg, folder, nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "test.txt", 10, 1), out)
    assert 0.0 <= json.loads((out / "metrics.json").read_text(encoding="utf-8"))["accuracy"] <= 1.0
    assert "one segment embedding" not in capsys.readouterr().err
