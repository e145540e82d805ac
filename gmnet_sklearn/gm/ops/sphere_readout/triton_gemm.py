"""The Triton read-out with its three matmuls on cuBLAS (`triton.FORM = "gemm"`, the form that ships; "fused" is the other).

Why a second form: the fused kernels (`triton.py`) never write a monomial to memory, but they
rebuild each chunk of monomials for every block of output channels, and their backward builds
them twice more (input gradients, weight gradient) around hand-tiled dots; on an H100 at batch
1024 the read-outs are 27 of a 60 ms masked-LM step (profile_step_cuda_h100_59277fe.log). Here one
Triton kernel writes the scaled monomials of both branches, sum_b s_b monomials(normalise(z_b)),
as one (G, n_monomials, N) tensor, and the products with W are `torch.bmm`:

    forward   out = W @ M
    backward  dW = dOut @ M^T,   dM = W^T @ dOut,   then dz_b, ds_b from dM (a Triton kernel)

The monomial tensor is rebuilt in the backward rather than kept (the memory of a step stays what
the fused form needs). The dz kernel is the fused backward's per-token part (`_branch_backward`:
the factors gathered once for L <= 4, the product rule onto the k coordinates, the normalisation's
backward), reading dM from memory instead of summing it over channel blocks. The matmuls follow
PyTorch's float32 matmul precision (TF32 under "high"), as the fused kernels' dots do.

Whether the extra traffic (the monomial tensor: 165 floats a token and group at k = 8, L = 3,
written twice, read three times) costs less than the fused form's rebuilding is a GPU measurement
(`benchmarks.pretrain_throughput --readout-form`); the tests compare this form with the float64
reference as they do the fused one.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from . import triton as fused
from .triton import _branch_backward, _inverse_norms, _monomial_chunk, _scale, _store_branch_grads


@triton.jit
def _monomials_kernel(Z0, Z1, S, IDX, M, N, NM, k, eps,
                      s0g, s0k, s0n, s1g, s1k, s1n, smg, smm, smn,
                      NB: tl.constexpr, L: tl.constexpr, KP: tl.constexpr, MC: tl.constexpr, BN: tl.constexpr):
    """M[g, :, n] = sum_b s_b monomials(normalise(z_b[g, :, n])): one program per (group, token block)."""
    g = tl.program_id(0)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    nmask = n < N
    kk = tl.arange(0, KP)
    _, _, inv0 = _inverse_norms(Z0, g * s0g, s0k, s0n, kk, n, nmask, k, eps)
    inv1 = inv0
    if NB == 2:
        _, _, inv1 = _inverse_norms(Z1, g * s1g, s1k, s1n, kk, n, nmask, k, eps)
    sc0 = _scale(S, g, NB, 0)
    sc1 = _scale(S, g, NB, NB - 1)
    for m0 in range(0, NM, MC):
        mm = m0 + tl.arange(0, MC)
        mmask = mm < NM
        Mc = sc0 * _monomial_chunk(Z0, g * s0g, s0k, s0n, n, nmask, inv0, IDX, mm, mmask, k, L, -1)
        if NB == 2:
            Mc += sc1 * _monomial_chunk(Z1, g * s1g, s1k, s1n, n, nmask, inv1, IDX, mm, mmask, k, L, -1)
        tl.store(M + g * smg + mm[:, None] * smm + n[None, :] * smn, Mc, mask=mmask[:, None] & nmask[None, :])


@triton.jit
def _dz_kernel(Z0, Z1, S, IDX, DM, DZ0, DZ1, DS, N, NM, k, eps,
               s0g, s0k, s0n, s1g, s1k, s1n, sdg, sdm, sdn,
               NB: tl.constexpr, HAS_SCALE: tl.constexpr, L: tl.constexpr, KP: tl.constexpr,
               MC: tl.constexpr, BN: tl.constexpr, DOT: tl.constexpr, REUSE: tl.constexpr):
    """dz (and ds) of one (group, token block) from dM = W^T dOut, the gradient of the fused monomials."""
    g = tl.program_id(0)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    nmask = n < N
    kk = tl.arange(0, KP)
    z0, r0, inv0 = _inverse_norms(Z0, g * s0g, s0k, s0n, kk, n, nmask, k, eps)
    z1, r1, inv1 = z0, r0, inv0
    if NB == 2:
        z1, r1, inv1 = _inverse_norms(Z1, g * s1g, s1k, s1n, kk, n, nmask, k, eps)
    sc0 = _scale(S, g, NB, 0)
    sc1 = _scale(S, g, NB, NB - 1)
    dx0 = tl.zeros((KP, BN), tl.float32)
    dx1 = tl.zeros((KP, BN), tl.float32)
    ds0 = tl.zeros((MC, BN), tl.float32)
    ds1 = tl.zeros((MC, BN), tl.float32)
    unused = tl.zeros((MC, BN), tl.float32)  # _branch_backward's M_built (BUILT is False here)
    for m0 in range(0, NM, MC):
        mm = m0 + tl.arange(0, MC)
        mmask = mm < NM
        dM = tl.load(DM + g * sdg + mm[:, None] * sdm + n[None, :] * sdn,
                     mask=mmask[:, None] & nmask[None, :], other=0.0).to(tl.float32)
        ds, dx = _branch_backward(Z0, g * s0g, s0k, s0n, n, nmask, inv0, IDX, mm, mmask, k, kk, dM, sc0, unused,
                                  L, DOT, REUSE, False)
        ds0 += ds
        dx0 += dx
        if NB == 2:
            ds, dx = _branch_backward(Z1, g * s1g, s1k, s1n, n, nmask, inv1, IDX, mm, mmask, k, kk, dM, sc1, unused,
                                      L, DOT, REUSE, False)
            ds1 += ds
            dx1 += dx
    _store_branch_grads(DZ0, DS + g * NB, g, k, N, kk, n, nmask, dx0, z0, r0, inv0, eps, ds0, HAS_SCALE)
    if NB == 2:
        _store_branch_grads(DZ1, DS + g * NB + 1, g, k, N, kk, n, nmask, dx1, z1, r1, inv1, eps, ds1, HAS_SCALE)


def _monomials(z32, s, table, NM: int, L: int, eps: float) -> torch.Tensor:
    """(G, NM, N) float32: the branches' scaled monomials, summed."""
    nb = len(z32)
    z1 = z32[1] if nb == 2 else z32[0]
    G, k, N = z32[0].shape
    m = torch.empty(G, NM, N, dtype=torch.float32, device=z32[0].device)
    if G * N:
        _monomials_kernel[(G, triton.cdiv(N, fused.BN))](
            z32[0], z1, s, table, m, N, NM, k, eps, *z32[0].stride(), *z1.stride(), *m.stride(),
            NB=nb, L=L, KP=max(16, triton.next_power_of_2(k)), MC=fused.MC, BN=fused.BN, **fused._launch_options())
    return m


