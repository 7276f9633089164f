"""The training tokens a tokenizer has no piece for ([UNK]): warned of before training (finetune/unknown.py).

A real tiny model folder and its tokenizer.json, the one with its NFC normalizer taken out (as a vocab.txt read as
BertTokenizer has none: KoELECTRA's), tokenising a file saved in decomposed Hangul (NFD)."""

from __future__ import annotations

import json
import shutil
import unicodedata

from kolectra.finetune import config, skeleton
from kolectra.finetune.classify import Classify
from kolectra.finetune.loading import load_tokenizer
from kolectra.finetune.unknown import warn_unknown
from tests.test_finetune_e2e import NEG, POS, tiny_model  # noqa: F401 - tiny_model is a fixture


def test_a_file_in_decomposed_hangul_through_a_tokenizer_without_nfc_is_warned_of(tiny_model, tmp_path, capsys):
    """Trained and scored on nearly every token [UNK], unsaid: the same file gave a fair figure through kolectra's own
    tokenizer (NFC first) and a floor through KoELECTRA's, as if the models differed."""
    plain = tmp_path / "no-nfc"
    shutil.copytree(tiny_model, plain)
    spec = json.loads((plain / "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                          "strip_accents": False, "lowercase": False}
    (plain / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    rows = [(unicodedata.normalize("NFD", text), label) for texts, label in ((POS, "pos"), (NEG, "neg"))
            for text in texts]
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows * 3), encoding="utf-8")
    cfg = config.sample_classify()

    def warned(model):
        task = Classify()
        data = task.read(cfg, train, train)
        tokenizer = load_tokenizer(model)
        splits = skeleton.encode(task, data, tokenizer, cfg, model, None)
        return warn_unknown(task.name, data, splits, tokenizer, model), capsys.readouterr().err

    said, err = warned(plain)
    assert len(said) == 1 and said[0] in err and "of the training rows' tokens" in said[0] and "are [UNK]" in said[0]
    assert "the text is in decomposed Hangul (NFD: " in said[0] and "convert the files to NFC" in said[0]
    assert warned(tiny_model)[0] == []  # kolectra's own tokenizer composes NFC first: the same file reads well
