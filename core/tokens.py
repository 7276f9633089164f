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
# What an exported tokenizer returns by default (its tokenizer_config.json's model_input_names): ELECTRA reads
# segment ids, which PreTrainedTokenizerFast leaves out unless told (a pair then reached the model as one
# segment). Here, not in vocab/export.py, so that kolectra export sets it without importing tokenizers.
MODEL_INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
# The share of [UNK] among a text's tokens above which a stage warns (the vocab stage on its held-out split, the
# examples stage on the text it encodes): a vocabulary learned from this corpus holds the characters its training
# text uses, so on held-out text of the same corpus [UNK] should come only from characters never seen in training
# (the embedded sample's vocabularies measure 0.0 %). One token in a hundred unknown is no longer rare characters
# but a systematic gap (an alphabet cut by limit_alphabet, a vocabulary too small for it, another corpus's).
UNK_RATE_WARN = 0.01
