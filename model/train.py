"""The pretrain stage: examples artifact + tokenizer -> ELECTRA checkpoint (hf/ + metrics.jsonl).

``pretrain(cfg, examples_dir, tokenizer_dir, out_dir, resume=False)`` reads top to bottom: check
inputs, seed, build the generator/discriminator pair, AdamW (no decay on biases and LayerNorm)
with linear warmup then linear decay (paper appendix A), optionally resume from the newest
checkpoint, then the RTD step of :mod:`model.rtd` with gradient accumulation, averaging over
ranks and clipping, metrics every ``log_every`` steps (:mod:`model.metrics`), checkpoints every
``save_every`` (:mod:`model.checkpoint`) and the Hugging Face export (:mod:`model.export`).
Which accelerator it runs on, and how many ranks, is :mod:`model.device`'s business alone.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import torch

from model import checkpoint, data, device, export, rtd
from model.config import PretrainConfig, TrainConfig, validate
from model.electra import ElectraPair, count_parameters, train_flops_per_sequence
from model.metrics import METRIC_KEYS, MetricsLog, eta_text
from pipeline.config import to_dict
from pipeline.stage import StageOutput, progress


class PretrainInputError(ValueError):
    """Examples and tokenizer do not fit together or with the config; the message names the file."""


def read_specials(tokenizer_dir: Path, index: data.ExamplesIndex) -> rtd.Specials:
    """Special-token ids from the tokenizer, checked against the examples' index.json."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    except (OSError, ValueError) as e:
        raise PretrainInputError(f"{tokenizer_dir}: not a loadable tokenizer directory: {e}") from None
    ids = {name: tok.convert_tokens_to_ids(tok_str) for name, tok_str in
           (("pad_id", "[PAD]"), ("cls_id", "[CLS]"), ("sep_id", "[SEP]"), ("mask_id", "[MASK]"))}
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


