"""Bidirectional Gated SFA: the average of the forward and reversed moment-matrix recurrences.

y_t = 1/2 (M->_t + M<-_t)^T Phi(q^_t). Reference: two scans; fast form: one decay-masked zonal pass
with forward weights below the diagonal and backward weights above it.
"""

from __future__ import annotations

from ._base import SphereAttention
from .gated_sfa import PARALLEL_MAX_LEN, sfa_parallel, sfa_scan


def bidir_sfa_scan(q, k, p, log_gamma, L: int):
    """Recurrent reference: (scan forward + scan reversed) / 2, y (B, H, T, k)."""
    return 0.5 * (sfa_scan(q, k, p, log_gamma, L) + sfa_scan(q, k, p, log_gamma, L, reverse=True))


def bidir_sfa_parallel(q, k, p, log_gamma, L: int):
    """Decay-masked zonal form, O(T^2 k) with small constants: fast at SMILES lengths."""
    return sfa_parallel(q, k, p, log_gamma, L, causal=False)


def bidir_sfa(q, k, p, log_gamma, L: int, impl: str = "auto"):
    if impl == "reference" or (impl == "auto" and q.shape[2] > PARALLEL_MAX_LEN):
        return bidir_sfa_scan(q, k, p, log_gamma, L)
    return bidir_sfa_parallel(q, k, p, log_gamma, L)


class BidirSFA(SphereAttention):
    """Bidirectional Gated SFA branch alone, lifted by Phi; no fusion."""

    def branch_outputs(self, q, k, p, log_gamma, mask, impl):
        return [bidir_sfa(q, k, p, log_gamma, self.L, impl)]
