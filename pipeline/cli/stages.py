"""``kolectra corpus | vocab | examples | pretrain`` and ``kolectra run``: the commands that build
artifacts, each a stage's (``run``: the whole chain on the embedded sample).

A command here is three functions the table in :mod:`pipeline.cli.commands` names: ``add_*`` (its
options), ``config_*`` (its resolved config, for ``--print-config``) and ``run_*`` (the build). Its
flags are spelled-out ``--set`` keys (``*_FLAGS``: flag -> config key). The stages
(:mod:`kolectra.pipeline.stages`, torch and Beam) and the configs are imported when a command runs,
so ``--help`` and ``--print-config`` answer without them.
"""

from __future__ import annotations

import argparse

from kolectra.pipeline.cli.options import flag_sets as _flag_sets
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Store


def _stage_common(args: argparse.Namespace) -> dict:
    return dict(seed=args.seed, name=args.name, force=args.force)


def _stages():
    # the store and the stages: only for commands that run one (each stage imports its libraries as it runs)
    from kolectra.pipeline import stages

    return stages


def configs():
    """:mod:`kolectra.pipeline.configs`, imported when asked for (torch-free: --print-config answers at once)."""
    from kolectra.pipeline import configs as module

    return module


# ---- corpus -------------------------------------------------------------------------------------
CORPUS_FLAGS = {"format": "format", "text_field": "text_field", "id_field": "id_field", "keep_fields": "keep_fields"}


def add_corpus(p: argparse.ArgumentParser) -> None:
    from kolectra.corpus.config import default_config

    d = default_config()
    p.add_argument("--input", action="append", required=True, metavar="PATH_OR_GLOB",
                   help="raw text, repeatable; .gz/.bz2/.zst by extension; gs:// s3:// hdfs:// work "
                        "(e.g. --input 'raw/*.jsonl.gz')")
    p.add_argument("--format", choices=["auto", "text", "jsonl", "blocks", "parquet"], default=None,
                   help=f"text: a document a line; jsonl: an object a line; blocks: documents separated by blank "
                        f"lines; parquet: a document a row; auto: jsonl for *.jsonl|*.json|*.ndjson, parquet for "
                        f"*.parquet|*.pq, else text (default {d.format})")
    p.add_argument("--preset", choices=["default", "production"], default="default",
                   help="default: Unicode clean-up, length filters, exact dedup; production: also web cleaning, "
                        "quality filters and near-duplicate removal (default: default)")
    p.add_argument("--text-field", default=None, metavar="FIELD",
                   help=f"jsonl, parquet: the field (column) holding the text (default {d.text_field}; e.g. --text-field body)")
    p.add_argument("--id-field", default=None, metavar="FIELD",
                   help=f"jsonl, parquet: the field (column) holding the document's id, kept as its id in the corpus; without it the "
                        f"id is made from file and line (default {d.id_field}; e.g. --id-field doc_id)")
    p.add_argument("--keep-fields", default=None, metavar="FIELD,...",
                   help="jsonl, parquet: input fields (columns) carried into each document as they are; a document whose input lacks "
                        "one gets null, counted in stats.json (missing_fields); of duplicates, the kept copy's "
                        "(default: none; e.g. --keep-fields rating,movie_id,date)")


def config_corpus(args) -> tuple:
    return configs().resolve("corpus", preset=args.preset, sets=_flag_sets(args, CORPUS_FLAGS), seed=args.seed)


def run_corpus(args, store: Store, beam_args: list[str]) -> Artifact:
    return _stages().corpus(store, args.input, preset=args.preset, sets=_flag_sets(args, CORPUS_FLAGS),
                            beam_args=beam_args, **_stage_common(args))


# ---- vocab --------------------------------------------------------------------------------------
def add_vocab(p: argparse.ArgumentParser) -> None:
    from kolectra.vocab.config import default_config

    p.add_argument("--corpus", required=True, metavar="REF",
                   help="the corpus artifact: directory, name-id, id, id prefix or name (e.g. --corpus sample)")
    p.add_argument("--vocab-size", type=int, default=None, metavar="N",
                   help=f"entries, specials and [unusedN] included (default {default_config().vocab_size}; "
                        "e.g. --vocab-size 8000)")


VOCAB_FLAGS = {"vocab_size": "vocab_size"}


def config_vocab(args) -> tuple:
    return configs().resolve("vocab", sets=_flag_sets(args, VOCAB_FLAGS), seed=args.seed)


def run_vocab(args, store: Store, beam_args: list[str]) -> Artifact:
    return _stages().vocab(store, args.corpus, sets=_flag_sets(args, VOCAB_FLAGS), beam_args=beam_args,
                           **_stage_common(args))


