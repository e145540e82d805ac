"""Projection plumbing shared by the four sphere-attention variants (docs/math.md section 3, DualSKA).

Every variant maps the residual stream to per-head sphere directions q^, k^ in S^{k-1} and value
positions p in R^k, runs one or two branches that each return a k-vector per head and position,
lifts each branch output back to harmonic features with Phi, and reads out through W_out_h and
out_proj. Subclasses only say which branches run.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as torch_F

from .. import functional as F
from ..harmonic_map import HarmonicMap
from ..ops import dual_ska as attention_op
from ..ops.impl import Impl, impl_for
from ..ops.sphere_readout import sphere_readout
from ..packing import TokenPacking


def _spread_gamma_logits(n_heads: int, L: int) -> torch.Tensor:
    """Gate logits whose decays gamma = 1 - 1/m cover memory lengths m from 2 to 32 tokens.

    Under the protocol's small learning rate these barely move, so the initial spread *is* the
    set of horizons the model uses: log-spaced over heads (and interleaved over degrees).
    """
    n = n_heads * (L + 1)
    memory = np.geomspace(2.0, 32.0, n).reshape(L + 1, n_heads).T  # heads vary fastest
    gamma = 1.0 - 1.0 / memory
    return torch.as_tensor(np.log(gamma / (1.0 - gamma)), dtype=torch.float32)


class SphereAttention(nn.Module):
    """Base class: shared projections, decay gate, Phi lift and read-out.

    Subclasses set ``uses_decay`` (owns ``gamma_logit``/``conj_shift``) and implement
    ``branch_outputs``. Two branches add the per-head fusion logit ``beta_fusion``. A variant
    with ``has_fused_kernels`` (DualSKA) implements ``fused_cpu_forward`` for the C++ kernel.
    """

    n_branches: int = 1
    uses_decay: bool = True
    has_fused_kernels: bool = False

    def __init__(self, d_model: int, n_heads: int, k: int, L: int, conj_shift: float = 1.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.k, self.L = d_model, n_heads, k, L
        self.d_head = d_model // n_heads
        self.dim = F.harmonic_dim(k, L)
        self.qk_proj = nn.Linear(d_model, 2 * d_model, bias=False)
        bound = 1.0 / math.sqrt(self.d_head)
        self.W_sphere_Q = nn.Parameter(torch.empty(n_heads, self.d_head, k).uniform_(-bound, bound))
        self.W_sphere_K = nn.Parameter(torch.empty(n_heads, self.d_head, k).uniform_(-bound, bound))
        self.W_pos = nn.Linear(d_model, n_heads * k, bias=False)
        if self.uses_decay:
            self.gamma_logit = nn.Parameter(_spread_gamma_logits(n_heads, L))
            # A buffer, not a parameter: the paper's counts leave no room for a trainable W_conj.
            self.register_buffer("conj_shift", torch.full((n_heads, L + 1), float(conj_shift)))
        if self.n_branches == 2:
            self.beta_fusion = nn.Parameter(torch.zeros(n_heads))
        bound = 1.0 / math.sqrt(self.dim)
        self.W_out_h = nn.Parameter(torch.empty(n_heads, self.dim, self.d_head).uniform_(-bound, bound))
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.sh = HarmonicMap(k, L)

    # -- projections --------------------------------------------------------------------------
    def project_raw(self, x: torch.Tensor, packing: TokenPacking | None = None) -> torch.Tensor:
        """x (B, T, d) -> the raw q, k, p projections stacked as (B, T, 3, H, k). With ``packing``
        x holds the real tokens only (N, d): they are projected, then scattered into (B, T).

        qk_proj feeds only the linear sphere maps, so both are folded into one (d, H k) matrix
        per side at run time: same parameters, a third of the matmul work.
        """
        H, dh, k = self.n_heads, self.d_head, self.k
        Wq, Wk = self.qk_proj.weight.view(2, H, dh, self.d_model).unbind(0)
        fold_q = torch.einsum("hcd,hck->dhk", Wq, self.W_sphere_Q).reshape(self.d_model, H * k)
        fold_k = torch.einsum("hcd,hck->dhk", Wk, self.W_sphere_K).reshape(self.d_model, H * k)
        W = torch.cat([fold_q, fold_k, self.W_pos.weight.T], dim=1)
        raw = (x @ W).view(*x.shape[:-1], 3, H, k)
        return raw if packing is None else packing.unpack(raw)

    def project(self, x: torch.Tensor, mask: torch.Tensor, packing: TokenPacking | None = None):
        """x (B, T, d) -> q^, k^ (B, H, T, k) on the sphere and p (B, H, T, k), zero at padding.

        With ``packing``, x holds the real tokens only (N, d); the projection runs on them and is
        then scattered into the (B, T) layout the branches take.
        """
        q, kk, p = self.project_raw(x, packing).permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, k)
        p = p * mask[:, None, :, None].to(p.dtype)
        return F.normalise(q), F.normalise(kk), p

    def log_gates(self, conj: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log gamma_t^{h,l} (B, H, T, L+1); 0 (gamma = 1, transparent) at padding."""
        logits = self.gamma_logit[None, :, None, :] + self.conj_shift[None, :, None, :] * conj[:, None, :, None].to(
            self.gamma_logit.dtype
        )
        return torch_F.logsigmoid(logits) * mask[:, None, :, None].to(logits.dtype)

    # -- read-out -----------------------------------------------------------------------------
    def readout(self, branches: list[torch.Tensor], impl: str = "auto",
                packing: TokenPacking | None = None, readout_impl: str = "auto") -> torch.Tensor:
        """Fuse branch k-vectors (B, H, T, k) through Phi and W_out_h, then out_proj: (B, T, d),
        or (N, d) for the real tokens alone with ``packing``.

        ``impl="reference"`` forms the fused D*-wide features explicitly, as the paper writes it;
        otherwise the branches go feature-major to `readout_fm` (``readout_impl``: its form).
        """
        B, H, T, k = branches[0].shape
        if impl == "reference":
            feats = [F.phi(F.normalise(z), self.L) for z in branches]
            if len(feats) == 2:
                a = torch.sigmoid(self.beta_fusion)[None, :, None, None]
                feats = [a * feats[0] + (1 - a) * feats[1]]
            heads = torch.einsum("bhtm,hmc->bthc", feats[0], self.W_out_h).reshape(B, T, self.d_model)
            out = self.out_proj(heads)
            return out if packing is None else packing.pack(out)
        return self.readout_fm([z.permute(1, 3, 0, 2).reshape(H, k, B * T) for z in branches], B, T, packing,
                               readout_impl)

    def readout_fm(self, zs: list[torch.Tensor], B: int, T: int, packing: TokenPacking | None = None,
                   impl: str = "auto") -> torch.Tensor:
        """The read-out from feature-major branch outputs (H, k, B*T): (B, T, d); with
        ``packing``, of the real tokens' columns only: (N, d).

        Phi is linear in the monomials, so the convex fusion a Phi(z1) + (1-a) Phi(z2) is one
        read-out with A folded into W_out_h and a, 1-a as per-head scales (`sphere_readout`,
        normalisation included; ``impl``: its form).
        """
        if packing is not None:
            zs = [packing.pack_columns(z) for z in zs]
        W = torch.einsum("sm,hsc->hcm", self.sh.coeffs.to(self.W_out_h.dtype), self.W_out_h)  # (H, d_head, n_mono)
        scales = None
        if len(zs) == 2:
            a = torch.sigmoid(self.beta_fusion)
            scales = [a, 1 - a]
        heads = sphere_readout(W, zs, scales, impl=impl)  # (H, d_head, N)
        out = self.out_proj(heads.reshape(self.d_model, -1).t())  # a transposed view: BLAS reads it as is
        return out if packing is not None else out.view(B, T, self.d_model)

    def branch_outputs(self, q, k, p, log_gamma, mask, form: str) -> list[torch.Tensor]:
        """The branch outputs (B, H, T, k) in a form `ops.dual_ska.select` chose."""
        raise NotImplementedError

    def fused_cpu_forward(self, x, conj, mask, packing, readout_impl: str) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, conj: torch.Tensor, mask: torch.Tensor, impl: Impl = "auto",
                packing: TokenPacking | None = None) -> torch.Tensor:
        """x (B, T, d) -> (B, T, d); or, with ``packing``, the real tokens x (N, d) -> (N, d)
        (conj and mask stay (B, T)). ``impl``: a name for the attention, or {op: name} (`ops.impl`)."""
        readout_impl = impl_for(impl, "sphere_readout")
        mask = mask.bool()
        form = attention_op.select(impl_for(impl, "dual_ska"), x.device, mask.shape[1], self.k, self.L,
                                   fused=self.has_fused_kernels, dtype=x.dtype)
        if form == "cpu":
            return self.fused_cpu_forward(x, conj, mask, packing, readout_impl)
        q, k, p = self.project(x, mask, packing)
        log_gamma = self.log_gates(conj, mask) if self.uses_decay else None
        return self.readout(self.branch_outputs(q, k, p, log_gamma, mask, form), form, packing, readout_impl)

    # -- multipole read-out (Theorem 1) --------------------------------------------------------
    def terminal_moments(self, x: torch.Tensor, conj: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Terminal Gated-SFA moment matrices (B, H, D*, k) from the recurrent scan.

        ``forward`` is M->_T, ``backward`` is M<-_1 (the state after the reversed pass has seen the
        whole molecule) and ``mean`` their average, the paper's M_mol. With unit decay each equals
        sum_t Phi(k^_t) p_t^T, the degree-<=L multipole moments of sum_t p_t delta_{k^_t}.
        """
        if not self.uses_decay:
            raise ValueError(f"{type(self).__name__} has no Gated-SFA branch, so no moment matrices")
        mask = mask.bool()
        q, k, p = self.project(x, mask)
        log_gamma = self.log_gates(conj, mask)
        _, fwd = attention_op.sfa_scan(q, k, p, log_gamma, self.L, reverse=False, return_state=True)
        _, bwd = attention_op.sfa_scan(q, k, p, log_gamma, self.L, reverse=True, return_state=True)
        return {"forward": fwd, "backward": bwd, "mean": 0.5 * (fwd + bwd)}

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, k={self.k}, L={self.L}, D*={self.dim}"
