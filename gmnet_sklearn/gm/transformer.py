"""Chem-GMNet: SH-Embedding -> n x (DualSKA + SH-FFN) -> LayerNorm -> masked mean pool -> head."""

from __future__ import annotations

import torch
from torch import nn

from . import functional as F
from .dropout import Dropout
from .embedding import SHEmbedding
from .encoder_layer import GMEncoderLayer
from .ops.impl import Impl, impl_for
from .packing import TokenPacking


class GMNetEncoder(nn.Module):
    """Token ids -> contextual states (B, T, d), final LayerNorm applied."""

    def __init__(self, vocab_size: int, k: int = 8, L: int = 3, d_model: int = 384, n_layers: int = 3,
                 n_heads: int = 12, dropout: float = 0.144, attention: str = "dual_ska", activation="gelu",
                 adaptive: bool = False, conj_shift: float = 1.0, pad_id: int = 0):
        super().__init__()
        F._check_kL(k, L)
        self.pad_id = pad_id
        self.embedding = SHEmbedding(vocab_size, d_model, k, L, dropout=dropout, pad_id=pad_id)
        self.layers = nn.ModuleList(
            GMEncoderLayer(d_model, n_heads, k, L, attention=attention, dropout=dropout, activation=activation,
                           adaptive=adaptive, conj_shift=conj_shift)
            for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)

    def _inputs(self, input_ids, conj_flags, attention_mask):
        if attention_mask is None:
            attention_mask = input_ids != self.pad_id
        attention_mask = attention_mask.bool()
        if conj_flags is None:
            conj_flags = torch.zeros_like(input_ids)
        return conj_flags * attention_mask, attention_mask

    def forward(self, input_ids, conj_flags=None, attention_mask=None, impl: Impl = "auto") -> torch.Tensor:
        conj, mask = self._inputs(input_ids, conj_flags, attention_mask)
        x = self.embedding(input_ids, impl)
        for layer in self.layers:
            x = layer(x, conj, mask, impl)
        return self.ln_f(x)

    def pool(self, input_ids, conj_flags=None, attention_mask=None, impl: Impl = "auto",
             pack: bool | None = None) -> torch.Tensor:
        """Masked mean of the final states: one d-vector per molecule (zeros for all-padding rows).

        ``pack``: run on the real tokens only (`forward_packed`). None (default) packs on CPU when
        the batch has padding and ``impl`` is not "reference" (which stays the paper's padded
        form); on CUDA it does not, as finding the tokens would sync the device.
        """
        _, mask = self._inputs(input_ids, conj_flags, attention_mask)
        if pack is None:
            pack = mask.device.type == "cpu" and impl_for(impl, "dual_ska") != "reference" and not bool(mask.all())
        if pack and bool(mask.any()):  # (a batch of empty rows has nothing to pack)
            h, packing = self.forward_packed(input_ids, conj_flags, mask, impl)
            return packing.mean_pool(h)
        h = self(input_ids, conj_flags, mask, impl)
        w = mask.to(h.dtype).unsqueeze(-1)
        return (h * w).sum(1) / w.sum(1).clamp_min(1.0)

    def forward_packed(self, input_ids, conj_flags=None, attention_mask=None, impl: Impl = "auto"):
        """The real tokens' states only: (h (N, d), packing). Same values as `forward` at those
        positions, without the position-wise work on padding (gm/packing.py)."""
        conj, mask = self._inputs(input_ids, conj_flags, attention_mask)
        packing = TokenPacking.from_mask(mask)
        x = self.embedding(packing.pack(input_ids), impl)
        for layer in self.layers:
            x = layer(x, conj, mask, impl, packing)
        return self.ln_f(x), packing


class GMNet(nn.Module):
    """The Chem-GMNet property model.

    ``forward(input_ids, conj_flags, attention_mask)`` takes token ids (B, T), RDKit conjugation
    flags (B, T) in {0, 1} and a padding mask (B, T; True for real tokens) and returns one row of
    outputs per molecule, (B, n_outputs). ``impl`` picks the attention's implementation (all
    compute the same function; "auto": the fastest for the device), or with a mapping
    {op: name} each op's (`ops.impl`: "dual_ska", "sphere_readout", "dropout"), and ``pack``
    whether the position-wise work skips padding (`pool`).
    """

    def __init__(self, vocab_size: int, n_outputs: int, k: int = 8, L: int = 3, d_model: int = 384,
                 n_layers: int = 3, n_heads: int = 12, dropout: float = 0.144, attention: str = "dual_ska",
                 activation="gelu", adaptive: bool = False, conj_shift: float = 1.0, pad_id: int = 0):
        super().__init__()
        self.config = dict(vocab_size=vocab_size, n_outputs=n_outputs, k=k, L=L, d_model=d_model,
                           n_layers=n_layers, n_heads=n_heads, dropout=dropout, attention=attention,
                           activation=activation if isinstance(activation, str) else None, adaptive=adaptive,
                           conj_shift=conj_shift, pad_id=pad_id)
        self.encoder = GMNetEncoder(vocab_size, k, L, d_model, n_layers, n_heads, dropout, attention, activation,
                                    adaptive, conj_shift, pad_id)
        self.head_dropout = Dropout(dropout)
        self.dense = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, n_outputs)

    def pool(self, input_ids, conj_flags=None, attention_mask=None, impl: Impl = "auto",
             pack: bool | None = None) -> torch.Tensor:
        """Masked mean of the final states: one d-vector per molecule (`GMNetEncoder.pool`)."""
        return self.encoder.pool(input_ids, conj_flags, attention_mask, impl, pack)

    def forward(self, input_ids, conj_flags=None, attention_mask=None, impl: Impl = "auto",
                pack: bool | None = None) -> torch.Tensor:
        return self.readout(self.pool(input_ids, conj_flags, attention_mask, impl, pack), impl)

    def readout(self, z: torch.Tensor, impl: Impl = "auto") -> torch.Tensor:
        """The head on pooled states (B, d): dropout, dense, tanh, dropout, out_proj."""
        dropout_impl = impl_for(impl, "dropout")
        z = torch.tanh(self.dense(self.head_dropout(z, dropout_impl)))
        return self.out_proj(self.head_dropout(z, dropout_impl))

    @torch.no_grad()
    def multipole_moments(self, input_ids, conj_flags=None, attention_mask=None) -> dict[str, torch.Tensor]:
        """Each layer's and head's terminal Gated-SFA moment matrices (Theorem 1 of the paper).

        Returns a dict of tensors of shape (B, n_layers, n_heads, D*, k): ``forward`` (M->_T),
        ``backward`` (M<-_1) and ``mean`` = (forward + backward) / 2, the molecule's windowed
        degree-<=L multipole moments sum_t Gamma_t (.) Phi(k^_t) p_t^T in each value channel.
        Computed with the recurrent reference scan in eval mode (no dropout).
        """
        was_training = self.training
        self.eval()
        try:
            conj, mask = self.encoder._inputs(input_ids, conj_flags, attention_mask)
            x = self.encoder.embedding(input_ids)
            out: dict[str, list] = {"forward": [], "backward": [], "mean": []}
            for layer in self.encoder.layers:
                moments = layer.attn.terminal_moments(layer.ln_attn(x), conj, mask)
                for key in out:
                    out[key].append(moments[key])
                x = layer(x, conj, mask)
            return {key: torch.stack(v, dim=1) for key, v in out.items()}
        finally:
            self.train(was_training)

    def n_parameters(self, trainable_only: bool = True) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)
