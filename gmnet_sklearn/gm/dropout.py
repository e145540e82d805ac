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

import numpy as np
import torch
from torch import nn

from . import cpu as cpu_kernels

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def keep_mask_reference(n: int, p: float, seed: int) -> np.ndarray:
    """The kernel's keep mask for n elements: SplitMix64 over the counter j = i // 2, whose low
    and high 32 bits decide elements 2j and 2j+1 (kept when >= `cpu.dropout_threshold(p)`,
    about p * 2^32)."""
    j = np.arange(1, (n + 1) // 2 + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic mod 2^64 is the point
        z = np.uint64(seed) + j * _GAMMA
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    draws = np.stack([z & np.uint64(0xFFFFFFFF), z >> np.uint64(32)], axis=1).reshape(-1)[:n]
    return draws >= np.uint64(cpu_kernels.dropout_threshold(p))


class Dropout(nn.Dropout):
    """`nn.Dropout` (same parameters, same train/eval behaviour) with the counter-based CPU mask."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (self.training and 0.0 < self.p < 1.0 and not self.inplace and x.device.type == "cpu"
                and x.dtype in (torch.float32, torch.float64) and cpu_kernels.cpu_kernels_available()):
            return cpu_kernels.dropout_cpu(x, self.p)
        return super().forward(x)
