"""What pretraining reads before it builds anything: the examples' index and the tokenizer, checked
against each other and the config (:func:`read_inputs`). Part of the pretrain stage
(:mod:`kolectra.model.train`); a mismatch is a :class:`PretrainInputError` naming the file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress
from kolectra.core.tokens import SPECIALS_MAP
from kolectra.model import data, rtd
from kolectra.model.config import ModelConfig, PretrainConfig
from kolectra.model.hf_folder import NO_CODE
from kolectra.model.launcher import launcher_rank_and_world


class PretrainInputError(UserInputError):
    """Examples and tokenizer do not fit together or with the config; the message names the file."""


def batch_offer(examples: int, grad_accum: int, device: str) -> str:
    """What train.batch_size may be with ``examples`` rows: at most them, and divisible by train.grad_accum
    times the devices a micro-batch is split over (:func:`kolectra.model.train.start`). Those are the
    launcher's ranks (torchrun's WORLD_SIZE, known before the device is built) on the CPU and CUDA; under
    2 ranks the offer was refused next ('not divisible by grad_accum 1 x 2 devices'). An XLA mesh's
    devices are known only once it is built: the offer says so."""
    ranks = launched = 1 if device == "xla" else launcher_rank_and_world()[1]
    accum = grad_accum
    if not (fit := examples // (accum * ranks) * accum * ranks):
        accum, fit = 1, examples // ranks * ranks  # too few for a row a micro-batch and rank: no accumulation
    if not fit:  # fewer examples than ranks: not a row each
        ranks = fit = examples
    what = " x ".join([f"train.grad_accum {accum}"] * (accum > 1) + [f"{ranks} ranks"] * (ranks > 1))
    said = "; ".join([f"a multiple of {what}"] * bool(what)
                     + [f"on XLA also of {'train.grad_accum x ' * (accum > 1)}the mesh's devices"] * (device == "xla"))
    return (f"to at most {fit:,}" + (f" ({said})" if said else "")
            + (" and train.grad_accum to 1" if accum < grad_accum else "")
            + (f" and run on at most {ranks} rank(s)" if ranks < launched else ""))


def read_specials(tokenizer_dir: Path, index: data.ExamplesIndex) -> rtd.Specials:
    """Special-token ids from the tokenizer, checked against the examples' index.json."""
    from transformers import AutoTokenizer  # noqa: PLC0415 - transformers: slow to import, only when a run starts

    try:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), **NO_CODE)
    except Exception as e:  # noqa: BLE001 - tokenizers reports a garbled tokenizer.json as a bare Exception
        where = tokenizer_dir / "tokenizer.json" if (tokenizer_dir / "tokenizer.json").is_file() else tokenizer_dir
        raise PretrainInputError(f"{where}: not a loadable tokenizer ({str(e).splitlines()[0][:200]})") from None
    ids = {f"{name}_id": tok.convert_tokens_to_ids(SPECIALS_MAP[f"{name}_token"]) for name in ("pad", "cls", "sep", "mask")}
    for name, value in ids.items():
        if value != getattr(index, name):
            raise PretrainInputError(f"{index.root / 'index.json'}: {name}={getattr(index, name)} but the "
                                     f"tokenizer in {tokenizer_dir} has {value}")
    if len(tok) != index.vocab_size:
        raise PretrainInputError(f"{index.root / 'index.json'}: vocab_size={index.vocab_size} but the tokenizer "
                                 f"in {tokenizer_dir} has {len(tok)} tokens")
    # Random replacements skip the leading block of specials and reserved "[unusedN]" slots.
    first_regular = 0
    while first_regular < len(tok) and (first_regular in tok.all_special_ids or re.fullmatch(
            r"\[unused\d+\]", tok.convert_ids_to_tokens(first_regular) or "")):
        first_regular += 1
    if first_regular >= len(tok):
        raise PretrainInputError(f"{tokenizer_dir}: the vocabulary holds only special tokens")
    return rtd.Specials(**ids, vocab_size=len(tok), first_regular_id=first_regular)


