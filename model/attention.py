"""Attention inputs for packed rows (several sequences a row), in the form each attention kernel takes.

A packed row comes with ``doc_BL`` (sequence number per token, 0 = padding, from the examples
artifact's ``packing=isolated``). Query i may attend to key j when both are of the same sequence
and j is not padding; a padding query sees itself only. That last rule keeps every row of the
mask non-empty: a row with no key gives NaN in SDPA (a boolean mask becomes -inf) and in
FlexAttention, where the dense float bias's finite minimum gave a uniform softmax. No loss reads a
padding position's output, and no real token attends to one, so which keys padding sees changes
nothing else (tests/test_attention_packed.py checks both).

The same mask in three forms (:data:`FORMS`); the device names the one it prefers
(``Device.attention`` in ``model/device.py``) and :func:`kernel_form` settles it for a model:

- ``bias``: a dense additive float [B, 1, L, L] (0 where attended, the dtype's minimum elsewhere),
  4 bytes an entry. What an eager formula adds to its scores: the CPU's attention
  (``model/cpu_dropout.py``) and XLA, whose one compiled program wants static dense shapes.
- ``bool``: [B, 1, L, L] booleans, True where attended, 1 byte an entry, for SDPA. SDPA turns it
  into a float mask (-inf where False) in the query's dtype on every call, and any mask keeps SDPA
  off its flash kernel (``check_for_attn_mask`` in ATen's ``sdp_utils.cpp``): on CUDA it takes the
  memory-efficient or the cuDNN kernel, the same ones a float bias takes.
- ``flex``: a FlexAttention ``BlockMask`` (torch.nn.attention.flex_attention) built from
  :func:`document_mask_mod`: no dense mask at all; the compiled kernel evaluates the rule from the
  doc ids and skips the (128 x 128 by default) blocks where nothing is attended. FlexAttention has
  no dropout (transformers raises on it) and, on the CPU, no backward (torch 2.14 raises), so
  :func:`kernel_form` gives ``bool`` instead whenever the encoders have attention dropout.

The Hugging Face encoders pick their attention function by name from their config; for ``bool``
and ``flex`` the pair switches them to :data:`PACKED`, which sends a ``BlockMask`` to transformers'
FlexAttention function and any tensor mask (the one-sequence-a-row padding bias) to its SDPA
function, so callers that still pass a float bias keep working.
"""

from __future__ import annotations

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask
from transformers import AttentionInterface
from transformers.integrations.flex_attention import flex_attention_forward
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

FORMS = ("bias", "bool", "flex")
PACKED = "kolectra_packed"


def kernel_form(preferred: str, attention_dropout: float) -> str:
    """The form a model uses given its device's ``preferred`` one: FlexAttention takes no dropout."""
    if preferred not in FORMS:
        raise ValueError(f"attention form {preferred!r}: expected one of {', '.join(FORMS)}")
    return "bool" if preferred == "flex" and attention_dropout > 0 else preferred


def document_keep(doc_BL: torch.Tensor) -> torch.Tensor:
    """[B, L, L] booleans: query i may attend to key j (same sequence, j not padding, or j = i)."""
    L = doc_BL.shape[1]
    same_BLL = doc_BL[:, :, None] == doc_BL[:, None, :]
    self_LL = torch.eye(L, dtype=torch.bool, device=doc_BL.device)
    return same_BLL & ((doc_BL[:, None, :] > 0) | self_LL)


def document_mask_mod(doc_BL: torch.Tensor):
    """:func:`document_keep` as a FlexAttention ``mask_mod`` (one query/key pair at a time)."""

    def keep(b, h, q, kv):
        return (doc_BL[b, q] == doc_BL[b, kv]) & ((doc_BL[b, kv] > 0) | (q == kv))

    return keep


def document_block_mask(doc_BL: torch.Tensor) -> BlockMask:
    """The packed rows' FlexAttention ``BlockMask``, one for every head."""
    B, L = doc_BL.shape
    return create_block_mask(document_mask_mod(doc_BL), B, None, L, L, device=doc_BL.device)


def document_positions(doc_BL: torch.Tensor) -> torch.Tensor:
    """[B, L] position ids: the number of tokens of a token's sequence before it, so they restart at
    0 on each [CLS] and are what the token would have alone in a row."""
    L = doc_BL.shape[1]
    same_BLL = doc_BL[:, :, None] == doc_BL[:, None, :]
    before_LL = torch.ones(L, L, dtype=torch.bool, device=doc_BL.device).tril()
    return (same_BLL & before_LL).sum(-1) - 1


def document_attention(doc_BL: torch.Tensor, form: str = "bias", dtype: torch.dtype = torch.float32
                       ) -> tuple[torch.Tensor | BlockMask, torch.Tensor]:
    """Per-token sequence numbers (0 = padding) -> (the mask in ``form``, position ids [B, L]).

    Static shapes, no host sync, the same graph for every batch. The ``bias`` form costs
    B x L x L x 4 bytes (8 MiB at 128 x 128 x 128), ``bool`` a quarter of that, ``flex`` a few
    integers per 128 x 128 block.
    """
    if form == "flex":
        return document_block_mask(doc_BL), document_positions(doc_BL)
    keep_B1LL = document_keep(doc_BL)[:, None]
    if form == "bool":
        return keep_B1LL, document_positions(doc_BL)
    if form != "bias":
        raise ValueError(f"attention form {form!r}: expected one of {', '.join(FORMS)}")
    return (~keep_B1LL).to(dtype) * torch.finfo(dtype).min, document_positions(doc_BL)


def packed_attention(module, query, key, value, attention_mask, **kwargs):
    """transformers' attention signature: FlexAttention for a ``BlockMask``, SDPA for a tensor mask."""
    forward = flex_attention_forward if isinstance(attention_mask, BlockMask) else sdpa_attention_forward
    return forward(module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register(PACKED, packed_attention)
# A 2-D padding mask given to a model under this name becomes SDPA's mask (without a registered
# mask function transformers would pass no mask at all).
ALL_MASK_ATTENTION_FUNCTIONS.register(PACKED, sdpa_mask)
