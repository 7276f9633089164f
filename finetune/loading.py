"""Loading the model to fine-tune, with the checks that keep a wrong directory from training quietly.

A model directory is our checkpoint's ``hf/discriminator/`` or any Hugging Face ELECTRA
discriminator directory.  :func:`load_model` builds the task's ``AutoModelFor*`` from it with a
fresh head initialised from the seed (a head the directory holds, a model fine-tuned before, is
drawn afresh too), places it on the :class:`~kolectra.model.device.Device`,
and refuses, naming what is wrong, a directory whose weights do not fill the encoder (renamed
keys would otherwise leave it at random initialisation, a run that "works" and learns from
scratch), a tokenizer larger than the embedding table, or a ``max_length`` beyond the position
table (a ``max_length`` past the rows it was pretrained on is warned of: :mod:`finetune.positions`).
Its tokenizer never matches special tokens in text (``split_special_tokens``).
``random_init=true`` asks for random encoder weights on purpose (a no-pretraining baseline).
"""

from __future__ import annotations

import pickle
import platform
from pathlib import Path

import torch
from safetensors import SafetensorError

from kolectra.core.config import ConfigError
from kolectra.core.stage import progress
from kolectra.finetune.config import TaskConfig
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.positions import warn_untrained
from kolectra.finetune.reinit import draw_afresh, stream_seed
from kolectra.model.device import Device, compiled
from kolectra.model.electra import count_parameters
from kolectra.model.hf_folder import NO_CODE

SHOWN = 3  # weight names quoted in an error message
PICKLE_REFUSED = ("its weights are a pickle holding objects torch's weights_only loader refuses (loading it "
                  "could run code); not loaded: use a model.safetensors from a source you trust")


def load_tokenizer(model_dir: Path):
    from transformers import AutoTokenizer  # noqa: PLC0415 - heavy import

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FinetuneError(f"{model_dir}: not a HF model directory (no config.json)")
    # text is data: "[SEP]" in a sentence is not a segment boundary, an NER token "[PAD]" not padding;
    # [CLS] and [SEP] come from the post-processor, by id (tokenizer_config.json may say it too)
    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir), split_special_tokens=True, **NO_CODE)
    except (OSError, ValueError, RuntimeError, TypeError) as e:  # ValueError: a tokenizer JSON file cut short or edited
        raise FinetuneError(f"{model_dir}: cannot load its tokenizer ({type(e).__name__}: "
                            f"{str(e).strip().splitlines()[0][:200]})") from None
    if len(tok) <= len(set(tok.all_special_tokens)):  # without tokenizer.json and vocab.txt: every word [UNK]
        raise FinetuneError(f"{model_dir}: its tokenizer has no vocabulary beyond its {len(tok)} special tokens "
                            "(tokenizer.json and vocab.txt missing?): every word would be [UNK]")
    if not tok.is_fast:
        raise FinetuneError(f"{model_dir}: a fast tokenizer (tokenizer.json) is needed for offsets")
    return tok


def load_model(auto_class: str, model_dir: Path, cfg: TaskConfig, dev: Device, tokenizer, pairs: bool = True,
               **config_kwargs) -> torch.nn.Module:
    """``transformers.<auto_class>`` from ``model_dir`` on ``dev``; the head (and with
    ``random_init`` the encoder) drawn from ``cfg.seed``. ``pairs``: the task reads pairs of texts."""
    import transformers  # noqa: PLC0415 - heavy import

    model_dir = Path(model_dir)
    config_kwargs = {**config_kwargs, **dropout_settings(cfg)}
    try:
        config = transformers.AutoConfig.from_pretrained(str(model_dir), **config_kwargs, **NO_CODE)
    except ValueError as e:  # a config.json naming code of its own (auto_map): refused, never asked about
        raise FinetuneError(f"{model_dir}: cannot load its config.json ({str(e).strip().splitlines()[0][:200]})") from None
    check_fits(config, cfg, len(tokenizer), model_dir)
    warn_untrained(config, cfg, model_dir)  # max_length past the rows it was pretrained on: said, not refused
    if cfg.dropout < 0 and getattr(config, "hidden_dropout_prob", None) == 0:
        progress(f"{model_dir / 'config.json'} sets no dropout (a checkpoint pretrained without it): fine-tuning "
                 "runs without; ELECTRA fine-tunes with 0.1 (--set dropout=0.1 --set attention_dropout=0.1)")
    auto = getattr(transformers, auto_class)
    dev.seed(cfg.seed)  # the new head's initialisation draws from the global generator
    if cfg.random_init:
        return compile_forward(dev.place(one_segment(auto.from_config(config), model_dir, pairs)), dev, cfg)
    try:
        # a task head of another size (a model fine-tuned on another task) is drawn afresh below, not refused
        model, info = auto.from_pretrained(str(model_dir), config=config, output_loading_info=True,
                                           ignore_mismatched_sizes=True, **NO_CODE)
    except pickle.UnpicklingError:  # refused before anything in it ran: a refused input, not a bug
        raise FinetuneError(f"{model_dir}: {PICKLE_REFUSED}") from None
    except (OSError, RuntimeError, ValueError, SafetensorError) as e:  # SafetensorError: a damaged header
        raise FinetuneError(f"{model_dir}: cannot load its weights ({type(e).__name__}: "
                            f"{str(e).strip().splitlines()[0]}): a damaged or cut-short file? copy it again") from None
    check_weights(model, info, model_dir)
    if head := loaded_head(model, info):
        # a model fine-tuned before: its head (and its label ids' meaning) would carry over, the same for every seed
        draw_afresh(model, [part for _, part in head], stream_seed(cfg.seed, "head"))
        progress(f"{model_dir} holds a task head ({', '.join(name for name, _ in head)}): drawn afresh from the "
                 f"seed {cfg.seed}, as for a discriminator")
    return compile_forward(dev.place(one_segment(model, model_dir, pairs)), dev, cfg)


