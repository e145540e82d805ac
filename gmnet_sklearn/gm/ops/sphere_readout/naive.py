"""The Phi read-out's reference: explicit monomials of the normalised inputs and autograd.

sum_b s_b W @ monomials(normalise(z_b)), the branches fused in monomial space (Phi is linear in
them) before one batched matmul. A few whole-tensor ops: on a GPU, where at small batches kernel
launches and not arithmetic set the time, it is the fastest torch form ("auto" runs it on CUDA
where the Triton form does not apply: bf16, float64, three branches; `cuda_auto_form`).
"""

from __future__ import annotations

import torch

from ... import functional as F


def sphere_readout_reference(weight, zs, scales, eps: float, L: int) -> torch.Tensor:
    """`sphere_readout` as a few whole-tensor ops and autograd: per branch, the monomials of each
    degree gathered from the degree below (`monomials`: two index_selects and a multiply), the
    branches fused in monomial space (Phi is linear in them), one batched matmul. On a GPU, at
    these sizes every op is a kernel launch and launches, not arithmetic, set the time: the
    slice-wise eager form runs several times more of them."""
    fused = None
    for z, s in zip(zs, scales):
        m = F.monomials(F.normalise(z.transpose(1, 2), eps), L)  # (G, N, n_mono)
        if s is not None:
            m = m * s[:, None, None]
        fused = m if fused is None else fused + m
    return torch.bmm(weight, fused.transpose(1, 2))
