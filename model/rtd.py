"""Replaced token detection (ELECTRA, Clark et al. 2020, section 2): masking, sampling, losses.

One training step's maths, as pure tensor functions with static shapes so the same code runs
on CPU, CUDA and XLA:

1. ``choose_positions``: N = round(mask_prob * L) slots per sequence, filled by Gumbel-top-k over
   random scores that are -inf on special tokens and padding. A sequence uses its first
   k = round(mask_prob * its candidate tokens) slots (BERT/ELECTRA mask 15% of each sequence's
   real tokens, not of L); the remaining slots carry weight 0 (static shape, no effect).
2. ``mask_inputs``: of the chosen positions 85% become [MASK], 0% a random token, 15% stay.
3. The generator predicts the originals at the N positions (its head only there).
4. ``sample_tokens``: Gumbel-max sampling from the generator, under no_grad (the discriminator's
   loss does not reach the generator: sampling is not differentiable, paper section 2).
5. The discriminator labels every token replaced/original; a sample equal to the original
   counts as original. Loss = gen_loss + disc_weight * disc_loss (disc_weight = 50).

Losses are computed here (gather/scatter and weights, no boolean indexing, no ``.item()``), so
the step never waits for the host. Metrics come back as 0-d tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from model.config import ObjectiveConfig
from model.electra import ElectraPair, attention_bias


@dataclass(frozen=True)
class Specials:
    pad_id: int = 0
    cls_id: int = 2
    sep_id: int = 3
    mask_id: int = 4
    vocab_size: int = 0
    # Random replacements are drawn from [first_regular_id, vocab_size): no specials.
    first_regular_id: int = 5


def num_slots(mask_prob: float, seq_len: int) -> int:
    """The static number of masked slots per sequence, N = round(mask_prob * L) (at least 1)."""
    return max(1, math.floor(mask_prob * seq_len + 0.5))


def _uniform(shape, device) -> torch.Tensor:
    # Open interval (0, 1): log(0) would give inf noise.
    return torch.rand(shape, device=device).clamp_(1e-10, 1.0 - 1e-7)


def gumbel_noise(shape, device) -> torch.Tensor:
    return -torch.log(-torch.log(_uniform(shape, device)))


def candidates(ids_BL: torch.Tensor, sp: Specials) -> torch.Tensor:
    """True where a token may be masked: not padding, [CLS], [SEP] or [MASK]."""
    return (ids_BL != sp.pad_id) & (ids_BL != sp.cls_id) & (ids_BL != sp.sep_id) & (ids_BL != sp.mask_id)


def choose_positions(ids_BL: torch.Tensor, sp: Specials, mask_prob: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions_BN int64, weights_BN float 1/0). Gumbel-top-k = sampling without replacement."""
    B, L = ids_BL.shape
    n = num_slots(mask_prob, L)
    cand_BL = candidates(ids_BL, sp)
    score_BL = torch.where(cand_BL, gumbel_noise((B, L), ids_BL.device), float("-inf"))
    _, positions_BN = torch.topk(score_BL, n, dim=1)  # slots come out in random order
    n_cand_B = cand_BL.sum(dim=1)
    k_B = torch.floor(n_cand_B.float() * mask_prob + 0.5).clamp(min=1.0, max=float(n))
    k_B = torch.minimum(k_B, n_cand_B.float())  # a sequence with no candidates masks nothing
    slot_N = torch.arange(n, device=ids_BL.device, dtype=torch.float32)
    weights_BN = (slot_N[None, :] < k_B[:, None]).float()
    return positions_BN, weights_BN


def mask_inputs(ids_BL, positions_BN, weights_BN, sp: Specials, obj: ObjectiveConfig) -> torch.Tensor:
    """The generator's input: chosen positions become [MASK] / a random token / stay as they are."""
    original_BN = torch.gather(ids_BL, 1, positions_BN)
    u_BN = torch.rand(positions_BN.shape, device=ids_BL.device)
    random_BN = torch.randint(sp.first_regular_id, sp.vocab_size, positions_BN.shape, device=ids_BL.device)
    new_BN = torch.where(u_BN < obj.mask_token_prob, torch.full_like(original_BN, sp.mask_id),
                         torch.where(u_BN < obj.mask_token_prob + obj.random_token_prob, random_BN, original_BN))
    new_BN = torch.where(weights_BN > 0, new_BN, original_BN)
    return ids_BL.scatter(1, positions_BN, new_BN)


