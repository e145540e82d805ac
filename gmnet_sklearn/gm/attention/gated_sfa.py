"""Gated SFA: sphere-feature attention with conjugation-gated, per-degree exponential decay.

The causal branch alone (an ablation variant); its reference scan and fast zonal form are the
DualSKA op's (`gm/ops/dual_ska`: `naive.sfa_scan`, `zonal.sfa_parallel`).
"""

from __future__ import annotations

from ..ops import dual_ska as attention_op
from ._base import SphereAttention


class GatedSFA(SphereAttention):
    """Causal Gated SFA (forward direction only), lifted by Phi; no fusion."""

    def branch_outputs(self, q, k, p, log_gamma, mask, form):
        return [attention_op.gated_sfa(q, k, p, log_gamma, self.L, True, form)]
