"""One pre-norm Chem-GMNet block: x + drop(Attn(LN(x))), then x + drop(SH-FFN(LN(x)))."""

from __future__ import annotations

import torch
from torch import nn

from .attention import make_attention
from .harmonic_linear import SHFFN


class GMEncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, k: int, L: int, attention: str = "dual_ska", dropout: float = 0.144,
                 activation="gelu", adaptive: bool = False, conj_shift: float = 1.0):
        super().__init__()
        self.ln_attn = nn.LayerNorm(d_model)
        self.attn = make_attention(attention, d_model=d_model, n_heads=n_heads, k=k, L=L, conj_shift=conj_shift)
        self.ln_ffn = nn.LayerNorm(d_model)
        self.ffn = SHFFN(d_model, k, L, activation=activation, adaptive=adaptive)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, conj: torch.Tensor, mask: torch.Tensor, impl: str = "auto") -> torch.Tensor:
        x = x + self.dropout(self.attn(self.ln_attn(x), conj, mask, impl))
        return x + self.dropout(self.ffn(self.ln_ffn(x)))
