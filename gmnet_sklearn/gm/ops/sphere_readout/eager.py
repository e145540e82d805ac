"""The Phi read-out in eager torch with a hand-written backward (``impl="parallel"``).

All monomials are stored (built in place, degree by degree, from contiguous slices), the
branches are batched matmuls, and the backward walks the monomial tree back with fused slice ops.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from ... import functional as F


@lru_cache(maxsize=64)
def suffix_starts(k: int, L: int) -> tuple[tuple[int, ...], ...]:
    """For each degree l >= 1 and variable v: where, among the degree-(l-1) monomials, those in
    variables >= v begin. In HarmonicBasis order they form a suffix, and the degree-l monomials
    are exactly concat_v(x_v * suffix_v) (v = the monomial's first variable)."""
    out = []
    for l in range(1, L + 1):
        prev = F._exponents(k, l - 1)
        out.append(tuple(next((i for i, e in enumerate(prev) if not any(e[:v])), len(prev)) for v in range(k)))
    return tuple(out)


def fill_monomials(x: torch.Tensor, starts, n_monomials: int) -> torch.Tensor:
    """x (G, k, N) -> every monomial of degree <= L, (G, n_monomials, N), HarmonicBasis order.

    Each degree-l block is concat_v x_v * (suffix of the degree-(l-1) block), written in place
    into one buffer: contiguous slices, no gathers and no concatenation copies.
    """
    G, k, N = x.shape
    m = x.new_empty(G, n_monomials, N)
    m[:, 0] = 1
    if len(starts):
        m[:, 1 : 1 + k] = x
    prev, size, cur = 1, k, 1 + k
    for st in starts[1:]:
        pos = cur
        for v, s in enumerate(st):
            n = size - s
            torch.mul(x[:, v : v + 1], m[:, prev + s : prev + size], out=m[:, pos : pos + n])
            pos += n
        prev, size, cur = cur, pos - cur, pos
    return m


def monomial_backward(grad: torch.Tensor, x: torch.Tensor, m: torch.Tensor, starts) -> torch.Tensor:
    """Reverse of `fill_monomials`: d(loss)/dx (G, k, N) from d(loss)/d(monomials) (G, n_mono, N).

    Walks the degrees downwards; each (degree, variable) block costs one dot over rows (into
    dx_v) and one fused multiply-add (into the parent degree's gradient), on contiguous slices.
    """
    G, k, N = x.shape
    if len(starts) == 0:
        return torch.zeros_like(x)
    sizes = [math.comb(k + l - 1, l) for l in range(len(starts) + 1)]
    offsets = np.cumsum([0, *sizes]).tolist()
    lower = grad[:, : offsets[-2]].clone()  # degree < L rows accumulate from the degree above
    gx = torch.zeros_like(x)
    for l in range(len(starts), 1, -1):
        top = grad if l == len(starts) else lower
        prev0, prev_size, pos = offsets[l - 1], sizes[l - 1], offsets[l]
        for v, st in enumerate(starts[l - 1]):
            n = prev_size - st
            gv = top[:, pos : pos + n]
            pos += n
            gx[:, v] += torch.linalg.vecdot(gv, m[:, prev0 + st : prev0 + prev_size], dim=1)
            lower[:, prev0 + st : prev0 + prev_size].addcmul_(x[:, v : v + 1], gv)
    return gx.add_(lower[:, 1 : 1 + k] if len(starts) > 1 else grad[:, 1 : 1 + k])


def normalise_fm(z: torch.Tensor, eps: float):
    """Feature-major z (G, k, N) -> (z / max(|z|, eps), the clamped norms (G, 1, N))."""
    # sqrt of a sum of squares: linalg.vector_norm over a strided middle axis is ~50x slower.
    r = z.square().sum(1, keepdim=True).sqrt_().clamp_min_(eps)
    return (z / r).contiguous(), r


def normalise_fm_backward(g_x: torch.Tensor, x: torch.Tensor, r: torch.Tensor, eps: float) -> torch.Tensor:
    # Through x = z / max(|z|, eps): tangential part / |z|, or plain 1/eps where clamped.
    radial = (g_x * x).sum(1, keepdim=True)
    return torch.where(r > eps, (g_x - x * radial) / r, g_x / eps)


class SphereReadoutEager(torch.autograd.Function):
    """sum_b s_b W @ monomials(normalise(z_b)) in torch: all monomials stored, batched matmuls,
    the monomial tree walked back with fused slice ops."""

    @staticmethod
    def forward(ctx, starts, eps, weight, *inputs):
        n = len(inputs) // 2
        zs, scales = inputs[:n], inputs[n:]
        xs, rs = zip(*(normalise_fm(z, eps) for z in zs))
        ctx.starts, ctx.eps, ctx.n = starts, eps, n
        ctx.has_scale = [s is not None for s in scales]
        out, ms = None, []
        for x, s in zip(xs, scales):
            m = fill_monomials(x, starts, weight.shape[-1])
            w = weight if s is None else weight * s[:, None, None]
            out = torch.bmm(w, m) if out is None else out.baddbmm_(w, m)
            ms.append(m)
        ctx.save_for_backward(weight, *xs, *rs, *ms, *[s for s in scales if s is not None])
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        n = ctx.n
        grad = grad.contiguous()
        saved = ctx.saved_tensors
        weight, xs, rs, ms = saved[0], saved[1 : 1 + n], saved[1 + n : 1 + 2 * n], saved[1 + 2 * n : 1 + 3 * n]
        it = iter(saved[1 + 3 * n :])
        scales = [next(it) if has else None for has in ctx.has_scale]
        # d(loss)/d(monomials) before the branch scales: one matmul shared by every branch.
        g_mono = torch.bmm(weight.transpose(1, 2), grad)  # (G, n_mono, N)
        g_weight, g_zs, g_scales = None, [], []
        for x, r, m, s in zip(xs, rs, ms, scales):
            g_w = torch.bmm(grad, m.transpose(1, 2))  # (G, c, n_mono)
            g_x = monomial_backward(g_mono, x, m, ctx.starts)
            if s is None:
                g_weight = g_w if g_weight is None else g_weight + g_w
                g_scales.append(None)
            else:
                g_weight = g_w * s[:, None, None] if g_weight is None else g_weight.addcmul_(g_w, s[:, None, None])
                g_scales.append((g_w * weight).sum((1, 2)))
                g_x = g_x * s[:, None, None]
            g_zs.append(normalise_fm_backward(g_x, x, r, ctx.eps))
        return (None, None, g_weight, *g_zs, *g_scales)
