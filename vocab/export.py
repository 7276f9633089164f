"""Writing a vocabulary as a Hugging Face tokenizer directory (the vocab artifact's root files).

Stage: corpus -> **vocab** -> examples. The tokenizer is BERT's after NFC: NFC then BertNormalizer
(cased, no accent stripping — lowercasing or stripping would NFD-decompose Hangul into jamo —
clean_text, Hanja isolated), BertPreTokenizer, WordPiece with ``##``, ``[CLS] A [SEP] B [SEP]``
templates. The same ids come out of ``AutoTokenizer.from_pretrained(dir)`` and the raw ``tokenizers``
file on any text, and on NFC text (what the corpus stage stores) out of
``BertTokenizer(vocab=str(dir/"vocab.txt"), do_lower_case=False, strip_accents=False,
split_special_tokens=True)`` (transformers 5
spells it ``vocab``; its ``vocab_file=`` is silently ignored) or ``BertTokenizer.from_pretrained`` on a
folder holding only ``vocab.txt`` (the transformers 4 path); those build their own normaliser, without
NFC, so decomposed Hangul is [UNK] to them.

Text is data: ``[PAD]``, ``[MASK]`` and the other specials are inserted by code only, never matched
in text ("[MASK]" in a review is the pieces ``[``, ``M``, ``##A``, ...). The tokenizer objects made
here say so (``encode_special_tokens``: the report measures them), and ``tokenizer_config.json``'s
``split_special_tokens`` makes transformers do the same on load; the post-processor's ``[CLS]`` and
``[SEP]`` are added by id and stay. ``tokenizer.json`` cannot hold the flag (tokenizers does not save
it), so a reader of that file alone sets it: :func:`text_only`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

from tokenizers import Tokenizer, decoders, models, processors

from kolectra.core.errors import UserInputError
from kolectra.core.tokens import MODEL_INPUT_NAMES, SPECIALS, SPECIALS_MAP
from kolectra.vocab.words import runtime_normalizer, runtime_pre_tokenizer

MODEL_MAX_LENGTH = 512
MAX_INPUT_CHARS_PER_WORD = 100  # BERT's: longer words become [UNK]


def assemble(num_unused: int, initial: list[str], continuing: list[str], pieces: list[str]) -> list[str]:
    """Id order: specials, [unusedN], word-initial chars, ``##`` chars, learned pieces."""
    vocab = list(SPECIALS) + [f"[unused{i}]" for i in range(num_unused)]
    seen = set(vocab)
    for tok in [*initial, *continuing, *pieces]:
        if tok not in seen:
            seen.add(tok)
            vocab.append(tok)
    return vocab


def make_tokenizer(vocab: list[str]) -> Tokenizer:
    ids = {tok: i for i, tok in enumerate(vocab)}
    tok = Tokenizer(models.WordPiece(vocab=ids, unk_token="[UNK]", continuing_subword_prefix="##",
                                     max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
    tok.normalizer = runtime_normalizer()
    tok.pre_tokenizer = runtime_pre_tokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(list(SPECIALS))  # ids stay 0..4 (already in the vocab); decode skips them
    return text_only(tok)


def text_only(tok: Tokenizer) -> Tokenizer:
    """``tok`` with its special tokens never matched in text (they are still added by the templates)."""
    tok.encode_special_tokens = True
    return tok


def written(path: Path, write: Callable[[Path], object]) -> None:
    """``write(path)``; a failure to write as an OSError naming the file: tokenizers reports a full
    disk as a bare ``Exception: ... (os error 28)``, and ``write()`` as an OSError without a name."""
    try:
        write(path)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from e
    except Exception as e:
        code = re.search(r"os error (\d+)", str(e))
        if code is None:
            raise
        raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from e


def _write_json(path: Path, obj: dict) -> None:
    written(path, lambda p: p.write_text(json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n",
                                         encoding="utf-8"))


def write_dir(vocab: list[str], out_dir: Path) -> Tokenizer:
    """tokenizer.json, vocab.txt, tokenizer_config.json, special_tokens_map.json into ``out_dir``."""
    for i, s in enumerate(SPECIALS):
        if vocab[i] != s:
            raise UserInputError(f"vocab id {i} must be {s}, got {vocab[i]!r}")
    bad = [t for t in vocab if not t or any(ch.isspace() for ch in t) or t == "##"]
    if bad:
        raise UserInputError(f"vocab has tokens vocab.txt cannot hold: {bad[:5]!r}")
    tok = make_tokenizer(vocab)
    written(out_dir / "tokenizer.json", lambda p: tok.save(str(p), pretty=True))
    written(out_dir / "vocab.txt", lambda p: p.write_text("".join(t + "\n" for t in vocab), encoding="utf-8"))
    specials = SPECIALS_MAP
    _write_json(out_dir / "special_tokens_map.json", specials)
    _write_json(out_dir / "tokenizer_config.json", {
        # the class that wraps tokenizer.json as is: transformers 5's BertTokenizer builds its own
        # normaliser from the settings below, without tokenizer.json's NFC (decomposed Hangul was [UNK])
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_input_names": list(MODEL_INPUT_NAMES),  # that class's own leave out token_type_ids
        "do_lower_case": False,
        "strip_accents": False,
        "tokenize_chinese_chars": True,
        "model_max_length": MODEL_MAX_LENGTH,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": True,  # "[SEP]" in text is text (see the module's docstring)
        **specials,
    })
    return tok
