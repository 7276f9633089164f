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

Every objective takes packed rows (``doc_BL``, several sequences a row) the same way: the
generator pass builds the per-sequence bias and positions once and each network reuses them.

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
from kolectra.model.rtd import Specials, StepOutput, electra_step, generator_sums, mask_and_generate, softmax_cross_entropy


def _masked_lm_sums(logits_BNV, target_BN, w_BN) -> dict[str, torch.Tensor]:
    s = generator_sums(logits_BNV, target_BN, w_BN)
    return {"mlm_tokens": s["masked"], "mlm_correct": s["gen_correct"]}


def _finish(g, mlm_loss, sums) -> StepOutput:
    loss = g.gen_loss + mlm_loss
    sums = {"loss": loss.detach(), "gen_loss": g.gen_loss.detach(), "mlm_loss": mlm_loss.detach(), **g.sums, **sums}
    return StepOutput(loss, sums, g.positions_BN, g.w_BN, g.masked_BL, g.disc_in_BL, g.replaced_BL,
                      {"gen_loss": g.gen_loss, "mlm_loss": mlm_loss})


def masked_lm_step(model: ElectraPair, ids_BL, types_BL, sp: Specials, obj: ObjectiveConfig,
                   norm_2: torch.Tensor | None = None, doc_BL: torch.Tensor | None = None) -> StepOutput:
    """"mlm" (BERT: [MASK]-ed input, no generator) and "replace_mlm" (generator samples as input)."""
    g = mask_and_generate(model, ids_BL, types_BL, sp, obj, norm_2, sample=obj.objective != "mlm", doc_BL=doc_BL)
    logits_BNV, _ = model.mlm_logits(g.disc_in_BL, types_BL, g.bias, g.positions_BN, g.position_BL)
    ce_BN, probs_BNV = softmax_cross_entropy(logits_BNV, g.target_BN)
    mlm_loss = (ce_BN * g.w_BN).sum() / g.masked_denom
    with torch.no_grad():
        sums = _masked_lm_sums(probs_BNV, g.target_BN, g.w_BN)
    return _finish(g, mlm_loss, sums)


def copy_log_likelihood(logits_BLV, copy_logit_BL, input_BL, target_BL) -> torch.Tensor:
    """log p(target) under D * [target = input] + (1 - D) * softmax(logits), computed in log space."""
    log_p_BL = torch.gather(F.log_softmax(logits_BLV.float(), -1), 2, target_BL.unsqueeze(-1)).squeeze(-1)
    log_d, log_not_d = F.logsigmoid(copy_logit_BL.float()), F.logsigmoid(-copy_logit_BL.float())
    generate = log_not_d + log_p_BL
    return torch.where(input_BL == target_BL, torch.logaddexp(log_d, generate), generate)


def all_tokens_mlm_step(model: ElectraPair, ids_BL, types_BL, sp: Specials, obj: ObjectiveConfig,
                        norm_2: torch.Tensor | None = None, doc_BL: torch.Tensor | None = None) -> StepOutput:
    g = mask_and_generate(model, ids_BL, types_BL, sp, obj, norm_2, doc_BL=doc_BL)
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
        sums = {"mlm_tokens": g.attn_BL.sum(), "mlm_correct": (correct * g.attn_BL).sum()}
    return _finish(g, mlm_loss, sums)


STEPS: dict[str, Callable[..., StepOutput]] = {
    "electra": electra_step,
    "electra15": electra_step,
    "mlm": masked_lm_step,
    "replace_mlm": masked_lm_step,
    "all_tokens_mlm": all_tokens_mlm_step,
}


def step_function(objective: str) -> Callable[..., StepOutput]:
    """``fn(model, ids_BL, types_BL, specials, objective_config, norm_2=None, doc_BL=None) -> StepOutput``
    (``doc_BL``: sequence numbers of packed rows, :func:`model.rtd.electra_step`)."""
    return STEPS[objective]
