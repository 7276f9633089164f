"""The pretraining presets, ``tiny`` to ``base``: plain functions written out in full so a reader sees
every number (paper: Clark et al. 2020, "ELECTRA: Pre-training Text Encoders as Discriminators Rather
Than Generators", tables 6-7; KoELECTRA v3 from the monologg/KoELECTRA README), and how a request
names one (:func:`requested_preset`) and keeps to it (:func:`check_applied`).

Built of :mod:`kolectra.model.config`'s dataclasses, which import nothing of this; what resolves a
pretrain request (:mod:`kolectra.pipeline.configs`) starts from :func:`preset`.
"""

from __future__ import annotations

from typing import Callable, Sequence

from kolectra.core.config import ConfigError
from kolectra.model.config import ModelConfig, ObjectiveConfig, PretrainConfig, TrainConfig


def tiny() -> PretrainConfig:
    """For tests and the end-to-end sample: a few hundred steps in about a minute on 2 CPU cores."""
    return PretrainConfig(
        preset="tiny",
        model=ModelConfig(
            hidden=64, layers=2, heads=2, intermediate=256, embedding_size=64,
            generator_hidden=32, generator_layers=2, generator_heads=1, generator_intermediate=128,
            max_position=512,
        ),
        objective=ObjectiveConfig(),
        train=TrainConfig(
            steps=200, batch_size=16, lr=2e-3, warmup_steps=20, weight_decay=0.01,
            clip=1.0, grad_accum=1, log_every=10, cpu_threads=1,
        ),
        max_seq_length=128,
    )


def mini() -> PretrainConfig:
    """Sized for CPU research budgets (an hour or two on a few cores): most FLOPs in the encoder body.

    ELECTRA-Small's shape at a third of its depth and half its width (4 layers of 128, generator a
    quarter as wide, as the paper recommends). Build its vocabulary small, ``kolectra vocab
    --vocab-size 8000``: with 35k entries the generator's softmax would take a third of the step
    (the trainer prints the split). The learning rate is high for a small model on a short budget;
    warm-up is 10 % of the steps (a shorter ``--steps`` scales it: :func:`kolectra.model.config.fit_warmup`).

    No dropout: at these budgets a run sees the corpus about once, so there is nothing to
    regularise, and dropout slows the discriminator's escape from its class prior (the measurements:
    docs/studies.md, "Where the discriminator leaves the prior").
    """
    return PretrainConfig(
        preset="mini",
        model=ModelConfig(
            hidden=128, layers=4, heads=2, intermediate=512, embedding_size=128,
            generator_hidden=32, generator_layers=4, generator_heads=1, generator_intermediate=128,
            max_position=512, dropout=0.0, attention_dropout=0.0,
        ),
        objective=ObjectiveConfig(),
        train=TrainConfig(
            steps=2000, batch_size=32, lr=1e-3, warmup_steps=200, weight_decay=0.01,
            clip=1.0, grad_accum=1, log_every=50,
        ),
        max_seq_length=128,
    )


def small() -> PretrainConfig:
    """ELECTRA-Small as in the paper: generator 1/4 of the discriminator's width (Table 6)."""
    return PretrainConfig(
        preset="small",
        model=ModelConfig(
            hidden=256, layers=12, heads=4, intermediate=1024, embedding_size=128,
            generator_hidden=64, generator_layers=12, generator_heads=1, generator_intermediate=256,
            max_position=512,
        ),
        objective=ObjectiveConfig(),
        train=TrainConfig(
            steps=1_000_000, batch_size=128, lr=5e-4, warmup_steps=10_000, weight_decay=0.01,
            clip=1.0, grad_accum=1, log_every=100,
        ),
        max_seq_length=128,
    )


def small_plus_plus() -> PretrainConfig:
    """KoELECTRA-Small-v3 style: the generator as wide as the discriminator, sequences of 512."""
    return PretrainConfig(
        preset="small++",
        model=ModelConfig(
            hidden=256, layers=12, heads=4, intermediate=1024, embedding_size=128,
            generator_hidden=256, generator_layers=12, generator_heads=4, generator_intermediate=1024,
            max_position=512,
        ),
        objective=ObjectiveConfig(),
        train=TrainConfig(
            steps=1_000_000, batch_size=256, lr=5e-4, warmup_steps=10_000, weight_decay=0.01,
            clip=1.0, grad_accum=1, log_every=100,
        ),
        max_seq_length=512,
    )


def base() -> PretrainConfig:
    """ELECTRA-Base: generator 1/3 of the discriminator's width, embeddings as wide as hidden."""
    return PretrainConfig(
        preset="base",
        model=ModelConfig(
            hidden=768, layers=12, heads=12, intermediate=3072, embedding_size=768,
            generator_hidden=256, generator_layers=12, generator_heads=4, generator_intermediate=1024,
            max_position=512,
        ),
        objective=ObjectiveConfig(),
        train=TrainConfig(
            steps=766_000, batch_size=256, lr=2e-4, warmup_steps=10_000, weight_decay=0.01,
            clip=1.0, grad_accum=1, log_every=100,
        ),
        max_seq_length=512,
    )


PRESETS: dict[str, Callable[[], PretrainConfig]] = {
    "tiny": tiny,
    "mini": mini,
    "small": small,
    "small++": small_plus_plus,
    "base": base,
}


def preset(name: str) -> PretrainConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})")
    return PRESETS[name]()


def requested_preset(default: str | None, sets: Sequence[str]) -> str:
    """The preset a pretrain request names: the last ``preset=NAME`` among ``sets`` (a ``--config``
    file's, then ``--set``'s, then the ``--preset`` flag's, which comes last and so wins), else
    ``default`` (else ``tiny``). The preset is the base every other key is applied to: naming it in
    a file or a ``--set`` chooses the model and its recipe, not only the label that the manifest,
    the artifact's name and the model card carry."""
    named = [s for s in sets if "=" in s and s.split("=", 1)[0].strip() == "preset"]
    if not named:
        return default or "tiny"
    name = named[-1].split("=", 1)[1].strip()
    if name not in PRESETS:
        source = getattr(named[-1], "source", None)  # a --config file's line names its file
        raise ConfigError(f"{source + ': ' if source else ''}preset: unknown preset {name!r} "
                          f"(known: {', '.join(PRESETS)})")
    return name


def check_applied(cfg: PretrainConfig) -> None:
    """Refuse a ``max_seq_length`` other than the preset's: the examples artifact decides the
    sequence length a run trains on (``kolectra examples --max-seq-length N``), so another value
    would be recorded in the request, and hashed into its id, without changing the run."""
    laid_out = preset(cfg.preset).max_seq_length
    if cfg.max_seq_length != laid_out:
        raise ConfigError(f"max_seq_length: pretraining takes its sequence length from the examples artifact, so "
                          f"{cfg.max_seq_length} would change nothing; build examples with --max-seq-length "
                          f"{cfg.max_seq_length} and pass those (the {cfg.preset} preset's {laid_out} is only "
                          "what it was laid out for)")
