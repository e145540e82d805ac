"""SKA: softmax attention over the Gegenbauer kernel on S^{k-1}.

alpha_ts = masked softmax_s( Phi(q^_t).Phi(k^_s) / sqrt(D*) ), cv_t = sum_s alpha_ts p_s.
Reference (explicit Phi features) and fast zonal form are the DualSKA op's (`gm/ops/dual_ska`).
"""

from __future__ import annotations

from ..ops import dual_ska as attention_op
from ._base import SphereAttention


class SKA(SphereAttention):
    """SKA branch alone, lifted by Phi; no decay gate and no fusion."""

    uses_decay = False

    def branch_outputs(self, q, k, p, log_gamma, mask, form):
        return [attention_op.ska(q, k, p, mask, self.L, form)]
