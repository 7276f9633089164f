"""The SentencePiece alternatives (``sp_unigram``, ``sp_bpe``): training and HF export.

Stage: corpus -> **vocab** -> examples. Same corpus, same contract files as the WordPiece
recipes, but pieces are learned by the ``sentencepiece`` library (Kudo 2018 unigram LM, or BPE)
on raw sentences, with no pre-tokeniser and no morphemes: spaces become ``▁`` and pieces start
at a word start (``▁영화``) or continue a word (``는``) — the mark is on word-*initial* pieces,
the opposite of WordPiece's ``##``.

- Normalisation is the identity: the corpus stage already cleaned the text (NFC, widths,
  invisible characters); only whitespace runs are collapsed, here and at run time, so the HF
  tokenizer sees exactly what the trainer saw. At run time the HF tokenizer also composes its
  input to NFC (the identity on the corpus's text), as the WordPiece recipes' does, so decomposed
  Hangul gets the pieces of the composed; ``sentencepiece.model`` alone does not. NFKC
  (SentencePiece's default) is never applied.
- Characters outside ``sp_character_coverage`` fall back to UTF-8 byte pieces ``<0xNN>``
  (``sp_byte_fallback``), so the [UNK] rate is ~0 at the price of 256 vocabulary entries.
- Memory: sentences are streamed from the corpus into a reservoir sample (Vitter's algorithm R,
  seeded) of at most ``sp_input_sentences``, handed to the trainer through
  ``sentence_iterator``. The sampling is ours because SentencePiece's own
  (``input_sentence_size`` + ``shuffle_input_sentence``) differs from run to run even after
  ``set_random_generator_seed``. Memory is bounded by the cap (the sample, plus the trainer's copy).
- ``hard_vocab_limit``: a small corpus cannot always fill ``vocab_size``. With the default
  ``sp_hard_vocab_limit=False`` the size is a ceiling; with True the trainer's "set it to a value
  <= N" failure is retried once at N. The size reached is reported.

Export: ``tokenizer.json`` is a HF ``Unigram``/``BPE`` model with Metaspace pre-tokenisation and
byte fallback that gives the same ids as ``sentencepiece.SentencePieceProcessor`` on cleaned text
(tested); ``sentencepiece.model`` is kept beside it. ``vocab.txt`` lists the pieces one per line
in id order for tools that want a vocabulary list — it does NOT reproduce SentencePiece
tokenisation on its own (a BertTokenizer built from it would tokenise differently).
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path
from typing import Iterator

import sentencepiece
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from kolectra.core.errors import UserInputError
from kolectra.core.tokens import MODEL_INPUT_NAMES, SPECIALS, SPECIALS_MAP
from kolectra.corpus import shards
from kolectra.vocab.export import MODEL_MAX_LENGTH, text_only, written
from kolectra.vocab.words import iter_docs

SPACE = "\u2581"  # ▁, SentencePiece's visible space
MODEL_FILE = "sentencepiece.model"
MODEL_TYPES = {"sp_unigram": "unigram", "sp_bpe": "bpe"}


def clean(text: str) -> str:
    """The only normalisation besides the corpus stage's: whitespace runs -> one space, trimmed."""
    return " ".join(text.split())


def training_sentences(corpus_dir: Path, max_bytes: int, counts: dict) -> Iterator[str]:
    """Cleaned ``train`` sentences, streamed; longer than ``max_bytes`` UTF-8 bytes are counted and skipped."""
    counts.update(documents=0, sentences=0, sentences_too_long=0)
    for doc in iter_docs(corpus_dir, "train", desc="vocab: reading sentences"):
        counts["documents"] += 1
        try:
            sents = shards.sentences(doc)
        except (KeyError, TypeError, ValueError) as e:
            raise UserInputError(f"{corpus_dir}: document {doc.get('id', '?')!r}: bad 'sentences' ({e!r})") from None
        for sent in sents:
            sent = clean(sent)
            if not sent:
                continue
            if len(sent.encode("utf-8")) > max_bytes:
                counts["sentences_too_long"] += 1
                continue
            counts["sentences"] += 1
            yield sent


