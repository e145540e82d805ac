"""One pre-norm Chem-GMNet block: x + drop(Attn(LN(x))), then x + drop(SH-FFN(LN(x)))."""

from __future__ import annotations

import torch
from torch import nn

from .attention import make_attention
from .dropout import Dropout
from .harmonic_linear import SHFFN
from .ops.impl import Impl, impl_for
from .packing import TokenPacking


class GMEncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, k: int, L: int, attention: str = "dual_ska", dropout: float = 0.144,
                 activation="gelu", adaptive: bool = False, conj_shift: float = 1.0):
        super().__init__()
        self.ln_attn = nn.LayerNorm(d_model)
        self.attn = make_attention(attention, d_model=d_model, n_heads=n_heads, k=k, L=L, conj_shift=conj_shift)
        self.ln_ffn = nn.LayerNorm(d_model)
        self.ffn = SHFFN(d_model, k, L, activation=activation, adaptive=adaptive)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, conj: torch.Tensor, mask: torch.Tensor, impl: Impl = "auto",
                packing: TokenPacking | None = None) -> torch.Tensor:
        """x (B, T, d), or the real tokens alone (N, d) with ``packing`` (conj, mask stay (B, T)).
        ``impl``: a name for the attention, or {op: name} (`ops.impl`)."""
        dropout_impl = impl_for(impl, "dropout")
        x = x + self.dropout(self.attn(self.ln_attn(x), conj, mask, impl, packing), dropout_impl)
        return x + self.dropout(self.ffn(self.ln_ffn(x), impl_for(impl, "sphere_readout")), dropout_impl)
