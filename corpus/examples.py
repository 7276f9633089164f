"""The examples stage: corpus + vocab -> fixed-length rows of ``[CLS] A [SEP] B [SEP]`` sequences.

Chain: corpus -> vocab -> **examples** -> pretrain. :func:`build` checks its inputs (the sequence
length fits the tokenizer, the special tokens sit at their fixed ids; that the vocab was learned
from this corpus is checked by the orchestration, which holds both parents' manifests), then runs
the Beam job of :mod:`corpus.examples_beam` with the same runner options as the corpus stage:
read the corpus shards in batches of documents -> tokenise each batch with the vocab's fast
tokenizer and cut each document's sentences into sequences (:func:`corpus.packing.pack_document`,
ELECTRA's recipe, see :mod:`corpus.examples_config`) -> per corpus shard (on the worker that read
it, or grouped when several workers share it), sort by (line, sequence), fill rows (by default
several sequences a row, each attending only within itself: ``doc_ids``) -> Arrow shards,
``index.json``, ``stats.json`` and a dataset card that ``datasets.load_dataset`` reads
(:mod:`corpus.examples_format`; ``docs/examples.md``).

Randomness is drawn per document from a generator seeded by (seed, document id), and every
shard's sequences are sorted by a key of the corpus (line within the corpus shard, sequence
within the document) before they fill rows, so the bytes do not depend on batching, bundling or
the number of workers. The pretraining loader shuffles the rows.
"""

from __future__ import annotations

import json
from pathlib import Path

from apache_beam.options.pipeline_options import DirectOptions, StandardOptions, WorkerOptions
from tokenizers import Tokenizer

from kolectra.core import storage
from kolectra.core.errors import UserInputError
from kolectra.core.stage import StageOutput, progress, warn
from kolectra.core.tokens import UNK_RATE_WARN
from kolectra.corpus import examples_beam, shards
from kolectra.corpus.examples_config import MIN_SEQ_LENGTH, ExamplesConfig, default_config  # noqa: F401
from kolectra.corpus.local_memory import MemoryModel, check_local_memory
from kolectra.corpus.outputs import take_report
from kolectra.corpus.packing import SPECIAL_IDS, ids_dtype
from kolectra.corpus.runners import (
    LOCAL_RUNNER,
    MULTI_WORKER_MIN_BYTES,
    REMOTE_RUNNERS,
    cpus_per_worker,
    input_bytes,
    interruptible,
    new_pipeline,
    pipeline_options,
    runner_label,
    runner_setup,
)

STAGE_VERSION = 6  # bump when the same request's bytes change; history: docs/artifacts.md

# The local runner's peak RSS per MB of gzipped corpus shards read (corpus/local_memory.py: MemoryModel):
# benchmarks/scale.py on 1-8 NSMC review files measured 263-376 MB, 250 MB + 1.4 MB per MB of
# shards (the runner holds the packed blocks' shuffle); rounded up to leave room (docs/scale.md).
# The base also holds one corpus shard's WriteShards step (its sequences, rows and Arrow bytes, about
# 40 bytes a token): a production-sized shard (shard_bytes; 9.5 M tokens) took the in-process run
# to 638 MB on 82.5 MB of gzipped shards, where 300 MB + 2.0 per MB gave 465 (docs/scale.md, "The
# local runner's worker processes"); 550 MB covers it by 12 %.
# Each worker process: its tokenizer and harness, a shard's WriteShards step, and the groups Beam's
# data channel takes in ahead of it (a receive queue of 5 messages or 100 MB, one message more held by
# its reader and one by gRPC): these fill by about 6 shards a worker and then stay, about 0.22 GB at a
# production-sized shard's 27 MB group, whatever the corpus. Measured 0.59 / 0.71 / 0.75-0.76 /
# 0.85-0.95 GB at 1 / 2 / 4 / 8 production-sized shards a worker (same docs/scale.md section, since
# each Arrow file is made once: 0.65-0.96 GB before); 1.2 GB is 27 % over the highest.
# A share of sentences cut to fit a sequence above which the examples say so: at 16 tokens the
# embedded sample cuts 22 % (their ends never trained on), which stats.json alone counted.
TRUNCATED_WARN = 0.05
# The same bound on the text's tokens cut: a few sentences without a boundary (a table, a list, a page
# of code) can hold most of a corpus's tokens, lost past each one's first max_seq_length - 3 while
# the share of sentences cut stays far below TRUNCATED_WARN. Either share above its bound warns.
TRUNCATED_TOKENS_WARN = TRUNCATED_WARN
LOCAL_MEMORY = MemoryModel(base_mb=550, per_mb=2.0, measure="gzipped corpus shards", worker_mb=1200)
# The same job when each worker takes whole corpus shards (as many shards as workers or more) and
# writes them itself: no shuffle, so the launcher holds the work list and the reports. In process
# it held 300 / 301 / 308 MB at 2 / 8 / 16 corpus shards of 70 MB of JSON (47-375 MB gzipped), where
# the shuffle took it to 367 / 498 / 636 MB: 0.024 MB per MB, doubled here. The base stays (one
# production-sized shard's write in process: 431 MB measured since, 28 % under). Each worker
# process holds its tokenizer and harness and one shard's blocks and write, and no queued groups:
# 425 / 420-425 MB at 4 / 8 production-sized shards a worker (was 0.75-0.95 GB); 0.6 GB is 41 % over
# (docs/scale.md, "No shuffle when each worker takes whole shards").
LOCAL_MEMORY_WHOLE_SHARDS = MemoryModel(base_mb=550, per_mb=0.05, measure="gzipped corpus shards", worker_mb=600)