def build_optimizer(model: torch.nn.Module, t: TrainConfig) -> torch.optim.Optimizer:
    """AdamW; biases and LayerNorm weights are not decayed (BERT/ELECTRA practice)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t.lr, betas=(0.9, 0.999), eps=t.adam_eps)


def lr_at(step: int, t: TrainConfig) -> float:
    """Learning rate for optimizer update ``step`` (0-based): linear warmup, then linear decay to 0."""
    if step < t.warmup_steps:
        return t.lr * (step + 1) / t.warmup_steps
    return t.lr * max(0.0, (t.steps - step) / max(1, t.steps - t.warmup_steps))


def pretrain(cfg: PretrainConfig, examples_dir: Path, tokenizer_dir: Path, out_dir: Path,
             resume: bool = False) -> StageOutput:
    """Train and export; with ``resume`` continue from the newest complete checkpoint in ``out_dir``."""
    validate(cfg)
    t_start = time.perf_counter()
    out_dir, t = Path(out_dir), cfg.train
    out_dir.mkdir(parents=True, exist_ok=True)

    # --- inputs ---
    index = data.read_index(examples_dir)
    specials = read_specials(tokenizer_dir, index)
    seq_len = index.max_seq_length
    if seq_len > cfg.model.max_position:
        raise PretrainInputError(f"{index.root / 'index.json'}: max_seq_length {seq_len} exceeds "
                                 f"model.max_position {cfg.model.max_position}")
    if cfg.model.vocab_size not in (0, specials.vocab_size):
        raise PretrainInputError(f"model.vocab_size={cfg.model.vocab_size} but the tokenizer has {specials.vocab_size}")
    model_cfg = dataclasses.replace(cfg.model, vocab_size=specials.vocab_size)
    if seq_len != cfg.max_seq_length:
        progress(f"pretrain: note — examples have {seq_len} tokens, preset {cfg.preset} was laid out for "
                 f"{cfg.max_seq_length}")

    dev = device.resolve(t.device, t.bf16, t.cpu_threads)
    where = dev.describe() + (f" x {dev.world_size} ranks" if dev.world_size > 1 else "")
    try:
        if t.batch_size % (t.grad_accum * dev.world_size):
            raise PretrainInputError(f"train.batch_size {t.batch_size} is not divisible by grad_accum "
                                     f"{t.grad_accum} x {dev.world_size} ranks")
        # --- model, data, optimizer ---
        dev.seed(cfg.seed)  # the same initial weights on every rank
        model = ElectraPair(model_cfg, specials.vocab_size, specials.pad_id).to(dev.torch_device)
        model.train()
        dev.seed(cfg.seed + 1 + dev.rank)  # masking and sampling differ between ranks
        loader = data.ExampleLoader(examples_dir, batch_size=t.batch_size // (t.grad_accum * dev.world_size),
                                    seed=cfg.seed, rank=dev.rank, world_size=dev.world_size)
        optimizer = build_optimizer(model, t)
        params = [p for g in optimizer.param_groups for p in g["params"]]
        if dev.is_main:
            progress(f"pretrain: {cfg.preset} on {where}, "
                     f"{count_parameters(model.discriminator):,} discriminator parameters, {index.examples:,} "
                     f"examples of {seq_len} tokens, {t.steps} steps of {t.batch_size}")

        # --- resume ---
        start, resume_from = 0, checkpoint.latest(out_dir) if resume else None
        if resume_from is not None:
            state, own = checkpoint.load(resume_from, dev.rank)
            if state["config"] != to_dict(cfg):
                raise PretrainInputError(f"{resume_from}: saved by a run with another config; cannot resume")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            loader.load_state_dict(state["loader"])
            dev.set_rng_state(own["rng"])
            start = state["step"]
            if dev.is_main:
                progress(f"pretrain: resuming at step {start} from {resume_from}")
        elif dev.is_main:
            checkpoint.clear(out_dir)
        log = MetricsLog(out_dir / "metrics.jsonl", dev, t.steps, resume_step=start)
        if resume_from is not None:
            log.load_state_dict(own["log"])

        # --- loop ---
        for step in range(start, t.steps):
            lr = lr_at(step, t)
            for group in optimizer.param_groups:
                group["lr"] = lr
            for _ in range(t.grad_accum):
                batch_np = next(loader)
                tokens = int((batch_np["input_ids"] != specials.pad_id).sum())  # counted on the host: no sync
                batch = dev.to_device(batch_np)
                with dev.autocast():
                    out = rtd.electra_step(model, batch["input_ids"], batch["token_type_ids"], specials,
                                           cfg.objective)
                (out.loss / t.grad_accum).backward()
                log.add(out.metrics, 1.0 / t.grad_accum, tokens)
            dev.all_reduce_grads(params)
            torch.nn.utils.clip_grad_norm_(params, t.clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            dev.step_done()
            done = step + 1
            log.step_done(done, lr, write=done % t.log_every == 0 or done == t.steps)
            if t.save_every and done % t.save_every == 0 and done < t.steps:
                shared = {"step": done, "config": to_dict(cfg), "model": model.state_dict(),
                          "optimizer": optimizer.state_dict(), "loader": loader.state_dict()}
                checkpoint.save(out_dir, done, shared if dev.is_main else None,
                                {"rng": dev.rng_state(), "log": log.state_dict()},
                                rank=dev.rank, barrier=dev.barrier, save_fn=dev.save)
        log.close()

        # --- export and accounting ---
        wall = time.perf_counter() - t_start
        n_masked = rtd.num_slots(cfg.objective.mask_prob, seq_len)
        flops = t.steps * t.batch_size * train_flops_per_sequence(model_cfg, specials.vocab_size, seq_len, n_masked)
        facts = {"preset": cfg.preset, "objective": cfg.objective.objective, "steps": t.steps,
                 "batch size": t.batch_size, "sequence length": seq_len, "training FLOPs": f"{flops:.3e}",
                 "wall time": f"{wall:.0f} s", "device": where}
        if dev.is_main:
            model.eval()
            export.export_pair(model, tokenizer_dir, out_dir / "hf", facts)
            checkpoint.clear(out_dir)
        dev.barrier()
        stats = {
            "steps": t.steps, "final": {k: log.last[k] for k in METRIC_KEYS},
            "examples_seen": t.steps * t.batch_size, "epochs": t.steps * t.batch_size / index.examples,
            "tokens_seen": t.steps * t.batch_size * seq_len, "max_seq_length": seq_len, "masked_slots": n_masked,
            "vocab_size": specials.vocab_size, "ranks": dev.world_size, "resumed_from_step": start,
        }
        compute = {"parameters": count_parameters(model.discriminator),
                   # the generator as exported: its embeddings (shared in training) included
                   "generator_parameters": count_parameters(model.generator),
                   "trained_parameters": count_parameters(model), "flops": flops,
                   "wall_seconds": round(time.perf_counter() - t_start, 3),
                   "device": where}
        if dev.is_main:
            progress(f"pretrain done: {t.steps} steps in {eta_text(wall)}, final loss {log.last['loss']:.4f}")
        return StageOutput(stats=stats, compute=compute)
    finally:
        dev.close()