def sample(sentences: Iterator[str], cap: int, seed: int) -> list[str]:
    """At most ``cap`` sentences (all when ``cap`` is 0), uniformly sampled, in corpus order."""
    if not cap:
        return list(sentences)
    rng = random.Random(seed)
    kept: list[tuple[int, str]] = []
    for i, sent in enumerate(sentences):
        if i < cap:
            kept.append((i, sent))
        else:
            j = rng.randrange(i + 1)
            if j < cap:
                kept[j] = (i, sent)
    kept.sort()
    return [sent for _, sent in kept]


_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")


def train_model(cfg, corpus_dir: Path, recipe: str) -> tuple[bytes, dict]:
    """Train ``recipe`` (``sp_unigram`` or ``sp_bpe``) on the corpus; the serialized model and stats."""
    unused = [f"[unused{i}]" for i in range(cfg.num_unused)]
    # [PAD]=0, [UNK]=1 are SentencePiece's meta pieces; control symbols take the next free ids in
    # order, so [CLS]=2 [SEP]=3 [MASK]=4 [unused0..]=5.. — the ids the contract fixes
    options = dict(
        model_type=MODEL_TYPES[recipe], vocab_size=cfg.vocab_size,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece=SPECIALS[0], unk_piece=SPECIALS[1],
        control_symbols=list(SPECIALS[2:]) + unused,
        normalization_rule_name="identity", remove_extra_whitespaces=True, add_dummy_prefix=True,
        byte_fallback=cfg.sp_byte_fallback, character_coverage=cfg.sp_character_coverage,
        input_sentence_size=0, shuffle_input_sentence=False,  # the sample is already drawn (see above)
        max_sentence_length=cfg.sp_max_sentence_bytes, num_threads=cfg.sp_threads,
        hard_vocab_limit=cfg.sp_hard_vocab_limit, minloglevel=2,
    )
    stats: dict = {"requested_vocab_size": cfg.vocab_size}
    counts: dict = {}
    sentences = sample(training_sentences(corpus_dir, cfg.sp_max_sentence_bytes, counts), cfg.sp_input_sentences,
                       cfg.seed)
    if not sentences:
        raise UserInputError(f"vocab: corpus {corpus_dir} has no train sentences with text")
    for attempt in range(2):
        sentencepiece.set_random_generator_seed(cfg.seed)
        writer = io.BytesIO()
        try:
            sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=writer, **options)
        except RuntimeError as e:
            m = _TOO_HIGH.search(str(e))
            if m and attempt == 0 and int(m.group(2)) >= len(SPECIALS) + cfg.num_unused + 1:
                options["vocab_size"] = int(m.group(2))
                stats["vocab_size_retried"] = options["vocab_size"]
                continue
            raise UserInputError(f"vocab: sentencepiece {recipe} training failed on {corpus_dir}: {e}") from None
        break
    stats.update(counts, sentences_used=len(sentences))
    return writer.getvalue(), stats


def _bpe_merges(pieces: list[str], normal: set[int]) -> list[tuple[str, str]]:
    """HF BPE merges reproducing SentencePiece BPE: every split of a piece into two pieces,
    ranked by the merged piece's id (SentencePiece merges the pair whose result scores highest;
    its scores fall with the id), then by the parts' ids."""
    ids = {p: i for i, p in enumerate(pieces) if i in normal}
    merges = []
    for i, piece in enumerate(pieces):
        if i not in normal:
            continue
        for k in range(1, len(piece)):
            a, b = piece[:k], piece[k:]
            if a in ids and b in ids:
                merges.append((i, ids[a], ids[b], a, b))
    merges.sort()
    return [(a, b) for *_, a, b in merges]


