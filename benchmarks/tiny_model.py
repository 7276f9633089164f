"""A tiny random ELECTRA discriminator directory, for tests and quick benchmarks of fine-tuning.

Stands in for the pretrain stage's ``hf/discriminator/`` where training a real one would be too
slow: a WordPiece tokenizer is trained (HF ``tokenizers``) on the given texts with kolectra's
special-token ids ([PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4), a randomly initialised
``ElectraForPreTraining`` of the given size is saved next to it.  Real parts only: the result
loads with ``AutoTokenizer`` / ``AutoModelFor*`` exactly like a real model directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from kolectra.core.tokens import SPECIALS


def train_wordpiece(texts: Iterable[str], vocab_size: int = 600):
    """A fast BERT-style tokenizer (cased, no accent stripping) trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), min_frequency=1)
    tok.train_from_iterator(list(texts), trainer)
    # The trainer numbers tokens of equal frequency in hash order, which changes from one process to
    # the next (the same texts gave a fine-tuning test 0.67 or 0.93 accuracy by process): renumber them
    # in sorted order, the specials keeping their ids.
    learned = sorted(t for t in tok.get_vocab() if t not in SPECIALS)
    tok.model = models.WordPiece({t: i for i, t in enumerate([*SPECIALS, *learned])}, unk_token="[UNK]",
                                 max_input_chars_per_word=100)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=512)


def build_tiny_model_dir(out_dir: Path, texts: Iterable[str], seed: int = 0, hidden: int = 32,
                         layers: int = 2, heads: int = 2, vocab_size: int = 600,
                         max_position: int = 512) -> Path:
    import torch  # noqa: PLC0415
    from transformers import ElectraConfig, ElectraForPreTraining  # noqa: PLC0415

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = train_wordpiece(texts, vocab_size)
    config = ElectraConfig(vocab_size=len(tokenizer), embedding_size=hidden, hidden_size=hidden,
                           num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=hidden * 4, max_position_embeddings=max_position,
                           pad_token_id=0)
    torch.manual_seed(seed)
    ElectraForPreTraining(config).save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    return out_dir
