"""A tiny random ELECTRA discriminator directory, for tests and quick benchmarks of fine-tuning.

Stands in for the pretrain stage's ``hf/discriminator/`` where training a real one would be too
slow: a WordPiece tokenizer is learned (by the vocab stage's learner) from the given texts with kolectra's
special-token ids ([PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4), a randomly initialised
``ElectraForPreTraining`` of the given size is saved next to it.  Real parts only: the result
loads with ``AutoTokenizer`` / ``AutoModelFor*`` exactly like a real model directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from kolectra.core.tokens import SPECIALS


def train_wordpiece(texts: Iterable[str], vocab_size: int = 600):
    """A fast BERT-style tokenizer (cased, no accent stripping) learned from ``texts`` by the vocab
    stage's own plain WordPiece learner, no unused slots; a ``vocab_size`` below the specials plus the
    texts' alphabet gives the alphabet alone, as HF's trainer does.

    Why not HF ``tokenizers``' WordPiece trainer: it breaks ties between equally frequent pairs in
    hash order, which changes from one process to the next, so the same texts gave other merges
    (fixture texts at 1,200 entries: six processes, six tokenizers) and tests that read a tokenizer's
    windows or scores another figure in each run. This learner breaks ties by the pair's text."""
    from collections import Counter  # noqa: PLC0415

    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    from kolectra.core.config import override  # noqa: PLC0415
    from kolectra.vocab import build, export, trainer, words  # noqa: PLC0415
    from kolectra.vocab.config import plain_config  # noqa: PLC0415

    split = words.WordSplitter()
    table = Counter((word, ()) for text in texts for word, _, _ in split(text))
    initial, continuing = trainer.alphabet(table, limit=10**6)
    cfg = override(plain_config(), [f"vocab_size={max(vocab_size, len(SPECIALS) + len(initial) + len(continuing))}",
                                    "num_unused=0", "min_frequency=1", f"limit_alphabet={10**6}"])
    vocab, _ = build.learn_vocab(cfg, dict(table), "wordpiece", show_progress=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=export.make_tokenizer(vocab), unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
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
