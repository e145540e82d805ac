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
from .gated_sfa import zonal_terms


def _masked_softmax_attend(scores: torch.Tensor, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # A finite fill (not -inf) keeps all-padding rows finite: they average zero values to zero.
    scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1) @ p


def ska_features(q, k, p, mask, L: int):
    """Reference: explicit Phi features. q, k, p (B, H, T, k), mask (B, T) -> cv (B, H, T, k)."""
    phi_q, phi_k = F.phi(q, L), F.phi(k, L)
    scores = phi_q @ phi_k.transpose(-1, -2) / math.sqrt(phi_q.shape[-1])
    return _masked_softmax_attend(scores, p, mask)


def ska_zonal(q, k, p, mask, L: int, terms: list | None = None):
    """Fast form: scores are sum_l a_l P_l(q.k) / sqrt(D*), never D*-wide features."""
    if terms is None:
        terms = zonal_terms(q @ k.transpose(-1, -2), q.shape[-1], L)
    scores = sum(terms[1:], terms[0]) if len(terms) > 1 else q.new_full((1, 1, q.shape[2], k.shape[2]), terms[0])
    return _masked_softmax_attend(scores / math.sqrt(F.harmonic_dim(q.shape[-1], L)), p, mask)


def ska(q, k, p, mask, L: int, impl: str = "auto"):
    return ska_features(q, k, p, mask, L) if impl == "reference" else ska_zonal(q, k, p, mask, L)


class SKA(SphereAttention):
    """SKA branch alone, lifted by Phi; no decay gate and no fusion."""

    uses_decay = False

    def branch_outputs(self, q, k, p, log_gamma, mask, impl):
        return [ska(q, k, p, mask, self.L, impl)]
