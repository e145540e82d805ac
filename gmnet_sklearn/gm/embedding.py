"""SH-Embedding: token directions on S^{k-1} lifted by Phi, plus a residual token table.

e_t = W_up Phi(P[t] / |P[t]|) + res_proj(tok_res[t]), then dropout. No position embedding: order
reaches the model through the Gated-SFA decay.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as torch_F

from . import functional as F
from .dropout import Dropout
from .harmonic_map import HarmonicMap
from .ops.impl import Impl, impl_for


class SHEmbedding(nn.Module):
    """216,732 parameters at V=591, k=8, L=3, d=384 (r = min(D*, d) = 156)."""

    def __init__(self, vocab_size: int, d_model: int, k: int, L: int, dropout: float = 0.0, pad_id: int = 0):
        super().__init__()
        self.vocab_size, self.d_model, self.k, self.L = vocab_size, d_model, k, L
        self.dim = F.harmonic_dim(k, L)
        r = min(self.dim, d_model)
        self.P = nn.Parameter(torch.randn(vocab_size, k))
        self.tok_res = nn.Embedding(vocab_size, r, padding_idx=pad_id)
        nn.init.normal_(self.tok_res.weight, std=0.02)
        with torch.no_grad():
            self.tok_res.weight[pad_id].zero_()
        self.res_proj = nn.Linear(r, d_model, bias=False) if r < d_model else nn.Identity()
        self.W_up = nn.Linear(self.dim, d_model, bias=False)
        self.sh = HarmonicMap(k, L)
        self.dropout = Dropout(dropout)

    def rows(self, ids: torch.Tensor | None = None, impl: str = "auto") -> torch.Tensor:
        """The (n, d) embeddings of token ids (n,), or (V, d) of the whole vocabulary
        (``impl``: the read-out's form, `ops.sphere_readout`)."""
        if ids is None:
            ids = torch.arange(self.vocab_size, device=self.P.device)
        # tok_res through nn.Embedding, so its padding row gets no gradient (as in `reference`).
        sphere = self.sh.readout(torch_F.embedding(ids, self.P), self.W_up.weight, impl=impl)  # normalises P's rows
        return sphere + self.res_proj(self.tok_res(ids))

    def forward(self, input_ids: torch.Tensor, impl: Impl = "auto") -> torch.Tensor:
        """``impl``: a name (the read-out and dropout stay on "auto") or {op: name} (`ops.impl`)."""
        readout_impl, dropout_impl = impl_for(impl, "sphere_readout"), impl_for(impl, "dropout")
        # An embedding depends on the token id alone, so each is computed once per call, not per
        # position: for the batch's distinct ids on CPU (a few dozen in a batch of SMILES), for
        # the whole vocabulary on GPUs (where finding the distinct ids would sync the device).
        # The rows are looked up with F.embedding: the backward of plain indexing (index_put_ with
        # accumulation) adds repeated ids' gradients in a thread-dependent order on CPU, which made
        # seeded multi-threaded fits unrepeatable.
        if input_ids.device.type == "cpu":
            ids, inverse = torch.unique(input_ids, return_inverse=True)
            return self.dropout(torch_F.embedding(inverse, self.rows(ids, readout_impl)), dropout_impl)
        return self.dropout(torch_F.embedding(input_ids, self.rows(None, readout_impl)), dropout_impl)

    def reference(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Per-token form, exactly as written in the paper (tests compare it with `forward`)."""
        direction = F.normalise(self.P[input_ids])
        return self.dropout(self.W_up(F.phi(direction, self.L)) + self.res_proj(self.tok_res(input_ids)))
