"""The optimizer and learning-rate schedule of every kolectra training run (pretraining and fine-tuning).

AdamW over parameter groups: biases and LayerNorm weights are not decayed (BERT/ELECTRA
practice), and fine-tuning may scale each layer's learning rate by its depth (layer-wise LR decay,
ELECTRA, Clark et al. 2020, appendix A). With L encoder layers numbered 0..L-1 from the bottom:

    head (classifier / qa_outputs, anything outside the encoder) : decay^0
    encoder layer i                                               : decay^(L - i)
    embeddings (+ embeddings_project)                             : decay^(L + 1)

so the exponents are consecutive. The ELECTRA reference code gives the head depth L + 2 while
layer i gets i + 1, which makes every non-head exponent one larger (top layer decay^2,
embeddings decay^(L + 2)); we do not copy that off-by-one.

Two settings reproduce the reference pretraining recipe (google-research/electra,
``model/optimization.py``) where it differs from today's usual one:

- ``bias_correction=False``: the reference ``AdamWeightDecayOptimizer`` divides the raw first
  moment by the raw second moment, with no ``1 - beta^t`` corrections. That is AdamW with, at update
  t, lr' = lr * (1 - b1^t) / sqrt(1 - b2^t), eps' = eps / sqrt(1 - b2^t) and decay rescaled so
  that lr' * wd' = lr * wd; :func:`set_lr` sets those per step, so every device keeps torch's
  fused or traced AdamW kernel.
- ``schedule="warmup_times_decay"``: the reference multiplies a linear decay over all steps by
  a linear warm-up factor, lr * min(1, t / W) * (1 - t / T), where the usual schedule warms up to
  the peak and then decays linearly over the remaining T - W steps. Both schedules here count
  warm-up from (t + 1) / W, so the first update is not one at rate 0 as in the reference.
"""

from __future__ import annotations

import math
import re

import torch

from kolectra.model.config import SCHEDULES  # noqa: F401  (the schedules lr_scale knows)
from kolectra.model.schedule import lr_scale  # noqa: F401  (torch-free, beside what it reaches in a run)

_LAYER_RE = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")


def no_weight_decay(name: str) -> bool:
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name


def layer_depth(name: str, num_layers: int) -> int:
    """Exponent of the layer-wise decay for a parameter name of an HF Electra* model."""
    m = _LAYER_RE.search(name)
    if m:
        return num_layers - int(m.group(1))
    if ".embeddings" in name or name.startswith("embeddings") or "embeddings_project" in name:
        return num_layers + 1
    return 0


def param_groups(model: torch.nn.Module, lr: float, weight_decay: float, layerwise_decay: float = 1.0,
                 num_layers: int = 0) -> list[dict]:
    """One group per (depth, decayed or not), in order of first appearance; each remembers its
    ``base_lr`` (the schedule scales it) and its parameters' ``names``."""
    groups: dict[tuple[int, bool], dict] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        depth = layer_depth(name, num_layers) if layerwise_decay != 1.0 else 0
        nowd = no_weight_decay(name)
        if (depth, nowd) not in groups:
            base = lr * layerwise_decay ** depth
            groups[(depth, nowd)] = {"params": [], "names": [], "depth": depth, "lr": base, "base_lr": base,
                                     "weight_decay": 0.0 if nowd else weight_decay,
                                     "base_weight_decay": 0.0 if nowd else weight_decay}
        groups[(depth, nowd)]["params"].append(p)
        groups[(depth, nowd)]["names"].append(name)
    return list(groups.values())


def build(model: torch.nn.Module, lr: float, weight_decay: float, betas: tuple[float, float] = (0.9, 0.999),
          eps: float = 1e-6, fused: bool = False, layerwise_decay: float = 1.0,
          num_layers: int = 0, lr_on: torch.device | None = None) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`; ``fused`` (CPU and CUDA): one kernel for the whole update.

    ``lr_on``: each group's rate a tensor on that device and AdamW ``capturable`` (its step counts
    on the device too), for an update recorded as a CUDA graph (:mod:`model.step_graph`), which
    reads every value from the device; :func:`set_lr` then sets the rates in place."""
    groups = param_groups(model, lr, weight_decay, layerwise_decay, num_layers)
    for g in groups:
        g.pop("names")
        g["base_eps"] = eps
        if lr_on is not None:  # float32: what torch's fused kernels take a tensor rate as
            g["lr"] = torch.tensor(g["lr"], dtype=torch.float32, device=lr_on)
    flags = {**({"fused": True} if fused else {}), **({"capturable": True} if lr_on is not None else {})}
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, **flags)


def set_lr(optimizer: torch.optim.Optimizer, step: int, scale: float, bias_correction: bool = True) -> None:
    """Set every group's rate for update ``step`` (0-based): ``base_lr * scale``, and without bias
    correction the equivalent AdamW settings described in the module docstring. A rate kept on the
    device (:func:`build`'s ``lr_on``) is set in place, where a recorded update reads it."""
    for g in optimizer.param_groups:
        lr = g["base_lr"] * scale
        if not bias_correction:
            b1, b2 = g["betas"]
            t = step + 1  # torch's AdamW counts updates from 1
            root = math.sqrt(1.0 - b2 ** t)
            corrected = lr * (1.0 - b1 ** t) / root
            g["eps"] = g["base_eps"] / root
            g["weight_decay"] = g["base_weight_decay"] * lr / corrected if corrected else g["base_weight_decay"]
            lr = corrected
        if isinstance(g["lr"], torch.Tensor):
            g["lr"].fill_(lr)
        else:
            g["lr"] = lr
