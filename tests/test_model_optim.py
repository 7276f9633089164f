"""model.optim: one AdamW for pretraining and fine-tuning, and the reference recipe's settings."""

import math

import pytest
import torch

from kolectra.model import optim


def _reference_adam(p0: torch.Tensor, grads: list[torch.Tensor], lrs: list[float], wd: float, eps: float,
                    b1: float = 0.9, b2: float = 0.999) -> torch.Tensor:
    """google-research/electra's AdamWeightDecayOptimizer, written out: no bias correction,
    decay added to the update."""
    p, m, v = p0.clone(), torch.zeros_like(p0), torch.zeros_like(p0)
    for g, lr in zip(grads, lrs):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (v.sqrt() + eps) + wd * p)
    return p


@pytest.mark.parametrize("fused", [False, True])
def test_adam_without_bias_correction_matches_the_reference_update(fused):
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 4)
    start = {k: v.detach().clone() for k, v in layer.state_dict().items()}
    grads = [{n: torch.randn_like(p) for n, p in layer.named_parameters()} for _ in range(5)]
    lrs = [1e-3 * optim.lr_scale(s, 2, 5, "warmup_times_decay") for s in range(5)]
    opt = optim.build(layer, 1e-3, weight_decay=0.01, eps=1e-6, fused=fused)
    for step, g in enumerate(grads):
        optim.set_lr(opt, step, lrs[step] / 1e-3, bias_correction=False)
        for n, p in layer.named_parameters():
            p.grad = g[n].clone()
        opt.step()
    for n, p in layer.named_parameters():
        wd = 0.0 if n.endswith("bias") else 0.01
        want = _reference_adam(start[n], [g[n] for g in grads], lrs, wd, 1e-6)
        assert torch.allclose(p.detach(), want, atol=1e-6, rtol=1e-5), n
    # with bias correction the same steps give another result (the switch does something)
    other = torch.nn.Linear(6, 4)
    other.load_state_dict(start)
    opt = optim.build(other, 1e-3, weight_decay=0.01, eps=1e-6, fused=fused)
    for step, g in enumerate(grads):
        optim.set_lr(opt, step, lrs[step] / 1e-3)
        for n, p in other.named_parameters():
            p.grad = g[n].clone()
        opt.step()
    assert not torch.allclose(other.weight, layer.weight, atol=1e-5)


def test_schedules():
    # warm-up to the peak, then linear decay over the rest
    assert [optim.lr_scale(s, 2, 6) for s in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
    # the reference: warm-up factor times a decay over all steps
    got = [optim.lr_scale(s, 2, 6, "warmup_times_decay") for s in range(6)]
    assert got == pytest.approx([0.5 * 1.0, 1.0 * (5 / 6), 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    assert optim.lr_scale(0, 0, 4) == 1.0 and math.isclose(optim.lr_scale(3, 0, 4, "warmup_times_decay"), 0.25)
