"""DualSKA's eager fast forms (``impl="parallel"``): everything through the zonal identity.

Phi(q).Phi(k) = sum_l a_l P_l(q.k), so every (query, key) pair costs a k-dim cosine and a
degree-L polynomial; no D*-wide per-pair features are ever formed. Gated SFA (`sfa_parallel`):
the path product G^l_{s->t} = exp(C^l_t - C^l_s), C the cumulative log-gate, as a decay mask on
the zonal kernel. SKA (`ska_zonal`): scores sum_l a_l P_l(q.k) / sqrt(D*).
"""

from __future__ import annotations

import math

import torch

from ... import functional as F
from .naive import masked_softmax_attend


def zonal_terms(cos: torch.Tensor, k: int, L: int) -> list:
    """[a_0, a_1 P_1(cos), ..., a_L P_L(cos)]: the per-degree pieces of Phi(q).Phi(k).

    The recurrence of `functional.gegenbauer_recurrence`, kept as a list (no stacked
    (..., T, T, L+1) copy). Term 0 is the constant a_0 (a float), so no all-constant T x T tensor
    is ever built. Shared by both DualSKA branches, which see the same cosines.
    """
    a = F.zonal_coefficients(k, L)
    alpha, beta = F.gegenbauer_recurrence(k, L)
    P = [None, cos]
    for n in range(1, L):
        prev = P[n - 1] if n > 1 else 1.0
        P.append(alpha[n] * cos * P[n] - beta[n] * prev)
    return [float(a[0])] + [float(a[l]) * P[l] for l in range(1, L + 1)]


def decay_weights(log_gamma: torch.Tensor, causal: bool) -> torch.Tensor:
    """Path weights (B, H, L+1, T, T) from cumulative log-gates (the direct, unfactorised form).

    forward part, s <= t: exp(C_t - C_s) with C the inclusive cumsum;
    backward part, s >= t: exp(D_s - D_t) with D = C - log_gamma (exclusive cumsum).
    Causal returns the forward part; bidirectional returns (forward + backward) / 2.
    The where() picks the non-positive exponent before exp, so nothing overflows.
    """
    lg = log_gamma.transpose(-1, -2)  # (B, H, L+1, T)
    C = lg.cumsum(-1)
    T = lg.shape[-1]
    idx = torch.arange(T, device=lg.device)
    lower = idx[:, None] >= idx[None, :]  # s <= t
    fwd_exp = C[..., :, None] - C[..., None, :]
    if causal:
        return torch.where(lower, fwd_exp, torch.full_like(fwd_exp, float("-inf"))).exp()
    D = C - lg
    bwd_exp = D[..., None, :] - D[..., :, None]
    both = torch.where(lower, fwd_exp, bwd_exp).exp()
    # The diagonal belongs to both directions: weight 1 = (1 + 1) / 2; off-diagonal halves.
    return 0.5 * both + 0.5 * torch.eye(T, dtype=both.dtype, device=both.device)


# Largest span of cumulative log-gates (over a sequence) for the factorised form: each factor is
# then within exp(+-40), so forward values *and* their gradients (which multiply two factors and
# the T x T kernel) stay far from float32 overflow. Longer/stronger-decay rows use the direct form.
_FACTOR_MAX_SPAN = 80.0


def sfa_parallel(q, k, p, log_gamma, L: int, causal: bool, terms: list | None = None) -> torch.Tensor:
    """Decay-masked zonal form of the (causal or bidirectional) Gated SFA branch: y (B, H, T, k).

    The path weight factorises, exp(C_t - C_s) = exp(C_t - R) exp(R - C_s), so the exponentials
    act on (T x k) values instead of (T x T) pair tensors; only the triangular masks of the
    zonal terms touch T^2 elements. R (the middle of each row's cumulative-gate range) keeps the
    exponents within about +-span/2; when the span could overflow, the direct form
    `decay_weights` is used instead.
    """
    if terms is None:
        terms = zonal_terms(q @ k.transpose(-1, -2), q.shape[-1], L)
    T = q.shape[2]
    C = log_gamma.cumsum(2)  # (B, H, T, L+1)
    # The span is read on the host, which a CUDA graph's capture forbids: captured, the direct
    # form (safe at any span) runs without reading it.
    if C.numel() == 0 or _capturing(q) or float(-C[:, :, -1].detach().min()) > _FACTOR_MAX_SPAN:
        W = sum(K * G for K, G in zip(_expand(terms, q), decay_weights(log_gamma, causal).unbind(2)))
        return W @ p
    # centred on the value range, not a position: padding gates are transparent, so a row shorter
    # than T/2 ends its decay before mid-sequence, and a positional centre put it all on one side
    R = 0.5 * (C[:, :, :1] + C[:, :, -1:])
    lower = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    zero = q.new_zeros(())
    y = 0
    for l, K in enumerate(terms):
        # Each factor is its own exp (never a division), so gradients never square a factor.
        # Degree 0 has a constant kernel, so its masked matmuls are (reverse) cumsums.
        x = C[..., l : l + 1] - R[..., l : l + 1]
        u = p * torch.exp(-x)
        fwd = K * u.cumsum(2) if isinstance(K, float) else torch.where(lower, K, zero) @ u
        y = y + torch.exp(x) * fwd  # sum_{s<=t} K_ts exp(C_t - C_s) p_s
        if not causal:
            xb = R[..., l : l + 1] - (C[..., l : l + 1] - log_gamma[..., l : l + 1])  # R - D_t
            ub = p * torch.exp(-xb)
            bwd = K * ub.flip(2).cumsum(2).flip(2) if isinstance(K, float) else torch.where(lower.T, K, zero) @ ub
            y = y + torch.exp(xb) * bwd  # sum_{s>=t} K_ts exp(D_s - D_t) p_s
    return y if causal else 0.5 * y


def _capturing(x: torch.Tensor) -> bool:
    """Whether a CUDA graph is being captured on ``x``'s stream (no host reads allowed then)."""
    return x.is_cuda and torch.cuda.is_current_stream_capturing()


def _expand(terms: list, q: torch.Tensor) -> list:
    T = q.shape[2]
    return [q.new_full((1, 1, T, T), t) if isinstance(t, float) else t for t in terms]


def bidir_sfa_parallel(q, k, p, log_gamma, L: int):
    """Decay-masked zonal form, O(T^2 k) with small constants: fast at SMILES lengths."""
    return sfa_parallel(q, k, p, log_gamma, L, causal=False)


def ska_zonal(q, k, p, mask, L: int, terms: list | None = None):
    """Fast form: scores are sum_l a_l P_l(q.k) / sqrt(D*), never D*-wide features."""
    if terms is None:
        terms = zonal_terms(q @ k.transpose(-1, -2), q.shape[-1], L)
    scores = sum(terms[1:], terms[0]) if len(terms) > 1 else q.new_full((1, 1, q.shape[2], k.shape[2]), terms[0])
    return masked_softmax_attend(scores / math.sqrt(F.harmonic_dim(q.shape[-1], L)), p, mask)
