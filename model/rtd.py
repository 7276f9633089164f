"""Replaced token detection (ELECTRA, Clark et al. 2020, section 2): masking, sampling, losses.

One training step's maths, as pure tensor functions with static shapes so the same code runs
on CPU, CUDA and XLA:

1. ``choose_positions``: N = round(mask_prob * L) slots per row, filled by Gumbel-top-k over
   random scores that are -inf on special tokens and padding. A row uses its first
   k = round(mask_prob * its candidate tokens) slots (BERT/ELECTRA mask 15% of each sequence's
   real tokens, not of L); the remaining slots carry weight 0 (static shape, no effect). A
   packed row (several sequences, ``doc_BL``) masks 15% of all its sequences' text together:
   candidates never exceed L, so k <= N still holds, and a short sequence's share is 15% in
   expectation instead of rounded per sequence.
2. ``mask_inputs``: of the chosen positions 85% become [MASK], 0% a random token, 15% stay.
3. The generator predicts the originals at the N positions (its head only there).
4. ``sample_tokens``: a sample from the generator's softmax (with a temperature), under no_grad
   (the discriminator's loss does not reach the generator: sampling is not differentiable, paper
   section 2). Two exact samplers of the same distribution: Gumbel-max, as in the reference code
   (one noise value per vocabulary entry), and the inverse CDF (one uniform per slot, a running
   sum and a binary search), which the CPU uses because drawing |V| random numbers per slot
   there cost more than the rest of the generator's head (``model/device.py`` decides).
5. The discriminator labels every token replaced/original; a sample equal to the original
   counts as original. Loss = gen_loss + disc_weight * disc_loss (disc_weight = 50).

Losses are computed here (gather/scatter and weights, no boolean indexing, no ``.item()``), so
the step never waits for the host. Metrics come back as additive device tensors (loss shares,
counts, a histogram of discriminator logits), summed over micro-steps and steps and turned into
means, accuracy, precision, recall and AUC only at log time (:mod:`model.metrics`).

Rows that hold several sequences come with ``doc_BL`` (sequence number per token, 0 = padding,
from the examples artifact): the encoders then get a block-diagonal bias and positions that
restart per sequence (:func:`model.attention.document_attention`); nothing else in the step
changes, since masking, sampling and the losses are per token already. Without it (one sequence
a row) the bias is the [B, 1, 1, L] padding mask.

Normalisers: a loss is a sum over tokens divided by a count. Given ``norm_2`` (masked slots and
non-padding tokens of the whole optimizer step, from :func:`normalizers` of its micro-batches),
the micro-steps of an accumulated step add up to exactly the loss of one big batch; without it
each call normalises by its own counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kolectra.core.errors import UserInputError
from kolectra.model.attention import document_attention
from kolectra.model.config import ObjectiveConfig
from kolectra.model.electra import ElectraPair, attention_bias


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


def _slots_used(cand_BL: torch.Tensor, mask_prob: float, n: int) -> torch.Tensor:
    """k_B = round(mask_prob * candidates), at least 1, at most N and the candidates: float [B]."""
    n_cand_B = cand_BL.sum(dim=1).float()
    k_B = torch.floor(n_cand_B * mask_prob + 0.5).clamp(min=1.0, max=float(n))
    return torch.minimum(k_B, n_cand_B)  # a sequence with no candidates masks nothing


def choose_positions(ids_BL: torch.Tensor, sp: Specials, mask_prob: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions_BN int64, weights_BN float 1/0). Gumbel-top-k = sampling without replacement."""
    B, L = ids_BL.shape
    n = num_slots(mask_prob, L)
    cand_BL = candidates(ids_BL, sp)
    score_BL = torch.where(cand_BL, gumbel_noise((B, L), ids_BL.device), float("-inf"))
    _, positions_BN = torch.topk(score_BL, n, dim=1)  # slots come out in random order
    k_B = _slots_used(cand_BL, mask_prob, n)
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


SAMPLERS = ("gumbel", "inverse_cdf")