def read_vocab(tokenizer_dir: Path) -> dict[str, int]:
    """The vocabulary (token -> id) of a tokenizer directory."""
    from transformers import AutoTokenizer  # noqa: PLC0415 - transformers: slow to import, only when a run starts

    return AutoTokenizer.from_pretrained(str(tokenizer_dir), **NO_CODE).get_vocab()


def vocab_fingerprint(tokenizer_dir: Path, vocab: dict[str, int] | None = None) -> str:
    """sha256 of the vocabulary (token -> id), to refuse resuming with another tokenizer."""
    vocab = read_vocab(tokenizer_dir) if vocab is None else vocab
    return hashlib.sha256(json.dumps(sorted(vocab.items()), ensure_ascii=False).encode()).hexdigest()


def vocab_differences(have: dict[str, int], want: dict[str, int]) -> tuple[int, list[str]]:
    """How many ids name another token (or none) in ``have`` than in ``want``, and a few examples."""
    by_id = [{i: t for t, i in v.items()} for v in (have, want)]
    ids = sorted(set(by_id[0]) | set(by_id[1]))
    differ = [i for i in ids if by_id[0].get(i) != by_id[1].get(i)]
    return len(differ), [f"id {i}: {by_id[0].get(i)!r} there, {by_id[1].get(i)!r} here" for i in differ[:3]]


@dataclasses.dataclass
class Inputs:
    """What the examples and the tokenizer say about the run, checked against the config."""

    index: data.ExamplesIndex
    specials: rtd.Specials
    fingerprint: str  # of the vocabulary: a checkpoint of another tokenizer is refused
    model_cfg: ModelConfig  # vocab_size filled in from the tokenizer
    vocab: dict[str, int] = dataclasses.field(default_factory=dict)  # token -> id, checked against init_from


