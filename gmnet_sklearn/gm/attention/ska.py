"""SKA: softmax attention over the Gegenbauer kernel on S^{k-1}.

alpha_ts = masked softmax_s( Phi(q^_t).Phi(k^_s) / sqrt(D*) ), cv_t = sum_s alpha_ts p_s.
Reference (`ska_features`) forms the D*-wide features explicitly; the fast form (`ska_zonal`) uses
the zonal identity Phi(q).Phi(k) = sum_l a_l P_l(q.k), a degree-L polynomial of the cosine.
"""

from __future__ import annotations

import math

import torch

from .. import functional as F
from ._base import SphereAttention


def _masked_softmax_attend(scores: torch.Tensor, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # A finite fill (not -inf) keeps all-padding rows finite: they average zero values to zero.
    scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1) @ p


def ska_features(q, k, p, mask, L: int):
    """Reference: explicit Phi features. q, k, p (B, H, T, k), mask (B, T) -> cv (B, H, T, k)."""
    phi_q, phi_k = F.phi(q, L), F.phi(k, L)
    scores = phi_q @ phi_k.transpose(-1, -2) / math.sqrt(phi_q.shape[-1])
    return _masked_softmax_attend(scores, p, mask)


def ska_score_polynomial(k: int, L: int) -> list[float]:
    """Coefficients c_j of sum_l a_l P_l(t) / sqrt(D*) = sum_j c_j t^j (monomial form, for Horner)."""
    import numpy as np

    a = F.zonal_coefficients(k, L)
    # Power-basis coefficients of each P_l from its values at L+1 Chebyshev-like nodes (exact:
    # P_l has degree l <= L).
    nodes = np.cos(np.pi * (np.arange(L + 1) + 0.5) / (L + 1))
    values = F.gegenbauer_normalised(L, k, nodes) @ a / math.sqrt(F.harmonic_dim(k, L))
    return list(np.linalg.solve(np.vander(nodes, L + 1, increasing=True), values))


def ska_zonal(q, k, p, mask, L: int):
    """Fast form: scores are a degree-L polynomial of the k-dim cosine (Horner), never D*-wide."""
    cos = q @ k.transpose(-1, -2)
    coeffs = ska_score_polynomial(q.shape[-1], L)
    scores = torch.full_like(cos, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        scores = scores * cos + c
    return _masked_softmax_attend(scores, p, mask)


def ska(q, k, p, mask, L: int, impl: str = "auto"):
    return ska_features(q, k, p, mask, L) if impl == "reference" else ska_zonal(q, k, p, mask, L)


class SKA(SphereAttention):
    """SKA branch alone, lifted by Phi; no decay gate and no fusion."""

    uses_decay = False

    def branch_outputs(self, q, k, p, log_gamma, mask, impl):
        return [ska(q, k, p, mask, self.L, impl)]