@torch.no_grad()
def sample_tokens(logits_BNV: torch.Tensor, temperature: float) -> torch.Tensor:
    """Gumbel-max: argmax(logits / T + Gumbel noise) is a sample from softmax(logits / T)."""
    logits = logits_BNV.detach().float() / temperature
    return torch.argmax(logits + gumbel_noise(logits.shape, logits.device), dim=-1)


def replace_tokens(ids_BL, positions_BN, weights_BN, sampled_BN) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input and its labels: 1 where the token differs from the original.

    A sample equal to the original counts as original (paper section 2), which falls out of
    comparing tokens rather than marking sampled positions.
    """
    original_BN = torch.gather(ids_BL, 1, positions_BN)
    disc_in_BL = ids_BL.scatter(1, positions_BN, torch.where(weights_BN > 0, sampled_BN, original_BN))
    return disc_in_BL, (disc_in_BL != ids_BL).float()


def _weighted_mean(x, w):
    return (x * w).sum() / w.sum().clamp(min=1.0)


@dataclass
class StepOutput:
    loss: torch.Tensor  # gen_loss + disc_weight * disc_loss, with graph
    gen_loss: torch.Tensor
    disc_loss: torch.Tensor
    metrics: dict[str, torch.Tensor]  # detached 0-d tensors, read back only at log time
    positions_BN: torch.Tensor
    weights_BN: torch.Tensor
    masked_BL: torch.Tensor  # generator input
    disc_in_BL: torch.Tensor  # discriminator input
    replaced_BL: torch.Tensor  # discriminator labels


def electra_step(model: ElectraPair, ids_BL: torch.Tensor, types_BL: torch.Tensor, sp: Specials,
                 obj: ObjectiveConfig) -> StepOutput:
    """One forward pass of the RTD objective."""
    attn_BL = (ids_BL != sp.pad_id).float()
    bias = attention_bias(attn_BL)

    positions_BN, w_BN = choose_positions(ids_BL, sp, obj.mask_prob)
    masked_BL = mask_inputs(ids_BL, positions_BN, w_BN, sp, obj)
    target_BN = torch.gather(ids_BL, 1, positions_BN)

    gen_logits_BNV = model.generator_logits(masked_BL, types_BL, bias, positions_BN).float()
    gen_ce_BN = F.cross_entropy(gen_logits_BNV.flatten(0, 1), target_BN.flatten(), reduction="none")
    gen_loss = _weighted_mean(gen_ce_BN.view_as(w_BN), w_BN)

    sampled_BN = sample_tokens(gen_logits_BNV, obj.temperature)
    disc_in_BL, replaced_BL = replace_tokens(ids_BL, positions_BN, w_BN, sampled_BN)

    disc_logits_BL = model.discriminator_logits(disc_in_BL, types_BL, bias).float()
    disc_bce_BL = F.binary_cross_entropy_with_logits(disc_logits_BL, replaced_BL, reduction="none")
    if obj.objective == "electra15":
        # Ablation (paper section 3.2): the discriminator learns only from the masked positions.
        disc_w_BL = torch.zeros_like(attn_BL).scatter(1, positions_BN, w_BN)
    else:
        disc_w_BL = attn_BL
    disc_loss = _weighted_mean(disc_bce_BL, disc_w_BL)

    loss = gen_loss + obj.disc_weight * disc_loss
    with torch.no_grad():
        target_logit_BN = torch.gather(gen_logits_BNV, 2, target_BN.unsqueeze(-1)).squeeze(-1)
        metrics = {
            "loss": loss.detach(),
            "gen_loss": gen_loss.detach(),
            "disc_loss": disc_loss.detach(),
            # max is cheaper than argmax on CPU; ties (measure zero) count as correct.
            "gen_acc": _weighted_mean((target_logit_BN >= gen_logits_BNV.amax(-1)).float(), w_BN),
            "disc_acc": _weighted_mean(((disc_logits_BL > 0).float() == replaced_BL).float(), disc_w_BL),
            # Share of masked positions whose sample differs from the original.
            "replaced_share": replaced_BL.sum() / w_BN.sum().clamp(min=1.0),
        }
    return StepOutput(loss, gen_loss, disc_loss, metrics, positions_BN, w_BN, masked_BL, disc_in_BL, replaced_BL)