def memory_model(parts: int) -> MemoryModel:
    """The local run's model for ``parts`` work items a corpus shard (:func:`parts_per_shard`)."""
    return LOCAL_MEMORY if parts > 1 else LOCAL_MEMORY_WHOLE_SHARDS


# ---- input checks ---------------------------------------------------------------------------
def load_tokenizer(tokenizer_dir: Path) -> Tokenizer:
    path = Path(tokenizer_dir) / "tokenizer.json"
    if not path.is_file():
        raise UserInputError(f"examples: {path} not found; expected a vocab artifact (HF tokenizer directory)")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - tokenizers reports a garbled file as a bare Exception
        raise UserInputError(f"examples: {path}: not a loadable tokenizer ({str(e).splitlines()[0][:200]})") from None
    tok.encode_special_tokens = True  # "[MASK]" in text is text: only packing writes the specials' ids
    wrong = {t: tok.token_to_id(t) for t, i in SPECIAL_IDS.items() if tok.token_to_id(t) != i}
    if wrong:
        raise UserInputError(f"examples: {path} lacks the special tokens at their fixed ids "
                         f"(want {SPECIAL_IDS}, got {wrong})")
    return tok


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as e:
        raise UserInputError(f"examples: {path} is not valid JSON: {e}") from None


def check_length(cfg: ExamplesConfig, tokenizer_dir: Path) -> None:
    """Refuse a ``max_seq_length`` the tokenizer (and so the model's position table) cannot take."""
    if cfg.max_seq_length < MIN_SEQ_LENGTH:  # the config refuses it too; a hand-built one may not
        raise UserInputError(f"examples: max_seq_length must be at least {MIN_SEQ_LENGTH}, got {cfg.max_seq_length}")
    path = Path(tokenizer_dir) / "tokenizer_config.json"
    limit = (_read_json(path) or {}).get("model_max_length")
    # transformers writes a huge sentinel (1e30) when there is no limit
    if isinstance(limit, (int, float)) and limit < 1e9 and cfg.max_seq_length > limit:
        raise UserInputError(f"examples: max_seq_length={cfg.max_seq_length} exceeds model_max_length={int(limit)} of "
                         f"{path} (the position embeddings the vocab was made for); use --max-seq-length "
                         f"{int(limit)} or less")


def corpus_shards(corpus_dir: Path, split: str) -> list[Path]:
    paths = shards.shard_paths(corpus_dir, split)
    if not paths:
        raise UserInputError(f"examples: no {split} shards under {Path(corpus_dir) / shards.DATA_DIR} "
                         f"(expected {split}-NNNNN-of-MMMMM.jsonl.gz; is {corpus_dir} a corpus artifact?)")
    return paths


