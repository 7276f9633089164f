"""Step-time comparison: kolectra's RTD step against a straightforward Hugging Face one.

For ``benchmarks/pretrain.py``. The naive step is what one writes first with transformers'
stock pieces: BERT-style Bernoulli masking (a data-dependent number of masked tokens), the
generator's full ``forward(labels=...)`` (vocabulary logits at every position), sampling with
``torch.multinomial`` on the boolean-indexed masked rows, the discriminator's
``forward(labels=...)`` (boolean-indexed loss) and 2-D attention masks. Ours: static N slots,
generator head only at those slots, Gumbel-max, gather/weight losses, a 4-D bias (:mod:`model.rtd`).
Both train the same :class:`ElectraPair` with the same optimizer, on the same random batches.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from model import config, rtd
from model.electra import ElectraPair
from model.train import build_optimizer


def naive_step(model: ElectraPair, ids_BL, types_BL, sp: rtd.Specials, obj: config.ObjectiveConfig) -> torch.Tensor:
    attn_BL = (ids_BL != sp.pad_id).long()
    special = ~rtd.candidates(ids_BL, sp)
    chosen = torch.bernoulli(torch.full(ids_BL.shape, obj.mask_prob)).bool() & ~special
    to_mask = chosen & torch.bernoulli(torch.full(ids_BL.shape, obj.mask_token_prob)).bool()
    masked = ids_BL.masked_fill(to_mask, sp.mask_id)
    labels = ids_BL.masked_fill(~chosen, -100)
    gen = model.generator(input_ids=masked, attention_mask=attn_BL, token_type_ids=types_BL, labels=labels)
    with torch.no_grad():
        probs = torch.softmax(gen.logits[chosen] / obj.temperature, dim=-1)
        sampled = torch.multinomial(probs, 1).squeeze(-1)
    disc_in = ids_BL.clone()
    disc_in[chosen] = sampled
    disc = model.discriminator(input_ids=disc_in, attention_mask=attn_BL, token_type_ids=types_BL,
                               labels=(disc_in != ids_BL).long())
    return gen.loss + obj.disc_weight * disc.loss


def ours_step(model, ids_BL, types_BL, sp, obj) -> torch.Tensor:
    return rtd.electra_step(model, ids_BL, types_BL, sp, obj).loss


def _time(step_fn, model, batches, sp, obj, warmup: int) -> float:
    opt = build_optimizer(model, config.TrainConfig())
    for i, (ids, types) in enumerate(batches):
        if i == warmup:
            t0 = time.perf_counter()
        loss = step_fn(model, ids, types, sp, obj)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        float(loss.detach())  # both sides wait for the step to finish
    return (time.perf_counter() - t0) / (len(batches) - warmup)


def compare(preset: str = "tiny", vocab_size: int = 8000, seq_len: int = 128, batch_size: int = 16,
            steps: int = 6, warmup: int = 2, fill: float = 1.0, seed: int = 0) -> dict:
    """Seconds per training step for both implementations on CPU; ``fill`` = share of non-padding."""
    cfg = config.preset(preset)
    model_cfg = dataclasses.replace(cfg.model, vocab_size=vocab_size)
    sp = rtd.Specials(vocab_size=vocab_size)
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(steps + warmup):
        ids = torch.randint(5, vocab_size, (batch_size, seq_len), generator=g)
        n = max(4, int(seq_len * fill))
        ids[:, 0], ids[:, n - 1], ids[:, n:] = sp.cls_id, sp.sep_id, sp.pad_id
        batches.append((ids, torch.zeros_like(ids)))
    result = {}
    for name, fn in (("ours", ours_step), ("naive_hf", naive_step)):
        torch.manual_seed(seed)
        model = ElectraPair(model_cfg, vocab_size, sp.pad_id).train()
        result[name] = _time(fn, model, batches, sp, cfg.objective, warmup)
    return {"preset": preset, "vocab_size": vocab_size, "seq_len": seq_len, "batch_size": batch_size,
            "fill": fill, "seconds_per_step": result, "speedup": result["naive_hf"] / result["ours"]}