def make_tokenizer(model: bytes, recipe: str) -> Tokenizer:
    """The HF fast tokenizer equivalent to the SentencePiece ``recipe`` model (ids 0..4 are the specials)."""
    sp = sentencepiece.SentencePieceProcessor(model_proto=model)
    n = sp.get_piece_size()
    pieces = [sp.id_to_piece(i) for i in range(n)]
    for i, s in enumerate(SPECIALS):
        if pieces[i] != s:
            raise UserInputError(f"sentencepiece id {i} must be {s}, got {pieces[i]!r}")
    byte_fallback = any(sp.is_byte(i) for i in range(n))
    normal = {i for i in range(n) if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i) or sp.is_unused(i))}
    if MODEL_TYPES[recipe] == "bpe":
        model_ = models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=_bpe_merges(pieces, normal),
                            unk_token=SPECIALS[1], fuse_unk=True, byte_fallback=byte_fallback)
    else:
        model_ = models.Unigram([(p, sp.get_score(i)) for i, p in enumerate(pieces)], unk_id=1,
                                byte_fallback=byte_fallback)
    tok = Tokenizer(model_)
    # NFC as the WordPiece recipes (vocab.words.runtime_normalizer): the pieces are composed Hangul, and
    # decomposed text would come out as byte pieces of its jamo
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "),
                                           normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
    if MODEL_TYPES[recipe] == "unigram":  # BPE only forms pieces through merges, which name normal pieces only
        tok.pre_tokenizer = pre_tokenizers.Sequence([tok.pre_tokenizer, _never_spelled(pieces, normal)])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    # control pieces are never produced from text by SentencePiece: special tokens to HF (so decode
    # skips them), never matched in text (text_only), and never reached by the Unigram lattice (_never_spelled)
    tok.add_special_tokens([p for i, p in enumerate(pieces) if sp.is_control(i) or i < len(SPECIALS)])
    return text_only(tok)


def _never_spelled(pieces: list[str], normal: set[int]) -> pre_tokenizers.Split:
    """A cut after the first character of any spelling of a piece SentencePiece never matches in
    text (control, unknown, unused, byte pieces): HF's Unigram puts every piece in its lattice, so
    "[MASK]" in text came out as the piece [MASK] (and "<0x61>" as the byte "a"). The lattice
    cannot leave them out by score either: they score 0.0, the best, and the lowest score sets the
    unknown character's, so a spelling with a character the vocabulary lacks always reaches them.
    Cut, no pre-token holds a whole spelling; the first character stays with what precedes it."""
    by_first: dict[str, set[str]] = {}
    for i, p in enumerate(pieces):
        if i not in normal and len(p) > 1:
            by_first.setdefault(p[0], set()).add(p[1:])
    alts = "|".join(f"{re.escape(c)}(?=(?:{'|'.join(re.escape(r) for r in sorted(rests))}))"
                    for c, rests in sorted(by_first.items()))
    return pre_tokenizers.Split(Regex(alts), behavior="merged_with_previous")


def write_dir(model: bytes, recipe: str, out_dir: Path) -> Tokenizer:
    """tokenizer.json, sentencepiece.model, vocab.txt (pieces, id order), the two configs."""
    tok = make_tokenizer(model, recipe)
    written(out_dir / "tokenizer.json", lambda p: tok.save(str(p), pretty=True))
    written(out_dir / MODEL_FILE, lambda p: p.write_bytes(model))
    vocab = sorted(tok.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1])
    written(out_dir / "vocab.txt", lambda p: p.write_text("".join(t + "\n" for t, _ in vocab), encoding="utf-8"))
    _write_json(out_dir / "special_tokens_map.json", SPECIALS_MAP)
    _write_json(out_dir / "tokenizer_config.json", {
        # the generic fast class: it wraps tokenizer.json as is (there is no slow SP class to rebuild)
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_input_names": list(MODEL_INPUT_NAMES),  # that class's own leave out token_type_ids
        "model_max_length": MODEL_MAX_LENGTH,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": True,  # "[SEP]" in text is text (vocab.export's docstring)
        **SPECIALS_MAP,
    })
    return tok


def _write_json(path: Path, obj: dict) -> None:
    written(path, lambda p: p.write_text(json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n",
                                         encoding="utf-8"))
