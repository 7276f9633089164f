"""The special tokens every kolectra vocabulary starts with, at ids the whole chain relies on.

The vocab stage writes them first (ids 0..4); the examples stage writes their ids into rows;
pretraining masks with ``[MASK]`` and never masks the others; fine-tuning's tokenizers use the
same names. This is the one list.
"""

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4
SPECIAL_IDS = {token: i for i, token in enumerate(SPECIALS)}
# How transformers' tokenizer classes name them (tokenizer_config.json / special_tokens_map.json).
SPECIALS_MAP = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                "mask_token": "[MASK]"}
