"""The paper's efficiency ablations next to ELECTRA, and the one switch the trainer calls.

Clark et al. 2020, section 3.2 / table 5, ask where ELECTRA's gain comes from by training the
same compute budget with related objectives. All of them run here on the same masking and the
same generator (:mod:`model.rtd`); only the discriminator-sized network's task changes:

- ``electra`` / ``electra15``: replaced token detection on all tokens / only on the masked slots
  (:func:`model.rtd.electra_step`).
- ``mlm`` (the BERT baseline): the discriminator-sized encoder is a masked LM on the
  [MASK]-ed input; no generator.
- ``replace_mlm``: a masked LM whose masked slots hold generator samples instead of [MASK]
  (no pretrain/fine-tune mismatch from [MASK] tokens); loss = generator MLM + this MLM.
- ``all_tokens_mlm``: like Replace MLM, but the network predicts the identity of every token.
  As in the paper it has a copy mechanism: a sigmoid copy probability D per token, and the
  output distribution D * [token = input] + (1 - D) * softmax(MLM logits).
  Loss = generator MLM + the negative log-likelihood of the originals over all non-padding tokens.

And the RTD family with a vocabulary head on the discriminator (:func:`rtd_lm_step`; the head is
a pretraining device, not exported: the export stays ``ElectraForPreTraining`` + ``ElectraForMaskedLM``):

- ``hybrid``: ELECTRA's RTD on every token, plus a masked LM on the discriminator at the N masked
  slots: from the corrupted input (generator samples there) it predicts the original token.
  Loss = generator + disc_weight * RTD + disc_mlm_weight * MLM.
- ``corrective``, after COCO-LM's corrective language modeling (Meng et al. 2021, "COCO-LM:
  Correcting and Contrasting Text Sequences for Language Model Pretraining"; our own code, and
  without its sequence-contrastive task): at every token the discriminator says whether it was
  replaced (RTD, as ELECTRA) and which original token stood there, through a copy mechanism on the
  RTD head: p(original = y) = P(kept) * [y = input] + P(replaced) * softmax(vocabulary head)_y, with
  P from the RTD logit, taken without gradient in this term (the RTD loss alone trains the binary
  head, as in ELECTRA; the correction trains the vocabulary head and the encoder). The correction's
  loss is taken at the N masked slots, not at every token: replacements happen only there, and at
  every other token the original is the input, which the copy term already gives; a
  vocabulary-sized head at all L tokens would cost L/N (about 6.7x) the slots' head — at ``mini``
  with an 8k vocabulary it would nearly double the step's FLOPs, halving the steps an equal-FLOPs
  arm gets. Where the generator reproduced the original, the copy term carries most of the
  probability and the vocabulary head learns little; where it replaced it, the loss is the MLM's.
  Loss = generator + disc_weight * RTD + disc_mlm_weight * correction.
- ``mlm_then_rtd``: the discriminator trains as a masked LM (BERT: [MASK]-ed input, loss at the
  masked slots) for the first ``mlm_phase`` of the steps, then as ELECTRA's RTD on the generator's
  samples; the generator trains throughout. The switch is a 0-d weight computed on the device from
  the step counter (:func:`knobs`), which also picks the discriminator's input with ``torch.where``:
  one graph for both phases, no recompile on XLA, no host sync. Both heads run at every step (and
  are counted so in FLOPs); the idle one gets weight 0.

Every objective takes packed rows (``doc_BL``, several sequences a row) the same way: the
generator pass builds the per-sequence bias and positions once and each network reuses them.
Every step function also takes ``knobs``, the step's scheduled values as 0-d device tensors
(:func:`knobs`: the replacement temperature, mlm_then_rtd's phase), or None.

MLM losses weigh 1 (the ``disc_weight`` of 50 balances a binary loss against a vocabulary-sized
one and does not apply). Shapes stay static: logits at the N masked slots, except for
All-Tokens MLM, which by definition needs the vocabulary at every position.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from kolectra.model.config import ObjectiveConfig
from kolectra.model.electra import ElectraPair
from kolectra.model.rtd import (
    Specials,
    StepOutput,
    discriminator_sums,
    electra_step,
    generator_sums,
    mask_and_generate,
    softmax_cross_entropy,
)


def _masked_lm_sums(logits_BNV, target_BN, w_BN) -> dict[str, torch.Tensor]:
    s = generator_sums(logits_BNV, target_BN, w_BN)
    return {"mlm_tokens": s["masked"], "mlm_correct": s["gen_correct"]}


def _finish(g, mlm_loss, sums) -> StepOutput:
    loss = g.gen_loss + mlm_loss
    sums = {"loss": loss.detach(), "gen_loss": g.gen_loss.detach(), "mlm_loss": mlm_loss.detach(), **g.sums, **sums}
    return StepOutput(loss, sums, g.positions_BN, g.w_BN, g.masked_BL, g.disc_in_BL, g.replaced_BL,
                      {"gen_loss": g.gen_loss, "mlm_loss": mlm_loss})


def masked_lm_step(model: ElectraPair, ids_BL, types_BL, sp: Specials, obj: ObjectiveConfig,
                   norm_2: torch.Tensor | None = None, doc_BL: torch.Tensor | None = None,
                   knobs: dict | None = None) -> StepOutput:
    """"mlm" (BERT: [MASK]-ed input, no generator) and "replace_mlm" (generator samples as input)."""
    g = mask_and_generate(model, ids_BL, types_BL, sp, obj, norm_2, sample=obj.objective != "mlm", doc_BL=doc_BL,
                          knobs=knobs)
    logits_BNV, _ = model.mlm_logits(g.disc_in_BL, types_BL, g.bias, g.positions_BN, g.position_BL)
    ce_BN, probs_BNV = softmax_cross_entropy(logits_BNV, g.target_BN)
    mlm_loss = (ce_BN * g.w_BN).sum() / g.masked_denom
    with torch.no_grad():
        sums = _masked_lm_sums(probs_BNV, g.target_BN, g.w_BN)
    return _finish(g, mlm_loss, sums)


def copy_log_likelihood(logits_BLV, copy_logit_BL, input_BL, target_BL) -> torch.Tensor:
    """log p(target) under D * [target = input] + (1 - D) * softmax(logits), computed in log space."""
    log_p_BL = torch.gather(F.log_softmax(logits_BLV.float(), -1), 2, target_BL.unsqueeze(-1)).squeeze(-1)
    return copy_mixture(log_p_BL, copy_logit_BL, input_BL == target_BL)


def copy_mixture(log_p, copy_logit, same) -> torch.Tensor:
    """log(D * [same] + (1 - D) * p) from log p, the copy logit (D = sigmoid) and whether target = input."""
    log_d, log_not_d = F.logsigmoid(copy_logit.float()), F.logsigmoid(-copy_logit.float())
    generate = log_not_d + log_p
    return torch.where(same, torch.logaddexp(log_d, generate), generate)


def all_tokens_mlm_step(model: ElectraPair, ids_BL, types_BL, sp: Specials, obj: ObjectiveConfig,
                        norm_2: torch.Tensor | None = None, doc_BL: torch.Tensor | None = None,
                        knobs: dict | None = None) -> StepOutput:
    g = mask_and_generate(model, ids_BL, types_BL, sp, obj, norm_2, doc_BL=doc_BL, knobs=knobs)
    logits_BLV, h_BLH = model.mlm_logits(g.disc_in_BL, types_BL, g.bias, position_BL=g.position_BL)
    copy_logit_BL = model.copy_head(h_BLH)
    log_q_BL = copy_log_likelihood(logits_BLV, copy_logit_BL, g.disc_in_BL, ids_BL)
    mlm_loss = -(log_q_BL * g.attn_BL).sum() / g.tokens_denom
    with torch.no_grad():
        # Prediction: copy the input when D > 0.5, else the softmax's argmax.
        logits = logits_BLV.float()
        target_logit = torch.gather(logits, 2, ids_BL.unsqueeze(-1)).squeeze(-1)
        by_softmax = (target_logit >= logits.amax(-1)).float()
        copy = (copy_logit_BL > 0).float()
        correct = copy * (g.disc_in_BL == ids_BL).float() + (1.0 - copy) * by_softmax
        sums = {"mlm_tokens": g.attn_BL.sum(), "mlm_correct": (correct * g.attn_BL).sum(),
                # inputs that are not the original: what copying cannot get right (model.health)
                "mlm_replaced": ((g.disc_in_BL != ids_BL).float() * g.attn_BL).sum()}
    return _finish(g, mlm_loss, sums)


def rtd_lm_step(model: ElectraPair, ids_BL, types_BL, sp: Specials, obj: ObjectiveConfig,
                norm_2: torch.Tensor | None = None, doc_BL: torch.Tensor | None = None,
                knobs: dict | None = None) -> StepOutput:
    """hybrid, corrective and mlm_then_rtd (module docstring): one generator pass, one discriminator
    pass with both heads, weights instead of branches."""
    g = mask_and_generate(model, ids_BL, types_BL, sp, obj, norm_2, doc_BL=doc_BL, knobs=knobs)
    phased = obj.objective == "mlm_then_rtd"
    if phased:
        # 1 while the discriminator is a masked LM, then 0 (knobs); without knobs (a lone step): RTD
        mlm_w = knobs["mlm_weight"] if knobs and "mlm_weight" in knobs else g.attn_BL.new_zeros(())
        rtd_w = 1.0 - mlm_w
        disc_in_BL = torch.where(mlm_w > 0, g.masked_BL, g.disc_in_BL)  # BERT's input, then the samples
    else:
        disc_in_BL = g.disc_in_BL
    rtd_logits_BL, lm_logits_BNV = model.discriminator_outputs(disc_in_BL, types_BL, g.bias, g.positions_BN,
                                                               g.position_BL)
    rtd_logits_BL = rtd_logits_BL.float()
    bce_BL = F.binary_cross_entropy_with_logits(rtd_logits_BL, g.replaced_BL, reduction="none")
    disc_loss = (bce_BL * g.attn_BL).sum() / g.tokens_denom
    ce_BN, probs_BNV = softmax_cross_entropy(lm_logits_BNV, g.target_BN)
    if obj.objective == "corrective":
        # p(original) = P(kept) [input = original] + P(replaced) softmax(original): the copy logit is
        # the RTD logit negated, without gradient here (the RTD loss trains the binary head)
        kept_logit_BN = -torch.gather(rtd_logits_BL, 1, g.positions_BN).detach()
        same_BN = torch.gather(disc_in_BL, 1, g.positions_BN) == g.target_BN
        log_q_BN = copy_mixture(-ce_BN, kept_logit_BN, same_BN)
        lm_loss = -(log_q_BN * g.w_BN).sum() / g.masked_denom
    else:
        lm_loss = (ce_BN * g.w_BN).sum() / g.masked_denom
    if phased:
        loss = g.gen_loss + rtd_w * obj.disc_weight * disc_loss + mlm_w * obj.disc_mlm_weight * lm_loss
    else:
        loss = g.gen_loss + obj.disc_weight * disc_loss + obj.disc_mlm_weight * lm_loss
    with torch.no_grad():
        if obj.objective == "corrective":  # the prediction: the input where P(kept) > 0.5, else the head's argmax
            by_head = (torch.gather(probs_BNV, 2, g.target_BN.unsqueeze(-1)).squeeze(-1) >= probs_BNV.amax(-1)).float()
            copy = (kept_logit_BN > 0).float()
            correct_BN = copy * same_BN.float() + (1.0 - copy) * by_head
            lm_sums = {"disc_mlm_tokens": g.w_BN.sum(), "disc_mlm_correct": (correct_BN * g.w_BN).sum()}
        else:
            s = generator_sums(probs_BNV, g.target_BN, g.w_BN)
            lm_sums = {"disc_mlm_tokens": s["masked"], "disc_mlm_correct": s["gen_correct"]}
        if phased:  # each phase's figures from its own steps only (model.metrics.PHASE_STEPS)
            lm_sums = {k: v * mlm_w for k, v in lm_sums.items()}
            # this call's share of its optimizer step: its tokens over the step's (1 without norm_2), so
            # the micro-steps of an accumulated step count one step together, as their losses add up
            # to one step's loss (counting 1 a call read the phase losses grad_accum times too low)
            share = g.attn_BL.sum() / g.tokens_denom
            sums = {"disc_loss": disc_loss.detach() * rtd_w, "rtd_steps": rtd_w * share,
                    "disc_mlm_loss": lm_loss.detach() * mlm_w, "mlm_steps": mlm_w * share,
                    **discriminator_sums(rtd_logits_BL, g.replaced_BL, g.attn_BL * rtd_w)}
        else:
            sums = {"disc_loss": disc_loss.detach(), "disc_mlm_loss": lm_loss.detach(),
                    **discriminator_sums(rtd_logits_BL, g.replaced_BL, g.attn_BL)}
        sums = {"loss": loss.detach(), "gen_loss": g.gen_loss.detach(), **g.sums, **sums, **lm_sums}
    return StepOutput(loss, sums, g.positions_BN, g.w_BN, g.masked_BL, disc_in_BL, g.replaced_BL,
                      {"gen_loss": g.gen_loss, "disc_loss": disc_loss, "disc_mlm_loss": lm_loss})


STEPS: dict[str, Callable[..., StepOutput]] = {
    "electra": electra_step,
    "electra15": electra_step,
    "mlm": masked_lm_step,
    "replace_mlm": masked_lm_step,
    "all_tokens_mlm": all_tokens_mlm_step,
    "hybrid": rtd_lm_step,
    "corrective": rtd_lm_step,
    "mlm_then_rtd": rtd_lm_step,
}


def step_function(objective: str) -> Callable[..., StepOutput]:
    """``fn(model, ids_BL, types_BL, specials, objective_config, norm_2=None, doc_BL=None, knobs=None)
    -> StepOutput`` (``doc_BL``: sequence numbers of packed rows, :func:`model.rtd.electra_step`;
    ``knobs``: :func:`knobs`)."""
    return STEPS[objective]


def knobs(obj: ObjectiveConfig, step_t: torch.Tensor, total_steps: int) -> dict[str, torch.Tensor] | None:
    """This step's scheduled values, computed on the device from ``step_t`` (the 0-based step as a
    0-d float tensor the trainer keeps on the device and counts up there): the same graph every step,
    no host-to-device copy. None when the objective schedules nothing.

    - ``temperature`` (``objective.temperature_start`` > 0): temperature_start at step 0, falling
      linearly to ``objective.temperature`` at temperature_decay * total_steps, then constant.
    - ``mlm_weight`` (mlm_then_rtd): 1 for the first round(mlm_phase * total_steps) steps, then 0.
    """
    out: dict[str, torch.Tensor] = {}
    if obj.temperature_start > 0:
        span = max(1.0, obj.temperature_decay * total_steps)
        left = (1.0 - step_t / span).clamp(min=0.0)
        out["temperature"] = obj.temperature + (obj.temperature_start - obj.temperature) * left
    if obj.objective == "mlm_then_rtd":
        out["mlm_weight"] = (step_t < mlm_steps(obj, total_steps)).float()
    return out or None


def mlm_steps(obj: ObjectiveConfig, total_steps: int) -> int:
    """mlm_then_rtd: how many of the first steps train the discriminator as a masked LM."""
    return int(obj.mlm_phase * total_steps + 0.5)