# ---- examples -----------------------------------------------------------------------------------
def add_examples(p: argparse.ArgumentParser) -> None:
    from kolectra.corpus.examples_config import default_config

    p.add_argument("--corpus", required=True, metavar="REF", help="the corpus artifact (e.g. --corpus sample)")
    p.add_argument("--vocab", required=True, metavar="REF",
                   help="the vocab artifact learned from that corpus (e.g. --vocab morph_wordpiece)")
    p.add_argument("--max-seq-length", type=int, default=None, metavar="N",
                   help=f"tokens a row (default {default_config().max_seq_length}; e.g. --max-seq-length 512)")


EXAMPLES_FLAGS = {"max_seq_length": "max_seq_length"}


def config_examples(args) -> tuple:
    return configs().resolve("examples", sets=_flag_sets(args, EXAMPLES_FLAGS), seed=args.seed)


def run_examples(args, store: Store, beam_args: list[str]) -> Artifact:
    sets = _flag_sets(args, EXAMPLES_FLAGS)
    return _stages().examples(store, args.corpus, args.vocab, sets=sets, beam_args=beam_args,
                              **_stage_common(args))


# ---- pretrain -----------------------------------------------------------------------------------
# Pretrain flags -> keys of model.config.PretrainConfig.
PRETRAIN_FLAGS = {"preset": "preset", "objective": "objective.objective", "device": "train.device", "steps": "train.steps",
                  "save_every": "train.save_every", "embedding_sharing": "model.embedding_sharing"}


def add_pretrain(p: argparse.ArgumentParser) -> None:
    from kolectra.model.config import OBJECTIVES
    from kolectra.model.presets import PRESETS

    # no argparse choices: a bad value is the config's one-line error, naming the known ones
    steps = ", ".join(f"{k} {f().train.steps:,}" for k, f in PRESETS.items())
    p.add_argument("--examples", required=True, metavar="REF", help="the examples artifact (e.g. --examples seq128)")
    p.add_argument("--preset", default=None, help=f"model size and training recipe: {' | '.join(PRESETS)}; "
                   "sizes in docs/pretraining.md; the same as preset = NAME in a --config file, which it overrides "
                   "(default tiny; e.g. --preset small)")
    p.add_argument("--objective", default=None, help=f"{' | '.join(OBJECTIVES)}: electra is replaced token "
                   "detection; hybrid, corrective and mlm_then_rtd add a vocabulary head to its discriminator; the "
                   "others are the paper's ablations (default electra; docs/pretraining.md)")
    p.add_argument("--embedding-sharing", default=None, choices=["es", "gdes", "none"],
                   help="es: ELECTRA's shared embeddings; gdes: DeBERTaV3's gradient-disentangled "
                        "sharing; none: separate tables (default es)")
    p.add_argument("--device", default=None,
                   help="cpu | cuda | xla (a TPU through torch-xla): where to train (default cpu; e.g. --device cuda)")
    p.add_argument("--steps", type=int, default=None, metavar="N",
                   help=f"optimizer steps (default: the preset's: {steps}; e.g. --steps 600)")
    p.add_argument("--save-every", type=int, default=None, metavar="N",
                   help="write a checkpoint every N steps, which --resume continues from (default 0: none; "
                        "e.g. --save-every 1000)")
    p.add_argument("--resume", action="store_true",
                   help="continue the same request from its newest complete checkpoint")


def config_pretrain(args) -> tuple:
    return configs().resolve("pretrain", sets=_pretrain_sets(args), seed=args.seed)


def _pretrain_sets(args: argparse.Namespace) -> list[str]:
    return _flag_sets(args, PRETRAIN_FLAGS)


def run_pretrain(args, store: Store, beam_args: list[str]) -> Artifact:
    cfg, _ = config_pretrain(args)
    if cfg.train.steps == 0:  # kolectra study makes its untrained floor itself, through the stage
        raise ArtifactError("train.steps: 0 would publish the random initialisation as a trained checkpoint; "
                            "give at least 1 where the 0 was given (e.g. --steps 600, or --set train.steps=600; "
                            "not both: a key given twice is refused)")
    return _stages().pretrain(store, args.examples, sets=_pretrain_sets(args),
                              resume=args.resume, **_stage_common(args))


# ---- run ----------------------------------------------------------------------------------------
def add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="rebuild every stage")


def run_run(args, store: Store, beam_args: list[str]) -> Artifact:
    from kolectra.pipeline.run import run_sample

    return run_sample(store, force=args.force)
