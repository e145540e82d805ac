"""DualSKA's references: the paper's recurrences and explicit Phi features (``impl="reference"``).

Gated SFA (`sfa_scan`): the moment-matrix recurrence M_t = gamma_t (.) M_{t-1} + Phi(k^_t) p_t^T,
y_t = M_t^T Phi(q^_t), O(T D* k), kept for tests, for the multipole read-out and for very long
sequences; bidirectional: the average of the forward and reversed scans. SKA (`ska_features`):
alpha_ts = masked softmax_s( Phi(q^_t).Phi(k^_s) / sqrt(D*) ), cv_t = sum_s alpha_ts p_s, with the
D*-wide features formed explicitly.
"""

from __future__ import annotations

import math

import torch

from ... import functional as F


def sfa_scan(q, k, p, log_gamma, L: int, reverse: bool = False, return_state: bool = False):
    """Recurrent reference. q, k, p (B, H, T, k); log_gamma (B, H, T, L+1). Returns y (B, H, T, k).

    Forward: M_t = gamma_t M_{t-1} + Phi_t p_t^T (token s reaches t through prod_{r=s+1..t} gamma_r).
    Reverse: M_t = gamma_t M_{t+1} + Phi_t p_t^T (token s reaches t through prod_{r=t..s-1} gamma_r).
    With ``return_state`` also returns the terminal state (B, H, D*, k).
    """
    B, H, T, kdim = q.shape
    deg = torch.as_tensor(F.degree_index(kdim, L), device=q.device)
    phi_q, phi_k = F.phi(q, L), F.phi(k, L)
    gamma = log_gamma.exp().index_select(-1, deg)  # (B, H, T, D*)
    M = q.new_zeros(B, H, phi_q.shape[-1], kdim)
    ys = [None] * T
    for t in reversed(range(T)) if reverse else range(T):
        M = gamma[:, :, t, :, None] * M + phi_k[:, :, t, :, None] * p[:, :, t, None, :]
        ys[t] = torch.einsum("bhmc,bhm->bhc", M, phi_q[:, :, t])
    y = torch.stack(ys, dim=2) if T else q.new_zeros(B, H, 0, kdim)
    return (y, M) if return_state else y


def bidir_sfa_scan(q, k, p, log_gamma, L: int):
    """Recurrent reference: (scan forward + scan reversed) / 2, y (B, H, T, k)."""
    return 0.5 * (sfa_scan(q, k, p, log_gamma, L) + sfa_scan(q, k, p, log_gamma, L, reverse=True))


def masked_softmax_attend(scores: torch.Tensor, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # A finite fill (not -inf) keeps all-padding rows finite: they average zero values to zero.
    scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1) @ p


def ska_features(q, k, p, mask, L: int):
    """Reference: explicit Phi features. q, k, p (B, H, T, k), mask (B, T) -> cv (B, H, T, k)."""
    phi_q, phi_k = F.phi(q, L), F.phi(k, L)
    scores = phi_q @ phi_k.transpose(-1, -2) / math.sqrt(phi_q.shape[-1])
    return masked_softmax_attend(scores, p, mask)
