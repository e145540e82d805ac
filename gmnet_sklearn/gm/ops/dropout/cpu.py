"""Dropout through the C++ kernel (`gm/cpu/dropout.cpp`, ``impl="cpu"``).

torch's CPU dropout draws a Bernoulli mask from a sequential generator and stores it; the kernel
hashes (seed, element index) instead, 16 elements per vector select, and its backward recomputes
the mask from the seed.
"""

from __future__ import annotations

import torch

from ... import cpu as cpu_extension
from .naive import draw_seed, dropout_threshold


class _DropoutCPU(torch.autograd.Function):
    # The mask is never stored: the backward recomputes it from the seed (with the module the
    # forward used, even if the kernels are disabled in between).
    @staticmethod
    def forward(ctx, x, seed, threshold, scale):
        ctx.ext, ctx.args = cpu_extension.load_extension(), (seed, threshold, scale)
        return ctx.ext.dropout_apply(x, seed, threshold, scale)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        return ctx.ext.dropout_apply(grad, *ctx.args), None, None, None


def dropout_cpu(x: torch.Tensor, p: float, seed: int | None = None) -> torch.Tensor:
    """Training-mode dropout, x * keep / (1 - p), with the counter-based mask of `dropout.cpp`.

    ``seed`` (0 <= seed < 2^63) fixes the mask; by default it is drawn from torch's global
    generator, so ``torch.manual_seed`` makes runs repeatable as with ``nn.Dropout``. The mask of
    element i (row-major) is `naive.keep_mask_reference(numel, p, seed)[i]`.
    """
    cpu_extension.check_available()
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the CPU kernel takes float32/float64 CPU tensors, got {x.dtype} on {x.device}")
    if seed is None:
        seed = draw_seed()
    return _DropoutCPU.apply(x, int(seed), dropout_threshold(p), 1.0 / (1.0 - p))
