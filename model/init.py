"""Continued pretraining: start the generator/discriminator pair from an existing Hugging Face pair.

``train.init_from`` names a directory with ``discriminator/`` and ``generator/`` (another
kolectra checkpoint's ``hf/``, or a downloaded KoELECTRA pair laid out that way). The shapes
must equal the preset's (the run's config stays the one truth about the model); a difference
is an error that lists every differing setting. With ELECTRA's sharing (``es``) the shared
embedding module is taken from the discriminator, as ELECTRA's own exports carry the same
embeddings in both halves; the generator's other weights (encoder, head, output bias) are its own.
With ``gdes`` the generator keeps its own tables and the discriminator's deltas become the
difference between the two exports' tables; with ``none`` each network takes its own.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from transformers import AutoConfig, ElectraForMaskedLM

from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress
from kolectra.model.electra import TABLES, ElectraPair, hf_configs, plain_state_dict
from kolectra.model.hf_folder import NO_CODE
from kolectra.model.pretrain_inputs import read_vocab, vocab_differences

SHAPE_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "max_position_embeddings", "type_vocab_size")


class InitError(UserInputError):
    """The pair in ``train.init_from`` cannot initialise this run; the message names the directory."""


def _check_shapes(path: Path, want) -> None:
    try:
        have = AutoConfig.from_pretrained(str(path), **NO_CODE)
    except (OSError, ValueError) as e:
        raise InitError(f"{path}: not a Hugging Face model directory: {e}") from None
    diff = [f"{k}: {getattr(have, k, None)} there, {getattr(want, k)} in this run" for k in SHAPE_KEYS
            if getattr(have, k, None) != getattr(want, k)]
    if diff:
        raise InitError(f"{path}: shape differs from the run's config ({'; '.join(diff)}); pick the matching "
                        "preset or set model.* accordingly")


def _weights(cls, path: Path) -> dict[str, torch.Tensor]:
    try:
        return cls.from_pretrained(str(path)).state_dict()
    except pickle.UnpicklingError:  # refused before anything in it ran
        raise InitError(f"{path}: its weights are a pickle holding objects torch's weights_only loader refuses "
                        "(loading it could run code); not loaded") from None


def _check_vocab(path: Path, vocab: dict[str, int]) -> None:
    """Refuse a pair trained with another vocabulary, as ``--resume`` does: equal sizes say nothing
    about which token each id names, and embeddings learned for other tokens are silently wrong."""
    if not vocab:
        return
    if not any((path / name).is_file() for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json")):
        progress(f"pretrain: init_from {path}: no tokenizer beside the weights, so its vocabulary cannot be "
                 "compared with this run's; make sure it is the same")
        return
    try:
        have = read_vocab(path)
    except (OSError, ValueError) as e:
        raise InitError(f"{path}: its tokenizer does not load ({e}); cannot compare vocabularies") from None
    n, examples = vocab_differences(have, vocab)
    if n:
        raise InitError(f"{path}: trained with another vocabulary: {n} of {max(len(have), len(vocab))} ids name "
                        f"a different token ({'; '.join(examples)}); train.init_from needs the run's own "
                        "tokenizer (build the examples with the vocab the pair was trained with)")


def load_pair(pair: ElectraPair, init_dir: Path, model_cfg, vocab_size: int, pad_id: int,
              vocab: dict[str, int] | None = None) -> None:
    """Copy the weights of ``init_dir``'s pair into ``pair`` (in place); with ``vocab`` (the run's
    token -> id), refuse a pair whose tokenizer numbers tokens otherwise."""
    init_dir = Path(init_dir)
    disc_dir, gen_dir = init_dir / "discriminator", init_dir / "generator"
    for d in (disc_dir, gen_dir):
        if not (d / "config.json").is_file():
            raise InitError(f"{d}: missing (train.init_from needs discriminator/ and generator/ with config.json)")
    for d in (disc_dir, gen_dir):
        _check_vocab(d, vocab or {})
    disc_cfg, gen_cfg = hf_configs(model_cfg, vocab_size, pad_id)
    _check_shapes(disc_dir, disc_cfg)
    if pair.generator is not None:
        _check_shapes(gen_dir, gen_cfg)

    disc_state = _weights(type(pair.discriminator), disc_dir)
    # Heads the source lacks (e.g. an MLM head on an RTD export) keep their fresh initialisation.
    own = plain_state_dict(pair.discriminator)
    take = {k: v for k, v in disc_state.items() if k in own and own[k].shape == v.shape}
    if pair.embedding_sharing == "gdes" and pair.generator is not None:
        _load_gdes(pair, take, ElectraForMaskedLM.from_pretrained(str(gen_dir)))
    else:
        pair.discriminator.load_state_dict(take, strict=False)
    fresh = sorted(k for k in own if k not in take)
    if fresh:
        progress(f"pretrain: init_from {disc_dir}: {len(fresh)} tensors start fresh ({fresh[0]}, ...)")
    if pair.generator is not None and pair.embedding_sharing != "es":
        _load_generator(pair, _weights(ElectraForMaskedLM, gen_dir), gen_dir)
    elif pair.generator is not None:
        gen_state = _weights(ElectraForMaskedLM, gen_dir)
        shared = {k: v for k, v in gen_state.items() if k.startswith("electra.embeddings.")}
        emb = pair.embeddings.state_dict()
        if any(not torch.equal(v, emb[k.removeprefix("electra.embeddings.")]) for k, v in shared.items()
               if k.removeprefix("electra.embeddings.") in emb):
            progress(f"pretrain: init_from {gen_dir}: its embeddings differ from the discriminator's; "
                     "the pair shares the discriminator's")
        rest = {k: v for k, v in gen_state.items()
                if not k.startswith("electra.embeddings.") and k != "generator_lm_head.weight"}
        missing, unexpected = pair.generator.load_state_dict(rest, strict=False)
        bad = [k for k in missing if not k.startswith("electra.embeddings.") and k != "generator_lm_head.weight"]
        if bad or unexpected:
            raise InitError(f"{gen_dir}: weights do not fit an ElectraForMaskedLM generator "
                            f"(missing {bad[:3]}, unexpected {unexpected[:3]})")



def _load_generator(pair: ElectraPair, gen_state: dict[str, torch.Tensor], gen_dir: Path) -> None:
    """The whole generator, its own embedding tables included (``gdes`` and ``none``)."""
    missing, unexpected = pair.generator.load_state_dict(gen_state, strict=False)
    bad = [k for k in missing if k != "generator_lm_head.weight"]
    if bad or unexpected:
        raise InitError(f"{gen_dir}: weights do not fit an ElectraForMaskedLM generator "
                        f"(missing {bad[:3]}, unexpected {unexpected[:3]})")


def _load_gdes(pair: ElectraPair, disc_state: dict[str, torch.Tensor], generator: ElectraForMaskedLM) -> None:
    """Discriminator weights where GDES tables hold (exported table - generator's table) as deltas."""
    prefix = "electra.embeddings."
    gen_tables = generator.electra.embeddings
    rest = {k: v for k, v in disc_state.items()
            if not (k.startswith(prefix) and k.removeprefix(prefix).split(".")[0] in TABLES)}
    pair.discriminator.load_state_dict(rest, strict=False)
    emb = pair.discriminator.electra.embeddings
    with torch.no_grad():
        for name in TABLES:
            key = f"{prefix}{name}.weight"
            if key in disc_state:
                delta = getattr(emb, name).parametrizations.weight.original
                delta.copy_(disc_state[key] - getattr(gen_tables, name).weight)
