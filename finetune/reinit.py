"""Re-initialising the top encoder layers before fine-tuning (``reinit_top_layers``).

An early ELECTRA discriminator fine-tunes badly from its top layers: they are specialised to
replaced-token detection (electra_pytorch issue 34; Rep et al., Findings of EMNLP 2024, find
the discriminator's last layer its worst for sentence similarity), and issue 44's side
experiment found a re-initialised top layer closes most of the low-data gap to MLM
(docs/studies.md).  Zhang et al. 2021 ("Revisiting few-sample BERT fine-tuning") re-initialise
the top layers of BERT the same way.

The weights come from the model's own initialiser (``PreTrainedModel._init_weights``: normal
with the config's ``initializer_range``, LayerNorm ones/zeros, biases zero), drawn on the CPU
from a generator of their own seeded from the run's seed (:func:`stream_seed`), so the draw is the
same on every device and leaves the global generator (dropout, the head) where it was.  Seeded with
the run's seed itself, it replayed the draws that generator (seeded with it too) gave the new
head: the top layer's query matrix was the classification head's dense matrix, value for value.
"""

from __future__ import annotations

import hashlib

import torch

from kolectra.core.config import ConfigError

# transformers marks loaded tensors so that its init functions skip them; a re-initialisation
# must clear the mark or it silently leaves the pretrained weights in place.
HF_MARK = "_is_hf_initialized"


def encoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The encoder's stack of transformer layers (ELECTRA/BERT-style ``<base>.encoder.layer``)."""
    layers = getattr(getattr(model.base_model, "encoder", None), "layer", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise ConfigError(f"reinit_top_layers: cannot find the encoder layers of a {type(model).__name__}")
    return layers


def reinit_top_layers(model: torch.nn.Module, k: int, seed: int) -> list[int]:
    """Draw the top ``k`` encoder layers afresh from the model's initialiser; returns their indices
    (0 = the first layer above the embeddings).  ``k = 0`` changes nothing."""
    if k == 0:
        return []
    layers = encoder_layers(model)
    if k > len(layers):
        raise ConfigError(f"reinit_top_layers: the model has {len(layers)} encoder layers, got {k}")
    picked = list(range(len(layers) - k, len(layers)))
    draw_afresh(model, [layers[i] for i in picked], stream_seed(seed, "reinit"))
    return picked


def stream_seed(seed: int, stream: str) -> int:
    """A seed of its own for ``stream`` (``reinit``, ``head``), from the run's ``seed``: a generator
    seeded with ``seed`` itself draws what the global one, seeded with it as well, drew for the head."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{stream}".encode()).digest()[:8], "little")


def draw_afresh(model: torch.nn.Module, parts: list[torch.nn.Module], seed: int) -> None:
    """Every weight of ``parts`` (modules of ``model``) drawn again from the model's initialiser, on the
    CPU from a generator seeded with ``seed``; the global generator stays where it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for part in parts:
            device = next(part.parameters()).device
            part.to("cpu")
            for module in part.modules():
                for tensor in (*module.parameters(recurse=False), *module.buffers(recurse=False)):
                    if hasattr(tensor, HF_MARK):
                        delattr(tensor, HF_MARK)
                if hasattr(module, HF_MARK):
                    delattr(module, HF_MARK)
                model._init_weights(module)  # noqa: SLF001 - the initialiser transformers applies
            part.to(device)
