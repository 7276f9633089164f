"""Cheaper dropout for training on the CPU: keep-masks from 16-bit random integers.

ELECTRA trains with dropout 0.1 on hidden states and on attention probabilities (paper, table 6).
On the CPU, torch's ``bernoulli_`` draws one Mersenne-Twister number per element, and in a
small++ step in bf16 that was the largest single cost of the step (``benchmarks/pretrain.py``,
profiled). Here one 64-bit word gives four 16-bit integers, and an
element is kept when its integer is at least ``round(p * 65536) - 32768``: p is quantised to
1/65536 (0.1 becomes 0.1000061), and kept values are scaled by 1 / (1 - that p), so the expected
value is exact. The words come from numpy's SFC64 (a small chaotic counter generator; passes
BigCrush and PractRand), seeded per call with one 63-bit draw from torch's generator: torch's
own ``random_`` runs its Mersenne Twister one number at a time, several times slower per 64-bit
word than SFC64, and the draws were still the largest part of this dropout. Several times faster
than ``nn.functional.dropout`` on CPU tensors of these sizes (``benchmarks/pretrain.py``).

:func:`install` swaps a model's ``nn.Dropout`` modules for :class:`Dropout` and points its Hugging
Face attention at :func:`attention`: the eager formula with this dropout when there is dropout,
and without dropout the eager formula too when a gradient is needed in bf16 (autocast); SDPA
itself otherwise (fp32 training without dropout, eval, inference): torch's CPU SDPA kernel (flash
attention) has a slow backward in bf16 and is the faster of the two in fp32 (the measurements:
docs/benchmarks.md, "pretrain.py --preset mini"). Only ``model/device.py`` calls it, for the CPU: CUDA's fused Philox
dropout and XLA's are fast already. Every stream's seed comes from torch's default CPU generator,
so ``torch.manual_seed``, checkpointed RNG states and exact resume work unchanged.
A Hugging Face model given a 2-D padding mask (fine-tuning's task models) builds its 4-D mask
with the function registered for the attention's name; without one it would pass no mask at all
and let every token attend to [PAD], so eager's additive mask is registered under this name too.
``save_pretrained`` does not write the attention choice into ``config.json``, so exported models
load with plain transformers.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

ATTENTION = "kolectra_cpu_dropout"


def _threshold(p: float) -> tuple[int, float]:
    """(int16 threshold, the dropout probability it gives)."""
    below = round(p * 65536)
    return below - 32768, below / 65536


def draws16(shape: torch.Size) -> torch.Tensor:
    """Uniform int16 values of ``shape`` (CPU): a fresh SFC64 stream seeded from torch's generator.

    Under ``torch.compile`` the words come from torch itself, which the graph can hold (Inductor
    swaps in its own generator there anyway).
    """
    n = shape.numel()
    if torch.compiler.is_compiling():
        words = torch.randint(-(2**63), 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64)
        return words.view(torch.int16)[:n].view(shape)
    seed = int(torch.randint(0, 2**63 - 1, (1,)))
    words = np.random.SFC64(seed).random_raw((n + 3) // 4)
    return torch.from_numpy(words.view(np.int16)[:n]).view(shape)


def keep_scale(shape: torch.Size, p: float, dtype: torch.dtype) -> torch.Tensor:
    """The mask ``x`` is multiplied by: ``1 / (1 - p)`` (rounded to ``dtype``) where an element is kept, else 0.

    Built in numpy from the same draws as :func:`draws16`: torch's CPU kernels compare int16 and
    convert bool to a float type element by element, ten times slower than numpy's vectorised
    compare, and they were most of this dropout's time (docs/benchmarks.md). In float32 and bf16
    the mask is written directly in the target type (bf16 as its 16-bit pattern); other types, and
    ``torch.compile``, take torch's own ops. The values are the same either way.
    """
    threshold, p_used = _threshold(p)
    scale = 1.0 / (1.0 - p_used)
    if torch.compiler.is_compiling() or dtype not in (torch.float32, torch.bfloat16):
        return (draws16(shape) >= threshold).to(dtype) * scale
    n = shape.numel()
    seed = int(torch.randint(0, 2**63 - 1, (1,)))
    kept = np.random.SFC64(seed).random_raw((n + 3) // 4).view(np.int16)[:n] >= threshold
    if dtype == torch.float32:
        return torch.from_numpy(kept * np.float32(scale)).view(shape)
    bits = np.int16(torch.tensor([scale], dtype=torch.bfloat16).view(torch.int16).item())  # positive: no sign bit
    return torch.from_numpy(kept * bits).view(torch.bfloat16).view(shape)


def drop(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    if not training or p <= 0.0:
        return x
    if p >= 1.0:
        return torch.zeros_like(x)
    return x * keep_scale(x.shape, p, x.dtype)


class Dropout(nn.Dropout):
    """``nn.Dropout`` with :func:`drop`'s masks (same ``p``, same train/eval behaviour)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop(x, self.p, self.training)


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention signature: softmax(QK^T * scaling + mask), dropout, times V. Without
    dropout SDPA's kernel, except for a gradient in a lower precision than fp32 (its bf16 backward
    is slow on the CPU)."""
    needs_grad = torch.is_grad_enabled() and query.requires_grad
    if dropout <= 0.0 and not (needs_grad and query.dtype != torch.float32):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=0.0, **kwargs)
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3))
    if attention_mask is None:
        weights = scores * scaling
    else:
        # bias + scaling * scores in one pass over the scores, not two. The bias in the scores'
        # dtype: a float32 bias would promote bf16 scores (autocast) to float32, and every later op
        # of the block would pay for it; the CPU softmax accumulates in float32 anyway
        bias = attention_mask.clamp(min=torch.finfo(scores.dtype).min).to(scores.dtype)
        weights = torch.add(bias, scores, alpha=scaling)
    weights = drop(torch.softmax(weights, dim=-1), dropout)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTENTION, attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, eager_mask)  # 2-D masks -> additive [B, 1, L, L]


def install(model: nn.Module) -> nn.Module:
    """Use :class:`Dropout` and :func:`attention` throughout ``model`` (in place)."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                setattr(parent, name, Dropout(child.p, child.inplace).train(child.training))
        config = getattr(parent, "config", None)
        if config is not None and getattr(config, "_attn_implementation", None) in ("sdpa", "eager"):
            config._attn_implementation = ATTENTION  # noqa: SLF001 - transformers selects attention through this field only
    return model

