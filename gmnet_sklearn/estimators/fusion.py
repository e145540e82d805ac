"""Descriptor fusion: molecule-level features added to the pooled state before the model's head.

``DescriptorFusion(model, n_descriptors)`` wraps a property model that exposes ``pool`` (one
d-vector per molecule) and ``readout`` (its head on that vector), Chem-GMNet and the ChemBERTa
baseline alike. The scaled descriptors pass through one linear map into the model width and are
added to the pooled state; the head's first dense layer then sees ``W z + W P d``, the same
function class as a dense layer on the concatenation ``[z; d]`` (Chemprop's way of fusing extra
features), without changing the wrapped model's own parameters or their names.
"""

from __future__ import annotations

import torch
from torch import nn


class DescriptorFusion(nn.Module):
    def __init__(self, model: nn.Module, n_descriptors: int, d_model: int):
        super().__init__()
        self.model = model
        self.descriptor_proj = nn.Linear(n_descriptors, d_model)
        nn.init.normal_(self.descriptor_proj.weight, std=n_descriptors ** -0.5)
        nn.init.zeros_(self.descriptor_proj.bias)

    def forward(self, input_ids, conj_flags=None, attention_mask=None, descriptors=None) -> torch.Tensor:
        return self.model.readout(self.pool(input_ids, conj_flags, attention_mask, descriptors))

    def pool(self, input_ids, conj_flags=None, attention_mask=None, descriptors=None) -> torch.Tensor:
        """What the head gets: the pooled state plus the projected molecule features (B, d)."""
        z = self.model.pool(input_ids, conj_flags, attention_mask)
        if descriptors is None:
            raise ValueError("this model was fitted with molecule features (descriptors and/or fingerprint): "
                             "pass their rows as `descriptors`")
        return z + self.descriptor_proj(descriptors.to(z.dtype))

    def n_parameters(self, trainable_only: bool = True) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)
