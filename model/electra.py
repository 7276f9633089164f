"""The generator/discriminator pair, built from transformers' ELECTRA modules.

Both networks are stock ``ElectraForMaskedLM`` (generator) and ``ElectraForPreTraining``
(discriminator), so each exports with ``save_pretrained`` and loads without custom code. How they
share embeddings is ``model.embedding_sharing``:

- ``es`` (default), ELECTRA's sharing (paper section 3.2, "weight sharing"): ONE embedding module
  (word, position and token-type tables + LayerNorm); the generator's ``electra.embeddings`` IS
  the discriminator's, so both losses pull on the same tables.
- ``gdes``, DeBERTaV3's gradient-disentangled embedding sharing (He et al. 2021, section 4): each
  network has its own embedding module, and the discriminator's tables are the generator's,
  detached, plus a zero-initialised delta (a ``torch.nn.utils.parametrize`` parametrization of
  its weights). The generator's MLM loss alone moves the shared tables; the discriminator's
  gradient reaches only its delta, which ends the "tug of war" between the two objectives
  (DeBERTaV3 reports +1.9 GLUE over ES at Large). The export folds the delta in.
- ``none``: separate tables (the paper's "no sharing" row).

The generator's output layer is tied to its own word embeddings in every mode. When a network's
hidden size differs from ``embedding_size``, ElectraModel's own ``embeddings_project`` maps the
embeddings to it.

For the MLM ablations (paper section 3.2) the discriminator-sized network is a masked LM
instead (``ElectraForMaskedLM``, its output layer tied to the same embeddings); the plain "BERT"
baseline has no generator, and "All-Tokens MLM" adds the paper's copy head (a sigmoid per token,
built like the discriminator's head).
The RTD family's hybrid, corrective and mlm_then_rtd objectives keep ``ElectraForPreTraining`` and
add :class:`DiscriminatorLMHead`, a vocabulary head beside it (not exported). The generator's width
may be set as a share of the discriminator's (``model.generator_width``).

The forward helpers below take a prebuilt 4-D additive attention bias: transformers 5 returns a
4-D mask unchanged (``masking_utils._preprocess_mask_arguments``), whereas a 2-D mask goes
through ``sdpa_mask``, which may call ``.all()`` on it to skip the mask (a host sync per call,
and a data-dependent branch under XLA). Rows that hold several sequences (the examples stage's
``packing=isolated``) come with ``doc_ids``; :func:`kolectra.model.attention.document_attention`
turns them into a [B, 1, L, L] mask (a token sees only its own sequence) and position ids that
restart at each sequence's [CLS], so every sequence is encoded exactly as it would be alone in a
row. The mask's form (a float bias, booleans for SDPA or a FlexAttention block mask) is the
device's choice: :meth:`ElectraPair.use_attention`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from transformers.models.electra.modeling_electra import ElectraDiscriminatorPredictions, ElectraGeneratorPredictions

from kolectra.model.attention import PACKED, kernel_form
from kolectra.model.config import DISC_LM_OBJECTIVES, MLM_OBJECTIVES, ModelConfig, generator_shape

# The embedding tables GDES ties (every table of ElectraEmbeddings; its LayerNorm stays each network's own).
TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")


class DetachedPlusDelta(nn.Module):
    """GDES: ``weight = source.weight.detach() + delta``, the parametrized tensor being the delta.

    ``source`` (the generator's table) is held outside the module tree: the generator owns it,
    and looking it up at call time follows it across ``.to(device)``."""

    def __init__(self, source: nn.Embedding):
        super().__init__()
        self.__dict__["source"] = source  # not a submodule: no second copy in state_dict or parameters()

    def forward(self, delta: torch.Tensor) -> torch.Tensor:
        return self.source.weight.detach() + delta


def tie_gdes(disc_embeddings: nn.Module, gen_embeddings: nn.Module) -> None:
    """Make each of the discriminator's tables its generator table (detached) plus a zero delta."""
    for name in TABLES:
        table = getattr(disc_embeddings, name)
        with torch.no_grad():
            table.weight.zero_()
        parametrize.register_parametrization(table, "weight", DetachedPlusDelta(getattr(gen_embeddings, name)),
                                             unsafe=True)


def plain_state_dict(net: nn.Module) -> dict[str, torch.Tensor]:
    """``net``'s weights as a stock model of its class names them: GDES deltas folded into their tables.

    Built from ``state_dict()`` (a copy plus ``remove_parametrizations`` would strip the property
    from the parametrized class that the copy shares with ``net``)."""
    state = net.state_dict()
    for prefix, m in net.named_modules():
        if not parametrize.is_parametrized(m):
            continue
        dot = f"{prefix}." if prefix else ""
        for name in m.parametrizations:
            for key in [k for k in state if k.startswith(f"{dot}parametrizations.{name}.")]:
                del state[key]
            state[f"{dot}{name}"] = getattr(m, name).detach()
    return state


def hf_configs(cfg: ModelConfig, vocab_size: int, pad_id: int) -> tuple[ElectraConfig, ElectraConfig]:
    """(discriminator, generator) ElectraConfigs; both use the same embedding shapes. The generator's
    width comes from ``model.generator_width`` when set (:func:`kolectra.model.config.generator_shape`)."""
    cfg = generator_shape(cfg)
    common = dict(
        vocab_size=vocab_size, embedding_size=cfg.embedding_size, max_position_embeddings=cfg.max_position,
        type_vocab_size=cfg.type_vocab_size, hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.attention_dropout, pad_token_id=pad_id, hidden_act="gelu",
    )
    disc = ElectraConfig(hidden_size=cfg.hidden, num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
                         intermediate_size=cfg.intermediate, **common)
    gen = ElectraConfig(hidden_size=cfg.generator_hidden, num_hidden_layers=cfg.generator_layers,
                        num_attention_heads=cfg.generator_heads, intermediate_size=cfg.generator_intermediate,
                        tie_word_embeddings=True, **common)
    return disc, gen


class DiscriminatorLMHead(nn.Module):
    """A vocabulary head on the discriminator (hybrid, corrective, mlm_then_rtd): ELECTRA's generator
    head (dense to the embedding size, GELU, LayerNorm) and an output layer whose weight is the
    discriminator's word-embedding table, read at call time (with GDES that table is a
    parametrization, recomputed from the generator's table and the delta), plus its own bias.

    Not part of ``ElectraForPreTraining``: it stays out of the export, as All-Tokens MLM's copy head does."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.predictions = ElectraGeneratorPredictions(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(self.predictions(h), word_embeddings, self.bias)


class ElectraPair(nn.Module):
    """Generator + discriminator with shared embeddings; ``parameters()`` lists shared ones once.

    ``objective`` picks the discriminator-sized network: ``ElectraForPreTraining`` for the RTD
    objectives, ``ElectraForMaskedLM`` for the MLM ablations (``generator`` is None for "mlm").
    """

    # How the generator's samples are drawn (``model.rtd.SAMPLERS``, the same distribution either
    # way); the device sets it in ``place``.
    sampler = "gumbel"
    # The form of packed rows' attention mask (``model.attention.FORMS``); set by ``use_attention``.
    attention = "bias"

    def __init__(self, cfg: ModelConfig, vocab_size: int, pad_id: int, objective: str = "electra"):
        super().__init__()
        self.objective, self.embedding_sharing = objective, cfg.embedding_sharing
        disc_config, gen_config = hf_configs(cfg, vocab_size, pad_id)
        mlm = objective in MLM_OBJECTIVES
        self.discriminator = (ElectraForMaskedLM if mlm else ElectraForPreTraining)(disc_config)
        own = self.discriminator.electra.embeddings
        if mlm:
            self.discriminator.generator_lm_head.weight = own.word_embeddings.weight
        self.generator = ElectraForMaskedLM(gen_config) if objective != "mlm" else None
        if self.generator is not None:
            if cfg.embedding_sharing == "es":
                self.generator.electra.embeddings = own
            elif cfg.embedding_sharing == "gdes":
                tie_gdes(own, self.generator.electra.embeddings)
            self.generator.generator_lm_head.weight = self.generator.electra.embeddings.word_embeddings.weight
        # All-Tokens MLM's copy probability D(x, t) (paper section 3.2), a per-token sigmoid.
        self.copy_head = ElectraDiscriminatorPredictions(disc_config) if objective == "all_tokens_mlm" else None
        # hybrid / corrective / mlm_then_rtd: the discriminator's vocabulary head (not exported).
        self.disc_lm_head = DiscriminatorLMHead(disc_config) if objective in DISC_LM_OBJECTIVES else None

    @property
    def embeddings(self) -> nn.Module:
        return self.discriminator.electra.embeddings

    def networks(self) -> dict[str, nn.Module]:
        """The exported Hugging Face models by role (the generator only when there is one)."""
        return {"discriminator": self.discriminator, **({"generator": self.generator} if self.generator else {})}

    def use_attention(self, preferred: str) -> str:
        """Give packed rows the device's ``preferred`` mask form where the encoders can take it
        (:func:`kolectra.model.attention.kernel_form`: no FlexAttention with attention dropout), and
        point the encoders at the attention function that takes it. Returns the form used."""
        nets = self.networks().values()
        self.attention = kernel_form(preferred, max(n.config.attention_probs_dropout_prob for n in nets))
        if self.attention != "bias":
            for net in nets:
                net.set_attn_implementation(PACKED)
        return self.attention

    # ``bias``: [B, 1, 1, L] (one sequence a row) or, for packed rows, the [B, 1, L, L] mask in this
    # pair's ``attention`` form; ``position_BL``: None (0..L-1) or restarting per sequence
    # (:func:`kolectra.model.attention.document_attention`).

    def mlm_logits(self, ids_BL, types_BL, bias, positions_BN=None, position_BL=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The discriminator-sized masked LM (MLM ablations): (vocabulary logits, hidden states).

        Logits at ``positions_BN`` only ([B, N, V]) or, without positions, everywhere ([B, L, V]).
        """
        net = self.discriminator
        h_BLH = net.electra(input_ids=ids_BL, attention_mask=bias, token_type_ids=types_BL,
                            position_ids=position_BL).last_hidden_state
        h = h_BLH if positions_BN is None else torch.gather(
            h_BLH, 1, positions_BN.unsqueeze(-1).expand(-1, -1, h_BLH.shape[-1]))
        return net.generator_lm_head(net.generator_predictions(h)), h_BLH

    def generator_logits(self, ids_BL, types_BL, bias, positions_BN, position_BL=None) -> torch.Tensor:
        """Vocabulary logits at the N chosen positions only: [B, N, V].

        The encoder runs over every position (attention needs them), but the head (dense +
        LayerNorm + the V-wide output layer) only over the gathered N states: projecting all L
        positions onto the vocabulary would cost L/N (about 7x) more for nothing.
        """
        h_BLH = self.generator.electra(input_ids=ids_BL, attention_mask=bias, token_type_ids=types_BL,
                                       position_ids=position_BL).last_hidden_state
        h_BNH = torch.gather(h_BLH, 1, positions_BN.unsqueeze(-1).expand(-1, -1, h_BLH.shape[-1]))
        return self.generator.generator_lm_head(self.generator.generator_predictions(h_BNH))

    def discriminator_outputs(self, ids_BL, types_BL, bias, positions_BN, position_BL=None
                              ) -> tuple[torch.Tensor, torch.Tensor]:
        """One discriminator pass, both heads: RTD logits at every token [B, L] and the vocabulary
        head's logits at the N chosen positions only [B, N, V] (hybrid, corrective, mlm_then_rtd)."""
        net = self.discriminator
        h_BLH = net.electra(input_ids=ids_BL, attention_mask=bias, token_type_ids=types_BL,
                            position_ids=position_BL).last_hidden_state
        h_BNH = torch.gather(h_BLH, 1, positions_BN.unsqueeze(-1).expand(-1, -1, h_BLH.shape[-1]))
        return (net.discriminator_predictions(h_BLH),
                self.disc_lm_head(h_BNH, net.electra.embeddings.word_embeddings.weight))

    def discriminator_logits(self, ids_BL, types_BL, bias, position_BL=None) -> torch.Tensor:
        """One logit per token, "replaced" > 0: [B, L]."""
        h_BLH = self.discriminator.electra(input_ids=ids_BL, attention_mask=bias, token_type_ids=types_BL,
                                           position_ids=position_BL).last_hidden_state
        return self.discriminator.discriminator_predictions(h_BLH)


def attention_bias(attention_mask_BL: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[B, L] 1/0 mask -> [B, 1, 1, L] additive bias (0 where attended, dtype's min elsewhere)."""
    keep = attention_mask_BL[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _encoder_matmul_params(hidden: int, layers: int, intermediate: int, embedding_size: int) -> int:
    """Weights that take part in a matmul per token (lookups excluded), biases ignored."""
    per_layer = 4 * hidden * hidden + 2 * hidden * intermediate
    project = embedding_size * hidden if embedding_size != hidden else 0
    return layers * per_layer + project


def flops_by_part(cfg: ModelConfig, vocab_size: int, seq_len: int, n_masked: int,
                  objective: str = "electra") -> dict[str, int]:
    """Training FLOPs for one sequence, by where they go: 6 x matmul weights per token (forward 2 +
    backward 4) plus attention scores and weighted sums (2 x 2 x L x hidden per token per layer
    forward, x3 for training), Kaplan et al. 2020's convention. The ELECTRA reference's
    ``flops_computation.py`` counts otherwise (backward = one forward, dense embedding lookups,
    element-wise operations): docs/tpu.md compares the two on the paper's shapes.

    ``body``: both encoders (matmuls and attention); ``generator_head``: the generator's dense
    layer and vocabulary softmax, at the ``n_masked`` positions only; ``discriminator_head``: the
    per-token RTD head (and All-Tokens MLM's copy head); ``mlm_head``: the discriminator-sized
    masked LM's vocabulary softmax (MLM ablations: at the masked slots, All-Tokens MLM everywhere;
    hybrid, corrective and mlm_then_rtd: the discriminator's vocabulary head at the masked slots).
    mlm_then_rtd runs both discriminator heads at every step (one graph; a weight picks the phase),
    so every step counts both. The generator's shape follows ``generator_width`` when set.
    """
    cfg = generator_shape(cfg)
    L = seq_len
    has_gen = objective != "mlm"
    gen_layers = cfg.generator_layers if has_gen else 0
    body = 6 * (_encoder_matmul_params(cfg.hidden, cfg.layers, cfg.intermediate, cfg.embedding_size)
                + (_encoder_matmul_params(cfg.generator_hidden, cfg.generator_layers, cfg.generator_intermediate,
                                          cfg.embedding_size) if has_gen else 0))
    attention = 3 * 4 * L * (cfg.hidden * cfg.layers + cfg.generator_hidden * gen_layers)
    gen_head = cfg.generator_hidden * cfg.embedding_size + cfg.embedding_size * vocab_size if has_gen else 0
    rtd_head = cfg.hidden * cfg.hidden + cfg.hidden
    mlm_head = cfg.hidden * cfg.embedding_size + cfg.embedding_size * vocab_size
    parts = {"body": L * body + L * attention, "generator_head": n_masked * 6 * gen_head,
             "discriminator_head": 0, "mlm_head": 0}
    if objective in ("mlm", "replace_mlm"):
        parts["mlm_head"] = n_masked * 6 * mlm_head
    elif objective == "all_tokens_mlm":
        parts["mlm_head"], parts["discriminator_head"] = L * 6 * mlm_head, L * 6 * rtd_head
    elif objective in DISC_LM_OBJECTIVES:
        parts["mlm_head"], parts["discriminator_head"] = n_masked * 6 * mlm_head, L * 6 * rtd_head
    else:
        parts["discriminator_head"] = L * 6 * rtd_head
    return parts


def flops_line(share: dict[str, float], vocab_size: int) -> str:
    """The trainer's "FLOPs per step" line from the parts' shares; where the generator's head takes more
    than 30 %, what would move that compute into the body. It read "(a small vocabulary moves compute into
    the body)", as if describing the run, exactly when its vocabulary was large (84 % at 79,891 entries)."""
    line = "FLOPs per step " + ", ".join(f"{v:.0%} {k.replace('_', ' ')}" for k, v in share.items())
    if share.get("generator_head", 0) > 0.3:
        line += (f" (the generator's softmax over {vocab_size:,} entries: a smaller vocabulary, kolectra vocab "
                 "--vocab-size, moves compute into the body)")
    return line


def train_flops_per_sequence(cfg: ModelConfig, vocab_size: int, seq_len: int, n_masked: int,
                             objective: str = "electra") -> int:
    """Training FLOPs for one sequence (the sum of :func:`flops_by_part`)."""
    return sum(flops_by_part(cfg, vocab_size, seq_len, n_masked, objective).values())
