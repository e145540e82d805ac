"""HarmonicMap: Phi on S^{k-1} as a module, its read-outs through the `sphere_readout` op."""

from __future__ import annotations

import torch

from . import functional as F
from .ops.sphere_readout import sphere_readout


class HarmonicMap(torch.nn.Module):
    """Phi on S^{k-1} with its fixed coefficient table held as a (non-persistent) buffer.

    Read-outs weight @ Phi(z) run through `sphere_readout` with the coefficient table A folded
    into the weight (Phi is linear in the monomials). The buffer follows ``.to()``/``.double()``;
    forward reads (never writes after their first use) the read-out forms' index plans, cached per
    (k, L) in ``gm/functional.py`` and the CPU kernels, which a CUDA graph's warm-up fills before
    its capture.
    """

    def __init__(self, k: int, L: int):
        super().__init__()
        F._check_kL(k, L)
        self.k, self.L = k, L
        basis = F.harmonic_basis(k, L)
        self.dim, self.n_monomials = basis.dim, basis.n_monomials
        # float64 master (cast on use) so a .double() model keeps Phi exact.
        # (a copy: the cached table is shared by every map of this (k, L))
        self.register_buffer("coeffs", torch.tensor(basis.coeffs, dtype=torch.float64), persistent=False)

    def _apply(self, fn, recurse=True):
        # .float(), .half() and .to(dtype) cast every floating buffer: the master goes back to the
        # exact float64 table after any of them (a .float() then .double() model stays exact)
        super()._apply(fn, recurse)
        if self.coeffs.dtype != torch.float64:  # (a move alone keeps the tensor: captured graphs read it)
            self.coeffs = torch.tensor(F.harmonic_basis(self.k, self.L).coeffs, dtype=torch.float64,
                                       device=self.coeffs.device)
        return self

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Phi(normalise(z)) (..., D*)."""
        return self.readout(z, torch.eye(self.dim, dtype=z.dtype, device=z.device))

    def readout(self, z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                impl: str = "auto") -> torch.Tensor:
        """weight @ Phi(normalise(z)) + bias for z (..., k) and weight (out, D*): (..., out).
        ``impl``: the read-out's form (`ops.sphere_readout`)."""
        lead = z.shape[:-1]
        folded = (weight @ self.coeffs.to(weight.dtype))[None]  # (1, out, n_mono)
        out = sphere_readout(folded, [z.reshape(-1, self.k).T[None]], impl=impl)[0].T
        out = out.reshape(*lead, weight.shape[0])
        return out if bias is None else out + bias