def parts_per_shard(options, shards: int) -> int:
    """Workers per corpus shard, so that every worker has a part of some shard to do: from the
    local runner's ``direct_num_workers``, or a remote runner's ``--num_workers`` /
    ``--max_num_workers`` (1 when none is given)."""
    if options.view_as(StandardOptions).runner == LOCAL_RUNNER:
        workers = options.view_as(DirectOptions).direct_num_workers or 1
    else:
        w = options.view_as(WorkerOptions)
        workers = w.max_num_workers or w.num_workers or 1
    return max(1, -(-workers // shards))


def tokenizer_threads(options, size: int, processes: bool) -> int:
    """The tokenizer's threads in each worker: a worker process's share of the CPUs
    (:func:`cpus_per_worker`), and the in-process worker's too from :data:`MULTI_WORKER_MIN_BYTES`
    of input; below that one thread, since on small jobs the threads' hand-offs cost more CPU
    time than they save wall time (measured: docs/examples.md, "Figures")."""
    return cpus_per_worker(options) if processes or size >= MULTI_WORKER_MIN_BYTES else 1


def check_remote_runner(cfg: ExamplesConfig, runner: str, in_place: bool, out_dir) -> None:
    """Refuse, before anything starts, what a remote runner's workers cannot reach: a file of this
    machine (``holdout_ids``, which pipeline/stages.py requires to be one) or a local root (the
    corpus shards, the tokenizer and the output). Else each worker failed on it after the job had
    started (FileNotFoundError); the corpus stage refuses a local root the same way."""
    if runner not in REMOTE_RUNNERS:
        return
    if cfg.holdout_ids:
        raise UserInputError(f"examples: holdout_ids={cfg.holdout_ids} is a file on this machine, which the "
                             f"{runner} workers cannot read: build held-out examples with the local runner")
    if not in_place:
        raise UserInputError(f"examples: runner {runner} runs on remote workers, which cannot read the corpus and "
                             f"vocab or write {out_dir} on this machine: keep the artifacts on a store they reach "
                             "(--out gs://BUCKET/kolectra)")


# ---- shell ----------------------------------------------------------------------------------
def corpus_shard_urls(files: list[str], corpus_url: str, split: str) -> list[str]:
    """The ``split`` shards of a corpus artifact on a store, from its manifest's file list."""
    names = sorted(f for f in files if f.startswith(f"{shards.DATA_DIR}/{split}-") and ".jsonl" in f)
    if not names:
        raise UserInputError(f"examples: no {split} shards in {corpus_url} (is it a corpus artifact?)")
    return [storage.join(corpus_url, f) for f in names]


def build(cfg: ExamplesConfig, corpus_dir: Path | str, tokenizer_dir: Path, out_dir: Path | str,
          beam_args: list[str] = (), corpus_files: list[str] | None = None,
          tokenizer_url: str | None = None, other_vocab: bool | None = None) -> StageOutput:
    """Run the examples job over the corpus artifact ``corpus_dir`` with the vocab artifact
    ``tokenizer_dir`` into ``out_dir``; ``beam_args`` are Beam pipeline options (``--runner``,
    ``--direct_num_workers``...) read as the corpus stage reads them. ``other_vocab``: whether the vocab
    was learned from another corpus (its lineage; None: as ``allow_other_corpus_vocab`` says), for the [UNK] warning."""
    tokenizer_dir = Path(tokenizer_dir)
    check_length(cfg, tokenizer_dir)
    tok = load_tokenizer(tokenizer_dir)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    dtype = ids_dtype(vocab_size)
    # on a store, the workers read the corpus shards and the tokenizer in place and write the
    # examples where the artifact lives: nothing passes through this machine's disk
    in_place = storage.is_url(str(out_dir))
    paths = corpus_shard_urls(corpus_files, str(corpus_dir), cfg.split) if corpus_files is not None \
        else [str(p) for p in corpus_shards(Path(corpus_dir), cfg.split)]
    tokenizer_path = tokenizer_url or str(tokenizer_dir / "tokenizer.json")

    size = input_bytes(paths)
    options = pipeline_options(list(beam_args), size)
    runner = options.view_as(StandardOptions).runner
    check_remote_runner(cfg, runner, in_place, out_dir)
    direct = options.view_as(DirectOptions)
    peak = check_local_memory(options, "examples", size, memory_model(parts_per_shard(options, len(paths))))
    parts = parts_per_shard(options, len(paths))  # after the check, which may have lowered the workers
    mode = {"isolated": "several isolated sequences a row", "none": "one sequence a row",
            "stream": "documents streamed across rows"}[cfg.packing]
    progress(f"examples: {len(paths)} {cfg.split} shard(s) of {corpus_dir} -> sequences of {cfg.max_seq_length} "
             f"({mode}), runner {runner_label(options, peak)}")
    processes = runner != LOCAL_RUNNER or direct.direct_running_mode == "multi_processing"
    job = examples_beam.Job(cfg=cfg, tokenizer_path=tokenizer_path, dtype=dtype.name,
                            vocab_size=vocab_size, out_dir=str(out_dir), worker_processes=processes,
                            tokenizer_threads=tokenizer_threads(options, size, processes))
    # Ctrl-C: one line (the store adds that nothing was published), whatever Beam made of it
    with (interruptible("interrupted during the examples job"), examples_beam.in_process_tokenizer(job),
          runner_setup(options), new_pipeline(options) as p):
        examples_beam.recipe(p, job, paths, parts)

    written = take_report(str(out_dir))
    stats = json.loads(storage.read_bytes(storage.join(str(out_dir), "stats.json")).decode("utf-8"))
    if stats["bad_documents"]:
        bad = json.loads(storage.read_bytes(storage.join(str(out_dir), examples_beam.BAD_FILE)).decode("utf-8"))
        raise UserInputError(f"examples: {stats['bad_documents']} unreadable document(s) in {corpus_dir}, e.g. "
                         + "; ".join(bad[:3]))
    if stats["examples"] == 0:
        raise UserInputError(f"examples: the {cfg.split} split of {corpus_dir} yields no tokens")
    progress("examples: " + ", ".join(f"{k}={v}" for k, v in stats.items()))
    for note in (truncation_warning(stats, cfg.max_seq_length), unknown_warning(stats, cfg, other_vocab)):
        if note:
            warn(note)
    return StageOutput(stats=stats, files=written if in_place else None)


def truncation_warning(stats: dict, max_seq_length: int) -> str | None:
    """A line when more than :data:`TRUNCATED_WARN` of the sentences, or more than
    :data:`TRUNCATED_TOKENS_WARN` of the text's tokens, were cut to fit a sequence; it says both shares
    (the tokens' where ``stats`` counts them: examples 6 on)."""
    cut, sentences = stats.get("truncated_sentences", 0), stats.get("sentences", 0)
    lost, text = stats.get("truncated_tokens", 0), stats.get("text_tokens", 0)
    if not (sentences and cut / sentences > TRUNCATED_WARN) and not (text and lost / text > TRUNCATED_TOKENS_WARN):
        return None
    tokens = f", {_share(lost / text)} of the text's tokens ({lost:,} of {text:,})," if text else ""
    return (f"examples: {_share(cut / sentences)} of the sentences ({cut:,} of {sentences:,}) were longer than a sequence "
            f"of {max_seq_length} tokens and were cut: their ends{tokens} are never trained on (a longer --max-seq-length "
            "keeps them)")


def _share(x: float) -> str:
    """A share as a percentage, to a tenth below 10 % (a few sentences of thousands do not read as 0 %)."""
    return f"{x:.0%}" if x >= 0.1 or x == 0 else f"{x:.1%}"


def unknown_warning(stats: dict, cfg: ExamplesConfig, other_vocab: bool | None = None) -> str | None:
    """A line when more than :data:`~kolectra.core.tokens.UNK_RATE_WARN` (the vocab stage's own bound) of the
    text's tokens are ``[UNK]``: a vocabulary of other text (``allow_other_corpus_vocab``) left 67 % of a review
    corpus unknown, published without a word.
    ``other_vocab``: whether the vocab is another corpus's (None: as the setting says); the setting alone
    had blamed another corpus for this corpus's own vocab."""
    unk, text = stats.get("unk_tokens", 0), stats.get("text_tokens", 0)
    if not text or unk / text <= UNK_RATE_WARN:
        return None
    why = ("the vocab was learned from another corpus (allow_other_corpus_vocab=true): use the vocab built from "
           "this corpus" if (cfg.allow_other_corpus_vocab if other_vocab is None else other_vocab) else "raise the vocab's vocab_size or limit_alphabet")
    return (f"examples: {unk / text:.1%} of the text's tokens ({unk:,} of {text:,}) are [UNK] (above {UNK_RATE_WARN:.0%}): "
            f"the model would not see that text; {why}")
