"""DualSKA: bidirectional Gated SFA and SKA over shared projections, fused per head.

u = a Phi(normalise(y_SFA)) + (1 - a) Phi(normalise(cv)), a = sigmoid(beta_fusion[h]) (init 1/2).
"""

from __future__ import annotations

from .. import cpu as cpu_kernels
from ..triton import triton_available
from ._base import SphereAttention
from .bidir_sfa import bidir_sfa
from .gated_sfa import PARALLEL_MAX_LEN, sfa_parallel, zonal_terms
from .ska import ska, ska_zonal


class DualSKA(SphereAttention):
    """The default Chem-GMNet attention (546,108 parameters per layer at k=8, L=3, d=384)."""

    n_branches = 2

    def forward(self, x, conj, mask, impl: str = "auto", packing=None):
        B, T = mask.shape
        if impl == "cpu" or (impl == "auto" and x.device.type == "cpu" and T <= PARALLEL_MAX_LEN
                             and cpu_kernels.dual_ska_supported(self.k, self.L) and cpu_kernels.cpu_kernels_available()):
            # The fused kernel reads the raw projections and writes the read-out's layout, so the
            # normalising, masking and transposes between them happen inside it.
            mask = mask.bool()
            y, cv = cpu_kernels.dual_ska_cpu_fm(self.project_raw(x, packing), self.log_gates(conj, mask), mask, self.L)
            return self.readout_fm([y, cv], B, T, packing)
        return super().forward(x, conj, mask, impl, packing)

    def branch_outputs(self, q, k, p, log_gamma, mask, impl):
        if impl == "triton" or (impl == "auto" and q.is_cuda and triton_available()):
            from ..triton.dual_ska import dual_ska_triton  # lazy: triton is optional

            return list(dual_ska_triton(q, k, p, log_gamma, mask, self.L))
        if impl == "parallel" or (impl == "auto" and q.shape[2] <= PARALLEL_MAX_LEN):
            # Both branches see the same cosines: compute the zonal terms once.
            terms = zonal_terms(q @ k.transpose(-1, -2), self.k, self.L)
            return [sfa_parallel(q, k, p, log_gamma, self.L, causal=False, terms=terms),
                    ska_zonal(q, k, p, mask, self.L, terms=terms)]
        return [bidir_sfa(q, k, p, log_gamma, self.L, impl), ska(q, k, p, mask, self.L, impl)]
