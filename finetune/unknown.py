"""The training rows' tokens the tokenizer has no word for (``[UNK]``): warned of when they are many.

Called by :func:`finetune.skeleton.run` once the splits are tokenised.  A model folder whose tokenizer does not
compose decomposed Hangul (a ``vocab.txt`` read as BertTokenizer, KoELECTRA's: no NFC in its normalizer) reads a
file saved in NFD (as macOS writes names, and text copied from them) as jamo it has no word for: nearly every token
``[UNK]``.  The run trained and scored on that, and said nothing (kolectra's own tokenizers compose NFC first, so
the same file gave a fair figure with one model and a floor with the other).  A tokenizer for other text (an
English model's) does the same to Korean.  One line, and the artifact's stats, as the other warnings.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from kolectra.core.stage import warn

UNKNOWN_SHARE = 0.1  # Korean text through its own WordPiece vocabulary: well under 1 % (emoji, rare hanja)
SAMPLED = 1000  # rows whose text is checked for NFD
TEXT_COLUMNS = ("text", "text_pair", "tokens", "context", "question")


def warn_unknown(task_name: str, data, splits, tokenizer, model_dir: Path) -> list[str]:
    """One warning when more than :data:`UNKNOWN_SHARE` of the training rows' tokens (special tokens aside) are the
    tokenizer's unknown token, saying why when the text is in decomposed Hangul; returned for the artifact's stats."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    unk = tokenizer.unk_token_id
    if unk is None or "train" not in splits:
        return []
    ids = pc.list_flatten(splits["train"].encoded.data.column("input_ids"))
    special = [i for i in tokenizer.all_special_ids if i != unk]
    total = len(ids) - (int(pc.sum(pc.is_in(ids, value_set=pa.array(special, ids.type))).as_py() or 0) if special else 0)
    unknown = int(pc.sum(pc.equal(ids, unk)).as_py() or 0)
    if not total or unknown <= UNKNOWN_SHARE * total:
        return []
    decomposed, sampled = nfd_rows(data.train)
    why = (f"the text is in decomposed Hangul (NFD: {decomposed} of the first {sampled} training rows), which this "
           "tokenizer does not compose (no NFC in its normalizer, as a vocab.txt read as BertTokenizer): convert the "
           "files to NFC, e.g. python -c \"import sys, unicodedata; sys.stdout.write(unicodedata.normalize('NFC', "
           "sys.stdin.read()))\" < FILE > FILE.nfc" if decomposed else
           "is it the model's own tokenizer, and one for this text's language?")
    text = (f"{task_name}: {unknown / total:.0%} of the training rows' tokens ({unknown:,} of {total:,}) are "
            f"{tokenizer.unk_token}, words the tokenizer of {model_dir} has no piece for (the model reads nothing "
            f"there); {why}")
    warn(text)
    return [text]


def nfd_rows(train) -> tuple[int, int]:
    """(rows holding text that NFC changes, rows looked at) among the first :data:`SAMPLED` of ``train``."""
    columns = [c for c in TEXT_COLUMNS if c in train.column_names]
    head = train.select(range(min(SAMPLED, len(train))))
    decomposed = 0
    for values in zip(*(head[c] for c in columns)):
        text = " ".join(" ".join(v) if isinstance(v, list) else v or "" for v in values)
        decomposed += not unicodedata.is_normalized("NFC", text)
    return decomposed, len(head)