class SphereReadoutTritonGemm(torch.autograd.Function):
    """Forward and backward of `sphere_readout` as monomials (Triton) + `torch.bmm` (float32 inside)."""

    @staticmethod
    def forward(ctx, L, eps, weight, *inputs):
        nb = len(inputs) // 2
        zs, scales = inputs[:nb], inputs[nb:]
        has_scale = scales[0] is not None
        G, C, NM = weight.shape
        w32 = weight.detach().to(torch.float32)
        z32 = [z.detach().to(torch.float32).contiguous() for z in zs]  # the dz kernel indexes (G, k, N) contiguous
        s = (torch.stack([t.detach().to(torch.float32) for t in scales], 1).contiguous() if has_scale
             else w32.new_ones(G, nb))
        table = fused._variables(zs[0].shape[1], L, weight.device)
        with torch.autocast(weight.device.type, enabled=False):  # float32 inside, as the fused kernels
            out = torch.bmm(w32, _monomials(z32, s, table, NM, L, eps))
        ctx.save_for_backward(w32, *z32, s, table)
        ctx.meta = (L, eps, nb, has_scale, weight.dtype, [z.dtype for z in zs],
                    [t.dtype for t in scales] if has_scale else None, fused.dot_precision())
        return out.to(weight.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        L, eps, nb, has_scale, w_dtype, z_dtypes, s_dtypes, dot = ctx.meta
        saved = ctx.saved_tensors
        w32, z32, s, table = saved[0], list(saved[1 : 1 + nb]), saved[1 + nb], saved[2 + nb]
        z1 = z32[1] if nb == 2 else z32[0]
        G, C, NM = w32.shape
        k, N = z32[0].shape[1], z32[0].shape[2]
        dout = grad.to(torch.float32)
        with torch.autocast(w32.device.type, enabled=False):
            dw = torch.bmm(dout, _monomials(z32, s, table, NM, L, eps).transpose(1, 2))  # (the monomials freed after)
            dM = torch.bmm(w32.transpose(1, 2), dout).contiguous()  # (G, NM, N); zeros when C is 0
        dz = [(torch.empty if G * N else torch.zeros)(G, k, N, dtype=torch.float32, device=w32.device)
              for _ in range(nb)]
        ds = torch.zeros(G, nb, dtype=torch.float32, device=w32.device)
        if G * N:
            _dz_kernel[(G, triton.cdiv(N, fused.BN))](
                z32[0], z1, s, table, dM, dz[0], dz[-1], ds, N, NM, k, eps,
                *z32[0].stride(), *z1.stride(), *dM.stride(),
                NB=nb, HAS_SCALE=has_scale, L=L, KP=max(16, triton.next_power_of_2(k)), MC=fused.MC, BN=fused.BN,
                DOT=dot, REUSE=fused.REUSE_FACTORS and L <= 4, **fused._launch_options())
        g_scales = [ds[:, b].to(s_dtypes[b]) for b in range(nb)] if has_scale else [None] * nb
        return (None, None, dw.to(w_dtype), *[d.to(t) for d, t in zip(dz, z_dtypes)], *g_scales)
