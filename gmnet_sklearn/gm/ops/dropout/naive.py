"""The counter-based dropout mask in NumPy: the reference of the C++ kernel, element for element.

Element i is kept when a SplitMix64 hash of (seed, i // 2) clears a 32-bit threshold (each hash
decides two elements); `dropout_reference` applies it as the kernel does, so with the same seed
both give the same tensor.
"""

from __future__ import annotations

import numpy as np
import torch

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def dropout_threshold(p: float) -> int:
    """The 32-bit draw below which an element is dropped: round(p * 2^32), at most 2^32 - 1."""
    return min(int(round(float(p) * 2.0**32)), 2**32 - 1)


def draw_seed() -> int:
    """A mask seed (0 <= seed < 2^63) from torch's global generator, so ``torch.manual_seed``
    repeats the masks as it does ``nn.Dropout``'s."""
    return int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))


def keep_mask_reference(n: int, p: float, seed: int) -> np.ndarray:
    """The kernel's keep mask for n elements: SplitMix64 over the counter j = i // 2, whose low
    and high 32 bits decide elements 2j and 2j+1 (kept when >= `dropout_threshold(p)`,
    about p * 2^32)."""
    j = np.arange(1, (n + 1) // 2 + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic mod 2^64 is the point
        z = np.uint64(seed) + j * _GAMMA
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    draws = np.stack([z & np.uint64(0xFFFFFFFF), z >> np.uint64(32)], axis=1).reshape(-1)[:n]
    return draws >= np.uint64(dropout_threshold(p))


def dropout_reference(x: torch.Tensor, p: float, seed: int | None = None) -> torch.Tensor:
    """Training-mode dropout with the kernel's mask (row-major element order), by autograd."""
    if seed is None:
        seed = draw_seed()
    keep = torch.from_numpy(keep_mask_reference(x.numel(), p, seed)).view(x.shape).to(x.device)
    return torch.where(keep, x * (1.0 / (1.0 - p)), torch.zeros((), dtype=x.dtype, device=x.device))
