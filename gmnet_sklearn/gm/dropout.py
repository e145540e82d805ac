"""Dropout for Chem-GMNet: `nn.Dropout` with a faster mask on CPU.

On CPU, training-mode dropout takes its keep/drop decisions from a counter-based hash of
(seed, element index) in the fused C++ extension (`gm/cpu/dropout.cpp`): several times faster
than torch's sequential Bernoulli draws, and the backward recomputes the mask from the seed
instead of storing it. Each call draws its seed from torch's global generator, so
``torch.manual_seed`` still makes training repeatable. The masks differ from ``nn.Dropout``'s
draws but have the same distribution (each element kept independently with probability 1 - p,
up to the 2^-32 resolution of the threshold). Elsewhere (CUDA, eval mode, in-place, no
compiler) it is ``nn.Dropout`` unchanged.

`keep_mask_reference` is the same hash in NumPy: the kernel's tests compare every element.
"""

from __future__ import annotations

import torch
from torch import nn

from .ops.dropout import dropout


class Dropout(nn.Dropout):
    """`nn.Dropout` (same parameters, same train/eval behaviour) with the counter-based CPU mask.

    ``impl`` picks the form (`ops.dropout`): "auto", "cpu", "parallel" (torch's draws) or
    "reference" (the kernel's mask in NumPy)."""

    def forward(self, x: torch.Tensor, impl: str = "auto") -> torch.Tensor:
        return dropout(x, self.p, self.training, self.inplace, impl)
