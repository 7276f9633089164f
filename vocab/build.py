"""The vocab stage: corpus artifact -> tokenizer directory (morpheme-aware WordPiece by default) + report.

Chain: corpus -> **vocab** -> examples -> pretrain -> finetune. For the WordPiece recipes ``build``
streams the corpus's ``train`` documents once into a word-type table (words as the runtime BERT
pre-tokeniser sees them, each with the morpheme boundaries the corpus stage stored — see
:mod:`vocab.words`) and learns pieces with :mod:`vocab.trainer` (morpheme-constrained for
``morph_wordpiece``, unconstrained for the ``wordpiece`` baseline); the SentencePiece recipes
stream sentences to :mod:`vocab.spm`. It writes the HF tokenizer files (:mod:`vocab.export` /
:mod:`vocab.spm`), measures the chosen recipe and the plain-WordPiece baseline side by side on
held-out documents (:mod:`vocab.report`) and prints that table to stderr. With more than one CPU
and a large word table the baseline learns in a second process beside the chosen recipe
(:mod:`vocab.beside`; each learner is one thread of merges). Deterministic: ties
are broken by text, SentencePiece is seeded, every file is written with sorted keys; timings go to
the manifest's stats only, never into the files.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from kolectra.core import bars
from kolectra.core.config import ConfigError, to_dict
from kolectra.core.errors import UserInputError
from kolectra.core.stage import StageOutput, progress, warn
from kolectra.core.tokens import SPECIALS, UNK_RATE_WARN
from kolectra.corpus import shards
from kolectra.vocab import export, report, spm, table, trainer, words
from kolectra.vocab.beside import Beside
from kolectra.vocab.config import WORDPIECE_RECIPES, VocabConfig

STAGE_VERSION = 8  # bump when the same request's bytes change; history: docs/artifacts.md
BASELINE = "wordpiece"
# Korean text needs its syllables: the 4,000-review sample alone uses 1,392 characters (KS X 1001
# lists 2,350 common syllables). Below 1,000 entries a vocabulary cannot hold them, let alone pieces.
TINY_VOCAB = 1000
# From this many word types the baseline's learner runs in a second process beside the chosen
# recipe's (when there is a second CPU): about a second of learning each on 20,000 NSMC reviews
# (59,638 types), against about 0.3 s to start the process and pass it the table (docs/vocab.md).
SIDE_BY_SIDE_MIN_WORD_TYPES = 50_000


def learn_vocab(cfg: VocabConfig, table, recipe: str, show_progress: bool = True,
                chars: dict | None = None) -> tuple[list[str], dict]:
    """The full id-ordered vocabulary for ``recipe`` from a word-type table, its alphabet from the
    character table ``chars`` (:mod:`vocab.tables`; default: the table's own characters)."""
    initial, continuing = (trainer.alphabet_of(chars, cfg.limit_alphabet) if chars is not None
                           else trainer.alphabet(table, cfg.limit_alphabet))
    fixed = len(SPECIALS) + cfg.num_unused
    if fixed + len(initial) + len(continuing) > cfg.vocab_size:
        # the report's baseline beside another recipe (a SentencePiece one has no ## forms): say it is
        # the baseline that does not fit, after the chosen recipe learned, and how to leave it out
        baseline = recipe != cfg.recipe
        raise ConfigError(
            (f"the {recipe} baseline the report compares {cfg.recipe} against: " if baseline else "")
            + f"vocab_size={cfg.vocab_size} is too small: specials+unused ({fixed}) and the alphabet "
            f"({len(initial)} chars, {len(continuing)} ## forms) already take "
            f"{fixed + len(initial) + len(continuing)}; raise vocab_size or lower limit_alphabet"
            + (", or leave the baseline out with --set report_baseline=false" if baseline else "")
        )
    to_learn = max(0, cfg.vocab_size - fixed - len(set(initial + continuing)))
    bar = (bars.Bar(f"vocab: {recipe} pieces", to_learn, "piece", every=max(1, to_learn // 10), scale=True,
                    min_seconds=bars.QUIET_SECONDS) if show_progress else contextlib.nullcontext())
    with bar:
        pieces, stats = trainer.learn_pieces(
            table, budget=cfg.vocab_size - fixed, initial=initial + continuing, min_frequency=cfg.min_frequency,
            respect_morphs=recipe == "morph_wordpiece", cross_morph=cfg.cross_morph,
            max_chars=export.MAX_INPUT_CHARS_PER_WORD,
            on_piece=bar.advance if show_progress else None,
        )
    vocab = export.assemble(cfg.num_unused, initial, continuing, pieces)
    stats.update(alphabet=len(initial), alphabet_continuing=len(continuing), vocab_size=len(vocab))
    return vocab, stats


def build(cfg: VocabConfig, corpus_dir: Path, out_dir: Path, beam_args: list[str] = (),
          train_shards: list[str] | None = None) -> StageOutput:
    """Learn the chosen recipe (and the baseline, to compare), write its tokenizer directory and
    ``report.json``; stats are the chosen recipe's figures against the baseline's. The word count
    is a Beam job (:mod:`vocab.count`, ``beam_args`` as for the corpus stage) over ``train_shards``
    where they are (store URLs), by default the train shards of ``corpus_dir``."""
    corpus_dir, out_dir = Path(corpus_dir), Path(out_dir)
    t_start = time.perf_counter()
    seconds: dict = {}
    where = {"beam_args": list(beam_args), "train_shards": train_shards}
    tokenizers, learn_stats, counts = _learn_recipes(cfg, corpus_dir, out_dir, seconds, where)
    if line := short_of_size(cfg, learn_stats[cfg.recipe]["vocab_size"]):
        progress(line)
    measured, split = _report(cfg, corpus_dir, out_dir, tokenizers, learn_stats, counts, seconds)
    seconds["total"] = round(time.perf_counter() - t_start, 2)
    stats = _headline(cfg, learn_stats, measured, counts, split)
    progress("vocab: " + ", ".join(f"{k}={v}" for k, v in stats.items() if k != "warnings"))
    stats["build_seconds"] = seconds  # wall time per phase; in the manifest only (report.json stays byte-stable)
    return StageOutput(stats=stats)


def _learn_recipes(cfg: VocabConfig, corpus_dir: Path, out_dir: Path, seconds: dict,
                   where: dict) -> tuple[dict, dict, dict]:
    """(tokenizer per recipe, learning stats per recipe, train-corpus counts); the chosen recipe's
    tokenizer directory is written into ``out_dir``."""
    recipes = [cfg.recipe] + ([BASELINE] if cfg.report_baseline and cfg.recipe != BASELINE else [])
    counts: dict = {}
    table_ = chars = None
    tokenizers, learn_stats = {}, {}
    beside: dict[str, Beside] = {}  # recipe -> its learner running in a second process
    with contextlib.ExitStack() as stack:
        for recipe in recipes:
            if recipe in WORDPIECE_RECIPES and table_ is None:
                # counted only when needed (after SentencePiece, which streams sentences itself), so the
                # word table and the SentencePiece trainer never hold memory at the same time
                table_, chars, counts = _count_words(cfg, corpus_dir, seconds, **where)
                beside = _start_beside(cfg, table_, chars, recipes, stack)
            if recipe in beside:
                (vocab, learn_stats[recipe]), seconds[f"learn_{recipe}"] = beside[recipe].result()
                tokenizers[recipe] = export.make_tokenizer(vocab)
                continue
            t0 = time.perf_counter()
            chosen = recipe == cfg.recipe
            progress(f"vocab: learning {recipe} pieces (target {cfg.vocab_size})"
                     + "".join(f"; {r} in a second process beside it" for r in beside))
            if recipe in WORDPIECE_RECIPES:
                vocab, learn_stats[recipe] = learn_vocab(cfg, table_, recipe, chars=chars)
                tokenizers[recipe] = export.write_dir(vocab, out_dir) if chosen else export.make_tokenizer(vocab)
            else:
                model, learn_stats[recipe] = spm.train_model(cfg, corpus_dir, recipe)
                tokenizers[recipe] = spm.write_dir(model, recipe, out_dir) if chosen else spm.make_tokenizer(model, recipe)
                learn_stats[recipe]["vocab_size"] = tokenizers[recipe].get_vocab_size()
                del model
            seconds[f"learn_{recipe}"] = round(time.perf_counter() - t0, 2)
    del table_, chars
    if not counts:
        sp_stats = learn_stats[cfg.recipe]
        counts = {k: sp_stats[k] for k in ("documents", "sentences", "sentences_used", "sentences_too_long")}
    return tokenizers, learn_stats, counts


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _start_beside(cfg: VocabConfig, table_, chars, recipes: list[str],
                  stack: contextlib.ExitStack) -> dict[str, Beside]:
    """The WordPiece recipes after the first, each learning in a process of its own, when there
    are CPUs for them and the table is large enough to pay for the process; else none."""
    later = [r for r in recipes[1:] if r in WORDPIECE_RECIPES]
    if not later or recipes[0] not in WORDPIECE_RECIPES or _cpus() < 2 or len(table_) < SIDE_BY_SIDE_MIN_WORD_TYPES:
        return {}
    beside = {r: Beside(f"learning {r}", learn_vocab, cfg, table_, r, show_progress=False, chars=chars) for r in later}
    for b in beside.values():
        stack.callback(b.stop)  # the stage failed or was interrupted: no learner outlives it
    return beside


def _count_words(cfg: VocabConfig, corpus_dir: Path, seconds: dict, beam_args: list[str],
                 train_shards: list[str] | None) -> tuple[dict, dict, dict]:
    from kolectra.vocab import count  # noqa: PLC0415 - Beam: when words are counted

    t0 = time.perf_counter()
    paths = train_shards if train_shards is not None else [str(p) for p in shards.shard_paths(corpus_dir, "train")]
    if not paths:
        raise UserInputError(f"vocab: corpus {corpus_dir} has no train documents (no train shards)")
    table_, chars, counts = count.count_split(paths, cfg.max_word_types, cfg.count_flush_types, beam_args)
    if not table_:
        raise UserInputError(f"vocab: corpus {corpus_dir} has no train documents with text")
    progress(f"vocab: {counts['documents']:,} documents, {counts['words']:,} words, {counts['word_types']:,} word types"
             + (f" (the {counts['word_types_kept']:,} most frequent kept)" if counts["word_types_dropped"] else ""))
    seconds["count_words"] = round(time.perf_counter() - t0, 2)
    return table_, chars, counts


def _report(cfg: VocabConfig, corpus_dir: Path, out_dir: Path, tokenizers: dict, learn_stats: dict, counts: dict,
            seconds: dict) -> tuple[dict, str]:
    """Measure every recipe's tokenizer on the held-out split; write ``report.json`` and print its table."""
    split = words.eval_split(corpus_dir)
    progress(f"vocab: measuring on the {split} split")
    t0 = time.perf_counter()
    measured = report.measure(tokenizers, words.iter_docs(corpus_dir, split, desc=f"vocab: measuring on {split}"),
                              top_words=cfg.report_top_words, show_words=cfg.report_show_words,
                              max_word_types=cfg.report_max_word_types)
    seconds["report"] = round(time.perf_counter() - t0, 2)
    for recipe, fig in measured["recipes"].items():
        fig["learning"] = learn_stats[recipe]
    doc = {"chosen": cfg.recipe, "split": split, "config": to_dict(cfg), "train_corpus": counts, **measured,
           "warnings": fit_warnings(learn_stats[cfg.recipe]["vocab_size"], measured["recipes"][cfg.recipe], split)}
    for line in doc["warnings"]:
        warn(f"vocab: {line}")
    if cfg.recipe not in WORDPIECE_RECIPES:
        doc["note"] = (f"{cfg.recipe}: tokenizer.json (or {spm.MODEL_FILE}) is the tokenizer; vocab.txt only "
                       "lists its pieces in id order and does not reproduce SentencePiece tokenisation")
    export.written(out_dir / "report.json", lambda p: p.write_text(
        json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8"))
    for line in table.format_report(doc).splitlines():
        progress(line)
    return measured, split


def short_of_size(cfg: VocabConfig, size: int) -> str | None:
    """One line when the corpus held fewer pieces than ``vocab_size`` asks for (a ceiling, not a target
    it pads to): the size learned is what the examples and the model get."""
    if size >= cfg.vocab_size:
        return None
    why = (f"no pair it may merge occurs min_frequency={cfg.min_frequency} times or more in its words"
           if cfg.recipe in WORDPIECE_RECIPES else "SentencePiece found no more pieces in it")
    return (f"vocab: {cfg.recipe} learned {size:,} entries, fewer than vocab_size={cfg.vocab_size:,}: the corpus has "
            f"no more ({why}); the examples and the model take the {size:,}, and a larger corpus gives more")


def fit_warnings(vocab_size: int, figures: dict, split: str) -> list[str]:
    """What makes the chosen vocabulary unfit for pretraining, one line each (empty: nothing)."""
    out = []
    unk = figures.get("unk_rate") or 0.0
    if unk > UNK_RATE_WARN:
        out.append(f"{unk:.1%} of the tokens of the {split} split are [UNK] (above {UNK_RATE_WARN:.0%}): the "
                   "model would not see that text; raise vocab_size or limit_alphabet")
    if vocab_size < TINY_VOCAB:
        out.append(f"only {vocab_size} entries (fewer than {TINY_VOCAB:,}): too few to hold a Korean corpus's "
                   "syllables, let alone its pieces; raise vocab_size (or give a larger corpus)")
    return out


def _headline(cfg: VocabConfig, learn_stats: dict, measured: dict, counts: dict, split: str) -> dict:
    """The manifest's stats: the chosen recipe's figures, and the baseline's beside them."""
    chosen_fig = measured["recipes"][cfg.recipe]
    stats = {
        "vocab_size": learn_stats[cfg.recipe]["vocab_size"],
        "recipe": cfg.recipe,
        "report_split": split,
        "train_documents": counts.get("documents"),
        **{k: chosen_fig[k] for k in ("unk_rate", "tokens_per_eojeol", "chars_per_token", "morph_boundary_share",
                                      "words_kept_whole")},
    }
    if BASELINE in measured["recipes"] and cfg.recipe != BASELINE:
        base = measured["recipes"][BASELINE]
        for k in ("unk_rate", "tokens_per_eojeol", "morph_boundary_share"):
            stats[f"baseline_{k}"] = base[k]
    stats["warnings"] = fit_warnings(stats["vocab_size"], chosen_fig, split)
    return stats