def nearest_batch(batch_size: int, unit: int, examples: int, grad_accum: int = 1) -> str:
    """The sizes next to ``batch_size`` that divide by ``unit`` (``grad_accum`` x devices) and fit the examples
    (:func:`batch_offer`): the refusal named only the rule to meet. Where none fits but a row a device does,
    without accumulation, it says so, as :func:`batch_offer` does: 3 examples, batch 2, grad_accum 2 on 2 ranks
    was told only to build more text or use fewer devices, while grad_accum 1 runs it."""
    sizes = [n for n in (batch_size // unit * unit, batch_size // unit * unit + unit) if 0 < n <= examples]
    devices = unit // grad_accum
    if not sizes and grad_accum > 1 and (fit := examples // devices * devices):
        return (f"{examples:,} examples cannot fill {unit:,} rows (one a micro-batch and device): set train.batch_size "
                f"to at most {fit:,} (a multiple of {devices} devices) and train.grad_accum to 1, build examples from "
                "more text, or use fewer devices")
    if not sizes:
        return (f"{examples:,} examples cannot fill {unit:,} rows (one a micro-batch and device): build examples "
                "from more text, or use fewer devices")
    return f"set train.batch_size to {' or '.join(f'{n:,}' for n in sizes)} (a multiple of {unit})"


def second_segments(examples_dir: Path) -> tuple[int, int] | None:
    """(sequences with a second segment, all sequences) as the examples stage's ``stats.json`` counts them, or
    None where it is not there to say (a store root's examples, fetched file by file; an older artifact)."""
    try:
        stats = json.loads((Path(examples_dir) / "stats.json").read_text(encoding="utf-8"))
        sequences, single = int(stats["sequences"]), int(stats["single_segment_sequences"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return sequences - single, sequences


def built_single_segment(examples_dir: Path) -> bool:
    """Whether the examples' manifest says they were built with ``single_segment_prob=1`` (no B segment), for an
    artifact whose ``stats.json`` predates its count of them (examples stage version 3)."""
    try:
        config = json.loads((Path(examples_dir) / "manifest.json").read_text(encoding="utf-8"))["config"]
        return float(config["single_segment_prob"]) >= 1
    except (OSError, ValueError, TypeError, KeyError):
        return False


def check_segments(cfg: PretrainConfig, index: data.ExamplesIndex) -> None:
    """A B segment's tokens are of type 1: with one segment embedding the first step failed inside the
    embeddings ('internal error: IndexError: index out of range in self'). Examples whose ``stats.json`` does
    not count them (built before kolectra did, or by other code) are refused too, unless their manifest says
    ``single_segment_prob=1``: reading every shard's segment ids to count them could take longer than a run."""
    if cfg.model.type_vocab_size >= 2:
        return
    where, tvs = index.root / "stats.json", cfg.model.type_vocab_size
    if (counts := second_segments(index.root)) is None:
        if built_single_segment(index.root):
            return
        raise PretrainInputError(f"{where}: no count of the sequences with a second segment (single_segment_sequences: "
                                 "examples built before kolectra counted them), so whether "
                                 f"model.type_vocab_size={tvs} can embed them is unknown (a second segment's tokens "
                                 "are of type 1); set model.type_vocab_size=2 (ELECTRA's), or rebuild the examples "
                                 "(kolectra examples ... --force; with --set single_segment_prob=1 for one segment)")
    if counts[0]:
        raise PretrainInputError(f"{where}: {counts[0]:,} of {counts[1]:,} sequences have a second "
                                 "segment ([CLS] A [SEP] B [SEP], its tokens of type 1), which "
                                 f"model.type_vocab_size={tvs} cannot embed; set "
                                 "model.type_vocab_size=2 (ELECTRA's), or build the examples with "
                                 "--set single_segment_prob=1")


def read_inputs(cfg: PretrainConfig, examples_dir: Path, tokenizer_dir: Path) -> Inputs:
    index = data.read_index(examples_dir)
    specials = read_specials(tokenizer_dir, index)
    seq_len = index.max_seq_length
    if seq_len > cfg.model.max_position:
        raise PretrainInputError(f"{index.root / 'index.json'}: max_seq_length {seq_len} exceeds "
                                 f"model.max_position {cfg.model.max_position}")
    check_segments(cfg, index)
    t = cfg.train
    if index.examples < t.batch_size:  # the loader checks one micro-batch: with grad_accum a step repeated rows
        raise PretrainInputError(f"{index.root / 'index.json'}: {index.examples:,} examples cannot fill one step's batch "
                                 f"of {t.batch_size:,} (train.batch_size, in {t.grad_accum} micro-batch(es)); set "
                                 f"train.batch_size {batch_offer(index.examples, t.grad_accum, t.device)}, or build "
                                 "examples from more text")
    if cfg.model.vocab_size not in (0, specials.vocab_size):
        raise PretrainInputError(f"model.vocab_size={cfg.model.vocab_size} but the tokenizer has {specials.vocab_size}")
    if seq_len != cfg.max_seq_length:
        progress(f"pretrain: note — examples have {seq_len} tokens, preset {cfg.preset} was laid out for "
                 f"{cfg.max_seq_length}")
    if cfg.objective.mask_prob * seq_len < 0.5:  # rtd.num_slots: at least one slot a row
        progress(f"pretrain: note — objective.mask_prob {cfg.objective.mask_prob:g} of a row's {seq_len} tokens rounds "
                 f"to no masked position, so every row masks one (at least one, as BERT and ELECTRA do): "
                 f"{1 / seq_len:.2%} of a full row's tokens, more than asked (stats.masked_slots: 1)")
    vocab = read_vocab(tokenizer_dir)
    return Inputs(index, specials, vocab_fingerprint(tokenizer_dir, vocab),
                  dataclasses.replace(cfg.model, vocab_size=specials.vocab_size), vocab)