@torch.no_grad()
def sample_tokens(logits_BNV: torch.Tensor, temperature: float | torch.Tensor, sampler: str = "gumbel",
                  probs_BNV: torch.Tensor | None = None) -> torch.Tensor:
    """One token per slot from softmax(logits / T). ``probs_BNV``: softmax(logits) when already
    computed (the inverse-CDF sampler reuses it at T = 1). ``temperature`` may be a 0-d device tensor
    (a schedule, :func:`kolectra.model.objectives.knobs`): its value changes from step to step without
    changing the graph, and the logits are always divided by it."""
    scheduled = isinstance(temperature, torch.Tensor)
    if sampler == "inverse_cdf" and probs_BNV is not None and not scheduled and temperature == 1.0:
        return _inverse_cdf(probs_BNV)  # no float copy of the logits needed: [B, N, V] is large
    logits = logits_BNV.detach().float()
    if scheduled or temperature != 1.0:
        logits = logits / temperature
    if sampler == "inverse_cdf":
        return _inverse_cdf(torch.softmax(logits, -1))
    if sampler != "gumbel":
        raise UserInputError(f"unknown sampler {sampler!r} (known: {', '.join(SAMPLERS)})")
    # Gumbel-max: argmax(logits + Gumbel noise) is a sample from softmax(logits). logits + Gumbel =
    # logits - log(-log U), in place: [B, N, V] is the largest tensor of the step after the
    # generator's own logits, and each temporary of it costs an allocation and a pass.
    neg_gumbel = _uniform(logits.shape, logits.device).log_().neg_().log_()
    return torch.argmax(logits - neg_gumbel, dim=-1)


# vocabulary entries per block of the two-level inverse CDF. The block sums cost one pass over [B, N, V]
# whatever the block; the chosen block's gather, running sum and search cost [B, N, block], so a short
# block is cheaper: at 128 the sampler ran 4.3x faster than at 1,024 at mini's [32, 19, 8000] and
# 8.5x at batch 128, 2.1x at a vocabulary of 35,000 (docs/benchmarks.md)
CDF_BLOCK = 128


