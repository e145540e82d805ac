"""The Phi read-out through the C++ extension (`gm/cpu/sphere_readout.cpp`, ``impl="cpu"``).

Monomials are built per chunk of tokens in cache and multiplied there; only the branch-fused
monomials are stored, and only when the weight needs a gradient.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from ... import cpu as cpu_extension
from ... import functional as F
from .eager import normalise_fm, normalise_fm_backward


def extension_for(*tensors: torch.Tensor):
    """The compiled CPU kernels when every tensor is a CPU float tensor, else None."""
    if not all(t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64) for t in tensors):
        return None
    return cpu_extension.load_extension()


@lru_cache(maxsize=64)
def _starts_lists(starts: tuple) -> list:
    return [list(st) for st in starts]


@lru_cache(maxsize=64)
def _derivative_plan(k: int, L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """d m_j / d x_v = e_{j,v} m_{j - e_v}: for each variable v and each monomial i of degree < L,
    the index of j = i + e_v and its exponent of v, flattened (k * n_{<L},) in (v, i) order."""
    basis = F.harmonic_basis(k, L)
    position = {e: i for i, e in enumerate(basis.exponents)}
    lower = [e for e in basis.exponents if sum(e) < L]
    index = np.zeros((k, len(lower)), dtype=np.int64)
    mult = np.zeros((k, len(lower)))
    for v in range(k):
        for i, e in enumerate(lower):
            j = e[:v] + (e[v] + 1,) + e[v + 1 :]
            index[v, i], mult[v, i] = position[j], j[v]
    with torch.inference_mode(False):  # cached: plain tensors even when first built in a predict
        return torch.as_tensor(index.reshape(-1)), torch.as_tensor(mult.reshape(-1))


class SphereReadoutCPU(torch.autograd.Function):
    """sum_b s_b W @ monomials(normalise(z_b)) through the C++ kernels."""

    @staticmethod
    def forward(ctx, starts, eps, weight, *inputs):
        n = len(inputs) // 2
        zs, scales = inputs[:n], inputs[n:]
        xs, rs = zip(*(normalise_fm(z, eps) for z in zs))
        ctx.starts, ctx.eps, ctx.n = starts, eps, n
        ctx.has_scale = [s is not None for s in scales]
        scale_t = (torch.stack([weight.new_ones(weight.shape[0]) if s is None else s for s in scales])
                   if any(ctx.has_scale) else weight.new_zeros(0))
        # The fused monomials are only needed for the weight gradient.
        ctx.ext = cpu_extension.load_extension()  # the backward uses the same module
        out, fused = ctx.ext.sphere_readout_forward(weight.contiguous(), list(xs), scale_t,
                                                    _starts_lists(starts), ctx.needs_input_grad[2])
        ctx.save_for_backward(weight, scale_t, fused, *xs, *rs)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        n = ctx.n
        grad = grad.contiguous()
        weight, scale_t, fused, *rest = ctx.saved_tensors
        xs, rs = rest[:n], rest[n:]
        # The fused monomials carry the scales; stored only when the weight needs a gradient.
        N = grad.shape[-1]  # the stored monomials are padded to whole chunks
        g_weight = torch.bmm(grad, fused[..., :N].transpose(1, 2)) if ctx.needs_input_grad[2] else None
        G, k, _ = xs[0].shape
        index, mult = _derivative_plan(k, len(ctx.starts))
        res = ctx.ext.sphere_readout_backward(weight.transpose(1, 2).contiguous(), list(xs), scale_t,
                                              _starts_lists(ctx.starts), grad, index, mult)
        g_xs, g_scale_t = res[:n], res[n]
        g_zs = [normalise_fm_backward(g, x, r, ctx.eps) for g, x, r in zip(g_xs, xs, rs)]
        g_scales = [g_scale_t[b] if has else None for b, has in enumerate(ctx.has_scale)]
        return (None, None, g_weight, *g_zs, *g_scales)
