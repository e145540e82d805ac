"""Both DualSKA branches through the fused C++ kernel (`gm/cpu/dual_ska.cpp`, ``impl="cpu"``).

Eager PyTorch spends the attention step on memory-bound passes over (B, H, T, T) tensors; the
kernel keeps every (query, key) pair in registers and stores nothing T x T; its backward
recomputes the rows.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from ... import cpu as cpu_extension
from ... import functional as F

__all__ = ["dual_ska_cpu", "dual_ska_cpu_fm", "dual_ska_supported"]

# Limits of the DualSKA kernel's fixed-size arrays (dual_ska.cpp: MAXL, and the per-row buffers).
MAX_K, MAX_L = 64, 8


def dual_ska_supported(k: int, L: int) -> bool:
    """Shapes the DualSKA kernel takes (others run the eager path)."""
    return k <= MAX_K and L <= MAX_L


@lru_cache(maxsize=64)  # once per shape, not per forward
def _coefficients(k: int, L: int) -> tuple[tuple, tuple, tuple, float]:
    alpha, beta = F.gegenbauer_recurrence(k, L)  # alpha_0, beta_0 are not read by the kernel
    return tuple(F.zonal_coefficients(k, L).tolist()), alpha, beta, 1.0 / float(np.sqrt(F.harmonic_dim(k, L)))


class _DualSKACPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qkp, log_gamma, mask, L, eps):
        args = (*_coefficients(qkp.shape[-1], L), eps)
        ctx.ext = cpu_extension.load_extension()  # the backward uses the same module
        y, cv = ctx.ext.dual_ska_forward(qkp, log_gamma, mask, *args)
        ctx.save_for_backward(qkp, log_gamma, mask, cv)
        ctx.args = args
        return y, cv

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy, gcv):
        qkp, log_gamma, mask, cv = ctx.saved_tensors
        gy = torch.zeros_like(cv) if gy is None else gy.contiguous()
        gcv = torch.zeros_like(cv) if gcv is None else gcv.contiguous()
        g_qkp, g_lg = ctx.ext.dual_ska_backward(qkp, log_gamma, mask, cv, gy, gcv, *ctx.args)
        return g_qkp, g_lg, None, None, None


def dual_ska_cpu_fm(qkp: torch.Tensor, log_gamma: torch.Tensor, mask: torch.Tensor, L: int, eps: float = 1e-6):
    """Both DualSKA branches from the raw projections, in the layouts the module already has.

    qkp (B, T, 3, H, k): the fused q/k/p projection before normalising q, k and masking p (the
    kernel does both, and their backward); log_gamma (B, H, T, L+1), zero at padding; mask (B, T).
    Returns y_sfa and cv, each (H, k, B*T): the feature-major layout of the Phi read-out. Outputs
    at padded query positions are not used by the model and may differ from the references' (the
    kernel skips positions that are padding for a whole SIMD block of rows, leaving them zero).
    """
    cpu_extension.check_available()
    if qkp.device.type != "cpu" or qkp.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the CPU kernel takes float32/float64 CPU tensors, got {qkp.dtype} on {qkp.device}")
    for name, t in (("log_gamma", log_gamma), ("mask", mask)):  # the kernel reads their memory as the host's
        if t.device.type != "cpu":
            raise ValueError(f"the CPU kernel takes CPU tensors, got {name} on {t.device}")
    return _DualSKACPU.apply(qkp.contiguous(), log_gamma.to(qkp.dtype).contiguous(), mask.bool().contiguous(), L, eps)


def dual_ska_cpu(q, k, p, log_gamma, mask, L: int, eps: float = 1e-6):
    """(y_sfa, cv), each (B, H, T, k), from q, k, p (B, H, T, k) (q, k raw: normalised inside).

    Equal to `zonal.bidir_sfa_parallel(normalise(q), normalise(k), p, ...)` and
    `zonal.ska_zonal(...)` with p zeroed at padding. For tests and direct use; the module
    calls `dual_ska_cpu_fm` on its projection directly.
    """
    cpu_extension.check_available()
    B, H, T, kd = q.shape
    qkp = torch.stack([q, k, p], 0).permute(1, 3, 0, 2, 4)  # (B, T, 3, H, k)
    y, cv = dual_ska_cpu_fm(qkp, log_gamma, mask, L, eps)
    return tuple(o.view(H, kd, B, T).permute(2, 0, 3, 1) for o in (y, cv))
