"""What an exported folder's files say beside the weights, without torch: its tokenizer files fitted to the
model (length, segments, ``[MASK]`` in text for a masked LM) and the card's note on positions pretraining
never trained. :mod:`model.export` writes the pair at the end of pretraining (torch, transformers) and
applies these; ``kolectra export`` (:mod:`pipeline.hub`) applies them to a checkpoint's ``hf/`` folder,
plain file and JSON work, and paid for torch and transformers (about 3 CPU s) when they lived there."""

from __future__ import annotations

import json
from pathlib import Path

FILL_MASK = ("In this folder `[MASK]` written in text is the mask token (its `tokenizer_config.json` says "
             "`split_special_tokens: false`), so `pipeline(\"fill-mask\", model=path)` fills it; kolectra's own "
             "tokenizers, and an exported discriminator's, read it as text.")


def mask_in_text(path: Path) -> None:
    """A masked LM's folder: ``[MASK]`` in text is the mask. Its card's ``pipeline_tag`` is fill-mask, and
    with the vocabulary's ``split_special_tokens`` (text is data) ``pipeline("fill-mask")`` and the Hub's
    widget found no mask in any input ("No mask_token ([MASK]) found on the input"). Fine-tuning loads
    ``hf/discriminator``, which keeps text as data."""
    if not path.is_file():
        return
    config = json.loads(path.read_text(encoding="utf-8"))
    config["split_special_tokens"] = False
    path.write_text(json.dumps(config, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def fit_max_length(path: Path, positions: int) -> None:
    """The tokenizer's ``model_max_length`` at most the model's ``positions``: a vocabulary says 512 (or
    nothing), and a model pretrained with a smaller ``model.max_position`` then got inputs of 512 tokens
    from ``tokenizer(text, truncation=True)`` and failed inside its embeddings (a tensor size mismatch)."""
    if not path.is_file():
        return
    config = json.loads(path.read_text(encoding="utf-8"))
    limit = config.get("model_max_length") if isinstance(config, dict) else None
    if not isinstance(config, dict) or (isinstance(limit, (int, float)) and limit <= positions):
        return
    config["model_max_length"] = positions
    path.write_text(json.dumps(config, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def one_segment_inputs(path: Path, segments) -> None:
    """A model of one segment embedding (``type_vocab_size`` 1): its tokenizer's ``model_input_names`` without
    ``token_type_ids``, so a pair (``tokenizer(question, context)``) goes in as the model's own zeros. With the
    vocabulary's names the second text's token type 1 failed inside the embeddings ('IndexError: index out of
    range in self') in transformers' own pipelines as in any user's code."""
    if not path.is_file() or not isinstance(segments, int) or isinstance(segments, bool) or segments != 1:
        return
    config = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        return
    names = config.get("model_input_names")
    if not isinstance(names, list):  # none named: the class's own, which hold token_type_ids
        names = ["input_ids", "token_type_ids", "attention_mask"]
    if "token_type_ids" not in names:
        return
    config["model_input_names"] = [n for n in names if n != "token_type_ids"]
    path.write_text(json.dumps(config, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _pair_of_one_segment(processor: dict) -> bool:
    """Give ``processor``'s pair template (a ``TemplateProcessing``, also inside a ``Sequence``) token type 0
    throughout; whether anything changed. Other processors (``BertProcessing``) are left as they are."""
    changed = False
    if processor.get("type") == "Sequence":
        for inner in processor.get("processors") or []:
            if isinstance(inner, dict) and _pair_of_one_segment(inner):
                changed = True
    elif processor.get("type") == "TemplateProcessing":
        for piece in processor.get("pair") or []:
            for part in piece.values() if isinstance(piece, dict) else ():
                if isinstance(part, dict) and part.get("type_id", 0) != 0:
                    part["type_id"] = 0
                    changed = True
    return changed


def one_segment_pairs(path: Path, segments) -> None:
    """A model of one segment embedding: its ``tokenizer.json`` gives a pair's second text token type 0, so
    ``tokenizer(question, context, return_token_type_ids=True)`` (or a collator asking for them) hands the
    model ids it has (the first segment's, as it was pretrained). :func:`one_segment_inputs` leaves them out
    by default; asked for, they were 1 and failed inside the embeddings ('IndexError: index out of range in
    self'). ``sequence_ids()`` (which text a token is of: the QA pipeline's) still tells the two apart.
    transformers 5's ``BertTokenizer`` class builds its own template and ignores this one; kolectra's
    vocabularies name ``PreTrainedTokenizerFast``, which keeps it."""
    if not path.is_file() or not isinstance(segments, int) or isinstance(segments, bool) or segments != 1:
        return
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError):  # not a tokenizer file: copied as it is, transformers names it on load
        return
    processor = config.get("post_processor") if isinstance(config, dict) else None
    if isinstance(processor, dict) and _pair_of_one_segment(processor):
        path.write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def untrained_positions(trained, positions, inherited: bool = False) -> str:
    """The card's paragraph (and ``kolectra export``'s note) for a model pretrained on sequences of ``trained``
    tokens with a position table of ``positions`` (ELECTRA-Small's practice: 128 of 512, as kolectra's tiny and
    small presets and ``kolectra run``'s demo do); "" where every position was trained or a figure is unknown.
    An input past ``trained`` tokens reads position embeddings pretraining never shaped: features that no
    error reveals. The table is kept whole: fine-tuning at that length (``kolectra finetune korquad``'s 512)
    trains them, and a smaller table refuses it and any continued pretraining on longer examples."""
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (trained, positions)):
        return ""
    if trained >= positions:
        return ""
    held = "hold what the model it was initialised from had" if inherited else "are random, from the initialisation"
    return (f"Positions: the model takes up to {positions} tokens (`max_position_embeddings`), but this run "
            f"pretrained it on sequences of {trained}, so positions {trained}-{positions - 1} were never trained "
            f"by it (they {held}). An input longer than {trained} tokens reads them and gets features pretraining "
            f"never shaped, with no error; keep to {trained} "
            f"(`tokenizer(text, truncation=True, max_length={trained})`) unless you fine-tune at the longer "
            "length, which trains them.")
