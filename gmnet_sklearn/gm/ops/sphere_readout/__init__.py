"""The Phi read-out op: sum_b s_b W @ monomials(normalise(z_b)), and its one dispatch.

Forms: `naive` (the reference: explicit monomials and autograd), `eager` (torch, hand-written
backward: "parallel"), `cpu` (the C++ kernel, `gm/cpu/sphere_readout.cpp`) and `triton` (fused
Triton kernels, no monomial tensor in memory: "triton"). Tests compare every form with the
reference, forward and backward.
"""

from __future__ import annotations

import torch

from ... import functional as F
from ...triton import triton_available
from ..impl import check_impl, resolve_auto
from .cpu import SphereReadoutCPU, extension_for
from .eager import SphereReadoutEager, suffix_starts
from .naive import sphere_readout_reference

__all__ = ["sphere_readout", "sphere_readout_reference", "select", "cuda_auto_form"]

# On CUDA "auto" runs the Triton form for float32 inputs, in training as in inference. Measured on
# an H200, whole models on CUDA graphs (benchmarks/results/throughput_cuda_forms_h200.json, batch 32,
# the shapes where the reference did best before): training 9,930 (the "gemm" form) and 9,230
# (the "fused" form) vs 7,310 mol/s on ESOL, 9,440 and 7,680 vs 6,020 on Lipophilicity; inference
# 41,800 and 31,500 vs 31,000 on ESOL. (On an H100 the first Triton backward lost to the reference
# at batch 32 and won from about 8,000 positions: that rule lasted until the backward's rework.)

# The read-out's names from before the one vocabulary, still taken.
FORMER_NAMES = {"gather": "reference", "torch": "parallel"}


def select(impl: str, weight: torch.Tensor, zs, L: int) -> str:
    """The form that runs: "reference", "parallel", "cpu" or "triton".

    "auto": on CUDA `cuda_auto_form`; on CPU float tensors the C++ kernel when it builds, else
    the eager form (the reference for mixed dtypes, as under CPU autocast). "triton" needs Triton
    and CUDA tensors (or the interpreter), and at most two branches.
    """
    impl = resolve_auto("sphere_readout", check_impl(FORMER_NAMES.get(impl, impl)))
    if impl == "triton" and not (triton_available() and len(zs) <= 2):
        raise ValueError("sphere_readout's Triton form needs Triton with CUDA (or TRITON_INTERPRET=1) and at most "
                         "two branches")
    if impl == "auto":
        if weight.is_cuda and L == 0:
            impl = "reference"  # (the eager form below)
        elif weight.is_cuda:
            impl = cuda_auto_form({weight.dtype, *(z.dtype for z in zs)}, len(zs), triton_available(), zs[0].shape[-1])
        elif len({weight.dtype, *(z.dtype for z in zs)}) > 1:
            # mixed dtypes (CPU autocast: bf16 inputs, a float32 weight): the eager form's in-place
            # matmuls need one
            impl = "reference"
        else:
            impl = "cpu" if extension_for(weight, *zs) is not None else "parallel"
    if impl == "reference" and L == 0 and len({weight.dtype, *(z.dtype for z in zs)}) == 1:
        # L = 0 reads no direction: the constant needs no monomials, and the eager form gives its zero gradients.
        impl = "parallel"
    return impl


#: The Triton kernels put blocks of 32 tokens (`triton.BN`) on a grid axis CUDA caps at 65,535 blocks.
MAX_TRITON_TOKENS = 65535 * 32


def cuda_auto_form(dtypes, n_branches: int, triton: bool, n_tokens: int = 0) -> str:
    """What "auto" runs on CUDA: the Triton form for float32 inputs of one or two branches, in
    training and inference, up to `MAX_TRITON_TOKENS` tokens a call; else the reference (fewest
    kernel launches of the torch forms; also what float64 checks and bf16 autocast get)."""
    if triton and n_branches <= 2 and set(dtypes) == {torch.float32} and n_tokens <= MAX_TRITON_TOKENS:
        return "triton"
    return "reference"


def sphere_readout(weight: torch.Tensor, zs, scales=None, eps: float = 1e-6, impl: str = "auto") -> torch.Tensor:
    """sum_b scales_b * weight @ monomials(normalise(z_b)), per group: (G, c, N).

    weight (G, c, n_monomials) is a read-out already composed with the harmonic coefficients
    (W A), zs are raw vectors (G, k, N) and scales optional per-group factors (G,) (DualSKA's
    fusion weights). ``impl``: "auto", "reference", "parallel" or "cpu" (`select`; "gather" and
    "torch", the names of the reference and eager forms before, are taken too).
    """
    G, c, n_mono = weight.shape
    k = zs[0].shape[1]
    L = F._degree_of(k, n_mono)
    scales = list(scales) if scales is not None else [None] * len(zs)
    if len(scales) != len(zs):
        raise ValueError(f"got {len(zs)} inputs but {len(scales)} scales")
    form = select(impl, weight, zs, L)
    if form == "reference":
        return sphere_readout_reference(weight, zs, scales, eps, L)
    if form == "triton":
        from .triton import sphere_readout_triton  # lazy: Triton is optional and reads TRITON_INTERPRET on import

        return sphere_readout_triton(weight, zs, scales, eps, L)
    if form == "cpu":
        if extension_for(weight, *zs, *(s for s in scales if s is not None)) is None:
            raise RuntimeError("the CPU extension is not available for these tensors "
                               "(CPU float tensors and a built extension needed)")
        return SphereReadoutCPU.apply(suffix_starts(k, L), eps, weight, *zs, *scales)
    return SphereReadoutEager.apply(suffix_starts(k, L), eps, weight, *zs, *scales)
