"""The DualSKA op (bidirectional Gated SFA + SKA over shared projections) and its one dispatch.

Forms, each tested against the references: `naive` (the recurrent moment-matrix scan and the
explicit Phi features: "reference"), `zonal` (eager zonal forms: "parallel"), `cpu` (the fused
C++ kernel, fed the raw projections: "cpu") and `triton` (the fused Triton kernel: "triton";
imported only when it runs, since ``TRITON_INTERPRET`` must be set before it is). The ablation
variants' branches (causal Gated SFA, Bidir SFA, SKA alone) dispatch here too.
"""

from __future__ import annotations

import torch

from ... import cpu as cpu_extension
from ...triton import triton_available
from ..impl import check_impl, resolve_auto
from .cpu import dual_ska_cpu, dual_ska_cpu_fm, dual_ska_supported
from .naive import bidir_sfa_scan, sfa_scan, ska_features
from .zonal import bidir_sfa_parallel, decay_weights, sfa_parallel, ska_zonal, zonal_terms

__all__ = ["PARALLEL_MAX_LEN", "select", "dual_ska", "gated_sfa", "ska", "sfa_scan", "bidir_sfa_scan", "ska_features",
           "sfa_parallel", "bidir_sfa_parallel", "ska_zonal", "zonal_terms", "decay_weights", "dual_ska_cpu",
           "dual_ska_cpu_fm", "dual_ska_supported"]

# Above this length "auto" uses the O(T)-memory scan instead of O(T^2) pair tensors. Not tuned:
# SMILES stay far below it (the protocol caps molecules at 200 characters, the model at 514 tokens).
PARALLEL_MAX_LEN = 1024


def _cpu_autocast() -> bool:
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4 takes no device type
        return torch.is_autocast_cpu_enabled()


def select(impl: str, device: torch.device, T: int, k: int, L: int, fused: bool = True,
           dtype: torch.dtype | None = None) -> str:
    """The form that runs: "cpu", "triton", "parallel", "reference" or "recurrent".

    "auto" picks, where ``fused`` (DualSKA; the single-branch variants have no fused kernels):
    the C++ kernel on CPU when it builds and takes (k, L) and the inputs (float32 or float64
    ``dtype``, no CPU autocast, which would hand it bf16 projections); Triton on CUDA when it is
    installed, but not for float64 inputs (its arithmetic is float32); else the eager zonal forms, and above `PARALLEL_MAX_LEN` tokens "recurrent" (the
    Gated-SFA scan, zonal SKA). Without fused kernels "cpu" and "triton" run the eager zonal forms.
    """
    impl = resolve_auto("dual_ska", check_impl(impl))
    if impl == "auto":
        if fused and device.type == "cpu" and T <= PARALLEL_MAX_LEN and dual_ska_supported(k, L) \
                and dtype in (None, torch.float32, torch.float64) and not _cpu_autocast() \
                and cpu_extension.cpu_kernels_available():
            return "cpu"
        if fused and device.type == "cuda" and dtype != torch.float64 and triton_available():
            return "triton"
        return "parallel" if T <= PARALLEL_MAX_LEN else "recurrent"
    if not fused and impl in ("cpu", "triton"):
        return "parallel"
    return impl


def gated_sfa(q, k, p, log_gamma, L: int, causal: bool, form: str):
    """The Gated-SFA branch (causal, or the bidirectional average) in a `select`ed form."""
    if form in ("reference", "recurrent"):
        return sfa_scan(q, k, p, log_gamma, L) if causal else bidir_sfa_scan(q, k, p, log_gamma, L)
    return sfa_parallel(q, k, p, log_gamma, L, causal=causal)


def ska(q, k, p, mask, L: int, form: str):
    """The SKA branch in a `select`ed form (explicit features only for "reference")."""
    return ska_features(q, k, p, mask, L) if form == "reference" else ska_zonal(q, k, p, mask, L)


def dual_ska(q, k, p, log_gamma, mask, L: int, form: str) -> list:
    """Both branch outputs [y_sfa, cv], each (B, H, T, k), from unit q, k and p zero at padding,
    in a `select`ed form other than "cpu" (which reads the raw projections: `dual_ska_cpu_fm`)."""
    if form == "triton":
        from .triton import dual_ska_triton  # lazy: Triton is optional and reads TRITON_INTERPRET on import

        return list(dual_ska_triton(q, k, p, log_gamma, mask, L))
    if form == "parallel":
        # Both branches see the same cosines: compute the zonal terms once.
        terms = zonal_terms(q @ k.transpose(-1, -2), q.shape[-1], L)
        return [sfa_parallel(q, k, p, log_gamma, L, causal=False, terms=terms),
                ska_zonal(q, k, p, mask, L, terms=terms)]
    return [gated_sfa(q, k, p, log_gamma, L, False, form), ska(q, k, p, mask, L, form)]
