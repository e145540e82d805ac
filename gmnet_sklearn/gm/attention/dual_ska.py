"""DualSKA: bidirectional Gated SFA and SKA over shared projections, fused per head.

u = a Phi(normalise(y_SFA)) + (1 - a) Phi(normalise(cv)), a = sigmoid(beta_fusion[h]) (init 1/2).
Both branches, in every form, are the DualSKA op (`gm/ops/dual_ska`).
"""

from __future__ import annotations

from ..ops import dual_ska as attention_op
from ._base import SphereAttention


class DualSKA(SphereAttention):
    """The default Chem-GMNet attention (546,108 parameters per layer at k=8, L=3, d=384)."""

    n_branches = 2
    has_fused_kernels = True

    def fused_cpu_forward(self, x, conj, mask, packing, readout_impl):
        # The fused kernel reads the raw projections and writes the read-out's layout, so the
        # normalising, masking and transposes between them happen inside it.
        B, T = mask.shape
        y, cv = attention_op.dual_ska_cpu_fm(self.project_raw(x, packing), self.log_gates(conj, mask), mask, self.L)
        return self.readout_fm([y, cv], B, T, packing, readout_impl)

    def branch_outputs(self, q, k, p, log_gamma, mask, form):
        return attention_op.dual_ska(q, k, p, log_gamma, mask, self.L, form)