def _inverse_cdf(probs_BNV: torch.Tensor) -> torch.Tensor:
    """The first token whose running probability exceeds U * total (U uniform in [0, 1)).

    Two levels, so that only one pass touches all V entries: the sums of blocks of
    :data:`CDF_BLOCK` tokens (a vectorised reduction over a view, no copy) pick the block, and a
    running sum inside the chosen block picks the token; a full-width cumsum is a sequential scan,
    several times slower. Exact up to float rounding (a token's share is off by about 1e-7 at
    most); a token of probability 0 has a flat step and is never chosen (``right=True``). Static
    shapes, no host sync.
    """
    V = probs_BNV.shape[-1]
    b = min(CDF_BLOCK, V)
    full = V - V % b
    blocks = [probs_BNV[..., :full].unflatten(-1, (full // b, b)).sum(-1)]
    if full < V:
        blocks.append(probs_BNV[..., full:].sum(-1, keepdim=True))
    block_cdf_BNK = torch.cat(blocks, -1).cumsum(-1)
    u_BN1 = torch.rand(probs_BNV.shape[:-1] + (1,), device=probs_BNV.device) * block_cdf_BNK[..., -1:]
    k_BN1 = torch.searchsorted(block_cdf_BNK, u_BN1, right=True).clamp_(max=block_cdf_BNK.shape[-1] - 1)
    before_BN1 = torch.where(k_BN1 > 0, block_cdf_BNK.gather(-1, (k_BN1 - 1).clamp(min=0)), 0.0)
    offset_b = torch.arange(b, device=probs_BNV.device)
    index_BNb = k_BN1 * b + offset_b  # the chosen block's tokens
    inside_BNb = probs_BNV.gather(-1, index_BNb.clamp(max=V - 1)) * (index_BNb < V)  # past V: weight 0
    j_BN1 = torch.searchsorted(inside_BNb.cumsum(-1), u_BN1 - before_BN1, right=True).clamp_(max=b - 1)
    # rounding can put u just past a block's last positive token: step back to the last one with weight
    # (the largest offset whose probability is positive; sign is 0 or 1 here, and float ops are fast)
    last_BN1 = (inside_BNb.sign() * offset_b.to(inside_BNb.dtype)).argmax(-1, keepdim=True)
    return (k_BN1 * b + torch.minimum(j_BN1, last_BN1)).squeeze(-1)


class _SoftmaxCrossEntropy(torch.autograd.Function):
    """Per-row cross-entropy that also returns the softmax it computed (no gradient through it).

    ``F.cross_entropy`` builds the same loss from log_softmax + nll_loss, whose backward writes a
    zero [R, V] tensor, scatters into it and runs log_softmax's backward: three passes over the
    largest tensors of the step. Here the backward is one: d ce_r / d logits_r = softmax_r -
    onehot(target_r). The kept softmax also serves the sampler and the accuracy count.

    Logits may come in bf16 (autocast): the softmax is taken in float32 and the gradient written
    straight in the logits' dtype, so neither a float32 copy of the logits nor a cast of their
    gradient shows up in the graph. The softmax output has no gradient, and autograd is told not
    to build a zero [R, V] one for it on every backward.
    """

    @staticmethod
    def forward(ctx, logits_RV, target_R):
        x_RV = logits_RV.float()
        probs_RV = torch.softmax(x_RV, -1)
        # log p_t = x_t - logsumexp(x), never log(p_t) (which underflows to log 0 for a target far below
        # the rest). logsumexp comes from the softmax: its largest entry is exp(max - logsumexp), at least
        # 1/V, so logsumexp = max - log(max p). Two cheap max passes instead of log_softmax then exp over
        # [R, V]: the exponential is the costly pass, and torch's softmax computes it faster than exp_
        # (benchmarks/pretrain.py; docs/benchmarks.md)
        lse_R1 = x_RV.amax(-1, keepdim=True) - probs_RV.amax(-1, keepdim=True).log_()
        logp_t_R1 = torch.gather(x_RV, 1, target_R[:, None]) - lse_R1
        del x_RV
        ctx.save_for_backward(probs_RV, target_R, logp_t_R1)
        ctx.mark_non_differentiable(probs_RV)
        ctx.set_materialize_grads(False)
        ctx.logits_dtype = logits_RV.dtype
        return -logp_t_R1.squeeze(1), probs_RV

    @staticmethod
    def backward(ctx, grad_R, _grad_probs):
        if grad_R is None:
            return None, None
        probs_RV, target_R, logp_t_R1 = ctx.saved_tensors
        grad_R1 = grad_R[:, None].float()
        dtype = ctx.logits_dtype
        # in a lower precision, cast the softmax first: a mixed-dtype product would go through a
        # float32 temporary of [R, V] and a copy
        grad_RV = probs_RV * grad_R1 if dtype == torch.float32 else probs_RV.to(dtype).mul_(grad_R1.to(dtype))
        # the target's entry, (p_t - 1) * g, in float32 (overwritten, not added: in bf16, p_t * g - g
        # would cancel to rounding noise when p_t is close to 1); written through a flat index, since
        # scatter_ into a bf16 tensor makes a pass over all of it
        flat_R = target_R + torch.arange(0, grad_RV.numel(), grad_RV.shape[1], device=target_R.device)
        grad_RV.view(-1).index_put_((flat_R,), (torch.expm1(logp_t_R1) * grad_R1).to(grad_RV.dtype).view(-1))
        return grad_RV, None


def softmax_cross_entropy(logits_BNV: torch.Tensor, target_BN: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(cross-entropy [B, N], float32 softmax [B, N, V]) of logits in any float dtype; equal to
    ``F.cross_entropy`` on the logits taken to float32."""
    ce_R, probs_RV = _SoftmaxCrossEntropy.apply(logits_BNV.flatten(0, 1), target_BN.flatten())
    return ce_R.view_as(target_BN), probs_RV.view(logits_BNV.shape)


def replace_tokens(ids_BL, positions_BN, weights_BN, sampled_BN) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input and its labels: 1 where the token differs from the original.

    A sample equal to the original counts as original (paper section 2), which falls out of
    comparing tokens rather than marking sampled positions.
    """
    original_BN = torch.gather(ids_BL, 1, positions_BN)
    disc_in_BL = ids_BL.scatter(1, positions_BN, torch.where(weights_BN > 0, sampled_BN, original_BN))
    return disc_in_BL, (disc_in_BL != ids_BL).float()


def normalizers(ids_BL: torch.Tensor, sp: Specials, mask_prob: float) -> torch.Tensor:
    """[masked slots, non-padding tokens] of a batch, on its device (no sync): summed over a
    step's micro-batches, the ``norm_2`` that makes accumulation equal one big batch."""
    n = num_slots(mask_prob, ids_BL.shape[1])
    masked = _slots_used(candidates(ids_BL, sp), mask_prob, n).sum()
    return torch.stack([masked, (ids_BL != sp.pad_id).sum().float()])


def _denominators(norm_2, w_BN, attn_BL):
    if norm_2 is None:
        return w_BN.sum().clamp(min=1.0), attn_BL.sum().clamp(min=1.0)
    return norm_2[0].clamp(min=1.0), norm_2[1].clamp(min=1.0)


# Discriminator logits are binned for the AUC: 8,192 bins, uniform in asinh(logit) over logits in
# [-30, 30] (a bin is 0.001 logits wide at 0, 0.002 at the plateau's -2, 0.015 at +-15; beyond +-30
# the end bins). The AUC from these histograms (model.metrics.auc_from_histograms, ties within a bin
# counting half) stays within 1e-4 of the exact AUC on logits shaped like a plateau's (all within a
# few tenths of a logit); the 64 bins of 0.25 logits used before read 0.002-0.035 low.
AUC_BINS, AUC_RANGE = 8192, 30.0
_AUC_Z = math.asinh(AUC_RANGE)


def auc_bins(logits_BL: torch.Tensor) -> torch.Tensor:
    """The histogram bin of each logit (int64, same shape): monotone in the logit."""
    z = torch.asinh(logits_BL.float().clamp(-AUC_RANGE, AUC_RANGE))
    return ((z + _AUC_Z) * (AUC_BINS / (2 * _AUC_Z))).long().clamp(0, AUC_BINS - 1)


def generator_sums(logits_BNV, target_BN, w_BN) -> dict[str, torch.Tensor]:
    """Masked slots and how many of them the generator's argmax gets right (logits or probabilities)."""
    target_logit_BN = torch.gather(logits_BNV, 2, target_BN.unsqueeze(-1)).squeeze(-1)
    # max is cheaper than argmax on CPU; ties (measure zero) count as correct.
    correct = (target_logit_BN >= logits_BNV.amax(-1)).float()
    return {"masked": w_BN.sum(), "gen_correct": (correct * w_BN).sum()}


def discriminator_sums(logits_BL, replaced_BL, w_BL) -> dict[str, torch.Tensor]:
    """Counts for accuracy / precision / recall, and logit histograms of replaced and original tokens."""
    pred_BL = (logits_BL > 0).float()
    bins = auc_bins(logits_BL).flatten()
    zeros = torch.zeros(AUC_BINS, device=logits_BL.device)
    return {
        "disc_tokens": w_BL.sum(),
        "disc_correct": ((pred_BL == replaced_BL).float() * w_BL).sum(),
        "disc_tp": (pred_BL * replaced_BL * w_BL).sum(),
        "disc_pred_pos": (pred_BL * w_BL).sum(),
        "disc_replaced": (replaced_BL * w_BL).sum(),
        "hist_replaced": zeros.scatter_add(0, bins, (replaced_BL * w_BL).flatten()),
        "hist_original": zeros.scatter_add(0, bins, ((1.0 - replaced_BL) * w_BL).flatten()),
    }


@dataclass
class StepOutput:
    loss: torch.Tensor  # the objective's total (ELECTRA: gen_loss + disc_weight * disc_loss), with graph
    sums: dict[str, torch.Tensor]  # detached additive metrics, read back only at log time
    positions_BN: torch.Tensor
    weights_BN: torch.Tensor
    masked_BL: torch.Tensor  # generator input
    disc_in_BL: torch.Tensor  # discriminator input (generator samples at the masked slots)
    replaced_BL: torch.Tensor  # discriminator labels
    parts: dict[str, torch.Tensor]  # the loss terms, with graph (gen_loss, disc_loss / mlm_loss)


@dataclass
class GeneratorPass:
    """The generator half shared by ELECTRA and the Replace/All-Tokens MLM ablations."""

    attn_BL: torch.Tensor
    bias: torch.Tensor
    position_BL: torch.Tensor | None  # position ids restarting per sequence (packed rows), else None
    positions_BN: torch.Tensor
    w_BN: torch.Tensor
    masked_BL: torch.Tensor
    target_BN: torch.Tensor
    gen_loss: torch.Tensor
    disc_in_BL: torch.Tensor
    replaced_BL: torch.Tensor
    masked_denom: torch.Tensor
    tokens_denom: torch.Tensor
    sums: dict[str, torch.Tensor]


def attention_inputs(ids_BL, sp: Specials, doc_BL=None, form: str = "bias"
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(non-padding mask [B, L] float, attention mask, position ids or None) for a batch; packed
    rows' mask in ``form`` (the model's ``attention``, :mod:`model.attention`)."""
    attn_BL = (ids_BL != sp.pad_id).float()
    if doc_BL is None:
        return attn_BL, attention_bias(attn_BL), None
    return attn_BL, *document_attention(doc_BL, form)


def mask_and_generate(model: ElectraPair, ids_BL, types_BL, sp: Specials, obj: ObjectiveConfig,
                      norm_2=None, sample: bool = True, doc_BL=None, knobs: dict | None = None) -> GeneratorPass:
    """Steps 1-4: choose and mask slots, the generator's MLM loss there, and its samples.

    ``knobs``: per-step values of schedules as 0-d device tensors (``temperature``), else None:
    ``obj.temperature``."""
    attn_BL, bias, position_BL = attention_inputs(ids_BL, sp, doc_BL, model.attention)
    positions_BN, w_BN = choose_positions(ids_BL, sp, obj.mask_prob)
    masked_BL = mask_inputs(ids_BL, positions_BN, w_BN, sp, obj)
    target_BN = torch.gather(ids_BL, 1, positions_BN)
    masked_denom, tokens_denom = _denominators(norm_2, w_BN, attn_BL)
    if not sample:  # the BERT baseline: no generator
        return GeneratorPass(attn_BL, bias, position_BL, positions_BN, w_BN, masked_BL, target_BN, attn_BL.new_zeros(()),
                             masked_BL, torch.zeros_like(attn_BL), masked_denom, tokens_denom, {"masked": w_BN.sum()})
    gen_logits_BNV = model.generator_logits(masked_BL, types_BL, bias, positions_BN, position_BL)  # bf16 under autocast
    gen_ce_BN, gen_probs_BNV = softmax_cross_entropy(gen_logits_BNV, target_BN)
    gen_loss = (gen_ce_BN * w_BN).sum() / masked_denom
    temperature = knobs["temperature"] if knobs and "temperature" in knobs else obj.temperature
    sampled_BN = sample_tokens(gen_logits_BNV, temperature, model.sampler, gen_probs_BNV)
    disc_in_BL, replaced_BL = replace_tokens(ids_BL, positions_BN, w_BN, sampled_BN)
    with torch.no_grad():
        sums = {**generator_sums(gen_probs_BNV, target_BN, w_BN), "replaced": replaced_BL.sum()}
    return GeneratorPass(attn_BL, bias, position_BL, positions_BN, w_BN, masked_BL, target_BN, gen_loss, disc_in_BL,
                         replaced_BL, masked_denom, tokens_denom, sums)


def electra_step(model: ElectraPair, ids_BL: torch.Tensor, types_BL: torch.Tensor, sp: Specials,
                 obj: ObjectiveConfig, norm_2: torch.Tensor | None = None,
                 doc_BL: torch.Tensor | None = None, knobs: dict | None = None) -> StepOutput:
    """One forward pass of the RTD objective ("electra", or "electra15" with the loss on masked slots).

    ``doc_BL``: sequence number per token for rows that hold several sequences (None: one a row);
    ``knobs``: this step's scheduled values (:func:`mask_and_generate`)."""
    g = mask_and_generate(model, ids_BL, types_BL, sp, obj, norm_2, doc_BL=doc_BL, knobs=knobs)
    disc_logits_BL = model.discriminator_logits(g.disc_in_BL, types_BL, g.bias, g.position_BL).float()
    disc_bce_BL = F.binary_cross_entropy_with_logits(disc_logits_BL, g.replaced_BL, reduction="none")
    if obj.objective == "electra15":
        # Ablation (paper section 3.2): the discriminator learns only from the masked positions.
        disc_w_BL = torch.zeros_like(g.attn_BL).scatter(1, g.positions_BN, g.w_BN)
        disc_denom = g.masked_denom
    else:
        disc_w_BL, disc_denom = g.attn_BL, g.tokens_denom
    disc_loss = (disc_bce_BL * disc_w_BL).sum() / disc_denom

    loss = g.gen_loss + obj.disc_weight * disc_loss
    with torch.no_grad():
        sums = {"loss": loss.detach(), "gen_loss": g.gen_loss.detach(), "disc_loss": disc_loss.detach(), **g.sums,
                **discriminator_sums(disc_logits_BL, g.replaced_BL, disc_w_BL)}
    return StepOutput(loss, sums, g.positions_BN, g.w_BN, g.masked_BL, g.disc_in_BL, g.replaced_BL,
                      {"gen_loss": g.gen_loss, "disc_loss": disc_loss})