def _segment_ids_left_out(module, args, kwargs):
    kwargs.pop("token_type_ids", None)  # the model's own zeros instead
    return args, kwargs


def one_segment(model: torch.nn.Module, model_dir: Path, pairs: bool = True) -> torch.nn.Module:
    """A model with one segment embedding (``type_vocab_size: 1``: kolectra pretrained on examples of
    single_segment_prob=1, or a RoBERTa-style folder) is given no segment ids, so a pair task's second
    segment reads as segment 0, as RoBERTa's tokenizers give it: its token type 1 ended the first step
    with 'internal error: IndexError: index out of range in self'."""
    if int(getattr(model.config, "type_vocab_size", 2) or 2) >= 2:
        return model
    model.register_forward_pre_hook(_segment_ids_left_out, with_kwargs=True)
    if not pairs:  # one text a row: every token is of segment 0 anyway, nothing to say
        return model
    progress(f"{model_dir / 'config.json'} has one segment embedding (type_vocab_size 1): the second text of a pair "
             "(a question's context) goes in as segment 0 too")
    return model


def dropout_settings(cfg: TaskConfig) -> dict:
    """The config.json values ``cfg`` sets in place of the model's own: ``dropout`` is the hidden
    layers' and the task head's (transformers' ELECTRA heads read ``classifier_dropout``, falling
    back to the hidden layers'), ``attention_dropout`` the attention probabilities'."""
    out = {}
    if cfg.dropout >= 0:
        out["hidden_dropout_prob"] = out["classifier_dropout"] = cfg.dropout
    if cfg.attention_dropout >= 0:
        out["attention_probs_dropout_prob"] = cfg.attention_dropout
    return out


def loaded_head(model: torch.nn.Module, info: dict) -> list[tuple[str, torch.nn.Module]]:
    """The modules outside the encoder (the task head) of which some weight was read from the directory."""
    drawn = set(info.get("missing_keys", ())) | {k for k, *_ in info.get("mismatched_keys", ())}
    read = [n for n, _ in model.named_parameters() if not n.startswith(f"{model.base_model_prefix}.") and n not in drawn]
    return [(name, part) for name, part in model.named_children()
            if part is not model.base_model and any(n.startswith(f"{name}.") for n in read)]


def compile_forward(model: torch.nn.Module, dev: Device, cfg: TaskConfig) -> torch.nn.Module:
    """``model`` with its forward under ``torch.compile`` where ``cfg.compile`` (or, for "auto", the
    device) says so; the module itself, its weights and what it saves are unchanged."""
    mode = dev.compile_choice(cfg.compile)
    if mode is not None:
        model.forward = compiled(model.forward, mode)
        progress(f"fine-tuning with a compiled forward (torch.compile, mode {mode}"
                 + (f", {dev.name}'s default" if cfg.compile == "auto" else "")
                 + "): each of its few batch widths compiles once, in its first step; --set compile=false "
                   "runs it eagerly")
    return model


def check_fits(config, cfg: TaskConfig, vocab: int, model_dir: Path) -> None:
    positions = int(getattr(config, "max_position_embeddings", cfg.max_length))
    if cfg.max_length > positions:
        raise ConfigError(f"max_length: {cfg.max_length} is longer than the model's {positions} positions "
                          f"({model_dir / 'config.json'})")
    if vocab > int(config.vocab_size):
        raise FinetuneError(f"{model_dir}: the tokenizer has {vocab} tokens but the model's embedding table "
                            f"{config.vocab_size}: they do not belong together")


RANDOM_START = "Fine-tuning would start from random weights; pass --set random_init=true to do that on purpose"


def check_weights(model: torch.nn.Module, info: dict, model_dir: Path, consequence: str = RANDOM_START) -> None:
    """Every encoder weight must come from the directory; only the new task head may be missing.
    ``model`` may be the encoder itself (``AutoModel``: the probe), whose weight names have no prefix."""
    prefix = "" if model.base_model is model else f"{model.base_model_prefix}."
    missing = sorted(k for k in info.get("missing_keys", ()) if k.startswith(prefix))
    # read with ignore_mismatched_sizes (for the head): an encoder weight of another shape is not read either
    misfit = sorted(k for k, *_ in info.get("mismatched_keys", ()) if k.startswith(prefix))
    missing += misfit
    if not missing:
        return
    total = sum(1 for k, _ in model.named_parameters() if k.startswith(prefix))
    found = sorted(info.get("unexpected_keys", ()))[:SHOWN]
    raise FinetuneError(
        f"{model_dir}: {len(missing)} of {total} encoder weights are missing from its weights file "
        + ("or of another shape there " if misfit else "") +
        f"({', '.join(missing[:SHOWN])}{', ...' if len(missing) > SHOWN else ''})"
        + (f"; it holds others ({', '.join(found)}, ...)" if found else "")
        + f": these are not an ELECTRA discriminator's weights. {consequence}")


def compute_record(model: torch.nn.Module, dev: Device, cfg: TaskConfig, wall_seconds: float, **extra) -> dict:
    """The eval artifact's ``compute``: what ran where, how long, how many parameters."""
    return {"parameters": count_parameters(model), "wall_seconds": round(wall_seconds, 3),
            "device": dev.name, "device_description": dev.describe(),
            "host_cpu": platform.processor() or platform.machine(), "torch_threads": torch.get_num_threads(),
            "precision": "bf16-autocast" if cfg.bf16 else "fp32", **extra}
