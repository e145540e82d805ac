"""Bidirectional Gated SFA: the average of the forward and reversed moment-matrix recurrences.

y_t = 1/2 (M->_t + M<-_t)^T Phi(q^_t). Reference: two scans; fast form: one decay-masked zonal pass
with forward weights below the diagonal and backward weights above it (both in `gm/ops/dual_ska`).
"""

from __future__ import annotations

from ..ops import dual_ska as attention_op
from ._base import SphereAttention


class BidirSFA(SphereAttention):
    """Bidirectional Gated SFA branch alone, lifted by Phi; no fusion."""

    def branch_outputs(self, q, k, p, log_gamma, mask, form):
        return [attention_op.gated_sfa(q, k, p, log_gamma, self.L, False, form)]
