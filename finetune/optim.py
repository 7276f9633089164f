"""AdamW with weight-decay exclusions, layer-wise LR decay and warmup + linear decay.

Shared by ``finetune.nsmc`` and ``finetune.korquad`` (the last stage of the chain).

Layer-wise LR decay (ELECTRA, Clark et al. 2020, appendix A): the task head trains at the base
LR and each step down the network multiplies it by ``decay``.  With L encoder layers numbered
0..L-1 from the bottom we give

    head (classifier / qa_outputs, anything outside the encoder) : decay^0
    encoder layer i                                               : decay^(L - i)
    embeddings (+ embeddings_project)                             : decay^(L + 1)

so the exponents are consecutive.  The ELECTRA reference code assigns the head depth L + 2
while layer i gets i + 1, which makes every non-head exponent one larger than this (top layer
decay^2, embeddings decay^(L + 2)); we do not copy that off-by-one.  With decay = 1.0 all
groups share the base LR.  Biases and LayerNorm weights get no weight decay (BERT/ELECTRA).
"""

from __future__ import annotations

import re

import torch

from kolectra.finetune.config import OptimConfig

_LAYER_RE = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")


def layer_depth(name: str, num_layers: int) -> int:
    """Exponent of ``decay`` for a parameter name of an HF Electra* model."""
    m = _LAYER_RE.search(name)
    if m:
        return num_layers - int(m.group(1))
    if ".embeddings" in name or name.startswith("embeddings") or "embeddings_project" in name:
        return num_layers + 1
    return 0


def no_weight_decay(name: str) -> bool:
    return name.endswith(".bias") or "LayerNorm" in name or "layer_norm" in name


def param_groups(model: torch.nn.Module, cfg: OptimConfig, num_layers: int) -> list[dict]:
    """One group per (depth, decay-or-not); deterministic order (first appearance)."""
    groups: dict[tuple[int, bool], dict] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        depth = layer_depth(name, num_layers) if cfg.layerwise_lr_decay != 1.0 else 0
        nowd = no_weight_decay(name)
        key = (depth, nowd)
        if key not in groups:
            groups[key] = {"params": [], "names": [], "depth": depth,
                           "lr": cfg.lr * cfg.layerwise_lr_decay ** depth,
                           "weight_decay": 0.0 if nowd else cfg.weight_decay}
        groups[key]["params"].append(p)
        groups[key]["names"].append(name)
    return list(groups.values())


def build_optimizer(model: torch.nn.Module, cfg: OptimConfig, num_layers: int,
                    total_steps: int) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    groups = param_groups(model, cfg, num_layers)
    for g in groups:
        g.pop("names")
    opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.adam_betas), eps=cfg.adam_eps)
    warmup = int(round(cfg.warmup_fraction * total_steps))

    def scale(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, scale)
