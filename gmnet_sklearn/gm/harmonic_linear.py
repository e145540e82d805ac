"""SH-FFN: a Funk-Hecke sphere convolution in place of Linear-GELU-Linear.

y = M(lambda (.) Phi(normalise(W_sphere x))), lambda the Funk-Hecke eigenvalues of a zonal
activation (GELU by default) expanded from degrees to the D* features. The nonlinearities are the
unit-norm projection and the harmonic lift; no elementwise activation runs on the forward path.
"""

from __future__ import annotations

import torch
from torch import nn

from . import functional as F
from .harmonic_map import HarmonicMap


class SHFFN(nn.Module):
    """63,360 parameters at k=8, L=3, d=384 (64,128 with the block's ln_ffn; adaptive=False).

    Takes the already layer-normed input; the pre-norm LayerNorm lives in the encoder layer.
    """

    def __init__(self, d_model: int, k: int, L: int, activation: F.Activation = "gelu", adaptive: bool = False):
        super().__init__()
        self.d_model, self.k, self.L = d_model, k, L
        self.dim = F.harmonic_dim(k, L)
        self.W_sphere = nn.Linear(d_model, k, bias=False)
        self.M = nn.Linear(self.dim, d_model, bias=True)
        # (float32, as checkpoints hold it: a .double() model's eigenvalues are float32-exact only)
        eig = torch.as_tensor(F.funk_hecke(activation, k, L), dtype=torch.float32)
        if adaptive:
            self.lam = nn.Parameter(eig)
        else:
            self.register_buffer("lam", eig)
        self.register_buffer("degrees", torch.as_tensor(F.degree_index(k, L)), persistent=False)
        self.sh = HarmonicMap(k, L)

    def forward(self, x: torch.Tensor, impl: str = "auto") -> torch.Tensor:
        """``impl``: the read-out's form (`ops.sphere_readout`)."""
        weight = self.M.weight * self.lam[self.degrees]  # lambda folded into the read-out
        return self.sh.readout(self.W_sphere(x), weight, self.M.bias, impl)  # normalises on the way

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        z = F.normalise(self.W_sphere(x))
        return self.M(self.lam[self.degrees] * F.phi(z, self.L))
